package cache

import (
	"context"

	"github.com/pvediskcheck/pvediskcheck/advisory"
	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/flush"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// Layers are what cache reads of a VM's disks, once (package disk): what
// QEMU runs (when v runs), the zvols' properties, the queue counts, each
// running disk's backing chain, the disks as the guest names them and the
// VM's cgroup (its unflushed page cache).
const Layers = disk.Live | disk.ZFS | disk.Queues | disk.Backing | disk.Agent | disk.Cgroup

// Run builds the view of the selected disks of v from the Layers, with the
// QEMU binary it runs (the build, whether an upgrade replaced it, the
// installed version), and with verify the flush verdicts of the disks
// ToVerify lists, measured with o. The view comes back with the error the
// run ends with: exit 3 when the VM does not run or its QMP socket cannot
// be read, the measurement's own error, exit 1 when a disk's flushes are
// ignored.
func Run(ctx context.Context, n node.Node, v *vm.VM, disks []*vm.Disk, verify bool, o flush.Options) (*View, error) {
	set := disk.Resolve(ctx, n, v, disks, Layers, disk.Options{AgentTimeout: AgentTimeout})
	out := Build(set)
	if v.Running {
		b := advisory.ReadBinary(ctx, n, v.Pid, v.Alive, v.QEMUPackage, v.Packages())
		out.QEMU = &b
	}
	var verifyErr error
	if ids := ToVerify(out); verify && v.Running && set.AskErr == nil && len(ids) > 0 {
		res, err := flush.Measure(ctx, n, set.Only(ids), o)
		out.Attach(res)
		verifyErr = err
	}
	if !v.Running {
		return &out, exitcode.Unreachablef("VM %d is not running", v.VMID)
	}
	if set.AskErr != nil {
		return &out, exitcode.Unreachablef("%s", vm.QMPError(v.VMID, set.AskErr).Error())
	}
	if verifyErr != nil {
		return &out, verifyErr
	}
	if out.Ignored() {
		return &out, exitcode.ErrProblem
	}
	return &out, nil
}
