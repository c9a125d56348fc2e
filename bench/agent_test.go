package bench

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

func fixture(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// noSuchProgram is qemu-ga 7.2's guest-exec reply for a program not on its
// PATH (recorded for "nosuchprog", testdata/README.md), for prog.
func noSuchProgram(prog string) string {
	return qmptest.Fail("GenericError", "Guest agent command failed, error was 'Failed to execute child process “"+prog+"” (No such file or directory)'")
}

// guest is a fake qemu-ga answering like the test guest did: guest-exec
// gives a pid, guest-exec-status answers "running" (the recorded reply)
// Running times (fio only), then the recorded status of what that program was.
type guest struct {
	mu      sync.Mutex
	osinfo  string
	status  func(argv []string) string // the exited status reply; "" for no such program
	running int                        // polls answered "not exited" before the status
	head    string                     // guest-file-read reply
	fsinfo  string
	disks   string
	silent  func(n int, argv []string) bool // guest-exec number n (from 1) is not answered
	// syncSilent leaves sync number n (from 1) unanswered.
	syncSilent func(n int) bool
	argvs      [][]string
	polls      map[int]int
	pidArgv    map[int][]string
	killed     map[int]bool // fio pids the stop script was run for
	execs      int
	// guard, when set, answers a run's guard (GuardArgv): a status reply
	// to refuse the run, "" to exec the program after it (the default).
	guard func(args []string) string
	// folder answers folderScript ("" for pvediskcheck-folder=ok, exit 0).
	folder string
	// headReply, when set, answers each guest-file-read of count bytes.
	headReply func(n, count int) string
	guards    [][]string // the guards' own arguments (mode, x, y, first)
	reads     int
	// With clock set, fio answers "running" until runFor has passed on
	// it since its guest-exec, instead of for running polls.
	clock   *stepClock
	runFor  time.Duration
	started map[int]time.Time
}

// stepClock is a Clock that never sleeps: After moves its time on by d at
// once and records d.
type stepClock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
}

func (c *stepClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *stepClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.waits = append(c.waits, d)
	ch := make(chan time.Time, 1)
	ch <- c.now
	return ch
}

