package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/units"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

func init() { commands = append(commands, limitCommand()) }

const (
	limitDefaultWindow = 10 * time.Second
	// limitSkip is the start of the window left out of the verdict: a queue
	// that starts against a limit is admitted in a burst and then stalls
	// until the bucket has leaked. Measured with qemu-io load (sampler and
	// limit tests): a 48 x 1 MiB queue against 20 MiB/s under -blockdev
	// runs 0 B/s until 2.6 s; a limit tightened under a running queue
	// is steady within 0.5 s. 3 s covers both with margin.
	limitSkip = 3 * time.Second
	// limitMinSteady is the shortest steady part a verdict is given on.
	limitMinSteady = 2 * time.Second
	// Verdict thresholds, from the issue: holds when at least 80 % of the
	// limit (binding) and at most 5 % above it.
	limitBindingRatio = 0.80
	limitExceedRatio  = 1.05
)

func limitFlagName(proxmoxKey string) string { return strings.ReplaceAll(proxmoxKey, "_", "-") }

func limitCommand() *cli.Command {
	flags := []cli.Flag{}
	for _, k := range qemuserver.LimitKeys {
		unit := "ops/s"
		switch {
		case k.Scale == qemuserver.MiB:
			unit = "MiB/s (1 MiB = 1048576 bytes), fractions allowed"
		case strings.HasSuffix(k.Proxmox, "_length"):
			unit = "seconds the burst may last (needs its _max)"
		case strings.HasSuffix(k.Proxmox, "_max"):
			unit = "ops/s burst (needs its rate)"
		}
		remove := "; 0 removes it"
		if strings.HasSuffix(k.Proxmox, "_length") {
			remove = "; at least 1 (the default)"
		}
		flags = append(flags, &cli.StringFlag{Name: limitFlagName(k.Proxmox), Usage: "set " + k.Proxmox + ": " + unit + remove, Category: "LIMITS (Proxmox keys and units)"})
	}
	flags = append(flags,
		&cli.BoolFlag{Name: "clear", Usage: "remove every limit of the disk (flags given with it are then the only limits)"},
		&cli.BoolFlag{Name: "persist", Usage: "run 'qm set' instead: Proxmox applies the change live and saves it in the config"},
		&cli.BoolFlag{Name: "dry-run", Usage: "print the QMP command or the qm set line and change nothing"},
		&cli.BoolFlag{Name: "verify", Usage: "measure the disk's throughput (query-blockstats) and give a verdict per limit"},
		&cli.DurationFlag{Name: "for", Value: limitDefaultWindow, Usage: "measurement window for --verify (at least 5s; the first 3s are not judged)"},
	)
	return &cli.Command{
		Name:      "limit",
		Usage:     "show the I/O limits a disk runs with, set them live, and prove them by measurement",
		ArgsUsage: "VMID [DISK]",
		Description: `Show (no limit flags): for each disk, the limits in the config (Proxmox keys:
mbps* in MiB/s, iops* in ops/s, *_max bursts, *_max_length in seconds) and the
limits the running QEMU applies right now (throttle group throttle-drive-DISK
under -blockdev, the drive's own throttling under -drive), in the same units and
in bytes/s. A limit set live but never saved, or a config that never reached the
running VM (restored from a backup, edited by hand), is marked DIFFERS.

Apply (DISK and at least one limit flag, or --clear): checks the new set as
Proxmox does (mbps with mbps_rd/mbps_wr, iops with iops_rd/iops_wr, a *_max
without its rate, a *_max_length without its *_max, negative or non-numeric
values) and as QEMU does (a *_max below its rate) before touching anything;
then applies it to the running QEMU exactly as qemu-server does (qom-set of all
18 limit fields of throttle-drive-DISK, or block_set_io_throttle on drive-DISK
for machines older than 10.0), reads the limits back from QEMU and prints
before/after. Flags change only the keys they name; the others keep their
running values. The config is NOT changed: the limits disappear when the VM
restarts.

--persist runs 'qm set VMID --DISK <the disk's config line with the new limit
keys>' instead: Proxmox saves the line and applies the limits live itself; the
tool then reads QEMU back to confirm it did. Here flags change the config
line's keys. A disk with a pending change ([PENDING]) is refused: qm set would
replace it. On a stopped VM only --persist works (the limits apply at the next
start). --dry-run prints the QMP command or the qm set line and changes nothing.

--verify samples query-blockstats for the disk at 2 Hz for --for (default 10s),
reconnecting for each sample so the QMP socket stays free for Proxmox, and
judges each rate limit on the steady part of the window (the first 3s are left
out: a queue that starts against a limit is admitted in a burst, then stalls).
Per limit: holds (measured at least 80 % of the limit, so it was binding, and at
most 5 % above it, plus what a configured burst allows), not-binding (the guest
did not push hard enough to prove anything: run a load in the guest), or
exceeded (more than 5 % above the limit: exit 1). It also prints the queue depth
observed (Little's law) and the latency that queue predicts at the limit
(queue depth / limit). A progress line is drawn on stderr when it is a terminal.

EXAMPLES
   pvediskcheck limit 370
   pvediskcheck limit 370 scsi1 --mbps-wr 20 --iops-rd 500
   pvediskcheck limit 370 scsi1 --mbps-wr 20 --iops-rd 500 --persist
   pvediskcheck limit 370 scsi1 --mbps-wr 20 --dry-run
   pvediskcheck limit 370 scsi1 --verify --for 20s
   pvediskcheck limit 370 scsi1 --clear --persist

` + exitcode.Help + `
   Exit 1 also when a limit is exceeded, or when QEMU does not report the limits
   that were just applied. A stopped VM exits 3 (except --persist), so does a
   busy or missing QMP socket. Rejected values exit 2 and change nothing.`,
		Flags:  flags,
		Action: limitAction,
	}
}

