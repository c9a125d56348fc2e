package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/bench"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/fioreport"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/storage/zfs"
	"github.com/pvediskcheck/pvediskcheck/units"

	"github.com/pvediskcheck/pvediskcheck/fio"
)

func init() {
	commands = append(commands, command{new: fioCommand, cluster: clusterRole{
		Local: "reads fio result files and names disks of the machine it runs on",
	}})
}

func fioCommand() *cli.Command {
	groupBy := &cli.StringFlag{Name: "group-by", Value: string(fio.GroupAuto),
		Usage: "which runs are repetitions of one test: auto, name, job or dir (see DESCRIPTION)"}
	csvFlag := &cli.BoolFlag{Name: "csv", Usage: "print CSV (raw numbers, units in the column names) instead of a table"}
	wide := &cli.BoolFlag{Name: "wide", Usage: "add min-max and the coefficient of variation to every table cell"}
	return &cli.Command{
		Name:        "fio",
		Usage:       "summarise and compare fio results with their run-to-run spread, or print Lab 19's job set",
		Description: helpText("fio"),
		Subcommands: []*cli.Command{
			{
				Name:        "summary",
				Usage:       "one row per test: mean and spread of IOPS, MiB/s, latency and fsync latency",
				ArgsUsage:   "DIR|FILE...",
				Description: helpText("fio-summary"),
				Flags: []cli.Flag{
					groupBy, csvFlag, wide,
					&cli.StringFlag{Name: "host-ram", Usage: "RAM of the host whose caches can serve the reads, e.g. 64G (default: this node's MemTotal; 0 skips the check)"},
				},
				Action: fioSummaryAction,
			},
			{
				Name:        "compare",
				Usage:       "A vs B per job and metric: difference, spread of each side, and whether it is more than noise",
				ArgsUsage:   "A B",
				Description: helpText("fio-compare"),
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "dir", Usage: "directory whose files hold labels A and B (Lab 19's ~/res)"},
					&cli.StringSliceFlag{Name: "metric", Usage: "metrics of interest: iops, bw, clat, lat, p99, fsync (default all)"},
					groupBy, csvFlag, wide, reportFlag(),
				},
				Action: fioCompareAction,
			},
			{
				Name:        "jobs",
				Usage:       "print Lab 19's job set as a fio job file for one VM disk",
				ArgsUsage:   "/dev/disk/by-id/DEVICE",
				Description: helpText("fio-jobs"),
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "label", Usage: "label in the result file names, naming the storage under test: letters, digits, -_.:+ (default: the drive name, e.g. scsi1)"},
					&cli.StringFlag{Name: "size", Value: "2G", Usage: "test area, in fio's units; larger than the node's RAM keeps caches out of the reads"},
					maxInt(&cli.IntFlag{Name: "runtime", Value: 20, Usage: "seconds measured per job"}, fio.MaxRuntimeS),
					maxInt(&cli.IntFlag{Name: "ramp", Value: 3, Usage: "seconds of ramp_time before measuring"}, fio.MaxRampS),
					maxInt(&cli.IntFlag{Name: "runs", Value: 3, Usage: "repetitions of every job (3 or more gives a CV and a p-value)"}, fio.MaxRuns),
				},
				Action: fioJobsAction,
			},
		},
	}
}

func fioSummaryAction(c *cli.Context) error {
	e := newEnv(c)
	if c.NArg() == 0 {
		return exitcode.Usagef("fio summary: name a directory or files (usage: pvediskcheck fio summary %s)", c.Command.ArgsUsage)
	}
	mode, err := fio.ParseGroupBy(c.String("group-by"))
	if err != nil {
		return err
	}
	if e.json && c.Bool("csv") {
		return exitcode.Usagef("fio summary: --json and --csv exclude each other")
	}
	ram, err := hostRAM(e, c.String("host-ram"))
	if err != nil {
		return err
	}
	sum, err := fio.Load(c.Args().Slice(), fio.Options{GroupBy: mode, HostRAMBytes: ram})
	if err != nil {
		return err
	}
	arc := nodeARC(e)
	switch {
	case e.json:
		err = e.printJSON(struct {
			fio.SummaryReport
			ARC *zfs.ARC `json:"arc,omitempty"`
		}{fio.SummaryReport{HostRAMBytes: ram, Summary: sum}, arc})
	case c.Bool("csv"):
		err = sum.WriteCSV(e.out)
		printWarningList(e.errOut, sum.NotSummarised())
	default:
		summaryTable(e, sum, c.Bool("wide"))
		if arc != nil {
			fmt.Fprintf(e.out, "\nZFS ARC on this node, since the zfs module loaded: %s of reads hit (%d hits, %d misses), %s held of %s at most: reads that fit in it come from node RAM, not from the disks\n",
				units.PercentPtr(arc.HitPercent), arc.Hits, arc.Misses, units.Bytes(arc.SizeBytes), units.Bytes(arc.MaxBytes))
		}
		printBenchSettings(e, c.Args().Slice())
	}
	if err != nil {
		return err
	}
	switch sum.Outcome {
	case fio.NothingUsable:
		return exitcode.Problemf("fio summary: no usable run in %s (%d not summarised, each named above)",
			strings.Join(c.Args().Slice(), " "), len(sum.Unreadable)+len(sum.Failed))
	case fio.Partial:
		return exitcode.ErrProblem
	}
	return nil
}

