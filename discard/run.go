package discard

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/units"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// DefaultTrimTimeout is how long guest-fstrim may take unless told: it
// discards the free space of every mounted filesystem, minutes on big ones.
const DefaultTrimTimeout = 10 * time.Minute

// Bounds of --wait and --trim-timeout: fstrim of a large, fragmented
// filesystem takes minutes, rarely an hour; six hours is past any.
const (
	MaxWait        = 6 * time.Hour
	MaxTrimTimeout = 6 * time.Hour
)

// Options say what a run does.
type Options struct {
	Mode Mode
	// Wait is the watch window (Wait).
	Wait time.Duration
	// TrimTimeout bounds guest-fstrim (Trim); it must be positive.
	TrimTimeout time.Duration
	// Interval is how often the window is sampled (Wait); 0 means
	// DefaultInterval.
	Interval time.Duration
	// OnSample, when set, is called after each sample of a --wait window.
	OnSample sampler.OnSample
	// OnTrim, when set, is called as guest-fstrim is sent, with its
	// deadline; the function it returns is called when it has answered.
	OnTrim func(timeout time.Duration) (done func())
	// NewMeter returns the meter of one snapshot; nil measures with each
	// storage's own tool (alloc.NewMeter on the node's runner).
	NewMeter func() Meter
}

// Validate checks the options as what they are: durations that must be
// positive (exit 2, one line).
func Validate(o Options) error {
	switch o.Mode {
	case Status, Trim, Wait:
	default:
		return exitcode.Usagef("discard: unknown mode %s", units.Clip(string(o.Mode), 20))
	}
	if o.Mode == Wait && o.Wait <= 0 {
		return exitcode.Usagef("discard: --wait %s: give a positive duration, e.g. --wait 2m", o.Wait)
	}
	if o.TrimTimeout <= 0 {
		return exitcode.Usagef("discard: --trim-timeout %s: give a positive duration, e.g. --trim-timeout 10m", o.TrimTimeout)
	}
	if o.Wait > MaxWait {
		return exitcode.Usagef("discard: --wait %s: at most %s", o.Wait, units.Short(MaxWait))
	}
	if o.TrimTimeout > MaxTrimTimeout {
		return exitcode.Usagef("discard: --trim-timeout %s: at most %s", o.TrimTimeout, units.Short(MaxTrimTimeout))
	}
	if o.Interval < 0 {
		return exitcode.Usagef("discard: sampling interval %s: give a positive duration", o.Interval)
	}
	return nil
}

