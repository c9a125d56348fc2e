package top

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/units"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// Use is how much of its running I/O limit a disk used over an interval.
type Use struct {
	Pct   float64 // measured / limit x 100, for the limit closest to being reached
	Limit string  // that limit in Proxmox's terms: mbps_wr=20
}

// LimitUse is the share of the limits l (QEMU's ThrottleLimits names, bytes/s
// and ops/s) that iv used: each rate limit is compared with what it
// throttles (bps-total with reads plus writes, iops-read with read
// operations, ...) and the highest share wins. ok is false when no rate
// limit is set. Burst rates (*-max) and lengths are not limits of their own
// here: a burst shows as more than 100 % of the base rate.
func LimitUse(l qemuserver.Limits, iv sampler.Interval) (u Use, ok bool) {
	measured := map[string]float64{
		"bps-total":  iv.ReadBytesPerSec + iv.WriteBytesPerSec,
		"bps-read":   iv.ReadBytesPerSec,
		"bps-write":  iv.WriteBytesPerSec,
		"iops-total": iv.ReadOpsPerSec + iv.WriteOpsPerSec,
		"iops-read":  iv.ReadOpsPerSec,
		"iops-write": iv.WriteOpsPerSec,
	}
	for _, k := range qemuserver.LimitKeys {
		m, rate := measured[k.QEMU]
		limit := l[k.QEMU]
		if !rate || limit <= 0 {
			continue
		}
		pct := m / float64(limit) * 100
		if !ok || pct > u.Pct {
			u = Use{Pct: pct, Limit: k.Proxmox + "=" + units.Number(float64(limit)/k.Scale)}
			ok = true
		}
	}
	return u, ok
}

// Code names a finding.
type Code string

const (
	// ThreadSaturated: the thread that serves a disk's I/O (its iothread,
	// or the main loop) never idled in the interval: it ran or waited for a
	// core SaturatedPct or more of the time. QEMU's event loops are single
	// threads: one that is never idle cannot take more work, and every disk
	// on it queues, whether it is short of CPU itself (it ran ~100 %) or the
	// node's cores are taken by others (it mostly waited).
	ThreadSaturated Code = "thread-saturated"
	// AtLimit: the disk used AtLimitPct or more of its running I/O limit;
	// its latency is the throttle's queue, not the storage's.
	AtLimit Code = "at-limit"
	// QueuedInQEMU: requests waited in QEMU far longer than the node's
	// block device below took for them (QueuedFactor and QueuedMinMs):
	// the time is spent in QEMU (throttle, a saturated thread), not in
	// the storage.
	QueuedInQEMU Code = "queued-in-qemu"
	// FailedOps: requests failed (I/O errors) or were refused.
	FailedOps Code = "failed-ops"
	// DiskStalled: the disk has requests outstanding and completed none
	// for --stall-after (package stall; the message says the evidence).
	DiskStalled Code = "disk-stalled"
	// HistogramLeft: a latency histogram pvediskcheck set and did not
	// clear is still set on the disk (latency.Leftover: the message says
	// how to clear it).
	HistogramLeft Code = "latency-histogram-left"
	// GuestFrozen: the guest agent says the guest's filesystems are
	// frozen (guest-fsfreeze-status): its writes hang until thawed, and
	// with nothing sent the stall rule sees nothing. During a backup the
	// message says the backup and its job's progress.
	GuestFrozen Code = "guest-frozen"
)

// Thresholds of the findings, with the measurements that set them.
const (
	// SaturatedPct: a thread that spins is running or runnable all the
	// time: run + wait measured 99.5 % of a 1 s interval on this shared
	// machine, where it ran only 17.7 % and waited 81.8 %
	// (threads.TestSpinningThreadRunPlusWait), so the run time alone would
	// miss it. An event loop with idle moments sleeps in ppoll and counts
	// neither: the iothread serving ~450 IOPS of qemu-io writes ran 1.4-2.5 %
	// and waited 1.7-17.6 % per interval (QEMU 7.2, TCG). 90 % allows for an
	// interval's jitter. Without schedstat only the run time is known, and
	// the same share of it is required.
	SaturatedPct = 90.0
	// AtLimitPct: a disk held at a 20 MiB/s write limit by a steady queue
	// of 256 KiB qemu-io writes measured 98.6-100.8 % of it per 1 s interval
	// (cmd/pvediskcheck TestTopRealQEMU, QEMU 7.2, both generations); with
	// 1 MiB requests single intervals ranged 80-126 % (the throttle admits
	// whole requests), averaging 100 %. 95 % takes the intervals of a pinned
	// disk and none of a disk with a fifth of headroom.
	AtLimitPct = 95.0
	// QueuedFactor and QueuedMinMs: unthrottled qemu-io writes to a disk
	// on a loop device (4 KiB and 256 KiB, 16 in flight) took 1.1-6.0x the
	// loop device's own latency in QEMU, never more than 4.4 ms above it
	// (QEMU's submission path, a busy node); under a 20 MiB/s limit the
	// same writes took 177-870 ms in QEMU against 0.3-59 ms in the device.
	// Both conditions together leave the first alone and catch the second.
	QueuedFactor = 3.0
	QueuedMinMs  = 5.0
)

// Finding is something a sample shows that needs no guessing.
type Finding struct {
	Code    Code     `json:"code"`
	VMID    int      `json:"vmid"`
	Disks   []string `json:"disks"`            // the disks it concerns
	Thread  string   `json:"thread,omitempty"` // for thread-saturated: iothread id or main-loop
	Message string   `json:"message"`
}

