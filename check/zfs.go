package check

import (
	"fmt"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/storage/storagetype"
	"github.com/pvediskcheck/pvediskcheck/storage/zfs"
)

// zfsBlocksize: a zfspool storage's blocksize that pve-storage 9.1.4
// refuses (warning), once per storage of the VM's zvols.
func zfsBlocksize(in *Input, out *VMResult) {
	named := map[string]bool{}
	for _, d := range in.set.Disks {
		for _, s := range []*qemuserver.Storage{d.Storage, d.PendingStorage} {
			if s == nil || named[s.ID] || s.Facts().Volumes != storagetype.VolZvol {
				continue
			}
			named[s.ID] = true
			if err := zfs.CheckBlocksize(s.Props["blocksize"]); err != nil {
				out.add(Finding{Severity: Warning, Code: CodeZFSBlocksizeInvalid,
					Message: fmt.Sprintf("storage %s (%s): %v; pve-storage 9.1.4 validates it (fix #3936), before that it was accepted in storage.cfg and failed only when a disk was allocated on the storage (zfs create -b)", s.ID, s.Type, err),
					Fix:     "set a valid blocksize (e.g. pvesm set " + s.ID + " --blocksize 16k) or remove the line from " + "/etc/pve/storage.cfg"})
			}
		}
	}
}

// zfsSync judges what ZFS itself says of the VM's zvols (one `zfs get`
// for all of them, disk's ZFS layer, filled by measure): sync=disabled
// loses what the guest flushed (error), sync=always makes every write a
// ZIL commit (info). Where zfs cannot say, the sync rules are named in
// NotChecked with the reason in the notes.
func zfsSync(in *Input, out *VMResult) {
	unread := false
	for _, d := range in.set.Disks {
		z := d.ZFS
		switch {
		case z == nil:
		case z.Unknown != "":
			out.Notes = append(out.Notes, fmt.Sprintf("%s: %s and %s not checked: zvol %s: %s", d.ID, CodeZFSSyncDisabled, CodeZFSSyncAlways, z.Dataset, z.Unknown))
			unread = true
		case z.FlushesDropped():
			out.add(Finding{Severity: Error, Code: CodeZFSSyncDisabled, Disk: d.ID,
				Message: "zvol " + z.Dataset + ": " + zfs.SyncDisabledLoss, Fix: zfs.SyncFix(z.Dataset)})
		case z.CommitsEveryWrite():
			out.add(Finding{Severity: Info, Code: CodeZFSSyncAlways, Disk: d.ID,
				Message: "zvol " + z.Dataset + ": " + zfs.SyncAlwaysCost + "; deliberate for a database that needs it, else zfs set sync=standard " + z.Dataset + " (the guest's flushes still reach the log)"})
		}
	}
	if unread {
		out.NotChecked = append(out.NotChecked, CodeZFSSyncDisabled, CodeZFSSyncAlways)
	}
}