func (c *stepClock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

func newGuest(t *testing.T, g *guest) qmp.Agent {
	a := qmptest.NewAgent(t)
	a.SyncSilent = g.syncSilent
	g.polls, g.pidArgv, g.killed, g.started = map[int]int{}, map[int][]string{}, map[int]bool{}, map[int]time.Time{}
	a.Handle = func(w net.Conn, cmd string, req gjson.Result) {
		g.mu.Lock()
		defer g.mu.Unlock()
		reply := ""
		switch cmd {
		case "guest-get-osinfo":
			reply = qmptest.Return(g.osinfo)
		case "guest-get-fsinfo":
			reply = qmptest.Return(g.fsinfo)
		case "guest-get-disks":
			reply = qmptest.Return(g.disks)
		case "guest-file-open":
			reply = qmptest.Return("1000")
		case "guest-file-read":
			g.reads++
			n := int(req.Get("arguments.count").Int())
			if g.headReply != nil {
				reply = g.headReply(g.reads, n)
			} else {
				reply = readOf(t, g.head, n)
			}
		case "guest-file-close":
			reply = qmptest.Return("{}")
		case "guest-exec":
			g.execs++
			argv := []string{req.Get("arguments.path").String()}
			for _, a := range req.Get("arguments.arg").Array() {
				argv = append(argv, a.String())
			}
			var guarded string
			if len(argv) > 8 && argv[2] == guardScript {
				g.guards = append(g.guards, argv[4:8])
				if g.guard != nil {
					guarded = g.guard(argv[4:8])
				}
				if guarded == "" {
					argv = argv[8:] // the guard execs the program
				}
			}
			if g.silent != nil && g.silent(g.execs, argv) {
				return
			}
			g.argvs = append(g.argvs, argv)
			if guarded != "" {
				pid := 1000 + g.execs
				g.pidArgv[pid] = []string{"guard:" + guarded}
				reply = qmptest.Return(fmt.Sprintf(`{"pid": %d}`, pid))
				break
			}
			if len(argv) > 2 && argv[0] == "sh" && (argv[2] == folderScript || argv[2] == cleanScript) {
				pid := 1000 + g.execs
				g.pidArgv[pid] = argv
				reply = qmptest.Return(fmt.Sprintf(`{"pid": %d}`, pid))
				break
			}
			if g.status(argv) == "" {
				reply = noSuchProgram(argv[0])
				break
			}
			pid := 1000 + g.execs
			g.pidArgv[pid] = argv
			if g.clock != nil {
				g.started[pid] = g.clock.Now()
			}
			if len(argv) > 4 && argv[2] == stopScript {
				n, _ := strconv.Atoi(argv[4])
				g.killed[n] = true
			}
			reply = qmptest.Return(fmt.Sprintf(`{"pid": %d}`, pid))
		case "guest-exec-status":
			pid := int(req.Get("arguments.pid").Int())
			g.polls[pid]++
			if a := g.pidArgv[pid]; len(a) == 1 && strings.HasPrefix(a[0], "guard:") {
				reply = qmptest.Return(strings.TrimPrefix(a[0], "guard:"))
			} else if len(a) > 2 && a[0] == "sh" && a[2] == folderScript {
				reply = qmptest.Return(orDefault(g.folder, scriptStatus(0, "pvediskcheck-folder=ok\n")))
			} else if len(a) > 2 && a[0] == "sh" && a[2] == cleanScript {
				reply = qmptest.Return(fixture(t, "kill.status.json"))
			} else if g.killed[pid] {
				reply = qmptest.Return(fixture(t, "fio-killed.status.json"))
			} else if g.pidArgv[pid][0] == "fio" && g.clock != nil && g.clock.Now().Sub(g.started[pid]) < g.runFor {
				reply = qmptest.Return(fixture(t, "fio-running.status.json"))
			} else if g.pidArgv[pid][0] == "fio" && g.clock == nil && g.polls[pid] <= g.running {
				reply = qmptest.Return(fixture(t, "fio-running.status.json"))
			} else {
				reply = qmptest.Return(g.status(g.pidArgv[pid]))
			}
		default:
			reply = qmptest.NotFound(cmd)
		}
		fmt.Fprint(w, reply+"\n")
	}
	return qmp.Agent{Path: a.Sock(), Timeout: 2 * time.Second}
}

// scriptStatus is guest-exec-status's reply, in qemu-ga 7.2's shape
// (testdata/probe-blank.status.json), for one of bench's own scripts that
// exited code printing out: their output is bench's, not the guest's.
func scriptStatus(code int, out string) string {
	return fmt.Sprintf(`{"exitcode": %d, "out-data": %q, "out-truncated": false, "exited": true}`, code, base64.StdEncoding.EncodeToString([]byte(out)))
}

// readOf answers a guest-file-read of count bytes with the recorded
// reply's bytes (reply) repeated to count, as qemu-ga's fread fills a
// read of a block device whole.
func readOf(t *testing.T, reply string, count int) string {
	b, err := base64.StdEncoding.DecodeString(gjson.Get(reply, "buf-b64").String())
	if err != nil || len(b) == 0 {
		t.Fatalf("guest-file-read fixture: %v", err)
	}
	out := bytes.Repeat(b, count/len(b)+1)[:count]
	return qmptest.Return(fmt.Sprintf(`{"count": %d, "buf-b64": %q, "eof": false}`, count, base64.StdEncoding.EncodeToString(out)))
}

// scripts lists the runs of one of bench's scripts (argv[2]).
func (g *guest) scripts(script string) [][]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out [][]string
	for _, a := range g.argvs {
		if len(a) > 2 && a[0] == "sh" && a[2] == script {
			out = append(out, a)
		}
	}
	return out
}

func (g *guest) ran(prog string) [][]string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out [][]string
	for _, a := range g.argvs {
		if a[0] == prog {
			out = append(out, a)
		}
	}
	return out
}

