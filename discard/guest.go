package discard

import (
	"strings"

	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// GuestTrim is what the guest trimmed, attributed to disks.
type GuestTrim struct {
	// PerDisk is bytes trimmed on filesystems that sit on that disk alone
	// (0 for a disk with a mounted filesystem that trimmed nothing).
	PerDisk map[string]int64
	// Paths is every filesystem guest-fstrim reported, for the record.
	Paths []GuestPath
	// Shared names, per disk, the filesystems that span it and others.
	Shared map[string][]string
	// Mapped is true when filesystems could be placed on disks at all.
	Mapped bool
}

// Attribute places guest-fstrim's per-filesystem figures on disks with
// guest-get-fsinfo and query-pci. A filesystem on several disks (LVM or
// RAID in the guest) is listed but not attributed: the split is unknown.
func Attribute(res []qmp.FstrimResult, fsinfo []qmp.GuestFilesystem, pci map[string]string, scsihw string) GuestTrim {
	g := GuestTrim{PerDisk: map[string]int64{}, Shared: map[string][]string{}, Mapped: len(fsinfo) > 0 && len(pci) > 0}
	disksOf := map[string][]string{}
	for _, fs := range fsinfo {
		var ids []string
		seen := map[string]bool{}
		for _, gd := range fs.Disks {
			id := guestdisk.DiskID(gd, pci, scsihw)
			if id == "" {
				id = "?" + gd.Dev
			}
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		disksOf[fs.Mountpoint] = ids
		if len(ids) > 1 {
			for _, id := range ids {
				g.Shared[id] = append(g.Shared[id], fs.Mountpoint)
			}
		}
		// Every disk that carries a mounted filesystem is known, even when
		// guest-fstrim skipped it, so "trimmed 0" differs from "not mounted".
		if len(ids) == 1 && !strings.HasPrefix(ids[0], "?") {
			if _, ok := g.PerDisk[ids[0]]; !ok {
				g.PerDisk[ids[0]] = 0
			}
		}
	}
	for _, r := range res {
		p := GuestPath{Path: r.Path, TrimmedBytes: r.Trimmed, Disks: disksOf[r.Path], Error: r.Error}
		if p.Disks == nil {
			p.Disks = []string{}
		}
		g.Paths = append(g.Paths, p)
		if len(p.Disks) == 1 && !strings.HasPrefix(p.Disks[0], "?") && r.Error == "" {
			g.PerDisk[p.Disks[0]] += r.Trimmed
		}
	}
	return g
}
