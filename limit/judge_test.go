package limit

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/sampler"
)

const mib = qemuserver.MiB

// rates is a 7 s steady part (a 10 s window less its first 3 s).
func rates(rdMiB, wrMiB, rdIOPS, wrIOPS float64) sampler.Rates {
	t0 := time.Unix(1000, 0)
	return sampler.Rates{Disk: "scsi1", From: t0, To: t0.Add(7 * time.Second),
		ReadBytesPerSec: rdMiB * mib, WriteBytesPerSec: wrMiB * mib, ReadOpsPerSec: rdIOPS, WriteOpsPerSec: wrIOPS}
}

func verdictFor(t *testing.T, js []Judgement, key string) Judgement {
	t.Helper()
	for _, j := range js {
		if j.Limit == key {
			return j
		}
	}
	t.Fatalf("no verdict for %s in %+v", key, js)
	return Judgement{}
}

func TestJudgeThresholds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		limits qemuserver.Limits
		r      sampler.Rates
		key    string
		want   Verdict
	}{
		// mbps_wr=20: binding from 16 MiB/s, exceeded above 21.
		{"79 %", qemuserver.Limits{"bps-write": 20 * mib}, rates(0, 15.8, 0, 16), "mbps_wr", NotBinding},
		{"80 %", qemuserver.Limits{"bps-write": 20 * mib}, rates(0, 16, 0, 16), "mbps_wr", Holds},
		{"81 %", qemuserver.Limits{"bps-write": 20 * mib}, rates(0, 16.2, 0, 16), "mbps_wr", Holds},
		{"104.9 %", qemuserver.Limits{"bps-write": 20 * mib}, rates(0, 20.98, 0, 21), "mbps_wr", Holds},
		{"105 %", qemuserver.Limits{"bps-write": 20 * mib}, rates(0, 21, 0, 21), "mbps_wr", Holds},
		{"105.1 %", qemuserver.Limits{"bps-write": 20 * mib}, rates(0, 21.02, 0, 21), "mbps_wr", Exceeded},
		{"idle", qemuserver.Limits{"bps-write": 20 * mib}, rates(0, 0, 0, 0), "mbps_wr", NotBinding},
		// iops_rd=500: binding from 400, exceeded above 525.
		{"iops 79 %", qemuserver.Limits{"iops-read": 500}, rates(1.5, 0, 395, 0), "iops_rd", NotBinding},
		{"iops 80 %", qemuserver.Limits{"iops-read": 500}, rates(1.5, 0, 400, 0), "iops_rd", Holds},
		{"iops 105 %", qemuserver.Limits{"iops-read": 500}, rates(2, 0, 525, 0), "iops_rd", Holds},
		{"iops 105.1 %", qemuserver.Limits{"iops-read": 500}, rates(2, 0, 525.5, 0), "iops_rd", Exceeded},
		// A read limit counts reads only, a write limit writes only.
		{"reads under a write limit", qemuserver.Limits{"bps-write": 20 * mib}, rates(300, 10, 300, 10), "mbps_wr", NotBinding},
		{"writes under a read limit", qemuserver.Limits{"bps-read": 10 * mib}, rates(10, 300, 10, 300), "mbps_rd", Holds},
		{"write ops under a read ops limit", qemuserver.Limits{"iops-read": 100}, rates(0.3, 50, 90, 5000), "iops_rd", Holds},
		{"read ops under a write ops limit", qemuserver.Limits{"iops-write": 100}, rates(50, 0.3, 5000, 70), "iops_wr", NotBinding},
		// A total limit counts both.
		{"mbps total: 12 + 9", qemuserver.Limits{"bps-total": 20 * mib}, rates(12, 9, 12, 9), "mbps", Holds},
		{"mbps total: 12 + 10", qemuserver.Limits{"bps-total": 20 * mib}, rates(12, 10, 12, 10), "mbps", Exceeded},
		{"mbps total: 8 + 7.9", qemuserver.Limits{"bps-total": 20 * mib}, rates(8, 7.9, 8, 8), "mbps", NotBinding},
		{"mbps total: 8 + 8", qemuserver.Limits{"bps-total": 20 * mib}, rates(8, 8, 8, 8), "mbps", Holds},
		{"iops total: 300 + 200", qemuserver.Limits{"iops-total": 500}, rates(1, 1, 300, 200), "iops", Holds},
		{"iops total: 300 + 230", qemuserver.Limits{"iops-total": 500}, rates(1, 1, 300, 230), "iops", Exceeded},
		{"iops total: 200 + 190", qemuserver.Limits{"iops-total": 500}, rates(1, 1, 200, 190), "iops", NotBinding},
		{"iops total: 200 + 200", qemuserver.Limits{"iops-total": 500}, rates(1, 1, 200, 200), "iops", Holds},
	} {
		j := verdictFor(t, Judge(tc.limits, tc.r), tc.key)
		if j.Verdict != tc.want {
			t.Errorf("%s: %s (measured %v of %v, allowed %v), want %s", tc.name, j.Verdict, j.Measured, j.Value, j.Allowed, tc.want)
		}
	}
}

