package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRunner(t *testing.T) {
	r := Exec{Timeout: 2 * time.Second}
	out, err := r.Run(context.Background(), "/bin/sh", "-c", "echo hello; echo oops >&2")
	if err != nil || string(out) != "hello\n" {
		t.Fatalf("out %q err %v", out, err)
	}
	_, err = r.Run(context.Background(), "/bin/sh", "-c", "echo bad >&2; exit 5")
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Status != 5 || err.Error() != "/bin/sh exited with status 5: bad" {
		t.Fatalf("err %v", err)
	}
	start := time.Now()
	_, err = Exec{Timeout: 200 * time.Millisecond}.Run(context.Background(), "/bin/sh", "-c", "sleep 10")
	if !errors.Is(err, ErrTimeout) || time.Since(start) > 3*time.Second {
		t.Fatalf("timeout: %v after %s", err, time.Since(start))
	}
	// A command that floods its output is stopped at the cap, not read to
	// the end into memory.
	_, err = Exec{Timeout: time.Minute}.Run(context.Background(), "/bin/sh", "-c", "yes 0123456789abcdef")
	if !errors.Is(err, ErrTooMuchOutput) {
		t.Fatalf("flood: %v", err)
	}
	// A flood on stderr is dropped beyond its cap; the command's status
	// and first line still tell.
	_, err = r.Run(context.Background(), "/bin/sh", "-c", "head -c 1000000 /dev/zero | tr '\\000' x >&2; echo; exit 3")
	if !errors.As(err, &ce) || ce.Status != 3 || len(ce.Stderr) != MaxErrorBytes || !strings.HasPrefix(ce.Stderr, "xxx") {
		t.Fatalf("stderr flood: %v (%d bytes)", err, len(ce.Stderr))
	}
}

// alive says whether pid is a process that still runs (a zombie waiting
// for init to reap it is dead).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}

// gone waits (a generous bound: SIGKILL is delivered at once) until pid no
// longer runs.
func gone(pid int) bool {
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if !alive(pid) {
			return true
		}
	}
	return false
}

// A command that hangs past its deadline is killed with everything it
// started: a wrapper script (PVEDISKCHECK_SSH) whose children would
// otherwise live on, orphaned, one set per timed-out call.
func TestRunnerKillsProcessGroup(t *testing.T) {
	for _, c := range []struct {
		name, script string
		timeout      time.Duration
		want         error
	}{
		// The wrapper hangs; its background child holds stdout.
		{"hangs", "sleep 1000 & echo $! > %s; sleep 1000", time.Second, ErrTimeout},
		// Its child holds nothing: only the group reaches it.
		{"hangs, child detached from the pipes", "sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > %s; exec sleep 1000", time.Second, ErrTimeout},
		// The wrapper exits, leaving a child that holds its output open:
		// the call ends after WaitDelay and takes the child with it.
		{"exits, child holds stdout", "sleep 1000 & echo $! > %s; exit 0", time.Minute, exec.ErrWaitDelay},
	} {
		t.Run(c.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "child.pid")
			start := time.Now()
			_, err := Exec{Timeout: c.timeout}.Run(context.Background(), "/bin/sh", "-c", fmt.Sprintf(c.script, pidFile))
			if !errors.Is(err, c.want) || time.Since(start) > 10*time.Second {
				t.Fatalf("%v after %s, want %v", err, time.Since(start), c.want)
			}
			b, rerr := os.ReadFile(pidFile)
			pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
			if rerr != nil || pid <= 0 {
				t.Fatalf("no child pid: %v %q", rerr, b)
			}
			if !gone(pid) {
				syscall.Kill(pid, syscall.SIGKILL)
				t.Fatalf("the command's child %d still runs after the call ended", pid)
			}
		})
	}
	// A cancelled context does the same as a deadline.
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(time.Second, cancel)
	_, err := Exec{Timeout: time.Minute}.Run(ctx, "/bin/sh", "-c", fmt.Sprintf("sleep 1000 & echo $! > %s; wait", pidFile))
	b, _ := os.ReadFile(pidFile)
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	if err == nil || pid <= 0 || !gone(pid) {
		if pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		t.Fatalf("cancelled: %v, child %d", err, pid)
	}
}
