package latency

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/latency/latencytest"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// A VM forgotten (its process gone) has no notes, no cumulative
// histogram, and Release does not try to clear its histograms; a VM not
// forgotten keeps all three.
func TestTrackerForget(t *testing.T) {
	f := newFakeHist(t, "none", false)
	tr := NewTracker()
	cur := f.ensure(t, tr, 1000, "scsi1")["scsi1"]
	tr.Forget(371) // another VM: nothing of 370's goes
	if n := tr.Notes(); len(n) != 1 || n[0].VMID != 370 {
		t.Fatalf("notes %+v", n)
	}
	if _, ok := tr.Cumulative(370, 1000, "scsi1", Write, &cur); !ok {
		t.Error("VM 370 lost its histogram when 371 was forgotten")
	}
	tr.Forget(370)
	if n := tr.Notes(); len(n) != 0 {
		t.Errorf("notes of a forgotten VM: %+v", n)
	}
	if _, ok := tr.Cumulative(370, 1000, "scsi1", Write, &qmp.BlockStats{WrLatency: cur.WrLatency}); ok {
		t.Error("a cumulative histogram of a forgotten VM")
	}
	if err := tr.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(f.Sets()); n != 1 {
		t.Errorf("%d sets, want only the first: nothing cleared on a VM that is gone", n)
	}
}

// Of picks the kind's three percentiles, nothing for another kind.
func TestPercentilesOf(t *testing.T) {
	v := func(f float64) *float64 { return &f }
	p := Percentiles{ReadP50Ms: v(1), ReadP95Ms: v(2), ReadP99Ms: v(3), WriteP50Ms: v(4), WriteP95Ms: v(5), WriteP99Ms: v(6), FlushP50Ms: v(7), FlushP95Ms: v(8), FlushP99Ms: v(9)}
	for k, want := range map[Kind][3]float64{Read: {1, 2, 3}, Write: {4, 5, 6}, Flush: {7, 8, 9}} {
		p50, p95, p99 := p.Of(k)
		if p50 == nil || p95 == nil || p99 == nil || [3]float64{*p50, *p95, *p99} != want {
			t.Errorf("%s: %v %v %v, want %v", k, p50, p95, p99, want)
		}
	}
	if a, b, c := p.Of(Kind("discard")); a != nil || b != nil || c != nil {
		t.Error("an unknown kind has percentiles")
	}
	if a, _, _ := (Percentiles{}).Of(Write); a != nil {
		t.Error("unknown percentiles are not nil")
	}
}

// Notes are in VMID order, then disk order, however the VMs were met.
func TestTrackerNotesOrder(t *testing.T) {
	f := newFakeHist(t, "none", false)
	tr := NewTracker()
	for _, c := range []struct {
		vmid  int
		disks []string
	}{{371, []string{"scsi1", "scsi0"}}, {370, []string{"scsi1"}}, {369, []string{"scsi0"}}} {
		if err := latencytest.Blockstats(context.Background(), f.q.Sock(), 2*time.Second, func(stats map[string]qmp.BlockStats, s qmp.Session) error {
			return tr.Ensure(latencytest.Setter{S: s}, c.vmid, 1000+c.vmid, f.ask, c.disks, stats)
		}); err != nil {
			t.Fatal(err)
		}
		f.mu.Lock()
		f.state = "none" // each VM's QEMU has no histogram yet
		f.mu.Unlock()
	}
	var got []string
	for _, n := range tr.Notes() {
		got = append(got, strconv.Itoa(n.VMID)+" "+n.Disk)
	}
	if want := "369 scsi0, 370 scsi1, 371 scsi0, 371 scsi1"; strings.Join(got, ", ") != want {
		t.Errorf("notes %q, want %s", got, want)
	}
}

// Samples without a write since the last (the counters unchanged) keep the
// history: the baseline still spans the writes before them. Counters that
// go back (QEMU restarted) start it afresh.
func TestWatchIdleSamplesKeepBaseline(t *testing.T) {
	t0 := time.Unix(1764590000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	var w Watch
	w.Observe(at(0), qmp.BlockStats{WrOps: 100, WrTotalTimeNs: 1e9}, nil)
	w.Observe(at(10), qmp.BlockStats{WrOps: 200, WrTotalTimeNs: 2e9}, nil)
	w.Observe(at(20), qmp.BlockStats{WrOps: 200, WrTotalTimeNs: 2e9}, nil) // idle
	im := w.Observe(at(30), qmp.BlockStats{WrOps: 200, WrTotalTimeNs: 2e9}, &qmp.BlockJob{ID: "j", Type: "backup"})
	if im == nil || im.BaselineWriteLatencyMs == nil || *im.BaselineWriteLatencyMs != 10 || im.BaselineS != 20 {
		t.Errorf("baseline %+v", im)
	}
	w = Watch{}
	w.Observe(at(0), qmp.BlockStats{WrOps: 100, WrTotalTimeNs: 1e9}, nil)
	w.Observe(at(10), qmp.BlockStats{WrOps: 200, WrTotalTimeNs: 2e9}, nil)
	w.Observe(at(20), qmp.BlockStats{WrOps: 200, WrTotalTimeNs: 1e9}, nil) // write time went back
	im = w.Observe(at(30), qmp.BlockStats{WrOps: 300, WrTotalTimeNs: 2e9}, &qmp.BlockJob{ID: "j", Type: "backup"})
	if im == nil || im.BaselineWriteLatencyMs != nil || im.BaselineS != 0 {
		t.Errorf("after the counters went back: %+v", im)
	}
}

// A backup job whose offset did not move between two samples runs at
// 0 B/s (said as 0, not unknown).
func TestWatchJobStandsStill(t *testing.T) {
	var w Watch
	t0 := time.Unix(1764590000, 0)
	job := &qmp.BlockJob{ID: "j", Type: "backup", Len: 1000, Offset: 300}
	w.Observe(t0, qmp.BlockStats{WrOps: 5, WrTotalTimeNs: 5e6}, job)
	im := w.Observe(t0.Add(10*time.Second), qmp.BlockStats{WrOps: 5, WrTotalTimeNs: 5e6}, job)
	if im == nil || im.SpeedBps == nil || *im.SpeedBps != 0 {
		t.Errorf("%+v", im)
	}
}
