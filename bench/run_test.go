package bench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/fio"
	"github.com/pvediskcheck/pvediskcheck/outfile"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// fioStatus answers fio runs with the recorded test-guest runs (rr4k and
// sync on /dev/sda, 2 s + 1 s ramp, 32 MiB), the stop script and rm with
// their recorded exit 0.
func fioStatus(t *testing.T) func([]string) string {
	return func(argv []string) string {
		switch {
		case argv[0] == "fio" && slices.Contains(argv, "--name=sync"):
			return fixture(t, "fio-sync.status.json")
		case argv[0] == "fio":
			return fixture(t, "fio-rr4k.status.json")
		case argv[0] == "sh", argv[0] == "rm":
			return fixture(t, "kill.status.json")
		}
		return ""
	}
}

// runFioT is one run of argv as Run makes it, outside a Run.
func runFioT(ctx context.Context, a qmp.Agent, argv []string, due time.Duration, clock Clock) (qmp.ExecStatus, error) {
	r := &runState{a: a, vmid: 370, claimed: map[string]bool{}, cleaned: map[string]bool{}}
	lctx, cancel := afterInterrupt(ctx, nil)
	defer cancel()
	return r.runFio(ctx, lctx, argv, due, clock, &Outcome{})
}

type fixedObserver struct{ o Observation }

func (f fixedObserver) Start(context.Context, Step) func() Observation {
	return func() Observation { return f.o }
}

