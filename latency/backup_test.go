package latency

import (
	"os"
	"testing"
	"time"

	"github.com/tidwall/gjson"

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

// Fleecing as the recorded block graphs show it (qmp/testdata/README.md):
// QEMU 11.1.3's backup through a fleecing image `fleece`, QEMU 7.2.22's
// blockdev-backup and drive-backup without; a job placed by its name
// (no graph read) says neither.
func TestImpactFleecingRecorded(t *testing.T) {
	read := func(name string) gjson.Result {
		b, err := os.ReadFile("../qmp/testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return gjson.ParseBytes(b)
	}
	yes, no := true, false
	for _, tc := range []struct {
		jobs, graph string
		graphed     bool
		want        *bool
		node        string
		text        string
	}{
		{"query-block-jobs-fleecing-11.1.json", "x-debug-query-block-graph-fleecing-11.1.json", true, &yes, "fleece", "fleecing on fleece"},
		{"query-block-jobs-backup-7.2.json", "x-debug-query-block-graph-backup-7.2.json", true, &no, "", "no fleecing (guest writes wait for the backup target)"},
		{"query-block-jobs-drive-backup-7.2.json", "x-debug-query-block-graph-drive-backup-7.2.json", true, &no, "", "no fleecing (guest writes wait for the backup target)"},
		{"query-block-jobs-fleecing-11.1.json", "x-debug-query-block-graph-fleecing-11.1.json", false, nil, "", "fleecing unknown (no block graph)"},
	} {
		jobs := qmp.ParseBlockJobs(read(tc.jobs))
		if len(jobs) != 1 {
			t.Fatalf("%s: %+v", tc.jobs, jobs)
		}
		j := jobs[0]
		if tc.graphed {
			j.Fleecing, j.Graphed = qmp.JobFleecing(read(tc.graph))[j.ID], true
		}
		var w Watch
		im := w.Observe(time.Unix(1, 0), qmp.BlockStats{}, &j)
		switch {
		case (im.Fleecing == nil) != (tc.want == nil) || im.Fleecing != nil && *im.Fleecing != *tc.want:
			t.Errorf("%s graphed %v: fleecing %v, want %v", tc.graph, tc.graphed, im.Fleecing, tc.want)
		case (im.FleecingNode == nil) != (tc.node == "") || im.FleecingNode != nil && *im.FleecingNode != tc.node:
			t.Errorf("%s: fleecing node %v, want %q", tc.graph, im.FleecingNode, tc.node)
		}
		if got := im.FleecingText(); got != tc.text {
			t.Errorf("%s graphed %v: %q, want %q", tc.graph, tc.graphed, got, tc.text)
		}
		// With the images the config records: named after the node; a job
		// without fleecing or unknown says nothing of them.
		im.FleecingImages = []string{"local-lvm:vm-370-fleece-0", "local-lvm:vm-370-fleece-1"}
		want := tc.text
		if tc.want != nil && *tc.want {
			want += " (the backup's fleecing images: local-lvm:vm-370-fleece-0, local-lvm:vm-370-fleece-1)"
		}
		if got := im.FleecingText(); got != want {
			t.Errorf("%s graphed %v, with images: %q, want %q", tc.graph, tc.graphed, got, want)
		}
	}
}
