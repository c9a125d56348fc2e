package flush

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// Options shape one measurement.
type Options struct {
	Window time.Duration // 0 means DefaultWindow
	Hz     float64       // samples per second; 0 means DefaultHz
	// Trigger makes the guest flush through the guest agent at the start
	// of the window (sync, then an fsync of each disk device). The agent
	// must answer before the window starts.
	Trigger bool
	// OnSample is called after each sample: progress, and tests that step
	// through a window instead of sleeping.
	OnSample sampler.OnSample
	// Histogram sets latency histograms on the disks for the window
	// (package latency: never replacing one found) and clears them after:
	// the result then has each disk's flush (and write) percentiles.
	Histogram bool
}

// ErrAgent means the guest agent did not answer before the window: the
// guest cannot be made to flush.
var ErrAgent = exitcode.New(exitcode.Unreachable, "the guest agent does not answer, so the guest cannot be made to flush")

// ErrAgentHeld means a backup holds the VM (vm.VM.Agent): the agent is left
// alone, so the guest is not made to flush.
var ErrAgentHeld = exitcode.New(exitcode.Unreachable, "a backup holds the VM, so the guest agent is left alone and the guest is not made to flush")

// ErrNotRunning means the VM has no running QEMU to measure.
var ErrNotRunning = exitcode.New(exitcode.Unreachable, "flushes can only be measured on a running VM")

// Measurable reports whether a disk's flushes can be measured: a guest
// disk (not a CD-ROM, EFI vars or TPM state) the running QEMU has attached.
func Measurable(d *vm.Disk) bool { return d.Kind() == qemuserver.KindDisk && d.Running != nil }

