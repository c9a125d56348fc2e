// Package sampler samples host and QEMU counters over a window and turns them
// into rates. Window is the one engine that samples a VM over a window:
// every sample is its own short exchange (vm.Ask), so the sockets it reads
// stay free for Proxmox's daemons between samples.
package sampler

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// Sample is one sample of a window: the counters QEMU reported, and the
// rest of what the window's query asked.
type Sample struct {
	// Time is when QEMU produced the counters: the midpoint between sending
	// query-blockstats and reading its reply (connect time excluded, so a
	// socket that was briefly busy does not shift the timestamp).
	Time  time.Time
	Stats map[string]qmp.BlockStats // by disk id (scsi1, virtio0)
	// Nodes are the counters of Window.Nodes (every node's when the Query
	// asks vm.NeedNodeStats without naming any), by node name; nil when
	// none were asked for.
	Nodes map[string]qmp.BlockStats
	// Live is the whole answer of the sample's exchange (vm.Answer: the
	// limits, jobs, threads the window's Query asked for besides the
	// counters); nil in samples built from recordings.
	Live *vm.Answer
}

// Tick is one sample as the OnSample hook gets it.
type Tick struct {
	N       int           // samples taken so far: 1 for the first
	Elapsed time.Duration // since the window began
	Window  time.Duration
	Sample  Sample
	// Detail is what the capability adds to the progress line ("QEMU
	// received 4 MiB, storage accepted 4 MiB"); "" for nothing.
	Detail string
}

// OnSample is the one hook shape of every window: called after each
// sample, for progress and for tests that act at a known sample of a
// window instead of sleeping.
type OnSample func(Tick)

// Window samples a running VM's live state over a window at a fixed rate,
// each sample one short exchange (vm.Ask), so the socket stays free for
// Proxmox's daemons between samples: the one sampling engine of flush,
// limit and discard.
type Window struct {
	VM *vm.VM
	// Query is what each sample asks besides the devices' counters
	// (vm.NeedStats is always added; vm.NeedNodeStats when Nodes is set);
	// its Then runs in each sample's exchange (latency.Tracker.Hook sets
	// latency histograms there, once).
	Query    vm.Query
	Disks    []string      // disk ids to keep; empty keeps every device
	Interval time.Duration // between samples; 0 means 500 ms (2 Hz)
	Timeout  time.Duration // dial, greeting and reply of one exchange; 0 means 2 s
	// Patience is how long one sample retries a busy socket (another
	// client's exchange) before that tick is given up; 0 means Interval.
	// The last sample of a window waits at least 2 s.
	Patience time.Duration
	// OnSample, when set, is called after each sample.
	OnSample OnSample
	// Nodes are block node names (a disk's protocol node, say) whose own
	// counters are read in the same exchange (query-blockstats with
	// query-nodes): a protocol node's driver-specific discard-* counters
	// say what reached the storage.
	Nodes []string
}

// Series is the result of one sampling run.
type Series struct {
	Samples []Sample
	// Missed counts ticks given up because the socket stayed busy for
	// longer than Patience; the series simply has a gap there.
	Missed int
	// Busy counts samples that had to wait for another client.
	Busy int
}

// ErrTooFewSamples means a window produced fewer than two samples.
var ErrTooFewSamples = errors.New("too few samples")

// Take reads one sample now.
func (w *Window) Take(ctx context.Context) (Sample, error) {
	s, _, err := w.take(ctx, w.patience())
	return s, err
}

func (w *Window) take(ctx context.Context, patience time.Duration) (Sample, time.Duration, error) {
	timeout := w.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	q := w.Query
	q.Need |= vm.NeedStats
	if len(w.Nodes) > 0 {
		q.Need |= vm.NeedNodeStats
	}
	a, err := w.VM.AskPatient(ctx, timeout, patience, q)
	if err != nil {
		var waited time.Duration
		if a != nil {
			waited = a.Waited
		}
		return Sample{}, waited, err
	}
	s := Sample{Time: a.At, Stats: map[string]qmp.BlockStats{}, Live: a}
	for id, st := range a.Stats {
		if w.keep(id) {
			st.Timestamp = s.Time.UnixNano()
			s.Stats[id] = st
		}
	}
	if a.Nodes != nil {
		s.Nodes = map[string]qmp.BlockStats{}
		for name, st := range a.Nodes {
			if len(w.Nodes) == 0 || slices.Contains(w.Nodes, name) {
				st.Timestamp = s.Time.UnixNano()
				s.Nodes[name] = st
			}
		}
	}
	return s, a.Waited, nil
}

