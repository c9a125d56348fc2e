package top

import "testing"

func TestDiskGuest(t *testing.T) {
	dev, byID := "/dev/sdb", "/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_drive-scsi1"
	for _, c := range []struct {
		d    Disk
		want string
	}{
		{Disk{GuestDevice: &dev, GuestMounts: []string{"/", "/boot"}, GuestByID: &byID}, "/dev/sdb /,/boot"},
		{Disk{GuestDevice: &dev, GuestMounts: []string{}}, "/dev/sdb"},
		{Disk{GuestByID: &byID, GuestMounts: []string{"/"}}, "scsi-0QEMU_QEMU_HARDDISK_drive-scsi1"},
		{Disk{}, "-"},
	} {
		if got := c.d.Guest(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.d, got, c.want)
		}
	}
}

func TestSortKeyNames(t *testing.T) {
	if got := SortKeyNames(); got != "busy, iops, latency, queue, limit, cpu, vmid" {
		t.Errorf("%q", got)
	}
	if _, err := ParseSortKey("speed"); err == nil || err.Error() != `--sort "speed": not a sort key (one of busy, iops, latency, queue, limit, cpu, vmid)` {
		t.Errorf("%v", err)
	}
}
