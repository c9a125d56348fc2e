package limit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/units"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// qmTimeout bounds qm set at least: it takes the VM's config lock and may
// wait behind a backup or another pvedaemon worker.
const qmTimeout = 60 * time.Second

// Request says what Run does besides showing the limits.
type Request struct {
	// Change, when set, is applied to the first disk: live through QMP, or
	// through qm set when Persist. DryRun builds the command and stops.
	Change  *Change
	Persist bool
	DryRun  bool
	// Verify, when not 0, is the window the first disk is measured over
	// (at least MinWindow) before its rate limits are judged.
	Verify time.Duration
	// OnSample is called after each sample of the window.
	OnSample sampler.OnSample
	// Histogram sets a latency histogram on the disk for the --verify
	// window (never replacing one found: package latency) and clears it
	// after: the verification then has p50/p95/p99 over the steady part.
	Histogram bool
}

// Run shows the configured and running limits of disks (those of vm.Select),
// applies req.Change to the first and confirms it, and verifies the first
// over req.Verify. It returns nil results when there is nothing to print
// (bad input, or a change that could not be made); otherwise the results,
// with the error that ends the run if any: exit 1 for an exceeded limit or
// a change QEMU does not report, exit 3 when the VM or its QEMU could not
// be reached.
func Run(ctx context.Context, n node.Node, v *vm.VM, disks []*vm.Disk, req Request) ([]*Result, error) {
	if req.Change != nil {
		if err := changeable(v, disks[0], req); err != nil {
			return nil, err
		}
	} else if req.Verify > 0 && !v.Running {
		return nil, exitcode.Unreachablef("VM %d is not running: nothing to measure", v.VMID)
	}
	running, liveErr := readRunning(ctx, n, v, disks)
	if liveErr != nil && req.Change != nil {
		return nil, vm.QMPError(v.VMID, liveErr)
	}
	var out []*Result
	var skipped []string
	for _, d := range disks {
		if k := d.Kind(); k == qemuserver.KindCDROM || k == qemuserver.KindEmptyCDROM || k == qemuserver.KindTPMState {
			skipped = append(skipped, d.NotListed())
			continue
		}
		res := &Result{VMID: v.VMID, Disk: d.ID, Running: v.Running, Blockdev: v.Blockdev}
		res.Limits = setsFor(d, running[d.ID], v.Running && liveErr == nil && d.Running != nil)
		if !v.Running {
			res.Notes = append(res.Notes, fmt.Sprintf("VM %d is not running: configured limits only", v.VMID))
		}
		out = append(out, res)
	}
	if len(out) == 0 {
		return nil, exitcode.Usagef("limit: VM %d has no disk with limits to show (%s)", v.VMID, strings.Join(skipped, "; "))
	}
	out[0].Notes = append(out[0].Notes, skipped...)
	var final error
	if req.Change != nil {
		if err := Apply(ctx, n, v, disks[0], out[0], running[disks[0].ID], req); err != nil {
			if exitcode.Of(err) != exitcode.Problem {
				return nil, err
			}
			final = err
		}
	}
	if req.Verify > 0 && final == nil {
		final = verify(ctx, n, v, disks[0], out[0], req.Verify, req.OnSample, req.Histogram)
		if out[0].Limits.Running != nil {
			liveErr = nil // read again after the window: the first error is stale
		}
	}
	if liveErr != nil {
		for _, res := range out {
			res.Notes = append(res.Notes, vm.QMPNote(liveErr))
		}
	}
	switch {
	case final != nil:
		return out, final
	case !v.Running && !(req.Change != nil && req.Persist):
		return out, exitcode.Unreachablef("VM %d is not running", v.VMID)
	case liveErr != nil:
		return out, vm.QMPError(v.VMID, liveErr)
	}
	return out, nil
}