func TestFindFio(t *testing.T) {
	ctx := context.Background()
	version := func(argv []string) string {
		if argv[0] == "fio" {
			return fixture(t, "fio-version.status.json")
		}
		return ""
	}
	missing := func([]string) string { return "" }
	for _, c := range []struct {
		name, osinfo string
		status       func([]string) string
		code         exitcode.Code
		want         string
	}{
		{"debian with fio", "osinfo-debian.json", version, exitcode.OK, "fio-3.33"},
		{"test guest (no os-release) with fio", "osinfo.json", version, exitcode.OK, "fio-3.33"},
		{"debian without fio", "osinfo-debian.json", missing, exitcode.Unreachable, "fio is not installed in the guest (Debian GNU/Linux 12 (bookworm)): install it there (apt install fio)"},
		{"unknown guest without fio", "osinfo.json", missing, exitcode.Unreachable, "apt install fio (Debian, Ubuntu) or dnf install fio"},
		{"windows", "osinfo-windows.json", version, exitcode.Unreachable, "Linux guests only"},
	} {
		g := &guest{osinfo: fixture(t, c.osinfo), status: c.status}
		v, _, err := FindFio(ctx, newGuest(t, g), 370)
		if exitcode.Of(err) != c.code || err == nil && v != c.want || err != nil && !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %q, %v", c.name, v, err)
		}
		if c.name == "windows" && len(g.argvs) != 0 {
			t.Errorf("windows: guest-exec ran %v", g.argvs)
		}
	}
	// No agent in the guest: QEMU's chardev accepts and nobody answers.
	silent := qmptest.NewAgent(t)
	silent.Silent = true
	_, _, err := FindFio(ctx, qmp.Agent{Path: silent.Sock(), Timeout: 200 * time.Millisecond}, 370)
	if exitcode.Of(err) != exitcode.Unreachable || !strings.Contains(err.Error(), "install and start qemu-guest-agent") {
		t.Errorf("silent agent: %v", err)
	}
	// guest-exec blocked (qemu-ga --block-rpcs=guest-exec): QEMU's reply
	// to a disabled command.
	blocked := qmptest.NewAgent(t)
	blocked.Handle = func(w net.Conn, cmd string, _ gjson.Result) {
		fmt.Fprint(w, qmptest.Fail("CommandNotFound", "The command "+cmd+" has been disabled for this instance")+"\n")
	}
	_, _, err = FindFio(ctx, qmp.Agent{Path: blocked.Sock(), Timeout: time.Second}, 370)
	if exitcode.Of(err) != exitcode.Unreachable || !strings.Contains(err.Error(), "refuses guest-exec") {
		t.Errorf("blocked guest-exec: %v", err)
	}
}

