package check

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/stall"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// stalls reports disk-stalled: a disk of the running VM with requests
// outstanding that completed none for after (package stall owns the rule).
// check is one look, so "none completed" is QEMU's idle_time_ns, and a
// stall found is looked at again stall.ConfirmGap later: only one seen
// twice is reported. One more exchange of three commands
// (query-blockstats, query-iothreads, query-cpus-fast).
func stalls(ctx context.Context, n node.Node, v *vm.VM, after time.Duration, out *VMResult) {
	a, err := v.Ask(ctx, n.Timeout, vm.Query{Need: vm.NeedStats | vm.NeedThreads})
	if err != nil {
		out.Notes = append(out.Notes, "disk-stalled not checked: "+err.Error())
		out.NotChecked = append(out.NotChecked, CodeDiskStalled)
		return
	}
	vmid := strconv.Itoa(v.VMID)
	for _, sv := range stall.Detect(ctx, n, v.Pid, stall.Disks(n, v, a.Threads), a.Stats, after, stall.ConfirmGap) {
		if !sv.Stalled {
			continue
		}
		out.add(Finding{Severity: Error, Code: CodeDiskStalled, Disk: sv.Disk,
			Message: fmt.Sprintf("no request completed for %g s while requests are outstanding (storage %s): %s", sv.StalledSeconds, orUnknown(sv.Storage), sv.Summary()),
			Fix:     "pvediskcheck stall " + vmid + " (keeps the evidence) before restarting the VM; then find what blocks below the disk (dmesg, the storage)"})
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
