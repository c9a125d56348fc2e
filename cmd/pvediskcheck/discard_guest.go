package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// pciDevices maps "bus:slot.function" (hex, as the guest agent reports a
// disk's controller) to the qdev id of the PCI device QEMU has there, from
// query-pci (bridges included).
func pciDevices(ret gjson.Result) map[string]string {
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

// guestDiskID names the Proxmox disk behind one disk of a guest filesystem:
// the PCI controller the guest reports, looked up in query-pci, plus the
// position on it, following qemu-server's controller layout:
// virtio-blk is one PCI device per disk (virtioN); VirtIO SCSI single is one
// controller per disk (virtioscsiN -> scsiN); a shared virtio-scsi-pci or
// megasas controller (scsihw0) puts scsiI at lun I; lsi/pvscsi
// (scsihwN) at scsi-id I%7; AHCI (ahciN) holds sata N*6+port, and the guest
// agent reports the port as the unit. "" when it cannot tell.
func guestDiskID(gd qmp.GuestDisk, pci map[string]string, scsihw string) string {
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
	if _, ok := num("virtio"); ok && !strings.HasPrefix(ctrl, "virtioscsi") {
		return ctrl
	}
	if n, ok := num("virtioscsi"); ok {
		return "scsi" + strconv.Itoa(n)
	}
	if n, ok := num("scsihw"); ok {
		switch scsihw {
		case "virtio-scsi-pci", "megasas":
			return "scsi" + strconv.Itoa(gd.Unit) // lun= is the disk's index
		default: // lsi, lsi53c810, pvscsi: scsi-id is the target
			return "scsi" + strconv.Itoa(n*7+gd.Target)
		}
	}
	if n, ok := num("ahci"); ok {
		return "sata" + strconv.Itoa(n*6+gd.Unit)
	}
	return ""
}

// guestTrim is what the guest trimmed, attributed to disks.
type guestTrim struct {
	// PerDisk is bytes trimmed on filesystems that sit on that disk alone.
	PerDisk map[string]int64
	// Paths is every filesystem guest-fstrim reported, for the record.
	Paths []guestTrimPath
	// Shared marks disks under a filesystem that spans several disks.
	Shared map[string]bool
	// Mapped is true when filesystems could be placed on disks at all.
	Mapped bool
}

type guestTrimPath struct {
	Path         string   `json:"path"`
	TrimmedBytes int64    `json:"trimmed_bytes"`
	Disks        []string `json:"disks"`           // Proxmox disk ids below it, when known
	Error        string   `json:"error,omitempty"` // the guest's error for this filesystem
}

// attributeTrim places guest-fstrim's per-filesystem figures on disks with
// guest-get-fsinfo and query-pci. A filesystem on several disks (LVM or RAID
// in the guest) is listed but not attributed: the split is unknown.
func attributeTrim(res []qmp.FstrimResult, fsinfo []qmp.GuestFilesystem, pci map[string]string, scsihw string) guestTrim {
	g := guestTrim{PerDisk: map[string]int64{}, Shared: map[string]bool{}, Mapped: len(fsinfo) > 0 && len(pci) > 0}
	disksOf := map[string][]string{}
	for _, fs := range fsinfo {
		var ids []string
		seen := map[string]bool{}
		for _, gd := range fs.Disks {
			id := guestDiskID(gd, pci, scsihw)
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
				g.Shared[id] = true
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
		p := guestTrimPath{Path: r.Path, TrimmedBytes: r.Trimmed, Disks: disksOf[r.Path], Error: r.Error}
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
