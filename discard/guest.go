package discard

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// PCIDevices maps "bus:slot.function" (hex, as the guest agent reports a
// disk's controller) to the qdev id of the PCI device QEMU has there, from
// query-pci's return value (devices behind bridges included).
func PCIDevices(ret gjson.Result) map[string]string {
	out := map[string]string{}
	var walk func(devs gjson.Result)
	walk = func(devs gjson.Result) {
		for _, d := range devs.Array() {
			addr := fmt.Sprintf("%02x:%02x.%x", d.Get("bus").Int(), d.Get("slot").Int(), d.Get("function").Int())
			if id := d.Get("qdev_id").String(); id != "" {
				out[addr] = id
			}
			walk(d.Get("pci_bridge.devices"))
		}
	}
	for _, b := range ret.Array() {
		walk(b.Get("devices"))
	}
	return out
}

// lsiDisksPerController is how many disks an lsi or lsi53c810 controller
// (and no scsihw) holds: scsiI sits on scsihw(I/7) at scsi-id I%7
// (qemu-server's scsihw_infos, QemuServer/DriveDevice.pm). pvscsi,
// virtio-scsi-pci and megasas hold 256, more than the 31 SCSI disks a VM
// can have: every disk is on scsihw0.
const lsiDisksPerController = 7

// GuestDiskID names the Proxmox disk behind one disk of a guest filesystem:
// the PCI controller the guest reports, looked up in query-pci, plus the
// position on it, following qemu-server's device lines
// (print_drivedevice_full): virtio-blk is one PCI device per disk
// (virtioN); VirtIO SCSI single is one controller per disk (virtioscsiN ->
// scsiN); a shared virtio-scsi-pci or megasas controller (scsihw0) puts
// scsiI at scsi-id 0, lun I, which qemu-ga reports as the unit; pvscsi at
// scsi-id I, lsi at scsi-id I%7 of scsihw(I/7) (the target); AHCI (ahciN)
// holds sata N*6+port, and qemu-ga reports the port as the unit. "" when
// it cannot tell.
func GuestDiskID(gd qmp.GuestDisk, pci map[string]string, scsihw string) string {
	addr := gd.PCI
	if i := strings.IndexByte(addr, ':'); i == 4 { // strip the domain
		addr = addr[i+1:]
	}
	ctrl, ok := pci[addr]
	if !ok {
		return ""
	}
	num := func(prefix string) (int, bool) {
		if !strings.HasPrefix(ctrl, prefix) {
			return 0, false
		}
		n, err := strconv.Atoi(strings.TrimPrefix(ctrl, prefix))
		return n, err == nil
	}
	if _, ok := num("virtio"); ok {
		return ctrl
	}
	if n, ok := num("virtioscsi"); ok {
		return "scsi" + strconv.Itoa(n)
	}
	if n, ok := num("scsihw"); ok {
		switch scsihw {
		case "virtio-scsi-pci", "megasas":
			return "scsi" + strconv.Itoa(gd.Unit) // lun= is the disk's index
		case "pvscsi":
			return "scsi" + strconv.Itoa(gd.Target) // scsi-id= is the disk's index
		default: // lsi, lsi53c810
			return "scsi" + strconv.Itoa(n*lsiDisksPerController+gd.Target)
		}
	}
	if n, ok := num("ahci"); ok {
		return "sata" + strconv.Itoa(n*6+gd.Unit)
	}
	return ""
}

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
			id := GuestDiskID(gd, pci, scsihw)
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
