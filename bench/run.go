package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/fio"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// How often bench asks the agent whether fio has finished (pollDelay):
// while the run is not due to end, first after PollEvery (a fio that fails
// at once), then after as long again as the run has taken, at most
// PollRare, the last wait cut to land on the run's expected end (ramp +
// runtime): 6 exchanges over Lab 19's 20 s + 3 s ramp. Each exchange costs
// the guest: on the one-vCPU TCG test guest, polling every 100 ms made each
// 23 s run about 0.5 s longer (make bench-overhead). From the expected end
// on, after a tenth of the time past it, never sooner than PollNear nor
// later than PollEvery. A run that ends on time is noticed within PollNear,
// instead of up to a second late (4 % of Lab 19's 23 s, a third of a 2 s
// + 1 s job); a run that overruns (a fill, whose end is not known in
// advance) is noticed within a tenth of its overrun, at no more exchanges
// than one every PollNear for its first second past due.
const (
	PollEvery = time.Second
	PollRare  = 10 * time.Second
	PollNear  = 100 * time.Millisecond
)

// pollDelay is the wait before the next guest-exec-status of a run started
// elapsed ago and due to end after due (0: not known, the fill).
func pollDelay(elapsed, due time.Duration) time.Duration {
	if left := due - elapsed; left > 0 {
		return max(PollNear, min(left, PollRare, max(PollEvery, elapsed)))
	}
	return max(PollNear, min(PollEvery, (elapsed-due)/10))
}

// Clock paces the polls; tests step through a run with one of their own.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// StopWait is how long a stopped fio gets to exit after SIGTERM before
// bench sends SIGKILL to it and its job processes.
const StopWait = 10 * time.Second

// Disk is one disk to measure: its target and its settings as it runs.
type Disk struct {
	ID       string    `json:"id"`
	Target   Target    `json:"target"`
	Settings Settings  `json:"settings"`
	Facts    DiskFacts `json:"-"`
}

// Settings are the disk's settings as they ran, saved with the results.
type Settings struct {
	Controller  string            `json:"controller"`
	Device      string            `json:"device"`
	Cache       string            `json:"cache"`
	AIO         string            `json:"aio"`
	IOThread    bool              `json:"iothread"`
	Storage     string            `json:"storage"`
	StorageType string            `json:"storage_type"`
	Volume      string            `json:"volume"`
	Limits      qemuserver.Limits `json:"limits"`
	QEMU        string            `json:"qemu"`
	GuestDevice string            `json:"guest_device"`
	Mode        Mode              `json:"mode"`
	Path        string            `json:"path"`
}

// Text is the settings on one line.
func (s Settings) Text() string {
	io := ""
	if s.IOThread {
		io = ", iothread"
	}
	lim := "no limits"
	if len(s.Limits.Normal()) > 0 {
		lim = "limits " + s.Limits.Normal().String()
	}
	return fmt.Sprintf("%s (%s)%s, cache=%s, aio=%s, %s; %s (%s) %s; QEMU %s; guest %s, %s %s",
		s.Controller, s.Device, io, s.Cache, s.AIO, lim, s.Storage, s.StorageType, s.Volume, s.QEMU, s.GuestDevice, s.Mode, s.Path)
}

// Observer samples the node's side during one step; the returned function
// ends the sampling and gives what was seen.
type Observer interface {
	Start(ctx context.Context, s Step) (stop func() Observation)
}

// Progress is one step starting (Done false) or finished.
type Progress struct {
	Step  Step
	Index int           // 1-based
	Total int           // steps in the plan
	Left  time.Duration // timed work left after this step
	Done  bool
	Took  time.Duration
	Err   error
}

// Options of a run.
type Options struct {
	VMID       int
	Out        string // the results directory (created)
	Observer   Observer
	OnProgress func(Progress)
	// HostRAMBytes: fio summary's area-below-ram check.
	HostRAMBytes int64
	// Clock paces the polls of fio's status (nil: the real clock).
	Clock Clock
}

// StepRun is one step that ran to its end.
type StepRun struct {
	Step Step
	File string
	Obs  Observation
	Res  *fio.Result
}

// Outcome is what Run did: the steps that completed, and why it stopped
// early (nil when every step ran).
type Outcome struct {
	Done    []StepRun
	Missing []Step
	Err     error
}

