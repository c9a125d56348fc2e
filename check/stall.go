package check

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/stall"
	"github.com/pvediskcheck/pvediskcheck/threads"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// stalls reports disk-stalled: a disk of the running VM with requests
// outstanding that completed none for after (package stall owns the rule).
// check is one look, so "none completed" is QEMU's idle_time_ns, and a
// stall found is looked at again stall.ConfirmGap later: only one seen
// twice is reported. One more exchange of three commands
// (query-blockstats, query-iothreads, query-cpus-fast).
func stalls(ctx context.Context, n node.Node, v *vm.VM, after time.Duration, out *VMResult) {
	stats := map[string]qmp.BlockStats{}
	var m threads.Map
	err := v.Exchange(ctx, n.Timeout, func(s qmp.Session) error {
		ret, err := s.Exec("query-blockstats", nil)
		if err != nil {
			return err
		}
		for _, b := range qmp.ParseBlockstats(ret) {
			stats[b.ID] = b
		}
		io, err := s.Exec("query-iothreads", nil)
		if err != nil {
			return err
		}
		cpus, err := s.Exec("query-cpus-fast", nil)
		m = threads.New(v.Pid, io, cpus)
		return err
	})
	if err != nil {
		out.Notes = append(out.Notes, "disk-stalled not checked: "+err.Error())
		out.NotChecked = append(out.NotChecked, CodeDiskStalled)
		return
	}
	vmid := strconv.Itoa(v.VMID)
	for _, sv := range stall.Detect(ctx, n, v.Pid, stall.Disks(n, v, m), stats, after, stall.ConfirmGap) {
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
