package stall

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// --stall-after: a second is the least taken, a usage error below it.
func TestValidateAfter(t *testing.T) {
	for d, ok := range map[time.Duration]bool{0: false, 999 * time.Millisecond: false, time.Second: true, 10 * time.Second: true, MaxAfter: true, MaxAfter + 1: false, 1000001 * time.Hour: false} {
		err := ValidateAfter(d)
		if (err == nil) != ok || !ok && exitcode.Of(err) != exitcode.Usage {
			t.Errorf("%s: %v (exit %d), want accepted %v", d, err, exitcode.Of(err), ok)
		}
	}
}

// Forget drops a disk not sampled for KeepFor, and with it the record of
// its capture: a disk of a VM that comes back stalled is captured again;
// a disk sampled within KeepFor keeps both.
func TestKeeperForget(t *testing.T) {
	n, _ := captureNode(t, 2)
	k := &Keeper{Out: parent(t, t.TempDir()), After: recAfter}
	captures := 0
	k.OnCapture = func(c *Captured, err error) {
		if err != nil {
			t.Error(err)
		}
		captures++
	}
	t0 := time.Now()
	ctx := context.Background()
	k.Sample(ctx, n, t0, 100, "scsi1", map[string]int{"i": 0}, true)
	k.Sample(ctx, n, t0.Add(30*time.Second), 100, "scsi0", map[string]int{"i": 1}, false)
	if captures != 1 {
		t.Fatalf("%d captures, want 1", captures)
	}
	// KeepFor after scsi1's last sample: kept, still captured for this stall.
	k.Forget(t0.Add(KeepFor))
	k.Sample(ctx, n, t0.Add(KeepFor), 100, "scsi1", map[string]int{"i": 2}, true)
	if captures != 1 || len(k.hist[diskKey{100, "scsi1"}]) != 2 {
		t.Errorf("forgotten at KeepFor: %d captures, %d samples", captures, len(k.hist[diskKey{100, "scsi1"}]))
	}
	// A nanosecond past KeepFor since scsi1's last sample: it goes with
	// its capture; scsi0, sampled 30 s before, stays.
	k.Sample(ctx, n, t0.Add(KeepFor+30*time.Second), 100, "scsi0", map[string]int{"i": 3}, false)
	k.Forget(t0.Add(2*KeepFor + time.Nanosecond))
	if _, ok := k.hist[diskKey{100, "scsi1"}]; ok {
		t.Error("scsi1 kept past KeepFor")
	}
	if _, ok := k.hist[diskKey{100, "scsi0"}]; !ok {
		t.Error("scsi0 forgotten 30 s after its last sample")
	}
	k.Sample(ctx, n, t0.Add(2*KeepFor+time.Second), 100, "scsi1", map[string]int{"i": 4}, true)
	if captures != 2 {
		t.Errorf("%d captures, want the forgotten disk's new stall captured", captures)
	}
}

// loop16Stat is a /sys/block/loop16/stat line read on this machine (kernel
// 6.18) while a write was outstanding: 1 request in flight (ninth field).
const loop16Stat = "    9222        0    77713      308      529      750   856419      649        1      816      986        0        0        0        0       36       28\n"

// A disk idle past After whose node device has a request in flight is
// stalled even when the threads cannot be read (no such process here); a
// second look that still finds it outstanding says so; a device whose
// stat cannot be read is no evidence; a disk without a device is judged
// on its threads alone.
func TestDetectDeviceConfirmed(t *testing.T) {
	root := t.TempDir()
	n := node.New(node.NewPaths(root, filepath.Join(root, "proc"), filepath.Join(root, "sys")), time.Second)
	p := filepath.Join(n.Paths.Sys, "class", "block", "loop16", "stat")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(loop16Stat), 0o644); err != nil {
		t.Fatal(err)
	}
	idle := qmp.BlockStats{IdleTimeNs: int64(time.Minute), HasIdleTime: true}
	stats := map[string]qmp.BlockStats{"scsi0": idle, "scsi1": idle, "scsi2": idle}
	disks := []Disk{{ID: "scsi0", ServingTID: 4242, Dev: "loop16"}, {ID: "scsi1", ServingTID: 4242, Dev: "loop99"}, {ID: "scsi2", ServingTID: 4242}}
	got := Detect(context.Background(), n, 4242, disks, stats, DefaultAfter, time.Millisecond)
	if len(got) != 3 {
		t.Fatalf("%d verdicts", len(got))
	}
	v := got[0]
	if !v.Stalled || v.InFlight == nil || *v.InFlight != 1 || v.StalledSeconds != 60 {
		t.Errorf("scsi0: %+v", v)
	}
	if last := v.Evidence[len(v.Evidence)-1]; last != (Evidence{SourceThreads, "still outstanding 1ms later"}) {
		t.Errorf("scsi0 evidence %+v", v.Evidence)
	}
	for _, v := range got[1:] {
		if v.Stalled || v.InFlight != nil {
			t.Errorf("%s: %+v", v.Disk, v)
		}
		for _, e := range v.Evidence {
			if strings.Contains(e.Says, "outstanding") {
				t.Errorf("%s: a second look for a disk not stalled: %+v", v.Disk, v.Evidence)
			}
		}
	}
}