// Run runs the plan's steps one at a time in the guest and saves each
// completed run's raw fio JSON under o.Out. Ctrl-C (ctx cancelled) stops
// fio in the guest; an agent that stops answering ends the run; both keep
// what completed. Test files are removed afterwards, on error too.
func Run(ctx context.Context, a qmp.Agent, m Method, disks []Disk, o Options) *Outcome {
	var ids []string
	for _, d := range disks {
		ids = append(ids, d.ID)
	}
	byID := map[string]*Disk{}
	for i := range disks {
		byID[disks[i].ID] = &disks[i]
	}
	steps := m.Schedule(ids)
	out := &Outcome{}
	defer removeTestFiles(ctx, a, disks, out)
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		out.Err = exitcode.Wrap(exitcode.Usage, "--out", err)
		out.Missing = steps
		return out
	}
	if err := writeSettings(o.Out, disks); err != nil {
		out.Err = err
		out.Missing = steps
		return out
	}
	left := time.Duration(0)
	for _, s := range steps {
		left += m.Estimate(s)
	}
	for i, s := range steps {
		left -= m.Estimate(s)
		p := Progress{Step: s, Index: i + 1, Total: len(steps), Left: left}
		if o.OnProgress != nil {
			o.OnProgress(p)
		}
		t0 := time.Now()
		var stop func() Observation
		if o.Observer != nil {
			stop = o.Observer.Start(ctx, s)
		}
		st, err := runFio(ctx, a, m.Argv(s, byID[s.Disk].Target.Path), m.Estimate(s), o.Clock)
		var obs Observation
		if stop != nil {
			obs = stop()
		}
		p.Done, p.Took = true, time.Since(t0)
		if err == nil && !st.OK() {
			err = fmt.Errorf("fio exited %d (signal %d) on %s: %s", st.ExitCode, st.Signal, s.Disk, clip(append(st.Stderr, st.Stdout...)))
		}
		var res *fio.Result
		file := filepath.Join(o.Out, s.File())
		if err == nil {
			if res, err = fio.Parse(file, st.Stdout); err == nil {
				err = os.WriteFile(file, st.Stdout, 0o644)
			}
		}
		p.Err = err
		if o.OnProgress != nil {
			o.OnProgress(p)
		}
		if err != nil {
			out.Missing = steps[i:]
			switch {
			case ctx.Err() != nil:
				out.Err = exitcode.Unreachablef("stopped during %s (fio stopped in the guest): %d of %d runs completed", s.File(), i, len(steps))
			default:
				out.Err = exitcode.Wrap(exitcode.Unreachable, fmt.Sprintf("VM %d: %s %s run %d", o.VMID, s.Disk, s.Job.Name, s.Run), err)
			}
			return out
		}
		out.Done = append(out.Done, StepRun{Step: s, File: file, Obs: obs, Res: res})
	}
	return out
}

// runFio starts fio in the guest and polls until it exits, paced by
// pollDelay from due, the run's expected length; one exchange at a time,
// each wait counted from the end of the last one. When ctx ends first, fio
// is stopped (StopFio) and ctx's error returned.
func runFio(ctx context.Context, a qmp.Agent, argv []string, due time.Duration, clock Clock) (qmp.ExecStatus, error) {
	if clock == nil {
		clock = realClock{}
	}
	var pid int
	var err error
	for silent := 0; ; silent++ {
		if pid, err = a.Exec(ctx, argv[0], argv[1:], nil); !missedSync(err) || silent+1 >= SilentTries || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return qmp.ExecStatus{}, err
	}
	start := clock.Now()
	silent := 0
	for {
		select {
		case <-ctx.Done():
			StopFio(a, pid)
			return qmp.ExecStatus{}, ctx.Err()
		case <-clock.After(pollDelay(clock.Now().Sub(start), due)):
		}
		st, err := a.ExecStatus(ctx, pid)
		if err != nil {
			if ctx.Err() != nil {
				StopFio(a, pid)
				return st, ctx.Err()
			}
			if missedSync(err) {
				if silent++; silent < SilentTries {
					continue
				}
				return st, fmt.Errorf("fio (guest pid %d, still running as far as the node knows): the guest agent left %d polls in a row unanswered: %w", pid, silent, err)
			}
			return st, fmt.Errorf("fio (guest pid %d): %w", pid, err)
		}
		silent = 0
		if st.Exited {
			return st, nil
		}
	}
}

