package guestdisk

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// Seen is a disk as the guest agent reports it.
type Seen struct {
	Device string   `json:"device"` // the guest's device node, e.g. /dev/sdb
	Mounts []string `json:"mounts"` // mount points of filesystems on it, sorted
	// Filesystems are the mounted filesystems on it (guest-get-fsinfo),
	// by mount point.
	Filesystems []Filesystem `json:"filesystems"`
	// Partitions are the partitions guest-get-disks lists on it (/dev/sda1);
	// nil when guest-get-disks did not describe the disk (an agent before
	// 5.2, or one that did not answer it).
	Partitions []string `json:"partitions"`
}

// AgentEnabled reads a VM config's agent option ("1", "enabled=1,..."):
// whether the VM has a guest agent channel to ask.
func AgentEnabled(opt string) bool { return qemuserver.AgentEnabled(opt) }

// Ask asks the guest agent for its disks (guest-get-disks) and mounted
// filesystems (guest-get-fsinfo), one short exchange each, and places them
// on the VM's disks through pci (PCIDevices of query-pci) and the VM's
// scsihw. An agent too old for guest-get-disks still gives the mounted
// disks through guest-get-fsinfo.
func Ask(ctx context.Context, a qmp.Agent, pci map[string]string, scsihw string) (map[string]Seen, error) {
	disks, errDisks := a.Disks(ctx)
	fs, errFS := a.FsInfo(ctx)
	if errDisks != nil && errFS != nil {
		return nil, errFS
	}
	return Attribute(disks, fs, pci, scsihw), nil
}

// Attribute places the guest's disks and filesystems on the VM's disk ids.
// A filesystem on several disks (LVM or RAID in the guest) is listed on
// each of them.
func Attribute(disks []qmp.GuestBlockDevice, fs []qmp.GuestFilesystem, pci map[string]string, scsihw string) map[string]Seen {
	out := map[string]Seen{}
	parts := partitions(disks)
	for _, d := range disks {
		if d.Partition || d.Address == nil {
			continue
		}
		if id := DiskID(*d.Address, pci, scsihw); id != "" {
			s := out[id]
			s.Device = d.Name
			s.Partitions = append([]string{}, parts[d.Name]...)
			sort.Strings(s.Partitions)
			out[id] = s
		}
	}
	for _, f := range fs {
		seen := map[string]bool{}
		for _, gd := range f.Disks {
			id := DiskID(gd, pci, scsihw)
			if id == "" || seen[id] {
				continue
			}
			seen[id] = true
			s := out[id]
			if s.Device == "" {
				s.Device = gd.Dev
			}
			s.Mounts = append(s.Mounts, f.Mountpoint)
			sort.Strings(s.Mounts)
			out[id] = s
		}
	}
	for id, list := range filesystems(fs, pci, scsihw) {
		s := out[id]
		// guest-get-disks, where it answered, says which devices are the
		// disk's partitions.
		for i, f := range list {
			if slices.Contains(s.Partitions, "/dev/"+f.Device) {
				list[i].Layout = OnPartition
			}
		}
		s.Filesystems = list
		out[id] = s
	}
	return out
}

// PCIDevices maps "bus:slot.function" (hex, as the guest agent reports a
// disk's controller) to the qdev id of the PCI device QEMU has there, from
// query-pci (bridges included). The bus numbers are the ones the guest's
// firmware gave the bridges, which query-pci reports too.
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

// DiskID names the Proxmox disk behind one guest disk address: the PCI
// controller the guest reports, looked up in PCIDevices, plus the position
// on it, following qemu-server's controller layout (DriveDevice.pm):
// virtio-blk is one PCI device per disk (virtioN); VirtIO SCSI single is one
// controller per disk (virtioscsiN -> scsiN); a shared virtio-scsi-pci or
// megasas controller (scsihwN) puts scsiI at lun I; lsi/pvscsi (scsihwN) at
// scsi-id I%7; AHCI (ahciN) holds sata N*6+port, and the agent reports the
// port as the unit. "" when it cannot tell.
func DiskID(gd qmp.GuestDisk, pci map[string]string, scsihw string) string {
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

// lsiDisksPerController is how many disks an lsi or lsi53c810 controller
// (and no scsihw) holds: scsiI sits on scsihw(I/7) at scsi-id I%7
// (qemu-server's scsihw_infos, QemuServer/DriveDevice.pm). pvscsi,
// virtio-scsi-pci and megasas hold 256, more than the 31 SCSI disks a VM
// can have: every disk is on scsihw0.
const lsiDisksPerController = 7
