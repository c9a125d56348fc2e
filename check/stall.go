package check

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/stall"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// stalls reports disk-stalled: a disk of the running VM with requests
// outstanding that completed none for after (package stall owns the rule).
// check is one look, so "none completed" is QEMU's idle_time_ns, and a
// stall found is looked at again stall.ConfirmGap later: only one seen
// twice is reported. One more exchange of three commands
// (query-blockstats, query-iothreads, query-cpus-fast); the same
// query-blockstats tells latency-histogram-left.
func stalls(ctx context.Context, n node.Node, v *vm.VM, after time.Duration, out *VMResult) {
	a, err := v.Ask(ctx, n.Timeout, vm.Query{Need: vm.NeedStats | vm.NeedThreads})
	if err != nil {
		out.Notes = append(out.Notes, "disk-stalled and latency-histogram-left not checked: "+err.Error())
		out.NotChecked = append(out.NotChecked, CodeDiskStalled, CodeHistogramLeft)
		return
	}
	for _, f := range HistogramsLeft(latency.LeftoversOf(v.VMID, v.Pid, v.QMPSocket(), a.Stats)) {
		out.add(f)
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

// HistogramsLeft are latency-histogram-left findings, one per leftover
// histogram (package latency decides which are), with the command that
// clears it. An info: no data is at risk, QEMU only counts each request
// of the disk in the histogram's bins, but the run that set it changed
// QEMU's state and could not undo it.
func HistogramsLeft(ls []latency.Leftover) []Finding {
	var out []Finding
	for _, l := range ls {
		out = append(out, Finding{Severity: Info, Code: CodeHistogramLeft, Disk: l.Disk, Message: l.Message(), Fix: l.Clear})
	}
	return out
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}
