package main

import (
	"bufio"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
)

// Issue 15: check and thin never report "all clear" on what they could not
// read. These tests assert only exit codes and printed text, so they run
// unchanged against the code before the fix (where each failed).

// TestCheckNotANode (issue 15 #2): a --root that is not a Proxmox VE node is
// exit 2 naming the path, never "0 VM(s) checked", exit 0.
func TestCheckNotANode(t *testing.T) {
	file := filepath.Join(t.TempDir(), "bundle.tar")
	if err := os.WriteFile(file, []byte("not a tree"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	noStorage := t.TempDir()
	if err := os.MkdirAll(filepath.Join(noStorage, "etc/pve/qemu-server"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		root string
		args []string
	}{
		{"/nonexistent/pvediskcheck-root", []string{"check", "--all"}},
		{file, []string{"check", "--all"}},
		{empty, []string{"check", "--all"}},
		{"/nonexistent/pvediskcheck-root", []string{"check", "370"}},
		{empty, []string{"thin"}},
		{noStorage, []string{"thin"}},
		{"/nonexistent/pvediskcheck-root", []string{"thin", "--json"}},
	} {
		stdout, stderr, code := runCLI(t, append([]string{"--root", c.root}, c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, c.root) || strings.Contains(stdout, "0 VM(s) checked") {
			t.Errorf("--root %s %s: exit %d, stderr %q, stdout %q", c.root, strings.Join(c.args, " "), code, stderr, stdout)
		}
	}
	// A node with no VM at all is not an error.
	if stdout, stderr, code := runCLI(t, "--root", noStorage, "check", "--all"); code != exitOK || !strings.Contains(stdout, "0 VM(s) checked") {
		t.Errorf("empty node: exit %d %q %q", code, stdout, stderr)
	}
}

// TestCheckUnreadableConfig (issue 15 #4): a 5 MB line or a directory named
// 372.conf is bad input naming the file, for one VM and for --all, as it is
// for cache.
func TestCheckUnreadableConfig(t *testing.T) {
	root := t.TempDir()
	qs := filepath.Join(root, "etc/pve/qemu-server")
	if err := os.MkdirAll(filepath.Join(qs, "372.conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(qs, "373.conf"), []byte("memory: 512\nname: "+strings.Repeat("x", 5<<20)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(qs, "100.conf"), []byte("memory: 512\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		file string
	}{
		{[]string{"check", "372"}, "372.conf"},
		{[]string{"check", "373"}, "373.conf"},
		{[]string{"check", "--all"}, "372.conf"},
		{[]string{"check", "--all"}, "373.conf"},
		{[]string{"--json", "check", "--all"}, "373.conf"},
	} {
		stdout, stderr, code := runCLI(t, append([]string{"--root", root}, c.args...)...)
		if code != exitUsage || !strings.Contains(stderr, filepath.Join(qs, c.file)) {
			t.Errorf("%s: exit %d, stderr %.300q", strings.Join(c.args, " "), code, stderr)
		}
		if len(stdout) > 10000 || len(stderr) > 10000 {
			t.Errorf("%s: %d bytes printed", strings.Join(c.args, " "), len(stdout)+len(stderr))
		}
	}
	// --all still reports the readable VM.
	if stdout, _, _ := runCLI(t, "--root", root, "check", "--all"); !strings.Contains(stdout, "VM 100 (stopped): 0 finding(s)") {
		t.Errorf("%s", stdout)
	}
}

// TestCheckQMPUnreadable (issue 15 #3): with QEMU stopped (SIGSTOP: its
// socket accepts and never greets) or its socket held by another client,
// check exits 3 and says which checks did not run; the findings that need
// no QMP are still there.
func TestCheckQMPUnreadable(t *testing.T) {
	n := fakenode.NewT(t)
	n.UseDoubles(t) // lvs
	lab370(t, n, "")
	vm := n.MustStart(t, 370, fakenode.ArgvOptions{})
	stdout, stderr, code := runCLI(t, "--root", n.Root, "check", "370")
	if code != exitProblem || strings.Contains(stdout, "not checked") {
		t.Fatalf("reachable: exit %d %s %s", code, stdout, stderr)
	}
	before := strings.Count(stdout, "WARNING") + strings.Count(stdout, "ERROR")

	// Another client holds the socket for longer than --timeout.
	c, err := net.Dial("unix", n.Paths.QMPSocket(370))
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	stdout, stderr, code = runCLI(t, "--root", n.Root, "--timeout", "1s", "check", "370")
	took := time.Since(t0)
	c.Close()
	assertUnread(t, "held", stdout, stderr, code, before)
	if took > 4*time.Second {
		t.Errorf("held socket: took %s with --timeout 1s", took)
	}

	// QEMU stopped.
	if err := syscall.Kill(vm.Pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(vm.Pid, syscall.SIGCONT)
	stdout, stderr, code = runCLI(t, "--root", n.Root, "--timeout", "1s", "check", "370")
	assertUnread(t, "stopped", stdout, stderr, code, before)
	stdout, stderr, code = runCLI(t, "--root", n.Root, "--timeout", "1s", "--json", "check", "370")
	if code != exitUnreachable || !strings.Contains(stdout, `"not_checked": [`) || !strings.Contains(stdout, `"io-error"`) {
		t.Errorf("--json: exit %d %s %s", code, stdout, stderr)
	}
}

func assertUnread(t *testing.T, what, stdout, stderr string, code, findings int) {
	t.Helper()
	t.Logf("%s: exit %d\n%s%s", what, code, stdout, stderr)
	if code != exitUnreachable || !strings.Contains(stdout, "not checked: io-error, drift") || !strings.Contains(stderr, "VM 370: running state not read") {
		t.Errorf("%s: exit %d, stdout %q, stderr %q", what, code, stdout, stderr)
	}
	if got := strings.Count(stdout, "WARNING") + strings.Count(stdout, "ERROR"); got != findings {
		t.Errorf("%s: %d findings, %d with QMP", what, got, findings)
	}
}

// TestCheckQMPSocketGone (issue 21 #4): QEMU runs (its pid file and command
// line match, read through the real /proc) but its QMP socket is missing,
// refuses connections, or is not a socket. check said "0 findings", exit 0,
// where cache exits 3: now it exits 3 too, naming the socket's state, with
// the report and the checks that did not run. A copied tree stays a note
// (TestCheckAllAndSupportBundle); a VM whose QEMU is gone is config-only.
func TestCheckQMPSocketGone(t *testing.T) {
	n := fakenode.NewT(t)
	n.UseDoubles(t) // lvs
	lab370(t, n, "")
	vm := n.MustStart(t, 370, fakenode.ArgvOptions{})
	stdout, stderr, code := runCLI(t, "--root", n.Root, "check", "370")
	if code != exitProblem || strings.Contains(stdout, "not checked") {
		t.Fatalf("reachable: exit %d %s %s", code, stdout, stderr)
	}
	before := strings.Count(stdout, "WARNING") + strings.Count(stdout, "ERROR")
	sock := n.Paths.QMPSocket(370)
	aside := sock + ".real"
	if err := os.Rename(sock, aside); err != nil { // QEMU keeps listening on it
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, state string
		make        func(t *testing.T)
	}{
		{"missing", "is missing", func(t *testing.T) {}},
		{"refusing", "refuses connections (nothing listens on it)", func(t *testing.T) {
			l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
			if err != nil {
				t.Fatal(err)
			}
			l.SetUnlinkOnClose(false)
			l.Close()
		}},
		{"not a socket", "is not a socket (a regular file)", func(t *testing.T) {
			if err := os.WriteFile(sock, []byte("{}\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.Remove(sock)
			c.make(t)
			stdout, stderr, code := runCLI(t, "--root", n.Root, "check", "370")
			assertUnread(t, c.name, stdout, stderr, code, before)
			want := "QEMU (pid " + strconv.Itoa(vm.Pid) + ") runs, but its QMP socket " + sock + " " + c.state
			if !strings.Contains(stderr, want) || !strings.Contains(stdout, "QMP not reachable ("+want) {
				t.Errorf("want %q in stderr and the note:\n%s%s", want, stdout, stderr)
			}
			var rep check.Report
			if _, code := runJSON(t, n, &rep, "check", "370"); code != exitUnreachable || !rep.VMs[0].Running || len(rep.VMs[0].NotChecked) != 3 {
				t.Errorf("--json: exit %d %+v", code, rep.VMs)
			}
			// cache says the same of this VM.
			if _, errs, code := runCLI(t, "--root", n.Root, "cache", "370"); code != exitUnreachable {
				t.Errorf("cache: exit %d %s", code, errs)
			}
		})
	}
	os.Remove(sock)
	if err := os.Rename(aside, sock); err != nil {
		t.Fatal(err)
	}
	if stdout, stderr, code := runCLI(t, "--root", n.Root, "check", "370"); code != exitProblem || strings.Contains(stdout, "not checked") {
		t.Errorf("socket back: exit %d %s %s", code, stdout, stderr)
	}

	// QEMU gone (its socket file may stay behind): the config's findings,
	// exit 1, nothing unread.
	vm.Stop()
	if err := os.WriteFile(sock, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = runCLI(t, "--root", n.Root, "check", "370")
	if code != exitProblem || strings.Contains(stdout, "not checked") || strings.Contains(stdout, "QMP not reachable") || stderr != "" || !strings.Contains(stdout, "(stopped)") {
		t.Errorf("stopped: exit %d %s %s", code, stdout, stderr)
	}
}
