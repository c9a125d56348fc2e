package cache

import (
	"strings"
	"time"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// AgentTimeout bounds the guest agent's answer for the guest names: cache
// is a quick look, and an agent that is not running in the guest must not
// cost it the whole --timeout.
const AgentTimeout = 500 * time.Millisecond

// guest names the disk as the guest sees it (issue 16): the stable
// /dev/disk/by-id name Proxmox's layout gives it, and, for a running VM
// with agent: 1 whose agent answered within AgentTimeout (layer
// disk.Agent), the guest's device and mount points. An agent that does
// not answer leaves them unknown (null), never guessed.
func guest(j *Disk, d *disk.Disk) {
	if n := d.Guest.Name.ByID; n != "" {
		j.GuestByID = &n
	}
	if g := d.Guest.Seen; g != nil {
		dev := g.Device
		j.GuestDevice = &dev
		j.GuestMounts = append(j.GuestMounts, g.Mounts...)
		j.GuestFilesystems = append([]guestdisk.Filesystem{}, g.Filesystems...)
	}
}

// GuestLine is the disk's guest name for the text output, "" when unknown.
func (d Disk) GuestLine() string {
	var parts []string
	if d.GuestDevice != nil {
		parts = append(parts, strings.TrimSpace(*d.GuestDevice+" "+strings.Join(d.GuestMounts, " ")))
	}
	for _, f := range d.GuestFilesystems {
		parts = append(parts, FilesystemText(f))
	}
	if d.GuestByID != nil {
		parts = append(parts, *d.GuestByID)
	}
	if len(parts) == 0 {
		return ""
	}
	return "in the guest: " + strings.Join(parts, ", ")
}

// FilesystemText is one guest filesystem in words: "/srv ext4 on sdb1,
// 1.2 GiB of 9.8 GiB used".
func FilesystemText(f guestdisk.Filesystem) string {
	use := "use not reported"
	if f.UsedBytes != nil && f.TotalBytes != nil {
		use = units.Bytes(*f.UsedBytes) + " of " + units.Bytes(*f.TotalBytes) + " used"
	}
	s := f.Mountpoint + " " + units.OrDash(f.Type) + " on " + units.OrDash(f.Device) + ", " + use
	if len(f.Disks) > 1 {
		s += " (spans " + strings.Join(f.Disks, "+") + ")"
	}
	return s
}
