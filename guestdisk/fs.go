package guestdisk

import (
	"path"
	"regexp"
	"sort"

	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// Layout is where a guest filesystem sits on one of the VM's disks, as the
// device guest-get-fsinfo names (its "name") reads against the disk's
// ("dev" of each disk entry).
type Layout string

// Layouts.
const (
	// OnDisk: the filesystem is on the whole disk (name sda, dev /dev/sda):
	// its blocks are the disk's.
	OnDisk Layout = "disk"
	// OnPartition: on a partition of the disk (sda1, vda2, nvme0n1p1): the
	// partition table, and partitions the agent does not describe (swap,
	// unmounted ones), hold blocks too.
	OnPartition Layout = "partition"
	// OnVirtual: on a device-mapper or md device over the disk (dm-0, md0:
	// LVM, RAID or encryption inside the guest): what else the device
	// holds on the disk (other LVs, free extents, parity) is not described.
	OnVirtual Layout = "virtual"
)

// Filesystem is one mounted guest filesystem on a disk (guest-get-fsinfo).
type Filesystem struct {
	Mountpoint string `json:"mountpoint"`
	Type       string `json:"type"`
	// Device is the guest's kernel name of the device the filesystem is
	// on (sda, sda1, dm-0).
	Device string `json:"device"`
	// Layout is where Device sits on this disk.
	Layout Layout `json:"layout"`
	// UsedBytes and TotalBytes are the filesystem's own figures (statvfs
	// in the guest: blocks minus free blocks, and blocks, times the
	// fragment size); nil from an agent that does not report them
	// (qemu-ga before 3.0) or a filesystem that has none.
	UsedBytes  *int64 `json:"used_bytes"`
	TotalBytes *int64 `json:"total_bytes"`
	// Disks are the VM's disks under it, this one included; more than
	// one for a filesystem over several (LVM or RAID in the guest).
	Disks []string `json:"disks"`
}

// layoutOf reads the device a filesystem is on (guest-get-fsinfo's name:
// a kernel name, sda1 or dm-0) against the disk's node. qemu-ga 7.2 names
// the partition itself as a partition filesystem's disk node (dev
// /dev/sdc1 for name sdc1, recorded: testdata/README.md), so the disk is
// the node with its partition number taken off.
func layoutOf(name, dev string) Layout {
	name = path.Base(name)
	if dev == "" {
		return OnVirtual
	}
	disk := diskOf(path.Base(dev))
	switch {
	case name == disk:
		return OnDisk
	case diskOf(name) == disk:
		return OnPartition
	}
	return OnVirtual
}

// partitionName: the kernel's names of partitions of the disks a VM's
// controllers give a Linux guest (sdb1, vda2, hdc1, xvda1; nvme0n1p1).
var partitionName = regexp.MustCompile(`^((?:sd|vd|hd|xvd)[a-z]+)[0-9]+$|^((?:nvme[0-9]+n[0-9]+|mmcblk[0-9]+|nbd[0-9]+|loop[0-9]+))p[0-9]+$`)

// diskOf is the disk a kernel device name is on: the name without its
// partition number when it names a partition, else the name.
func diskOf(name string) string {
	if m := partitionName.FindStringSubmatch(name); m != nil {
		return m[1] + m[2]
	}
	return name
}

// filesystems places each mounted filesystem on the disks it sits on:
// by disk id, the filesystem with its layout on that disk.
func filesystems(fs []qmp.GuestFilesystem, pci map[string]string, scsihw string) map[string][]Filesystem {
	out := map[string][]Filesystem{}
	for _, f := range fs {
		var ids []string
		layouts := map[string]Layout{}
		for _, gd := range f.Disks {
			id := DiskID(gd, pci, scsihw)
			if id == "" {
				continue
			}
			if _, ok := layouts[id]; !ok {
				ids = append(ids, id)
				layouts[id] = layoutOf(f.Name, gd.Dev)
			}
		}
		if len(ids) == 0 {
			continue
		}
		sorted := append([]string(nil), ids...)
		sort.Strings(sorted)
		for _, id := range ids {
			g := Filesystem{Mountpoint: f.Mountpoint, Type: f.Type, Device: f.Name, Layout: layouts[id], Disks: sorted}
			if f.UsedBytes >= 0 {
				u := f.UsedBytes
				g.UsedBytes = &u
			}
			if f.TotalBytes >= 0 {
				t := f.TotalBytes
				g.TotalBytes = &t
			}
			out[id] = append(out[id], g)
		}
	}
	for id := range out {
		sort.SliceStable(out[id], func(i, j int) bool { return out[id][i].Mountpoint < out[id][j].Mountpoint })
	}
	return out
}

// partitions are the partitions guest-get-disks lists on each disk's
// device (by the device's name, /dev/sda).
func partitions(disks []qmp.GuestBlockDevice) map[string][]string {
	out := map[string][]string{}
	for _, d := range disks {
		if !d.Partition {
			continue
		}
		for _, dep := range d.Dependencies {
			out[dep] = append(out[dep], d.Name)
		}
	}
	return out
}