// Run looks at the selected disks of v: the status (settings, allocation,
// since-start counters), or a trim through the guest agent (Trim) or a
// watched window (Wait) with a verdict per disk. The report comes back
// whenever something was measured, also with an error: print it, then
// return the error (exit 3 for a stopped VM, or QEMU gone mid-window; exit 1
// when a disk's space was not returned).
func Run(ctx context.Context, n node.Node, v *vm.VM, sel []*vm.Disk, o Options) (*Report, error) {
	if err := Validate(o); err != nil {
		return nil, err
	}
	if o.Mode != Status && !v.Running {
		return nil, exitcode.Unreachablef("VM %d is not running: --%s needs the running QEMU (and the guest)", v.VMID, o.Mode)
	}
	if o.Interval == 0 {
		o.Interval = DefaultInterval
	}
	newMeter := o.NewMeter
	if newMeter == nil {
		newMeter = func() Meter { return alloc.NewMeter(n.Runner, n.Timeout) }
	}
	ts := Targets(v, sel)
	if v.Running {
		if err := v.FetchLive(ctx, n.Timeout); err != nil {
			return nil, vm.QMPError(v.VMID, err)
		}
		SetNodes(ts)
	}
	r := &run{n: n, v: v, ts: ts, sel: sel, o: o, newMeter: newMeter,
		rep: &Report{VMID: v.VMID, Running: v.Running, Mode: o.Mode, Disks: []Disk{}}}
	// What the model took from the node, and every selected disk that
	// takes no discards, said rather than silently left out.
	r.rep.Notes = append(append(r.rep.Notes, v.Notes...), v.IgnoredNotes()...)
	for _, d := range sel {
		if !slices.ContainsFunc(ts, func(t *Target) bool { return t.Disk == d }) {
			r.rep.Notes = append(r.rep.Notes, d.NotListed())
		}
	}

	// Measure first: a tool that fails stops everything before the guest
	// is asked to trim anything.
	before, err := r.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	var after *Snapshot
	var guest *GuestTrim
	var window *Sampling
	var runErr error
	if o.Mode == Status {
		// The trim asks guest-get-fsinfo itself (strictly); the status one
		// look through disk's Agent layer, for the reclaimable figure.
		// --wait leaves the agent alone: the admin trims in the guest.
		r.askGuest(ctx)
	}
	switch o.Mode {
	case Trim:
		if guest, err = r.trim(ctx); err != nil {
			return nil, err
		}
		if after, err = r.snapshot(ctx); err != nil {
			return nil, err
		}
	case Wait:
		if after, window, runErr = r.wait(ctx, before); after == nil {
			return nil, runErr
		}
	}
	r.assemble(before, after, guest, window)
	switch {
	case !v.Running:
		r.rep.Notes = append(r.rep.Notes, fmt.Sprintf("VM %d is not running: no counters; allocation as the storage reports it", v.VMID))
		return r.rep, exitcode.Unreachablef("VM %d is not running", v.VMID)
	case runErr != nil:
		return r.rep, runErr
	case r.rep.Failed():
		return r.rep, exitcode.ErrProblem
	}
	return r.rep, nil
}

// run is one invocation's state.
type run struct {
	n   node.Node
	v   *vm.VM
	ts  []*Target
	sel []*vm.Disk
	// seen is the guest agent's view of the disks by id, agentErr why it
	// said nothing (askGuest, or the trim's own guest-get-fsinfo).
	seen     map[string]guestdisk.Seen
	agentErr error
	o        Options
	newMeter func() Meter
	rep      *Report
}

// snapshot reads the counters (when running) and every allocation.
func (r *run) snapshot(ctx context.Context) (*Snapshot, error) {
	s := &Snapshot{Alloc: map[string]alloc.Result{}}
	if r.v.Running && len(r.ts) > 0 {
		smp, err := counters(r.n, r.v, r.ts).Take(ctx)
		if err != nil {
			return nil, vm.QMPError(r.v.VMID, err)
		}
		s = snapshotOf(smp)
		if r.rep.HistogramsLeft == nil {
			r.rep.HistogramsLeft = latency.LeftoversOf(r.v.VMID, r.v.Pid, r.v.QMPSocket(), smp.Stats)
		}
	}
	return s, measureAlloc(ctx, r.newMeter(), r.v.VMID, r.ts, s)
}

