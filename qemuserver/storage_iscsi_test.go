package qemuserver

import (
	"strings"
	"testing"
)

// TestResolveVolumeISCSI: a kernel iSCSI LUN (storage type iscsi) is a block
// device under /dev/disk/by-id; ISCSIPlugin.pm names it <n>.<n>.<n>.<lun id>.
func TestResolveVolumeISCSI(t *testing.T) {
	st, err := ParseStorages(strings.NewReader("iscsi: san\n\tportal 10.0.0.4\n\ttarget iqn.2003-01.org.example:vm\n"), "storage.cfg")
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseDrive("scsi0", "san:0.0.1.scsi-36001405aabbccdd")
	if err != nil {
		t.Fatal(err)
	}
	v, err := ResolveVolume(st, d, nil)
	if err != nil || v.Path != "/dev/disk/by-id/scsi-36001405aabbccdd" || v.Driver != "host_device" || v.Format != "raw" {
		t.Errorf("%+v %v", v, err)
	}
	d, _ = ParseDrive("scsi0", "san:vm-100-disk-0")
	if _, err := ResolveVolume(st, d, nil); err == nil || !strings.Contains(err.Error(), "is not <n>.<n>.<n>.<lun>") {
		t.Errorf("a volname that is not a LUN: %v", err)
	}
}
