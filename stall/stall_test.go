package stall

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// The recording (testdata/README.md): QEMU 2452, scsi1's iothread 2455.
const (
	recPID      = 2452
	recIOThread = 2455
	recAfter    = 2 * time.Second
)

func recorded(t testing.TB) (node.Node, map[string]qmp.BlockStats) {
	t.Helper()
	return recordedIn(t, "testdata/frozen-7.2")
}

// recordedIn is a recording's node (its proc tree) and blockstats by disk.
func recordedIn(t testing.TB, dir string) (node.Node, map[string]qmp.BlockStats) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "query-blockstats.json"))
	if err != nil {
		t.Fatal(err)
	}
	stats := map[string]qmp.BlockStats{}
	for _, s := range qmp.ParseBlockstats(gjson.ParseBytes(b)) {
		stats[s.ID] = s
	}
	proc, _ := filepath.Abs(filepath.Join(dir, "proc"))
	return node.New(node.NewPaths(t.TempDir(), proc, t.TempDir()), 5*time.Second), stats
}

func recDisks() []Disk {
	return []Disk{
		{ID: "scsi0", Storage: "local", ServingTID: 2454},
		{ID: "scsi1", Storage: "frozen", ServingTID: recIOThread},
	}
}

// TestRecordedStall: the frozen filesystem's disk is stalled with its 8
// io_uring workers as the evidence; the idle disk beside it, without a
// completion for as long, is not.
func TestRecordedStall(t *testing.T) {
	n, stats := recorded(t)
	got := Detect(context.Background(), n, recPID, recDisks(), stats, recAfter, 0)
	if len(got) != 2 {
		t.Fatalf("%d verdicts", len(got))
	}
	idle, stuck := got[0], got[1]
	if idle.Stalled || idle.StalledSeconds != 0 || len(idle.Blocked) != 0 || idle.IdleSeconds == nil || *idle.IdleSeconds != 2.2 {
		t.Errorf("idle scsi0: %+v", idle)
	}
	if want := "qemu: no request completed for 2.2 s (idle_time_ns); threads: no thread serving the disk is blocked"; idle.Summary() != want {
		t.Errorf("idle scsi0 evidence:\n got %s\nwant %s", idle.Summary(), want)
	}
	if !stuck.Stalled || stuck.StalledSeconds != 2.3 || len(stuck.Blocked) != 8 || stuck.InFlight != nil {
		t.Fatalf("frozen scsi1: %+v", stuck)
	}
	for _, th := range stuck.Blocked {
		if th.Comm != "iou-wrk-2455" || th.State != "D" || th.Wchan != "percpu_rwsem_wait" {
			t.Errorf("blocked %+v", th)
		}
	}
	if want := "qemu: no request completed for 2.3 s (idle_time_ns); threads: 8 thread(s) serving the disk in state D (iou-wrk-2455 and 7 more; wchan 8 in percpu_rwsem_wait)"; stuck.Summary() != want {
		t.Errorf("scsi1 evidence:\n got %s\nwant %s", stuck.Summary(), want)
	}
	// Past the recorded idle time nothing is judged: the node is not read.
	for _, v := range Detect(context.Background(), n, recPID, recDisks(), stats, 3*time.Second, 0) {
		if v.Stalled || len(v.Evidence) != 0 {
			t.Errorf("after 3 s: %+v", v)
		}
	}
}

// The QEMU 11.1.3 recording (testdata/README.md): QEMU 31968, whose main
// loop serves scsi1; scsi0's iothread 31970.
const (
	rec11PID      = 31968
	rec11IOThread = 31970
)

// TestRecordedStallQEMU11: on QEMU 11.1.3 the frozen disk served by the
// main loop is stalled with the main loop's 8 io_uring workers as the
// evidence, the idle iothread disk beside it is not; the same workers do
// not count for a disk on an iothread (from QEMU 8.2 a request's worker is
// named after the thread that issued it, and the main loop's are not the
// iothread's).
func TestRecordedStallQEMU11(t *testing.T) {
	n, stats := recordedIn(t, "testdata/frozen-11.1")
	disks := []Disk{
		{ID: "scsi0", Storage: "local", ServingTID: rec11IOThread},
		{ID: "scsi1", Storage: "frozen", ServingTID: rec11PID},
	}
	got := Detect(context.Background(), n, rec11PID, disks, stats, recAfter, 0)
	if len(got) != 2 {
		t.Fatalf("%d verdicts", len(got))
	}
	idle, stuck := got[0], got[1]
	if want := "qemu: no request completed for 2.3 s (idle_time_ns); threads: no thread serving the disk is blocked"; idle.Stalled || idle.StalledSeconds != 0 || idle.Summary() != want {
		t.Errorf("idle scsi0: %+v\nwant %s", idle, want)
	}
	if want := "qemu: no request completed for 2.3 s (idle_time_ns); threads: 8 thread(s) serving the disk in state D (iou-wrk-31968 and 7 more; wchan 8 in percpu_rwsem_wait)"; !stuck.Stalled || stuck.StalledSeconds != 2.3 || len(stuck.Blocked) != 8 || stuck.Summary() != want {
		t.Fatalf("frozen scsi1: %+v\nwant %s", stuck, want)
	}
	for _, th := range stuck.Blocked {
		if th.Comm != "iou-wrk-31968" || th.State != "D" || th.Wchan != "percpu_rwsem_wait" {
			t.Errorf("blocked %+v", th)
		}
	}
	onIOThread := disks[1]
	onIOThread.ServingTID = rec11IOThread
	if v := Detect(context.Background(), n, rec11PID, []Disk{onIOThread}, stats, recAfter, 0)[0]; v.Stalled || len(v.Blocked) != 0 {
		t.Errorf("scsi1 on an iothread, the main loop's workers blocked: %+v", v)
	}
}

