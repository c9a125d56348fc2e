package bench

import (
	"context"
	"encoding/base64"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// Issue 31: a guest agent whose read of the first MiB is short, fails or
// does not add up proves nothing: the disk is refused, never "blank".
func TestPlaceHeadReadsProveOrRefuse(t *testing.T) {
	blank := Placement{Disk: "scsi1", Seen: guestdisk.Seen{Device: "/dev/sdb"}}
	zeros := func(n int) string { return strings.Repeat("A", n/3*4) } // base64 of n zero bytes, n a multiple of 3
	for _, c := range []struct {
		name  string
		reply func(read, count int) string
		code  exitcode.Code
		want  string
	}{
		{"whole reads", nil, exitcode.OK, ""},
		{"short, no eof", func(_, n int) string { return qmptest.Return(`{"count": 3, "buf-b64": "AAAA", "eof": false}`) }, exitcode.Unreachable, "gave 3 (eof false)"},
		{"eof before 1 MiB", func(r, n int) string {
			if r == 1 {
				return readOfZeros(n)
			}
			return qmptest.Return(`{"count": 0, "buf-b64": "", "eof": true}`)
		}, exitcode.Unreachable, "has 262144 of the 1048576 bytes checked"},
		{"failed read", func(_, n int) string { return qmptest.Fail("GenericError", "read failed: Input/output error") }, exitcode.Unreachable, "Input/output error"},
		{"count says more than sent", func(_, n int) string {
			return qmptest.Return(fmt.Sprintf(`{"count": %d, "buf-b64": %q, "eof": false}`, n, zeros(3)))
		}, exitcode.Unreachable, "not a read to trust"},
		{"no count", func(_, n int) string { return qmptest.Return(`{"buf-b64": "AAAA", "eof": false}`) }, exitcode.Unreachable, "count missing"},
		{"more than asked", func(_, n int) string { return readOfZeros(n + 3) }, exitcode.Unreachable, "not a read to trust"},
	} {
		g := &guest{status: func(argv []string) string { return fixture(t, "probe-blank.status.json") }, head: fixture(t, "file-read-zero.json"), headReply: c.reply}
		tg, err := Place(context.Background(), newGuest(t, g), blank, 128<<20)
		if exitcode.Of(err) != c.code || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %+v %v", c.name, tg, err)
		}
		if err != nil && !strings.Contains(err.Error(), "not proved blank, nothing written") {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}

func readOfZeros(n int) string {
	return qmptest.Return(fmt.Sprintf(`{"count": %d, "buf-b64": %q, "eof": false}`, n, base64.StdEncoding.EncodeToString(make([]byte, n))))
}

// --destroy writes over data, never over a device in use.
func TestPlaceDestroyInUse(t *testing.T) {
	for _, out := range []string{"pvediskcheck-mount=/dev/sdb1 /srv", "pvediskcheck-swap=/dev/sdb", "pvediskcheck-holder=dm-0"} {
		st := scriptStatus(0, "PTTYPE=dos\npvediskcheck-blkid-exit=0\npvediskcheck-partition=sdb1\n"+out+"\n")
		g := &guest{status: func([]string) string { return st }}
		_, err := Place(context.Background(), newGuest(t, g), Placement{Disk: "scsi1", Seen: guestdisk.Seen{Device: "/dev/sdb"}, Destroy: true}, 128<<20)
		if exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "--destroy does not write a device in use") {
			t.Errorf("%s: %v", out, err)
		}
	}
	// Data alone: written over, the probe's lines kept for every run's guard.
	st := scriptStatus(0, "DEVNAME=/dev/sdb\nPTTYPE=dos\npvediskcheck-blkid-exit=0\npvediskcheck-partition=sdb1\n")
	g := &guest{status: func([]string) string { return st }}
	tg, err := Place(context.Background(), newGuest(t, g), Placement{Disk: "scsi1", Seen: guestdisk.Seen{Device: "/dev/sdb"}, Destroy: true}, 128<<20)
	if err != nil || strings.Join(tg.Accepted, "|") != "PTTYPE=dos|pvediskcheck-partition=sdb1" || len(tg.Found) != 2 {
		t.Errorf("%+v %v", tg, err)
	}
}

// File mode: the folder bench would make, already there (a symlink
// planted under its name, say), or a mount point others may rename in, is
// refused before anything is written; so is a filesystem whose free space
// the agent does not say.
func TestPlaceFileFolder(t *testing.T) {
	p := Placement{Disk: "scsi1", Seen: guestdisk.Seen{Device: "/dev/sdb", Mounts: []string{"/mnt/x"}}, FreeBytes: map[string]int64{"/mnt/x": 1 << 30}}
	for _, c := range []struct{ out, want string }{
		{"pvediskcheck-folder=exists\n", "/mnt/x/.pvediskcheck-bench is already there"},
		{"pvediskcheck-folder=writable 777\n", "writable by others without the sticky bit (mode 777)"},
		{"pvediskcheck-folder=owner 1000\n", "not root's (owner 1000)"},
	} {
		g := &guest{status: func([]string) string { return "" }, folder: scriptStatus(GuardRefused, c.out)}
		_, err := Place(context.Background(), newGuest(t, g), p, 128<<20)
		if exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "nothing written") {
			t.Errorf("%s: %v", c.out, err)
		}
	}
	g := &guest{status: func([]string) string { return "" }}
	unknown := p
	unknown.FreeBytes = map[string]int64{"/mnt/x": -1}
	if _, err := Place(context.Background(), newGuest(t, g), unknown, 128<<20); exitcode.Of(err) != exitcode.Unreachable || !strings.Contains(err.Error(), "not written blind") {
		t.Errorf("free space unknown: %v", err)
	}
}