func (w *Window) patience() time.Duration {
	if w.Patience > 0 {
		return w.Patience
	}
	return w.interval()
}

func (w *Window) interval() time.Duration {
	if w.Interval <= 0 {
		return 500 * time.Millisecond
	}
	return w.Interval
}

func (w *Window) keep(id string) bool {
	return len(w.Disks) == 0 || slices.Contains(w.Disks, id)
}

// Run samples for window: one sample at once, then one per Interval on a
// fixed schedule (Schedule: a slow sample does not shift the later ones),
// the last one at the end of the window. A tick whose socket stays busy
// beyond Patience is skipped; any other error ends the run.
func (w *Window) Run(ctx context.Context, window time.Duration) (*Series, error) {
	iv := w.interval()
	ser := &Series{}
	start := time.Now()
	missed, err := Schedule(ctx, iv, window, func(k int, last bool) (bool, error) {
		patience := w.patience()
		if last {
			// The last sample closes the window: worth waiting for.
			patience = max(patience, 2*time.Second)
		}
		s, waited, err := w.take(ctx, patience)
		if errors.Is(err, qmp.ErrBusy) {
			ser.Missed++
			return false, nil
		}
		if err != nil {
			return true, err
		}
		if waited > 20*time.Millisecond {
			ser.Busy++
		}
		ser.Samples = append(ser.Samples, s)
		if w.OnSample != nil {
			w.OnSample(Tick{N: len(ser.Samples), Elapsed: time.Since(start), Window: window, Sample: s})
		}
		return false, nil
	})
	ser.Missed += missed
	if err != nil {
		return ser, err
	}
	if len(ser.Samples) < 2 {
		return ser, fmt.Errorf("%w: %d of %d in %s (QMP socket busy?)", ErrTooFewSamples, len(ser.Samples), int(window/iv)+1, window)
	}
	return ser, nil
}

// Schedule is the one clock of every sampling loop: it calls take at
// start + k*interval, k = 0, 1, ..., on a fixed schedule (a slow take does
// not shift the later ones). With a window, the last call is at its end
// (last true); with window 0 it runs until ctx ends. A tick still late by
// more than half an interval from the one before is skipped (neither the
// first nor the last; counted in missed). take returning done, or an
// error, ends it; ctx ending while it waits ends it with ctx.Err().
func Schedule(ctx context.Context, interval, window time.Duration, take func(k int, last bool) (done bool, err error)) (missed int, err error) {
	start := time.Now()
	ticks := -1
	if window > 0 {
		ticks = int(window / interval)
	}
	for k := 0; ticks < 0 || k <= ticks; k++ {
		due := start.Add(time.Duration(k) * interval)
		last := k == ticks
		if last {
			due = start.Add(window)
		}
		if d := time.Until(due); d > 0 {
			select {
			case <-ctx.Done():
				return missed, ctx.Err()
			case <-time.After(d):
			}
		} else if k > 0 && !last && -d > interval/2 {
			missed++ // still late from the previous tick: skip this one
			continue
		}
		done, err := take(k, last)
		if done || err != nil {
			return missed, err
		}
	}
	return missed, nil
}

// Rates are a disk's throughput over part of a series.
type Rates struct {
	Disk     string
	From, To time.Time // first and last sample used
	Samples  int       // samples used
	// Bytes and operations per second: the slope of a least-squares line
	// through the counters (see Series.Rates).
	ReadBytesPerSec, WriteBytesPerSec float64
	ReadOpsPerSec, WriteOpsPerSec     float64
	FlushOpsPerSec                    float64
	// Mean latency of the requests that completed between From and To
	// (rd_total_time_ns / rd_operations deltas); 0 when none completed.
	ReadLatency, WriteLatency time.Duration
	// Number of requests in flight (queued in the throttle included), by
	// Little's law: completion rate x the typical latency, the median over
	// the sample intervals of each interval's mean latency (see queueDepth).
	ReadQueueDepth, WriteQueueDepth float64
}