// limitJSON is the --json schema of `limit` (README "JSON schemas"): one
// object for a named disk, an array of them when no disk is named.
type limitJSON struct {
	VMID     int              `json:"vmid"`
	Disk     string           `json:"disk"`
	Running  bool             `json:"running"`
	Blockdev bool             `json:"blockdev"`
	Limits   limitSetsJSON    `json:"limits"`
	Apply    *limitApplyJSON  `json:"apply,omitempty"`
	Verify   *limitVerifyJSON `json:"verify,omitempty"`
	Notes    []string         `json:"notes,omitempty"`
}

// limitSetsJSON holds limits by Proxmox key in Proxmox units (MiB/s, ops/s,
// seconds); RunningQEMU is the same running set in QEMU's names and units
// (bytes/s). Running is null when the VM does not run.
type limitSetsJSON struct {
	Configured  map[string]float64 `json:"configured"`
	Running     map[string]float64 `json:"running"`
	RunningQEMU map[string]int64   `json:"running_qemu"`
	Differs     []string           `json:"differs"`
}

type limitApplyJSON struct {
	Method    string             `json:"method"`  // qom-set, block_set_io_throttle, qm set
	Command   string             `json:"command"` // the QMP command (JSON) or the qm argv
	DryRun    bool               `json:"dry_run"`
	Persisted bool               `json:"persisted"`
	Before    map[string]float64 `json:"before"`
	After     map[string]float64 `json:"after"` // read back from QEMU; null when not read
	Confirmed bool               `json:"confirmed"`
	Output    string             `json:"output,omitempty"` // qm's stdout
}

type limitVerifyJSON struct {
	WindowS   float64            `json:"window_s"`
	SkippedS  float64            `json:"skipped_s"` // start of the window not judged
	SteadyS   float64            `json:"steady_s"`  // span the rates cover
	Samples   int                `json:"samples"`
	Missed    int                `json:"missed"` // ticks lost to a busy socket
	Measured  limitMeasuredJSON  `json:"measured"`
	Verdicts  []limitVerdictJSON `json:"verdicts"`
	ChangedTo map[string]float64 `json:"running_changed_to,omitempty"` // limits found at the end when they changed during the window
}

type limitMeasuredJSON struct {
	ReadBps         float64 `json:"read_bps"`
	WriteBps        float64 `json:"write_bps"`
	ReadIOPS        float64 `json:"read_iops"`
	WriteIOPS       float64 `json:"write_iops"`
	ReadLatencyMs   float64 `json:"read_latency_ms"`
	WriteLatencyMs  float64 `json:"write_latency_ms"`
	ReadQueueDepth  float64 `json:"read_queue_depth"`
	WriteQueueDepth float64 `json:"write_queue_depth"`
}

type limitVerdictJSON struct {
	Limit              string   `json:"limit"`    // Proxmox key
	Value              float64  `json:"value"`    // in Proxmox units
	Unit               string   `json:"unit"`     // MiB/s or ops/s
	Measured           float64  `json:"measured"` // same unit
	Ratio              float64  `json:"ratio"`    // measured / value
	Allowed            float64  `json:"allowed"`  // highest value that still holds
	QueueDepth         float64  `json:"queue_depth"`
	LatencyMs          float64  `json:"latency_ms"`
	PredictedLatencyMs *float64 `json:"predicted_latency_ms"`
	Verdict            string   `json:"verdict"` // holds, not-binding, exceeded
	Reason             string   `json:"reason"`
}

