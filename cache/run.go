package cache

import (
	"context"

	"github.com/pvediskcheck/pvediskcheck/advisory"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/flush"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/queues"
	"github.com/pvediskcheck/pvediskcheck/storage/zfs"
	"github.com/pvediskcheck/pvediskcheck/vm"
	"github.com/pvediskcheck/pvediskcheck/volchain"
)

// Run builds the view of the selected disks of v: what runs (from QMP when
// v runs), the QEMU binary it runs (the build, whether an upgrade replaced
// it, the installed version), the disks as the guest names them, each running disk's backing
// chain (from the graph FetchLive read), and with verify the flush
// verdicts of the disks ToVerify lists, measured with o. The view comes
// back with the error the run ends with: exit 3 when the VM does not run
// or its QMP socket cannot be read, the measurement's own error, exit 1
// when a disk's flushes are ignored.
func Run(ctx context.Context, n node.Node, v *vm.VM, disks []*vm.Disk, verify bool, o flush.Options) (*View, error) {
	var liveErr error
	if v.Running {
		liveErr = v.FetchLive(ctx, n.Timeout)
	}
	out := Build(v, disks, liveErr)
	if v.Running {
		b := advisory.ReadBinary(ctx, n, v.Pid, v.Alive, v.QEMUPackage, nil)
		out.QEMU = &b
	}
	out.AttachZFS(zfs.ForVM(ctx, n.Runner, v, disks))
	out.AttachQueues(queues.ForVM(ctx, v, disks, n.Timeout, liveErr == nil))
	out.AttachBacking(volchain.Running(ctx, n, v, disks))
	GuestNames(ctx, v, n.Timeout, &out)
	var verifyErr error
	if ids := ToVerify(out); verify && v.Running && liveErr == nil && len(ids) > 0 {
		sel, err := v.Select(ids)
		if err != nil {
			return nil, err
		}
		res, err := flush.Measure(ctx, n, v, sel, o)
		out.Attach(res)
		verifyErr = err
	}
	if !v.Running {
		return &out, exitcode.Unreachablef("VM %d is not running", v.VMID)
	}
	if liveErr != nil {
		return &out, exitcode.Unreachablef("%s", vm.QMPError(v.VMID, liveErr).Error())
	}
	if verifyErr != nil {
		return &out, verifyErr
	}
	if out.Ignored() {
		return &out, exitcode.ErrProblem
	}
	return &out, nil
}