// Seconds is the length of the span the rates cover.
func (r Rates) Seconds() float64 { return r.To.Sub(r.From).Seconds() }

// Rates computes the disk's rates over the samples taken at least skip after
// the first one.
//
// Why skip, and why a fit: a throttled queue admits a burst first, then
// stalls until the bucket has leaked, and only then runs at the limit
// (QEMU-FACTS "Live limits"; measured in sampler/blockstats_test.go and the
// limit tests). The counters of that first part say nothing about the steady
// rate, so they are dropped. Over the rest, the slope of a least-squares line
// through all samples is used rather than last-minus-first: each counter is
// read at a slightly jittered moment (the socket is shared), and a fit over
// many points averages that jitter out where a two-point delta takes the
// jitter of both ends in full.
func (s *Series) Rates(disk string, skip time.Duration) (Rates, error) {
	if len(s.Samples) == 0 {
		return Rates{Disk: disk}, ErrTooFewSamples
	}
	// A sample due exactly at skip may be read a few ms early relative to
	// the first one (each exchange waits a different time for the socket):
	// allow 100 ms so the sample due there is kept.
	from := s.Samples[0].Time.Add(skip)
	if skip > 0 {
		from = from.Add(-100 * time.Millisecond)
	}
	var use []Sample
	for _, sm := range s.Samples {
		if !sm.Time.Before(from) {
			if _, ok := sm.Stats[disk]; !ok {
				return Rates{Disk: disk}, fmt.Errorf("disk %s missing from query-blockstats at %s", disk, sm.Time.Format(time.RFC3339Nano))
			}
			use = append(use, sm)
		}
	}
	return RatesOf(disk, use)
}

// RatesOf computes the disk's rates over exactly these samples (at least 2).
func RatesOf(disk string, use []Sample) (Rates, error) {
	r := Rates{Disk: disk, Samples: len(use)}
	if len(use) < 2 {
		return r, fmt.Errorf("%w: %d samples for %s", ErrTooFewSamples, len(use), disk)
	}
	sort.Slice(use, func(i, j int) bool { return use[i].Time.Before(use[j].Time) })
	first, last := use[0], use[len(use)-1]
	r.From, r.To = first.Time, last.Time
	a, b := first.Stats[disk], last.Stats[disk]
	if b.RdOps < a.RdOps || b.WrOps < a.WrOps || b.RdBytes < a.RdBytes || b.WrBytes < a.WrBytes {
		return r, fmt.Errorf("%s: counters went backwards (VM restarted during the window?)", disk)
	}
	xs := make([]float64, len(use))
	for i, sm := range use {
		xs[i] = sm.Time.Sub(first.Time).Seconds()
	}
	fit := func(get func(qmp.BlockStats) int64) float64 {
		ys := make([]float64, len(use))
		for i, sm := range use {
			ys[i] = float64(get(sm.Stats[disk]) - get(a))
		}
		return Slope(xs, ys)
	}
	r.ReadBytesPerSec = fit(func(b qmp.BlockStats) int64 { return b.RdBytes })
	r.WriteBytesPerSec = fit(func(b qmp.BlockStats) int64 { return b.WrBytes })
	r.ReadOpsPerSec = fit(func(b qmp.BlockStats) int64 { return b.RdOps })
	r.WriteOpsPerSec = fit(func(b qmp.BlockStats) int64 { return b.WrOps })
	r.FlushOpsPerSec = fit(func(b qmp.BlockStats) int64 { return b.FlushOps })
	d := Diff(a, b)
	if d.RdOps > 0 {
		r.ReadLatency = time.Duration(d.RdTotalTimeNs / d.RdOps)
	}
	if d.WrOps > 0 {
		r.WriteLatency = time.Duration(d.WrTotalTimeNs / d.WrOps)
	}
	r.ReadQueueDepth = queueDepth(r.ReadOpsPerSec, use, disk, func(b qmp.BlockStats) (int64, int64) { return b.RdOps, b.RdTotalTimeNs })
	r.WriteQueueDepth = queueDepth(r.WriteOpsPerSec, use, disk, func(b qmp.BlockStats) (int64, int64) { return b.WrOps, b.WrTotalTimeNs })
	return r, nil
}

