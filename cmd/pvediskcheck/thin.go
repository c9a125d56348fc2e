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
		Name:      "thin",
		Usage:     "report thin pools: use, overcommit, and which volumes hold the space",
		ArgsUsage: "[STORAGE...]",
		Description: `For each LVM-thin storage of storage.cfg (and each zfspool storage), or the
ones named: the pool's size, data and metadata use, the sum of its thin
volumes' virtual sizes and the overcommit ratio (what 'qm create' warns about:
"Sum of all thin volume sizes exceeds the size of thin pool"), and per volume:
the VM or container and disk that use it, virtual size, allocated bytes, discard
on or off, and its snapshots; sorted by allocated bytes, biggest first.

Thin snapshots count toward overcommit, as lvm2 counts them: each can come to
hold its full size once it or its origin is rewritten. Their share is shown
on its own. 'pvediskcheck check' judges a VM's pools with the same figures.

Warnings: data or metadata use at 80 % or more (at 100 % data a thin pool stops
writes; at 100 % metadata it can be damaged), virtual sizes above the pool's
size, a pool that ignores discards, and volumes of at least 1 GiB (or 10 % of
the pool) with discard off, whose trimmed space never comes back (see
'pvediskcheck discard').

Volumes are matched to VMs through /etc/pve/qemu-server/*.conf and
/etc/pve/lxc/*.conf on this node; a volume no config names is "unreferenced"
(a leftover, or a guest of another node on shared storage).

Changes nothing. Runs lvs (LVM-thin) and zfs list/get (zfspool) once each,
with --timeout.

EXAMPLES
   pvediskcheck thin
   pvediskcheck thin local-lvm --json

` + exitcode.Help + `
   1 when a pool's data or metadata use is at or above 90 %.
   2 when the root has no storage.cfg (not a Proxmox VE node), or a named
     storage is unknown or not a thin pool.
   3 when lvs or zfs fails or times out, or a pool is missing from its report.`,
		Action: thinAction,
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