func limitAction(c *cli.Context) error {
	// Flags written after VMID and DISK were moved in front by interspersed.
	pos := c.Args().Slice()
	e := newEnv(c)
	if len(pos) == 0 {
		return exitcode.Usagef("limit: missing VMID (usage: pvediskcheck limit %s)", c.Command.ArgsUsage)
	}
	vmid, err := qemuserver.ParseVMID(pos[0])
	if err != nil {
		return exitcode.Usagef("%v", err)
	}
	if len(pos) > 2 {
		return exitcode.Usagef("limit: too many arguments %q (usage: pvediskcheck limit %s)", pos[2:], c.Command.ArgsUsage)
	}
	diskArg := ""
	if len(pos) == 2 {
		diskArg = pos[1]
	}
	changes := map[string]string{}
	for _, k := range qemuserver.LimitKeys {
		if c.IsSet(limitFlagName(k.Proxmox)) {
			changes[k.Proxmox] = strings.TrimSpace(c.String(limitFlagName(k.Proxmox)))
		}
	}
	clear, persist, dry, verify := c.Bool("clear"), c.Bool("persist"), c.Bool("dry-run"), c.Bool("verify")
	apply := clear || len(changes) > 0
	switch {
	case apply && diskArg == "":
		return exitcode.Usagef("limit: name the disk to change (pvediskcheck limit %d DISK --mbps-wr 20)", vmid)
	case (persist || dry) && !apply:
		return exitcode.Usagef("limit: --persist and --dry-run need limit flags or --clear")
	case c.IsSet("for") && !verify:
		return exitcode.Usagef("limit: --for needs --verify")
	case verify && diskArg == "":
		return exitcode.Usagef("limit: --verify needs DISK")
	case verify && c.Duration("for") < limitSkip+limitMinSteady:
		return exitcode.Usagef("limit: --for %s is too short: the first %s are not judged and a verdict needs %s more", c.Duration("for"), limitSkip, limitMinSteady)
	case verify && dry:
		return exitcode.Usagef("limit: --verify cannot be combined with --dry-run")
	}
	// Each value on its own, as Proxmox's schema checks it.
	for k, v := range changes {
		if err := limitCheckValue(k, v); err != nil {
			return exitcode.Usagef("limit: --%s %s: %v", limitFlagName(k), v, err)
		}
	}
	v, err := loadVM(e, vmid)
	if err != nil {
		return err
	}
	var args []string
	if diskArg != "" {
		args = []string{diskArg}
	}
	disks, err := v.Select(args)
	if err != nil {
		return err
	}
	if apply {
		d := disks[0]
		if d.Drive == nil {
			return exitcode.Usagef("limit: %s is not in VM %d's config", d.ID, vmid)
		}
		if d.Drive.IsCDROM() || d.Drive.IsNone() {
			return exitcode.Usagef("limit: %s is a CD-ROM drive", d.ID)
		}
		if d.Drive.Bool("scsiblock") {
			return exitcode.Usagef("limit: %s is passed through with scsiblock=1: QEMU has no throttle node for it", d.ID)
		}
		if persist && (d.PendingDrive != nil || d.PendingDelete) {
			return exitcode.Usagef("limit: %s has a pending change in [PENDING]; qm set would replace it: apply it (restart) or revert it first (qm pending %d)", d.ID, vmid)
		}
		if persist && filepath.Clean(e.paths.Root) != "/" && filepath.Clean(os.Getenv("PVEDISKCHECK_ROOT")) != filepath.Clean(e.paths.Root) {
			return exitcode.Usagef("limit: --persist runs this node's qm, which does not know --root %s; refusing (set PVEDISKCHECK_ROOT to that root when its qm serves it)", e.paths.Root)
		}
		if !v.Running && !persist {
			if err := limitValidateSet(limitMergeOpts(d.Drive.Opts, changes, clear)); err != nil {
				return err
			}
			return exitcode.Unreachablef("VM %d is not running: nothing to apply live. Use --persist to change the config with qm set (the limits then apply at the next start)", vmid)
		}
	} else if verify && !v.Running {
		return exitcode.Unreachablef("VM %d is not running: nothing to measure", vmid)
	}

	// Read the running limits (one exchange for all disks).
	running := map[string]qemuserver.Limits{}
	var liveErr error
	if v.Running {
		liveErr = qmp.Do(e.ctx(), v.QMPSocket(), e.timeout, func(s qmp.Session) error {
			for _, d := range disks {
				if d.Running == nil || (d.Drive != nil && (d.Drive.Bool("scsiblock") || d.Drive.IsCDROM())) {
					continue // no throttling on pass-through disks and CD-ROMs
				}
				l, err := s.ReadThrottleLimits(d.ID, v.Blockdev)
				if err != nil {
					return err
				}
				running[d.ID] = qemuserver.Limits(l)
			}
			return nil
		})
		if liveErr != nil && apply {
			return exitcode.Unreachablef("%s", qmpErrMsg(vmid, liveErr))
		}
	}

	var outs []*limitJSON
	var skipped []string
	for _, d := range disks {
		if d.Drive != nil && (d.Drive.IsCDROM() || d.Drive.IsNone()) || d.Kind() == qemuserver.KindTPMState {
			skipped = append(skipped, d.NotListed())
			continue
		}
		o := &limitJSON{VMID: vmid, Disk: d.ID, Running: v.Running, Blockdev: v.Blockdev}
		var runL qemuserver.Limits
		if l, ok := running[d.ID]; ok {
			runL = l
		}
		o.Limits = limitSetsFor(d, runL, v.Running && liveErr == nil && d.Running != nil)
		if !v.Running {
			o.Notes = append(o.Notes, fmt.Sprintf("VM %d is not running: configured limits only", vmid))
		} else if liveErr != nil {
			o.Notes = append(o.Notes, "QMP: "+liveErr.Error())
		}
		outs = append(outs, o)
	}
	if len(outs) == 0 {
		return exitcode.Usagef("limit: VM %d has no disk with limits to show (%s)", vmid, strings.Join(skipped, "; "))
	}
	outs[0].Notes = append(outs[0].Notes, skipped...)

	var final error
	if apply {
		if err := limitApply(e, v, disks[0], outs[0], running[disks[0].ID], changes, clear, persist, dry); err != nil {
			if exitcode.Of(err) != exitcode.Problem {
				return err
			}
			final = err
		}
	}
	if verify && final == nil {
		if err := limitVerify(e, v, disks[0], outs[0]); err != nil {
			if exitcode.Of(err) != exitcode.Problem {
				return err
			}
			final = err
		}
	}
	if e.json {
		var perr error
		if diskArg != "" {
			perr = e.printJSON(outs[0])
		} else {
			perr = e.printJSON(outs)
		}
		if perr != nil {
			return perr
		}
	} else {
		for i, o := range outs {
			if i > 0 {
				fmt.Fprintln(e.out)
			}
			printLimit(e, o)
		}
	}
	if final != nil {
		return final
	}
	if !v.Running && !(apply && persist) {
		return exitcode.Unreachablef("VM %d is not running", vmid)
	}
	if liveErr != nil {
		return exitcode.Unreachablef("%s", qmpErrMsg(vmid, liveErr))
	}
	return nil
}

