package main

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/limit"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/units"
)

func init() {
	commands = append(commands, command{new: limitCommand, cluster: clusterRole{
		Forward: func(c *cli.Context) bool { return limitInput(c, "").Changes() || c.Bool("histogram") },
	}})
}

func limitCommand() *cli.Command {
	flags := []cli.Flag{}
	for _, k := range qemuserver.LimitKeys {
		flags = append(flags, &cli.StringFlag{Name: limit.FlagName(k.Proxmox), Usage: "set " + k.Proxmox + ": " + limit.Describe(k), Category: "LIMITS (Proxmox keys and units)"})
	}
	flags = append(flags,
		&cli.BoolFlag{Name: "clear", Usage: "remove every limit of the disk (flags given with it are then the only limits)"},
		&cli.BoolFlag{Name: "persist", Usage: "run 'qm set' instead: Proxmox applies the change live and saves it in the config"},
		&cli.BoolFlag{Name: "dry-run", Usage: "print the QMP command or the qm set line and change nothing"},
		&cli.BoolFlag{Name: "verify", Usage: "measure the disk's throughput (query-blockstats) and give a verdict per limit"},
		maxDuration(&cli.DurationFlag{Name: "for", Value: limit.DefaultWindow, Usage: "measurement window for --verify (at least 5s; the first 3s are not judged)"}, limit.MaxWindow),
		&cli.BoolFlag{Name: "histogram", Usage: "with --verify, CHANGES QEMU STATE for the window: set a latency histogram on the disk for p50/p95/p99 (one found set is used as it is); cleared after"},
	)
	return &cli.Command{
		Name:        "limit",
		Usage:       "show the I/O limits a disk runs with, set them live, and prove them by measurement",
		ArgsUsage:   limit.ArgsUsage,
		Description: helpText("limit"),
		Flags:       flags,
		Action:      limitAction,
	}
}

// limitInput is the command as typed; root is --root as node.Paths holds it.
func limitInput(c *cli.Context, root string) limit.Input {
	in := limit.Input{
		Args: c.Args().Slice(), Values: map[string]string{},
		Clear: c.Bool("clear"), Persist: c.Bool("persist"), DryRun: c.Bool("dry-run"), Verify: c.Bool("verify"),
		Histogram: c.Bool("histogram"), Root: root, RootEnv: os.Getenv("PVEDISKCHECK_ROOT"),
	}
	for _, k := range qemuserver.LimitKeys {
		if flag := limit.FlagName(k.Proxmox); c.IsSet(flag) {
			in.Values[k.Proxmox] = c.String(flag)
		}
	}
	if c.IsSet("for") {
		d := c.Duration("for")
		in.For = &d
	}
	return in
}

