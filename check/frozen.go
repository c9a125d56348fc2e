package check

import (
	"fmt"
	"strconv"

	"github.com/pvediskcheck/pvediskcheck/vm"
)

// skipped records a guest agent answer check did not ask for (nil: none).
func (out *VMResult) skipped(s *vm.AgentSkip) {
	if s != nil {
		out.AgentNotAsked = append(out.AgentNotAsked, *s)
	}
}

// guestFrozenRule is guest-frozen's rule.
func guestFrozenRule(in *Input, out *VMResult) { guestFrozen(in.v.VMID, in.freeze, out) }

// guestFrozen judges the guest's freeze state (vm.VM.AskFreeze): frozen
// while no backup holds the VM is an error, as every write of the guest
// hangs until it is thawed and, with nothing sent, the stall rule sees
// nothing; frozen while a backup holds it is info with the job's progress
// (vzdump freezes for its snapshot and thaws once the job runs). Not asked
// (a backup holds the VM) or not answered: guest-frozen is not checked,
// and the notes say why.
func guestFrozen(vmid int, f *vm.Freeze, out *VMResult) {
	if f == nil {
		return
	}
	switch f.State {
	case vm.Frozen:
		if f.Backup != nil && (f.Backup.Lock || len(f.Backup.Jobs) > 0) {
			out.add(Finding{Severity: Info, Code: CodeGuestFrozen,
				Message: "the guest's filesystems are frozen (guest-fsfreeze-status) while " + f.Backup.What() +
					": vzdump thaws them once its backup job runs; frozen after the backup has ended is an error"})
			return
		}
		msg := "the guest's filesystems are frozen (guest-fsfreeze-status) and no backup holds the VM: every write in the guest hangs until they are thawed, and a frozen guest sends no I/O, so disk-stalled does not see it"
		if f.Backup != nil {
			msg = "the guest's filesystems are frozen (guest-fsfreeze-status) and no backup was seen to hold the VM (" + f.Backup.Unknown + "): every write in the guest hangs until they are thawed"
		}
		fix := "qm guest cmd " + strconv.Itoa(vmid) + " fsfreeze-thaw"
		out.add(Finding{Severity: Error, Code: CodeGuestFrozen, Message: msg, Fix: fix})
	case vm.FreezeNotAsked, vm.FreezeUnknown:
		out.NotChecked = append(out.NotChecked, CodeGuestFrozen)
		if f.State == vm.FreezeUnknown {
			out.Notes = append(out.Notes, fmt.Sprintf("guest-frozen not checked: the guest agent did not answer %s (%s)", vm.FreezeCommand, f.Why))
		}
	}
}