func TestPlace(t *testing.T) {
	ctx := context.Background()
	probe := func(name string) func([]string) string {
		return func(argv []string) string {
			if argv[0] == "sh" {
				return fixture(t, name)
			}
			return ""
		}
	}
	blank := Placement{Disk: "scsi1", Seen: guestdisk.Seen{Device: "/dev/sdb"}}
	for _, c := range []struct {
		name   string
		p      Placement
		probe  string
		head   string
		code   exitcode.Code
		mode   Mode
		want   string // in the error, or the target's path
		probes bool
	}{
		{"blank device", blank, "probe-blank.status.json", "file-read-zero.json", exitcode.OK, Raw, "/dev/sdb", true},
		{"ext4", blank, "probe-ext4.status.json", "file-read-zero.json", exitcode.Usage, "", "scsi1 (/dev/sdb in the guest) is not blank: ext4 filesystem", true},
		{"data without signature", blank, "probe-after-bench.status.json", "file-read-data.json", exitcode.Usage, "", "data in its first MiB", true},
		{"boot disk", Placement{Disk: "scsi0", Seen: guestdisk.Seen{Device: "/dev/sda"}, Boot: true}, "probe-blank.status.json", "file-read-zero.json", exitcode.Usage, "", "a boot disk", true},
		{"ext4 --destroy", Placement{Disk: "scsi1", Seen: guestdisk.Seen{Device: "/dev/sdb"}, Destroy: true}, "probe-ext4.status.json", "file-read-zero.json", exitcode.OK, Raw, "/dev/sdb", true},
		{"mounted: file mode", Placement{Disk: "scsi1", Seen: guestdisk.Seen{Device: "/dev/sdb", Mounts: []string{"/mnt/x"}}, FreeBytes: map[string]int64{"/mnt/x": 223465472 - 14336}}, "", "", exitcode.OK, File, "/mnt/x/" + TestDirName + "/" + TestFileName, false},
		{"mounted, too little space", Placement{Disk: "scsi1", Seen: guestdisk.Seen{Device: "/dev/sdb", Mounts: []string{"/mnt/x"}}, FreeBytes: map[string]int64{"/mnt/x": 100 << 20}}, "", "", exitcode.Usage, "", "has 100 MiB free", false},
		{"mounted twice", Placement{Disk: "scsi1", Seen: guestdisk.Seen{Device: "/dev/sdb", Mounts: []string{"/a", "/b"}}}, "", "", exitcode.Usage, "", "name one with --file-in", false},
		{"mounted twice, --file-in", Placement{Disk: "scsi1", Seen: guestdisk.Seen{Device: "/dev/sdb", Mounts: []string{"/a", "/b"}}, FileIn: []string{"/b"}, FreeBytes: map[string]int64{"/b": 1 << 30}}, "", "", exitcode.OK, File, "/b/" + TestDirName + "/" + TestFileName, false},
		{"mounted, --destroy", Placement{Disk: "scsi1", Seen: guestdisk.Seen{Device: "/dev/sdb", Mounts: []string{"/a"}}, Destroy: true}, "", "", exitcode.Usage, "", "does not write a mounted device", false},
		{"not found in the guest", Placement{Disk: "scsi1"}, "", "", exitcode.Unreachable, "", "did not place this disk", false},
	} {
		g := &guest{status: probe(c.probe)}
		if c.head != "" {
			g.head = fixture(t, c.head)
		}
		if c.probe == "" {
			g.status = func([]string) string { return "" }
		}
		tg, err := Place(ctx, newGuest(t, g), c.p, 128<<20)
		switch {
		case exitcode.Of(err) != c.code:
			t.Errorf("%s: %v", c.name, err)
		case err != nil && !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		case err == nil && (tg.Mode != c.mode || tg.Path != c.want):
			t.Errorf("%s: %+v", c.name, tg)
		}
		if got := len(g.scripts(probeScript)) > 0; got != c.probes {
			t.Errorf("%s: probed %v", c.name, got)
		}
		if strings.HasSuffix(c.name, "--destroy") && err == nil && !strings.Contains(strings.Join(tg.Found, ";"), "ext4") {
			t.Errorf("%s: found %v", c.name, tg.Found)
		}
	}
}

func TestProbeFindings(t *testing.T) {
	for _, c := range []struct{ out, want string }{
		{"pvediskcheck-blkid-exit=2\n", ""},
		{"DEVNAME=/dev/sdb\nPTTYPE=gpt\npvediskcheck-blkid-exit=0\npvediskcheck-partition=sdb1\n", "partition table gpt|partition sdb1"},
		{"TYPE=LVM2_member\nUSAGE=raid\npvediskcheck-blkid-exit=0\npvediskcheck-holder=dm-0\n", "LVM physical volume|held by dm-0 (LVM, device-mapper or RAID in use on it)"},
		{"TYPE=swap\nUSAGE=other\npvediskcheck-blkid-exit=0\npvediskcheck-swap=/dev/sdb\n", "swap signature|swap in use on /dev/sdb"},
		{"TYPE=xfs\nUSAGE=filesystem\npvediskcheck-blkid-exit=0\npvediskcheck-mount=/dev/sdb /srv\n", "xfs filesystem|mounted: /dev/sdb /srv"},
		{"pvediskcheck-blkid-exit=127\n", "blkid is not in the guest (util-linux): signatures cannot be checked"},
		{"pvediskcheck-blkid-exit=8\n", "blkid -p exited 8 (ambivalent or failed probe)"},
	} {
		if got := strings.Join(ProbeFindings(c.out), "|"); got != c.want {
			t.Errorf("%q: %q, want %q", c.out, got, c.want)
		}
	}
}
