package threads

import (
	"fmt"
	"github.com/pvediskcheck/pvediskcheck/node"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func readers(t *testing.T, r recording) (a, b Reader) {
	t.Helper()
	a, err := NewReader(node.New(node.NewPaths("/", filepath.Join(r.dir, "proc-a"), ""), 0))
	if err != nil {
		t.Fatal(err)
	}
	b, err = NewReader(node.New(node.NewPaths("/", filepath.Join(r.dir, "proc-b"), ""), 0))
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

// The recorded threads of VM 370 (-blockdev) while scsi1 was written to:
// the counters as the files hold them, and the usage over the second
// between the two reads.
func TestReadRecorded(t *testing.T) {
	r := load(t, "blockdev")
	ra, rb := readers(t, r)
	m := New(r.pid, r.iothreads, r.cpus)
	a, b := ra.Read(r.pid, append(m.TIDs(), 99999)), rb.Read(r.pid, m.TIDs())
	if len(a) != 5 || len(b) != 5 {
		t.Fatalf("%d and %d threads read, want 5 (a thread that is not there is left out)", len(a), len(b))
	}
	main := a[r.pid]
	if main.Comm != "qemu-system-x86" || main.RunNs != 188913482 || main.WaitNs != 382618976 || !main.HasSchedstat || main.Ticks != 10+8 || main.Start != 133653 {
		// stat: utime 10, stime 8, starttime 133653 (the recorded file)
		t.Errorf("main loop counters = %+v", main)
	}
	// Other threads: schedstat only.
	if c := a[3613]; c != (Counters{TID: 3613, RunNs: 86613727, WaitNs: 69832891, HasSchedstat: true}) {
		t.Errorf("vCPU counters = %+v", c)
	}
	usage := func(tid int) Usage {
		u, ok := UsageOf(a[tid], b[tid], r.secs)
		if !ok {
			t.Fatalf("thread %d not comparable", tid)
		}
		return u
	}
	// Only the iothread serving scsi1 ran; the main loop ran 38.3 ms and
	// waited 129.8 ms for a core (the machine was shared).
	if u := usage(3609); u.CPUPct != float64(67445842-54286184)/1e9/r.secs*100 || *u.WaitPct != float64(539146683-501657975)/1e9/r.secs*100 {
		t.Errorf("iothread-virtioscsi1 = %v %v", u.CPUPct, *u.WaitPct)
	}
	for _, tid := range []int{3608, 3610} {
		if u := usage(tid); u.CPUPct != 0 || *u.WaitPct != 0 {
			t.Errorf("idle iothread %d = %v %v", tid, u.CPUPct, *u.WaitPct)
		}
	}
	if u := usage(r.pid); u.CPUPct != float64(227237478-188913482)/1e9/r.secs*100 {
		t.Errorf("main loop = %v", u.CPUPct)
	}
}

func TestUsageOfEdges(t *testing.T) {
	a := Counters{TID: 1, RunNs: 1e9, WaitNs: 1e9, HasSchedstat: true, Ticks: 100, Start: 7}
	b := Counters{TID: 1, RunNs: 1.5e9, WaitNs: 1.25e9, HasSchedstat: true, Ticks: 150, Start: 7}
	u, ok := UsageOf(a, b, 2)
	if !ok || u.CPUPct != 25 || u.WaitPct == nil || *u.WaitPct != 12.5 {
		t.Errorf("schedstat: %+v %v", u, ok)
	}
	// Without schedstat on either side: CPU from clock ticks, wait unknown.
	na, nb := a, b
	na.HasSchedstat = false
	if u, ok := UsageOf(na, nb, 2); !ok || u.CPUPct != 25 || u.WaitPct != nil {
		t.Errorf("ticks: %+v %v", u, ok)
	}
	nb.HasSchedstat, na.HasSchedstat = false, true
	if u, ok := UsageOf(na, nb, 0.5); !ok || u.CPUPct != 100 || u.WaitPct != nil {
		t.Errorf("ticks (b without schedstat): %+v %v", u, ok)
	}
	for name, tc := range map[string]struct {
		a, b Counters
		sec  float64
	}{
		"no time":       {a, b, 0},
		"negative time": {a, b, -1},
		"other thread":  {a, Counters{TID: 2, RunNs: 2e9, WaitNs: 2e9, Ticks: 200, Start: 7, HasSchedstat: true}, 1},
		"reused tid":    {a, Counters{TID: 1, RunNs: 2e9, WaitNs: 2e9, Ticks: 200, Start: 8, HasSchedstat: true}, 1},
		"run back":      {a, Counters{TID: 1, RunNs: 0.5e9, WaitNs: 2e9, Ticks: 200, Start: 7, HasSchedstat: true}, 1},
		"wait back":     {a, Counters{TID: 1, RunNs: 2e9, WaitNs: 0.5e9, Ticks: 200, Start: 7, HasSchedstat: true}, 1},
		"ticks back":    {a, Counters{TID: 1, RunNs: 2e9, WaitNs: 2e9, Ticks: 50, Start: 7, HasSchedstat: true}, 1},
	} {
		if _, ok := UsageOf(tc.a, tc.b, tc.sec); ok {
			t.Errorf("%s: compared", name)
		}
	}
	if _, err := NewReader(node.New(node.NewPaths("/", "/nonexistent-proc", ""), 0)); err == nil {
		t.Error("a missing procfs root accepted")
	}
}

// A thread that spins is always either running or waiting for a core:
// over a second, its run time plus its run-queue wait is the whole second,
// however busy the machine is. The thread-saturated finding relies on this
// sum, not on the run time alone: on this shared machine a spinning thread
// ran 17.7 % of a core and waited 81.8 % (run + wait 99.5 %).
func TestSpinningThreadRunPlusWait(t *testing.T) {
	if _, err := os.Stat("/proc/self/schedstat"); err != nil {
		t.Skip("no schedstat on this kernel")
	}
	tid, stop := spinThread()
	defer stop()
	r, err := NewReader(node.New(node.NewPaths("/", "/proc", ""), 0))
	if err != nil {
		t.Fatal(err)
	}
	pid := os.Getpid()
	a := r.Read(pid, []int{pid, tid})
	t0 := time.Now()
	time.Sleep(time.Second)
	b := r.Read(pid, []int{pid, tid})
	u, ok := UsageOf(a[tid], b[tid], time.Since(t0).Seconds())
	if !ok {
		t.Fatalf("thread %d not read: %v %v", tid, a, b)
	}
	t.Logf("spinning thread %d: ran %.1f %% of a core, waited %.1f %% (run + wait %.1f %%)", tid, u.CPUPct, *u.WaitPct, u.CPUPct+*u.WaitPct)
	if sum := u.CPUPct + *u.WaitPct; sum < 95 || sum > 105 {
		t.Errorf("run + wait = %.1f %% of the second, want ~100 %%", sum)
	}
	// stat (the name) is read for the main thread only: a thread with
	// schedstat needs no more for its usage.
	if a[pid].Comm == "" || a[pid].Start == 0 {
		t.Errorf("main thread %d: no name or start time read: %+v", pid, a[pid])
	}
	// The spinning goroutine may have locked the main thread itself.
	if tid != pid && (a[tid].Comm != "" || a[tid].Ticks != 0) {
		t.Errorf("thread %d: stat read although schedstat was there: %+v", tid, a[tid])
	}
}

// A thread without schedstat (a kernel without it) falls back to stat's
// clock ticks; one with neither file readable is left out.
func TestReadWithoutSchedstat(t *testing.T) {
	proc := t.TempDir()
	stat := func(tid, utime, stime, start int) string {
		return fmt.Sprintf("%d (t%d) S 1 1 1 0 -1 0 0 0 0 0 %d %d 0 0 20 0 3 0 %d 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", tid, tid, utime, stime, start)
	}
	files := map[string]string{
		"100/task/100/stat": stat(100, 7, 3, 42), "100/task/100/schedstat": "5 6 7\n",
		"100/task/101/stat":      stat(101, 20, 5, 43), // no schedstat
		"100/task/102/schedstat": "8 9 10\n",           // no stat: schedstat is enough
		"100/task/103/comm":      "x\n",                // neither
	}
	for name, text := range files {
		p := filepath.Join(proc, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(text), 0o644)
	}
	// (issue 21) A FIFO where a counter file should be is not read (it
	// used to block the reader for good): that thread is left out.
	os.MkdirAll(filepath.Join(proc, "100/task/104"), 0o755)
	for _, f := range []string{"schedstat", "stat"} {
		if err := syscall.Mkfifo(filepath.Join(proc, "100/task/104", f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r, _ := NewReader(node.New(node.NewPaths("/", proc, ""), 0))
	t0 := time.Now()
	got := r.Read(100, []int{100, 101, 102, 103, 104})
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
	want := map[int]Counters{
		100: {TID: 100, Comm: "t100", RunNs: 5, WaitNs: 6, HasSchedstat: true, Ticks: 10, Start: 42},
		101: {TID: 101, Comm: "t101", Ticks: 25, Start: 43},
		102: {TID: 102, RunNs: 8, WaitNs: 9, HasSchedstat: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Read =\n%+v\nwant\n%+v", got, want)
	}
}

// CPUSeconds: schedstat's run time where there is one, else user + system
// ticks at USER_HZ; the wait is not CPU time.
func TestCPUSeconds(t *testing.T) {
	for _, c := range []struct {
		c    Counters
		want float64
	}{
		{Counters{RunNs: 1_500_000_000, WaitNs: 9e9, HasSchedstat: true, Ticks: 999}, 1.5},
		{Counters{RunNs: 1_500_000_000, Ticks: 250}, 2.5},
		{Counters{}, 0},
	} {
		if got := c.c.CPUSeconds(); got != c.want {
			t.Errorf("%+v: %v, want %v", c.c, got, c.want)
		}
	}
}

// The stat and schedstat lines as the kernel writes them, read in place: a
// name may hold spaces and parentheses (the fields start after the last
// ')'); a short or non-numeric line is no reading, and neither is a number
// past 64 bits.
func TestParseLines(t *testing.T) {
	line := "3607 (qemu) (x y)) S 1 3607 3607 0 -1 4194560 100 0 0 0 10 8 0 0 20 0 9 0 133653 1 2 3\n"
	if comm, ticks, start, ok := parseStat([]byte(line)); !ok || comm != "qemu) (x y)" || ticks != 18 || start != 133653 {
		t.Errorf("parseStat = %q %d %d %v", comm, ticks, start, ok)
	}
	for _, bad := range []string{"", "3607 qemu S 1", "3607 (q) S 1 2 3 4 5 6 7 8 9 10 x 8 0 0 20 0 9 0 1", "3607 (q) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18\n"} {
		if _, _, _, ok := parseStat([]byte(bad)); ok {
			t.Errorf("parseStat(%q) ok", bad)
		}
	}
	if run, wait, ok := parseSchedstat([]byte("188913482 382618976 1203\n")); !ok || run != 188913482 || wait != 382618976 {
		t.Errorf("parseSchedstat = %d %d %v", run, wait, ok)
	}
	for _, bad := range []string{"", "1 2", "1 2 x\n", "18446744073709551616 0 0\n", "-1 2 3\n"} {
		if _, _, ok := parseSchedstat([]byte(bad)); ok {
			t.Errorf("parseSchedstat(%q) ok", bad)
		}
	}
}

// spinThread starts a goroutine locked to an OS thread that spins until
// stop is called: its run time (and run-queue wait) is what the tests read.
func spinThread() (tid int, stop func()) {
	tidc, done := make(chan int), make(chan struct{})
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		tidc <- unix.Gettid()
		for {
			select {
			case <-done:
				return
			//lint:ignore SA5004 the thread spins on purpose: its run time and run-queue wait are what the tests read
			default:
			}
		}
	}()
	return <-tidc, func() { close(done) }
}