func method(t *testing.T, jobs ...string) Method {
	js, err := Pick(LabJobSet(), jobs, true)
	if err != nil {
		t.Fatal(err)
	}
	m, err := NewMethod(js, 2, 2*time.Second, time.Second, "32M")
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func twoDisks() []Disk {
	return []Disk{
		{ID: "scsi1", Target: Target{Disk: "scsi1", Device: "/dev/sdb", Mode: Raw, Path: "/dev/sdb"},
			Facts: DiskFacts{Cache: qemuserver.CacheOf("none"), AreaBytes: 32 << 20}},
		{ID: "virtio1", Target: Target{Disk: "virtio1", Device: "/dev/vda", Mode: File, Path: "/mnt/v/" + TestDirName + "/" + TestFileName, Dir: "/mnt/v/" + TestDirName, Mount: "/mnt/v"},
			Facts: DiskFacts{Cache: qemuserver.CacheOf("unsafe"), AreaBytes: 32 << 20}},
	}
}

func TestRunSavesEveryRunAndJudges(t *testing.T) {
	g := &guest{status: fioStatus(t), running: 1}
	a := newGuest(t, g)
	m := method(t, "rr4k", "sync")
	dir := filepath.Join(t.TempDir(), "out")
	var progress []string
	out := Run(context.Background(), a, m, twoDisks(), Options{VMID: 370, Out: newFolder(t, dir), Clock: &stepClock{},
		Observer: fixedObserver{Observation{FlushOps: p(300), DirtyGrowthBytes: p(0), CachedBytes: p(0)}},
		OnProgress: func(p Progress) {
			if !p.Done {
				progress = append(progress, p.Step.File()+" "+p.Left.String())
			}
		}})
	if out.Err != nil || len(out.Done) != 8 || len(out.Missing) != 0 {
		t.Fatalf("%v, %d done, missing %v", out.Err, len(out.Done), out.Missing)
	}
	if want := "scsi1-rr4k-1.json 21s scsi1-sync-1.json 18s virtio1-rr4k-1.json 15s virtio1-sync-1.json 12s " +
		"scsi1-rr4k-2.json 9s scsi1-sync-2.json 6s virtio1-rr4k-2.json 3s virtio1-sync-2.json 0s"; strings.Join(progress, " ") != want {
		t.Errorf("progress %q", strings.Join(progress, " "))
	}
	fios := g.ran("fio")
	if len(fios) != 8 || fios[0][2] != "--filename=/dev/sdb" || fios[2][2] != "--filename=/mnt/v/"+TestDirName+"/"+TestFileName {
		t.Errorf("fio runs %v", fios)
	}
	// Every run behind its guard: the raw disk's first MiB read again
	// until a job writes it (rr4k reads, sync writes), the file's folder.
	var guards []string
	for _, gd := range g.guards {
		guards = append(guards, gd[0]+" "+gd[1]+" "+gd[3])
	}
	if want := "raw /dev/sdb 1 raw /dev/sdb 1 file /mnt/v/.pvediskcheck-bench 0 file /mnt/v/.pvediskcheck-bench 0 " +
		"raw /dev/sdb 0 raw /dev/sdb 0 file /mnt/v/.pvediskcheck-bench 0 file /mnt/v/.pvediskcheck-bench 0"; strings.Join(guards, " ") != want {
		t.Errorf("guards %q", strings.Join(guards, " "))
	}
	// The folder made first, the test file and folder removed afterwards;
	// the raw device is not touched.
	if f, rm := g.scripts(folderScript), g.scripts(cleanScript); len(f) != 1 || f[0][5] != "/mnt/v/"+TestDirName || f[0][6] != "1" ||
		len(rm) != 1 || rm[0][4] != "/mnt/v/"+TestDirName || rm[0][5] != "/mnt/v/"+TestDirName+"/"+TestFileName {
		t.Errorf("folder %v rm %v", f, rm)
	}
	sum, err := fio.Load([]string{dir}, fio.Options{})
	if err != nil || len(sum.Groups) != 4 {
		t.Fatalf("fio summary of the results: %v %+v", err, sum)
	}
	if b, err := os.ReadFile(filepath.Join(dir, SettingsFile)); err != nil || !strings.Contains(string(b), "virtio1:") {
		t.Errorf("settings: %v %s", err, b)
	}
	if lines, ok := ReadSettings(dir); !ok || len(lines) != 2 || !strings.HasPrefix(lines[1], "virtio1: ") {
		t.Errorf("ReadSettings: %v %q", ok, lines)
	}
	if _, ok := ReadSettings(t.TempDir()); ok {
		t.Error("ReadSettings of a folder without it")
	}
	r := Summarise(m, twoDisks(), out, 0)
	if !r.Complete || len(r.Disks) != 2 || len(r.Disks[0].Jobs) != 2 {
		t.Fatalf("%+v", r)
	}
	for _, d := range r.Disks {
		for _, j := range d.Jobs {
			if j.IOPS.N != 2 || j.IOPS.Mean <= 0 || j.P99 == nil {
				t.Errorf("%s %s: %+v", d.ID, j.Name, j.IOPS)
			}
			// flushes-ignored on the unsafe disk's fsync job only.
			want := d.ID == "virtio1" && j.Name == "sync"
			if got := slices.Equal(kinds(j.Evidence), []Kind{FlushesIgnored}); got != want || !want && len(j.Evidence) != 0 {
				t.Errorf("%s %s evidence %+v", d.ID, j.Name, j.Evidence)
			}
			if want && !slices.Equal(j.Evidence[0].Runs, []int{1, 2}) {
				t.Errorf("runs %v", j.Evidence[0].Runs)
			}
		}
	}
	if len(r.Comparisons) == 0 {
		t.Fatal("no comparison")
	}
	for _, c := range r.Comparisons {
		// The same recorded run on both sides: no difference, spread 0.
		if c.A != "scsi1" || c.B != "virtio1" || c.Verdict != fio.WithinNoise {
			t.Errorf("%+v", c)
		}
	}
}

func TestRunInterrupted(t *testing.T) {
	g := &guest{status: fioStatus(t), running: 1 << 30} // fio never finishes
	a := newGuest(t, g)
	m := method(t, "rr4k")
	ctx, cancel := context.WithCancel(context.Background())
	out := Run(ctx, a, m, twoDisks(), Options{VMID: 370, Out: newFolder(t, filepath.Join(t.TempDir(), "out")), Clock: &stepClock{},
		OnProgress: func(p Progress) {
			if !p.Done {
				time.AfterFunc(50*time.Millisecond, cancel)
			}
		}})
	if exitcode.Of(out.Err) != exitcode.Unreachable || len(out.Done) != 0 || len(out.Missing) != 4 {
		t.Fatalf("%v, done %d, missing %d", out.Err, len(out.Done), len(out.Missing))
	}
	// The stop script was sent for fio's pid, and the test file removed.
	var stop []string
	for _, s := range g.ran("sh") {
		if s[2] == stopScript {
			stop = s
		}
	}
	// After Ctrl-C: SIGKILL a second after SIGTERM, the test file and
	// folder removed by the stop script itself.
	if len(stop) != 8 || stop[4] != strconv.Itoa(1002) || stop[5] != "10" || stop[6] != "/mnt/v/"+TestDirName {
		t.Errorf("stop %q", stop)
	}
	if len(g.ran("fio")) != 1 || len(g.scripts(cleanScript)) != 0 || len(out.Left) != 0 {
		t.Errorf("fio %v rm %v left %v", g.ran("fio"), g.scripts(cleanScript), out.Left)
	}
	r := Summarise(m, twoDisks(), out, 0)
	if r.Complete || len(r.Missing) != 4 || !strings.Contains(r.Stopped, "stopped during scsi1-rr4k-1.json") {
		t.Errorf("%+v", r)
	}
}

func TestRunAgentStops(t *testing.T) {
	// The agent stops answering fio's third start (exec 4: the folder's is 1): what completed is kept,
	// and the test file is still removed once it answers again.
	g := &guest{status: fioStatus(t), silent: func(n int, argv []string) bool { return n >= 4 && argv[0] == "fio" }}
	a := newGuest(t, g)
	a.Timeout = 300 * time.Millisecond
	m := method(t, "rr4k")
	dir := filepath.Join(t.TempDir(), "out")
	out := Run(context.Background(), a, m, twoDisks(), Options{VMID: 370, Out: newFolder(t, dir), Clock: &stepClock{}})
	if exitcode.Of(out.Err) != exitcode.Unreachable || len(out.Done) != 2 || len(out.Missing) != 2 {
		t.Fatalf("%v, done %d, missing %d", out.Err, len(out.Done), len(out.Missing))
	}
	if !strings.Contains(out.Err.Error(), "scsi1 rr4k run 2") || !strings.Contains(out.Err.Error(), "guest agent") {
		t.Errorf("%v", out.Err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(g.scripts(cleanScript)) != 1 || len(files) != 2 {
		t.Errorf("files %v", files)
	}
	r := Summarise(m, twoDisks(), out, 0)
	if r.Complete || strings.Join(r.Missing, " ") != "scsi1-rr4k-2.json virtio1-rr4k-2.json" || len(r.Disks[0].Jobs) != 1 {
		t.Errorf("%+v", r)
	}
}

func TestPollDelay(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	for _, c := range []struct{ elapsed, due, want time.Duration }{
		{0, 23 * s, s}, // the first poll: a fio that fails at once
		{s, 23 * s, s}, // then as long again as the run took
		{2 * s, 23 * s, 2 * s},
		{4 * s, 23 * s, 4 * s},
		{8 * s, 23 * s, 8 * s},
		{16 * s, 23 * s, 7 * s}, // cut to land on the end
		{21 * s, 23 * s, 2 * s},
		{60 * s, 600 * s, PollRare},       // a long run: at most PollRare
		{22*s + 500*ms, 23 * s, 500 * ms}, // the last wait lands on the end
		{22*s + 950*ms, 23 * s, PollNear}, // never sooner than PollNear
		{23 * s, 23 * s, PollNear},        // due: at short intervals
		{23*s + 500*ms, 23 * s, PollNear},
		{24 * s, 23 * s, PollNear}, // 1 s over: a tenth is 100 ms
		{25 * s, 23 * s, 200 * ms}, // 2 s over: a tenth of the overrun
		{33 * s, 23 * s, s},        // 10 s over: back to one a second
		{83 * s, 23 * s, s},        // never later than PollEvery
		{0, 0, PollNear},           // the fill: its end is not known
		{5 * s, 0, 500 * ms},
		{30 * s, 0, s},
	} {
		if got := pollDelay(c.elapsed, c.due); got != c.want {
			t.Errorf("pollDelay(%s, due %s) = %s, want %s", c.elapsed, c.due, got, c.want)
		}
	}
}

// TestRunFioPolls steps one fio run through the fake agent on a clock that
// never sleeps: the polls before the run is due, the end noticed, and how
// many exchanges it took.
func TestRunFioPolls(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	due := 3 * s // 2 s + 1 s ramp
	for _, c := range []struct {
		name           string
		due, runFor    time.Duration
		waits          []time.Duration // nil: checked by the bounds below
		maxLate        time.Duration
		minPol, maxPol int
	}{
		{name: "ends early", due: due, runFor: 500 * ms, waits: []time.Duration{s}, maxLate: 500 * ms},
		{name: "ends when due", due: due, runFor: due, waits: []time.Duration{s, s, s}},
		{name: "ends 250 ms after due", due: due, runFor: due + 250*ms, waits: []time.Duration{s, s, s, PollNear, PollNear, PollNear}, maxLate: 50 * ms},
		{name: "due in 2.5 s", due: 2500 * ms, runFor: 2600 * ms, waits: []time.Duration{s, s, 500 * ms, PollNear}},
		// Lab 19's 20 s + 3 s ramp: 6 polls before due.
		{name: "lab 19, ends 300 ms after due", due: 23 * s, runFor: 23*s + 300*ms, waits: []time.Duration{s, s, 2 * s, 4 * s, 8 * s, 7 * s, PollNear, PollNear, PollNear}},
		// 20 s over: within a tenth of the overrun (2 s), at far fewer
		// exchanges than one every 100 ms (200 from due on): 3 before due,
		// 11 at 100 ms, 24 growing to 1 s, then one a second.
		{name: "overruns by 20 s", due: due, runFor: due + 20*s, maxLate: 2 * s, minPol: 45, maxPol: 50},
		{name: "fill, 2 s", due: 0, runFor: 2 * s, maxLate: 200 * ms, minPol: 18, maxPol: 18},
		{name: "fill, 60 s", due: 0, runFor: 60 * s, maxLate: s, minPol: 80, maxPol: 90},
	} {
		clock := &stepClock{}
		g := &guest{status: fioStatus(t), clock: clock, runFor: c.runFor}
		st, err := runFioT(context.Background(), newGuest(t, g), []string{"fio", "--name=rr4k"}, c.due, clock)
		if err != nil || !st.Exited {
			t.Fatalf("%s: %v %+v", c.name, err, st)
		}
		waits := clock.Waits()
		var at time.Duration
		for i, w := range waits {
			at += w
			// Before due the waits are in [PollNear, PollRare]; from due
			// on they grow with the overrun, in [PollNear, PollEvery].
			if w < PollNear || w > PollRare || at-w >= c.due && w > PollEvery {
				t.Errorf("%s: wait %d is %s", c.name, i, w)
			}
		}
		if c.waits != nil && !slices.Equal(waits, c.waits) {
			t.Errorf("%s: waits %v, want %v", c.name, waits, c.waits)
		}
		if late := at - c.runFor; late < 0 || late > c.maxLate {
			t.Errorf("%s: the end noticed %s after it, want at most %s (waits %v)", c.name, late, c.maxLate, waits)
		}
		// One exchange per wait, one after another.
		if polls := g.polls[1001]; polls != len(waits) {
			t.Errorf("%s: %d polls for %d waits", c.name, polls, len(waits))
		}
		if c.waits == nil && (len(waits) < c.minPol || len(waits) > c.maxPol) {
			t.Errorf("%s: %d polls, want %d to %d (waits %v)", c.name, len(waits), c.minPol, c.maxPol, waits)
		}
	}
}

// TestRunPollsFromThePlan: Run gives each run its plan's ramp + runtime
// as its due time.
func TestRunPollsFromThePlan(t *testing.T) {
	clock := &stepClock{}
	g := &guest{status: fioStatus(t), clock: clock, runFor: 3*time.Second + 150*time.Millisecond}
	m := method(t, "rr4k")
	out := Run(context.Background(), newGuest(t, g), m, twoDisks()[:1], Options{VMID: 370, Out: newFolder(t, filepath.Join(t.TempDir(), "out")), Clock: clock})
	if out.Err != nil || len(out.Done) != 2 {
		t.Fatalf("%v, %d done", out.Err, len(out.Done))
	}
	one := []time.Duration{time.Second, time.Second, time.Second, PollNear, PollNear}
	if want := append(slices.Clone(one), one...); !slices.Equal(clock.Waits(), want) {
		t.Errorf("waits %v, want %v", clock.Waits(), want)
	}
}

// TestRunFioMissedSyncs: a busy guest's agent that misses syncs (the
// command after them never sent) is asked again, up to SilentTries in a
// row; one more and the run is given up, naming the pid.
func TestRunFioMissedSyncs(t *testing.T) {
	for _, c := range []struct {
		name   string
		silent func(n int) bool // sync 1 is fio's guest-exec, then the polls
		err    string           // "" for a run that completes
		polls  int              // guest-exec-status answered (a missed poll's wait counts on the clock)
		execs  int
		runFor time.Duration // 3 s unless set
	}{
		{name: "none missed", silent: func(int) bool { return false }, polls: 3, execs: 1},
		{name: "the start's sync missed", silent: func(n int) bool { return n == 1 }, polls: 3, execs: 1},
		{name: "start missed SilentTries-1 times", silent: func(n int) bool { return n < SilentTries }, polls: 3, execs: 1},
		{name: "start missed SilentTries times", silent: func(n int) bool { return n <= SilentTries }, err: "did not answer", execs: 0},
		{name: "one poll missed", silent: func(n int) bool { return n == 3 }, polls: 2, execs: 1},
		{name: "SilentTries-1 polls in a row missed", silent: func(n int) bool { return n >= 3 && n < 3+SilentTries-1 }, polls: 2, execs: 1},
		{name: "missed polls apart do not add up", silent: func(n int) bool { return n >= 3 && n < 3+SilentTries-1 || n >= 9 && n < 9+SilentTries-1 }, polls: -1, execs: 1, runFor: time.Minute},
		{name: "SilentTries polls in a row missed", silent: func(n int) bool { return n >= 3 && n < 3+SilentTries }, err: "the guest agent left 6 polls in a row unanswered", polls: 1, execs: 2}, // then the stop
	} {
		clock := &stepClock{}
		if c.runFor == 0 {
			c.runFor = 3 * time.Second
		}
		g := &guest{status: fioStatus(t), clock: clock, runFor: c.runFor, syncSilent: c.silent}
		a := newGuest(t, g)
		a.Timeout = 50 * time.Millisecond
		st, err := runFioT(context.Background(), a, []string{"fio", "--name=rr4k"}, 3*time.Second, clock)
		switch {
		case c.err == "" && (err != nil || !st.OK()):
			t.Errorf("%s: %v %+v", c.name, err, st)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: %v, want %q", c.name, err, c.err)
		}
		if g.execs != c.execs || g.polls[1001] != c.polls && c.execs == 1 && c.polls >= 0 {
			t.Errorf("%s: %d fio started, %d polls answered (want %d, %d)", c.name, g.execs, g.polls[1001], c.execs, c.polls)
		}
	}
}

// newFolder makes the results folder dir as the command does (outfile).
func newFolder(t testing.TB, dir string) *outfile.Folder {
	t.Helper()
	n, err := outfile.CheckNew("out", dir)
	if err != nil {
		t.Fatal(err)
	}
	f, err := n.Create()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}
