package main

// make bench-overhead (scripts/bench-overhead.sh): what `pvediskcheck bench`
// adds to the wall time of the fio runs it makes, and its own CPU. VM 370
// runs the end-to-end tier's guest (TCG, fio, qemu-ga); the plan's fio
// command lines come from `bench --dry-run`; then, in rounds, the tool runs
// them (bench VMID DISK... as given) and they are run by hand twice, as an
// admin's small script would: each one guest-exec, then guest-exec-status
// every 100 ms until it exits ("poll"), or first a sleep for the run's ramp
// and runtime ("sleep": 10 exchanges a second cost the one-vCPU TCG guest
// enough to slow fio's start and end), its JSON kept (the project's agent
// client, one exchange at a time). The ratio is per round, the tool over
// the faster of the two.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// handPoll is the by-hand scripts' poll interval: they notice fio's end as
// soon as the tool's fastest poll does, however long the run.
const handPoll = 100 * time.Millisecond

// clockTicks is /proc/PID/stat's unit for utime and stime (USER_HZ, 100 on
// every Linux architecture Proxmox runs on).
const clockTicks = 100

// toolRun is one timed run of the tool.
type toolRun struct {
	wall, own, children time.Duration // own: utime+stime; children: cutime+cstime (lvs and the like)
	first               time.Duration // its first progress line: the checks before the first fio
}

// stamped writes the tool's output to its log, each write stamped with
// its time since the start, and notes when the first progress line
// ("bench [1/N] ...") came.
type stamped struct {
	mu    sync.Mutex
	w     io.Writer
	t0    time.Time
	first time.Duration
}

func (f *stamped) Write(b []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	at := time.Since(f.t0)
	if f.first == 0 && bytes.Contains(b, []byte("bench [")) {
		f.first = at
	}
	if _, err := fmt.Fprintf(f.w, "[+%.3f s] %s", at.Seconds(), b); err != nil {
		return 0, err
	}
	return len(b), nil
}

