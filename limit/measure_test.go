package limit

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/sampler"
)

var t0 = time.Unix(1700000000, 0)

var series = []string{
	"series-blockdev-cold.json", "series-blockdev-warm.json", "series-blockdev-stopped.json",
	"series-drive-cold.json", "series-drive-warm.json", "series-drive-stopped.json",
}

// TestSteadyOverRecordedSeries: the recorded runs (a disk under mbps_wr=20
// and iops_rd=500 with qemu-io load: 8 writes and 32 reads in flight,
// testdata/series-*.json) give the limits within 3 % and "holds" for both,
// whether the load started with the window (burst and stall in the skipped
// start), ran before it, or QEMU was stopped for 3 s in it. The queue
// depth is never more than the load could have in flight, and for the
// writes (a queue of 8 the generator keeps full) within 10 % of what it
// kept. The reads' queue is refilled every 5 ms on a busy machine: what
// the generator had in flight at each sample scatters too much to hold the
// figure to.
func TestSteadyOverRecordedSeries(t *testing.T) {
	for _, name := range series {
		f := loadSeries(t, name)
		m := f.measurement(t0)
		r, err := m.Steady()
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		wr, rd := r.WriteBytesPerSec/mib, r.ReadOpsPerSec
		if math.Abs(wr/20-1) > 0.03 || math.Abs(rd/500-1) > 0.03 {
			t.Errorf("%s: write %.2f MiB/s, read %.1f IOPS", name, wr, rd)
		}
		if r.From.Before(t0.Add(Skip)) || r.Seconds() < 5.5 {
			t.Errorf("%s: steady part %s to %s", name, r.From.Sub(t0), r.To.Sub(t0))
		}
		for _, j := range Judge(qemuserver.Limits(f.Limits), r) {
			if j.Verdict != Holds {
				t.Errorf("%s: %s %s: %s", name, j.Limit, j.Verdict, j.Reason)
			}
		}
		trueRd, trueWr := f.trueDepth(Skip)
		t.Logf("%s: write %.2f MiB/s queue %.1f (load %.1f), read %.1f IOPS queue %.1f (load %.1f)", name, wr, r.WriteQueueDepth, trueWr, rd, r.ReadQueueDepth, trueRd)
		if r.WriteQueueDepth > 8 || r.ReadQueueDepth > 32 || math.Abs(r.WriteQueueDepth/trueWr-1) > 0.10 || r.ReadQueueDepth < 16 {
			t.Errorf("%s: queue depth read %.1f write %.1f, the load kept %.1f and %.1f", name, r.ReadQueueDepth, r.WriteQueueDepth, trueRd, trueWr)
		}
	}
}

// TestQueueDepthAfterAStop (issue 15 #8): QEMU stopped for 3 s with the
// queues full; the writes that waited it out complete in the first
// interval of the steady part. The total latency completed per second over
// the steady part (Little's law before the fix) says more than the 8 writes
// the load can have in flight; the median interval does not.
func TestQueueDepthAfterAStop(t *testing.T) {
	f := loadSeries(t, "series-blockdev-stopped.json")
	r, err := f.measurement(t0).Steady()
	if err != nil {
		t.Fatal(err)
	}
	_, trueWr := f.trueDepth(Skip)
	before := f.totalLatencyDepth(Skip)
	t.Logf("write queue: load %.1f, median interval %.1f, total latency per second %.1f", trueWr, r.WriteQueueDepth, before)
	if before < 8.8 {
		t.Fatalf("the recorded series does not show the backlog (%.1f): record it again", before)
	}
	if r.WriteQueueDepth > 8 || math.Abs(r.WriteQueueDepth/trueWr-1) > 0.10 {
		t.Errorf("write queue depth %.1f, the load kept %.1f", r.WriteQueueDepth, trueWr)
	}
}

// TestSteadyCountsFromWindowStart (issue 15 #7): a socket busy for the
// first 1.5 s of a 5 s window. The unjudged 3 s count from the start of the
// window, so the samples from 3 s to 5 s still give a verdict; counted from
// the first sample (1.5 s) they left 0.5 s.
func TestSteadyCountsFromWindowStart(t *testing.T) {
	f := loadSeries(t, "series-blockdev-warm.json")
	m := f.measurement(t0)
	m.Window = 5 * time.Second
	var kept []sampler.Sample
	for _, s := range m.Samples {
		if at := s.Time.Sub(t0); at >= 1500*time.Millisecond && at <= 5100*time.Millisecond {
			kept = append(kept, s)
		}
	}
	m.Samples, m.Missed = kept, 3
	r, err := m.Steady()
	if err != nil {
		t.Fatal(err)
	}
	if r.Samples != 5 || r.From.Sub(t0) < Skip || r.From.Sub(t0) > Skip+100*time.Millisecond || r.Seconds() < 1.9 {
		t.Errorf("steady part from %s, %.2f s, %d samples", r.From.Sub(t0), r.Seconds(), r.Samples)
	}
	if math.Abs(r.WriteBytesPerSec/mib/20-1) > 0.05 {
		t.Errorf("write %.2f MiB/s", r.WriteBytesPerSec/mib)
	}
	gaps := m.Gaps()
	if len(gaps) != 1 || gaps[0].FromS != 0 || gaps[0].ToS < 1.5 || gaps[0].ToS > 1.6 || m.Sampled(gaps) != 2 {
		t.Errorf("gaps %+v, sampled %v", gaps, m.Sampled(gaps))
	}
}