// trim asks the guest agent for its filesystems (which also proves it
// answers, within the node's timeout, before anything is trimmed), then
// for guest-fstrim, and places what it trimmed on disks.
func (r *run) trim(ctx context.Context) (*GuestTrim, error) {
	v := r.v
	if !guestdisk.AgentEnabled(v.Config.Main["agent"]) {
		return nil, exitcode.Unreachablef("VM %d has no guest agent configured (agent: 1): use --wait and run fstrim in the guest instead", v.VMID)
	}
	agent := qmp.Agent{Path: v.QGASocket(), Timeout: r.n.Timeout}
	if _, err := os.Stat(agent.Path); err != nil {
		return nil, exitcode.Unreachablef("VM %d: no guest agent socket at %s (agent: 1 needs a VM restart to add it)", v.VMID, agent.Path)
	}
	fsinfo, err := agent.FsInfo(ctx)
	if err != nil {
		var ae *qmp.AgentError
		if !errors.As(err, &ae) || ae.Class != "CommandNotFound" && !strings.Contains(ae.Desc, "disabled") {
			return nil, exitcode.Unreachablef("VM %d: %v", v.VMID, err)
		}
		fsinfo = nil // an old or restricted agent: trims cannot be placed on disks
		r.agentErr = fmt.Errorf("guest-get-fsinfo: %w", err)
	}
	var pci map[string]string
	if len(fsinfo) > 0 {
		a, err := v.Ask(ctx, r.n.Timeout, vm.Query{Need: vm.NeedPCI})
		if err != nil {
			return nil, vm.QMPError(v.VMID, err)
		}
		pci = a.PCI
	}
	r.placeGuest(ctx, agent, fsinfo, pci)
	tctx, cancel := context.WithTimeout(ctx, r.o.TrimTimeout)
	defer cancel()
	done := func() {}
	if r.o.OnTrim != nil {
		done = r.o.OnTrim(r.o.TrimTimeout)
	}
	start := time.Now()
	res, err := agent.Fstrim(tctx, 0)
	done()
	if err != nil {
		return nil, exitcode.Unreachablef("VM %d: %v", v.VMID, err)
	}
	w := units.Round(time.Since(start).Seconds(), 3)
	r.rep.WindowSeconds = &w
	g := Attribute(res, fsinfo, pci, qemuserver.SCSIHW(v.Config.Main))
	r.rep.GuestFstrim = g.Paths
	if !g.Mapped {
		r.rep.Notes = append(r.rep.Notes, "the guest's filesystems could not be placed on disks (guest-get-fsinfo or query-pci gave nothing): guest figures are per filesystem only")
	}
	return &g, nil
}

// wait watches the window on the shared sampler; its last sample, at the
// window's end, is the reading after. When QEMU stops answering, the
// counters end at the last sample taken, the allocation is still measured,
// and the error says where the window was cut (exit 3).
func (r *run) wait(ctx context.Context, before *Snapshot) (*Snapshot, *Sampling, error) {
	window, iv := r.o.Wait, r.o.Interval
	w := window.Seconds()
	r.rep.WindowSeconds = &w
	ser, err := watch(ctx, *counters(r.n, r.v, r.ts), window, iv, before, r.ts, r.o.OnSample)
	last := before
	if k := len(ser.Samples); k > 0 {
		last = snapshotOf(ser.Samples[k-1])
	}
	cut := ""
	switch {
	case ctx.Err() != nil:
		cut = "interrupted"
	case err != nil:
		cut = r.v.WhyGone(context.WithoutCancel(ctx), r.n, err)
	case last.At.Sub(before.At) < window-iv/2:
		cut = "QMP did not answer at the end of the window: the socket stayed busy, or QEMU is stopped"
	}
	after := &Snapshot{At: last.At, Dev: last.Dev, Nodes: last.Nodes, Alloc: map[string]alloc.Result{}}
	smp := sampling(before.At, ser.Samples, ser.Missed, iv, cut)
	r.rep.Sampling = smp
	if aerr := measureAlloc(context.WithoutCancel(ctx), r.newMeter(), r.v.VMID, r.ts, after); aerr != nil {
		return nil, smp, aerr
	}
	if cut != "" {
		return after, smp, exitcode.Unreachablef("VM %d: QEMU stopped answering %.1f s into the %s window (%s): the report shows what was measured until then",
			r.v.VMID, smp.CoveredSeconds, window, cut)
	}
	return after, smp, nil
}

// assemble builds each disk's report from the snapshots.
func (r *run) assemble(before, after *Snapshot, guest *GuestTrim, window *Sampling) {
	for _, t := range r.ts {
		j := t.View
		snap := before
		if after != nil {
			snap = after
		}
		j.Allocation = snap.Alloc[t.Disk.ID]
		if r.v.Running {
			j.SinceStart = sinceStart(t, snap)
		}
		j.Warnings = Warnings(r.v.VMID, r.v.Running, t, j)
		r.guestView(&j, before.Alloc[t.Disk.ID])
		if after != nil {
			j.Result = result(r.v.VMID, t, r.o.Mode, before, after, guest, r.rep.WindowSeconds, window)
		}
		r.rep.Disks = append(r.rep.Disks, j)
	}
}

