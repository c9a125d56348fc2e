package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/bench"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/fio"
	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/layers"
	"github.com/pvediskcheck/pvediskcheck/outfile"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/units"
)

func init() {
	commands = append(commands, command{new: benchCommand, cluster: clusterRole{
		Forward: func(c *cli.Context) bool { return !c.Bool("dry-run") },
		Runs:    benchRuns,
	}})
}

func benchCommand() *cli.Command {
	jobsFlags := (&fileFlag{
		StringFlag: &cli.StringFlag{Name: "jobs", TakesFile: true, Usage: "your own fio job `FILE` instead of Lab 19's set (options of how to do I/O, by their whole names; the target and the area are bench's)"},
		max:        bench.MaxJobFileBytes,
		check:      func(name string, b []byte) error { _, err := bench.ParseJobFile(name, string(b)); return err },
	}).flags()
	return &cli.Command{
		Name:        "bench",
		Usage:       "run Lab 19's fio method in the guest through the guest agent, with the node's evidence next to each number",
		ArgsUsage:   "VMID DISK...",
		Description: helpText("bench"),
		Flags: []cli.Flag{
			maxInt(&cli.IntFlag{Name: "runs", Value: bench.DefaultRuns, Usage: "repetitions of each timed job (interleaved across disks; at least 1)"}, bench.MaxRuns),
			maxDuration(&cli.DurationFlag{Name: "runtime", Value: bench.DefaultRuntime, Usage: "measured time per timed job (whole seconds)"}, bench.MaxRuntime),
			maxDuration(&cli.DurationFlag{Name: "ramp", Value: bench.DefaultRamp, Usage: "fio ramp_time before each timed job is measured"}, bench.MaxRamp),
			&cli.StringFlag{Name: "size", Value: bench.DefaultSize, Usage: "test area per disk (fio size=)"},
			&cli.StringSliceFlag{Name: "job", Usage: "run only this job (repeatable; default: every job)"},
			jobsFlags[0], jobsFlags[1],
			&cli.BoolFlag{Name: "no-precondition", Usage: "skip the fill job that writes the area before the timed jobs"},
			&cli.StringSliceFlag{Name: "destroy", Usage: "write over `DISK` even if it holds data (its exact key; repeatable)"},
			&cli.StringSliceFlag{Name: "file-in", Usage: "test a file on the guest filesystem mounted at `MOUNTPOINT` (repeatable)"},
			&cli.StringFlag{Name: "out", TakesFile: true, Usage: "results `DIR`, a new folder the run makes (mode 0700; default ./bench-VMID-TIMESTAMP-RANDOM)"},
			reportFlag(),
			&cli.BoolFlag{Name: "histogram", Usage: "CHANGES QEMU STATE for the bench: set latency histograms on the disks measured and give QEMU's p50/p95/p99 per job beside fio's (one found set is used as it is); cleared after"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the plan, its time and the exact fio command lines; write nothing"},
		},
		Action: benchAction,
	}
}

// benchFillMiBps is the rate a forwarded run allows each fill pass (one
// write of --size): a slow storage's.
const benchFillMiBps = 10

// benchRuns bounds a forwarded bench: every timed step twice over (fio's
// start, the agent's polls, the node's samples), plus each fill at
// benchFillMiBps.
func benchRuns(c *cli.Context) time.Duration {
	m, err := benchMethod(c)
	if err != nil || c.NArg() < 2 {
		return 0
	}
	var d time.Duration
	for _, s := range m.Schedule(c.Args().Tail()) {
		if s.Job.Timed {
			d += 2 * m.Estimate(s)
		} else {
			d += time.Duration(m.SizeBytes/(benchFillMiBps<<20)+1) * time.Second
		}
	}
	return d
}

func benchMethod(c *cli.Context) (bench.Method, error) {
	jobs := bench.LabJobSet()
	// The admin's file, read as the node's files are (a FIFO or /dev/zero
	// is refused, the size bounded; fileFlag); an error quotes it only
	// once it parsed as a job file (ParseJobFile). For a VM of another
	// node its content travels there (--jobs-content), read here.
	name, data, ok, err := readFileArg(c, newEnv(c), "jobs")
	if err != nil {
		return bench.Method{}, err
	}
	if ok {
		if jobs, err = bench.ParseJobFile(name, string(data)); err != nil {
			return bench.Method{}, err
		}
	}
	jobs, err = bench.Pick(jobs, c.StringSlice("job"), c.Bool("no-precondition"))
	if err != nil {
		return bench.Method{}, err
	}
	return bench.NewMethod(jobs, c.Int("runs"), c.Duration("runtime"), c.Duration("ramp"), c.String("size"))
}

func benchAction(c *cli.Context) error {
	e := newEnv(c)
	vmid, err := vmidArg(c)
	if err != nil {
		return err
	}
	m, err := benchMethod(c)
	if err != nil {
		return err
	}
	report, err := checkReport(c)
	if err != nil {
		return err
	}
	results, err := benchOut(c, vmid)
	if err != nil {
		return err
	}
	ids := c.Args().Tail()
	if len(ids) == 0 {
		return exitcode.Usagef("bench: name the disks to measure (usage: pvediskcheck bench VMID DISK...): fio writes to them")
	}
	v, err := loadVM(e, vmid)
	if err != nil {
		return err
	}
	sel, err := v.Select(ids)
	if err != nil {
		return err
	}
	if !v.Running {
		return exitcode.Unreachablef("VM %d is not running: bench runs fio in the guest", vmid)
	}
	if err := v.FetchLive(e.ctx(), e.timeout); err != nil {
		return exitcode.Unreachablef("%s", qmpErrMsg(vmid, err))
	}
	agent, skip := v.Agent(e.ctx(), e.node, bench.AgentTimeout, "guest-exec (fio)", "the benchmark in the guest")
	if skip != nil {
		return exitcode.Unreachablef("VM %d: bench refused: %s; run it once the backup has ended", vmid, skip)
	}
	version, guest, err := bench.FindFio(e.ctx(), *agent, vmid)
	if err != nil {
		return err
	}
	disks, obs, err := bench.Prepare(e.ctx(), e.node, v, sel, m, bench.Request{FileIn: c.StringSlice("file-in"), Destroy: c.StringSlice("destroy")})
	if err != nil {
		return err
	}
	out := results.Path()
	if c.Bool("dry-run") {
		printBenchPlan(e, vmid, version, m, disks, out, c.Bool("histogram"))
		return nil
	}
	var ram int64
	if mem, err := (sampler.Host{Proc: e.paths.Proc, Sys: e.paths.Sys}).Memory(); err == nil {
		ram = mem.TotalBytes
	}
	folder, err := results.Create()
	if err != nil {
		return err
	}
	defer folder.Close()
	if c.Bool("histogram") {
		obs.TrackLatency()
	}
	abort, stopAbort := secondInterrupt(e.ctx())
	defer stopAbort()
	outcome := bench.Run(e.ctx(), *agent, m, disks, bench.Options{VMID: vmid, Out: folder, Observer: obs, HostRAMBytes: ram, Abort: abort,
		OnProgress: func(p bench.Progress) { benchProgress(e, p) }})
	notes, rerr := obs.ReleaseLatency(e.ctx())
	if rerr != nil {
		outcome.Err = errors.Join(outcome.Err, exitcode.Wrap(exitcode.Unreachable, fmt.Sprintf("VM %d: clearing the latency histograms", vmid), rerr))
	}
	res := bench.Summarise(m, disks, outcome, ram)
	res.VMID, res.Out, res.Fio, res.Guest, res.Histograms = vmid, out, version, guest, notes
	res.HistogramsLeft = obs.HistogramsLeft()
	if err := writeReport(report, bench.HTML(res)); err != nil {
		return err
	}
	if err := show(e, res, printBench); err != nil {
		return err
	}
	return outcome.Err
}

// secondInterrupt is a context that ends at the second SIGINT, SIGTERM or
// SIGHUP after ctx's (main's signal context ends at the first): bench then
// leaves the guest at once instead of within bench.InterruptGrace.
func secondInterrupt(ctx context.Context) (context.Context, func()) {
	actx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	ch := make(chan os.Signal, 2)
	sigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
	if !signal.Ignored(syscall.SIGHUP) { // under nohup it stays ignored (main.go)
		sigs = append(sigs, syscall.SIGHUP)
	}
	signal.Notify(ch, sigs...)
	go func() {
		defer cancel()
		seen := 0
		for {
			select {
			case <-ch:
				if seen++; seen >= 2 {
					return
				}
			case <-actx.Done():
				return
			}
		}
	}()
	return actx, func() { signal.Stop(ch); cancel() }
}

// benchOut checks --out (a new folder of that name), or draws the default
// name, ./bench-VMID-TIMESTAMP-RANDOM, before anything is run: the folder
// is made (mode 0700) only when fio is about to run.
func benchOut(c *cli.Context, vmid int) (*outfile.NewFolder, error) {
	if c.IsSet("out") {
		return outfile.CheckNew("out", c.String("out"))
	}
	return outfile.CheckNew("out", outfile.Fresh(fmt.Sprintf("bench-%d-%s", vmid, time.Now().Format("20060102-150405"))))
}

// benchProgress is one stderr line per step: what runs, and the time left.
func benchProgress(e *env, p bench.Progress) {
	s := p.Step
	name := s.Job.Name
	if s.Run > 0 {
		name += fmt.Sprintf(" run %d", s.Run)
	}
	if !p.Done {
		fmt.Fprintf(e.errOut, "bench [%d/%d] %s %s ... (%s of timed jobs left after this one)\n", p.Index, p.Total, s.Disk, name, units.Duration(p.Left))
		return
	}
	if p.Err != nil {
		fmt.Fprintf(e.errOut, "bench [%d/%d] %s %s: %v\n", p.Index, p.Total, s.Disk, name, p.Err)
	}
}

func printBenchPlan(e *env, vmid int, version string, m bench.Method, disks []bench.Disk, out string, histogram bool) {
	steps := m.Schedule(benchIDs(disks))
	var total time.Duration
	fills := 0
	for _, s := range steps {
		total += m.Estimate(s)
		if !s.Job.Timed {
			fills++
		}
	}
	fmt.Fprintf(e.out, "VM %d: %s in the guest; plan (dry run: nothing written, nothing run):\n", vmid, version)
	for _, d := range disks {
		fmt.Fprintf(e.out, "  %s: %s %s", d.ID, d.Target.Mode, d.Target.Path)
		if len(d.Target.Found) > 0 {
			fmt.Fprintf(e.out, " (--destroy: writes over %s)", strings.Join(d.Target.Found, "; "))
		}
		fmt.Fprintf(e.out, "\n      %s\n", d.Settings.Text())
	}
	fmt.Fprintf(e.out, "%d fio runs, one at a time, repetitions interleaved across disks; timed: %s", len(steps), units.Duration(total))
	if fills > 0 {
		fmt.Fprintf(e.out, ", plus %d fill pass(es) writing %s each (as long as the storage takes)", fills, m.Size)
	}
	fmt.Fprintf(e.out, "\nresults: %s/\n", out)
	if histogram {
		fmt.Fprintf(e.out, "--histogram: QEMU's latency histogram set on %s for the bench and cleared after (one found set is used as it is)\n", strings.Join(benchIDs(disks), ", "))
	}
	fmt.Fprintln(e.out)
	byID := map[string]bench.Disk{}
	for _, d := range disks {
		byID[d.ID] = d
	}
	for _, s := range steps {
		fmt.Fprintf(e.out, "%s\t%s\n", s.File(), bench.Shell(m.Argv(s, byID[s.Disk].Target.Path)))
	}
}

func printBench(e *env, r *bench.Result) {
	fmt.Fprintf(e.out, "VM %d: %s in the guest; %d run(s) of %s, %ds + %ds ramp, area %s; raw fio JSON in %s/\n",
		r.VMID, r.Fio, r.Method.Runs, strings.Join(r.Method.Jobs, " "), r.Method.RuntimeS, r.Method.RampS, r.Method.Size, r.Out)
	for _, d := range r.Disks {
		fmt.Fprintf(e.out, "  %s: %s\n", d.ID, d.Settings.Text())
	}
	if len(r.Summary.Groups) > 0 {
		fmt.Fprintln(e.out)
		summaryTable(e, r.Summary, false)
	}
	printBenchLatency(e, r)
	e.histogramsLeft(r.HistogramsLeft)
	var ev []string
	for _, d := range r.Disks {
		for _, j := range d.Jobs {
			for _, x := range j.Evidence {
				ev = append(ev, fmt.Sprintf("  %s %s: %s", d.ID, j.Name, x.Text()))
			}
		}
	}
	fmt.Fprintln(e.out, "\nNode evidence (what produced the numbers):")
	if len(ev) == 0 {
		fmt.Fprintln(e.out, "  none of Lab 19's traps seen")
	}
	for _, l := range ev {
		fmt.Fprintln(e.out, l)
	}
	for _, d := range r.Disks {
		for _, x := range d.Evidence {
			fmt.Fprintf(e.out, "  %s: %s %s\n", d.ID, x.Kind, x.Message)
		}
	}
	var split []string
	for _, d := range r.Disks {
		for _, j := range d.Jobs {
			for i, l := range j.Layers {
				if l.Verdict == layers.Idle {
					continue
				}
				split = append(split, fmt.Sprintf("  %s %s run %d: %s", d.ID, j.Name, i+1, l.Says))
			}
		}
	}
	if len(split) > 0 {
		fmt.Fprintln(e.out, "\nWhere each job's time went (QEMU and the node device; fio's figures are the guest's):")
		for _, l := range split {
			fmt.Fprintln(e.out, l)
		}
	}
	if len(r.Comparisons) > 0 {
		fmt.Fprintln(e.out, "\nEvery pair (fio compare's verdicts):")
		t := newTable(e.out, "JOB", "METRIC", "A", "B", "B VS A", "VERDICT")
		for _, c := range r.Comparisons {
			v := string(c.Verdict)
			if c.Better != "" {
				v += ", " + c.Better + " better"
			}
			t.row(c.Job, c.Metric, c.A, c.B, fmt.Sprintf("%+.1f%%", c.DiffPct), v)
		}
		t.flush()
	}
	if !r.Complete {
		fmt.Fprintf(e.out, "\nIncomplete: %d run(s) not measured (%s): %s\n", len(r.Missing), strings.Join(clipList(r.Missing, 6), " "), r.Stopped)
	}
	for _, l := range r.LeftInGuest {
		fmt.Fprintf(e.out, "Left in the guest: %s\n", l)
	}
	fmt.Fprintf(e.out, "\nRead again with: pvediskcheck fio summary %s  (fio compare --dir %s A B)\n", filepath.Clean(r.Out), filepath.Clean(r.Out))
}

func benchIDs(disks []bench.Disk) []string {
	var ids []string
	for _, d := range disks {
		ids = append(ids, d.ID)
	}
	return ids
}

// printBenchLatency is --histogram's table: QEMU's percentiles per job
// (mean over the runs, with their spread) beside fio's p99, the guest's.
func printBenchLatency(e *env, r *bench.Result) {
	if len(r.Histograms) == 0 {
		return
	}
	fmt.Fprintln(e.out, "\nQEMU's latency per job (its histograms, at the node; fio's P99 is the guest's):")
	t := newTable(e.out, "DISK", "JOB", "FIO P99", "KIND", "P50", "P95", "P99")
	var why []string
	for _, d := range r.Disks {
		for _, j := range d.Jobs {
			fioP99 := "-"
			if j.P99 != nil {
				fioP99 = bench.MsText(fio.Stat{Mean: j.P99.Mean / 1e6, SpreadPct: j.P99.SpreadPct, N: j.P99.N})
			}
			for _, k := range latency.Kinds {
				p50, ok := j.QEMULatencyMs[string(k)+"_p50"]
				if !ok {
					continue
				}
				t.row(d.ID, j.Name, fioP99, string(k), bench.MsText(p50), bench.MsText(j.QEMULatencyMs[string(k)+"_p95"]), bench.MsText(j.QEMULatencyMs[string(k)+"_p99"]))
				fioP99 = "" // the guest's p99 once per job
			}
			if j.QEMULatencyWhy != "" {
				why = append(why, fmt.Sprintf("  %s %s: %s", d.ID, j.Name, j.QEMULatencyWhy))
			}
		}
	}
	t.flush()
	for _, l := range why {
		fmt.Fprintln(e.out, l)
	}
	for _, h := range r.Histograms {
		fmt.Fprintln(e.out, "  "+histogramNote(h))
	}
}

func clipList(l []string, n int) []string {
	if len(l) <= n {
		return l
	}
	return append(l[:n:n], fmt.Sprintf("and %d more", len(l)-n))
}
