package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/discard"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/units"

	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/cache"
	"github.com/pvediskcheck/pvediskcheck/sampler"
)

func init() {
	commands = append(commands, command{new: discardCommand, cluster: clusterRole{
		Forward: func(c *cli.Context) bool { return c.Bool("trim") },
	}})
}

func discardCommand() *cli.Command {
	return &cli.Command{
		Name:        "discard",
		Usage:       "prove whether space the guest trims really goes back to the storage",
		ArgsUsage:   "VMID [DISK...]",
		Description: helpText("discard"),
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "trim", Usage: "ask the guest to trim (guest agent guest-fstrim) and prove what came back"},
			maxDuration(&cli.DurationFlag{Name: "wait", Usage: "watch for `DURATION` while fstrim runs in the guest (no guest agent needed), then prove what came back"}, discard.MaxWait),
			maxDuration(&cli.DurationFlag{Name: "trim-timeout", Value: discard.DefaultTrimTimeout, Usage: "how long guest-fstrim may take"}, discard.MaxTrimTimeout),
		},
		Action: discardAction,
	}
}

func discardAction(c *cli.Context) error {
	e := newEnv(c)
	vmid, err := vmidArg(c)
	if err != nil {
		return err
	}
	o := discard.Options{Mode: discard.Status, TrimTimeout: c.Duration("trim-timeout")}
	if c.Bool("trim") {
		o.Mode = discard.Trim
	}
	if c.IsSet("wait") {
		if o.Mode == discard.Trim {
			return exitcode.Usagef("discard: --trim and --wait exclude each other (--trim uses the guest agent, --wait watches while you trim in the guest)")
		}
		o.Mode, o.Wait = discard.Wait, c.Duration("wait")
	}
	if err := discard.Validate(o); err != nil {
		return err
	}
	v, err := loadVM(e, vmid)
	if err != nil {
		return err
	}
	sel, err := v.Select(c.Args().Tail())
	if err != nil {
		return err
	}
	if isTerminal(e.errOut) {
		o.OnTrim = func(timeout time.Duration) func() { return discardTrimProgress(e, timeout) }
	}
	if o.Mode == discard.Wait {
		o.OnSample = discardWaitProgress(e, o.Wait, fmt.Sprintf("VM %d", v.VMID))
	}
	rep, err := discard.Run(e.ctx(), e.node, v, sel, o)
	if o.Mode == discard.Wait {
		endProgress(e)
	}
	if rep == nil {
		return err
	}
	if jerr := show(e, rep, printDiscard); jerr != nil {
		return jerr
	}
	return err
}

// discardWaitProgress is a --wait window's progress line, after the
// instruction to trim in the guest (said at the first sample, on a
// terminal, whatever the output format).
func discardWaitProgress(e *env, window time.Duration, what string) sampler.OnSample {
	line := windowProgress(e, what)
	return func(t sampler.Tick) {
		if t.N == 1 && isTerminal(e.errOut) {
			fmt.Fprintf(e.errOut, "watching for %s: run fstrim in the guest now (e.g. fstrim -av)\n", window)
		}
		line(t)
	}
}

// discardTrimProgress shows how long guest-fstrim has been running, on a
// terminal; the function it returns clears the line.
func discardTrimProgress(e *env, timeout time.Duration) func() {
	done := make(chan struct{})
	finished := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(finished)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-done:
				fmt.Fprint(e.errOut, ctl("\r\x1b[K"))
				return
			case <-t.C:
				fmt.Fprintf(e.errOut, ctl("\r")+"guest-fstrim running in the guest: %s (gives up after %s)", time.Since(start).Round(time.Second), timeout)
			}
		}
	}()
	return func() { close(done); <-finished }
}

