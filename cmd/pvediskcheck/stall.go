package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/outfile"
	"github.com/pvediskcheck/pvediskcheck/stall"
	"github.com/pvediskcheck/pvediskcheck/units"
)

func init() {
	commands = append(commands, command{new: stallCommand, cluster: clusterRole{
		// Reads QEMU, procfs and sysfs of the VM's node and writes the
		// folder there: nothing of the VM changes.
		Forward: func(c *cli.Context) bool { return false },
	}})
}

func stallCommand() *cli.Command {
	return &cli.Command{
		Name:        "stall",
		Usage:       "keep the evidence of a hung disk before anyone restarts the VM: QEMU's state, blocked threads, devices",
		ArgsUsage:   "VMID [DISK...]",
		Description: helpText("stall"),
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "out", Value: ".", TakesFile: true, Usage: "`DIR` under which the capture's own folder is made (the oldest captures there are removed beyond " + captureBound + ")"},
			stallAfterFlag(),
		},
		Action: stallAction,
	}
}

// stallAfterFlag is --stall-after of top, metrics, check and stall.
func stallAfterFlag() cli.Flag {
	return maxDuration(&cli.DurationFlag{Name: "stall-after", Value: stall.DefaultAfter,
		Usage:  "a disk with requests outstanding that completes none for this long is stalled (at least 1s)",
		Action: func(_ *cli.Context, d time.Duration) error { return stall.ValidateAfter(d) }}, stall.MaxAfter)
}

// captureBound is what a capture folder keeps, as the help says it.
var captureBound = fmt.Sprintf("%d captures or %d MiB", stall.MaxKept, stall.MaxKeptBytes>>20)

// captureFlag is --capture of top and metrics. (Its usage names no value
// in backquotes: urfave/cli takes the first backquoted word for the
// value's name, which made it "--capture pvediskcheck stall".)
func captureFlag() cli.Flag {
	return &cli.StringFlag{Name: "capture", TakesFile: true, Usage: "keep the evidence of each stall (once per disk and stall) in a new folder under `DIR`, as pvediskcheck stall does (the oldest captures there are removed beyond " + captureBound + ")"}
}

// stallKeeper is --capture's keeper (nil without --capture), its folder
// checked before anything is sampled; captures are reported on stderr,
// the sample output stays the command's.
func stallKeeper(c *cli.Context, e *env) (*stall.Keeper, error) {
	if !c.IsSet("capture") {
		return nil, nil
	}
	out, err := outfile.CheckParent("capture", c.String("capture"))
	if err != nil {
		return nil, err
	}
	return &stall.Keeper{Out: out, After: c.Duration("stall-after"), OnCapture: func(cp *stall.Captured, err error) {
		if err != nil {
			fmt.Fprintf(e.errOut, "capture: %v\n", err)
			return
		}
		fmt.Fprintf(e.errOut, "captured VM %d's stall in %s (%d files, %d bytes%s)\n", cp.VMID, units.Printable(cp.Dir), cp.Files, cp.Bytes, removedNote(cp))
	}}, nil
}

// removedNote says how many old captures made room for this one.
func removedNote(cp *stall.Captured) string {
	if len(cp.Removed) == 0 {
		return ""
	}
	return fmt.Sprintf("; the %d oldest capture(s) there removed, beyond %s", len(cp.Removed), captureBound)
}

func stallAction(c *cli.Context) error {
	e := newEnv(c)
	vmid, err := vmidArg(c)
	if err != nil {
		return err
	}
	if err := e.paths.CheckNode(); err != nil {
		return err
	}
	out, err := outfile.CheckParent("out", c.String("out"))
	if err != nil {
		return err
	}
	defer out.Close()
	cp, err := stall.Capture(e.ctx(), e.node, vmid, stall.CaptureOptions{Out: out, After: c.Duration("stall-after"),
		Disks: c.Args().Tail(), Confirm: stall.ConfirmGap})
	if err != nil {
		return err
	}
	return show(e, cp, printCapture)
}

func printCapture(e *env, cp *stall.Captured) {
	fmt.Fprintf(e.out, "VM %d: %d files, %d bytes in %s\n", cp.VMID, cp.Files, cp.Bytes, units.Printable(cp.Dir))
	if n := removedNote(cp); n != "" {
		fmt.Fprintf(e.out, "  %s\n", strings.TrimPrefix(n, "; "))
	}
	for _, v := range cp.Verdicts {
		state := "not stalled"
		if v.Stalled {
			state = e.paint(red, fmt.Sprintf("STALLED for %g s", v.StalledSeconds))
		}
		fmt.Fprintf(e.out, "  %s (%s): %s", v.Disk, units.OrDash(v.Storage), state)
		if s := v.Summary(); s != "" {
			fmt.Fprintf(e.out, ": %s", s)
		}
		fmt.Fprintln(e.out)
	}
	if len(cp.NotRead) > 0 {
		fmt.Fprintf(e.out, "not read:\n  %s\n", strings.Join(cp.NotRead, "\n  "))
	}
	e.histogramsLeft(cp.HistogramsLeft)
}