func TestSteadyErrors(t *testing.T) {
	f := loadSeries(t, "series-drive-warm.json")
	cut := func(from, to time.Duration) *Measurement {
		m := f.measurement(t0)
		var kept []sampler.Sample
		for _, s := range m.Samples {
			if at := s.Time.Sub(t0); at >= from && at <= to {
				kept = append(kept, s)
			}
		}
		m.Samples = kept
		return m
	}
	for _, tc := range []struct {
		m   *Measurement
		err string
	}{
		{cut(0, 3200*time.Millisecond), "1 sample(s) from 3s on, a verdict needs 2s of them"},
		{cut(0, 2900*time.Millisecond), "0 sample(s) from 3s on"},
		{cut(0, 4600*time.Millisecond), "the samples from 3s on span 1.5 s, a verdict needs 2s"},
	} {
		if _, err := tc.m.Steady(); err == nil || err.Error() != tc.err && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%d samples: %v, want %q", len(tc.m.Samples), err, tc.err)
		}
	}
	// A span of MinSteady less a fifth of a tick still gives a verdict
	// (the samples at its ends are read when the socket lets them).
	m := cut(0, 5200*time.Millisecond)
	for i, s := range m.Samples {
		if s.Time.Sub(t0) >= Skip {
			m.Samples[i].Time = t0.Add(Skip)
			break
		}
	}
	m.Samples[len(m.Samples)-1].Time = t0.Add(4900 * time.Millisecond)
	if _, err := m.Steady(); err != nil {
		t.Errorf("1.9 s: %v", err)
	}
	m.Samples[len(m.Samples)-1].Time = t0.Add(4890 * time.Millisecond)
	if _, err := m.Steady(); err == nil {
		t.Errorf("1.89 s: a verdict")
	}
	// Two samples 2 s apart are enough.
	m = cut(0, 5200*time.Millisecond)
	var two []sampler.Sample
	for _, s := range m.Samples {
		if at := s.Time.Sub(t0); at < 3100*time.Millisecond || at > 4900*time.Millisecond {
			two = append(two, s)
		}
	}
	m.Samples = two
	if r, err := m.Steady(); err != nil || r.Samples != 2 {
		t.Errorf("two samples: %+v %v", r, err)
	}
	// A sample without the disk (hot-unplugged) is an error.
	m = f.measurement(t0)
	delete(m.Samples[10].Stats, "scsi1")
	if _, err := m.Steady(); err == nil || !strings.Contains(err.Error(), "disk scsi1 missing from query-blockstats at 5.") {
		t.Errorf("missing disk: %v", err)
	}
}

func TestGaps(t *testing.T) {
	full := loadSeries(t, "series-drive-warm.json").measurement(t0)
	if g := full.Gaps(); len(g) != 0 || full.Sampled(g) != 7 || full.SteadySeconds() != 7 {
		t.Errorf("a full window: gaps %+v, sampled %v of %v", g, full.Sampled(g), full.SteadySeconds())
	}
	// QEMU stopped from 1 s to 4 s.
	stopped := loadSeries(t, "series-blockdev-stopped.json").measurement(t0)
	g := stopped.Gaps()
	if len(g) != 1 || g[0].FromS < 0.4 || g[0].FromS > 1.1 || g[0].ToS < 4 || g[0].ToS > 4.6 {
		t.Fatalf("gaps %+v", g)
	}
	if s := stopped.Sampled(g); math.Abs(s-(7-(g[0].ToS-3))) > 0.01 {
		t.Errorf("sampled %v", s)
	}
	// Built by hand: a gap at the start, one inside, none at the end.
	m := &Measurement{Start: t0, Window: 10 * time.Second, Interval: Interval}
	for _, at := range []float64{1.5, 2, 2.5, 3, 6, 6.5, 6.74, 7.5, 8, 8.5, 9, 9.5, 10.01} {
		m.Samples = append(m.Samples, sampler.Sample{Time: t0.Add(time.Duration(at * float64(time.Second)))})
	}
	want := []Gap{{0, 1.5}, {3, 6}, {6.74, 7.5}}
	if g := m.Gaps(); len(g) != 3 || g[0] != want[0] || g[1] != want[1] || g[2] != want[2] {
		t.Errorf("gaps %+v, want %+v", g, want)
	}
	if s := m.Sampled(m.Gaps()); s != 3.24 {
		t.Errorf("sampled %v, want 7 - 3 - 0.76", s)
	}
	// The last tick missed: a gap to the end of the window.
	m.Samples = m.Samples[:len(m.Samples)-2]
	if g := m.Gaps(); g[len(g)-1] != (Gap{9, 10}) || m.Sampled(g) != 2.24 {
		t.Errorf("gaps %+v, sampled %v", g, m.Sampled(g))
	}
	// A tick half late is no gap.
	m.Samples = []sampler.Sample{{Time: t0}, {Time: t0.Add(750 * time.Millisecond)}, {Time: t0.Add(10 * time.Second)}}
	if g := m.Gaps(); len(g) != 1 || g[0] != (Gap{0.75, 10}) {
		t.Errorf("gaps %+v", g)
	}
}
