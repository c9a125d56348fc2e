package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/cache"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/flush"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/units"
)

func init() { commands = append(commands, cacheCommand) }

func cacheCommand() *cli.Command {
	return &cli.Command{
		Name:        "cache",
		Usage:       "show the cache mode each disk really runs with, and what a host crash loses",
		ArgsUsage:   "VMID [DISK...]",
		Description: helpText("cache"),
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "verify", Usage: "also measure whether flushes are honoured (disks whose writes can wait in node RAM; takes --for)"},
			&cli.DurationFlag{Name: "for", Value: flush.DefaultWindow, Usage: "measurement window for --verify"},
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
	var liveErr error
	if v.Running {
		liveErr = v.FetchLive(e.ctx(), e.timeout)
	}
	out := cache.Build(v, disks, liveErr)
	cache.GuestNames(e.ctx(), v, e.timeout, &out)
	var verifyErr error
	if ids := cache.ToVerify(out); c.Bool("verify") && v.Running && liveErr == nil && len(ids) > 0 {
		sel, err := v.Select(ids)
		if err != nil {
			return err
		}
		res, err := flush.Measure(e.ctx(), e.node, v, sel, flush.Options{Window: window, Trigger: c.Bool("trigger"), OnSample: sampleHook(e)})
		endProgress(e)
		out.Attach(res)
		verifyErr = err
	}
	if e.json {
		if err := e.printJSON(out); err != nil {
			return err
		}
	} else {
		printCache(e, out)
	}
	switch {
	case !v.Running:
		return exitcode.Unreachablef("VM %d is not running", vmid)
	case liveErr != nil:
		return exitcode.Unreachablef("%s", qmpErrMsg(vmid, liveErr))
	case verifyErr != nil:
		return verifyErr
	case out.Ignored():
		return exitcode.ErrProblem
	}
	return nil
}

func printCache(e *env, out cache.View) {
	state := e.liveState(out.Running)
	gen := "-blockdev"
	if !out.Blockdev {
		gen = "-drive (machine < 10.0)"
	}
	fmt.Fprintf(e.out, "VM %d: %s, %s\n", out.VMID, state, gen)
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
	type group struct {
		mode, kind, acked, loses string
		ids                      []string
	}
	var order []string
	groups := map[string]*group{}
	for _, d := range out.Disks {
		g := groups[d.Heading]
		if g == nil {
			g = &group{mode: d.Shown, kind: d.Kind, acked: d.AckedDataIn, loses: d.CrashLoses}
			groups[d.Heading] = g
			order = append(order, d.Heading)
		}
		g.ids = append(g.ids, d.ID)
	}
	for _, h := range order {
		g := groups[h]
		color := ""
		switch {
		case g.kind != qemuserver.KindDisk.String(): // CD-ROMs, EFI vars, TPM state
		case g.mode == "unsafe" || g.mode == "custom":
			color = red
		case g.mode == "writeback":
			color = yellow
		}
		fmt.Fprintf(e.out, "%s (%s):\n", e.paint(color, h), strings.Join(g.ids, ", "))
		fmt.Fprintf(e.out, "  acknowledged writes sit in: %s\n", g.acked)
		fmt.Fprintf(e.out, "  a host crash loses:         %s\n", g.loses)
	}
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