func TestJudgeEdges(t *testing.T) {
	const after = 5 * time.Second
	iou := Thread{TID: 50, Comm: "iou-wrk-20", State: "D", Wchan: "percpu_rwsem_wait"}
	worker := Thread{TID: 51, Comm: "worker", State: "D", Wchan: "io_schedule"}
	self := Thread{TID: 20, Comm: "qemu-system-x86", State: "D"}
	other := Thread{TID: 52, Comm: "iou-wrk-21", State: "D"}
	disk := Disk{ID: "scsi1", ServingTID: 20}
	pool := Disk{ID: "scsi1", ServingTID: 20, ThreadPool: true}
	dev := Disk{ID: "scsi1", ServingTID: 20, Dev: "dm-3"}
	idle := func(d time.Duration) qmp.BlockStats { return qmp.BlockStats{IdleTimeNs: int64(d), HasIdleTime: true} }
	for _, c := range []struct {
		name    string
		d       Disk
		b       qmp.BlockStats
		look    Look
		stalled bool
		blocked int
	}{
		{"just under After: not judged", disk, idle(after - 1), Look{Blocked: []Thread{iou}}, false, 0},
		{"at After with a worker blocked", disk, idle(after), Look{Blocked: []Thread{iou}}, true, 1},
		{"idle, nothing blocked", disk, idle(time.Hour), Look{}, false, 0},
		{"no idle time from QEMU", disk, qmp.BlockStats{}, Look{Blocked: []Thread{iou}}, false, 0},
		{"another thread's worker", disk, idle(time.Hour), Look{Blocked: []Thread{other}}, false, 0},
		{"the serving thread itself", disk, idle(time.Hour), Look{Blocked: []Thread{self}}, true, 1},
		{"pool worker, aio=io_uring disk", disk, idle(time.Hour), Look{Blocked: []Thread{worker}}, false, 0},
		{"pool worker, aio=threads disk", pool, idle(time.Hour), Look{Blocked: []Thread{worker, other}}, true, 1},
		{"device with requests in flight", dev, idle(time.Hour), Look{InFlight: map[string]int64{"dm-3": 4}}, true, 0},
		{"device with none in flight", dev, idle(time.Hour), Look{InFlight: map[string]int64{"dm-3": 0}}, false, 0},
		{"device unread, threads unread", dev, idle(time.Hour), Look{ThreadsErr: errors.New("permission denied")}, false, 0},
		{"threads unread, device in flight", dev, idle(time.Hour), Look{ThreadsErr: errors.New("permission denied"), InFlight: map[string]int64{"dm-3": 1}}, true, 0},
	} {
		v := Judge(c.d, c.b, c.look, after)
		if v.Stalled != c.stalled || len(v.Blocked) != c.blocked {
			t.Errorf("%s: stalled %v blocked %d, want %v %d (%s)", c.name, v.Stalled, len(v.Blocked), c.stalled, c.blocked, v.Summary())
		}
		if want := 0.0; !v.Stalled && v.StalledSeconds != want {
			t.Errorf("%s: stalled_seconds %v when not stalled", c.name, v.StalledSeconds)
		}
		if v.Stalled && v.StalledSeconds != idleS(c.b) {
			t.Errorf("%s: stalled_seconds %v, want %v", c.name, v.StalledSeconds, idleS(c.b))
		}
	}
}

func idleS(b qmp.BlockStats) float64 { return float64(b.IdleTimeNs/1e8) / 10 }

