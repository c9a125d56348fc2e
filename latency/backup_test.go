package latency

import (
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// A disk sampled every 10 s: 100 writes of 1 ms each per sample for 90 s
// (the last 60 s are the baseline), then a backup job during which each
// write takes 50 ms.
func TestWatchBackupAgainstBaseline(t *testing.T) {
	var w Watch
	t0 := time.Unix(1764590000, 0)
	var ops, ns int64
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for s := 0; s <= 90; s += 10 {
		if im := w.Observe(at(s), qmp.BlockStats{WrOps: ops, WrTotalTimeNs: ns}, nil); im != nil {
			t.Fatalf("impact without a job: %+v", im)
		}
		ops, ns = ops+100, ns+100*1e6
		if s == 0 {
			ns += 100 * 1e9 // a slow start outside the minute before the job: not in the baseline
		}
	}
	job := &qmp.BlockJob{ID: "backup-scsi1", Type: "backup", Len: 1000, Offset: 100}
	ns = ns - 100*1e6 + 100*50e6 // the interval the job started in: slow writes
	im := w.Observe(at(100), qmp.BlockStats{WrOps: ops, WrTotalTimeNs: ns}, job)
	if im == nil || im.BaselineWriteLatencyMs == nil || *im.BaselineWriteLatencyMs != 1 || im.BaselineS != 60 {
		t.Fatalf("baseline %+v", im)
	}
	if im.WriteLatencyMs == nil || *im.WriteLatencyMs != 50 || *im.ProgressPct != 10 || im.SpeedBps != nil {
		t.Errorf("first sample of the job: %+v", im)
	}
	job.Offset = 300
	ops, ns = ops+100, ns+100*50e6
	im = w.Observe(at(110), qmp.BlockStats{WrOps: ops, WrTotalTimeNs: ns}, job)
	if *im.WriteLatencyMs != 50 || *im.BaselineWriteLatencyMs != 1 || im.SpeedBps == nil || *im.SpeedBps != 20 || *im.ProgressPct != 30 {
		t.Errorf("later sample: %+v", im)
	}
	// The job ends: no impact; the next job's baseline starts afresh.
	if im := w.Observe(at(120), qmp.BlockStats{WrOps: ops, WrTotalTimeNs: ns}, nil); im != nil {
		t.Errorf("impact after the job: %+v", im)
	}
	im = w.Observe(at(130), qmp.BlockStats{WrOps: ops, WrTotalTimeNs: ns}, &qmp.BlockJob{ID: "backup-2", Type: "backup"})
	if im.BaselineWriteLatencyMs != nil || im.WriteLatencyMs != nil || im.ProgressPct != nil {
		t.Errorf("a job seen one sample after the last: %+v", im)
	}
}

// top started while the job ran: no baseline, said as nil, not 0.
func TestWatchJobAlreadyRunning(t *testing.T) {
	var w Watch
	im := w.Observe(time.Unix(1, 0), qmp.BlockStats{WrOps: 5, WrTotalTimeNs: 5e6}, &qmp.BlockJob{ID: "j", Type: "backup", Len: 10, Offset: 5})
	if im.BaselineWriteLatencyMs != nil || im.BaselineS != 0 || im.WriteLatencyMs != nil {
		t.Errorf("%+v", im)
	}
	if IsBackup(qmp.BlockJob{Type: "mirror"}) || !IsBackup(qmp.BlockJob{Type: "backup"}) {
		t.Error("IsBackup")
	}
}
