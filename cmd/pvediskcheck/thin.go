package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
	"github.com/pvediskcheck/pvediskcheck/units"
)

func init() { commands = append(commands, thinCommand) }

func thinCommand() *cli.Command {
	return &cli.Command{
		Name:        "thin",
		Usage:       "report thin pools: use, overcommit, and which volumes hold the space",
		ArgsUsage:   "[STORAGE...]",
		Description: helpText("thin"),
		Action:      thinAction,
	}
}

func thinAction(c *cli.Context) error {
	e := newEnv(c)
	if err := e.paths.CheckNode(); err != nil {
		return err
	}
	rep, err := thinpool.Measure(e.ctx(), e.node, c.Args().Slice())
	if err != nil {
		return err
	}
	if e.json {
		if err := e.printJSON(rep); err != nil {
			return err
		}
	} else {
		printThin(e, rep)
	}
	if rep.Failing() {
		return exitcode.ErrProblem
	}
	return nil
}

func printThin(e *env, rep *thinpool.Report) {
	for i, p := range rep.Pools {
		if i > 0 {
			fmt.Fprintln(e.out)
		}
		color := ""
		switch thinpool.UseLevel(p.DataPercent) {
		case thinpool.LevelFailure:
			color = red
		case thinpool.LevelWarning:
			color = yellow
		}
		fmt.Fprintf(e.out, "%s (%s %s): %s of %s used (%s)", p.Storage, p.Type, p.Pool, units.BytesPtr(p.AllocatedBytes), units.Bytes(p.SizeBytes), e.paint(color, units.PercentPtr(p.DataPercent)))
		if p.MetadataPercent != nil {
			fmt.Fprintf(e.out, ", metadata %s", units.PercentPtr(p.MetadataPercent))
		}
		if p.Discards != "" {
			fmt.Fprintf(e.out, ", discards %s", p.Discards)
		}
		snaps := ""
		if p.SnapshotVirtualBytes > 0 {
			snaps = fmt.Sprintf(" (%s of them thin snapshots)", units.Bytes(p.SnapshotVirtualBytes))
		}
		fmt.Fprintf(e.out, "\n  thin volumes: %d, virtual sizes %s%s, overcommit %.2fx\n", len(p.Volumes), units.Bytes(p.VirtualSumBytes), snaps, p.OvercommitRatio)
		t := newTable(e.out, "  VOLUME", "GUEST", "DISK", "VIRTUAL", "ALLOCATED", "USE", "DISCARD", "SNAPSHOTS")
		for _, v := range p.Volumes {
			guest := v.Guest
			if v.VMID != 0 {
				guest = fmt.Sprintf("%s %d", v.Guest, v.VMID)
				if v.Guest == thinpool.GuestUnreferenced {
					guest = fmt.Sprintf("unreferenced (%d?)", v.VMID)
				}
			}
			snaps := "-"
			if len(v.Snapshots) > 0 {
				snaps = strings.Join(v.Snapshots, ",")
			}
			t.row("  "+v.Name, guest, units.OrDash(v.Disk), units.Bytes(v.VirtualBytes), units.BytesPtr(v.AllocatedBytes), units.PercentPtr(v.DataPercent), v.Discard, snaps)
		}
		t.flush()
		for _, w := range p.Warnings {
			fmt.Fprintf(e.out, "  %s %s\n", e.paint(yellow, "warning:"), w.Text)
			if w.Fix != "" {
				fmt.Fprintf(e.out, "    fix: %s\n", w.Fix)
			}
		}
	}
	for _, n := range rep.Notes {
		fmt.Fprintln(e.out, "note: "+n)
	}
}