func fioCompareAction(c *cli.Context) error {
	e := newEnv(c)
	if c.NArg() != 2 {
		return exitcode.Usagef("fio compare: needs A and B (usage: pvediskcheck fio compare %s)", c.Command.ArgsUsage)
	}
	mode, err := fio.ParseGroupBy(c.String("group-by"))
	if err != nil {
		return err
	}
	if e.json && c.Bool("csv") {
		return exitcode.Usagef("fio compare: --json and --csv exclude each other")
	}
	metrics, err := fio.ParseMetrics(c.StringSlice("metric"))
	if err != nil {
		return err
	}
	report, err := checkReport(c)
	if err != nil {
		return err
	}
	sides, err := fio.LoadSides(c.Args().Get(0), c.Args().Get(1), c.String("dir"), fio.Options{GroupBy: mode})
	if err != nil {
		return err
	}
	rep := fio.CompareSides(c.Args().Get(0), c.Args().Get(1), sides, metrics)
	if err := writeReport(report, fioreport.HTML(fioreport.Compare(rep, sides))); err != nil {
		return err
	}
	switch {
	case e.json:
		err = e.printJSON(rep)
	case c.Bool("csv"):
		err = rep.WriteCSV(e.out)
		printWarningList(e.errOut, rep.Unreadable)
	default:
		compareTable(e, rep, c.Bool("wide"))
		printBenchSettings(e, []string{c.Args().Get(0), c.Args().Get(1), c.String("dir")})
	}
	if err != nil {
		return err
	}
	if rep.Different {
		return exitcode.ErrProblem
	}
	return nil
}

// printBenchSettings says what was measured, for the directories that
// `pvediskcheck bench` wrote (their settings file).
func printBenchSettings(e *env, dirs []string) {
	for _, d := range dirs {
		if d == "" {
			continue
		}
		if lines, ok := bench.ReadSettings(d); ok {
			fmt.Fprintf(e.out, "\nMeasured by pvediskcheck bench (%s):\n", filepath.Join(d, bench.SettingsFile))
			for _, l := range lines {
				fmt.Fprintf(e.out, "  %s\n", l)
			}
		}
	}
}

func fioJobsAction(c *cli.Context) error {
	e := newEnv(c)
	if c.NArg() != 1 {
		return exitcode.Usagef("fio jobs: name one disk (usage: pvediskcheck fio jobs %s)", c.Command.ArgsUsage)
	}
	js := fio.JobSet{Device: c.Args().First(), Label: c.String("label"), Size: c.String("size"),
		RuntimeS: c.Int("runtime"), RampS: c.Int("ramp"), Runs: c.Int("runs")}
	if js.Label == "" {
		js.Label = fio.DefaultLabel(js.Device)
	}
	if err := js.Validate(); err != nil {
		var inv *fio.InvalidError
		if errors.As(err, &inv) && inv.Field != "device" {
			return exitcode.Usagef("fio jobs: --%v", err) // the fields are the flags
		}
		return exitcode.Usagef("fio jobs: %v", err)
	}
	_, err := io.WriteString(e.out, js.JobFile())
	return err
}

// nodeARC is the node's ZFS ARC (PROC/spl/kstat/zfs/arcstats), evidence
// beside host RAM that reads may come from RAM: nil on a node without ZFS
// (no such file, said nowhere) or when the file cannot be read (said on
// stderr).
func nodeARC(e *env) *zfs.ARC {
	a, err := zfs.ReadARC(e.ctx(), e.node)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil
	case err != nil:
		fmt.Fprintf(e.errOut, "pvediskcheck: ZFS ARC unknown: %s: %v\n", zfs.ArcstatsPath(e.paths.Proc), err)
		return nil
	}
	return &a
}

// hostRAM is --host-ram, else MemTotal from PROC/meminfo; 0 when unknown.
func hostRAM(e *env, flag string) (int64, error) {
	if flag != "" {
		n, ok := fio.ParseSize(flag)
		if !ok {
			return 0, exitcode.Usagef("--host-ram %q: expected a size such as 64G", flag)
		}
		return n, nil
	}
	if m, err := (sampler.Host{Proc: e.paths.Proc, Sys: e.paths.Sys}).Memory(); err == nil && m.TotalBytes > 0 {
		return m.TotalBytes, nil
	}
	fmt.Fprintf(e.errOut, "pvediskcheck: host RAM unknown (no MemTotal in %s/meminfo): area-below-ram not checked; give --host-ram\n", e.paths.Proc)
	return 0, nil
}

