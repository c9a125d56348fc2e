package cache

import (
	"strings"
	"time"

	"github.com/pvediskcheck/pvediskcheck/disk"
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
	}
}

// GuestLine is the disk's guest name for the text output, "" when unknown.
func (d Disk) GuestLine() string {
	var parts []string
	if d.GuestDevice != nil {
		parts = append(parts, strings.TrimSpace(*d.GuestDevice+" "+strings.Join(d.GuestMounts, " ")))
	}
	if d.GuestByID != nil {
		parts = append(parts, *d.GuestByID)
	}
	if len(parts) == 0 {
		return ""
	}
	return "in the guest: " + strings.Join(parts, ", ")
}
