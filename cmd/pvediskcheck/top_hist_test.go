package main

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/top"
)

// top --histogram on real QEMU while the guest side (qemu-io, 64 KiB random
// writes, 4 in flight) writes to scsi1, and a blockdev-backup of scsi1
// (2 MiB/s) to a target throttled to 8 MiB/s starts halfway (the guest's
// 64 KiB writes ask copy-before-write for more than the 6 MiB/s left:
// with a 2 MiB/s target and no job speed, the job's own copies filled the
// target's queue and no guest write completed for 6 s): the histogram is set on
// the disks watched and cleared when top ends, every interval has
// percentiles, and once the job runs scsi1's row shows it with the guest's
// write latency during it far above the baseline before it
// (copy-before-write waits for the slow target).
func TestTopHistogramAndBackupImpact(t *testing.T) {
	n, vmq := startLab370(t, "blockdev")
	load := vmq.StartLoad(fakenode.LoadSpec{Disk: "scsi1", Write: true, Size: 64 << 10, Depth: 4, Random: true, Span: fakenode.Lab370DiskSize})
	defer load.Stop()
	target := n.MustVolume(t, "local", "370/backup-target.raw", fakenode.Lab370DiskSize)
	sock := n.Paths.QMPSocket(370)
	exec := func(fn func(s qmp.Session) error) {
		if err := qmp.DoRetry(context.Background(), sock, 5*time.Second, 10*time.Second, fn); err != nil {
			t.Error(err)
		}
	}
	const jobAt = 12 // samples of 500 ms before the job: 6 s of baseline
	var once sync.Once
	code, stderr, samples := topStream(t, []string{"--root", n.Root, "top", "370", "--histogram", "--count", "24", "--interval", "500ms"}, func(i int, s top.Sample) {
		if i < jobAt-1 {
			return
		}
		once.Do(func() {
			exec(func(s qmp.Session) error {
				if _, err := s.Exec("object-add", map[string]any{"qom-type": "throttle-group", "id": "slow-target", "limits": map[string]any{"bps-write": 8 << 20}}); err != nil {
					return err
				}
				if _, err := s.Exec("blockdev-add", map[string]any{"driver": "throttle", "node-name": "target", "throttle-group": "slow-target",
					"file": map[string]any{"driver": "raw", "file": map[string]any{"driver": "file", "filename": target}}}); err != nil {
					return err
				}
				_, err := s.Exec("blockdev-backup", map[string]any{"job-id": "backup-scsi1-test", "device": "drive-scsi1", "target": "target", "sync": "full", "speed": 2 << 20})
				return err
			})
		})
	})
	if code != 0 || len(samples) != 24 {
		t.Fatalf("exit %d, %d samples: %s", code, len(samples), stderr)
	}
	var baseP50, jobP50 float64 // the highest interval p50 before the job, and during it
	var impact *top.Disk
	for i, s := range samples {
		set := map[string]bool{}
		for _, h := range s.Histograms {
			set[h.Disk] = h.Owner == "set"
		}
		if !set["scsi1"] || !set["scsi0"] {
			t.Fatalf("sample %d: histograms %+v", i, s.Histograms)
		}
		d := rowsOf(s, 370)["scsi1"]
		if d.WriteP99Ms == nil {
			if d.WriteIOPS > 0 {
				t.Errorf("sample %d: writes without percentiles", i)
			}
			continue
		}
		switch {
		case i < jobAt-1:
			if d.Backup != nil {
				t.Errorf("sample %d: backup impact before the job: %+v", i, d.Backup)
			}
			baseP50 = max(baseP50, *d.WriteP50Ms)
		case i > jobAt+1 && d.Backup != nil:
			jobP50 = max(jobP50, *d.WriteP50Ms)
			d := d
			impact = &d
		}
	}
	if impact == nil {
		t.Fatal("no sample shows the backup's impact")
	}
	b := impact.Backup
	if b.Job != "backup-scsi1-test" || b.BaselineWriteLatencyMs == nil || b.WriteLatencyMs == nil || b.BaselineS < 4 || b.ProgressPct == nil || b.SpeedBps == nil {
		t.Fatalf("backup impact %+v", b)
	}
	t.Logf("writes: %.2f ms in the %.0f s before the job, %.1f ms during it; interval p50 up to %.2f ms before, up to %.1f ms during; job %.1f %% at %.0f B/s",
		*b.BaselineWriteLatencyMs, b.BaselineS, *b.WriteLatencyMs, baseP50, jobP50, *b.ProgressPct, *b.SpeedBps)
	if *b.WriteLatencyMs < 3**b.BaselineWriteLatencyMs || jobP50 < 3*baseP50 {
		t.Errorf("the slow target did not show in the guest's write latency")
	}
	// top has ended: the histograms it set are gone.
	exec(func(s qmp.Session) error {
		ret, err := s.Exec("query-blockstats", nil)
		for _, e := range qmp.ParseBlockstats(ret) {
			if e.WrLatency != nil {
				t.Errorf("%s still has a histogram after top ended", e.ID)
			}
		}
		return err
	})
}

// Interrupted (Ctrl-C and SIGTERM end the run's context; SIGHUP too unless
// ignored), top --histogram still clears the histograms it set; one found
// set on another disk is left in place.
func TestTopHistogramClearedOnInterrupt(t *testing.T) {
	n, _ := startLab370(t, "blockdev")
	sock := n.Paths.QMPSocket(370)
	histograms := func() map[string]int {
		out := map[string]int{}
		if err := qmp.DoRetry(context.Background(), sock, 5*time.Second, 10*time.Second, func(s qmp.Session) error {
			ret, err := s.Exec("query-blockstats", nil)
			for _, e := range qmp.ParseBlockstats(ret) {
				if e.WrLatency != nil {
					out[e.ID] = len(e.WrLatency.Boundaries)
				}
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if err := qmp.Do(context.Background(), sock, 5*time.Second, func(s qmp.Session) error {
		_, err := s.Exec("block-latency-histogram-set", map[string]any{"id": "sata1", "boundaries": []int64{1e6, 1e7}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb safeBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"pvediskcheck", "--root", n.Root, "top", "370", "--histogram", "--interval", "300ms"}, &out, &errb)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(out.String(), "latency histograms set by pvediskcheck") {
		if time.Now().After(deadline) {
			t.Fatalf("no histogram line: %s %s", out.String(), errb.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if h := histograms(); h["scsi1"] != 142 || h["sata1"] != 2 {
		t.Errorf("while top runs: %v", h)
	}
	if !strings.Contains(out.String(), "found set, used as they are and left in place: 370/sata1") {
		t.Errorf("the histogram found is not said:\n%s", out.String())
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d: %s", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("top did not end within 10 s of the interrupt")
	}
	if h := histograms(); len(h) != 1 || h["sata1"] != 2 {
		t.Errorf("after the interrupt: %v, want sata1's own alone", h)
	}
}

// safeBuffer is a bytes.Buffer for one writer and one reader goroutine.
type safeBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *safeBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *safeBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
