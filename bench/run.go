package bench

import (
	"bytes"
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
	"github.com/pvediskcheck/pvediskcheck/outfile"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/units"
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
// bench sends SIGKILL to it and its job processes, when bench stops it for
// a failure; after Ctrl-C it gets InterruptWait.
const StopWait = 10 * time.Second

// InterruptGrace is how long bench still works in the guest after Ctrl-C
// (the first ends the run; a second, Options.Abort, ends this at once):
// a guest-exec of fio in flight gets its pid, fio is stopped and its exit
// confirmed, the test files removed. What is not done by then is said,
// with how to finish it: bench ends within 2 s of Ctrl-C even while the
// guest agent hangs (it waited 40 s, a second Ctrl-C ignored too).
const InterruptGrace = 1700 * time.Millisecond

// InterruptWait is how long fio gets after SIGTERM following Ctrl-C
// before its job processes and it are sent SIGKILL (by the guest's own
// stop script, which goes on should bench have left).
const InterruptWait = time.Second

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
	VMID int
	// Out is the results folder, made by the caller (outfile: a new
	// folder, mode 0700; the raw fio JSON and the settings are new files
	// in it, 0600).
	Out        *outfile.Folder
	Observer   Observer
	OnProgress func(Progress)
	// HostRAMBytes: fio summary's area-below-ram check.
	HostRAMBytes int64
	// Clock paces the polls of fio's status (nil: the real clock).
	Clock Clock
	// Abort, when it ends (a second Ctrl-C), ends InterruptGrace at once.
	Abort context.Context
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
	// Left is what the run may have left in the guest (a fio not
	// confirmed stopped, a test file not removed), each with the command
	// that finishes it; also in Err.
	Left []string
}

func orErr(err error) error {
	if err == nil {
		return errors.New("the run ended")
	}
	return err
}

// stopHow is the command that stops fio (guest pid pid) in VM vmid: TERM
// lets it stop its job processes and exit; KILL of it would leave them.
func stopHow(vmid, pid int) string {
	return fmt.Sprintf("stop it with `qm guest exec %d -- kill -TERM %d` (fio stops its job processes and exits)", vmid, pid)
}

// agentWhy says why an exchange after Ctrl-C failed.
func agentWhy(lctx context.Context, err error) string {
	if lctx.Err() != nil {
		return fmt.Sprintf("the guest agent did not answer within %s after Ctrl-C", units.Duration(InterruptGrace))
	}
	return err.Error()
}

