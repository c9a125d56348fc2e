package check

import (
	"context"
	"time"

	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/vm"
	"github.com/tidwall/gjson"
)

// guestOSTimeout bounds the guest agent's answer: the advice falls back to
// the config's ostype rather than wait (a guest without qemu-ga never
// answers).
const guestOSTimeout = time.Second

// guestOS is guest-get-osinfo's answer (qemu-ga: id is os-release's ID on
// Linux, "mswindows" on Windows).
type guestOS struct {
	id, pretty string
}

func (g *guestOS) windows() bool { return g.id == "mswindows" }

func (g *guestOS) name() string {
	if g.pretty != "" {
		return g.pretty
	}
	return g.id
}

// parseGuestOS reads guest-get-osinfo's return value; nil without an id.
func parseGuestOS(ret gjson.Result) *guestOS {
	g := &guestOS{id: ret.Get("id").String(), pretty: ret.Get("pretty-name").String()}
	if g.id == "" {
		return nil
	}
	return g
}

// askGuestOS asks a running VM's guest agent (agent: 1) what it runs, so
// that a controller move is advised on the guest's word, not only on the
// config's ostype; nil when the VM is stopped, has no agent or it does not
// answer, or no disk is on an emulated controller (then the answer changes
// nothing, and a silent agent would only cost the wait). While a backup
// holds the VM the agent is not asked: the skip says so.
func askGuestOS(ctx context.Context, n node.Node, v *vm.VM) (*guestOS, *vm.AgentSkip) {
	if !v.Running || !qemuserver.AgentEnabled(v.Config.Main["agent"]) || !emulatedDisks(v) {
		return nil, nil
	}
	timeout := min(n.Timeout, guestOSTimeout)
	agent, skip := v.Agent(ctx, n, timeout, "guest-get-osinfo", "the guest's OS (emulated-controller's advice)")
	if skip != nil {
		return nil, skip
	}
	actx, cancel := context.WithTimeout(ctx, 2*timeout)
	defer cancel()
	ret, err := agent.Call(actx, "guest-get-osinfo", nil)
	if err != nil {
		return nil, nil
	}
	return parseGuestOS(ret), nil
}

// emulatedDisks: a disk of the next start sits on SATA, IDE or an emulated
// SCSI controller.
func emulatedDisks(v *vm.VM) bool {
	next := v.Config.Next()
	scsihw := qemuserver.SCSIHW(next)
	for _, k := range qemuserver.DiskKeys(next) {
		bus, _, _ := qemuserver.SplitDiskKey(k)
		if bus == "sata" || bus == "ide" || bus == "scsi" && !qemuserver.VirtIOSCSI(scsihw) {
			return true
		}
	}
	return false
}