func TestJudgeEvidenceText(t *testing.T) {
	v := Judge(Disk{ID: "scsi2", Storage: "local-lvm", ServingTID: 20, Dev: "dm-3"},
		qmp.BlockStats{IdleTimeNs: 7_250_000_000, HasIdleTime: true},
		Look{ThreadsErr: errors.New("open /proc/9/task: permission denied"), InFlight: map[string]int64{"dm-3": 3}}, DefaultAfter)
	want := []Evidence{
		{SourceQEMU, "no request completed for 7.3 s (idle_time_ns)"},
		{SourceThreads, "not read: open /proc/9/task: permission denied"},
		{SourceDevice, "dm-3 has 3 requests in flight"},
	}
	if !reflect.DeepEqual(v.Evidence, want) || !v.Stalled || v.StalledSeconds != 7.3 || v.InFlight == nil || *v.InFlight != 3 {
		t.Errorf("%+v", v)
	}
}

// TestDetectReadsOnlyForCandidates: with every disk completing, the node
// is not looked at (a process that does not exist is no error).
func TestDetectReadsOnlyForCandidates(t *testing.T) {
	n := node.New(node.NewPaths(t.TempDir(), t.TempDir(), t.TempDir()), time.Second)
	stats := map[string]qmp.BlockStats{"scsi1": {IdleTimeNs: int64(time.Second), HasIdleTime: true}}
	got := Detect(context.Background(), n, 4242, []Disk{{ID: "scsi1", ServingTID: 4242}}, stats, DefaultAfter, 0)
	if len(got) != 1 || got[0].Stalled || len(got[0].Evidence) != 0 {
		t.Errorf("busy disk: %+v", got)
	}
	stats["scsi1"] = qmp.BlockStats{IdleTimeNs: int64(time.Minute), HasIdleTime: true}
	got = Detect(context.Background(), n, 4242, []Disk{{ID: "scsi1", ServingTID: 4242}}, stats, DefaultAfter, 0)
	if len(got) != 1 || got[0].Stalled || len(got[0].Evidence) != 2 || got[0].Evidence[1].Source != SourceThreads {
		t.Errorf("idle disk, no process: %+v", got)
	}
}

func TestParseStat(t *testing.T) {
	for _, c := range []struct {
		in, comm, state string
		ok              bool
	}{
		{"1939 (iou-wrk-2455) D 1 1916", "iou-wrk-2455", "D", true},
		{"7 (a) b) S 1", "a) b", "S", true},
		{"7 (x)", "", "", false},
		{"no parens", "", "", false},
	} {
		comm, state, ok := ParseStat([]byte(c.in))
		if comm != c.comm || state != c.state || ok != c.ok {
			t.Errorf("%q: %q %q %v", c.in, comm, state, ok)
		}
	}
}

// BenchmarkDetectCandidate: what top and metrics pay per sample for a VM
// with a disk idle past --stall-after: the listing and stat of its 17
// recorded threads (wchan of the 8 blocked). A VM whose disks completed
// something within --stall-after costs no thread read.
func BenchmarkDetectCandidate(b *testing.B) {
	n, stats := recorded(b)
	disks := recDisks()
	for i := 0; i < b.N; i++ {
		Detect(context.Background(), n, recPID, disks, stats, recAfter, 0)
	}
}

// BenchmarkReadRealProcfs: the thread read on a real procfs (the test
// process's own threads).
func BenchmarkReadRealProcfs(b *testing.B) {
	n := node.New(node.NewPaths("/", "/proc", "/sys"), 5*time.Second)
	ents, _ := os.ReadDir("/proc/self/task")
	b.ReportMetric(float64(len(ents)), "threads")
	for i := 0; i < b.N; i++ {
		Read(context.Background(), n, os.Getpid(), nil)
	}
}

// TestDetectorRereads: the threads are read again when the candidates
// change or a disk is stalled, and reused otherwise (within After/2).
func TestDetectorRereads(t *testing.T) {
	n, stats := recorded(t)
	var dt Detector
	dt.Place(n, recPID, recDisks())
	busy := map[string]qmp.BlockStats{"scsi0": stats["scsi0"], "scsi1": {IdleTimeNs: int64(time.Millisecond), HasIdleTime: true}}
	got := dt.Detect(context.Background(), busy, recAfter)
	if got[0].Stalled || got[1].Stalled || dt.at.IsZero() {
		t.Fatalf("idle scsi0: %+v, read at %v", got, dt.at)
	}
	first := dt.at
	// scsi1 stops completing: a new candidate, read at once, stalled.
	got = dt.Detect(context.Background(), stats, recAfter)
	if !got[1].Stalled || !dt.at.After(first) {
		t.Errorf("scsi1 newly idle: %+v, read at %v (first %v)", got[1], dt.at, first)
	}
	// Stalled: read at every sample.
	second := dt.at
	dt.Detect(context.Background(), stats, recAfter)
	if !dt.at.After(second) {
		t.Error("a stalled VM's threads were not read again")
	}
	// Only the idle scsi0, candidates unchanged: the last read is reused.
	dt.Detect(context.Background(), busy, recAfter)
	third := dt.at
	dt.Detect(context.Background(), busy, recAfter)
	if !dt.at.Equal(third) {
		t.Error("an idle VM's threads were read again within After/2")
	}
}