// checkLimitValue checks one value against Proxmox's schema for the key
// (mbps*: number >= 0; iops*: integer >= 0; *_max_length: integer >= 1) and
// QEMU's ceiling.
func limitCheckValue(key, val string) error {
	if val == "" {
		return errors.New("empty value")
	}
	if err := qemuserver.ValidateLimit(key, val); err != nil {
		return err
	}
	f, _ := strconv.ParseFloat(val, 64)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return errors.New("not a finite number")
	}
	if lk := limitKey(key); f*lk.Scale > 1e15 {
		return fmt.Errorf("above QEMU's maximum of 1e15 %s", map[bool]string{true: "bytes/s", false: "per second"}[lk.Scale > 1])
	}
	return nil
}

func limitKey(proxmox string) qemuserver.LimitKey {
	for _, k := range qemuserver.LimitKeys {
		if k.Proxmox == proxmox {
			return k
		}
	}
	return qemuserver.LimitKey{}
}

// mergeLimitOpts returns the limit options of base with changes applied:
// --clear drops every base limit, a value of 0 removes the key.
func limitMergeOpts(base map[string]string, changes map[string]string, clear bool) map[string]string {
	out := map[string]string{}
	if !clear {
		for _, k := range qemuserver.LimitKeys {
			if v, ok := base[k.Proxmox]; ok {
				out[k.Proxmox] = v
			}
		}
	}
	for k, v := range changes {
		if f, err := strconv.ParseFloat(v, 64); err == nil && f == 0 {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out
}

// validateLimitSet applies Proxmox's combination rules and QEMU's
// (throttle_is_valid: a burst below its rate is refused live and at start).
func limitValidateSet(opts map[string]string) error {
	if p := qemuserver.LimitProblems(opts); len(p) > 0 {
		return exitcode.Usagef("limit: Proxmox rejects this: %s (nothing was changed)", strings.Join(p, "; "))
	}
	l := (&qemuserver.Drive{Opts: opts}).Limits()
	for _, k := range qemuserver.LimitKeys {
		if !strings.HasSuffix(k.Proxmox, "_max") {
			continue
		}
		rate := strings.TrimSuffix(k.QEMU, "-max")
		if l[k.QEMU] != 0 && l[k.QEMU] < l[rate] {
			return exitcode.Usagef("limit: QEMU rejects this: %s (%s) is lower than its rate %s (%s) (nothing was changed)",
				k.Proxmox, opts[k.Proxmox], strings.TrimSuffix(k.Proxmox, "_max"), opts[strings.TrimSuffix(k.Proxmox, "_max")])
		}
	}
	return nil
}

// toProxmox converts QEMU limits to Proxmox keys and units, dropping unset
// values and default burst lengths.
func limitToProxmox(l qemuserver.Limits) map[string]float64 {
	out := map[string]float64{}
	for _, k := range qemuserver.LimitKeys {
		v := l.Normal()[k.QEMU]
		if v != 0 {
			out[k.Proxmox] = float64(v) / k.Scale
		}
	}
	return out
}

// proxmoxOpts is toProxmox as drive option strings (exact: MiB values keep
// every digit, so they convert back to the same bytes/s).
func limitProxmoxOpts(l qemuserver.Limits) map[string]string {
	out := map[string]string{}
	for k, v := range limitToProxmox(l) {
		out[k] = strconv.FormatFloat(v, 'f', -1, 64)
	}
	return out
}

func limitSetsFor(d *vm.Disk, run qemuserver.Limits, haveRunning bool) limitSetsJSON {
	s := limitSetsJSON{Configured: map[string]float64{}, Differs: []string{}}
	var cfg qemuserver.Limits
	if d.Drive != nil {
		cfg = d.Drive.Limits()
		s.Configured = limitToProxmox(cfg)
	}
	if !haveRunning {
		return s
	}
	s.Running = limitToProxmox(run)
	s.RunningQEMU = map[string]int64(run.Normal())
	for _, k := range qemuserver.LimitKeys {
		c, r := cfg.Normal()[k.QEMU], run.Normal()[k.QEMU]
		if c == r {
			continue
		}
		switch {
		case c == 0:
			s.Differs = append(s.Differs, fmt.Sprintf("%s: running %s but not in the config (set live, not saved: lost at the next restart)", k.Proxmox, fmtLimit(k, r)))
		case r == 0:
			s.Differs = append(s.Differs, fmt.Sprintf("%s: configured %s but not in effect (config changed without reaching the VM, e.g. restored from a backup or edited by hand)", k.Proxmox, fmtLimit(k, c)))
		default:
			s.Differs = append(s.Differs, fmt.Sprintf("%s: configured %s, running %s", k.Proxmox, fmtLimit(k, c), fmtLimit(k, r)))
		}
	}
	return s
}

// fmtLimit prints a QEMU value in Proxmox units.
func fmtLimit(k qemuserver.LimitKey, v int64) string {
	switch {
	case v == 0:
		return "-"
	case k.Scale == qemuserver.MiB:
		return units.Number(float64(v)/k.Scale) + " MiB/s"
	case strings.HasSuffix(k.Proxmox, "_length"):
		return strconv.FormatInt(v, 10) + " s"
	}
	return strconv.FormatInt(v, 10) + " ops/s"
}

func limitApply(e *env, v *vm.VM, d *vm.Disk, o *limitJSON, runBefore qemuserver.Limits, changes map[string]string, clear, persist, dry bool) error {
	a := &limitApplyJSON{DryRun: dry}
	o.Apply = a
	if persist {
		newOpts := limitMergeOpts(d.Drive.Opts, changes, clear)
		if err := limitValidateSet(newOpts); err != nil {
			o.Apply = nil
			return err
		}
		nd := d.Drive.Clone()
		for _, k := range qemuserver.LimitKeys {
			delete(nd.Opts, k.Proxmox)
		}
		for k, val := range newOpts {
			nd.Opts[k] = val
		}
		line := nd.String()
		if _, err := qemuserver.ParseDrive(d.ID, line); err != nil {
			o.Apply = nil
			return exitcode.Usagef("limit: the new line would not parse: %v (nothing was changed)", err)
		}
		want := nd.Limits()
		argv := []string{"qm", "set", strconv.Itoa(v.VMID), "--" + d.ID, line}
		a.Method, a.Command = "qm set", strings.Join(argv, " ")
		a.Before = limitToProxmox(d.Drive.Limits())
		if dry {
			return nil
		}
		out, err := e.runner.RunTimeout(e.ctx(), max(e.timeout, 60*time.Second), argv...)
		a.Output = strings.TrimSpace(string(out))
		if err != nil {
			o.Apply = a
			return exitcode.Unreachablef("limit: %v (nothing confirmed; check 'qm config %d')", err, v.VMID)
		}
		// The config as Proxmox saved it.
		v2, err := vm.Load(e.paths, v.VMID)
		if err != nil {
			return exitcode.Unreachablef("limit: qm set ran, but the config cannot be read back: %v", err)
		}
		d2 := v2.Disk(d.ID)
		if d2 == nil || d2.Drive == nil || !d2.Drive.Limits().Equal(want) {
			return exitcode.Problemf("limit: qm set ran, but %s's config line does not carry the new limits", d.ID)
		}
		a.Persisted = true
		o.Limits.Configured = limitToProxmox(d2.Drive.Limits())
		if !v.Running {
			a.Confirmed = true
			o.Notes = append(o.Notes, fmt.Sprintf("VM %d is stopped: the config is changed, the limits apply at the next start", v.VMID))
			return nil
		}
		return limitReadBack(e, v, d, o, want, "qm set saved the config")
	}

	newOpts := limitMergeOpts(limitProxmoxOpts(runBefore), changes, clear)
	if err := limitValidateSet(newOpts); err != nil {
		o.Apply = nil
		return err
	}
	want := (&qemuserver.Drive{Opts: newOpts}).Limits()
	name, args, err := qmp.ThrottleCommand(d.ID, v.Blockdev, want.Full())
	if err != nil {
		return err
	}
	cmd, _ := json.Marshal(map[string]any{"execute": name, "arguments": args})
	a.Method, a.Command = name, string(cmd)
	a.Before = limitToProxmox(runBefore)
	if dry {
		return nil
	}
	err = qmp.Do(e.ctx(), v.QMPSocket(), e.timeout, func(s qmp.Session) error {
		return s.SetThrottleLimits(d.ID, v.Blockdev, want.Full())
	})
	if err != nil {
		var qe *qmp.Error
		if errors.As(err, &qe) {
			return exitcode.Unreachablef("VM %d: QEMU refused the limits: %v (nothing was changed)", v.VMID, err)
		}
		return exitcode.Unreachablef("%s", qmpErrMsg(v.VMID, err))
	}
	o.Notes = append(o.Notes, fmt.Sprintf("applied live only: the config of VM %d was not changed, these limits disappear at the next restart (use --persist to save them)", v.VMID))
	return limitReadBack(e, v, d, o, want, "QEMU accepted "+name)
}

// limitReadBack reads the running limits again and compares them with want.
func limitReadBack(e *env, v *vm.VM, d *vm.Disk, o *limitJSON, want qemuserver.Limits, what string) error {
	var after map[string]int64
	err := qmp.DoRetry(e.ctx(), v.QMPSocket(), e.timeout, e.timeout, func(s qmp.Session) error {
		var err error
		after, err = s.ReadThrottleLimits(d.ID, v.Blockdev)
		return err
	})
	if err != nil {
		return exitcode.Unreachablef("%s, but the limits cannot be read back: %s", what, qmpErrMsg(v.VMID, err))
	}
	run := qemuserver.Limits(after)
	o.Apply.After = limitToProxmox(run)
	o.Limits = limitSetsFor(d, run, true)
	if d2, err := vm.Load(e.paths, v.VMID); err == nil && d2.Disk(d.ID) != nil && d2.Disk(d.ID).Drive != nil {
		o.Limits = limitSetsFor(d2.Disk(d.ID), run, true)
	}
	if !run.Equal(want) {
		return exitcode.Problemf("limit: %s, but QEMU runs %s with {%s}, not {%s}", what, d.ID, run.Normal(), want.Normal())
	}
	o.Apply.Confirmed = true
	return nil
}

// limitVerify samples the disk and judges every running rate limit.
func limitVerify(e *env, v *vm.VM, d *vm.Disk, o *limitJSON) error {
	window := e.c.Duration("for")
	progress := !e.json && isTerminal(e.errOut)
	b := &sampler.Blockstats{Socket: v.QMPSocket(), Disks: []string{d.ID}, Timeout: e.timeout}
	if progress {
		b.OnSample = func(s sampler.Sample, elapsed, window time.Duration) {
			fmt.Fprintf(e.errOut, "\rsampling %s for %s: %4.1f s", d.ID, window, elapsed.Seconds())
		}
	}
	ser, err := b.Run(e.ctx(), window)
	if progress {
		fmt.Fprint(e.errOut, "\r\x1b[K")
	}
	if err != nil {
		if e.ctx().Err() != nil {
			return exitcode.Unreachablef("%s", "interrupted: "+err.Error())
		}
		return exitcode.Unreachablef("VM %d: sampling query-blockstats: %v", v.VMID, err)
	}
	r, err := ser.Rates(d.ID, limitSkip)
	if err != nil || r.Seconds() < limitMinSteady.Seconds()*0.9 {
		return exitcode.Unreachablef("VM %d: not enough samples for a verdict (%d taken, %d lost to a busy QMP socket): %v", v.VMID, len(ser.Samples), ser.Missed, err)
	}
	vj := &limitVerifyJSON{
		WindowS: window.Seconds(), SkippedS: limitSkip.Seconds(), SteadyS: units.Round(r.Seconds(), 3),
		Samples: len(ser.Samples), Missed: ser.Missed, Verdicts: []limitVerdictJSON{},
		Measured: limitMeasuredJSON{
			ReadBps: units.Round(r.ReadBytesPerSec, 0), WriteBps: units.Round(r.WriteBytesPerSec, 0),
			ReadIOPS: units.Round(r.ReadOpsPerSec, 1), WriteIOPS: units.Round(r.WriteOpsPerSec, 1),
			ReadLatencyMs: units.Round(units.Ms(r.ReadLatency), 2), WriteLatencyMs: units.Round(units.Ms(r.WriteLatency), 2),
			ReadQueueDepth: units.Round(r.ReadQueueDepth, 2), WriteQueueDepth: units.Round(r.WriteQueueDepth, 2),
		},
	}
	o.Verify = vj
	run := qemuserver.Limits{}
	for k, val := range o.Limits.RunningQEMU {
		run[k] = val
	}
	exceeded := false
	for _, k := range qemuserver.LimitKeys {
		lim := run[k.QEMU]
		if lim == 0 || strings.Contains(k.Proxmox, "_max") {
			continue // bursts are allowances, judged with their rate
		}
		vd := limitJudge(k, lim, run, r)
		if vd.Verdict == "exceeded" {
			exceeded = true
		}
		vj.Verdicts = append(vj.Verdicts, vd)
	}
	if len(vj.Verdicts) == 0 {
		o.Notes = append(o.Notes, fmt.Sprintf("%s runs without limits: nothing to verify (rates measured anyway)", d.ID))
	}
	// Limits changed behind our back during the window?
	var after map[string]int64
	if err := qmp.DoRetry(e.ctx(), v.QMPSocket(), e.timeout, e.timeout, func(s qmp.Session) error {
		var err error
		after, err = s.ReadThrottleLimits(d.ID, v.Blockdev)
		return err
	}); err == nil && !qemuserver.Limits(after).Equal(run) {
		vj.ChangedTo = limitToProxmox(qemuserver.Limits(after))
		o.Notes = append(o.Notes, fmt.Sprintf("the running limits of %s changed during the window (now {%s}): someone else (qm set, another tool) changed them; the verdicts judge the limits read at the start", d.ID, qemuserver.Limits(after).Normal()))
	}
	if exceeded {
		return exitcode.ErrProblem
	}
	return nil
}

// judgeLimit gives one rate limit its verdict.
func limitJudge(k qemuserver.LimitKey, lim int64, run qemuserver.Limits, r sampler.Rates) limitVerdictJSON {
	var measured, qd, lat, size float64
	isBps := strings.HasPrefix(k.QEMU, "bps")
	rd, wr := strings.Contains(k.QEMU, "read") || strings.Contains(k.QEMU, "total"), strings.Contains(k.QEMU, "write") || strings.Contains(k.QEMU, "total")
	var ops, bytes, latSum float64
	if rd {
		ops += r.ReadOpsPerSec
		bytes += r.ReadBytesPerSec
		qd += r.ReadQueueDepth
		latSum += r.ReadOpsPerSec * units.Ms(r.ReadLatency)
	}
	if wr {
		ops += r.WriteOpsPerSec
		bytes += r.WriteBytesPerSec
		qd += r.WriteQueueDepth
		latSum += r.WriteOpsPerSec * units.Ms(r.WriteLatency)
	}
	if ops > 0 {
		lat = latSum / ops
		size = bytes / ops
	}
	unit := "ops/s"
	measured = ops
	if isBps {
		unit = "MiB/s"
		measured = bytes / qemuserver.MiB
	}
	value := float64(lim) / k.Scale
	// A configured burst lets the bucket (max x length) through on top of
	// the rate once per window.
	allowed := value * limitExceedRatio
	if mx := run[k.QEMU+"-max"]; mx > 0 && r.Seconds() > 0 {
		length := run[k.QEMU+"-max-length"]
		if length < 1 {
			length = 1
		}
		allowed += float64(mx) * float64(length) / k.Scale / r.Seconds()
	}
	vd := limitVerdictJSON{Limit: k.Proxmox, Value: value, Unit: unit, Measured: units.Round(measured, 3), Allowed: units.Round(allowed, 3),
		QueueDepth: units.Round(qd, 2), LatencyMs: units.Round(lat, 2)}
	if value > 0 {
		vd.Ratio = units.Round(measured/value, 4)
	}
	if qd > 0 {
		// At a fixed rate, a request waits behind the queue: depth / rate.
		var p float64
		if isBps {
			p = qd * size / float64(lim) * 1000
		} else {
			p = qd / float64(lim) * 1000
		}
		p = units.Round(p, 2)
		vd.PredictedLatencyMs = &p
	}
	switch {
	case measured > allowed:
		vd.Verdict = "exceeded"
		vd.Reason = fmt.Sprintf("measured %s %s, more than 5 %% above the limit of %s %s over %.1f s of steady load", units.Number(measured), unit, units.Number(value), unit, r.Seconds())
	case measured >= value*limitBindingRatio:
		vd.Verdict = "holds"
		vd.Reason = fmt.Sprintf("the guest pushed against the limit and got %.1f %% of it", measured/value*100)
	default:
		vd.Verdict = "not-binding"
		vd.Reason = fmt.Sprintf("the disk did %s %s, under 80 %% of the limit: this proves nothing. Run a load in the guest that exceeds the limit, e.g. %s", units.Number(measured), unit, limitFioHint(k))
	}
	return vd
}

func limitFioHint(k qemuserver.LimitKey) string {
	rw := "write"
	switch {
	case strings.Contains(k.QEMU, "read"):
		rw = "read"
	case strings.Contains(k.QEMU, "total"):
		rw = "rw"
	}
	if strings.HasPrefix(k.QEMU, "bps") {
		return "fio --name=limit --filename=/dev/sdX --direct=1 --ioengine=libaio --rw=" + rw + " --bs=1M --iodepth=8 --time_based --runtime=30"
	}
	return "fio --name=limit --filename=/dev/sdX --direct=1 --ioengine=libaio --rw=rand" + rw + " --bs=4k --iodepth=32 --time_based --runtime=30"
}

func printLimit(e *env, o *limitJSON) {
	gen := "-blockdev, throttle group " + qmp.ThrottleGroupID(o.Disk)
	if !o.Blockdev {
		gen = "-drive (machine < 10.0), drive-" + o.Disk + " throttling"
	}
	state := "running"
	if !o.Running {
		state = e.paint(yellow, "not running")
	}
	fmt.Fprintf(e.out, "VM %d %s: %s, %s\n", o.VMID, o.Disk, state, gen)
	if a := o.Apply; a != nil {
		switch {
		case a.DryRun:
			fmt.Fprintf(e.out, "dry run, nothing changed. Would run:\n  %s\n", a.Command)
		case a.Method == "qm set":
			fmt.Fprintf(e.out, "ran: %s\n", a.Command)
			if a.Output != "" {
				fmt.Fprintf(e.out, "  %s\n", strings.ReplaceAll(a.Output, "\n", "\n  "))
			}
		default:
			fmt.Fprintf(e.out, "applied live with %s\n", a.Method)
		}
		if !a.DryRun {
			t := newTable(e.out, "  LIMIT", "BEFORE", "AFTER (read back from QEMU)")
			after := a.After
			for _, k := range qemuserver.LimitKeys {
				b, okb := a.Before[k.Proxmox]
				af, oka := after[k.Proxmox]
				if !okb && !oka {
					continue
				}
				t.row("  "+k.Proxmox, limitFmtProxmox(k, b, okb), limitFmtProxmox(k, af, oka && after != nil))
			}
			t.flush()
			if a.Confirmed && a.After != nil {
				fmt.Fprintln(e.out, "  "+e.paint(green, "confirmed: QEMU reports exactly the new limits"))
			}
		}
	}
	t := newTable(e.out, "  LIMIT", "CONFIG", "RUNNING", "RUNNING (QEMU)", "")
	rows := 0
	for _, k := range qemuserver.LimitKeys {
		cv, okc := o.Limits.Configured[k.Proxmox]
		rv, okr := o.Limits.Running[k.Proxmox]
		if !okc && !okr {
			continue
		}
		q := "-"
		if okr {
			q = fmt.Sprintf("%s=%d", k.QEMU, o.Limits.RunningQEMU[k.QEMU])
		}
		mark := ""
		if o.Limits.Running != nil && (!okc || !okr || cv != rv) {
			mark = "DIFFERS"
		}
		run := limitFmtProxmox(k, rv, okr)
		if o.Limits.Running == nil {
			run = "?"
		}
		t.row("  "+k.Proxmox, limitFmtProxmox(k, cv, okc), run, q, mark)
		rows++
	}
	if rows > 0 {
		t.flush()
	} else if o.Limits.Running != nil {
		fmt.Fprintln(e.out, "  no limits: neither in the config nor in the running VM")
	} else {
		fmt.Fprintln(e.out, "  no limits in the config")
	}
	for _, d := range o.Limits.Differs {
		fmt.Fprintf(e.out, "  %s %s\n", e.paint(red, "DIFFERS"), d)
	}
	if vj := o.Verify; vj != nil {
		m := vj.Measured
		fmt.Fprintf(e.out, "measured over %.1f s (first %.0f s of the %.0f s window left out, %d samples):\n", vj.SteadyS, vj.SkippedS, vj.WindowS, vj.Samples)
		fmt.Fprintf(e.out, "  read  %7.2f MiB/s %8.1f IOPS  latency %7.1f ms  queue %.1f\n", m.ReadBps/qemuserver.MiB, m.ReadIOPS, m.ReadLatencyMs, m.ReadQueueDepth)
		fmt.Fprintf(e.out, "  write %7.2f MiB/s %8.1f IOPS  latency %7.1f ms  queue %.1f\n", m.WriteBps/qemuserver.MiB, m.WriteIOPS, m.WriteLatencyMs, m.WriteQueueDepth)
		if len(vj.Verdicts) > 0 {
			t := newTable(e.out, "  LIMIT", "VALUE", "MEASURED", "OF LIMIT", "QUEUE", "LATENCY", "PREDICTED", "VERDICT")
			for _, vd := range vj.Verdicts {
				pred := "-"
				if vd.PredictedLatencyMs != nil {
					pred = fmt.Sprintf("%.0f ms", *vd.PredictedLatencyMs)
				}
				t.row("  "+vd.Limit, units.Number(vd.Value)+" "+vd.Unit, fmt.Sprintf("%.2f %s", vd.Measured, vd.Unit), fmt.Sprintf("%.1f %%", vd.Ratio*100),
					fmt.Sprintf("%.1f", vd.QueueDepth), fmt.Sprintf("%.0f ms", vd.LatencyMs), pred, vd.Verdict)
			}
			t.flush()
			for _, vd := range vj.Verdicts {
				color := green
				switch vd.Verdict {
				case "exceeded":
					color = red
				case "not-binding":
					color = yellow
				}
				fmt.Fprintf(e.out, "  %s %s: %s\n", vd.Limit, e.paint(color, vd.Verdict), vd.Reason)
			}
		}
	}
	for _, n := range o.Notes {
		fmt.Fprintln(e.out, "note: "+n)
	}
}

func limitFmtProxmox(k qemuserver.LimitKey, v float64, ok bool) string {
	if !ok {
		return "-"
	}
	switch {
	case k.Scale == qemuserver.MiB:
		return units.Number(v) + " MiB/s"
	case strings.HasSuffix(k.Proxmox, "_length"):
		return units.Number(v) + " s"
	}
	return units.Number(v) + " ops/s"
}
