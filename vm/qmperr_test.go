package vm

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
	"regexp"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// TestSocketGone (issue 21 #4): a live QEMU whose QMP socket is missing,
// refuses connections or is not a socket is named as such (with the error
// the dial gave); a copied tree's VM and other errors are left as they are.
func TestSocketGone(t *testing.T) {
	root, err := os.MkdirTemp("", "vm") // short: a socket path fits in 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	p := node.NewPaths(root, "", "")
	if err := os.MkdirAll(p.RunDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	sock := p.QMPSocket(370)
	dial := func() error {
		return qmp.Do(context.Background(), sock, time.Second, func(qmp.Session) error { return nil })
	}
	for _, c := range []struct {
		name  string
		setup func(t *testing.T)
		state string
	}{
		{"missing", func(t *testing.T) {}, "is missing"},
		{"refusing", func(t *testing.T) {
			l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			l.SetUnlinkOnClose(false)
			l.Close() // the socket file stays, nothing listens
		}, "refuses connections (nothing listens on it)"},
		{"not a socket", func(t *testing.T) {
			if err := os.WriteFile(sock, nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, "is not a socket (a regular file)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.Remove(sock)
			c.setup(t)
			err := dial()
			if !errors.Is(err, qmp.ErrNoSocket) {
				t.Fatalf("dial: %v, want ErrNoSocket", err)
			}
			live := &VM{VMID: 370, Running: true, Alive: true, Pid: 4242, paths: p}
			got := live.SocketGone(err)
			if want := "QEMU (pid 4242) runs, but its QMP socket " + sock + " " + c.state + ": " + err.Error(); got.Error() != want || !errors.Is(got, qmp.ErrNoSocket) {
				t.Errorf("got  %v\nwant %s", got, want)
			}
			copied := &VM{VMID: 370, Running: true, Pid: 4242, paths: p}
			if got := copied.SocketGone(err); got != err {
				t.Errorf("copied tree: %v", got)
			}
		})
	}
	busy := errors.Join(qmp.ErrBusy)
	if got := (&VM{Running: true, Alive: true, paths: p}).SocketGone(busy); got != busy {
		t.Errorf("busy: %v", got)
	}
}

// The test binary stands in for a running QEMU: run with this set, it
// sleeps, so its /proc/<pid>/cmdline is the QEMU command line it was given.
const sleepEnv = "PVEDISKCHECK_VM_TEST_SLEEP"

func TestMain(m *testing.M) {
	if os.Getenv(sleepEnv) != "" {
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestAlive: a VM whose pid file names a live process with its QEMU command
// line, read through the real procfs, is running and alive; the same pid
// file and command line copied into a tree's proc/ are running but not
// alive (a support bundle); once the process is gone it is not running.
func TestAlive(t *testing.T) {
	if !isProcfs("/proc") || isProcfs(t.TempDir()) {
		t.Fatal("procfs not told from a directory")
	}
	argv := []string{"/usr/bin/kvm", "-id", "301", "-pidfile", "/var/run/qemu-server/301.pid",
		"-drive", "file=/dev/pve/vm-301-disk-0,if=none,id=drive-scsi0,format=raw,cache=none,aio=io_uring",
		"-device", "scsi-hd,drive=drive-scsi0,id=scsi0"}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	qemu := &exec.Cmd{Path: self, Args: argv, Env: append(os.Environ(), sleepEnv+"=1")}
	if err := qemu.Start(); err != nil {
		t.Fatal(err)
	}
	defer qemu.Process.Kill()
	p := writeNode(t, 301, "scsi0: local-lvm:vm-301-disk-0,size=8G\n")
	if err := os.MkdirAll(p.RunDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.PidFile(301), []byte(strconv.Itoa(qemu.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	live := node.NewPaths(p.Root, "/proc", "/sys")
	deadline := time.Now().Add(10 * time.Second)
	v, err := Load(live, 301)
	for err == nil && !v.Running && time.Now().Before(deadline) { // until exec has replaced the cmdline
		time.Sleep(10 * time.Millisecond)
		v, err = Load(live, 301)
	}
	if err != nil || !v.Running || !v.Alive || v.Pid != qemu.Process.Pid {
		t.Fatalf("live process: running %v alive %v: %v", v != nil && v.Running, v != nil && v.Alive, err)
	}
	writeRunning(t, p, 301, argv) // the copied tree: pid 4242 in p's own proc/
	if v, err := Load(p, 301); err != nil || !v.Running || v.Alive {
		t.Errorf("copied tree: running %v alive %v: %v", v != nil && v.Running, v != nil && v.Alive, err)
	}
	if err := os.WriteFile(p.PidFile(301), []byte(strconv.Itoa(qemu.Process.Pid)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	qemu.Process.Kill()
	qemu.Wait()
	if v, err := Load(live, 301); err != nil || v.Running || v.Alive {
		t.Errorf("process gone: running %v alive %v: %v", v != nil && v.Running, v != nil && v.Alive, err)
	}
}

func TestExited(t *testing.T) {
	dir := t.TempDir()
	for stat, want := range map[string]bool{
		"4242 (qemu-system-x86) S 1 4242": false,
		"4242 (qemu (x) y) Z 1 4242":      true,
		"4242 (qemu) X 1":                 true,
		"4242 (qemu) R":                   false,
		"4242 (qemu)":                     false,
		"":                                false,
	} {
		p := filepath.Join(dir, "stat")
		if err := os.WriteFile(p, []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
		if got := exited(p); got != want {
			t.Errorf("%q: %v", stat, got)
		}
	}
	if !exited(filepath.Join(dir, "none")) {
		t.Error("a process gone from procfs has not exited?")
	}
}

// qmpWord is QMP as a word (the test's temporary paths hold its name).
var qmpWord = regexp.MustCompile(`\bQMP\b`)

// Every way talking to QEMU fails names QMP once, in the error line and in
// a note: qmp's own errors say so themselves, the others get it added.
func TestQMPErrorNamesQMPOnce(t *testing.T) {
	do := func(ctx context.Context, q *qmptest.QEMU, fn func(qmp.Session) error) error {
		return qmp.Do(ctx, q.Sock(), 300*time.Millisecond, fn)
	}
	hangUp := qmptest.NewQEMU(t, nil)
	hangUp.Raw = func(c net.Conn) { c.Close() }
	silent := qmptest.NewQEMU(t, nil)
	silent.GreetDelay = time.Hour
	failing := qmptest.NewQEMU(t, nil) // CommandNotFound for everything
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		err  error
		want string // QMPNote; QMPError is "VM 370: " and it
		is   error
	}{
		{"hung up", do(context.Background(), hangUp, nil), "QMP " + hangUp.Path + ": reading greeting: EOF", nil},
		{"busy", do(context.Background(), silent, nil), "QMP socket busy (another client, e.g. pvestatd, holds it): " + silent.Path + " sent no greeting within 300ms", qmp.ErrBusy},
		{"no socket", qmp.Do(context.Background(), filepath.Join(t.TempDir(), "370.qmp"), time.Second, nil), "no QMP socket at ", qmp.ErrNoSocket},
		{"error reply", do(context.Background(), failing, func(s qmp.Session) error { _, err := s.Exec("query-block", nil); return err }), "QMP: The command query-block has not been found (CommandNotFound)", nil},
		{"cancelled", do(cancelled, failing, nil), "QMP: context canceled", context.Canceled},
		{"the caller's", errors.New("no stats for scsi0"), "QMP: no stats for scsi0", nil},
	} {
		if c.err == nil {
			t.Fatalf("%s: no error", c.name)
		}
		note, err := QMPNote(c.err), QMPError(370, c.err)
		if !strings.HasPrefix(note, c.want) || err.Error() != "VM 370: "+note+map[bool]string{true: " (is the VM running?)"}[c.is == qmp.ErrNoSocket] {
			t.Errorf("%s: note %q, error %q, want %q", c.name, note, err, c.want)
		}
		if n := len(qmpWord.FindAllString(err.Error(), -1)); n != 1 {
			t.Errorf("%s: %q names QMP %d times", c.name, err, n)
		}
		if exitcode.Of(err) != exitcode.Unreachable || c.is != nil && !errors.Is(err, c.is) || !errors.Is(err, c.err) {
			t.Errorf("%s: exit %d, chain %v", c.name, exitcode.Of(err), err)
		}
	}
}