// TestJudgeBurst: a configured burst lets max x length through once, on
// top of the rate: averaged over the 7 s steady part.
func TestJudgeBurst(t *testing.T) {
	burst := qemuserver.Limits{"bps-write": 20 * mib, "bps-write-max": 40 * mib, "bps-write-max-length": 5}
	// 21 MiB/s + 40 x 5 / 7 = 49.571 MiB/s
	for _, tc := range []struct {
		limits   qemuserver.Limits
		wr       float64
		want     Verdict
		allowed  float64
		scenario string
	}{
		{burst, 45, Holds, 49.571, "within the burst"},
		{burst, 49.5, Holds, 49.571, "just within the burst"},
		{burst, 49.7, Exceeded, 49.571, "beyond the burst"},
		{qemuserver.Limits{"bps-write": 20 * mib}, 45, Exceeded, 21, "the same without a burst"},
		// A burst without a length lasts 1 s: 21 + 40 / 7 = 26.714.
		{qemuserver.Limits{"bps-write": 20 * mib, "bps-write-max": 40 * mib}, 26.7, Holds, 26.714, "1 s burst"},
		{qemuserver.Limits{"bps-write": 20 * mib, "bps-write-max": 40 * mib}, 26.8, Exceeded, 26.714, "beyond a 1 s burst"},
		{qemuserver.Limits{"bps-write": 20 * mib, "bps-write-max": 40 * mib, "bps-write-max-length": 1}, 26.8, Exceeded, 26.714, "a length of 1"},
		// Another direction's burst is no allowance.
		{qemuserver.Limits{"bps-write": 20 * mib, "bps-read-max": 40 * mib, "bps-read": 20 * mib}, 26, Exceeded, 21, "a read burst"},
	} {
		j := verdictFor(t, Judge(tc.limits, rates(0, tc.wr, 0, tc.wr)), "mbps_wr")
		if j.Verdict != tc.want || j.Allowed != tc.allowed {
			t.Errorf("%s: %s, allowed %v; want %s, %v", tc.scenario, j.Verdict, j.Allowed, tc.want, tc.allowed)
		}
	}
	// iops bursts alike: 525 + 1000 x 7 / 7 = 1525.
	iops := qemuserver.Limits{"iops-read": 500, "iops-read-max": 1000, "iops-read-max-length": 7}
	if j := verdictFor(t, Judge(iops, rates(4, 0, 1500, 0)), "iops_rd"); j.Verdict != Holds || j.Allowed != 1525 {
		t.Errorf("iops burst: %+v", j)
	}
	// No steady span (no rates): no allowance, no division by zero.
	wk, _ := Key("mbps_wr")
	if a := burstAllowance(wk, burst, 0); a != 0 {
		t.Errorf("allowance over 0 s: %v", a)
	}
	if a := burstAllowance(wk, burst, 10); a != 20 {
		t.Errorf("allowance 40 MiB/s x 5 s over 10 s: %v", a)
	}
	if a := burstAllowance(qemuserver.LimitKeys[0], qemuserver.Limits{"bps-total": 1, "bps-total-max": 7 * mib}, 7); a != 1 {
		t.Errorf("allowance 7 MiB over 7 s: %v", a)
	}
}

// TestJudgeSet: exactly the rate limits in force get a verdict, in
// qemu-server's order; bursts and lengths are allowances, not judged.
func TestJudgeSet(t *testing.T) {
	l := qemuserver.Limits{"bps-write": 20 * mib, "bps-write-max": 40 * mib, "bps-write-max-length": 5, "iops-read": 500,
		"iops-read-max": 600, "bps-read": 0, "iops-total-max-length": 1}
	var keys []string
	for _, j := range Judge(l, rates(1, 20, 500, 20)) {
		keys = append(keys, j.Limit)
	}
	if !reflect.DeepEqual(keys, []string{"iops_rd", "mbps_wr"}) {
		t.Errorf("judged %v", keys)
	}
	if js := Judge(qemuserver.Limits{}, rates(1, 1, 1, 1)); js == nil || len(js) != 0 {
		t.Errorf("no limits: %#v, want an empty list", js)
	}
}

