package cache

import (
	"context"
	"strings"
	"time"

	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// AgentTimeout bounds the guest agent's answer for the guest names: cache
// is a quick look, and an agent that is not running in the guest must not
// cost it the whole --timeout.
const AgentTimeout = 500 * time.Millisecond

// GuestNames names each disk of the view as the guest sees it (issue 16):
// the stable /dev/disk/by-id name Proxmox's layout gives it, and, for a
// running VM with agent: 1 whose agent answers within AgentTimeout, the
// guest's device and mount points (guest-get-disks, guest-get-fsinfo,
// placed on disks through query-pci). An agent that does not answer leaves
// them unknown (null), never guessed.
func GuestNames(ctx context.Context, v *vm.VM, timeout time.Duration, view *View) {
	machine := v.Config.Main["machine"]
	if v.Cmdline != nil {
		machine = v.Cmdline.Machine
	}
	for i := range view.Disks {
		j := &view.Disks[i]
		j.GuestMounts = []string{}
		d := v.Disk(j.ID)
		if d == nil || d.Drive == nil {
			continue
		}
		s := d.Running
		if s == nil {
			s = d.Configured
		}
		if s == nil {
			continue
		}
		if n := guestdisk.ByID(d.Drive, s.Device, v.Blockdev, guestdisk.IsQ35(machine)); n.ByID != "" {
			id := n.ByID
			j.GuestByID = &id
		}
	}
	if !v.Running || !guestdisk.AgentEnabled(v.Config.Main["agent"]) {
		return
	}
	a, err := v.Ask(ctx, timeout, vm.Query{Need: vm.NeedPCI})
	if err != nil {
		return
	}
	pci := a.PCI
	actx, cancel := context.WithTimeout(ctx, 2*AgentTimeout)
	defer cancel()
	seen, err := guestdisk.Ask(actx, qmp.Agent{Path: v.QGASocket(), Timeout: AgentTimeout}, pci, qemuserver.SCSIHW(v.Config.Main))
	if err != nil {
		return
	}
	for i := range view.Disks {
		if g, ok := seen[view.Disks[i].ID]; ok {
			dev := g.Device
			view.Disks[i].GuestDevice = &dev
			view.Disks[i].GuestMounts = append(view.Disks[i].GuestMounts, g.Mounts...)
		}
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
