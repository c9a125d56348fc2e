// Package zfs reads what ZFS itself says about a VM's zvols, instead of
// describing what a zfspool storage usually does: one `zfs get -Hp` of
// volblocksize, sync, compression, primarycache, logbias, refreservation
// and volsize for all of a VM's zvols, through the node's runner within its
// timeout; and the rules those properties decide (sync=disabled completes
// flushes without writing, sync=always commits every write to the intent
// log), pve-storage's rule for a zfspool `blocksize`, and the ARC's hit
// ratio from /proc/spl/kstat/zfs/arcstats.
//
// Where zfs cannot be run or fails, every property is unknown, with the
// reason; nothing is guessed.
//
// Sources: OpenZFS zfs_main.c (`zfs get`: -H tab-separated without header,
// -p exact numbers, -o the fields), zvol_os.c / zil.c (a flush is
// zil_commit(), which does nothing with sync=disabled; sync=always commits
// each write), zfsprops(7); pve-storage 9.1.4 ZFSPoolPlugin.pm
// verify_zfs_blocksize (fix #3936).
package zfs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// Properties are the properties read for each zvol, in the order asked.
var Properties = []string{"volblocksize", "sync", "compression", "primarycache", "logbias", "refreservation", "volsize"}

// Sync values (zfsprops(7) sync).
const (
	SyncStandard = "standard"
	SyncAlways   = "always"
	SyncDisabled = "disabled"
)

// Zvol is one zvol's properties as `zfs get -Hp` prints them: sizes in
// bytes, the rest as ZFS names them. Unknown says why nothing is known
// (zfs failed, or did not list the zvol); then every other field but
// Dataset is empty.
type Zvol struct {
	Dataset           string `json:"dataset"`
	VolblocksizeBytes *int64 `json:"volblocksize_bytes"`
	Sync              string `json:"sync"`
	Compression       string `json:"compression"`
	PrimaryCache      string `json:"primarycache"`
	Logbias           string `json:"logbias"`
	// RefreservationBytes is 0 for none (a sparse zvol).
	RefreservationBytes *int64 `json:"refreservation_bytes"`
	VolsizeBytes        *int64 `json:"volsize_bytes"`
	Unknown             string `json:"unknown,omitempty"`
}

// ErrParse means zfs printed something this package cannot read.
var ErrParse = errors.New("cannot parse zfs get output")

// Argv is the one call for the datasets: name, property and value of each
// (-o name,property,value; no source), tab-separated (-H), sizes in bytes
// (-p).
func Argv(datasets []string) []string {
	return append([]string{"zfs", "get", "-Hp", "-o", "name,property,value", strings.Join(Properties, ",")}, datasets...)
}

// Parse reads `zfs get -Hp -o name,property,value` lines into one Zvol per
// dataset listed; a dataset zfs did not list is missing from the map.
// Sizes must be bytes (-p); refreservation "none" is 0.
func Parse(b []byte) (map[string]*Zvol, error) {
	out := map[string]*Zvol{}
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			return nil, fmt.Errorf("%w: line %s: want name, property and value separated by tabs", ErrParse, units.Clip(line, 80))
		}
		name, prop, val := f[0], f[1], f[2]
		z := out[name]
		if z == nil {
			z = &Zvol{Dataset: name}
			out[name] = z
		}
		switch prop {
		case "volblocksize", "volsize", "refreservation":
			n, err := bytesOf(val)
			if err != nil {
				return nil, fmt.Errorf("%w: %s %s is %s, want bytes (-p)", ErrParse, units.Clip(name, 60), prop, units.Clip(val, 40))
			}
			switch prop {
			case "volblocksize":
				z.VolblocksizeBytes = n
			case "volsize":
				z.VolsizeBytes = n
			default:
				z.RefreservationBytes = n
			}
		case "sync":
			z.Sync = val
		case "compression":
			z.Compression = val
		case "primarycache":
			z.PrimaryCache = val
		case "logbias":
			z.Logbias = val
		}
	}
	return out, nil
}

// bytesOf reads a -p size; "none" (refreservation) is 0, "-" (a property a
// filesystem does not have) is nil.
func bytesOf(v string) (*int64, error) {
	switch v {
	case "-":
		return nil, nil
	case "none":
		var zero int64
		return &zero, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return nil, fmt.Errorf("not bytes: %q", v)
	}
	return &n, nil
}

