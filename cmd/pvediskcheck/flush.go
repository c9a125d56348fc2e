package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/flush"
	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/units"
)

func init() {
	commands = append(commands, command{new: flushCommand, cluster: clusterRole{
		Forward: func(c *cli.Context) bool { return c.Bool("trigger") || c.Bool("histogram") },
	}})
}

func flushCommand() *cli.Command {
	return &cli.Command{
		Name:        "flush",
		Usage:       "verify by measurement whether guest flushes are honoured or ignored",
		ArgsUsage:   "VMID [DISK...]",
		Description: helpText("flush"),
		Flags: []cli.Flag{
			maxDuration(&cli.DurationFlag{Name: "for", Value: flush.DefaultWindow, Usage: "measurement window"}, flush.MaxWindow),
			maxFloat(&cli.Float64Flag{Name: "hz", Value: flush.DefaultHz, Usage: "samples per second (at least 2)"}, flush.MaxHz),
			&cli.BoolFlag{Name: "trigger", Usage: "run sync in the guest through the guest agent at the start of the window"},
			&cli.BoolFlag{Name: "histogram", Usage: "CHANGES QEMU STATE for the window: set latency histograms on the disks for flush and write p50/p95/p99 (one found set is used as it is); cleared after"},
		},
		Action: flushAction,
	}
}

func flushAction(c *cli.Context) error {
	e := newEnv(c)
	vmid, err := vmidArg(c)
	if err != nil {
		return err
	}
	o := flush.Options{Window: c.Duration("for"), Hz: c.Float64("hz"), Trigger: c.Bool("trigger"), OnSample: windowProgress(e, fmt.Sprintf("VM %d", vmid)), Histogram: c.Bool("histogram")}
	if err := flush.Validate(o.Window, o.Hz); err != nil {
		return err
	}
	v, err := loadVM(e, vmid)
	if err != nil {
		return err
	}
	disks, err := v.Select(c.Args().Tail())
	if err != nil {
		return err
	}
	if !v.Running {
		return exitcode.Unreachablef("VM %d is not running: flushes can only be measured on a running VM", vmid)
	}
	set := disk.Resolve(e.ctx(), e.node, v, disks, disk.Live, disk.Options{})
	if set.AskErr != nil {
		return exitcode.Unreachablef("%s", qmpErrMsg(vmid, set.AskErr))
	}
	res, err := flush.Measure(e.ctx(), e.node, set, o)
	endProgress(e)
	if len(res.Samples) == 0 {
		return err // nothing was measured: the error says why
	}
	if e.json {
		if err := e.printJSON(res); err != nil {
			return err
		}
	} else {
		printFlushSeries(e, res)
		for i := range res.Verdicts {
			fv := &res.Verdicts[i]
			fmt.Fprintf(e.out, "%s (%s):\n", fv.Disk, fv.Mode)
			printFlushVerdictLine(e, fv)
			if p, ok := res.Percentiles[fv.Disk]; ok {
				for _, k := range []latency.Kind{latency.Flush, latency.Write} {
					if p50, p95, p99 := p.Of(k); p50 != nil {
						fmt.Fprintf(e.out, "  %s latency p50 %s  p95 %s  p99 %s (histogram)\n", k, units.Duration(msDur(*p50)), units.Duration(msDur(*p95)), units.Duration(msDur(*p99)))
					}
				}
			}
		}
		if u := res.Unflushed; u != nil {
			fmt.Fprintln(e.out, "node RAM: "+u.Says)
		}
		for _, h := range res.Histograms {
			fmt.Fprintln(e.out, histogramNote(h))
		}
		e.histogramsLeft(res.HistogramsLeft)
		e.notes(v.IgnoredNotes())
	}
	if err != nil {
		return err
	}
	if res.Ignored() {
		return exitcode.ErrProblem
	}
	return nil
}

// printFlushSeries prints the series' rows (flush.Result.Rows): a stretch
// without samples has dashes in the columns (so they stay aligned) and
// says what happened.
func printFlushSeries(e *env, r *flush.Result) {
	t := newTable(e.out, "T(s)", "GUEST MiB W", "FLUSHES", "FLUSH ms", "DIRTY MiB", "WRITEBACK MiB")
	for _, row := range r.Rows() {
		if g := row.Gap; g != nil {
			t.row("gap", "-", "-", "-", "-", "-", fmt.Sprintf("no samples from %.1f to %.1f s (%d missed): %s", g.FromS, g.ToS, g.Missed, g.Why))
			continue
		}
		at := fmt.Sprintf("%.0f", row.TimeS)
		if !row.Whole {
			at = fmt.Sprintf("%.1f", row.TimeS)
		}
		t.row(at, fmt.Sprintf("%.1f", float64(row.WrittenBytes)/(1<<20)), fmt.Sprint(row.Flushes), fmt.Sprintf("%.2f", float64(row.FlushTimeNs)/1e6),
			fmt.Sprintf("%.1f", float64(row.DirtyBytes)/(1<<20)), fmt.Sprintf("%.1f", float64(row.WritebackBytes)/(1<<20)))
	}
	t.flush()
}