// Issue 31's time of check to time of use: the disk partitioned, formatted
// and mounted after Place and before a timed run. The run's guard finds
// it and bench stops there (exit 2): no fio after, the runs before kept.
func TestRunGuardRefuses(t *testing.T) {
	changed := scriptStatus(GuardRefused, "PTTYPE=dos\npvediskcheck-blkid-exit=0\npvediskcheck-partition=sdb1\npvediskcheck-mount=/dev/sdb1 /mnt/data\npvediskcheck-guard=changed\n")
	n := 0
	g := &guest{status: fioStatus(t), guard: func(args []string) string {
		if args[0] == "raw" {
			if n++; n == 2 {
				return changed
			}
		}
		return ""
	}}
	a := newGuest(t, g)
	m := method(t, "rr4k", "sync")
	out := Run(context.Background(), a, m, twoDisks(), Options{VMID: 370, Out: newFolder(t, filepath.Join(t.TempDir(), "out")), Clock: &stepClock{}})
	if exitcode.Of(out.Err) != exitcode.Usage || len(out.Done) != 1 || len(out.Missing) != 7 {
		t.Fatalf("%v, done %d, missing %d", out.Err, len(out.Done), len(out.Missing))
	}
	for _, w := range []string{"scsi1 (/dev/sdb in the guest) changed since bench checked it", "partition table dos", "mounted: /dev/sdb1 /mnt/data", "Stopped before scsi1-sync-1.json: nothing more was written"} {
		if !strings.Contains(out.Err.Error(), w) {
			t.Errorf("%v lacks %q", out.Err, w)
		}
	}
	if len(g.ran("fio")) != 1 || len(g.scripts(cleanScript)) != 1 {
		t.Errorf("fio %d, rm %d", len(g.ran("fio")), len(g.scripts(cleanScript)))
	}
	// A file target's folder no longer bench's.
	g = &guest{status: fioStatus(t), guard: func(args []string) string {
		if args[0] == "file" {
			return scriptStatus(GuardRefused, "pvediskcheck-guard=folder\n")
		}
		return ""
	}}
	out = Run(context.Background(), newGuest(t, g), m, twoDisks()[1:], Options{VMID: 370, Out: newFolder(t, filepath.Join(t.TempDir(), "out")), Clock: &stepClock{}})
	if exitcode.Of(out.Err) != exitcode.Usage || !strings.Contains(out.Err.Error(), "no longer bench's folder") || len(g.ran("fio")) != 0 {
		t.Errorf("%v, fio %d", out.Err, len(g.ran("fio")))
	}
	// The guard's own exit status from fio itself is fio's failure, not a
	// refusal (no marker).
	g = &guest{status: fioStatus(t), guard: func(args []string) string { return scriptStatus(GuardRefused, "fio: bad\n") }}
	out = Run(context.Background(), newGuest(t, g), m, twoDisks()[:1], Options{VMID: 370, Out: newFolder(t, filepath.Join(t.TempDir(), "out")), Clock: &stepClock{}})
	if exitcode.Of(out.Err) != exitcode.Unreachable || !strings.Contains(out.Err.Error(), "fio exited 97") {
		t.Errorf("%v", out.Err)
	}
}

