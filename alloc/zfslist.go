package alloc

import (
	"fmt"
	"strconv"
	"strings"
)

// ZFSListArgv lists a zfspool storage's zvols and their snapshots with their
// sizes in bytes (-p), one tab-separated line each (-H).
func ZFSListArgv(dataset string) []string {
	return []string{"zfs", "list", "-Hp", "-r", "-t", "volume,snapshot", "-o", "name,volsize,referenced", dataset}
}

// ZFSListRow is one line of `zfs list -Hp -o name,volsize,referenced`.
type ZFSListRow struct {
	Name string // pool/data/vm-370-disk-0, or ...@snapname for a snapshot
	// VolsizeBytes is the zvol's size (the size at snapshot time on a
	// snapshot); 0 where zfs prints "-" (a filesystem dataset).
	VolsizeBytes int64
	// ReferencedBytes is the data the zvol (or snapshot) references.
	ReferencedBytes int64
}

// Snapshot splits a snapshot row's name into its zvol and snapshot name.
func (r ZFSListRow) Snapshot() (zvol, snap string, ok bool) { return strings.Cut(r.Name, "@") }

// ParseZFSList reads `zfs list -Hp -o name,volsize,referenced` (tabs).
func ParseZFSList(b []byte) ([]ZFSListRow, error) {
	var out []ZFSListRow
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 3 {
			return nil, fmt.Errorf("%w zfs list line %.100q: want 3 tab-separated fields", ErrParse, line)
		}
		r := ZFSListRow{Name: f[0]}
		if f[1] != "-" {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%w zfs list line %.100q: volsize is not bytes (-p)", ErrParse, line)
			}
			r.VolsizeBytes = n
		}
		n, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w zfs list line %.100q: referenced is not bytes (-p)", ErrParse, line)
		}
		r.ReferencedBytes = n
		out = append(out, r)
	}
	return out, nil
}
