package check

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/stall"
)

// stallLayers are what disk-stalled reads of a running VM (package stall
// owns the rule): QEMU's counters and threads, asked in the exchange of
// its live view (three more commands: query-blockstats, query-iothreads,
// query-cpus-fast), and the node devices under the disks.
const stallLayers = disk.Counters | stall.Layers

// detectStalls looks at the running VM for disk-stalled right after the
// exchange that read its counters and threads (set, with stallLayers):
// check is one look, so "none completed" is QEMU's idle_time_ns, and a
// stall found is looked at again stall.ConfirmGap later. nil when QEMU
// did not answer.
func detectStalls(ctx context.Context, n node.Node, set *disk.Set, after time.Duration) []stall.Verdict {
	if set.AskErr != nil {
		return nil
	}
	return stall.Detect(ctx, n, set.VM.Pid, stall.Disks(set), set.Stats, after, stall.ConfirmGap)
}

// stallRule is disk-stalled's rule: where the stall was looked at and
// QEMU answered the exchange.
func stallRule(in *Input, out *VMResult) {
	if in.stalled && in.set.AskErr == nil {
		stalls(in.set, in.verdicts, out)
	}
}

// stalls reports disk-stalled: a disk of the running VM with requests
// outstanding that completed none for --stall-after, seen twice (sv:
// detectStalls'); the same query-blockstats tells latency-histogram-left.
// A QEMU that did not answer is said: not checked.
func stalls(set *disk.Set, sv []stall.Verdict, out *VMResult) {
	v := set.VM
	if set.AskErr != nil {
		out.Notes = append(out.Notes, "disk-stalled and latency-histogram-left not checked: "+set.AskErr.Error())
		out.NotChecked = append(out.NotChecked, CodeDiskStalled, CodeHistogramLeft)
		return
	}
	for _, f := range HistogramsLeft(latency.LeftoversOf(v.VMID, v.Pid, v.QMPSocket(), set.Stats)) {
		out.add(f)
	}
	vmid := strconv.Itoa(v.VMID)
	for _, sv := range sv {
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