// afterInterrupt is a context that outlives ctx by InterruptGrace (what
// must follow an interrupt: stopping fio, removing test files), ended at
// once by abort.
func afterInterrupt(ctx, abort context.Context) (context.Context, context.CancelFunc) {
	if abort == nil {
		abort = context.Background()
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		defer cancel()
		select {
		case <-ctx.Done():
		case <-abort.Done():
			return
		case <-lctx.Done():
			return
		}
		t := time.NewTimer(InterruptGrace)
		defer t.Stop()
		select {
		case <-t.C:
		case <-abort.Done():
		case <-lctx.Done():
		}
	}()
	return lctx, cancel
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
	lctx, lcancel := afterInterrupt(ctx, o.Abort)
	defer lcancel()
	r := &runState{a: a, vmid: o.VMID, disks: disks, claimed: map[string]bool{}, cleaned: map[string]bool{}}
	defer func() {
		r.removeTestFiles(lctx, out)
		if len(out.Left) > 0 {
			out.Err = exitcode.Wrap(exitcode.Unreachable, "", fmt.Errorf("%w; %d thing(s) may be left in the guest, each said with the results and how to finish it", orErr(out.Err), len(out.Left)))
		}
	}()
	if err := writeSettings(o.Out, disks); err != nil {
		out.Err = err
		out.Missing = steps
		return out
	}
	// File mode's folders, created now (mkdir: never one already there).
	for _, d := range disks {
		if d.Target.Mode != File {
			continue
		}
		if err := CheckFolder(lctx, a, d.Target, true); err != nil {
			if exitcode.Of(err) != exitcode.Usage {
				r.claimed[d.ID] = true // maybe made: removed if empty
			}
			out.Err, out.Missing = err, steps
			return out
		}
		r.claimed[d.ID] = true
	}
	written := map[string]bool{}
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
		d := byID[s.Disk]
		// The guard execs fio only while what Place proved holds: a
		// blank raw disk's first MiB is read again until a job writes it.
		first := d.Target.Mode == Raw && len(d.Target.Found) == 0 && !written[s.Disk]
		argv := GuardArgv(d.Target, first, m.Argv(s, d.Target.Path))
		written[s.Disk] = written[s.Disk] || s.Job.Write()
		st, err := r.runFio(ctx, lctx, argv, m.Estimate(s), o.Clock, out)
		var obs Observation
		if stop != nil {
			obs = stop()
		}
		p.Done, p.Took = true, time.Since(t0)
		var refused error
		if err == nil && st.Exited && st.Signal == 0 && st.ExitCode == GuardRefused && bytes.Contains(st.Stdout, []byte("pvediskcheck-guard=")) {
			refused = guardRefusal(d, s, string(st.Stdout))
			err = refused
		}
		if err == nil && !st.OK() {
			err = fmt.Errorf("fio exited %d (signal %d) on %s: %s", st.ExitCode, st.Signal, s.Disk, clip(append(st.Stderr, st.Stdout...)))
		}
		var res *fio.Result
		file := filepath.Join(o.Out.Path, s.File())
		if err == nil {
			if res, err = fio.Parse(file, st.Stdout); err == nil {
				err = o.Out.WriteFile(s.File(), st.Stdout)
			}
		}
		p.Err = err
		if o.OnProgress != nil {
			o.OnProgress(p)
		}
		if err != nil {
			out.Missing = steps[i:]
			switch {
			case refused != nil:
				out.Err = refused
			case ctx.Err() != nil:
				how := "fio stopped in the guest"
				if len(out.Left) > 0 {
					how = "fio told to stop in the guest"
				}
				out.Err = exitcode.Unreachablef("stopped during %s (%s): %d of %d runs completed", s.File(), how, i, len(steps))
			default:
				out.Err = exitcode.Wrap(exitcode.Unreachable, fmt.Sprintf("VM %d: %s %s run %d", o.VMID, s.Disk, s.Job.Name, s.Run), err)
			}
			return out
		}
		out.Done = append(out.Done, StepRun{Step: s, File: file, Obs: obs, Res: res})
	}
	return out
}

// runState is what Run keeps about the guest: which disks' folders it
// made, which it removed.
type runState struct {
	a       qmp.Agent
	vmid    int
	disks   []Disk
	claimed map[string]bool
	cleaned map[string]bool
}