// Read runs the one `zfs get` for datasets and returns a Zvol for each,
// in order: one zfs did not list, or every one when zfs cannot be run, fails
// or prints what Parse cannot read, carries Unknown with the reason.
func Read(ctx context.Context, r node.Runner, datasets []string) []*Zvol {
	out := make([]*Zvol, len(datasets))
	for i, ds := range datasets {
		out[i] = &Zvol{Dataset: ds}
	}
	if len(datasets) == 0 {
		return out
	}
	argv := Argv(datasets)
	b, err := r.Run(ctx, argv...)
	var got map[string]*Zvol
	if err == nil {
		got, err = Parse(b)
	}
	for i, ds := range datasets {
		switch z := got[ds]; {
		case err != nil:
			out[i].Unknown = fmt.Sprintf("`%s` failed: %v", strings.Join(argv, " "), err)
		case z == nil:
			out[i].Unknown = "`zfs get` printed nothing for " + ds
		default:
			out[i] = z
		}
	}
	return out
}

// FlushesDropped: sync=disabled makes ZFS complete a flush (zil_commit)
// without writing anything, so what the guest flushed stays in the open
// transaction group in node RAM until it syncs (zfs_txg_timeout, 5 s by
// default): a host crash loses it, as with cache=unsafe.
func (z *Zvol) FlushesDropped() bool { return z != nil && z.Unknown == "" && z.Sync == SyncDisabled }

// CachesData: the zvol's primarycache is all (ZFS's default), so the ARC
// holds its data and its reads can come from the node's RAM whatever
// QEMU's cache mode. False when primarycache is metadata or none, or not
// known.
func (z *Zvol) CachesData() bool {
	return z != nil && z.Unknown == "" && z.PrimaryCache == "all"
}

// CommitsEveryWrite: sync=always makes every write a ZIL commit before it
// completes: nothing acknowledged is lost, and every write pays a log write.
func (z *Zvol) CommitsEveryWrite() bool { return z != nil && z.Unknown == "" && z.Sync == SyncAlways }

// The sentences for the sync rules (cache, flush and check say the same).
const (
	SyncDisabledLoss = "ZFS completes the guest's flushes without writing anything (sync=disabled), so a host crash loses even data the guest flushed, up to the last transaction group (zfs_txg_timeout, 5 s by default): the same loss as cache=unsafe"
	SyncAlwaysCost   = "ZFS commits every write to its intent log (ZIL) before completing it (sync=always): nothing acknowledged is lost, but each write waits for a log write (a SLOG device, or the pool's disks), which costs latency and throughput"
)

// SyncFix is the command that gives flushes back to the guest.
func SyncFix(dataset string) string { return "zfs set sync=standard " + dataset }

// Summary is the one line the cache view prints for the zvol.
func (z *Zvol) Summary() string {
	if z.Unknown != "" {
		return "zvol " + z.Dataset + ": properties unknown: " + z.Unknown
	}
	size := func(p *int64) string {
		if p == nil {
			return "-"
		}
		if *p == 0 {
			return "none"
		}
		return units.BytesCompact(*p)
	}
	return fmt.Sprintf("zvol %s: volblocksize %s, sync %s, compression %s, primarycache %s, logbias %s, refreservation %s, volsize %s",
		z.Dataset, size(z.VolblocksizeBytes), units.OrDash(z.Sync), units.OrDash(z.Compression), units.OrDash(z.PrimaryCache),
		units.OrDash(z.Logbias), size(z.RefreservationBytes), size(z.VolsizeBytes))
}

// Blocksize limits of pve-storage's verify_zfs_blocksize.
const (
	MinBlocksize = 512
	MaxBlocksize = 16 << 20
)

// CheckBlocksize applies pve-storage 9.1.4's rule for a zfspool's
// `blocksize` (ZFSPoolPlugin.pm verify_zfs_blocksize, fix #3936): a
// positive number without leading zeros, an optional k or m suffix (any
// case), a power of two between 512 bytes and 16 MiB. Before 9.1.4 any
// value was accepted in storage.cfg and only failed when a volume was
// allocated (zfs create -b). nil when it is accepted ("" is: no blocksize).
func CheckBlocksize(v string) error {
	if v == "" {
		return nil
	}
	num, mult := v, int64(1)
	switch v[len(v)-1] {
	case 'k', 'K':
		num, mult = v[:len(v)-1], 1024
	case 'm', 'M':
		num, mult = v[:len(v)-1], 1024*1024
	}
	digits := num != "" && num[0] >= '1' && num[0] <= '9'
	for _, c := range num {
		digits = digits && c >= '0' && c <= '9'
	}
	if !digits {
		return fmt.Errorf("blocksize %s: pve-storage refuses it: not a positive number (no leading zeros) with an optional k or m suffix", units.Clip(v, 40))
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > MaxBlocksize || n*mult < MinBlocksize || n*mult > MaxBlocksize || n*mult&(n*mult-1) != 0 {
		return fmt.Errorf("blocksize %s: pve-storage refuses it: not a power of 2 between 512 B and 16 MiB (e.g. 4k, 8k, 16k, 64k, 1m)", units.Clip(v, 40))
	}
	return nil
}
