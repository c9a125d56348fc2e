package pveoracle

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Storages is Proxmox's reading of storage.cfg files and what its storage
// plugins require of a section.
type Storages struct {
	// Required is, per storage type pve-storage registers, the options
	// without which it skips a section: each option the plugin declares
	// not optional that its check_config, as parse_config calls it, dies
	// for ("missing value for required option"); one it fills in itself
	// (nfs's, cifs's and cephfs's path: /mnt/pve/<id>) is not among them.
	Required map[string][]string `json:"required"`
	// Files are the answers for the texts asked, in order.
	Files []StorageFile `json:"files"`
}

// StorageFile is PVE::Storage::Plugin->parse_config's reading of one
// storage.cfg.
type StorageFile struct {
	// Kept are the storage IDs it returns, sorted: the sections it keeps,
	// and `local` where the file has no dir storage of that name (Proxmox
	// makes one).
	Kept []string `json:"kept"`
	// Warnings are what it warned of: the sections it skips and why, the
	// lines and values it ignores.
	Warnings []string `json:"warnings"`
}

// storagesScript asks pve-storage's own code, loaded as the drivers load
// it (PVEOracle::Cfg2Cmd::init): each file's parse_config, and each
// plugin's required options found by check_config itself (a section of
// every declared option but one, the schema's value checks skipped as
// parse_config skips them).
const storagesScript = `
use strict; use warnings;
use PVEOracle; require PVEOracle::Cfg2Cmd; PVEOracle::Cfg2Cmd::init();
use JSON;
my $pdata = PVE::Storage::Plugin->private();
my %req;
for my $type (sort keys %{$pdata->{options}}) {
    my $o = $pdata->{options}->{$type};
    my @decl = sort grep { !$o->{$_}->{optional} } keys %$o;
    my @r;
    for my $k (@decl) {
        my %c = map { $_ => ($_ eq 'path' ? '/x' : 'x') } grep { $_ ne $k } @decl;
        $c{type} = $type;
        eval { $pdata->{plugins}->{$type}->check_config('s1', \%c, 1, 1) };
        push @r, $k if $@ && $@ =~ /missing value for required option '\Q$k\E'/;
    }
    $req{$type} = \@r;
}
my @files;
for my $f (@ARGV) {
    open(my $fh, '<', $f) or die "$f: $!\n";
    my $raw = do { local $/; <$fh> };
    my ($cfg, $warn) = PVEOracle::Cfg2Cmd::parse_storage_cfg($raw);
    push @files, { kept => [sort grep { defined $cfg->{ids}->{$_} } keys %{$cfg->{ids}}], warnings => $warn // [] };
}
print JSON->new->canonical->encode({ required => \%req, files => \@files }), "\n";
`

// Storages asks pve-storage to read each text as /etc/pve/storage.cfg,
// and which options each of its types requires. One process: about 1 s.
func (o *Oracle) Storages(ctx context.Context, texts []string) (*Storages, error) {
	tmp, err := os.MkdirTemp("", "pveoracle-storages-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	args := []string{"-I" + filepath.Join(o.dir, "oracle"), "-e", storagesScript, "--"}
	for i, t := range texts {
		f := filepath.Join(tmp, fmt.Sprintf("s%04d.cfg", i))
		if err := os.WriteFile(f, []byte(t), 0o644); err != nil {
			return nil, err
		}
		args = append(args, f)
	}
	cmd := exec.CommandContext(ctx, "perl", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("pveoracle: storage.cfg: %w: %s", err, lastLine(stderr.String()))
	}
	var res Storages
	if err := json.Unmarshal(out, &res); err != nil {
		return nil, fmt.Errorf("pveoracle: storage.cfg: %w", err)
	}
	if len(res.Files) != len(texts) {
		return nil, fmt.Errorf("pveoracle: storage.cfg: %d answers for %d files", len(res.Files), len(texts))
	}
	return &res, nil
}
