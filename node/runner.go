package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

// Runner runs one external command (qm, pvesm, lvs, zfs, ssh, ...) and
// returns its standard output: the one seam every package runs commands
// through. Node.Runner is Exec on a real node; unit tests give a recording
// (internal/fakerun) instead of programs on PATH.
type Runner interface {
	// Run runs argv with the runner's own deadline.
	Run(ctx context.Context, argv ...string) ([]byte, error)
	// RunTimeout is Run with an explicit deadline for commands that
	// legitimately take longer than the default (qm set on a busy node,
	// a call over ssh).
	RunTimeout(ctx context.Context, timeout time.Duration, argv ...string) ([]byte, error)
}

// Exec runs external commands found on PATH: no shell, LC_ALL=C so output
// is parseable, a deadline on every call, and the command's whole process
// group killed at the deadline.
type Exec struct {
	Timeout time.Duration // per command; 0 means 5 s
}

// Refuse is a runner that runs nothing and says why (err): a view of
// another node's configs, where nothing this node runs (lvs, qm) describes
// that node.
func Refuse(err error) Runner { return refusing{err} }

type refusing struct{ why error }

func (r refusing) Run(ctx context.Context, argv ...string) ([]byte, error) {
	return r.RunTimeout(ctx, 0, argv...)
}

func (r refusing) RunTimeout(_ context.Context, _ time.Duration, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errEmpty
	}
	return nil, fmt.Errorf("%s not run: %w", argv[0], r.why)
}

var errEmpty = errors.New("runner: empty command")

// ErrTimeout is returned (wrapped) when a command runs past its deadline.
var ErrTimeout = exitcode.New(exitcode.Unreachable, "timed out")

// CommandError is a command that ran and exited non-zero.
type CommandError struct {
	Argv   []string
	Status int // the exit status it returned
	Stderr string
}

// ExitCode: a command that failed is something the tool could not get.
func (e *CommandError) ExitCode() exitcode.Code { return exitcode.Unreachable }

func (e *CommandError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	if msg == "" {
		msg = "no message"
	}
	return fmt.Sprintf("%s exited with status %d: %s", e.Argv[0], e.Status, msg)
}

// Run executes argv and returns its standard output.
func (r Exec) Run(ctx context.Context, argv ...string) ([]byte, error) {
	return r.RunTimeout(ctx, r.timeout(), argv...)
}

// RunTimeout is Run with an explicit deadline.
func (r Exec) RunTimeout(ctx context.Context, timeout time.Duration, argv ...string) ([]byte, error) {
	if len(argv) == 0 {
		return nil, errEmpty
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	// The command leads a process group of its own, and a deadline or a
	// cancel kills the whole group: a wrapper's children (a script around
	// ssh, a `sleep &`) go with it instead of living on, orphaned.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return killGroup(cmd.Process) }
	cmd.WaitDelay = time.Second
	stdout := &capped{limit: MaxOutputBytes, cancel: cancel}
	stderr := &capped{limit: MaxErrorBytes}
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	err := cmd.Run()
	if errors.Is(err, exec.ErrWaitDelay) {
		// It exited, but something it started still holds its output
		// open: that is part of the command too.
		_ = killGroup(cmd.Process)
	}
	if stdout.over {
		return nil, fmt.Errorf("%s: %w: more than %d bytes of output", argv[0], ErrTooMuchOutput, MaxOutputBytes)
	}
	if ctx.Err() == context.DeadlineExceeded {
		return nil, fmt.Errorf("%s: %w after %s (raise --timeout if the node is just slow)", argv[0], ErrTimeout, timeout)
	}
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return stdout.Bytes(), &CommandError{Argv: argv, Status: ee.ExitCode(), Stderr: stderr.String()}
		}
		return nil, fmt.Errorf("%s: %w", argv[0], err)
	}
	return stdout.Bytes(), nil
}

// killGroup sends SIGKILL to p's process group (p leads it: Setpgid).
func killGroup(p *os.Process) error {
	if err := syscall.Kill(-p.Pid, syscall.SIGKILL); err != nil {
		if errors.Is(err, syscall.ESRCH) {
			return os.ErrProcessDone
		}
		return err
	}
	return nil
}

// Caps on what one command may print: its output is held in memory, and a
// broken or hostile program (or a remote node over ssh) must not fill it.
// lvs for a volume group of thousands of volumes prints a few MiB.
const (
	MaxOutputBytes = 64 << 20
	MaxErrorBytes  = 64 << 10 // stderr beyond this is dropped: one line is quoted
)

// ErrTooMuchOutput is a command that printed more than MaxOutputBytes.
var ErrTooMuchOutput = exitcode.New(exitcode.Unreachable, "too much output")

// capped keeps at most limit bytes; past it, it stops the command (cancel)
// or, without cancel, drops the rest.
// (Not an embedded bytes.Buffer: its ReadFrom would let io.Copy bypass
// Write, and the cap with it.)
type capped struct {
	buf    bytes.Buffer
	limit  int
	over   bool
	cancel func()
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.limit - c.buf.Len(); len(p) > room {
		c.buf.Write(p[:max(room, 0)])
		c.over = true
		if c.cancel != nil {
			c.cancel()
			return 0, ErrTooMuchOutput
		}
		return len(p), nil
	}
	return c.buf.Write(p)
}

func (c *capped) Bytes() []byte  { return c.buf.Bytes() }
func (c *capped) String() string { return c.buf.String() }

func (r Exec) timeout() time.Duration {
	if r.Timeout <= 0 {
		return DefaultTimeout
	}
	return r.Timeout
}
