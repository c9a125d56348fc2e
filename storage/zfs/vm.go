package zfs

import (
	"context"

	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/storage/storagetype"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// Dataset is the zvol a disk's volume is, from its storage's row
// (storagetype.VolZvol: <pool>/<volume name>), or "" for a disk on any
// other storage. The drive is the main section's, else the pending one's.
func Dataset(v *vm.VM, d *vm.Disk) string {
	drv := d.Drive
	if drv == nil {
		drv = d.PendingDrive
	}
	if drv == nil || drv.IsNone() {
		return ""
	}
	s := v.Storages[drv.StorageID()]
	if s == nil || s.Facts().Volumes != storagetype.VolZvol || s.Props["pool"] == "" || drv.VolName() == "" {
		return ""
	}
	if k := drv.Kind(); k != qemuserver.KindDisk && k != qemuserver.KindEFIVars {
		return ""
	}
	return s.Props["pool"] + "/" + drv.VolName()
}

// ForVM reads the zvols of disks of v in one `zfs get` and returns each
// zvol disk's properties by disk id (disks on other storages are not in
// the map; nothing is run when there are none).
func ForVM(ctx context.Context, r node.Runner, v *vm.VM, disks []*vm.Disk) map[string]*Zvol {
	var ids, datasets []string
	seen := map[string]bool{}
	for _, d := range disks {
		ds := Dataset(v, d)
		if ds == "" {
			continue
		}
		ids = append(ids, d.ID)
		if !seen[ds] {
			seen[ds] = true
			datasets = append(datasets, ds)
		}
	}
	out := map[string]*Zvol{}
	if len(datasets) == 0 {
		return out
	}
	byDS := map[string]*Zvol{}
	for _, z := range Read(ctx, r, datasets) {
		byDS[z.Dataset] = z
	}
	for _, id := range ids {
		out[id] = byDS[Dataset(v, v.Disk(id))]
	}
	return out
}
