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
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
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
		{ID: "virtio1", Target: Target{Disk: "virtio1", Device: "/dev/vda", Mode: File, Path: "/mnt/v/" + TestFileName, Mount: "/mnt/v"},
			Facts: DiskFacts{Cache: qemuserver.CacheOf("unsafe"), AreaBytes: 32 << 20}},
	}
}

func TestRunSavesEveryRunAndJudges(t *testing.T) {
	g := &guest{status: fioStatus(t), running: 1}
	a := newGuest(t, g)
	m := method(t, "rr4k", "sync")
	dir := filepath.Join(t.TempDir(), "out")
	var progress []string
	out := Run(context.Background(), a, m, twoDisks(), Options{VMID: 370, Out: dir, PollEvery: 10 * time.Millisecond,
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
	if len(fios) != 8 || fios[0][2] != "--filename=/dev/sdb" || fios[2][2] != "--filename=/mnt/v/"+TestFileName {
		t.Errorf("fio runs %v", fios)
	}
	// The test file is removed afterwards; the raw device is not touched.
	if rm := g.ran("rm"); len(rm) != 1 || rm[0][3] != "/mnt/v/"+TestFileName {
		t.Errorf("rm %v", rm)
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
	out := Run(ctx, a, m, twoDisks(), Options{VMID: 370, Out: t.TempDir(), PollEvery: 10 * time.Millisecond,
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
	if len(stop) != 6 || stop[4] != strconv.Itoa(1001) || stop[5] != "10" {
		t.Errorf("stop %q", stop)
	}
	if len(g.ran("fio")) != 1 || len(g.ran("rm")) != 1 {
		t.Errorf("fio %v rm %v", g.ran("fio"), g.ran("rm"))
	}
	r := Summarise(m, twoDisks(), out, 0)
	if r.Complete || len(r.Missing) != 4 || !strings.Contains(r.Stopped, "stopped during scsi1-rr4k-1.json") {
		t.Errorf("%+v", r)
	}
}

func TestRunAgentStops(t *testing.T) {
	// The agent stops answering fio's third start: what completed is kept,
	// and the test file is still removed once it answers again.
	g := &guest{status: fioStatus(t), silent: func(n int, argv []string) bool { return n >= 3 && argv[0] == "fio" }}
	a := newGuest(t, g)
	a.Timeout = 300 * time.Millisecond
	m := method(t, "rr4k")
	dir := t.TempDir()
	out := Run(context.Background(), a, m, twoDisks(), Options{VMID: 370, Out: dir, PollEvery: 10 * time.Millisecond})
	if exitcode.Of(out.Err) != exitcode.Unreachable || len(out.Done) != 2 || len(out.Missing) != 2 {
		t.Fatalf("%v, done %d, missing %d", out.Err, len(out.Done), len(out.Missing))
	}
	if !strings.Contains(out.Err.Error(), "scsi1 rr4k run 2") || !strings.Contains(out.Err.Error(), "guest agent") {
		t.Errorf("%v", out.Err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	if len(g.ran("rm")) != 1 || len(files) != 2 {
		t.Errorf("files %v", files)
	}
	r := Summarise(m, twoDisks(), out, 0)
	if r.Complete || strings.Join(r.Missing, " ") != "scsi1-rr4k-2.json virtio1-rr4k-2.json" || len(r.Disks[0].Jobs) != 1 {
		t.Errorf("%+v", r)
	}
}