func sinceStart(t *Target, s *Snapshot) *Counters {
	dev := s.Dev[t.Disk.ID]
	c := &Counters{ProtocolNode: t.Node, GuestSentOps: dev.UnmapOps, GuestSentBytes: dev.UnmapBytes, DeviceCounts: t.Drive.Bus != "virtio"}
	if n, ok := s.Nodes[t.Node]; ok && t.Node != "" {
		c.StorageAcceptedOps, c.StorageAcceptedBytes, c.StorageFailedOps = n.DiscardNbOK, n.DiscardBytesOK, n.DiscardNbFailed
	}
	return c
}

// result measures one disk's trim or window and judges it.
func result(vmid int, t *Target, mode Mode, before, after *Snapshot, guest *GuestTrim, windowSeconds *float64, window *Sampling) *Result {
	id := t.Disk.ID
	r := &Result{}
	db, da := before.Dev[id], after.Dev[id]
	r.QEMUReceivedOps, r.QEMUReceivedBytes = da.UnmapOps-db.UnmapOps, da.UnmapBytes-db.UnmapBytes
	if t.Node != "" {
		nb, na := before.Nodes[t.Node], after.Nodes[t.Node]
		r.StorageAcceptedOps, r.StorageAcceptedBytes = na.DiscardNbOK-nb.DiscardNbOK, na.DiscardBytesOK-nb.DiscardBytesOK
		r.StorageFailedOps = na.DiscardNbFailed - nb.DiscardNbFailed
	}
	ab, aa := before.Alloc[id], after.Alloc[id]
	r.AllocatedBeforeBytes, r.AllocatedAfterBytes = ab.AllocatedBytes, aa.AllocatedBytes
	r.ResolutionBytes = aa.ResolutionBytes
	if ab.AllocatedBytes != nil && aa.AllocatedBytes != nil {
		d := *ab.AllocatedBytes - *aa.AllocatedBytes
		r.ReturnedBytes = &d
	}
	in := Input{
		VMID: vmid, DiskID: id, Bus: t.Drive.Bus, ConfiguredDiscard: t.View.Discard.Configured,
		StorageID: t.View.Storage, StorageType: t.View.StorageType, Thin: t.View.Thin, Mode: mode,
		DevOps: r.QEMUReceivedOps, DevBytes: r.QEMUReceivedBytes, DevCounts: t.Drive.Bus != "virtio",
		OKOps: r.StorageAcceptedOps, OKBytes: r.StorageAcceptedBytes, FailedOps: r.StorageFailedOps,
		Unmeasured: aa.Unmeasured, Before: ab.AllocatedBytes, After: aa.AllocatedBytes, Resolution: aa.ResolutionBytes,
		Snapshots: aa.Snapshots, SnapshotHeldBytes: aa.SnapshotBytes,
	}
	if t.Disk.Running != nil {
		in.RunningDiscard = t.Disk.Running.Discard
	}
	if zvolReserved(t.Storage) {
		in.Reserved, in.Dataset = true, zvolDataset(t.Storage, t.Drive.VolName())
	}
	fix := t.Drive.Clone()
	fix.Opts["discard"] = "on"
	in.FixDrive = fix.String()
	if ab.Pool != nil && aa.Pool != nil {
		in.PoolName, in.PoolDiscards, in.ChunkBytes = aa.Pool.Name, aa.Pool.Discards, aa.Pool.ChunkSizeBytes
		in.PoolBefore, in.PoolAfter, in.PoolResolution = ab.Pool.AllocatedBytes, aa.Pool.AllocatedBytes, aa.Pool.ResolutionBytes
		r.PoolBeforeBytes, r.PoolAfterBytes = ab.Pool.AllocatedBytes, aa.Pool.AllocatedBytes
		if in.PoolBefore != nil && in.PoolAfter != nil {
			d := *in.PoolBefore - *in.PoolAfter
			r.PoolReturnedBytes = &d
		}
	}
	if guest != nil {
		in.GuestMapped = guest.Mapped
		in.GuestShared = guest.Shared[id]
		if n, ok := guest.PerDisk[id]; ok {
			in.GuestTrimmed = &n
			r.GuestTrimmedBytes = &n
		}
	}
	if window != nil {
		in.WindowSeconds, in.CoveredSeconds, in.Gaps, in.Missed, in.Cut = *windowSeconds, window.CoveredSeconds, window.Gaps, window.Missed, window.Cut
		if len(window.Gaps) > 0 || window.Missed > 0 || window.Cut != "" {
			c := window.CoveredSeconds
			r.StandsOnSeconds = &c
		}
	}
	r.Verdict, r.Reasons = Judge(in)
	if r.Reasons == nil {
		r.Reasons = []Reason{}
	}
	return r
}

