package qemuserver

import (
	"strings"
	"testing"
)

// TestResolveISCSI: an iscsi storage's LUN is the kernel's disk below
// /dev/disk/by-id (ISCSIPlugin.pm filesystem_path), not a config error.
func TestResolveISCSI(t *testing.T) {
	st, err := ParseStorages(strings.NewReader("iscsi: san\n\tportal 192.0.2.3\n\ttarget iqn.2025-01.test:san\n\tcontent images\n"), "storage.cfg")
	if err != nil {
		t.Fatal(err)
	}
	d, err := ParseDrive("scsi0", "san:0.0.1.scsi-36001405abcdef,size=32G")
	if err != nil {
		t.Fatal(err)
	}
	v, err := ResolveVolume(st, d, nil)
	if err != nil || v.Path != "/dev/disk/by-id/scsi-36001405abcdef" || v.Driver != "host_device" || v.Format != "raw" {
		t.Errorf("%+v %v", v, err)
	}
	d, _ = ParseDrive("scsi0", "san:vm-100-disk-0")
	if _, err := ResolveVolume(st, d, nil); err == nil || !strings.Contains(err.Error(), `iscsi volume "vm-100-disk-0" of scsi0 is not <n>.<n>.<n>.<lun>`) {
		t.Errorf("bad volume name: %v", err)
	}
}