// What a capture cannot read it says, and keeps the rest: a query QEMU
// does not have and a throttle group it does not answer for are left out
// and named, the stall still judged from the rest; a QEMU gone leaves
// only the node's side (and no stall without QEMU's counters); a process
// gone leaves no threads to copy.
func TestCaptureNotRead(t *testing.T) {
	ctx := context.Background()
	n, _ := captureNode(t, 2, "query-block-jobs", "qom-get")
	c, err := Capture(ctx, n, 100, CaptureOptions{Out: parent(t, t.TempDir()), After: recAfter, Disks: []string{"scsi1"}})
	if err != nil {
		t.Fatal(err)
	}
	nr := strings.Join(c.NotRead, "\n")
	for _, want := range []string{"query-block-jobs: ", "The command query-block-jobs has not been found", "throttle group of scsi1: ", "The command qom-get has not been found"} {
		if !strings.Contains(nr, want) {
			t.Errorf("not read lacks %q:\n%s", want, nr)
		}
	}
	if strings.Contains(nr, "throttle group of scsi0") || strings.Contains(nr, "QMP: ") {
		t.Errorf("not read names more than asked for:\n%s", nr)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "query-block-jobs.json")); !os.IsNotExist(err) {
		t.Errorf("query-block-jobs.json written: %v", err)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "query-blockstats.json")); err != nil {
		t.Error(err)
	}
	if len(c.Verdicts) != 1 || !c.Verdicts[0].Stalled {
		t.Errorf("verdicts %+v", c.Verdicts)
	}

	n, q := captureNode(t, 2)
	q.Kill()
	c, err = Capture(ctx, n, 100, CaptureOptions{Out: parent(t, t.TempDir()), After: recAfter, Disks: []string{"scsi1"}})
	if err != nil {
		t.Fatal(err)
	}
	if nr := strings.Join(c.NotRead, "\n"); !strings.HasPrefix(nr, "QMP: ") || strings.Contains(nr, "query-block") {
		t.Errorf("QEMU gone: not read:\n%s", nr)
	}
	if len(c.Verdicts) != 1 || c.Verdicts[0].Stalled {
		t.Errorf("QEMU gone: verdicts %+v", c.Verdicts)
	}

	n, _ = captureNode(t, 2)
	if err := os.RemoveAll(filepath.Join(n.Paths.ProcPid(2452), "task")); err != nil {
		t.Fatal(err)
	}
	c, err = Capture(ctx, n, 100, CaptureOptions{Out: parent(t, t.TempDir()), After: recAfter, Disks: []string{"scsi1"}})
	if err != nil {
		t.Fatal(err)
	}
	if nr := strings.Join(c.NotRead, "\n"); !strings.Contains(nr, "threads: open "+filepath.Join(n.Paths.ProcPid(2452), "task")+": no such file or directory") {
		t.Errorf("threads gone: not read:\n%s", nr)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "threads")); !os.IsNotExist(err) {
		t.Errorf("threads copied: %v", err)
	}
}

// The capture's bound holds MaxCapture bytes exactly; the byte past it is
// refused once, said once.
func TestCaptureBound(t *testing.T) {
	f, err := parent(t, t.TempDir()).New("stall-100")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := &writer{dir: f}
	w.file("a", make([]byte, MaxCapture))
	w.file("b", []byte{1})
	w.file("c", []byte{1})
	if w.files != 1 || w.bytes != MaxCapture || len(w.missing) != 1 || !strings.Contains(w.missing[0], "reached its bound") || !strings.HasSuffix(w.missing[0], " at b") {
		t.Errorf("%d files, %d bytes, not read %q", w.files, w.bytes, w.missing)
	}
}

// Capture without After judges at DefaultAfter: the recorded disk, idle
// 2.3 s, is no stall then; a capture of the whole VM is named without
// disks; a VM on no thin pool has no thinpool.json.
func TestCaptureDefaults(t *testing.T) {
	n, _ := captureNode(t, 2)
	out := t.TempDir()
	c, err := Capture(context.Background(), n, 100, CaptureOptions{Out: parent(t, out)})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Verdicts) != 2 {
		t.Fatalf("verdicts %+v", c.Verdicts)
	}
	for _, v := range c.Verdicts {
		if v.Stalled {
			t.Errorf("%s stalled at the default %s: %+v", v.Disk, DefaultAfter, v)
		}
	}
	if !regexp.MustCompile(`^stall-100-\d{8}T\d{6}\.\d{3}Z-[0-9a-f]{16}$`).MatchString(filepath.Base(c.Dir)) {
		t.Errorf("dir %s", c.Dir)
	}
	if _, err := os.Stat(filepath.Join(c.Dir, "thinpool.json")); !os.IsNotExist(err) {
		t.Errorf("thinpool.json without a thin pool: %v", err)
	}
}

// One blocked thread is named alone ("and 0 more" is not said).
func TestJudgeOneThread(t *testing.T) {
	v := Judge(Disk{ID: "scsi1", ServingTID: 20}, qmp.BlockStats{IdleTimeNs: int64(time.Minute), HasIdleTime: true},
		Look{Blocked: []Thread{{TID: 50, Comm: "iou-wrk-20", State: "D", Wchan: "percpu_rwsem_wait"}}}, DefaultAfter)
	if want := "qemu: no request completed for 60 s (idle_time_ns); threads: 1 thread(s) serving the disk in state D (iou-wrk-20; wchan 1 in percpu_rwsem_wait)"; v.Summary() != want {
		t.Errorf("%s\nwant %s", v.Summary(), want)
	}
}
