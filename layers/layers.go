// Package layers splits a disk's request latency over the three layers
// that see it, as esxtop splits GAVG into KAVG and DAVG: the guest's own
// block device (its /sys/block/<dev>/stat, read through the guest agent),
// QEMU (query-blockstats: from the request's submission at the device's
// BlockBackend, throttle queue included, to its completion) and the node's
// block device under the volume (the LV, zvol, rbd, loop or dm device's
// /sys/block/<dev>/stat, or the device under the filesystem a file is on:
// shared with everything else on it).
//
// Split is pure: two snapshots of each layer's counters over the same
// interval in, per disk "the guest waits X ms per request, of which QEMU Y
// ms, of which the storage Z ms" and the layer that adds most out. A layer
// that could not be read is absent, with why; it is never guessed, and a
// verdict that would need it is not given.
//
// Requests are reads and writes at every layer (flushes and discards are
// counted apart by each and left out). Each layer's figure is its own mean
// over the requests it completed in the interval (Documentation/block/
// stat.rst: read/write ticks are the milliseconds requests waited, from
// their allocation in the block layer to their completion, summed over
// requests; QEMU's rd/wr_total_time_ns likewise in nanoseconds). The layer
// below may merge or split requests: a mean per request is comparable
// where a sum is not.
package layers