func printDiscard(e *env, out *discard.Report) {
	state := e.liveState(out.Running)
	switch out.Mode {
	case discard.Trim:
		fmt.Fprintf(e.out, "VM %d: %s; guest-fstrim took %.1f s\n", out.VMID, state, *out.WindowSeconds)
		for _, p := range out.GuestFstrim {
			on := "disks unknown"
			if len(p.Disks) > 0 {
				on = "on " + strings.Join(p.Disks, "+")
			}
			line := fmt.Sprintf("  guest %s: trimmed %s (%s)", p.Path, units.Bytes(p.TrimmedBytes), on)
			if p.Error != "" {
				line += ": error: " + p.Error
			}
			fmt.Fprintln(e.out, line)
		}
	case discard.Wait:
		fmt.Fprintf(e.out, "VM %d: %s; watched %.0f s\n", out.VMID, state, *out.WindowSeconds)
		printSampling(e, out.Sampling)
	default:
		fmt.Fprintf(e.out, "VM %d: %s\n", out.VMID, state)
	}
	if out.Mode == discard.Status {
		t := newTable(e.out, "DISK", "CONTROLLER", "STORAGE", "DISCARD", "SSD", "VIRTUAL", "ALLOCATED", "GUEST SENT", "STORAGE ACCEPTED", "REFUSED")
		for _, d := range out.Disks {
			disc := d.Discard.Configured
			if d.Discard.Running != nil && *d.Discard.Running != d.Discard.Configured {
				disc += " (running " + *d.Discard.Running + ")"
			}
			sent, acc, ref := "-", "-", "-"
			if c := d.SinceStart; c != nil {
				sent = units.Bytes(c.GuestSentBytes)
				if !c.DeviceCounts {
					sent = "not counted"
				}
				acc, ref = units.Bytes(c.StorageAcceptedBytes), fmt.Sprint(c.StorageFailedOps)
			}
			stor := d.Storage + " (" + d.StorageType
			if d.Thin {
				stor += ", thin"
			}
			stor += ")"
			t.row(d.ID, units.OrDash(d.Controller), stor, disc, units.OnOff(d.SSD.Configured), units.BytesPtr(d.Allocation.VirtualBytes), allocText(d.Allocation), sent, acc, ref)
		}
		t.flush()
	}
	for _, d := range out.Disks {
		if out.Mode != discard.Status && d.Result != nil {
			r := d.Result
			color := green
			switch r.Verdict {
			case discard.NotReturned:
				color = red
			case discard.PartlyReturned, discard.Unmeasured:
				color = yellow
			case discard.NotTrimmed:
				color = ""
			}
			fmt.Fprintf(e.out, "\n%s (%s, %s, discard=%s): %s\n", d.ID, d.Volume, units.OrDash(d.Controller), d.Discard.Effective(), e.paint(color, string(r.Verdict)))
			guest := "unknown (no guest agent figure for this disk)"
			if r.GuestTrimmedBytes != nil {
				guest = units.Bytes(*r.GuestTrimmedBytes)
			} else if out.Mode == discard.Trim {
				guest = "nothing (no mounted filesystem on this disk alone)"
			}
			fmt.Fprintf(e.out, "  guest trimmed     %s\n", guest)
			recv := fmt.Sprintf("%s in %d requests", units.Bytes(r.QEMUReceivedBytes), r.QEMUReceivedOps)
			if d.SinceStart != nil && !d.SinceStart.DeviceCounts {
				recv = "not counted (VirtIO Block)"
			}
			fmt.Fprintf(e.out, "  QEMU received     %s\n", recv)
			fmt.Fprintf(e.out, "  storage accepted  %s in %d requests, refused %d\n", units.Bytes(r.StorageAcceptedBytes), r.StorageAcceptedOps, r.StorageFailedOps)
			if r.ReturnedBytes != nil {
				res := ""
				if r.ResolutionBytes > 0 {
					res = ", +-" + units.Bytes(r.ResolutionBytes)
				}
				fmt.Fprintf(e.out, "  volume            %s -> %s allocated (returned %s%s, %s)\n", units.Bytes(*r.AllocatedBeforeBytes), units.Bytes(*r.AllocatedAfterBytes), units.Bytes(*r.ReturnedBytes), res, d.Allocation.Method)
			} else {
				fmt.Fprintf(e.out, "  volume            not measurable: %s\n", d.Allocation.Unmeasured)
			}
			if r.PoolReturnedBytes != nil {
				fmt.Fprintf(e.out, "  pool              %s -> %s allocated (returned %s, %s, all its volumes)\n", units.Bytes(*r.PoolBeforeBytes), units.Bytes(*r.PoolAfterBytes), units.Bytes(*r.PoolReturnedBytes), d.Allocation.Pool.Name)
			}
			if rc := d.Reclaimable; rc != nil {
				fmt.Fprintf(e.out, "  predicted         %s\n", reclaimText(rc))
			}
			for _, rs := range r.Reasons {
				fmt.Fprintf(e.out, "  - %s\n", rs.Text)
				if rs.Fix != "" {
					fmt.Fprintf(e.out, "    fix: %s\n", rs.Fix)
				}
			}
			continue
		}
		if len(d.Warnings) == 0 && d.Allocation.Pool == nil && d.Allocation.Unmeasured == "" && d.GuestFilesystems == nil && d.Reclaimable == nil {
			continue
		}
		fmt.Fprintf(e.out, "\n%s:\n", d.ID)
		for _, f := range d.GuestFilesystems {
			fmt.Fprintf(e.out, "  guest %s\n", cache.FilesystemText(f))
		}
		if rc := d.Reclaimable; rc != nil {
			fmt.Fprintf(e.out, "  reclaimable by trim: %s\n", reclaimText(rc))
			for _, rs := range rc.Reasons {
				fmt.Fprintf(e.out, "    - %s\n", rs.Text)
			}
			if rc.Verdict == discard.ReclaimKnown {
				fmt.Fprintf(e.out, "    reclaim: %s\n", rc.Fix)
			}
		}
		if p := d.Allocation.Pool; p != nil {
			fmt.Fprintf(e.out, "  pool %s: %s of %s used (%s), discards %s\n", p.Name, units.BytesPtr(p.AllocatedBytes), units.Bytes(p.SizeBytes), units.PercentPtr(p.DataPercent), units.OrDash(p.Discards))
		}
		if d.Allocation.Unmeasured != "" {
			fmt.Fprintf(e.out, "  allocation not measurable: %s\n", d.Allocation.Unmeasured)
		}
		for _, w := range d.Warnings {
			e.warning("  ", w.Text, w.Fix)
		}
	}
	e.histogramsLeft(out.HistogramsLeft)
	e.notes(out.Notes)
}