// runFio starts fio in the guest (argv: its guard, then fio) and polls
// until it exits, paced by pollDelay from due, the run's expected length;
// one exchange at a time, each wait counted from the end of the last one.
// When ctx ends first, fio is stopped (stopFio) within lctx, and ctx's
// error returned; what could not be confirmed goes to out.Left. Starting
// fio runs on lctx, so a guest-exec in flight at Ctrl-C still gives the
// pid to stop.
func (r *runState) runFio(ctx, lctx context.Context, argv []string, due time.Duration, clock Clock, out *Outcome) (qmp.ExecStatus, error) {
	if clock == nil {
		clock = realClock{}
	}
	a := r.a
	var pid int
	var err error
	for silent := 0; ; silent++ {
		if pid, err = a.Exec(lctx, argv[0], argv[1:], nil); !missedSync(err) || silent+1 >= SilentTries || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		if ctx.Err() != nil && !unsent(err) {
			out.Left = append(out.Left, fmt.Sprintf("fio may have started (its guest-exec was sent, no pid came back: %s): look with `qm guest exec %d -- pidof fio` and stop it with `qm guest exec %d -- kill -TERM PID`", agentWhy(lctx, err), r.vmid, r.vmid))
		}
		return qmp.ExecStatus{}, err
	}
	if ctx.Err() != nil {
		r.stopFio(lctx, pid, true, out)
		return qmp.ExecStatus{}, ctx.Err()
	}
	start := clock.Now()
	silent := 0
	for {
		select {
		case <-ctx.Done():
			r.stopFio(lctx, pid, true, out)
			return qmp.ExecStatus{}, ctx.Err()
		case <-clock.After(pollDelay(clock.Now().Sub(start), due)):
		}
		st, err := a.ExecStatus(ctx, pid)
		if err != nil {
			if ctx.Err() != nil {
				r.stopFio(lctx, pid, true, out)
				return st, ctx.Err()
			}
			if missedSync(err) {
				if silent++; silent < SilentTries {
					continue
				}
				err = fmt.Errorf("fio (guest pid %d, still running as far as the node knows): the guest agent left %d polls in a row unanswered: %w", pid, silent, err)
				r.stopFio(lctx, pid, false, out)
				return st, err
			}
			return st, fmt.Errorf("fio (guest pid %d): %w", pid, err)
		}
		silent = 0
		if st.Exited {
			return st, nil
		}
	}
}

// unsent reports an agent exchange that failed before its command was
// sent: a missed sync, or one interrupted during the sync.
func unsent(err error) bool {
	return missedSync(err) || err != nil && strings.Contains(err.Error(), qgaSync+" interrupted")
}

const qgaSync = "guest-sync-delimited"

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

// stopScript sends SIGTERM to fio ($1: it stops its job processes itself),
// waits up to $2 tenths of a second for it to be gone (a zombie the agent
// has not reaped yet is gone), then SIGKILLs its children and it; then
// removes each test file and folder given after ($3 $4, $5 $6, ...): it
// goes on in the guest should bench have left. Exit 3 when a removal
// failed.
const stopScript = `p=$1; w=$2; shift 2; kill -TERM "$p" 2>/dev/null
alive() { [ -d /proc/$p ] && ! grep -qs '^State:[[:space:]]*Z' /proc/$p/status; }
i=0; while alive && [ $i -lt $w ]; do sleep 0.1 2>/dev/null || sleep 1; i=$((i+1)); done
if alive; then for c in $(cat /proc/$p/task/*/children 2>/dev/null); do kill -KILL "$c"; done; kill -KILL "$p"; fi
rc=0; while [ $# -ge 2 ]; do rm -f -- "$2" && rmdir -- "$1" || rc=3; shift 2; done
exit $rc`

