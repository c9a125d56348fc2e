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
)

func init() { commands = append(commands, discardCommand) }

func discardCommand() *cli.Command {
	return &cli.Command{
		Name:      "discard",
		Usage:     "prove whether space the guest trims really goes back to the storage",
		ArgsUsage: "VMID [DISK...]",
		Description: `The guest cannot tell whether its trims free anything: every controller
advertises discard whatever the disk's setting, and fstrim reports what the
filesystem handed down, not what the storage freed. QEMU's device counters
(unmap_*) count discards even when QEMU drops them. Only the node can prove it:
the protocol block node's counters (what reached the storage) and the storage's
own allocation figure.

Without options (status), per disk: discard as configured and as the running
QEMU has it (and at the next start when pending), ssd emulation, whether the
controller passes discards, whether the storage is thin, the volume's virtual
size and allocated bytes, and since-start counters: discards the guest sent
(device unmap_*; VirtIO Block does not count them) and discards that reached
the storage (protocol node discard-nb-ok, discard-bytes-ok, discard-nb-failed).

Allocated bytes come from each storage's own tool:
   lvmthin                 lvs: data_percent x lv_size (0.01 % resolution),
                           plus the pool's size, use and discards mode
   dir, nfs, cifs, btrfs   raw: the file's allocated blocks (st_blocks);
                           qcow2: qemu-img info --force-share actual-size
   zfspool                 zfs get: referenced (usedbysnapshots, pool used);
                           a zfspool without sparse gives each zvol a
                           refreservation of its full size: the pool's free
                           space cannot grow whatever discard says (warned,
                           with zfs set refreservation=none and sparse 1)
   rbd                     rbd du: used_size
Other types (thick lvm, iscsi, ...) are reported as not measurable, with why.

--trim asks the guest to trim, through the guest agent (agent: 1 and
qemu-guest-agent running): everything above is measured, guest-fstrim runs
(up to --trim-timeout, with a progress line on a terminal), and everything is
measured again. Per disk: the guest says it trimmed X, QEMU received Y, the
storage accepted Z, the volume went from A to B bytes (returned = A - B), the
pool from P to Q, and a verdict:
   returned         the volume's allocation went down
   partly-returned  it went down, but snapshots (or a zvol's refreservation)
                    held it back from the pool, or the storage refused some
                    discards
   not-returned     it did not go down (exit 1)
   not-trimmed      the guest trimmed nothing there (no mounted filesystem on
                    the disk, or no discards seen): nothing to prove
   unmeasured       the storage's allocation cannot be read here
with the reasons that apply: discard=ignore (and the qm set that fixes it,
applied at the next full stop and start), the guest sent nothing (ext4 re-trims
only what changed since its last trim), the storage refused the discards, the
LVM-thin pool ignores discards, snapshots still hold the blocks, a zvol's
refreservation, discards smaller than the pool's chunk size, ranges that held
nothing, a guest filesystem spanning several disks.

--wait DURATION does the same without a guest agent: it measures, samples the
counters every second for DURATION while you run fstrim in the guest (e.g.
fstrim -av), and measures again. The guest's own figure is then unknown. Ticks
QEMU did not answer (socket held, QEMU stopped) are reported as gaps; the
counters are cumulative, so a verdict still stands on the whole window, and
says so. When QEMU stops answering for good (killed, or still stopped at the
window's end), what was measured until then is printed, with how much of the
window each verdict stands on, and the exit code is 3.

Changes: --trim runs guest-fstrim in the guest (it discards free space of
every mounted filesystem; the guest's data is untouched). Nothing else is
changed: no option, no config. Reads the config, storage.cfg, the running
QEMU's command line, the QMP socket (short exchanges), the guest agent socket
(--trim), and runs lvs / qemu-img / zfs / rbd with --timeout each.

EXAMPLES
   pvediskcheck discard 370
   pvediskcheck discard 370 scsi1 --trim
   pvediskcheck discard 370 --wait 2m        # run fstrim -av in the guest meanwhile
   pvediskcheck --json discard 370 --trim

` + exitcode.Help + `
   --trim/--wait: 1 when a disk's verdict is not-returned.
   2 for --wait or --trim-timeout that is not a positive duration.
   3 also when a tool (lvs, qemu-img, zfs, rbd) times out or fails, or a volume
   is missing from its report (checked before the guest is asked to trim), when
   the guest agent does not answer within --timeout (before anything is
   trimmed), guest-fstrim outlasts --trim-timeout, or QEMU stops answering
   during --wait. A stopped VM: the status shows the allocation without
   counters, exit 3.`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "trim", Usage: "ask the guest to trim (guest agent guest-fstrim) and prove what came back"},
			&cli.DurationFlag{Name: "wait", Usage: "watch for `DURATION` while fstrim runs in the guest (no guest agent needed), then prove what came back"},
			&cli.DurationFlag{Name: "trim-timeout", Value: discard.DefaultTrimTimeout, Usage: "how long guest-fstrim may take"},
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
		o.OnSample = discardWaitProgress(e)
	}
	rep, err := discard.Run(e.ctx(), e.node, v, sel, o)
	if o.OnSample != nil && o.Mode == discard.Wait {
		fmt.Fprint(e.errOut, "\r\x1b[K") // the progress line, however the window ended
	}
	if rep == nil {
		return err
	}
	if e.json {
		if jerr := e.printJSON(rep); jerr != nil {
			return jerr
		}
	} else {
		printDiscard(e, rep)
	}
	return err
}