// GuardArgv: what each run's guard is given.
func TestGuardArgv(t *testing.T) {
	raw := Target{Mode: Raw, Device: "/dev/sdb", Path: "/dev/sdb", Accepted: []string{"PTTYPE=dos", "pvediskcheck-partition=sdb1"}}
	a := GuardArgv(raw, true, []string{"fio", "--name=x"})
	if a[0] != "sh" || a[2] != guardScript || strings.Join(a[4:], "|") != "raw|/dev/sdb|PTTYPE=dos\npvediskcheck-partition=sdb1|1|fio|--name=x" {
		t.Errorf("%q", a[4:])
	}
	f := Target{Mode: File, Device: "/dev/sdb", Mount: "/m", Dir: "/m/" + TestDirName, Path: "/m/" + TestDirName + "/" + TestFileName}
	if a := GuardArgv(f, false, []string{"fio"}); strings.Join(a[4:], "|") != "file|/m/.pvediskcheck-bench|/m/.pvediskcheck-bench/test.fio|0|fio" {
		t.Errorf("%q", a[4:])
	}
}

// Ctrl-C while the guest agent hangs: bench gives the guest
// InterruptGrace, then ends, saying what it may have left and how to
// finish it (it waited 40 s before, a second Ctrl-C ignored too); a
// second Ctrl-C (Abort) ends the grace at once.
func TestRunInterruptedAgentHangs(t *testing.T) {
	for _, abort := range []bool{false, true} {
		var hang atomic.Bool
		g := &guest{status: fioStatus(t), running: 1 << 30}
		g.silent = func(n int, argv []string) bool { return hang.Load() }
		a := newGuest(t, g)
		a.Timeout = 10 * time.Second // the agent's own: the grace must cut it
		ctx, cancel := context.WithCancel(context.Background())
		actx, acancel := context.WithCancel(context.Background())
		m := method(t, "rr4k")
		var t0 atomic.Int64
		out := Run(ctx, a, m, twoDisks(), Options{VMID: 370, Out: newFolder(t, filepath.Join(t.TempDir(), "out")), Clock: &stepClock{}, Abort: actx,
			OnProgress: func(p Progress) {
				if !p.Done {
					time.AfterFunc(50*time.Millisecond, func() {
						hang.Store(true)
						t0.Store(time.Now().UnixNano())
						cancel()
						if abort {
							time.AfterFunc(100*time.Millisecond, acancel)
						}
					})
				}
			}})
		took := time.Since(time.Unix(0, t0.Load()))
		acancel()
		if exitcode.Of(out.Err) != exitcode.Unreachable || len(out.Left) != 2 || !strings.Contains(out.Err.Error(), "2 thing(s) may be left in the guest") {
			t.Fatalf("abort %v: %v, left %q", abort, out.Err, out.Left)
		}
		for _, w := range []string{"fio (guest pid 1002) may still be running", "qm guest exec 370 -- kill -TERM 1002", "did not answer within 1.7s after Ctrl-C",
			"the test file /mnt/v/.pvediskcheck-bench/test.fio and its folder were not seen removed", "qm guest exec 370 -- rm -r /mnt/v/.pvediskcheck-bench"} {
			if !strings.Contains(strings.Join(out.Left, "\n"), w) {
				t.Errorf("abort %v: %q lacks %q", abort, out.Left, w)
			}
		}
		// Not a timing test: the bound is the grace, far below the
		// agent's 10 s and the 40 s it was.
		if took > 4*InterruptGrace {
			t.Errorf("abort %v: %s after Ctrl-C", abort, took)
		}
		t.Logf("abort %v: ended %s after Ctrl-C", abort, took.Round(10*time.Millisecond))
	}
}