func overhead(ctx context.Context, l *lab, bin string, rounds int, verbose bool, benchArgs []string, w io.Writer) error {
	if len(benchArgs) == 0 || rounds < 1 {
		return fmt.Errorf("overhead: name the disks and bench flags (e.g. scsi1 --destroy scsi1 --job rr4k), and -rounds 1 or more")
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	env, err := l.toolEnv()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "pvediskcheck-overhead-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	args := append([]string{"--root", l.node.Root, "bench", strconv.Itoa(labVMID)}, benchArgs...)
	plan := exec.CommandContext(ctx, bin, append(slices.Clone(args), "--dry-run")...)
	plan.Env = env
	var perr bytes.Buffer
	plan.Stderr = &perr
	out, err := plan.Output()
	if err != nil {
		return fmt.Errorf("bench --dry-run: %v: %s", err, perr.String())
	}
	runs, err := planCommands(string(out))
	if err != nil {
		return err
	}
	agent := qmp.Agent{Path: l.node.Paths.QGASocket(labVMID), Timeout: 10 * time.Second}
	qemu, _ := fakenode.QEMUVersion(l.node.QEMU)
	fmt.Fprintf(w, "VM %d, the test guest under TCG (QEMU %s), guest agent ready %.0f s after start\n", labVMID, qemu, l.startup.Seconds())
	fmt.Fprintf(w, "tool:    pvediskcheck bench %d %s\n", labVMID, strings.Join(benchArgs, " "))
	fmt.Fprintf(w, "by hand: its --dry-run's %d fio command lines, each started with guest-exec, then guest-exec-status\n", len(runs))
	fmt.Fprintf(w, "         poll:  every %s from the start until fio exits\n", handPoll)
	fmt.Fprintf(w, "         sleep: first for the run's --ramp_time + --runtime, then every %s\n", handPoll)
	fmt.Fprintf(w, "ratio: the tool's wall time over the faster of the two by hand in the same round\n\n")
	fmt.Fprintf(w, "%-5s %10s %10s %10s %7s %10s %14s %13s %13s\n", "round", "tool wall", "poll", "sleep", "ratio", "tool CPU", "% of one core", "children CPU", "first fio at")
	var ratios, cpus []float64
	for i := 1; i <= rounds; i++ {
		log := filepath.Join(tmp, fmt.Sprintf("tool-%d.log", i))
		t, err := timeTool(ctx, bin, append(slices.Clone(args), "--out", filepath.Join(tmp, fmt.Sprintf("tool-%d", i))), env, log)
		if err != nil {
			return fmt.Errorf("round %d, the tool: %w", i, err)
		}
		var hands [2]time.Duration
		var each [2][]time.Duration
		for k, sleep := range []bool{false, true} {
			if hands[k], each[k], err = byHand(ctx, agent, runs, filepath.Join(tmp, fmt.Sprintf("hand-%d-%d", i, k)), sleep); err != nil {
				return fmt.Errorf("round %d, by hand: %w", i, err)
			}
		}
		if verbose {
			b, _ := os.ReadFile(log)
			fmt.Fprintf(w, "round %d, the tool's output:\n%s", i, b)
			for j, r := range runs {
				fmt.Fprintf(w, "  by hand %s: poll %.3f s, sleep %.3f s\n", r.file, each[0][j].Seconds(), each[1][j].Seconds())
			}
		}
		r := t.wall.Seconds() / min(hands[0], hands[1]).Seconds()
		cpu := 100 * t.own.Seconds() / t.wall.Seconds()
		ratios, cpus = append(ratios, r), append(cpus, cpu)
		fmt.Fprintf(w, "%-5d %8.2f s %8.2f s %8.2f s %7.3f %8.2f s %12.2f %% %11.2f s %11.2f s\n", i, t.wall.Seconds(), hands[0].Seconds(), hands[1].Seconds(), r,
			t.own.Seconds(), cpu, t.children.Seconds(), t.first.Seconds())
	}
	fmt.Fprintf(w, "\nmedian of %d rounds: ratio %.3f (min %.3f, max %.3f); tool CPU %.2f %% of one core (min %.2f, max %.2f)\n",
		rounds, median(ratios), slices.Min(ratios), slices.Max(ratios), median(cpus), slices.Min(cpus), slices.Max(cpus))
	return nil
}

// planRun is one line of the plan: the result file and fio's argv.
type planRun struct {
	file string
	argv []string
}

// planCommands reads bench --dry-run's "FILE<TAB>fio ..." lines, in order.
func planCommands(out string) ([]planRun, error) {
	var runs []planRun
	for _, line := range strings.Split(out, "\n") {
		file, cmd, ok := strings.Cut(line, "\t")
		if !ok || !strings.HasPrefix(cmd, "fio ") {
			continue
		}
		argv, err := shellWords(cmd)
		if err != nil {
			return nil, fmt.Errorf("bench --dry-run: %q: %w", line, err)
		}
		runs = append(runs, planRun{file, argv})
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("bench --dry-run printed no fio command lines:\n%s", out)
	}
	return runs, nil
}

// shellWords splits a line quoted as bench.Shell quotes it: words apart by
// spaces, a word with other characters in single quotes (a quote in it
// closes, escapes and reopens them).
func shellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	in, have := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case in && c == '\'':
			in = false
		case in:
			cur.WriteByte(c)
		case c == '\'':
			in, have = true, true
		case c == '\\' && i+1 < len(s):
			i++
			cur.WriteByte(s[i])
			have = true
		case c == ' ':
			if have {
				words = append(words, cur.String())
			}
			cur.Reset()
			have = false
		default:
			cur.WriteByte(c)
			have = true
		}
	}
	if in {
		return nil, fmt.Errorf("unterminated quote")
	}
	if have {
		words = append(words, cur.String())
	}
	return words, nil
}

