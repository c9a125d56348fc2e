package discard

import (
	"fmt"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/storage"
	"github.com/pvediskcheck/pvediskcheck/storage/storagetype"
	"github.com/pvediskcheck/pvediskcheck/units"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// Target is one disk being looked at, with what is needed to measure it.
type Target struct {
	Disk    *vm.Disk
	Drive   *qemuserver.Drive
	Storage *qemuserver.Storage // nil for a disk given as a host path
	Volume  alloc.Volume
	// Node is the protocol block node (what reached the storage is
	// counted there), once QEMU has been asked (SetNodes).
	Node string
	// View is the disk's report without allocation, counters and result.
	View Disk
}

// Targets prepares the selected disks that can take discards: guest block
// devices with a volume. CD-ROMs, EFI vars (pflash, no discard key),
// tpmstate and empty drives have nothing to trim.
func Targets(v *vm.VM, sel []*vm.Disk) []*Target {
	var out []*Target
	for _, d := range disk.Of(v, sel).Disks {
		drv := d.Drive
		if drv == nil || d.Kind() != qemuserver.KindDisk || drv.IsNone() {
			continue
		}
		t := &Target{Disk: d.Disk, Drive: drv, Storage: d.Storage, Volume: d.Alloc}
		j := Disk{ID: d.ID, Volume: drv.Volume, Storage: drv.StorageID(), Warnings: []Reason{}}
		set := d.Configured
		if d.Running != nil {
			set = d.Running
		}
		if set != nil {
			j.Controller = set.Controller
			j.Thin = storage.ReturnsSpace(t.Storage, set.Format, d.Path)
		}
		if t.Storage != nil {
			j.StorageType = t.Storage.Type
		}
		j.Discard.Configured = proxmoxSetting(drv)
		if d.Running != nil {
			r := proxmoxDiscard(d.Running.Discard)
			j.Discard.Running = &r
			ssd := v.Cmdline.Devices[d.ID]["rotation_rate"] == "1"
			j.SSD.Running = &ssd
		}
		if d.PendingDrive != nil {
			if p := proxmoxSetting(d.PendingDrive); p != j.Discard.Configured {
				j.Discard.Pending = &p
			}
		}
		j.SSD.Configured = drv.Bool("ssd")
		j.ControllerDiscard = controllerDiscard(drv.Bus)
		t.View = j
		out = append(out, t)
	}
	return out
}

// SetNodes takes each target's protocol node from what QEMU reported
// (v.FetchLive).
func SetNodes(ts []*Target) {
	for _, t := range ts {
		if l := t.Disk.Live; l != nil && l.Inserted {
			t.Node = l.Protocol.Name
		}
	}
}

func controllerDiscard(bus string) string {
	switch bus {
	case "scsi", "sata", "ide":
		return "yes"
	case "virtio":
		return "guest kernel 5.0 or newer"
	}
	return "no"
}

// proxmoxSetting is a drive's discard option in Proxmox's words.
func proxmoxSetting(d *qemuserver.Drive) string {
	if d.Opts["discard"] == "on" {
		return "on"
	}
	return "ignore"
}

// proxmoxDiscard maps QEMU's discard option to Proxmox's words.
func proxmoxDiscard(qemu string) string {
	if qemu == "unmap" || qemu == "on" {
		return "on"
	}
	return "ignore"
}

// FixDrive is the `qm set` line that sets opts on the disk, every other
// option kept: a value Proxmox's parser accepts for the drive's kind (the
// caller only asks for keys the kind has).
func FixDrive(vmid int, d *qemuserver.Drive, opts map[string]string) string {
	fix := d.Clone()
	for k, v := range opts {
		fix.Opts[k] = v
	}
	return fmt.Sprintf("qm set %d --%s %s", vmid, d.Key, fix.String())
}

// reboot is the fix for a setting that applies at the next start.
func reboot(vmid int) string {
	return fmt.Sprintf("qm reboot %d (a full stop and start; a reboot inside the guest is not enough)", vmid)
}

// hasKey: the drive's format has option k (qemu-server's per-bus options).
func hasKey(bus, k string) bool {
	switch k {
	case "ssd":
		return bus == "scsi" || bus == "sata" || bus == "ide"
	case "discard":
		return bus == "scsi" || bus == "sata" || bus == "ide" || bus == "virtio"
	}
	return false
}

// zvolReserved reports a zvol of a zfspool without sparse: Proxmox creates
// it without -s (pve-storage ZFSPoolPlugin.pm zfs_create_zvol), so ZFS gives
// it a refreservation of its full size and the pool's free space does not
// grow when the zvol frees blocks (storage.ReturnsSpace is false there).
func zvolReserved(s *qemuserver.Storage) bool {
	return s != nil && s.Facts().Provision == storagetype.Reserved
}

// zvolDataset is the zvol's dataset name (pool/vm-100-disk-0).
func zvolDataset(s *qemuserver.Storage, volName string) string {
	return s.Props["pool"] + "/" + volName
}

// refreservationReason says why a non-sparse zvol's trims cannot give the
// pool free space, with the fixes Proxmox supports.
func refreservationReason(s *qemuserver.Storage, volName, evidence string) Reason {
	return Reason{CodeZvolRefreservation,
		fmt.Sprintf("storage %s is a zfspool without sparse: Proxmox created this zvol with a refreservation of its full size, so the pool's free space cannot grow whatever discard says%s", s.ID, evidence),
		fmt.Sprintf("zfs set refreservation=none %s (this zvol; zfs get refreservation shows it), and pvesm set %s --sparse 1 for the zvols created from now on",
			zvolDataset(s, volName), s.ID)}
}

// snapshotText names the snapshots holding a volume's blocks: their names
// (LVM-thin, rbd), or what they hold (zfs usedbysnapshots, where the names
// are not listed).
func snapshotText(names []string, held *int64) (string, bool) {
	if len(names) > 0 {
		return "snapshot(s) " + strings.Join(names, ", "), true
	}
	if held != nil && *held > 0 {
		return "snapshots holding " + units.Bytes(*held) + " (zfs usedbysnapshots)", true
	}
	return "", false
}

// Warnings are the standing problems of one disk, visible without a trim.
func Warnings(vmid int, running bool, t *Target, j Disk) []Reason {
	w := []Reason{}
	drv := t.Drive
	run := j.Discard.Effective()
	// A read-only disk takes no guest writes: it is never trimmed, so its
	// discard settings do nothing.
	writable := !drv.Bool("ro")
	if writable && hasKey(drv.Bus, "discard") && run == "ignore" && j.Thin {
		switch {
		case j.Discard.Configured == "on":
			w = append(w, Reason{CodeDiscardPending, "the config has discard=on but the running QEMU still drops discards: it applies at the next full stop and start", reboot(vmid)})
		case j.Discard.Pending != nil && *j.Discard.Pending == "on":
			// Already changed: the [PENDING] warning below says when it applies.
		default:
			f := FixDrive(vmid, drv, map[string]string{"discard": "on"})
			if running {
				f += ", then " + reboot(vmid)
			}
			w = append(w, Reason{CodeDiscardIgnore, fmt.Sprintf("discard=ignore on thin storage (%s): what the guest trims never returns to %s", j.StorageType, j.Storage), f})
		}
	}
	if writable && j.Discard.Pending != nil && *j.Discard.Pending == "on" {
		w = append(w, Reason{CodeDiscardPending, "discard=on waits in [PENDING] for the next start", reboot(vmid)})
	}
	if drv.Bus == "virtio" && run == "on" {
		w = append(w, Reason{CodeVirtioBlkDiscard, "VirtIO Block passes discards only to guest kernels 5.0 or newer, and QEMU does not count them at the device: judge by the storage counters", ""})
	}
	if zvolReserved(t.Storage) {
		w = append(w, refreservationReason(t.Storage, drv.VolName(), ""))
	}
	if p := j.Allocation.Pool; p != nil && p.Discards == "ignore" {
		w = append(w, Reason{CodePoolIgnoresDiscards, fmt.Sprintf("thin pool %s has discards=ignore: nothing a guest trims is freed", p.Name),
			fmt.Sprintf("with every volume of the pool inactive: lvchange --discards passdown %s", p.Name)})
	}
	if who, ok := snapshotText(j.Allocation.Snapshots, j.Allocation.SnapshotBytes); ok {
		w = append(w, Reason{CodeSnapshots, who + " reference this volume's blocks: a trim cannot return to the pool what they hold", ""})
	}
	if writable && hasKey(drv.Bus, "ssd") && run == "on" && !j.SSD.Configured {
		w = append(w, Reason{CodeSSDOff, "ssd=0: the guest sees a rotational disk; some guests (Windows among them) only trim disks they take for SSDs",
			FixDrive(vmid, drv, map[string]string{"discard": "on", "ssd": "1"})})
	}
	return w
}