// TestJudgeFigures: what a verdict reports beside the verdict: the lab's
// numbers (Lab 37: 1 MiB writes at QD8 against 20 MiB/s wait 8 / 20 per
// second = 0.40 s; 4 KiB reads at QD32 against 500 IOPS 64 ms).
func TestJudgeFigures(t *testing.T) {
	r := rates(1.953125, 20, 500, 20)
	r.ReadLatency, r.WriteLatency = 64*time.Millisecond, 400*time.Millisecond
	r.ReadQueueDepth, r.WriteQueueDepth = 32, 8
	js := Judge(qemuserver.Limits{"bps-write": 20 * mib, "iops-read": 500}, r)
	wr, rd := verdictFor(t, js, "mbps_wr"), verdictFor(t, js, "iops_rd")
	want := Judgement{Limit: "mbps_wr", Value: 20, Unit: "MiB/s", Measured: 20, Ratio: 1, Allowed: 21, QueueDepth: 8, LatencyMs: 400,
		Verdict: Holds, Reason: "the guest pushed against the limit and got 100.0 % of it"}
	if wr.PredictedLatencyMs == nil || *wr.PredictedLatencyMs != 400 {
		t.Errorf("mbps_wr predicted %v, want 8 x 1 MiB / 20 MiB/s = 400 ms", wr.PredictedLatencyMs)
	}
	wr.PredictedLatencyMs = nil
	if !reflect.DeepEqual(wr, want) {
		t.Errorf("mbps_wr:\n%+v\nwant\n%+v", wr, want)
	}
	if rd.Unit != "ops/s" || rd.Measured != 500 || rd.QueueDepth != 32 || rd.LatencyMs != 64 || rd.PredictedLatencyMs == nil || *rd.PredictedLatencyMs != 64 {
		t.Errorf("iops_rd: %+v (predicted %v)", rd, rd.PredictedLatencyMs)
	}
	// A total limit: both queues, latency weighted by each direction's ops.
	tot := verdictFor(t, Judge(qemuserver.Limits{"iops-total": 520}, r), "iops")
	if tot.QueueDepth != 40 || tot.LatencyMs != 76.92 || tot.Measured != 520 || *tot.PredictedLatencyMs != 76.92 {
		t.Errorf("iops total: %+v (predicted %v)", tot, *tot.PredictedLatencyMs)
	}
	// mbps total: predicted from the mean request size: 40 x (21.953 MiB / 520) / 22 MiB/s.
	mb := verdictFor(t, Judge(qemuserver.Limits{"bps-total": 22 * mib}, r), "mbps")
	if mb.Measured != 21.953 || *mb.PredictedLatencyMs != 76.76 {
		t.Errorf("mbps total: %+v (predicted %v)", mb, *mb.PredictedLatencyMs)
	}
	// No I/O: nothing predicted, no latency, ratio 0.
	idle := verdictFor(t, Judge(qemuserver.Limits{"iops-read": 500}, rates(0, 0, 0, 0)), "iops_rd")
	if idle.PredictedLatencyMs != nil || idle.LatencyMs != 0 || idle.Ratio != 0 || idle.Measured != 0 {
		t.Errorf("idle: %+v", idle)
	}
}

func TestJudgeReasons(t *testing.T) {
	ex := verdictFor(t, Judge(qemuserver.Limits{"bps-write": 20 * mib}, rates(0, 80, 0, 80)), "mbps_wr")
	if ex.Reason != "measured 80 MiB/s, more than 5 % above the limit of 20 MiB/s over 7.0 s of steady load" || ex.Ratio != 4 {
		t.Errorf("exceeded: %q %v", ex.Reason, ex.Ratio)
	}
	for _, tc := range []struct {
		limits qemuserver.Limits
		key    string
		hint   string
	}{
		{qemuserver.Limits{"bps-write": 20 * mib}, "mbps_wr", "--rw=write --bs=1M --iodepth=8"},
		{qemuserver.Limits{"bps-read": 20 * mib}, "mbps_rd", "--rw=read --bs=1M"},
		{qemuserver.Limits{"bps-total": 20 * mib}, "mbps", "--rw=rw --bs=1M"},
		{qemuserver.Limits{"iops-read": 500}, "iops_rd", "--rw=randread --bs=4k --iodepth=32"},
		{qemuserver.Limits{"iops-write": 500}, "iops_wr", "--rw=randwrite --bs=4k"},
		{qemuserver.Limits{"iops-total": 500}, "iops", "--rw=randrw --bs=4k"},
	} {
		j := verdictFor(t, Judge(tc.limits, rates(0.5, 0.5, 2, 2)), tc.key)
		if j.Verdict != NotBinding || !strings.Contains(j.Reason, "under 80 % of the limit: this proves nothing") || !strings.Contains(j.Reason, tc.hint) ||
			!strings.HasPrefix(j.Reason, "the disk did ") {
			t.Errorf("%s: %q", tc.key, j.Reason)
		}
	}
	h := verdictFor(t, Judge(qemuserver.Limits{"iops-read": 500}, rates(2, 0, 510, 0)), "iops_rd")
	if h.Reason != "the guest pushed against the limit and got 102.0 % of it" {
		t.Errorf("holds: %q", h.Reason)
	}
}