// Judge lists what sample s shows: saturated threads (once per thread,
// with every disk it serves), disks at their limit, requests queued in QEMU
// rather than in the storage, failed requests. Sorted by VMID, then code,
// then disks.
func Judge(s Sample) []Finding {
	out := []Finding{}
	type threadKey struct {
		vmid   int
		thread string
	}
	saturated := map[threadKey]*Finding{}
	var order []threadKey
	for _, d := range s.Disks {
		if busy, ok := threadBusy(d); ok && busy >= SaturatedPct {
			k := threadKey{d.VMID, d.Thread}
			f := saturated[k]
			if f == nil {
				f = &Finding{Code: ThreadSaturated, VMID: d.VMID, Thread: d.Thread,
					Message: fmt.Sprintf("%s of VM %d never idled (ran %.0f %% of a core, waited %s for one): it cannot take more I/O",
						threadName(d.Thread), d.VMID, *d.ThreadCPUPct, pctOrUnknown(d.ThreadWaitPct))}
				saturated[k] = f
				order = append(order, k)
			}
			f.Disks = append(f.Disks, d.Disk)
		}
		if d.LimitPct != nil && *d.LimitPct >= AtLimitPct {
			out = append(out, Finding{Code: AtLimit, VMID: d.VMID, Disks: []string{d.Disk},
				Message: fmt.Sprintf("%s of VM %d used %.0f %% of its limit %s: its latency is the throttle's queue", d.Disk, d.VMID, *d.LimitPct, deref(d.Limit))})
		}
		if q, dev, ok := queuedInQEMU(d); ok {
			out = append(out, Finding{Code: QueuedInQEMU, VMID: d.VMID, Disks: []string{d.Disk},
				Message: fmt.Sprintf("%s of VM %d: requests took %.1f ms in QEMU, %.1f ms in %s below it: the time is spent in QEMU, not in the storage", d.Disk, d.VMID, q, dev, deref(d.Device))})
		}
		if d.StalledSeconds > 0 {
			out = append(out, Finding{Code: DiskStalled, VMID: d.VMID, Disks: []string{d.Disk},
				Message: fmt.Sprintf("%s of VM %d STALLED for %s s: %s", d.Disk, d.VMID, units.Number(d.StalledSeconds), d.stallSays)})
		}
		if d.FailedOps > 0 {
			out = append(out, Finding{Code: FailedOps, VMID: d.VMID, Disks: []string{d.Disk},
				Message: fmt.Sprintf("%s of VM %d: %d requests failed or were refused", d.Disk, d.VMID, d.FailedOps)})
		}
	}
	for _, k := range order {
		out = append(out, *saturated[k])
	}
	for _, v := range s.VMs {
		if f := v.GuestFreeze; f != nil && f.State == vm.Frozen {
			out = append(out, Finding{Code: GuestFrozen, VMID: v.VMID, Disks: []string{}, Message: frozenMessage(v.VMID, f)})
		}
	}
	for _, l := range s.HistogramsLeft {
		out = append(out, Finding{Code: HistogramLeft, VMID: l.VMID, Disks: []string{l.Disk}, Message: "VM " + strconv.Itoa(l.VMID) + ": " + l.Message()})
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].VMID != out[j].VMID {
			return out[i].VMID < out[j].VMID
		}
		if out[i].Code != out[j].Code {
			return out[i].Code < out[j].Code
		}
		return strings.Join(out[i].Disks, ",") < strings.Join(out[j].Disks, ",")
	})
	return out
}

// queuedInQEMU compares QEMU's mean read/write latency (weighted by
// operations) with the node device's.
func queuedInQEMU(d Disk) (qemuMs, devMs float64, ok bool) {
	ops := d.ReadIOPS + d.WriteIOPS
	if d.DeviceLatencyMs == nil || ops <= 0 {
		return 0, 0, false
	}
	qemuMs = (d.ReadLatencyMs*d.ReadIOPS + d.WriteLatencyMs*d.WriteIOPS) / ops
	devMs = *d.DeviceLatencyMs
	return qemuMs, devMs, qemuMs >= QueuedFactor*devMs && qemuMs-devMs >= QueuedMinMs
}

// threadBusy is the share of the interval the disk's thread ran or waited
// to run (run time alone without schedstat).
func threadBusy(d Disk) (float64, bool) {
	if d.ThreadCPUPct == nil {
		return 0, false
	}
	if d.ThreadWaitPct == nil {
		return *d.ThreadCPUPct, true
	}
	return *d.ThreadCPUPct + *d.ThreadWaitPct, true
}

func pctOrUnknown(p *float64) string {
	if p == nil {
		return "an unknown time"
	}
	return fmt.Sprintf("%.0f %%", *p)
}

func threadName(t string) string {
	if t == mainLoop {
		return "the main loop"
	}
	return "iothread " + t
}

func deref(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

// frozenMessage says a frozen guest: during a backup, the backup and its
// progress; without one, that its writes hang and the command that thaws.
func frozenMessage(vmid int, f *vm.Freeze) string {
	if b := f.Backup; b != nil && (b.Lock || len(b.Jobs) > 0) {
		return fmt.Sprintf("VM %d: the guest's filesystems are frozen while %s: vzdump thaws them once its job runs", vmid, b.What())
	}
	return fmt.Sprintf("VM %d: the guest's filesystems are FROZEN and no backup holds the VM: its writes hang until thawed (qm guest cmd %d fsfreeze-thaw)", vmid, vmid)
}