// changeable refuses a change the disk cannot take, before anything is
// read from QEMU.
func changeable(v *vm.VM, d *vm.Disk, req Request) error {
	switch {
	case d.Drive == nil:
		return exitcode.Usagef("limit: %s is not in VM %d's config", d.ID, v.VMID)
	case d.Kind() == qemuserver.KindTPMState:
		return exitcode.Usagef("limit: %s is %s: QEMU has no throttle node for it", d.ID, d.Kind().Describe())
	case d.Drive.IsCDROM() || d.Drive.IsNone():
		return exitcode.Usagef("limit: %s is a CD-ROM drive", d.ID)
	case d.Drive.Bool("scsiblock"):
		return exitcode.Usagef("limit: %s is passed through with scsiblock=1: QEMU has no throttle node for it", d.ID)
	case req.Persist && (d.PendingDrive != nil || d.PendingDelete):
		return exitcode.Usagef("limit: %s has a pending change in [PENDING]; qm set would replace it: apply it (restart) or revert it first (qm pending %d)", d.ID, v.VMID)
	case !v.Running && !req.Persist:
		base, err := configured(d)
		if err != nil {
			return err
		}
		if err := Validate(Merge(base, *req.Change)); err != nil {
			return err
		}
		return exitcode.Unreachablef("VM %d is not running: nothing to apply live. Use --persist to change the config with qm set (the limits then apply at the next start)", v.VMID)
	}
	return nil
}

// configured parses the limits of the disk's config line as numbers.
func configured(d *vm.Disk) (Set, error) {
	s, err := FromOptions(d.Drive.Opts)
	if err != nil {
		return nil, exitcode.Usagef("limit: %s's config line has %v: Proxmox would not take it either; fix the config first (nothing was changed)", d.ID, err)
	}
	return s, nil
}

// throttled reports whether QEMU has throttling limit can show for the
// disk: what vm.Throttled decides, less what limit never touches (a disk
// passed through with scsiblock, a CD-ROM drive).
func throttled(v *vm.VM, d *vm.Disk) bool {
	return v.Throttled(d) && !(d.Drive != nil && (d.Drive.Bool("scsiblock") || d.Drive.IsCDROM()))
}

// readRunning reads the running limits of every throttled disk of disks in
// one exchange (vm.Ask: a briefly busy socket is retried); a throttled disk
// QEMU reports none for (no throttle group, no medium) is an error.
func readRunning(ctx context.Context, n node.Node, v *vm.VM, disks []*vm.Disk) (map[string]qemuserver.Limits, error) {
	running := map[string]qemuserver.Limits{}
	if !v.Running {
		return running, nil
	}
	ids := []string{}
	for _, d := range disks {
		if throttled(v, d) {
			ids = append(ids, d.ID)
		}
	}
	if len(ids) == 0 {
		return running, nil
	}
	a, err := v.Ask(ctx, n.Timeout, vm.Query{Need: vm.NeedLimits, LimitDisks: ids})
	if err != nil {
		return running, err
	}
	for _, id := range ids {
		l, ok := a.Limits[id]
		if !ok {
			return running, fmt.Errorf("QEMU reports no running limits for %s (%s)", id, where(v, id))
		}
		running[id] = l
	}
	return running, nil
}

// where names what holds a disk's running limits in QEMU.
func where(v *vm.VM, disk string) string {
	if v.Blockdev {
		return "no throttle group " + qmp.ThrottleGroupID(disk)
	}
	return "no drive-" + disk + " with a medium in query-block"
}

// readLimits reads one disk's running limits (readRunning).
func readLimits(ctx context.Context, n node.Node, v *vm.VM, disk string) (qemuserver.Limits, error) {
	d := v.Disk(disk)
	if d == nil {
		return nil, fmt.Errorf("%w: %s", qmp.ErrNoDevice, disk)
	}
	run, err := readRunning(ctx, n, v, []*vm.Disk{d})
	return run[disk], err
}

// setsFor is a disk's configured limits beside the running ones, and where
// they differ (haveRunning false: the running limits are unknown).
func setsFor(d *vm.Disk, run qemuserver.Limits, haveRunning bool) Sets {
	s := Sets{Configured: Set{}, Differs: []string{}}
	var cfg qemuserver.Limits
	if d.Drive != nil {
		cfg = d.Drive.Limits()
		s.Configured = FromQEMU(cfg)
	}
	if !haveRunning {
		return s
	}
	s.Running = FromQEMU(run)
	s.RunningQEMU = map[string]int64(run.Normal())
	c, r := cfg.Normal(), run.Normal()
	for _, k := range qemuserver.LimitKeys {
		if d := differs(k, c[k.QEMU], r[k.QEMU]); d != "" {
			s.Differs = append(s.Differs, d)
		}
	}
	return s
}