func limitAction(c *cli.Context) error {
	// Flags written after VMID and DISK were moved in front by interspersed.
	e := newEnv(c)
	asked, err := limitInput(c, e.paths.Root).Validate()
	if err != nil {
		return err
	}
	vmid, diskArg, req := asked.VMID, asked.Disk, asked.Request
	if req.Verify > 0 {
		req.OnSample = windowProgress(e, fmt.Sprintf("VM %d %s", vmid, diskArg))
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
	outs, err := limit.Run(e.ctx(), e.node, v, disks, req)
	if req.Verify > 0 {
		endProgress(e)
	}
	if outs == nil {
		return err
	}
	var perr error
	switch {
	case e.json && diskArg != "":
		perr = e.printJSON(outs[0])
	case e.json:
		perr = e.printJSON(outs)
	default:
		for i, o := range outs {
			if i > 0 {
				fmt.Fprintln(e.out)
			}
			printLimit(e, o)
		}
	}
	if perr != nil {
		return perr
	}
	return err
}

func printLimit(e *env, o *limit.Result) {
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
		case a.Unchanged:
			fmt.Fprintf(e.out, "%s: the limits asked for are already in effect (see notes)\n", e.paint(green, "nothing changed"))
		case a.DryRun:
			fmt.Fprintf(e.out, "dry run, nothing changed. Would run:\n  %s\n", a.Command)
		case a.Method == limit.QMSet:
			fmt.Fprintf(e.out, "ran: %s\n", a.Command)
			if a.Output != "" {
				fmt.Fprintf(e.out, "  %s\n", strings.ReplaceAll(a.Output, "\n", "\n  "))
			}
		default:
			fmt.Fprintf(e.out, "applied live with %s\n", a.Method)
		}
		if !a.DryRun && !a.Unchanged {
			t := newTable(e.out, "  LIMIT", "BEFORE", "AFTER (read back from QEMU)")
			for _, k := range qemuserver.LimitKeys {
				b, okb := a.Before[k.Proxmox]
				af, oka := a.After[k.Proxmox]
				if !okb && !oka {
					continue
				}
				t.row("  "+k.Proxmox, limitFmt(k, b, okb), limitFmt(k, af, oka))
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
		run := limitFmt(k, rv, okr)
		if o.Limits.Running == nil {
			run = "?"
		}
		t.row("  "+k.Proxmox, limitFmt(k, cv, okc), run, q, mark)
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
		printLimitVerify(e, vj)
	}
	if h := o.Histogram; h != nil {
		fmt.Fprintln(e.out, "  "+histogramNote(*h))
	}
	e.histogramsLeft(o.HistogramsLeft)
	e.notes(o.Notes)
}

// histogramNote says what was done about a disk's latency histogram.
func histogramNote(h latency.Note) string {
	switch h.Owner {
	case latency.SetByUs:
		return fmt.Sprintf("latency histogram of %s: set by pvediskcheck for the window, cleared after", h.Disk)
	case latency.Existing:
		if h.Leftover {
			return fmt.Sprintf("latency histogram of %s: found set with pvediskcheck's boundaries by another run, used as it is and left in place", h.Disk)
		}
		return fmt.Sprintf("latency histogram of %s: found set (%d boundaries), used as it is and left in place", h.Disk, h.Boundaries)
	}
	return fmt.Sprintf("latency histogram of %s: refused by QEMU (%s): no percentiles", h.Disk, h.Error)
}

func msDur(ms float64) time.Duration { return time.Duration(ms * float64(time.Millisecond)) }

func printLimitVerify(e *env, vj *limit.Verification) {
	m := vj.Measured
	missed := ""
	if vj.Missed > 0 {
		missed = fmt.Sprintf(", %d missed", vj.Missed)
	}
	if m != nil {
		fmt.Fprintf(e.out, "measured over %.1f s (first %.0f s of the %.0f s window left out, %d samples%s):\n", vj.SteadyS, vj.SkippedS, vj.WindowS, vj.Samples, missed)
	} else {
		fmt.Fprintf(e.out, "measured: %d samples%s, too few after the first %.0f s of the %.0f s window for rates:\n", vj.Samples, missed, vj.SkippedS, vj.WindowS)
	}
	for _, g := range vj.Gaps {
		fmt.Fprintf(e.out, "  %s no sample from %.1f s to %.1f s (QMP socket busy or QEMU not answering)\n", e.paint(yellow, "gap:"), g.FromS, g.ToS)
	}
	if c := vj.Cut; c != nil && c.Why == limit.CutInterrupted {
		fmt.Fprintf(e.out, "  %s interrupted %.1f s into the window: samples until then\n", e.paint(red, "cut:"), c.AtS)
	} else if c != nil {
		fmt.Fprintf(e.out, "  %s sampling stopped %.1f s into the window (%s): samples until then\n", e.paint(red, "cut:"), c.AtS, c.Why)
	}
	switch steady := vj.WindowS - vj.SkippedS; {
	case vj.Cut != nil && len(vj.Verdicts) == 0:
		if vj.SampledS < limit.MinSteady.Seconds() { // else a note says why
			fmt.Fprintf(e.out, "  no verdicts: %.1f s of the steady part sampled before the cut, a verdict needs %.0f s\n", max(vj.SampledS, 0), limit.MinSteady.Seconds())
		}
	case vj.SampledS < steady && m != nil:
		fmt.Fprintf(e.out, "  the verdicts stand on %.1f s of the %.1f s steady part\n", vj.SampledS, steady)
	}
	if m == nil {
		return
	}
	fmt.Fprintf(e.out, "  read  %7.2f MiB/s %8.1f IOPS  latency %7.1f ms  queue %.1f\n", m.ReadBps/qemuserver.MiB, m.ReadIOPS, m.ReadLatencyMs, m.ReadQueueDepth)
	fmt.Fprintf(e.out, "  write %7.2f MiB/s %8.1f IOPS  latency %7.1f ms  queue %.1f\n", m.WriteBps/qemuserver.MiB, m.WriteIOPS, m.WriteLatencyMs, m.WriteQueueDepth)
	if p := vj.Latency; p != nil {
		for _, k := range []latency.Kind{latency.Read, latency.Write, latency.Flush} {
			if p50, p95, p99 := p.Of(k); p50 != nil {
				fmt.Fprintf(e.out, "  %-5s latency p50 %s  p95 %s  p99 %s (histogram)\n", k, units.Duration(msDur(*p50)), units.Duration(msDur(*p95)), units.Duration(msDur(*p99)))
			}
		}
	}
	if len(vj.Verdicts) == 0 {
		return
	}
	t := newTable(e.out, "  LIMIT", "VALUE", "MEASURED", "OF LIMIT", "QUEUE", "LATENCY", "PREDICTED", "VERDICT")
	for _, vd := range vj.Verdicts {
		pred := "-"
		if vd.PredictedLatencyMs != nil {
			pred = fmt.Sprintf("%.0f ms", *vd.PredictedLatencyMs)
		}
		t.row("  "+vd.Limit, units.Number(vd.Value)+" "+vd.Unit, fmt.Sprintf("%.2f %s", vd.Measured, vd.Unit), fmt.Sprintf("%.1f %%", vd.Ratio*100),
			fmt.Sprintf("%.1f", vd.QueueDepth), fmt.Sprintf("%.0f ms", vd.LatencyMs), pred, string(vd.Verdict))
	}
	t.flush()
	for _, vd := range vj.Verdicts {
		color := green
		switch vd.Verdict {
		case limit.Exceeded:
			color = red
		case limit.NotBinding:
			color = yellow
		}
		fmt.Fprintf(e.out, "  %s %s: %s\n", vd.Limit, e.paint(color, string(vd.Verdict)), vd.Reason)
	}
}

// limitFmt prints a value in Proxmox units, "-" when absent.
func limitFmt(k qemuserver.LimitKey, v float64, ok bool) string {
	if !ok {
		return "-"
	}
	return limit.FormatValue(k, v)
}
