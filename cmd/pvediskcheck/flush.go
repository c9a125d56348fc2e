package main

import (
	"fmt"
	"math"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/flush"
)

func init() { commands = append(commands, flushCommand) }

func flushCommand() *cli.Command {
	return &cli.Command{
		Name:        "flush",
		Usage:       "verify by measurement whether guest flushes are honoured or ignored",
		ArgsUsage:   "VMID [DISK...]",
		Description: helpText("flush"),
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "for", Value: flush.DefaultWindow, Usage: "measurement window"},
			&cli.Float64Flag{Name: "hz", Value: flush.DefaultHz, Usage: "samples per second (2-10)"},
			&cli.BoolFlag{Name: "trigger", Usage: "run sync in the guest through the guest agent at the start of the window"},
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
	o := flush.Options{Window: c.Duration("for"), Hz: c.Float64("hz"), Trigger: c.Bool("trigger"), OnSample: sampleHook(e)}
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
	if err := v.FetchLive(e.ctx(), e.timeout); err != nil {
		return exitcode.Unreachablef("%s", qmpErrMsg(vmid, err))
	}
	res, err := flush.Measure(e.ctx(), e.node, v, disks, o)
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
		}
	}
	if err != nil {
		return err
	}
	if res.Ignored() {
		return exitcode.ErrProblem
	}
	return nil
}

// printFlushSeries prints one row per second of the window (the deltas
// since the previous row), the last sample before each stretch without
// samples, that stretch, and the sample that closes the window.
func printFlushSeries(e *env, r *flush.Result) {
	t := newTable(e.out, "T(s)", "GUEST MiB W", "FLUSHES", "FLUSH ms", "DIRTY MiB", "WRITEBACK MiB")
	gaps := r.Gaps
	if len(r.Samples) > 0 {
		prev := r.Samples[0]
		lastRow := 0.0 // the second of the previous row
		for i, s := range r.Samples[1:] {
			for len(gaps) > 0 && gaps[0].ToS <= s.TimeS+0.05 {
				gapRow(t, gaps[0])
				gaps = gaps[1:]
			}
			// A sample read up to 50 ms early still stands for its second.
			sec := math.Floor(s.TimeS + 0.05)
			beforeGap := len(gaps) > 0 && math.Abs(gaps[0].FromS-s.TimeS) < 0.05
			closing := i == len(r.Samples)-2
			if sec <= lastRow && !beforeGap && !closing {
				continue // one row per second
			}
			label := fmt.Sprintf("%.0f", sec)
			if (beforeGap || closing) && s.TimeS-sec > 0.05 {
				label = fmt.Sprintf("%.1f", s.TimeS) // off the whole second: a gap or the end is next
			}
			var wr, fl, ft int64
			for id, d := range s.Disks {
				p := prev.Disks[id]
				wr += d.WrBytes - p.WrBytes
				fl += d.FlushOps - p.FlushOps
				ft += d.FlushTotalTimeNs - p.FlushTotalTimeNs
			}
			t.row(label, fmt.Sprintf("%.1f", float64(wr)/(1<<20)), fmt.Sprint(fl), fmt.Sprintf("%.2f", float64(ft)/1e6),
				fmt.Sprintf("%.1f", float64(s.DirtyBytes)/(1<<20)), fmt.Sprintf("%.1f", float64(s.WritebackBytes)/(1<<20)))
			prev, lastRow = s, math.Max(sec, lastRow)
		}
	}
	for _, g := range gaps {
		gapRow(t, g)
	}
	t.flush()
}

// gapRow is a table row for a stretch without samples: dashes in the
// columns (so they stay aligned) and what happened after them.
func gapRow(t *table, g flush.Gap) {
	t.row("gap", "-", "-", "-", "-", "-", fmt.Sprintf("no samples from %.1f to %.1f s (%d missed): %s", g.FromS, g.ToS, g.Missed, g.Why))
}