// differs says how a configured and a running value differ ("" when they
// do not).
func differs(k qemuserver.LimitKey, cfg, run int64) string {
	if cfg == run {
		return ""
	}
	if cfg == 0 {
		return fmt.Sprintf("%s: running %s but not in the config (set live, not saved: lost at the next restart)", k.Proxmox, FormatQEMU(k, run))
	}
	if run == 0 {
		return fmt.Sprintf("%s: configured %s but not in effect (config changed without reaching the VM, e.g. restored from a backup or edited by hand)", k.Proxmox, FormatQEMU(k, cfg))
	}
	return fmt.Sprintf("%s: configured %s, running %s", k.Proxmox, FormatQEMU(k, cfg), FormatQEMU(k, run))
}

// FormatValue prints a value of key k in Proxmox units: "20 MiB/s",
// "500 ops/s", "5 s".
func FormatValue(k qemuserver.LimitKey, v float64) string {
	switch {
	case isMiB(k):
		return units.Number(v) + " MiB/s"
	case isLength(k):
		return units.Number(v) + " s"
	}
	return units.Number(v) + " ops/s"
}

// FormatQEMU prints a value QEMU reports for k in Proxmox units ("-" for 0).
func FormatQEMU(k qemuserver.LimitKey, v int64) string {
	if v == 0 {
		return "-"
	}
	return FormatValue(k, float64(v)/k.Scale)
}

// Apply makes req.Change on disk d and confirms it in QEMU: live, the limits
// running before (runBefore) with the change merged in, sent as qemu-server
// sends them (LiveCommand); with req.Persist, the config line's limits with
// the change merged in, saved with qm set (PersistArgv), which Proxmox also
// applies live. Every value was parsed as a number and the whole set is
// validated before anything is sent. res gets the command, the limits
// before and after (read back from QEMU), and notes. req.Change must be set.
func Apply(ctx context.Context, n node.Node, v *vm.VM, d *vm.Disk, res *Result, runBefore qemuserver.Limits, req Request) error {
	if req.Persist {
		return persist(ctx, n, v, d, res, req)
	}
	before := FromQEMU(runBefore)
	want := Merge(before, *req.Change)
	if err := Validate(want); err != nil {
		return err
	}
	m, args, err := LiveCommand(d.ID, v.Blockdev, want)
	if err != nil {
		return err
	}
	res.Apply = &Applied{Method: m, Command: CommandJSON(m, args), DryRun: req.DryRun, Before: before}
	if runBefore.Equal(want.QEMU()) {
		unchanged(res, before, fmt.Sprintf("%s already runs with these limits: nothing was sent (a live rewrite would restart the throttle's accounting for no change)", d.ID))
		return nil
	}
	if req.DryRun {
		return nil
	}
	if err := v.SetLimits(ctx, n.Timeout, d.ID, want.QEMU().Full()); err != nil {
		var qe *qmp.Error
		if errors.As(err, &qe) {
			return exitcode.Unreachablef("VM %d: QEMU refused the limits: %s %s: %v (nothing was changed)", v.VMID, m, d.ID, err)
		}
		return vm.QMPError(v.VMID, err)
	}
	res.Notes = append(res.Notes, fmt.Sprintf("applied live only: the config of VM %d was not changed, these limits disappear at the next restart (use --persist to save them)", v.VMID))
	return readBack(ctx, n, v, d, res, want.QEMU(), "QEMU accepted "+string(m))
}