// Ctrl-C just as fio's guest-exec is sent: its pid still comes back
// within the grace and that fio is stopped.
func TestRunInterruptedDuringStart(t *testing.T) {
	g := &guest{status: fioStatus(t), running: 1 << 30}
	a := newGuest(t, g)
	ctx, cancel := context.WithCancel(context.Background())
	g.silent = func(n int, argv []string) bool {
		if argv[0] == "fio" {
			cancel() // Ctrl-C while the agent starts fio
		}
		return false
	}
	out := Run(ctx, a, method(t, "rr4k"), twoDisks(), Options{VMID: 370, Out: newFolder(t, filepath.Join(t.TempDir(), "out")), Clock: &stepClock{}})
	if exitcode.Of(out.Err) != exitcode.Unreachable || len(out.Left) != 0 || !g.killed[1002] {
		t.Errorf("%v, left %q, killed %v", out.Err, out.Left, g.killed)
	}
}

// fio --version that never exits (a guest whose fio hangs) is given up
// after ProbeTimeout, exit 3; so is the probe of a disk whose blkid hangs.
func TestGuestChecksHaveDeadlines(t *testing.T) {
	if ProbeTimeout > time.Minute {
		t.Fatalf("ProbeTimeout %s", ProbeTimeout)
	}
	g := &guest{osinfo: fixture(t, "osinfo.json"), status: fioStatus(t), running: 1 << 30}
	a := newGuest(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond) // stands for ProbeTimeout
	defer cancel()
	if _, _, err := FindFio(ctx, a, 370); exitcode.Of(err) != exitcode.Unreachable || !strings.Contains(err.Error(), "still running") {
		t.Errorf("fio --version hangs: %v", err)
	}
	hang := &guest{status: func([]string) string { return fixture(t, "fio-running.status.json") }}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel2()
	if _, err := Probe(ctx2, newGuest(t, hang), "/dev/sdb"); exitcode.Of(err) != exitcode.Unreachable || !strings.Contains(err.Error(), "checking /dev/sdb") {
		t.Errorf("probe hangs: %v", err)
	}
}

// A job's QEMU percentiles are of the kinds it makes: the guard's probe
// reads before a write job's fio (the real guest's rw4k showed read
// percentiles) are not the job's.
func TestJobKinds(t *testing.T) {
	jobs, err := ParseJobFile("k.fio", "[mixed]\nrw=randrw\n[trim]\nrw=randtrim\n")
	if err != nil {
		t.Fatal(err)
	}
	m := Method{Jobs: append(LabJobSet(), jobs...)}
	for _, c := range []struct{ job, want string }{
		{"rr4k", "[read]"}, {"sr1m", "[read]"}, {"rw4k", "[write]"}, {"rw4kqd1", "[write]"}, {"sw1m", "[write]"},
		{"sync", "[write flush]"}, {"mixed", "[read write]"}, {"trim", "[write]"}, {"nosuch", "[read write flush]"},
	} {
		if got := fmt.Sprint(jobKinds(m, c.job)); got != c.want {
			t.Errorf("%s: %s, want %s", c.job, got, c.want)
		}
	}
}