// reclaimText is what a trim would give back, in one line.
func reclaimText(r *discard.Reclaim) string {
	switch r.Verdict {
	case discard.ReclaimKnown:
		s := "up to " + units.Bytes(*r.UpToBytes)
		if r.AtLeastBytes != nil {
			s += ", at least " + units.Bytes(*r.AtLeastBytes)
		}
		return s + fmt.Sprintf(" (the node holds %s, the guest's filesystems use %s)", units.BytesPtr(r.AllocatedBytes), units.BytesPtr(r.GuestUsedBytes))
	case discard.ReclaimNoAgent:
		return "unknown (no guest agent)"
	}
	return "unknown"
}

func allocText(r alloc.Result) string {
	if r.AllocatedBytes == nil {
		return "unmeasured"
	}
	return units.Bytes(*r.AllocatedBytes)
}

// printSampling says where a --wait window has gaps, or where it was cut.
func printSampling(e *env, s *discard.Sampling) {
	if s == nil {
		return
	}
	if len(s.Gaps) > 0 || s.Missed > 0 {
		var spans []string
		for _, g := range s.Gaps {
			spans = append(spans, fmt.Sprintf("%.1f-%.1f s", g.FromSeconds, g.ToSeconds))
		}
		fmt.Fprintf(e.out, "  %s %d of %d sample(s) missed (QMP busy or QEMU stopped)", e.paint(yellow, "gaps:"), s.Missed, s.Missed+s.Samples)
		if len(spans) > 0 {
			fmt.Fprintf(e.out, ", no sample at %s", strings.Join(spans, ", "))
		}
		fmt.Fprintln(e.out)
	}
	if s.Cut != "" {
		fmt.Fprintf(e.out, "  %s QEMU stopped answering %.1f s into the window (%s): counters until then\n", e.paint(red, "cut:"), s.CoveredSeconds, s.Cut)
	}
}