import (
	"fmt"
	"strings"
	"time"

	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// Verdict names the layer that adds most to a disk's wait.
type Verdict string

const (
	// QueuedInGuest: the guest's requests wait longer in the guest than
	// QEMU takes for them (the guest queues more than the device
	// accepts).
	QueuedInGuest Verdict = "queued in the guest"
	// HeldIOLimit: QEMU holds requests back, and the disk runs at its I/O
	// limit (LimitHeldPct or more of it).
	HeldIOLimit Verdict = "held by QEMU: I/O limit"
	// HeldIOThreadBusy: QEMU holds requests back, and the thread serving
	// the disk is busy (IOThreadBusyPct or more of a core).
	HeldIOThreadBusy Verdict = "held by QEMU: iothread busy"
	// HeldByQEMU: QEMU adds most, at no limit and on no busy thread.
	HeldByQEMU Verdict = "held by QEMU"
	// Storage: the node's device takes most of the time.
	Storage Verdict = "storage"
	// Idle: no read or write completed at QEMU in the interval.
	Idle Verdict = "idle"
	// Unknown: the layers read cannot name the one that adds most (the
	// node device is not read and the guest does not queue more than
	// QEMU and the storage take together); Why says which layer is
	// missing.
	Unknown Verdict = "unknown"
)

const (
	// LimitHeldPct: a disk using this much of its running limit (package
	// top's LimitUse) has QEMU's throttle queue holding its requests: at
	// the limit the throttle admits requests at the limit's rate, so each
	// waits depth/rate (QEMU-FACTS: 503-511 IOPS measured against 500, so
	// a disk at its limit reads 100 % within a few percent).
	LimitHeldPct = 90.0
	// IOThreadBusyPct: a serving thread this busy (% of one core) has
	// requests waiting for it to run rather than for the storage.
	IOThreadBusyPct = 90.0
	// GuestQueueMin: the guest queues when it holds, on average over the
	// interval, at least one request more than QEMU has (its in-flight
	// time less QEMU's, per second: Little's law). A guest that adds time
	// per request without that is its driver's own path, no queue: the
	// real guest under TCG adds 0.75-1.4 ms to each of its depth-1 fsync
	// writes with 0.3-0.6 requests in flight (TestTopLayersGuest).
	GuestQueueMin = 1.0
)

// Counters are one disk's counters at one moment, per layer; a nil layer
// was not read (Why says why).
type Counters struct {
	// At is when they were read (QEMU's answer); zero when not known: the
	// guest's queue is then not judged.
	At time.Time
	// Guest is the guest's block device for the disk (its diskstats);
	// nil when the agent was not asked, did not answer, forbids reading
	// (GuestWhy).
	Guest    *sampler.BlockStat
	GuestWhy string
	// QEMU is the disk's device entry of query-blockstats.
	QEMU *qmp.BlockStats
	// Node is the node block device under the volume; NodeShared when it
	// is the device under the filesystem a file volume is on (its
	// requests are everyone's on that filesystem). nil with NodeWhy.
	Node       *sampler.BlockStat
	NodeShared bool
	NodeWhy    string
}

// Context is what QEMU reports beside the counters over the interval:
// the share of the running I/O limit the disk used and the serving
// thread's CPU; nil where not known (a disk without limits, a thread not
// measured).
type Context struct {
	LimitPct     *float64
	Limit        string // the limit in Proxmox's terms, mbps_wr=20
	Thread       string // the serving thread: its iothread's id or main-loop
	ThreadCPUPct *float64
	// PageCache, when set, is the cache mode that puts the node's page
	// cache between QEMU and the node device (no O_DIRECT: writeback,
	// writethrough, unsafe): the device's requests are then the page
	// cache's writeback and readahead, not the guest's, and its wait is no
	// part of QEMU's: the storage layer is shown, not split from QEMU's.
	PageCache string
}

// Layer is one layer's figures over the interval.
type Layer struct {
	// Requests are the reads and writes it completed in the interval.
	Requests int64 `json:"requests"`
	// MsPerRequest is their mean time from submission to completion.
	MsPerRequest float64 `json:"ms_per_request"`
	// AddsMs is what this layer adds: its wait less the wait of the layer
	// below (the storage's is its whole wait); nil when the layer below
	// was not read. Never below 0 (the layers' clocks differ by a
	// fraction of a millisecond).
	AddsMs *float64 `json:"adds_ms"`
	// AddsPct is AddsMs as a share of the top layer's wait (the guest's,
	// else QEMU's); nil with AddsMs.
	AddsPct *float64 `json:"adds_pct"`
	// InFlight are its requests outstanding at the end of the interval
	// (the guest's and the node's diskstats; QEMU does not count them).
	InFlight *int64 `json:"in_flight"`
	// TimeMs is the time its requests spent, summed (the counter delta
	// the mean is from), for rates: milliseconds.
	TimeMs float64 `json:"time_ms"`
	// Depth is the mean number of its requests in flight over the
	// interval (TimeMs per second); nil when the interval is not known.
	Depth *float64 `json:"depth"`
}

// Split is one disk's latency over the three layers and the verdict.
type Split struct {
	Verdict Verdict `json:"verdict"`
	// Says is the split in one sentence, with the verdict's figures.
	Says string `json:"says"`
	// Guest, QEMU and Storage are the layers read; nil when not, with
	// GuestUnknown and StorageUnknown saying why.
	Guest          *Layer `json:"guest"`
	GuestUnknown   string `json:"guest_unknown,omitempty"`
	QEMU           *Layer `json:"qemu"`
	Storage        *Layer `json:"storage"`
	StorageShared  bool   `json:"storage_shared"`
	StorageUnknown string `json:"storage_unknown,omitempty"`
	// StorageApart says why the storage layer, read, is not split from
	// QEMU's (the node's page cache between them: Context.PageCache).
	StorageApart string `json:"storage_apart,omitempty"`
	// Why, for Unknown, is what is missing.
	Why string `json:"why,omitempty"`
}

// Of splits one disk's interval from a to b. QEMU's counters are needed
// for any verdict (Idle without them); a layer missing from either
// snapshot, or whose counters went backwards, is absent.
func Of(a, b Counters, c Context) Split {
	var s Split
	s.QEMU = qemuLayer(a.QEMU, b.QEMU)
	s.Guest, s.GuestUnknown = devLayer(a.Guest, b.Guest, a.GuestWhy, b.GuestWhy, "guest")
	s.Storage, s.StorageUnknown = devLayer(a.Node, b.Node, a.NodeWhy, b.NodeWhy, "node device")
	s.StorageShared = s.Storage != nil && b.NodeShared
	if s.Storage != nil && c.PageCache != "" {
		s.StorageApart = "cache=" + c.PageCache + " puts the node's page cache between QEMU and the device: the device's requests are its writeback and readahead, not the guest's"
	}
	if s.QEMU == nil || s.QEMU.Requests == 0 {
		s.Verdict, s.Says = Idle, "no read or write completed"
		if s.QEMU == nil {
			s.Why = "QEMU's counters not read"
			s.Says = "QEMU's counters not read"
		}
		return s
	}
	top := s.QEMU.MsPerRequest
	if s.Guest != nil {
		top = s.Guest.MsPerRequest
	}
	adds := func(l *Layer, below float64) {
		// Never below 0, never above the layer's own wait (a layer below
		// whose requests are fewer and longer: merged).
		v := units.Round(min(max(l.MsPerRequest-below, 0), l.MsPerRequest), 3)
		l.AddsMs = &v
		p := 0.0
		if top > 0 {
			p = units.Round(v/top*100, 1)
		}
		l.AddsPct = &p
	}
	if s.Guest != nil {
		adds(s.Guest, s.QEMU.MsPerRequest)
	}
	if s.Storage != nil && s.StorageApart == "" {
		adds(s.QEMU, s.Storage.MsPerRequest)
		// The storage's part is its wait, at most QEMU's.
		adds(s.Storage, max(s.Storage.MsPerRequest-s.QEMU.MsPerRequest, 0))
	}
	if sec := b.At.Sub(a.At).Seconds(); !a.At.IsZero() && !b.At.IsZero() && sec > 0 {
		for _, l := range []*Layer{s.Guest, s.QEMU, s.Storage} {
			if l != nil {
				d := units.Round(l.TimeMs/1000/sec, 2)
				l.Depth = &d
			}
		}
	}
	s.Verdict, s.Why = verdict(s, c)
	s.Says = says(s, c)
	return s
}

func verdict(s Split, c Context) (Verdict, string) {
	// The guest is named only where it queues (GuestQueueMin).
	guest := -1.0
	if g := s.Guest; g != nil && g.Depth != nil && s.QEMU.Depth != nil && *g.Depth-*s.QEMU.Depth >= GuestQueueMin {
		guest = *s.Guest.AddsMs
	}
	if s.Storage == nil || s.StorageApart != "" {
		// QEMU and the storage are one figure: only a guest that adds
		// more than both together can be named.
		if s.Guest != nil && guest > s.QEMU.MsPerRequest {
			return QueuedInGuest, ""
		}
		why := s.StorageUnknown
		if s.StorageApart != "" {
			why = s.StorageApart
		}
		return Unknown, "QEMU's time is not split from the storage's: " + why
	}
	q, st := *s.QEMU.AddsMs, *s.Storage.AddsMs
	switch {
	case guest > q && guest > st:
		return QueuedInGuest, ""
	case q > st:
		switch {
		case c.LimitPct != nil && *c.LimitPct >= LimitHeldPct:
			return HeldIOLimit, ""
		case c.ThreadCPUPct != nil && *c.ThreadCPUPct >= IOThreadBusyPct:
			return HeldIOThreadBusy, ""
		}
		return HeldByQEMU, ""
	}
	return Storage, ""
}

// says is "guest waits X ms per request, of which QEMU Y ms, of which the
// storage Z ms", a layer not read named with why, and the verdict's
// figures.
func says(s Split, c Context) string {
	ms := func(f float64) string { return units.Grouped(f) + " ms" }
	var parts []string
	if s.Guest != nil {
		parts = append(parts, "guest waits "+ms(s.Guest.MsPerRequest)+" per request", "of which QEMU "+ms(s.QEMU.MsPerRequest))
	} else {
		parts = append(parts, "QEMU waits "+ms(s.QEMU.MsPerRequest)+" per request (guest not read: "+s.GuestUnknown+")")
	}
	if s.Storage != nil && s.StorageApart != "" {
		parts = append(parts, "the device below the page cache "+ms(s.Storage.MsPerRequest))
	} else if s.Storage != nil {
		st := "of which the storage " + ms(s.Storage.MsPerRequest)
		if s.StorageShared {
			st += " (a device shared with the filesystem's other files)"
		}
		if s.Storage.MsPerRequest > s.QEMU.MsPerRequest {
			st += " (more than QEMU's: the device's requests are not QEMU's one for one; its part is counted as QEMU's whole wait)"
		}
		parts = append(parts, st)
	} else {
		parts = append(parts, "storage not read: "+s.StorageUnknown)
	}
	out := strings.Join(parts, ", ")
	pct := func(l *Layer) string { return units.PercentWhole(*l.AddsPct) }
	switch s.Verdict {
	case QueuedInGuest:
		out += fmt.Sprintf("; %s: the guest adds %s (%s)", s.Verdict, ms(*s.Guest.AddsMs), pct(s.Guest))
	case HeldIOLimit:
		out += fmt.Sprintf("; %s: QEMU adds %s (%s) at %s of %s", s.Verdict, ms(*s.QEMU.AddsMs), pct(s.QEMU), units.PercentWhole(*c.LimitPct), c.Limit)
	case HeldIOThreadBusy:
		out += fmt.Sprintf("; %s: QEMU adds %s (%s), %s at %s of a core", s.Verdict, ms(*s.QEMU.AddsMs), pct(s.QEMU), c.Thread, units.PercentWhole(*c.ThreadCPUPct))
	case HeldByQEMU:
		out += fmt.Sprintf("; %s: QEMU adds %s (%s)", s.Verdict, ms(*s.QEMU.AddsMs), pct(s.QEMU))
	case Storage:
		out += fmt.Sprintf("; %s: the storage takes %s (%s)", s.Verdict, ms(*s.Storage.AddsMs), pct(s.Storage))
	case Unknown:
		out += "; no verdict: " + s.Why
	}
	return out
}

func qemuLayer(a, b *qmp.BlockStats) *Layer {
	if a == nil || b == nil {
		return nil
	}
	ops := b.RdOps - a.RdOps + b.WrOps - a.WrOps
	ns := b.RdTotalTimeNs - a.RdTotalTimeNs + b.WrTotalTimeNs - a.WrTotalTimeNs
	if b.RdOps < a.RdOps || b.WrOps < a.WrOps || b.RdTotalTimeNs < a.RdTotalTimeNs || b.WrTotalTimeNs < a.WrTotalTimeNs {
		return nil
	}
	l := &Layer{Requests: ops, TimeMs: units.Round(float64(ns)/1e6, 3)}
	if ops > 0 {
		l.MsPerRequest = units.Round(float64(ns)/1e6/float64(ops), 3)
	}
	return l
}

func devLayer(a, b *sampler.BlockStat, whyA, whyB, name string) (*Layer, string) {
	switch {
	case b == nil && whyB != "":
		return nil, whyB
	case a == nil && whyA != "":
		return nil, whyA
	case a == nil || b == nil:
		return nil, name + " not read"
	case a.Device != b.Device:
		return nil, fmt.Sprintf("%s %s became %s", name, a.Device, b.Device)
	}
	ops := b.ReadIOs - a.ReadIOs + b.WriteIOs - a.WriteIOs
	ticks := b.ReadTicksMs - a.ReadTicksMs + b.WriteTicksMs - a.WriteTicksMs
	if b.ReadIOs < a.ReadIOs || b.WriteIOs < a.WriteIOs || b.ReadTicksMs < a.ReadTicksMs || b.WriteTicksMs < a.WriteTicksMs {
		return nil, fmt.Sprintf("%s %s: counters went backwards (another device under the name)", name, b.Device)
	}
	inflight := b.InFlight
	l := &Layer{Requests: ops, TimeMs: float64(ticks), InFlight: &inflight}
	if ops > 0 {
		l.MsPerRequest = units.Round(float64(ticks)/float64(ops), 3)
	}
	return l, ""
}