// persist saves the change with qm set --digest: qm refuses the line when
// the config is no longer the file it was built from (another admin's qm set
// landed in between), so that edit is never undone. The config is then read
// again and the line built from it, once; a second refusal is exit 3.
func persist(ctx context.Context, n node.Node, v *vm.VM, d *vm.Disk, res *Result, req Request) error {
	err := saveLine(ctx, n, v, d, res, req)
	if !errors.Is(err, errConfigChanged) {
		return err
	}
	race := fmt.Sprintf("limit: VM %d's config changed between reading it and saving (qm set --digest: checksum mismatch; another admin's edit?), nothing was saved", v.VMID)
	v2, err := vm.Load(ctx, n, v.VMID)
	if err != nil {
		return exitcode.Unreachablef("%s; reading it again: %v", race, err)
	}
	d2 := v2.Disk(d.ID)
	if d2 == nil || d2.Drive == nil {
		return exitcode.Unreachablef("%s; read again, it has no %s any more", race, d.ID)
	}
	if err := changeable(v2, d2, req); err != nil {
		return exitcode.Wrap(exitcode.Of(err), race+"; read again", err)
	}
	if err := saveLine(ctx, n, v2, d2, res, req); err != nil {
		if errors.Is(err, errConfigChanged) {
			return exitcode.Unreachablef("%s, twice: another admin or tool is changing it right now; try again", race)
		}
		return err
	}
	res.Notes = append(res.Notes, fmt.Sprintf("VM %d's config changed between reading it and saving (qm set refused the first line: checksum mismatch): it was read again and the limits saved on top of the other change", v.VMID))
	return nil
}

// errConfigChanged is qm set refusing a --digest that no longer matches:
// nothing was saved.
var errConfigChanged = errors.New("qm set: the config changed since it was read")

// saveLine builds the disk's line from v's config with the change merged
// in and runs qm set with that config's digest, then confirms in the saved
// config and, running, in QEMU. qm refusing the digest is errConfigChanged
// (nothing was saved).
func saveLine(ctx context.Context, n node.Node, v *vm.VM, d *vm.Disk, res *Result, req Request) error {
	base, err := configured(d)
	if err != nil {
		return err
	}
	want := Merge(base, *req.Change)
	if err := Validate(want); err != nil {
		return err
	}
	argv, err := PersistArgv(v.VMID, d.Drive, want, v.Config.Digest)
	if err != nil {
		return err
	}
	a := &Applied{Method: QMSet, Command: strings.Join(argv, " "), DryRun: req.DryRun, Before: FromQEMU(d.Drive.Limits())}
	res.Apply = a
	if d.Drive.Limits().Equal(want.QEMU()) && (!v.Running || res.Limits.Running != nil && res.Limits.Running.QEMU().Equal(want.QEMU())) {
		what := "the config"
		if v.Running {
			what = "the config and the running VM"
		}
		unchanged(res, a.Before, fmt.Sprintf("%s of VM %d already have these limits for %s: qm set was not run", what, v.VMID, d.ID))
		return nil
	}
	if req.DryRun {
		return nil
	}
	out, err := n.Runner.RunTimeout(ctx, max(n.Timeout, qmTimeout), argv...)
	a.Output = strings.TrimSpace(string(out))
	if err != nil {
		var ce *node.CommandError
		if errors.As(err, &ce) && qemuserver.DigestMismatch(ce.Stderr) {
			return errConfigChanged
		}
		return exitcode.Unreachablef("limit: %v (nothing confirmed; check 'qm config %d')", err, v.VMID)
	}
	// The config as Proxmox saved it.
	v2, err := vm.Load(ctx, n, v.VMID)
	if err != nil {
		return exitcode.Unreachablef("limit: qm set ran, but the config cannot be read back: %v", err)
	}
	d2 := v2.Disk(d.ID)
	if d2 == nil || d2.Drive == nil || !d2.Drive.Limits().Equal(want.QEMU()) {
		return exitcode.Problemf("limit: qm set ran, but %s's config line does not carry the new limits", d.ID)
	}
	a.Persisted = true
	res.Limits.Configured = FromQEMU(d2.Drive.Limits())
	if !v.Running {
		a.Confirmed = true
		res.Notes = append(res.Notes, fmt.Sprintf("VM %d is stopped: the config is changed, the limits apply at the next start", v.VMID))
		return nil
	}
	return readBack(ctx, n, v, d, res, want.QEMU(), "qm set saved the config")
}

