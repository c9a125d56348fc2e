package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/cache"
	"github.com/pvediskcheck/pvediskcheck/flush"
	"github.com/pvediskcheck/pvediskcheck/units"
)

func init() {
	commands = append(commands, command{new: cacheCommand, cluster: clusterRole{
		Forward: func(c *cli.Context) bool { return c.Bool("verify") && c.Bool("trigger") },
	}})
}

func cacheCommand() *cli.Command {
	return &cli.Command{
		Name:        "cache",
		Usage:       "show the cache mode each disk really runs with, and what a host crash loses",
		ArgsUsage:   "VMID [DISK...]",
		Description: helpText("cache"),
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "verify", Usage: "also measure whether flushes are honoured (disks whose writes can wait in node RAM; takes --for)"},
			maxDuration(&cli.DurationFlag{Name: "for", Value: flush.DefaultWindow, Usage: "measurement window for --verify"}, flush.MaxWindow),
			&cli.BoolFlag{Name: "trigger", Usage: "with --verify: run sync in the guest through the guest agent at the start"},
		},
		Action: cacheAction,
	}
}

func cacheAction(c *cli.Context) error {
	e := newEnv(c)
	vmid, err := vmidArg(c)
	if err != nil {
		return err
	}
	window := c.Duration("for")
	if c.Bool("verify") {
		if err := flush.Validate(window, flush.DefaultHz); err != nil {
			return err
		}
	}
	v, err := loadVM(e, vmid)
	if err != nil {
		return err
	}
	disks, err := v.Select(c.Args().Tail())
	if err != nil {
		return err
	}
	out, err := cache.Run(e.ctx(), e.node, v, disks, c.Bool("verify"), flush.Options{Window: window, Trigger: c.Bool("trigger"), OnSample: windowProgress(e, fmt.Sprintf("VM %d", vmid))})
	if c.Bool("verify") {
		endProgress(e)
	}
	if out == nil {
		return err
	}
	if err := show(e, *out, printCache); err != nil {
		return err
	}
	return err
}

func printCache(e *env, out cache.View) {
	state := e.liveState(out.Running)
	gen := "-blockdev"
	if !out.Blockdev {
		gen = "-drive (machine < 10.0)"
	}
	head := fmt.Sprintf("VM %d: %s, %s", out.VMID, state, gen)
	if out.QEMU != nil {
		head += ", QEMU " + out.QEMU.String()
	}
	fmt.Fprintln(e.out, head)
	t := newTable(e.out, "DISK", "CONTROLLER", "VOLUME", "CONFIG", "RUNNING", "NEXT START", "AIO", "IOTHREAD")
	for _, d := range out.Disks {
		cfg := units.OrDash(d.Cache.Configured)
		if d.Cache.ConfiguredDefault {
			cfg += " (default)"
		}
		run := "-"
		if d.Cache.Effective != nil {
			run = *d.Cache.Effective
			if *d.Cache.Effective == "unsafe" {
				run += " (ignores flushes)"
			}
		}
		next := "-"
		if d.Cache.Pending != nil {
			next = *d.Cache.Pending + " (pending)"
		}
		t.row(d.ID, units.OrDash(d.Controller), units.OrDash(d.Volume), cfg, run, next, units.OrDash(d.AIO), units.OnOff(d.IOThread))
	}
	t.flush()
	fmt.Fprintln(e.out)
	// The two sentences once per heading, then what is particular to a disk.
	for _, h := range out.Headings() {
		color := map[cache.Risk]string{cache.RiskFlushed: red, cache.RiskUnflushed: yellow}[h.Risk]
		fmt.Fprintf(e.out, "%s (%s):\n", e.paint(color, h.Title), strings.Join(h.Disks, ", "))
		fmt.Fprintf(e.out, "  acknowledged writes sit in: %s\n", h.AckedDataIn)
		fmt.Fprintf(e.out, "  a host crash loses:         %s\n", h.CrashLoses)
	}
	printUnflushed(e, out.Unflushed)
	for _, d := range out.Disks {
		guest := d.GuestLine()
		if len(d.Lines) == 0 && d.Flush == nil && guest == "" {
			continue
		}
		fmt.Fprintf(e.out, "%s:\n", d.ID)
		if guest != "" {
			fmt.Fprintln(e.out, "  "+guest)
		}
		for _, l := range d.Lines {
			if l.Drift {
				fmt.Fprintln(e.out, "  "+e.paint(red, "DRIFT")+" "+l.Text)
			} else {
				fmt.Fprintln(e.out, "  "+l.Text)
			}
		}
		if d.Flush != nil {
			printFlushVerdictLine(e, d.Flush)
		}
	}
	e.notes(out.Notes)
}

// printUnflushed is the VM's page cache in node RAM (its cgroup), coloured
// by the mode that puts it there.
func printUnflushed(e *env, u *cache.Unflushed) {
	if u == nil {
		return
	}
	color := map[cache.Risk]string{cache.RiskFlushed: red, cache.RiskUnflushed: yellow}[u.Risk]
	if !u.Measured {
		color = ""
	}
	fmt.Fprintf(e.out, "%s\n", e.paint(color, u.Says))
	if u.Verify != nil {
		fmt.Fprintln(e.out, "  over the --verify window: "+u.Verify.Says)
	}
	if p := u.IOPressure; p != nil {
		fmt.Fprintf(e.out, "  io pressure (last 10 s): some %s, full %s; waited %s in all\n", units.PercentWhole(p.SomeAvg10), units.PercentWhole(p.FullAvg10), units.Duration(time.Duration(p.SomeTotalUs)*time.Microsecond))
	}
}
