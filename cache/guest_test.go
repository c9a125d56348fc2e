package cache

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/guestdisk"
)

// The guest's filesystems on a disk (issue 34): null when the agent said
// nothing, [] when it answered with none on the disk, each one with its use
// otherwise; the text names each filesystem's use and the disks it spans.
func TestGuestFilesystems(t *testing.T) {
	used, total := int64(14336), int64(223465472)
	for _, tc := range []struct {
		name string
		seen *guestdisk.Seen
		json string
		line string
	}{
		{"not answered", nil, `"guest_device":null,"guest_mounts":[],"guest_filesystems":null`, ""},
		{"answered, nothing mounted", &guestdisk.Seen{Device: "/dev/sdb"}, `"guest_device":"/dev/sdb","guest_mounts":[],"guest_filesystems":[]`, "in the guest: /dev/sdb"},
		{"ext4 on the whole disk", &guestdisk.Seen{Device: "/dev/sda", Mounts: []string{"/mnt/s1"}, Filesystems: []guestdisk.Filesystem{
			{Mountpoint: "/mnt/s1", Type: "ext4", Device: "sda", Layout: guestdisk.OnDisk, UsedBytes: &used, TotalBytes: &total, Disks: []string{"scsi1"}}}},
			`"guest_filesystems":[{"mountpoint":"/mnt/s1","type":"ext4","device":"sda","layout":"disk","used_bytes":14336,"total_bytes":223465472,"disks":["scsi1"]}]`,
			"in the guest: /dev/sda /mnt/s1, /mnt/s1 ext4 on sda, 14.0 KiB of 213.1 MiB used"},
		{"LVM over two disks, old agent", &guestdisk.Seen{Device: "/dev/vda", Mounts: []string{"/srv"}, Filesystems: []guestdisk.Filesystem{
			{Mountpoint: "/srv", Type: "xfs", Device: "dm-0", Layout: guestdisk.OnVirtual, Disks: []string{"scsi1", "virtio1"}}}},
			`"used_bytes":null,"total_bytes":null`, "/srv xfs on dm-0, use not reported (spans scsi1+virtio1)"},
	} {
		j := Disk{GuestMounts: []string{}}
		guest(&j, &disk.Disk{Guest: disk.Guest{Seen: tc.seen}})
		b, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), tc.json) {
			t.Errorf("%s: JSON %s\nwant it to hold %s", tc.name, b, tc.json)
		}
		if line := j.GuestLine(); !strings.Contains(line, tc.line) || (tc.line == "") != (line == "") {
			t.Errorf("%s: line %q, want %q", tc.name, line, tc.line)
		}
	}
}