// timeTool runs the tool and times it from its start to its exit; its CPU
// is read from /proc/PID/stat while it is a zombie (waitid WNOWAIT), so
// nothing it did is missed.
func timeTool(ctx context.Context, bin string, args, env []string, logFile string) (toolRun, error) {
	log, err := os.Create(logFile)
	if err != nil {
		return toolRun{}, err
	}
	defer log.Close()
	cmd := exec.CommandContext(ctx, bin, args...)
	t0 := time.Now()
	stderr := &stamped{w: log, t0: t0}
	cmd.Env, cmd.Stdout, cmd.Stderr = env, stderr, stderr
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	if err := cmd.Start(); err != nil {
		return toolRun{}, err
	}
	// The CPU as it went, for -v: a line in the log for each half second
	// in which the tool used 20 ms or more.
	done := make(chan struct{})
	defer close(done)
	go func() {
		var last time.Duration
		for {
			select {
			case <-done:
				return
			case <-time.After(500 * time.Millisecond):
			}
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
			if err != nil {
				return
			}
			if own, _, ok := statCPU(b); ok && own-last >= 20*time.Millisecond {
				fmt.Fprintf(stderr, "(harness: the tool used %s of CPU in the last 0.5 s)\n", own-last)
				last = own
			} else if ok {
				last = own
			}
		}
	}()
	var info unix.Siginfo
	for {
		err = unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			break
		}
	}
	r := toolRun{wall: time.Since(t0)}
	if err != nil {
		_ = cmd.Wait()
		return r, fmt.Errorf("waitid: %w", err)
	}
	stat, serr := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
	werr := cmd.Wait()
	stderr.mu.Lock()
	r.first = stderr.first
	stderr.mu.Unlock()
	if serr != nil {
		return r, serr
	}
	if werr != nil {
		b, _ := os.ReadFile(logFile)
		return r, fmt.Errorf("%v:\n%s", werr, tailLines(string(b), 20))
	}
	var ok bool
	if r.own, r.children, ok = statCPU(stat); !ok {
		return r, fmt.Errorf("/proc/%d/stat: %q", cmd.Process.Pid, stat)
	}
	return r, nil
}

// statCPU reads a /proc/PID/stat: utime+stime, and cutime+cstime.
func statCPU(stat []byte) (own, children time.Duration, ok bool) {
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(f) < 15 {
		return 0, 0, false
	}
	tick := func(field int) time.Duration { // field: proc(5)'s number, from 1
		n, _ := strconv.ParseInt(f[field-3], 10, 64)
		return time.Duration(n) * time.Second / clockTicks
	}
	return tick(14) + tick(15), tick(16) + tick(17), true
}

// byHand runs the plan's fio command lines one after another in the guest,
// each to its end, and saves each one's JSON; it returns the whole time and
// each run's. Each run is polled every handPoll from its start, or with
// sleep only from its expected end (fioDue) on.
func byHand(ctx context.Context, a qmp.Agent, runs []planRun, dir string, sleep bool) (time.Duration, []time.Duration, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, nil, err
	}
	var each []time.Duration
	t0 := time.Now()
	for _, r := range runs {
		t := time.Now()
		first := time.Duration(0)
		if sleep {
			first = fioDue(r.argv)
		}
		st, err := handRun(ctx, a, r.argv, first)
		if err != nil {
			return 0, nil, fmt.Errorf("%s: %w", r.file, err)
		}
		if !st.OK() {
			return 0, nil, fmt.Errorf("%s: exit %d signal %d: %s", r.file, st.ExitCode, st.Signal, tailLines(string(st.Stderr), 10))
		}
		each = append(each, time.Since(t))
		if err := os.WriteFile(filepath.Join(dir, r.file), st.Stdout, 0o644); err != nil {
			return 0, nil, err
		}
	}
	return time.Since(t0), each, nil
}

// handRun starts argv, waits first, then polls every handPoll until it exits.
func handRun(ctx context.Context, a qmp.Agent, argv []string, first time.Duration) (qmp.ExecStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	pid, err := a.Exec(ctx, argv[0], argv[1:], nil)
	if err != nil {
		return qmp.ExecStatus{}, err
	}
	wait := first
	for {
		select {
		case <-ctx.Done():
			return qmp.ExecStatus{}, ctx.Err()
		case <-time.After(wait):
		}
		st, err := a.ExecStatus(ctx, pid)
		if err != nil || st.Exited {
			return st, err
		}
		wait = handPoll
	}
}

// fioDue is a time_based fio run's expected length from its command line:
// --ramp_time plus --runtime, in seconds; 0 for any other run.
func fioDue(argv []string) time.Duration {
	var d time.Duration
	timed := false
	for _, a := range argv {
		k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		n, err := strconv.Atoi(v)
		switch {
		case k == "time_based":
			timed = true
		case err != nil:
		case k == "runtime", k == "ramp_time":
			d += time.Duration(n) * time.Second
		}
	}
	if !timed {
		return 0
	}
	return d
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func tailLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}
