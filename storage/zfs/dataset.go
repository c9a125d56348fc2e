package zfs

import (
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/storage/storagetype"
)

// Dataset is the zvol a drive's volume is, from its storage's row
// (storagetype.VolZvol: <pool>/<volume name>), or "" for a drive on any
// other storage (s nil: a path, a storage storage.cfg lacks) and for a
// kind that is no block device of the guest's (a CD-ROM, the TPM state).
func Dataset(s *qemuserver.Storage, drv *qemuserver.Drive) string {
	if drv == nil || drv.IsNone() {
		return ""
	}
	if s == nil || s.Facts().Volumes != storagetype.VolZvol || s.Props["pool"] == "" || drv.VolName() == "" {
		return ""
	}
	if k := drv.Kind(); k != qemuserver.KindDisk && k != qemuserver.KindEFIVars {
		return ""
	}
	return s.Props["pool"] + "/" + drv.VolName()
}