// queueDepth is Little's law, L = rate x W, with W the median over the
// sample intervals (those that completed requests) of each interval's mean
// latency.
//
// Not the total latency completed over the span divided by its length:
// that sum holds each completed request's whole latency, including what it
// waited before the span began. In a steady state that cancels out (what
// the requests in flight at the start bring in, those in flight at the end
// take out); after a backlog it does not. Requests that waited out QEMU
// being stopped, or a queue that met the limit in the skipped start,
// complete in the first interval and count seconds each: a write queue of 8
// read 10.1 over the steady part, 39 in that interval
// (limit/testdata/series-blockdev-stopped.json), and 32 reads stalled for
// 3 s read 79 over a 2 s steady part (TestRatesQueueDepthAfterBacklog).
// The median leaves such an interval out; in a steady state it gives what
// the mean gives (7.8 for a queue of 8 in every recorded series).
func queueDepth(rate float64, use []Sample, disk string, get func(qmp.BlockStats) (ops, totalNs int64)) float64 {
	var lat []float64
	for i := 1; i < len(use); i++ {
		o0, t0 := get(use[i-1].Stats[disk])
		o1, t1 := get(use[i].Stats[disk])
		if o1 > o0 {
			lat = append(lat, float64(t1-t0)/float64(o1-o0)/1e9)
		}
	}
	if len(lat) == 0 || !(rate > 0) {
		return 0
	}
	sort.Float64s(lat)
	m := lat[len(lat)/2]
	if len(lat)%2 == 0 {
		m = (lat[len(lat)/2-1] + m) / 2
	}
	return rate * m
}

// DeltaRates is the plain two-point rate between the first and last sample
// of use, for comparison with the fit (and for callers that want it).
func DeltaRates(disk string, a, b Sample) Rates {
	r := Rates{Disk: disk, From: a.Time, To: b.Time, Samples: 2}
	sec := b.Time.Sub(a.Time).Seconds()
	if sec <= 0 {
		return r
	}
	d := Diff(a.Stats[disk], b.Stats[disk])
	r.ReadBytesPerSec = float64(d.RdBytes) / sec
	r.WriteBytesPerSec = float64(d.WrBytes) / sec
	r.ReadOpsPerSec = float64(d.RdOps) / sec
	r.WriteOpsPerSec = float64(d.WrOps) / sec
	r.FlushOpsPerSec = float64(d.FlushOps) / sec
	return r
}

// Diff returns b - a for every counter (b taken after a).
func Diff(a, b qmp.BlockStats) qmp.BlockStats {
	return qmp.BlockStats{
		ID: b.ID, NodeName: b.NodeName,
		RdBytes: b.RdBytes - a.RdBytes, WrBytes: b.WrBytes - a.WrBytes,
		RdOps: b.RdOps - a.RdOps, WrOps: b.WrOps - a.WrOps,
		FlushOps: b.FlushOps - a.FlushOps, FlushTotalTimeNs: b.FlushTotalTimeNs - a.FlushTotalTimeNs,
		RdTotalTimeNs: b.RdTotalTimeNs - a.RdTotalTimeNs, WrTotalTimeNs: b.WrTotalTimeNs - a.WrTotalTimeNs,
		UnmapOps: b.UnmapOps - a.UnmapOps, UnmapBytes: b.UnmapBytes - a.UnmapBytes,
		DiscardNbOK: b.DiscardNbOK - a.DiscardNbOK, DiscardNbFailed: b.DiscardNbFailed - a.DiscardNbFailed,
		DiscardBytesOK:    b.DiscardBytesOK - a.DiscardBytesOK,
		HasDriverSpecific: a.HasDriverSpecific && b.HasDriverSpecific,
		Timestamp:         b.Timestamp - a.Timestamp,
	}
}

// Slope is the least-squares slope of ys over xs (NaN when xs has no spread).
func Slope(xs, ys []float64) float64 {
	n := float64(len(xs))
	if len(xs) < 2 || len(xs) != len(ys) {
		return math.NaN()
	}
	var sx, sy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
	}
	mx, my := sx/n, sy/n
	var num, den float64
	for i := range xs {
		num += (xs[i] - mx) * (ys[i] - my)
		den += (xs[i] - mx) * (xs[i] - mx)
	}
	if den == 0 {
		return math.NaN()
	}
	return num / den
}