// cell is "44,289 (±3%)"; wide adds "43,625-44,953 cv 2.1%". scale divides
// the values (1000: ns to µs).
func cell(s *fio.Stat, scale float64, wide bool) string {
	if s == nil || s.N == 0 {
		return "-"
	}
	out := units.Grouped(s.Mean / scale)
	if s.N > 1 {
		out += " (±" + units.PercentWhole(s.SpreadPct) + ")"
	}
	if wide && s.N > 1 {
		out += " " + units.Grouped(s.Min/scale) + "-" + units.Grouped(s.Max/scale)
		if s.CVPct != nil {
			out += " cv " + units.PercentWhole(*s.CVPct)
		}
	}
	return out
}

func p99Title(gs []fio.Group) string {
	for _, g := range gs {
		if g.P99Of == "lat" {
			return "P99 µs"
		}
	}
	return "CLAT P99 µs"
}

func p99Cell(g *fio.Group, title string, wide bool) string {
	c := cell(g.P99Ns, 1000, wide)
	if title == "P99 µs" && g.P99Ns != nil {
		c += " " + g.P99Of
	}
	return c
}

func summaryTable(e *env, sum *fio.Summary, wide bool) {
	if len(sum.Groups) == 0 {
		printWarningList(e.out, sum.NotSummarised())
		return
	}
	p99 := p99Title(sum.Groups)
	t := newTable(e.out, "LABEL", "JOB", "WORKLOAD", "I/O", "RUNS", "IOPS", "MiB/s", "CLAT MEAN µs", p99, "FSYNC MEAN µs")
	for i := range sum.Groups {
		g := &sum.Groups[i]
		t.row(units.OrDash(g.Label), g.Job, g.Workload, g.Dir, strconv.Itoa(g.Runs()),
			cell(&g.IOPS, 1, wide), cell(&g.BandwidthMiBps, 1, wide), cell(g.ClatMeanNs, 1000, wide),
			p99Cell(g, p99, wide), cell(g.FsyncMeanNs, 1000, wide))
	}
	t.flush()
	if len(sum.Groups) > 0 {
		fmt.Fprintln(e.out, "(±N%: gap between the slowest and the fastest run, in % of the mean)")
	}
	// Each distinct warning once, with where it applies.
	if ws := sum.WarningUses(); len(ws) > 0 {
		fmt.Fprintln(e.out, "\nWarnings (Lab 19's pitfalls):")
		for _, w := range ws {
			fmt.Fprintf(e.out, "  %s: %s\n      %s\n", w.Code, w.Message, w.Where)
		}
	}
	printWarningList(e.out, sum.NotSummarised())
}

// printWarningList lists the files not read and the runs not summarised.
func printWarningList(w io.Writer, ws []fio.Warning) {
	if len(ws) == 0 {
		return
	}
	files := 0
	for _, u := range ws {
		if u.Code == fio.WarnUnreadable {
			files++
		}
	}
	var parts []string
	if files > 0 {
		parts = append(parts, fmt.Sprintf("%d unreadable files", files))
	}
	if runs := len(ws) - files; runs > 0 {
		parts = append(parts, fmt.Sprintf("%d runs failed or without I/O", runs))
	}
	fmt.Fprintf(w, "\nNot summarised (%s):\n", strings.Join(parts, ", "))
	for _, u := range ws {
		fmt.Fprintf(w, "  warning: %s\n", u.Message)
	}
}

func compareTable(e *env, rep *fio.CompareReport, wide bool) {
	fmt.Fprintf(e.out, "A = %s\nB = %s\n\n", rep.A, rep.B)
	t := newTable(e.out, "JOB", "I/O", "METRIC", "A", "B", "B vs A", "VERDICT", "P (Welch)")
	// A job compared for several option sets is named with its workload.
	sets := map[string]map[string]bool{}
	for _, r := range rep.Rows {
		if sets[r.Job+" "+r.Dir] == nil {
			sets[r.Job+" "+r.Dir] = map[string]bool{}
		}
		sets[r.Job+" "+r.Dir][r.Workload] = true
	}
	for _, r := range rep.Rows {
		job := r.Job
		if len(sets[r.Job+" "+r.Dir]) > 1 {
			job += " (" + r.Workload + ")"
		}
		title, scale := r.Title(), 1.0
		if r.Metric != "iops" && r.Metric != "bw" {
			scale = 1000
		}
		p := "-"
		if r.PValue != nil {
			p = strconv.FormatFloat(*r.PValue, 'g', 2, 64)
		}
		verdict := string(r.Verdict)
		if r.Better != "" {
			verdict += ", " + r.Better + " better"
		}
		ra, rb := r.A, r.B
		t.row(job, r.Dir, title, fmt.Sprintf("%s n=%d", cell(&ra, scale, wide), r.A.N),
			fmt.Sprintf("%s n=%d", cell(&rb, scale, wide), r.B.N), fmt.Sprintf("%+.1f%%", r.DiffPct), verdict, p)
	}
	t.flush()
	e.notes(rep.Notes)
	printWarningList(e.out, rep.Unreadable)
	if rep.Different {
		fmt.Fprintln(e.out, "\nAt least one metric differs by more than the spread between runs.")
	} else {
		fmt.Fprintln(e.out, "\nNo metric differs by more than the spread between runs.")
	}
}
