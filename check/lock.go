package check

import (
	"fmt"
	"strconv"

	"github.com/pvediskcheck/pvediskcheck/vm"
)

// locked says that the config is locked and by what, and puts `qm unlock`
// before the fixes only where the lock is stale (no task of this node
// holds it): while a lock is set qemu-server refuses qm set (API2/Qemu.pm
// update_vm, check_lock) and qm start (vm_start; a suspended lock
// resumes) with "VM is locked (KIND)".
func locked(in *Input, out *VMResult) {
	v := in.v
	l := v.Lock()
	if l == nil {
		return
	}
	vmid := strconv.Itoa(v.VMID)
	refused := fmt.Sprintf("Proxmox refuses qm set and qm start with \"VM is locked (%s)\"", l.Kind)
	f := Finding{Severity: Error, Code: CodeLocked}
	if v.Running {
		f.Severity = Warning // it runs; what refuses is the next change or start
	}
	var prefix string
	// A lock outside Proxmox's enum is kept (parse_vm_config checks no
	// enum) and refuses as any does; no task kind is known for it.
	tasks := vm.LockTasks(l.Kind)
	if tasks == "" && l.Kind != "suspended" {
		tasks = l.Kind
	}
	switch {
	case l.Kind == "suspended":
		f.Severity, f.Message, f.Fix = Info, "the VM is hibernated (lock: suspended): qm start resumes it and clears the lock; qm set refuses until then", "qm start "+vmid
		prefix = "qm start " + vmid + " (resumes it), then "
	case l.Task != "":
		f.Severity = Info
		f.Message = fmt.Sprintf("the config is locked (lock: %s) by task %s, which runs: %s until it ends", l.Kind, l.Task, refused)
		prefix = "once task " + l.Task + " has ended: "
	case l.Stale():
		f.Message = fmt.Sprintf("the config is locked (lock: %s) and no %s task runs on this node: the lock is stale, left by an interrupted %s; %s", l.Kind, tasks, l.Kind, refused)
		f.Fix = "qm unlock " + vmid
		prefix = "qm unlock " + vmid + ", then "
	default:
		f.Message = fmt.Sprintf("the config is locked (lock: %s); %s; whether a %s task still holds it is not known here (no readable /var/log/pve/tasks/active)", l.Kind, refused, tasks)
		f.Fix = "if no " + tasks + " task runs for VM " + vmid + ": qm unlock " + vmid
		prefix = f.Fix + ", then "
	}
	// Every qm set fix is refused while the lock is set: it follows
	// what clears the lock, and is no longer one command.
	for i := range out.Findings {
		if out.Findings[i].Command != nil {
			out.Findings[i].Fix = prefix + out.Findings[i].Fix
			out.Findings[i].Command = nil
		}
	}
	out.Findings = append([]Finding{f}, out.Findings...)
}