// unchanged records a change that asks for what is already there: nothing
// is sent or saved, and the result says so (Applied.Unchanged).
func unchanged(res *Result, before Set, note string) {
	a := res.Apply
	a.Unchanged, a.After, a.Confirmed = true, before, true
	res.Notes = append(res.Notes, note)
}

// readBack reads the disk's running limits again and compares them with
// want: only what QEMU reports is confirmed.
func readBack(ctx context.Context, n node.Node, v *vm.VM, d *vm.Disk, res *Result, want qemuserver.Limits, what string) error {
	run, err := readLimits(ctx, n, v, d.ID)
	if err != nil {
		return exitcode.Unreachablef("%s, but the limits cannot be read back: %s", what, vm.QMPError(v.VMID, err))
	}
	res.Apply.After = FromQEMU(run)
	res.Limits = setsFor(d, run, true)
	if v2, err := vm.Load(ctx, n, v.VMID); err == nil && v2.Disk(d.ID) != nil && v2.Disk(d.ID).Drive != nil {
		res.Limits = setsFor(v2.Disk(d.ID), run, true)
	}
	if !run.Equal(want) {
		return exitcode.Problemf("limit: %s, but QEMU runs %s with {%s}, not {%s}", what, d.ID, run.Normal(), want.Normal())
	}
	res.Apply.Confirmed = true
	return nil
}

// Verify measures disk d over window and judges each rate limit running
// on it (res.Limits.Running, read before the window; when that read failed,
// the limits read after it). res gets the verification and notes: missed
// samples, gaps and what the verdicts stand on, limits that changed during
// the window. An exceeded limit is exitcode.ErrProblem. A window cut short
// (QEMU stopped answering or exited, Ctrl-C) keeps what was measured until
// then, with the cut, and is exit 3 whatever its verdicts.
func Verify(ctx context.Context, n node.Node, v *vm.VM, d *vm.Disk, res *Result, window time.Duration, onSample sampler.OnSample) error {
	return verify(ctx, n, v, d, res, window, onSample, false)
}

func verify(ctx context.Context, n node.Node, v *vm.VM, d *vm.Disk, res *Result, window time.Duration, onSample sampler.OnSample, histogram bool) (err error) {
	hist := latency.Start(histogram, n.Timeout)
	defer func() {
		if rerr := hist.End(ctx); rerr != nil {
			res.Notes = append(res.Notes, rerr.Error())
		}
	}()
	m, err := measure(ctx, n, v, d.ID, window, onSample, hist)
	if len(m.Samples) > 0 {
		res.HistogramsLeft = hist.Leftovers(v.VMID, v.Pid, v.QMPSocket(), m.Samples[0].Stats)
	}
	if hist != nil {
		for _, note := range hist.Notes() {
			res.Histogram = &note
		}
	}
	var cut *Cut
	switch {
	case ctx.Err() != nil:
		cut = &Cut{Why: CutInterrupted}
	case errors.Is(err, sampler.ErrTooFewSamples):
		// A socket busy (or QEMU silent) to the end: the gaps say it.
	case err != nil:
		cut = &Cut{Why: v.WhyGone(context.WithoutCancel(ctx), n, err)}
	}
	if cut != nil {
		if k := len(m.Samples); k > 0 {
			cut.AtS = m.at(m.Samples[k-1].Time)
		}
	}
	return judgeWindow(ctx, n, v, d, res, m, cut)
}

// CutInterrupted is Cut.Why for a window ended by Ctrl-C (the context).
const CutInterrupted = "interrupted"