// stopFio stops the guest program pid and what it started, on lctx (the
// run's own has ended: after Ctrl-C it ends InterruptGrace later; after
// a failure it is cut at StopWait and more), and confirms fio has exited
// (its guest-exec-status, which also makes the agent forget it). The
// stop script removes the test files too; a fio or a test file not
// confirmed gone goes to out.Left with the command that finishes it.
func (r *runState) stopFio(lctx context.Context, pid int, interrupted bool, out *Outcome) {
	a := r.a
	wait := StopWait
	if interrupted {
		wait = InterruptWait
	}
	ctx, cancel := context.WithTimeout(lctx, wait+5*time.Second)
	defer cancel()
	args := []string{"-c", stopScript, "sh", strconv.Itoa(pid), strconv.Itoa(int(wait / (100 * time.Millisecond)))}
	var files []string
	for _, d := range r.disks {
		if r.claimed[d.ID] && !r.cleaned[d.ID] {
			args = append(args, d.Target.Dir, d.Target.Path)
			files = append(files, d.ID)
		}
	}
	var spid int
	var err error
	for ctx.Err() == nil {
		// A sync the busy guest's agent missed is asked again (its
		// command was never sent), until ctx ends.
		if spid, err = a.Exec(ctx, "sh", args, nil); !missedSync(err) {
			break
		}
	}
	if err != nil || spid == 0 {
		out.Left = append(out.Left, fmt.Sprintf("fio (guest pid %d) may still be running: the stop was not sent (%s); %s", pid, agentWhy(ctx, err), stopHow(r.vmid, pid)))
		return
	}
	stopped := false
	for ctx.Err() == nil && !stopped {
		st, err := a.ExecStatus(ctx, pid)
		switch {
		case err == nil && st.Exited:
			stopped = true
		case err != nil && !missedSync(err) && ctx.Err() == nil:
			// The agent no longer knows the pid: its status was read.
			var ae *qmp.AgentError
			stopped = errors.As(err, &ae)
			if !stopped {
				time.Sleep(100 * time.Millisecond)
			}
		default:
			time.Sleep(100 * time.Millisecond)
		}
	}
	if !stopped {
		out.Left = append(out.Left, fmt.Sprintf("fio (guest pid %d) was not seen to exit; the guest's stop script (pid %d) sends it and its job processes SIGKILL %s after SIGTERM: check with `qm guest exec %d -- kill -0 %d` (an error: it is gone), else %s",
			pid, spid, units.Duration(wait), r.vmid, pid, stopHow(r.vmid, pid)))
		return
	}
	// The test files: removed by the stop script once fio was gone.
	for ctx.Err() == nil && len(files) > 0 {
		st, err := a.ExecStatus(ctx, spid)
		if err == nil && st.Exited {
			if st.OK() {
				for _, id := range files {
					r.cleaned[id] = true
				}
			}
			return
		}
		if err != nil && !missedSync(err) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// removeTestFiles removes file mode's test files and the folders bench
// made (those the stop script did not), and says in out.Left what could
// not be removed and how.
func (r *runState) removeTestFiles(lctx context.Context, out *Outcome) {
	for _, d := range r.disks {
		if d.Target.Mode != File || !r.claimed[d.ID] || r.cleaned[d.ID] {
			continue
		}
		cctx, cancel := context.WithTimeout(lctx, 30*time.Second)
		st, err := r.a.Run(cctx, "sh", []string{"-c", cleanScript, "sh", d.Target.Dir, d.Target.Path}, nil, 100*time.Millisecond)
		cancel()
		if err == nil && !st.OK() {
			err = fmt.Errorf("rm exited %d: %s", st.ExitCode, clip(st.Stderr))
		}
		if err != nil {
			out.Left = append(out.Left, fmt.Sprintf("%s: the test file %s and its folder were not seen removed (%s): look, and remove them with `qm guest exec %d -- rm -r %s`", d.ID, d.Target.Path, agentWhy(lctx, err), r.vmid, d.Target.Dir))
			continue
		}
		r.cleaned[d.ID] = true
	}
}

// SettingsFile holds every disk's settings as they ran, beside the fio
// files (not *.json: fio summary reads those as results).
const SettingsFile = "settings.txt"

func writeSettings(dir *outfile.Folder, disks []Disk) error {
	var b strings.Builder
	b.WriteString("# pvediskcheck bench: each disk's settings as it ran (<disk>-<job>-<run>.json are fio's own JSON)\n")
	for _, d := range disks {
		fmt.Fprintf(&b, "%s: %s\n", d.ID, d.Settings.Text())
		if len(d.Target.Found) > 0 {
			fmt.Fprintf(&b, "%s: written over with --destroy: %s\n", d.ID, strings.Join(d.Target.Found, "; "))
		}
	}
	if err := dir.WriteFile(SettingsFile, []byte(b.String())); err != nil {
		return exitcode.Wrap(exitcode.Unreachable, "--out "+dir.Path, err)
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
