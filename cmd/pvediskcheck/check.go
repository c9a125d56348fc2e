package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/units"
)

func init() { commands = append(commands, checkCommand) }

func checkCommand() *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "find disk settings that will fail, are ignored, are risky, or differ from what runs",
		ArgsUsage: "[VMID...]",
		Description: `Reads every named VM (or, with --all, every VM config on this node, running or
not) and reports, before the next restart:
   error    will fail to start, loses data the guest believes safe, or has
            stopped the VM
   warning  silently ignored, risky, slow or wasteful
   info     worth knowing (a pending change waiting for a restart)
Each finding has a stable code, the disk, one sentence of why and, where a
command fixes it, that command: one 'qm set' per disk that fixes everything
found on that disk while keeping its other options (and says when it needs a
full stop and start: 'qm reboot', not a reboot inside the guest).

Codes: aio-native-needs-direct, iothread-ignored, ssd-unsupported,
config-invalid, discard-ignored-on-thin, cache-unsafe, cache-writeback,
emulated-controller, limit-invalid, aio-io-uring-risk, io-error,
thin-overcommit, pending-restart, drift.

Rules apply where their option exists and does something: an EFI vars disk
(efidisk0) has no cache, aio, discard or limits; a read-only disk (ro=1, a
CD-ROM) loses nothing to its cache mode and frees nothing by discard.
aio-io-uring-risk: an explicit aio=io_uring where qemu-server avoids it
(krbd without O_DIRECT, plain LVM, CIFS). io-error: a VM that an I/O error
has paused (no space left, or a failing storage), with the disk and its
storage's use. thin-overcommit: the disk's LVM-thin or ZFS pool, with the
figures and thresholds of 'pvediskcheck thin' (thin snapshots count).

Drift compares, per disk, what the running QEMU was started with (and what
QMP reports live) with what Proxmox's own rules derive from the config:
cache.direct, cache.no-flush, write-cache, aio, discard, detect-zeroes,
iothread and limits.

Works on a copied tree (a support bundle) with --root: without a QMP socket
it says which checks needed it. A QMP socket that is there but busy or
silent is exit 3, with the report and the checks that did not run. Changes
nothing.

EXAMPLES
   pvediskcheck check 370
   pvediskcheck check --all --json
   pvediskcheck check 370 --next-start     # also compare with 'qm showcmd'

` + exitcode.Help + `
   (1 means any warning or error; --fail-on error only counts errors.
   2 also for a --root that is not a Proxmox VE node or a config that cannot
   be read; 3 when a running VM's state could not be read.)`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "all", Usage: "check every VM config on this node"},
			&cli.StringFlag{Name: "fail-on", Value: "warning", Usage: "lowest severity that makes the exit code 1: warning or error"},
			&cli.BoolFlag{Name: "next-start", Usage: "also parse 'qm showcmd VMID' and list what changes at the next start"},
			&cli.IntFlag{Name: "parallel", Value: 8, Usage: "VMs checked at once with --all"},
		},
		Action: checkAction,
	}
}

func checkAction(c *cli.Context) error {
	e := newEnv(c)
	failOn, err := check.ParseSeverity(c.String("fail-on"))
	if err != nil {
		return err
	}
	ids, err := check.Targets(e.paths, c.Args().Slice(), c.Bool("all"))
	if err != nil {
		return err
	}
	rep := check.Run(e.ctx(), e.node, ids, check.Options{NextStart: c.Bool("next-start"), Parallel: c.Int("parallel")})
	if e.json {
		if err := e.printJSON(rep); err != nil {
			return err
		}
	} else {
		printCheck(e, rep)
	}
	if err := rep.Err(); err != nil {
		return err
	}
	if rep.Fails(failOn) {
		return exitcode.ErrProblem
	}
	return nil
}

func printCheck(e *env, rep *check.Report) {
	for _, v := range rep.VMs {
		state := "stopped"
		if v.Running {
			state = "running"
		}
		fmt.Fprintf(e.out, "VM %d (%s): %d finding(s)\n", v.VMID, state, len(v.Findings))
		lastFix := ""
		for _, f := range v.Findings {
			color := ""
			switch f.Severity {
			case check.Error:
				color = red
			case check.Warning:
				color = yellow
			}
			fmt.Fprintf(e.out, "  %s %s %s: %s\n", e.paint(color, strings.ToUpper(string(f.Severity))), f.Code, units.OrDash(f.Disk), f.Message)
			switch {
			case f.Fix == "":
			case f.Fix == lastFix && f.Command != nil:
				fmt.Fprintf(e.out, "      fix: the same command as above\n")
			default:
				fmt.Fprintf(e.out, "      fix: %s\n", f.Fix)
			}
			lastFix = f.Fix
		}
		if len(v.NotChecked) > 0 {
			names := make([]string, len(v.NotChecked))
			for i, c := range v.NotChecked {
				names[i] = string(c)
			}
			fmt.Fprintf(e.out, "  not checked: %s\n", strings.Join(names, ", "))
		}
		for _, n := range v.Notes {
			fmt.Fprintf(e.out, "  note: %s\n", n)
		}
	}
	s := rep.Summary
	fmt.Fprintf(e.out, "%d VM(s) checked: %d error(s), %d warning(s), %d info\n", s.VMs, s.Errors, s.Warnings, s.Infos)
}