// discardWaitProgress shows what a --wait window has seen, on a terminal.
func discardWaitProgress(e *env) func(discard.Progress) {
	first := true
	return func(p discard.Progress) {
		if first {
			fmt.Fprintf(e.errOut, "watching for %s: run fstrim in the guest now (e.g. fstrim -av)\n", p.Window)
			first = false
		}
		fmt.Fprintf(e.errOut, "\r\x1b[K%s left: QEMU received %s, storage accepted %s", max(p.Window-p.Elapsed, 0).Round(time.Second), units.Bytes(p.ReceivedBytes), units.Bytes(p.AcceptedBytes))
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
				fmt.Fprint(e.errOut, "\r\x1b[K")
				return
			case <-t.C:
				fmt.Fprintf(e.errOut, "\rguest-fstrim running in the guest: %s (gives up after %s)", time.Since(start).Round(time.Second), timeout)
			}
		}
	}()
	return func() { close(done); <-finished }
}

func printDiscard(e *env, out *discard.Report) {
	state := e.paint(green, "running")
	if !out.Running {
		state = e.paint(yellow, "not running")
	}
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
			for _, rs := range r.Reasons {
				fmt.Fprintf(e.out, "  - %s\n", rs.Text)
				if rs.Fix != "" {
					fmt.Fprintf(e.out, "    fix: %s\n", rs.Fix)
				}
			}
			continue
		}
		if len(d.Warnings) == 0 && d.Allocation.Pool == nil && d.Allocation.Unmeasured == "" {
			continue
		}
		fmt.Fprintf(e.out, "\n%s:\n", d.ID)
		if p := d.Allocation.Pool; p != nil {
			fmt.Fprintf(e.out, "  pool %s: %s of %s used (%s), discards %s\n", p.Name, units.BytesPtr(p.AllocatedBytes), units.Bytes(p.SizeBytes), units.PercentPtr(p.DataPercent), units.OrDash(p.Discards))
		}
		if d.Allocation.Unmeasured != "" {
			fmt.Fprintf(e.out, "  allocation not measurable: %s\n", d.Allocation.Unmeasured)
		}
		for _, w := range d.Warnings {
			fmt.Fprintf(e.out, "  %s %s\n", e.paint(yellow, "warning:"), w.Text)
			if w.Fix != "" {
				fmt.Fprintf(e.out, "    fix: %s\n", w.Fix)
			}
		}
	}
	for _, n := range out.Notes {
		fmt.Fprintln(e.out, "note: "+n)
	}
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