// AgentTimeout bounds the guest agent's answer of the status (its
// filesystems, for the reclaimable figure): an agent that is not running
// in the guest must not cost the look the whole --timeout.
const AgentTimeout = time.Second

// askGuest asks the guest agent once for the disks' filesystems (disk's
// Agent layer: not asked without agent: 1 or of a stopped VM).
func (r *run) askGuest(ctx context.Context) {
	set := disk.Of(r.v, r.sel)
	set.Fill(ctx, r.n, disk.Agent, disk.Options{AgentTimeout: AgentTimeout})
	if r.agentErr = set.AgentErr; r.agentErr != nil {
		return
	}
	r.seen = map[string]guestdisk.Seen{}
	for _, d := range set.Disks {
		if d.Guest.Seen != nil {
			r.seen[d.ID] = *d.Guest.Seen
		}
	}
}

// placeGuest places the trim's guest-get-fsinfo on the disks; where a
// filesystem is on a partition, guest-get-disks lists the disk's
// partitions too (an agent without it leaves them unknown).
func (r *run) placeGuest(ctx context.Context, agent qmp.Agent, fsinfo []qmp.GuestFilesystem, pci map[string]string) {
	if r.agentErr != nil {
		return
	}
	scsihw := qemuserver.SCSIHW(r.v.Config.Main)
	r.seen = guestdisk.Attribute(nil, fsinfo, pci, scsihw)
	for _, s := range r.seen {
		if slices.ContainsFunc(s.Filesystems, func(f guestdisk.Filesystem) bool { return f.Layout == guestdisk.OnPartition }) {
			if disks, err := agent.Disks(ctx); err == nil {
				r.seen = guestdisk.Attribute(disks, fsinfo, pci, scsihw)
			}
			return
		}
	}
}

// guestView sets the disk's guest filesystems and, on a thin volume, what
// a trim would give back from the allocation a (the status's, or before the
// trim); --wait leaves both unknown.
func (r *run) guestView(j *Disk, a alloc.Result) {
	if r.o.Mode == Wait {
		return
	}
	s, ok := r.seen[j.ID]
	if r.seen != nil {
		j.GuestFilesystems = append([]guestdisk.Filesystem{}, s.Filesystems...)
	}
	if !j.Thin {
		return
	}
	in := ReclaimInput{VMID: r.v.VMID, Agent: guestdisk.AgentEnabled(r.v.Config.Main["agent"]), AgentErr: r.agentErr, Alloc: a, Discard: j.Discard.Effective()}
	if r.seen == nil && r.agentErr == nil && in.Agent {
		in.AgentErr = errors.New("not asked")
	}
	if ok {
		in.Seen = &s
	}
	for i, w := range j.Warnings {
		if w.Code == CodeDiscardIgnore || w.Code == CodeDiscardPending {
			in.DiscardWarn = &j.Warnings[i]
			break
		}
	}
	j.Reclaimable = JudgeReclaim(in)
}
