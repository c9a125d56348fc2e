package sampler

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/qmp"
)

func TestSlope(t *testing.T) {
	if s := Slope([]float64{0, 1, 2, 3}, []float64{5, 7, 9, 11}); s != 2 {
		t.Errorf("slope %v", s)
	}
	// Symmetric noise around a line does not move the slope.
	if s := Slope([]float64{0, 1, 2, 3, 4}, []float64{0, 11, 19, 31, 39}); math.Abs(s-9.8) > 1e-9 {
		t.Errorf("noisy slope %v", s)
	}
	if s := Slope([]float64{1, 1}, []float64{1, 2}); !math.IsNaN(s) {
		t.Errorf("no spread: %v", s)
	}
}

// series builds samples every 500 ms with timestamps jittered by up to
// ±40 ms, as a shared socket makes them, and counters from f(seconds).
func series(n int, f func(sec float64) qmp.BlockStats) *Series {
	t0 := time.Unix(1000, 0)
	jit := []time.Duration{0, 30, -20, 40, -40, 10, -30, 20}
	s := &Series{}
	for i := 0; i < n; i++ {
		at := t0.Add(time.Duration(i)*500*time.Millisecond + jit[i%len(jit)]*time.Millisecond)
		s.Samples = append(s.Samples, Sample{Time: at, Stats: map[string]qmp.BlockStats{"scsi1": f(at.Sub(t0).Seconds())}})
	}
	return s
}

func TestRatesSteadyPartAndLittlesLaw(t *testing.T) {
	// A queue that starts with a 40 MiB burst, stalls until t=2.5 s, then
	// runs at 20 MiB/s in 1 MiB writes with 8 in flight (400 ms each), and
	// 500 reads/s of 4 KiB with 32 in flight (64 ms each).
	s := series(21, func(sec float64) qmp.BlockStats {
		wr := 40.0
		if sec > 2.5 {
			wr += 20 * (sec - 2.5)
		}
		ops := int64(wr)
		rd := int64(500 * sec)
		return qmp.BlockStats{ID: "scsi1", WrBytes: int64(wr * (1 << 20)), WrOps: ops, WrTotalTimeNs: ops * 400e6,
			RdBytes: rd * 4096, RdOps: rd, RdTotalTimeNs: rd * 64e6}
	})
	r, err := s.Rates("scsi1", 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(r.WriteBytesPerSec/(1<<20)-20) > 0.2 || math.Abs(r.ReadOpsPerSec-500) > 1 {
		t.Errorf("steady: write %.3f MiB/s read %.1f IOPS", r.WriteBytesPerSec/(1<<20), r.ReadOpsPerSec)
	}
	if r.WriteLatency != 400*time.Millisecond || r.ReadLatency != 64*time.Millisecond {
		t.Errorf("latency %s %s", r.WriteLatency, r.ReadLatency)
	}
	if math.Abs(r.WriteQueueDepth-8) > 0.5 || math.Abs(r.ReadQueueDepth-32) > 0.5 {
		t.Errorf("queue depth %.2f %.2f", r.WriteQueueDepth, r.ReadQueueDepth)
	}
	if r.Seconds() < 6.8 || r.Samples != 15 {
		t.Errorf("steady part %.2f s, %d samples", r.Seconds(), r.Samples)
	}
	// Over the whole window the burst and stall bias the rate.
	all, _ := s.Rates("scsi1", 0)
	if math.Abs(all.WriteBytesPerSec/(1<<20)-20) < 1 {
		t.Errorf("whole window %.2f MiB/s: the synthetic burst should bias it", all.WriteBytesPerSec/(1<<20))
	}
}

// TestRatesQueueDepthAfterBacklog: 32 reads in flight at 500 IOPS (64 ms
// each), and the span starts as QEMU resumes from a 3 s stop: the 32
// requests that waited it out complete in the first interval. The queue is
// still 32; the total latency over the span said 79.
func TestRatesQueueDepthAfterBacklog(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := &Series{}
	var ops, total int64
	for i := 0; i <= 4; i++ {
		if i == 1 {
			ops, total = ops+250, total+32*3e9+218*64e6
		} else if i > 1 {
			ops, total = ops+250, total+250*64e6
		}
		s.Samples = append(s.Samples, Sample{Time: t0.Add(time.Duration(i) * 500 * time.Millisecond),
			Stats: map[string]qmp.BlockStats{"scsi1": {RdOps: ops, RdBytes: ops * 4096, RdTotalTimeNs: total}}})
	}
	r, err := s.Rates("scsi1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(r.ReadQueueDepth-32) > 0.5 || math.Abs(r.ReadOpsPerSec-500) > 1 {
		t.Errorf("queue depth %.1f at %.0f IOPS, want 32", r.ReadQueueDepth, r.ReadOpsPerSec)
	}
	// The mean latency is what the requests saw, stall included.
	if r.ReadLatency < 150*time.Millisecond {
		t.Errorf("mean latency %s", r.ReadLatency)
	}
	if r.WriteQueueDepth != 0 {
		t.Errorf("no writes, write queue %.1f", r.WriteQueueDepth)
	}
}

func TestRatesErrors(t *testing.T) {
	s := series(4, func(sec float64) qmp.BlockStats { return qmp.BlockStats{WrOps: int64(100 - 10*sec)} })
	if _, err := s.Rates("scsi1", 0); err == nil {
		t.Errorf("counters going backwards (a restarted VM) must be an error")
	}
	if _, err := s.Rates("scsi1", 10*time.Second); !errors.Is(err, ErrTooFewSamples) {
		t.Errorf("skip past the end: %v", err)
	}
	if _, err := s.Rates("virtio0", 0); err == nil {
		t.Errorf("unknown disk: no error")
	}
}