// SilentTries is how many exchanges in a row the guest agent may leave
// unanswered at the sync while fio runs (qmp.MissedSyncTries, each for
// AgentTimeout) before a run is given up.
const SilentTries = qmp.MissedSyncTries

// missedSync reports an exchange that timed out before its command was
// sent (qmp.AgentTimeoutError.Unsent).
func missedSync(err error) bool {
	var te *qmp.AgentTimeoutError
	return errors.As(err, &te) && te.Unsent()
}

// stopScript sends SIGTERM to fio (it stops its job processes itself and
// prints what it measured), waits, then SIGKILLs fio and its children.
const stopScript = `p=$1; w=$2; kill -TERM "$p" 2>/dev/null
i=0; while [ -d /proc/$p ] && [ $i -lt $w ]; do sleep 1; i=$((i+1)); done
if [ -d /proc/$p ]; then for c in $(cat /proc/$p/task/*/children 2>/dev/null); do kill -KILL "$c"; done; kill -KILL "$p"; fi
exit 0`

// StopFio stops the guest program pid and what it started, on a context
// of its own (the caller's has ended), then collects its status so that
// the agent forgets it.
func StopFio(a qmp.Agent, pid int) {
	ctx, cancel := context.WithTimeout(context.Background(), StopWait+10*time.Second)
	defer cancel()
	// A sync the busy guest's agent missed is asked again (its command
	// was never sent), until ctx ends.
	for ctx.Err() == nil {
		if _, err := a.Run(ctx, "sh", []string{"-c", stopScript, "sh", strconv.Itoa(pid), strconv.Itoa(int(StopWait / time.Second))}, nil, 200*time.Millisecond); !missedSync(err) {
			break
		}
	}
	for ctx.Err() == nil {
		st, err := a.ExecStatus(ctx, pid)
		if err != nil && !missedSync(err) || st.Exited {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// removeTestFiles removes file mode's test files (and says so in out.Err
// when one could not be removed).
func removeTestFiles(ctx context.Context, a qmp.Agent, disks []Disk, out *Outcome) {
	for _, d := range disks {
		if d.Target.Mode != File {
			continue
		}
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		st, err := a.Run(cctx, "rm", []string{"-f", "--", d.Target.Path}, nil, 100*time.Millisecond)
		cancel()
		if err == nil && !st.OK() {
			err = fmt.Errorf("rm exited %d: %s", st.ExitCode, clip(st.Stderr))
		}
		if err != nil {
			e := exitcode.Unreachablef("%s: the test file %s could not be removed in the guest: %v: remove it by hand", d.ID, d.Target.Path, err)
			out.Err = errors.Join(out.Err, e)
		}
	}
}

// SettingsFile holds every disk's settings as they ran, beside the fio
// files (not *.json: fio summary reads those as results).
const SettingsFile = "settings.txt"

func writeSettings(dir string, disks []Disk) error {
	var b strings.Builder
	b.WriteString("# pvediskcheck bench: each disk's settings as it ran (<disk>-<job>-<run>.json are fio's own JSON)\n")
	for _, d := range disks {
		fmt.Fprintf(&b, "%s: %s\n", d.ID, d.Settings.Text())
		if len(d.Target.Found) > 0 {
			fmt.Fprintf(&b, "%s: written over with --destroy: %s\n", d.ID, strings.Join(d.Target.Found, "; "))
		}
	}
	if err := os.WriteFile(filepath.Join(dir, SettingsFile), []byte(b.String()), 0o644); err != nil {
		return exitcode.Wrap(exitcode.Usage, "--out", err)
	}
	return nil
}

// ReadSettings reads the settings file of a bench results directory (for
// fio summary and fio compare to say what was measured): one line per
// disk, comments left out; ok false when dir holds none.
func ReadSettings(dir string) (lines []string, ok bool) {
	b, err := os.ReadFile(filepath.Join(dir, SettingsFile))
	if err != nil {
		return nil, false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return lines, true
}