// Measure samples the window and judges each measurable disk of disks.
// It always returns a Result (possibly with fewer samples than the window
// holds); an error says why the window was cut short, and the Result then
// holds the samples taken, the gap up to the end and, from two samples on,
// verdicts that say how much of the window they stand on.
func Measure(ctx context.Context, n node.Node, set *disk.Set, o Options) (*Result, error) {
	v := set.VM
	if o.Window <= 0 {
		o.Window = DefaultWindow
	}
	if o.Hz <= 0 {
		o.Hz = DefaultHz
	}
	interval := time.Duration(float64(time.Second) / o.Hz)
	res := &Result{VMID: v.VMID, WindowS: o.Window.Seconds(), Trigger: o.Trigger, IntervalS: interval.Seconds(),
		Samples: []Sample{}, Gaps: []Gap{}, Verdicts: []Judgement{}}
	if !v.Running {
		return res, fmt.Errorf("VM %d: %w", v.VMID, ErrNotRunning)
	}
	var measured []*disk.Disk
	var ids []string
	devs := map[string]string{} // disk -> block device (as this process sees it)
	vols := map[string]string{} // disk -> volume file or device, for cachestat
	for _, d := range set.Disks {
		if !Measurable(d.Disk) {
			continue
		}
		measured = append(measured, d)
		ids = append(ids, d.ID)
		if d.Path == "" {
			continue
		}
		switch d.Running.Driver {
		case "host_device":
			devs[d.ID], vols[d.ID] = d.Path, d.Path
		case "file":
			vols[d.ID] = d.Path
		}
	}
	// The zvols' sync property, read once before the window (one zfs call
	// for all of them, none when the caller read them): sync=disabled
	// decides their verdict.
	set.Only(ids).Fill(ctx, n, disk.ZFS, disk.Options{})
	// The VM's cgroup, found once (cache's, when cache measures).
	set.Fill(ctx, n, disk.Cgroup, disk.Options{})
	cg := set.CgroupDir
	var agent qmp.Agent
	if o.Trigger {
		// vzdump thaws the guest through the agent's one-client socket:
		// no trigger while a backup holds the VM.
		a, skip := v.Agent(ctx, n, n.Timeout, "guest-ping, guest-exec (sync)", "the guest's flush (--trigger)")
		if skip != nil {
			return res, fmt.Errorf("VM %d: --trigger refused: %w: %s", v.VMID, ErrAgentHeld, skip)
		}
		agent = *a
		// Fail before the window, not when it ends: a guest without a
		// running agent answers nothing.
		if err := agent.Ping(ctx); err != nil {
			return res, fmt.Errorf("VM %d: %w: %v", v.VMID, ErrAgent, err)
		}
	}
	mctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	host := sampler.Host{Proc: n.Paths.Proc, Sys: n.Paths.Sys}
	triggerDone := make(chan error, 1)
	triggered := false
	var start time.Time
	var first, last sampler.Sample
	bs := &sampler.Window{
		VM: v, Disks: ids, Timeout: n.Timeout,
		Interval: interval, Patience: 3 * time.Second,
		OnSample: func(tk sampler.Tick) {
			q := tk.Sample
			if start.IsZero() {
				start, first = q.Time, q
			}
			last = q
			s := readSample(q, start, host, v.Pid, vols, devs)
			if c := sampler.ReadCgroup(mctx, n, cg, false); c.Measured() {
				b := c.UnflushedBytes()
				s.CgroupUnflushedBytes = &b
			}
			res.Samples = append(res.Samples, s)
			if o.Trigger && !triggered {
				triggered = true
				go func() {
					// The wait below gives up first, after the window and
					// one timeout more.
					err := GuestSync(mctx, agent, o.Window+2*n.Timeout)
					if err != nil {
						cancel(err) // end the window at once
					}
					triggerDone <- err
				}()
			}
			if o.OnSample != nil {
				o.OnSample(tk)
			}
		},
	}
	hist := latency.Start(o.Histogram, n.Timeout)
	bs.Query.Then = hist.Hook(v, n.Timeout, ids)
	_, err := bs.Run(mctx, o.Window)
	res.HistogramsLeft = hist.Leftovers(v.VMID, v.Pid, v.QMPSocket(), first.Stats)
	if hist != nil {
		res.Histograms = hist.Notes()
		res.Percentiles = map[string]latency.Percentiles{}
		for _, id := range ids {
			if p := latency.IntervalOf(first.Stats[id], last.Stats[id]); p.Any() {
				res.Percentiles[id] = p
			}
		}
		if rerr := hist.End(ctx); rerr != nil && err == nil {
			err = exitcode.Wrap(exitcode.Unreachable, "latency histograms", rerr)
		}
	}
	var triggerErr error
	if ctx.Err() == nil && context.Cause(mctx) != nil {
		triggerErr = context.Cause(mctx) // the trigger failed mid-window
	} else if err == nil && triggered {
		select {
		case triggerErr = <-triggerDone:
		case <-time.After(n.Timeout):
			triggerErr = fmt.Errorf("sync in the guest did not finish within the window and %s more", n.Timeout)
		}
	}
	at := ""
	if k := len(res.Samples); k > 0 {
		at = fmt.Sprintf(" %.1f s into the %g s window (%d sample(s) taken)", res.Samples[k-1].TimeS, res.WindowS, k)
	}
	why := ""
	switch {
	case ctx.Err() != nil:
		why = "interrupted"
		err = exitcode.Wrap(exitcode.Unreachable, "interrupted"+at, ctx.Err())
	case triggerErr != nil:
		why = "making the guest flush failed: " + triggerErr.Error()
		err = exitcode.Wrap(exitcode.Unreachable, fmt.Sprintf("VM %d: making the guest flush failed%s", v.VMID, at), triggerErr)
	case err != nil:
		why = "QMP stopped answering: " + err.Error()
		err = exitcode.Wrap(exitcode.Unreachable, fmt.Sprintf("VM %d: QMP stopped answering%s", v.VMID, at), err)
	}
	res.Gaps, res.SampledS = FindGaps(res.Samples, res.IntervalS, res.WindowS, why)
	if len(res.Samples) >= 2 {
		note := standsOn(res)
		var modes []string
		for _, d := range measured {
			j := Judge(InputFor(d, res.Samples))
			modes = append(modes, j.Mode)
			j.SampledS = res.SampledS
			j.Reason += note
			res.Verdicts = append(res.Verdicts, j)
		}
		res.Unflushed = unflushedOf(cg, res.Samples, modes)
	}
	return res, err
}

