// Package pvesm asks the node's own storage layer, through Proxmox's pvesm
// CLI, what the tool cannot work out from storage.cfg: where a volume of a
// storage it does not model lives (`pvesm path`), and how full a storage is
// (`pvesm status`). Third-party storage plugins (LINSTOR's drbd,
// Blockbridge, TrueNAS, ...) answer both through pve-storage's plugin API.
package pvesm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// PathArgv is the command that resolves a volume id to the path QEMU opens
// (PVE::CLI::pvesm 'path': PVE::Storage::path, printed on one line).
func PathArgv(volid string) []string { return []string{"pvesm", "path", volid} }

// Path runs `pvesm path VOLID`. The volume id is passed as one argument,
// never through a shell.
func Path(ctx context.Context, r node.Runner, volid string) (string, error) {
	out, err := r.Run(ctx, PathArgv(volid)...)
	if err != nil {
		return "", err
	}
	return ParsePath(out)
}

// ErrParse means pvesm printed something that is not the answer asked for.
var ErrParse = errors.New("cannot parse pvesm output")

// ParsePath reads `pvesm path`: one line, the path.
func ParsePath(out []byte) (string, error) {
	s := strings.TrimRight(string(out), "\n")
	if s == "" || strings.ContainsAny(s, "\n\x00") {
		return "", fmt.Errorf("%w: pvesm path printed %d line(s), want one", ErrParse, strings.Count(s, "\n")+1)
	}
	return s, nil
}

// StatusArgv lists one storage's use, or every storage's when id is "".
// `--storage` keeps a hanging mount of another storage out of the answer.
func StatusArgv(id string) []string {
	if id == "" {
		return []string{"pvesm", "status"}
	}
	return []string{"pvesm", "status", "--storage", id}
}

// Status runs `pvesm status` (for one storage when id is not "").
func Status(ctx context.Context, r node.Runner, id string) ([]Storage, error) {
	out, err := r.Run(ctx, StatusArgv(id)...)
	if err != nil {
		return nil, err
	}
	return ParseStatus(out)
}

// Storage is one row of `pvesm status`.
type Storage struct {
	Name string
	Type string
	// Status is active, inactive or disabled.
	Status string
	// TotalBytes, UsedBytes and AvailableBytes: pvesm prints KiB (its
	// header says so since libpve-storage-perl 9.0.14; older versions print
	// the same numbers under "Total", "Used", "Available").
	TotalBytes     int64
	UsedBytes      int64
	AvailableBytes int64
	// UsedPercent is the % column (used*100/total, 2 decimals); nil for a
	// disabled storage ("N/A").
	UsedPercent *float64
}

// maxKiB is the largest KiB count whose bytes fit an int64 (2^53-1 KiB,
// 8 EiB less 1 KiB); 2^53 KiB would overflow to a negative size.
const maxKiB = math.MaxInt64 / 1024

// ParseStatus reads `pvesm status` (PVE::CLI::pvesm $print_status): a
// header line "Name Type Status Total[ (KiB)] Used[ (KiB)] Available[
// (KiB)] %", then one line per storage with seven blank-separated fields.
func ParseStatus(out []byte) ([]Storage, error) {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) == 0 || !isStatusHeader(lines[0]) {
		return nil, fmt.Errorf("%w: pvesm status: no header line (Name Type Status Total Used Available %%)", ErrParse)
	}
	var res []Storage
	for i, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 7 {
			return nil, fmt.Errorf("%w: pvesm status line %d has %d fields, want 7", ErrParse, i+2, len(f))
		}
		s := Storage{Name: f[0], Type: f[1], Status: f[2]}
		for j, dst := range []*int64{&s.TotalBytes, &s.UsedBytes, &s.AvailableBytes} {
			kib, err := strconv.ParseInt(f[3+j], 10, 64)
			if err != nil || kib < 0 || kib > maxKiB {
				return nil, fmt.Errorf("%w: pvesm status line %d: %s is not a KiB count", ErrParse, i+2, units.Clip(f[3+j], 40))
			}
			*dst = kib * 1024
		}
		if f[6] != "N/A" {
			pct, err := strconv.ParseFloat(strings.TrimSuffix(f[6], "%"), 64)
			if err != nil || !strings.HasSuffix(f[6], "%") || pct < 0 {
				return nil, fmt.Errorf("%w: pvesm status line %d: %s is not a percentage", ErrParse, i+2, units.Clip(f[6], 40))
			}
			s.UsedPercent = &pct
		}
		res = append(res, s)
	}
	return res, nil
}

func isStatusHeader(line string) bool {
	f := strings.Fields(strings.NewReplacer("(KiB)", "").Replace(line))
	want := []string{"Name", "Type", "Status", "Total", "Used", "Available", "%"}
	if len(f) != len(want) {
		return false
	}
	for i := range want {
		if f[i] != want[i] {
			return false
		}
	}
	return true
}