func judgeWindow(ctx context.Context, n node.Node, v *vm.VM, d *vm.Disk, res *Result, m *Measurement, cut *Cut) error {
	gaps := m.Gaps()
	vj := &Verification{
		WindowS: m.Window.Seconds(), SkippedS: Skip.Seconds(),
		SampledS: m.Sampled(gaps), Samples: len(m.Samples), Missed: m.Missed, Gaps: gaps,
		Verdicts: []Judgement{}, Cut: cut,
	}
	res.Verify = vj
	r, err := m.Steady()
	if r.Samples >= 2 { // rates, if over a steady part too short for a verdict
		vj.SteadyS = units.Round(r.Seconds(), 3)
		mm := measured(r)
		vj.Measured = &mm
		vj.Latency = m.steadyPercentiles(r)
	}
	cutErr := func() error {
		if cut.Why == CutInterrupted {
			return exitcode.Unreachablef("interrupted %.1f s into the %s window: the report shows what was measured until then", cut.AtS, m.Window)
		}
		return exitcode.Unreachablef("VM %d: sampling stopped %.1f s into the %s window (%s): the report shows what was measured until then", v.VMID, cut.AtS, m.Window, cut.Why)
	}
	if err != nil {
		if cut != nil {
			return cutErr()
		}
		return exitcode.Unreachablef("VM %d: not enough samples for a verdict: %v (%d taken, %d missed: QMP socket busy or QEMU not answering)", v.VMID, err, len(m.Samples), m.Missed)
	}
	judged := qemuserver.Limits(res.Limits.RunningQEMU)
	switch {
	case cut != nil && res.Limits.Running == nil:
		// QEMU stopped answering: the limits cannot be read after either.
		res.Notes = append(res.Notes, fmt.Sprintf("the running limits of %s could not be read before the window, and QEMU stopped answering: no verdicts (rates measured anyway)", d.ID))
		return cutErr()
	case cut != nil:
	case res.Limits.Running == nil:
		after, aerr := readLimits(ctx, n, v, d.ID)
		if aerr != nil {
			return exitcode.Unreachablef("VM %d: the running limits of %s could not be read before the window or after it: %s", v.VMID, d.ID, vm.QMPError(v.VMID, aerr))
		}
		judged = after
		res.Limits = setsFor(d, after, true)
		res.Notes = append(res.Notes, fmt.Sprintf("the running limits of %s could not be read before the window: the verdicts judge those read after it", d.ID))
	default:
		if after, aerr := readLimits(ctx, n, v, d.ID); aerr == nil && !after.Equal(judged) {
			vj.ChangedTo = FromQEMU(after)
			res.Notes = append(res.Notes, fmt.Sprintf("the running limits of %s changed during the window (now {%s}): someone else (qm set, another tool) changed them; the verdicts judge the limits read at the start", d.ID, after.Normal()))
		}
	}
	vj.Verdicts = Judge(judged, r)
	if len(vj.Verdicts) == 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%s runs without limits: nothing to verify (rates measured anyway)", d.ID))
	}
	if s := standsOn(m, vj); s != "" {
		for i := range vj.Verdicts {
			vj.Verdicts[i].Reason += "; " + s
		}
	}
	if cut != nil {
		return cutErr()
	}
	for _, vd := range vj.Verdicts {
		if vd.Verdict == Exceeded {
			return exitcode.ErrProblem
		}
	}
	return nil
}

// standsOn says how much of the steady part a verdict stands on when gaps
// cut into it ("" when none did).
func standsOn(m *Measurement, vj *Verification) string {
	if vj.SampledS >= m.SteadySeconds() {
		return ""
	}
	var spans []string
	for _, g := range vj.Gaps {
		if g.ToS > Skip.Seconds() {
			spans = append(spans, fmt.Sprintf("%.1f s to %.1f s", g.FromS, g.ToS))
		}
	}
	return fmt.Sprintf("it stands on %.1f s of the %.1f s steady part (no sample from %s)", vj.SampledS, m.SteadySeconds(), strings.Join(spans, ", "))
}

func measured(r sampler.Rates) Measured {
	return Measured{
		ReadBps: units.Round(r.ReadBytesPerSec, 0), WriteBps: units.Round(r.WriteBytesPerSec, 0),
		ReadIOPS: units.Round(r.ReadOpsPerSec, 1), WriteIOPS: units.Round(r.WriteOpsPerSec, 1),
		ReadLatencyMs: units.Round(units.Ms(r.ReadLatency), 2), WriteLatencyMs: units.Round(units.Ms(r.WriteLatency), 2),
		ReadQueueDepth: units.Round(r.ReadQueueDepth, 2), WriteQueueDepth: units.Round(r.WriteQueueDepth, 2),
	}
}
