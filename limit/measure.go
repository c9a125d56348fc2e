package limit

import (
	"context"
	"fmt"
	"time"

	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/units"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// The measurement window of --verify.
const (
	// DefaultWindow is --for's default.
	DefaultWindow = 10 * time.Second
	// Interval is the sampling period: 2 Hz, one short QMP exchange each.
	Interval = 500 * time.Millisecond
	// Skip is the start of the window left out of the verdict, counted
	// from the start of the window (not from the first sample a busy
	// socket let through): a queue that starts against a limit is admitted
	// in a burst and then stalls until the bucket has leaked. Measured with
	// qemu-io load (sampler and limit tests): a 48 x 1 MiB queue against
	// 20 MiB/s under -blockdev runs 0 B/s until 2.6 s; a limit tightened
	// under a running queue is steady within 0.5 s
	// (testdata/series-*-warm.json). 3 s covers both with margin.
	Skip = 3 * time.Second
	// MinSteady is the shortest steady part a verdict is given on.
	MinSteady = 2 * time.Second
	// MinWindow is the shortest window --verify accepts.
	MinWindow = Skip + MinSteady
	// MaxWindow is the longest (as flush's: ten minutes).
	MaxWindow = 10 * time.Minute
	// minSteadySpan is MinSteady less a sample of jitter: the samples that
	// bound the steady part are read when the shared socket lets them.
	minSteadySpan = MinSteady - Interval/5
	// gapAfter is the spacing of two samples that makes a gap: more than
	// one tick missed's worth beyond the schedule.
	gapAfter = Interval * 3 / 2
)

// Measurement is one window of query-blockstats samples of a disk.
type Measurement struct {
	Disk string
	// Start is when the window began: Skip and the gaps count from here.
	Start    time.Time
	Window   time.Duration
	Interval time.Duration
	Samples  []sampler.Sample
	Missed   int // ticks given up (busy socket, QEMU not answering)
}

// Measure samples the disk of the running VM for window at 2 Hz through
// sampler.Window (one short exchange per sample, a busy socket retried
// within a tick). onSample, when set, is called after each sample: progress
// display, and tests that step through the window. The samples taken are
// returned with an error too.
func Measure(ctx context.Context, n node.Node, v *vm.VM, disk string, window time.Duration, onSample sampler.OnSample) (*Measurement, error) {
	return measure(ctx, n, v, disk, window, onSample, nil)
}

// measure is Measure, setting the disk's latency histograms through hist
// in the first sample's exchange when hist is set.
func measure(ctx context.Context, n node.Node, v *vm.VM, disk string, window time.Duration, onSample sampler.OnSample, hist *latency.Tracker) (*Measurement, error) {
	b := &sampler.Window{VM: v, Disks: []string{disk}, Interval: Interval, Timeout: n.Timeout, OnSample: onSample}
	b.Query.Then = hist.Hook(v, n.Timeout, []string{disk})
	m := &Measurement{Disk: disk, Start: time.Now(), Window: window, Interval: Interval}
	ser, err := b.Run(ctx, window)
	if ser != nil {
		m.Samples, m.Missed = ser.Samples, ser.Missed
	}
	return m, err
}

// Steady returns the disk's rates over the steady part: the samples taken
// from Skip after the start of the window on. A steady part shorter than
// MinSteady gives no verdict.
func (m *Measurement) Steady() (sampler.Rates, error) {
	from := m.Start.Add(Skip)
	var use []sampler.Sample
	for _, s := range m.Samples {
		if s.Time.Before(from) {
			continue
		}
		if _, ok := s.Stats[m.Disk]; !ok {
			return sampler.Rates{Disk: m.Disk}, fmt.Errorf("disk %s missing from query-blockstats at %.1f s", m.Disk, m.at(s.Time))
		}
		use = append(use, s)
	}
	if len(use) < 2 {
		return sampler.Rates{Disk: m.Disk}, fmt.Errorf("%d sample(s) from %s on, a verdict needs %s of them", len(use), Skip, MinSteady)
	}
	r, err := sampler.RatesOf(m.Disk, use)
	if err == nil && r.To.Sub(r.From) < minSteadySpan {
		err = fmt.Errorf("the samples from %s on span %.1f s, a verdict needs %s", Skip, r.Seconds(), MinSteady)
	}
	return r, err
}

// steadyPercentiles are the latency percentiles between the two samples
// that bound the steady part r (nil without histograms there).
func (m *Measurement) steadyPercentiles(r sampler.Rates) *latency.Percentiles {
	var a, b *sampler.Sample
	for i := range m.Samples {
		switch m.Samples[i].Time {
		case r.From:
			a = &m.Samples[i]
		case r.To:
			b = &m.Samples[i]
		}
	}
	if a == nil || b == nil {
		return nil
	}
	p := latency.IntervalOf(a.Stats[m.Disk], b.Stats[m.Disk])
	if !p.Any() {
		return nil
	}
	return &p
}

// at is t in seconds from the start of the window.
func (m *Measurement) at(t time.Time) float64 { return units.Round(t.Sub(m.Start).Seconds(), 2) }

// Gaps are the spans of the window without a sample: between two samples
// (or a window edge and a sample) more than 1.5 intervals apart.
func (m *Measurement) Gaps() []Gap {
	points := []float64{0}
	for _, s := range m.Samples {
		points = append(points, m.at(s.Time))
	}
	// The end of the window closes the last span; after a last sample
	// taken late, it adds nothing.
	points = append(points, m.Window.Seconds())
	out := []Gap{}
	for i := 1; i < len(points); i++ {
		if points[i]-points[i-1] > gapAfter.Seconds() {
			out = append(out, Gap{FromS: points[i-1], ToS: points[i]})
		}
	}
	return out
}

// SteadySeconds is the length of the steady part as planned.
func (m *Measurement) SteadySeconds() float64 { return (m.Window - Skip).Seconds() }

// Sampled is how much of the steady part has samples: the steady part
// less the spans of gaps within it.
func (m *Measurement) Sampled(gaps []Gap) float64 {
	from, to := Skip.Seconds(), m.Window.Seconds()
	s := to - from
	for _, g := range gaps {
		s -= max(0, min(g.ToS, to)-max(g.FromS, from))
	}
	return units.Round(s, 2)
}