func readSample(q sampler.Sample, start time.Time, host sampler.Host, pid int, vols, devs map[string]string) Sample {
	s := Sample{TimeS: q.Time.Sub(start).Seconds(), Disks: map[string]DiskStat{}, Volumes: map[string]sampler.PageCache{},
		DeviceFlushIOs: map[string]int64{}, DeviceWriteSect: map[string]int64{}}
	for id, b := range q.Stats {
		s.Disks[id] = DiskStat{b.WrBytes, b.FlushOps, b.FlushTotalTimeNs}
	}
	if m, err := host.Memory(); err == nil {
		s.DirtyBytes, s.WritebackBytes = m.DirtyBytes, m.WritebackBytes
	}
	if wb, err := host.ProcessWriteBytes(pid); err == nil {
		s.QEMUWriteBytes = wb
	}
	for id, p := range vols {
		if pc, err := sampler.VolumePageCache(p); err == nil {
			s.Volumes[id] = pc
		}
	}
	for id, dev := range devs {
		if st, err := host.BlockDeviceStat(dev); err == nil {
			s.DeviceFlushIOs[id], s.DeviceWriteSect[id] = st.FlushIOs, st.WriteSectors
		}
	}
	return s
}

// GapNoAnswer is why a gap inside the window has no samples.
const GapNoAnswer = "QMP did not answer (QEMU stopped, or another client held the socket)"

// FindGaps lists the stretches of a window (windowS seconds, sampled every
// intervalS) that have no samples, and how many seconds the samples cover.
// Two samples more than GapIntervals intervals apart leave a gap between
// them; a series that ends early leaves one up to the end of the window,
// with endWhy (the error that ended it) as its reason. It is pure.
func FindGaps(samples []Sample, intervalS, windowS float64, endWhy string) ([]Gap, float64) {
	gaps := []Gap{}
	if len(samples) == 0 {
		if windowS > 0 {
			gaps = append(gaps, Gap{FromS: 0, ToS: windowS, Missed: int(math.Round(windowS/intervalS)) + 1, Why: orDefault(endWhy)})
		}
		return gaps, 0
	}
	var missing float64
	for i := 1; i < len(samples); i++ {
		a, b := samples[i-1].TimeS, samples[i].TimeS
		if b-a > GapIntervals*intervalS {
			g := Gap{FromS: round1(a), ToS: round1(b), Missed: int(math.Round((b-a)/intervalS)) - 1, Why: GapNoAnswer}
			gaps = append(gaps, g)
			missing += g.Seconds()
		}
	}
	last := samples[len(samples)-1].TimeS
	if windowS-last > GapIntervals*intervalS {
		gaps = append(gaps, Gap{FromS: round1(last), ToS: round1(windowS), Missed: int(math.Round((windowS - last) / intervalS)), Why: orDefault(endWhy)})
	}
	return gaps, round1(math.Max(last-missing, 0))
}

func orDefault(why string) string {
	if why == "" {
		return GapNoAnswer
	}
	return why
}

func round1(f float64) float64 { return math.Round(f*10) / 10 }

// syncScript makes the guest flush: sync, then an fsync of each disk
// device (a plain sync sends no flush for writes made to a raw device).
const syncScript = `sync; for d in /dev/sd? /dev/vd?; do [ -b "$d" ] || continue; sync "$d" 2>/dev/null || fsync "$d" 2>/dev/null; done; true`

// GuestSync runs the sync script in the guest through the guest agent and
// waits at most limit for it to finish.
func GuestSync(ctx context.Context, a qmp.Agent, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	st, err := a.Run(ctx, "/bin/sh", []string{"-c", syncScript}, nil, 200*time.Millisecond)
	if err != nil {
		return err
	}
	if st.ExitCode != 0 {
		return fmt.Errorf("sync in the guest exited %d: %s", st.ExitCode, strings.TrimSpace(string(st.Stderr)))
	}
	return nil
}
