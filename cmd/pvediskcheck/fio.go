package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/procfs"
	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/units"

	"github.com/pvediskcheck/pvediskcheck/fio"
)

func init() { commands = append(commands, fioCommand) }

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
					groupBy, csvFlag, wide,
				},
				Action: fioCompareAction,
			},
			{
				Name:        "jobs",
				Usage:       "print Lab 19's job set as a fio job file for one VM disk",
				ArgsUsage:   "/dev/disk/by-id/DEVICE",
				Description: helpText("fio-jobs"),
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "label", Usage: "label in the result file names, naming the storage under test (default: the drive name, e.g. scsi1)"},
					&cli.StringFlag{Name: "size", Value: "2G", Usage: "test area, in fio's units; larger than the node's RAM keeps caches out of the reads"},
					&cli.IntFlag{Name: "runtime", Value: 20, Usage: "seconds measured per job"},
					&cli.IntFlag{Name: "ramp", Value: 3, Usage: "seconds of ramp_time before measuring"},
					&cli.IntFlag{Name: "runs", Value: 3, Usage: "repetitions of every job (3 or more gives a CV and a p-value)"},
				},
				Action: fioJobsAction,
			},
		},
	}
}

// fioSummaryJSON is the --json schema of `fio summary`.
type fioSummaryJSON struct {
	HostRAMBytes int64 `json:"host_ram_bytes"` // 0: unknown, area-below-ram not checked
	*fio.Summary
}

// fioCompareJSON is the --json schema of `fio compare`.
type fioCompareJSON struct {
	A          string        `json:"a"`
	B          string        `json:"b"`
	Metrics    []string      `json:"metrics_of_interest"`
	Different  bool          `json:"different"` // any metric of interest is different: exit 1
	Unreadable []fio.Warning `json:"unreadable"`
	*fio.Comparisons
}

func fioSummaryAction(c *cli.Context) error {
	e := newEnv(c)
	if c.NArg() == 0 {
		return exitcode.Usagef("fio summary: name a directory or files (usage: pvediskcheck fio summary %s)", c.Command.ArgsUsage)
	}
	mode, err := groupByFlag(c)
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
	sum, err := loadSummary(c.Args().Slice(), fio.Options{GroupBy: mode, HostRAMBytes: ram})
	if err != nil {
		return err
	}
	switch {
	case e.json:
		err = e.printJSON(fioSummaryJSON{ram, sum})
	case c.Bool("csv"):
		err = summaryCSV(e.out, sum)
		printUnreadable(e.errOut, sum.Unreadable)
	default:
		summaryTable(e, sum, c.Bool("wide"))
	}
	if err != nil {
		return err
	}
	if len(sum.Unreadable) > 0 {
		return exitcode.ErrProblem
	}
	return nil
}

func fioCompareAction(c *cli.Context) error {
	e := newEnv(c)
	if c.NArg() != 2 {
		return exitcode.Usagef("fio compare: needs A and B (usage: pvediskcheck fio compare %s)", c.Command.ArgsUsage)
	}
	mode, err := groupByFlag(c)
	if err != nil {
		return err
	}
	if e.json && c.Bool("csv") {
		return exitcode.Usagef("fio compare: --json and --csv exclude each other")
	}
	var metrics []string
	for _, m := range c.StringSlice("metric") {
		for _, k := range strings.Split(m, ",") {
			if k = strings.TrimSpace(k); k == "" {
				continue
			}
			if _, ok := fio.MetricByKey(k); !ok {
				return exitcode.Usagef("fio compare: unknown --metric %q (iops, bw, clat, lat, p99, fsync)", k)
			}
			metrics = append(metrics, k)
		}
	}
	opt := fio.Options{GroupBy: mode}
	var inDir *fio.Summary // --dir, loaded once for both labels
	a, ua, err := compareSide(c.Args().Get(0), c.String("dir"), opt, &inDir)
	if err != nil {
		return err
	}
	b, ub, err := compareSide(c.Args().Get(1), c.String("dir"), opt, &inDir)
	if err != nil {
		return err
	}
	unreadable := slices.Clone(ua)
	for _, w := range ub { // labels from one --dir share its list
		if !slices.Contains(unreadable, w) {
			unreadable = append(unreadable, w)
		}
	}
	cmp := fio.Compare(a, b, metrics)
	different := cmp.AnyDifferent(metrics)
	nameA, nameB := c.Args().Get(0), c.Args().Get(1)
	switch {
	case e.json:
		if metrics == nil {
			metrics = []string{}
		}
		err = e.printJSON(fioCompareJSON{nameA, nameB, metrics, different, unreadable, cmp})
	case c.Bool("csv"):
		err = compareCSV(e.out, cmp)
		printUnreadable(e.errOut, unreadable)
	default:
		compareTable(e, nameA, nameB, cmp, unreadable, c.Bool("wide"), different)
	}
	if err != nil {
		return err
	}
	if different {
		return exitcode.ErrProblem
	}
	return nil
}

// compareSide resolves A or B: a directory holding one label, or a label
// among the files of dir (loaded once into *inDir).
func compareSide(arg, dir string, opt fio.Options, inDir **fio.Summary) ([]fio.Group, []fio.Warning, error) {
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		sum, err := loadSummary([]string{arg}, opt)
		if err != nil {
			return nil, nil, err
		}
		if l := labels(sum.Groups); len(l) > 1 {
			return nil, nil, exitcode.Usagef("fio compare: %s holds %d labels (%s): name two of them with --dir %s LABEL-A LABEL-B",
				arg, len(l), strings.Join(l, ", "), arg)
		}
		return sum.Groups, sum.Unreadable, nil
	}
	if dir == "" {
		return nil, nil, exitcode.Usagef("fio compare: %s is not a directory; to compare labels, name their directory with --dir", arg)
	}
	if *inDir == nil {
		sum, err := loadSummary([]string{dir}, opt)
		if err != nil {
			return nil, nil, err
		}
		*inDir = sum
	}
	var gs []fio.Group
	for _, g := range (*inDir).Groups {
		if g.Label == arg {
			gs = append(gs, g)
		}
	}
	if len(gs) == 0 {
		return nil, nil, exitcode.Usagef("fio compare: no label %q in %s (labels: %s)", arg, dir, strings.Join(labels((*inDir).Groups), ", "))
	}
	return gs, (*inDir).Unreadable, nil
}

func fioJobsAction(c *cli.Context) error {
	e := newEnv(c)
	if c.NArg() != 1 {
		return exitcode.Usagef("fio jobs: name one disk (usage: pvediskcheck fio jobs %s)", c.Command.ArgsUsage)
	}
	dev := c.Args().First()
	const byID = "/dev/disk/by-id/"
	if !strings.HasPrefix(dev, byID) || len(dev) == len(byID) {
		return exitcode.Usagef("fio jobs: %q is not a /dev/disk/by-id/ path: sdX names change order between boots, and the job file overwrites the disk", dev)
	}
	label := c.String("label")
	if label == "" {
		label = filepath.Base(dev)
		if i := strings.LastIndex(label, "drive-"); i >= 0 {
			label = label[i+len("drive-"):]
		}
	}
	if strings.ContainsAny(label, "/ \t") {
		return exitcode.Usagef("fio jobs: --label %q: no slashes or spaces (it goes into file names)", label)
	}
	if _, ok := fio.ParseSize(c.String("size")); !ok {
		return exitcode.Usagef("fio jobs: --size %q: expected a size such as 2G or 512M", c.String("size"))
	}
	if c.Int("runtime") < 1 || c.Int("ramp") < 0 || c.Int("runs") < 1 {
		return exitcode.Usagef("fio jobs: --runtime and --runs must be at least 1, --ramp at least 0")
	}
	js := fio.JobSet{Device: dev, Label: label, Size: c.String("size"),
		RuntimeS: c.Int("runtime"), RampS: c.Int("ramp"), Runs: c.Int("runs")}
	_, err := io.WriteString(e.out, js.JobFile())
	return err
}

func groupByFlag(c *cli.Context) (fio.GroupBy, error) {
	g := fio.GroupBy(c.String("group-by"))
	if !slices.Contains(fio.GroupBys, g) {
		return "", exitcode.Usagef("--group-by %q: expected auto, name, job or dir", g)
	}
	return g, nil
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
	fs, err := procfs.NewFS(e.paths.Proc)
	if err == nil {
		if mi, err := fs.Meminfo(); err == nil && mi.MemTotalBytes != nil {
			return int64(*mi.MemTotalBytes), nil
		}
	}
	fmt.Fprintf(e.errOut, "pvediskcheck: host RAM unknown (no MemTotal in %s/meminfo): area-below-ram not checked; give --host-ram\n", e.paths.Proc)
	return 0, nil
}

func loadSummary(args []string, opt fio.Options) (*fio.Summary, error) {
	files, err := fio.ListFiles(args)
	if err != nil {
		return nil, exitcode.Usagef("%v", err)
	}
	if len(files) == 0 {
		return nil, exitcode.Usagef("no *.json file in %s", strings.Join(args, " "))
	}
	results, unreadable := fio.ReadFiles(files)
	sum := fio.Summarize(results, opt)
	sum.Unreadable = append(sum.Unreadable, unreadable...)
	return sum, nil
}

func labels(gs []fio.Group) []string {
	var l []string
	for _, g := range gs {
		if !slices.Contains(l, g.Label) {
			l = append(l, g.Label)
		}
	}
	return l
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

func p99Title(gs []*fio.Group) string {
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
	gs := make([]*fio.Group, len(sum.Groups))
	for i := range sum.Groups {
		gs[i] = &sum.Groups[i]
	}
	p99 := p99Title(gs)
	t := newTable(e.out, "LABEL", "JOB", "WORKLOAD", "I/O", "RUNS", "IOPS", "MiB/s", "CLAT MEAN µs", p99, "FSYNC MEAN µs")
	for _, g := range gs {
		t.row(units.OrDash(g.Label), g.Job, g.Workload, g.Dir, strconv.Itoa(g.Runs()),
			cell(&g.IOPS, 1, wide), cell(&g.BandwidthMiBps, 1, wide), cell(g.ClatMeanNs, 1000, wide),
			p99Cell(g, p99, wide), cell(g.FsyncMeanNs, 1000, wide))
	}
	t.flush()
	if len(gs) > 0 {
		fmt.Fprintln(e.out, "(±N%: gap between the slowest and the fastest run, in % of the mean)")
	}
	printWarnings(e, gs)
	printUnreadable(e.out, sum.Unreadable)
}

// printWarnings prints each distinct warning once, with the groups it
// applies to ("all runs" when it applies to every run shown).
func printWarnings(e *env, gs []*fio.Group) {
	type entry struct {
		code, msg string
		groups    []*fio.Group
		files     map[*fio.Group]map[string]bool
	}
	var entries []*entry
	at := map[string]*entry{}
	dirs := map[string]int{} // a job with both directions gets "(read)"/"(write)"
	total := 0
	for _, g := range gs {
		dirs[g.Name()]++
		total += g.Runs()
	}
	for _, g := range gs {
		for _, w := range g.Warnings {
			k := w.Code + "\x00" + w.Message
			en := at[k]
			if en == nil {
				en = &entry{code: w.Code, msg: w.Message, files: map[*fio.Group]map[string]bool{}}
				at[k] = en
				entries = append(entries, en)
			}
			if en.files[g] == nil {
				en.files[g] = map[string]bool{}
				en.groups = append(en.groups, g)
			}
			en.files[g][w.File] = true
		}
	}
	if len(entries) == 0 {
		return
	}
	slices.SortStableFunc(entries, func(a, b *entry) int { return strings.Compare(a.code, b.code) })
	fmt.Fprintln(e.out, "\nWarnings (Lab 19's pitfalls):")
	for _, en := range entries {
		covered := 0
		var where []string
		for _, g := range en.groups {
			covered += len(en.files[g])
			n := units.OrDash(g.Name())
			if dirs[g.Name()] > 1 {
				n += " (" + g.Dir + ")"
			}
			if len(en.files[g]) < g.Runs() {
				n += fmt.Sprintf(" (%d of %d runs)", len(en.files[g]), g.Runs())
			}
			where = append(where, n)
		}
		fmt.Fprintf(e.out, "  %s: %s\n", en.code, en.msg)
		if covered == total && len(gs) > 1 {
			fmt.Fprintf(e.out, "      all runs\n")
		} else {
			fmt.Fprintf(e.out, "      %s\n", strings.Join(where, ", "))
		}
	}
}

func printUnreadable(w io.Writer, ws []fio.Warning) {
	if len(ws) == 0 {
		return
	}
	fmt.Fprintf(w, "\nNot summarised (%d files):\n", len(ws))
	for _, u := range ws {
		fmt.Fprintf(w, "  warning: %s\n", u.Message)
	}
}

func compareTable(e *env, nameA, nameB string, cmp *fio.Comparisons, unreadable []fio.Warning, wide, different bool) {
	fmt.Fprintf(e.out, "A = %s\nB = %s\n\n", nameA, nameB)
	t := newTable(e.out, "JOB", "I/O", "METRIC", "A", "B", "B vs A", "VERDICT", "P (Welch)")
	for _, r := range cmp.Rows {
		m, _ := fio.MetricByKey(r.Metric)
		title, scale := m.Title, 1.0
		if r.Metric != "iops" && r.Metric != "bw" {
			title, scale = title+" µs", 1000
		}
		if r.Of != "" {
			title = r.Of + " " + title
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
		t.row(r.Job, r.Dir, title, fmt.Sprintf("%s n=%d", cell(&ra, scale, wide), r.A.N),
			fmt.Sprintf("%s n=%d", cell(&rb, scale, wide), r.B.N), fmt.Sprintf("%+.1f%%", r.DiffPct), verdict, p)
	}
	t.flush()
	for _, n := range cmp.Notes {
		fmt.Fprintln(e.out, "note: "+n)
	}
	printUnreadable(e.out, unreadable)
	if different {
		fmt.Fprintln(e.out, "\nAt least one metric differs by more than the spread between runs.")
	} else {
		fmt.Fprintln(e.out, "\nNo metric differs by more than the spread between runs.")
	}
}

var csvMetrics = []struct {
	prefix string
	of     func(*fio.Group) *fio.Stat
}{
	{"iops", func(g *fio.Group) *fio.Stat { return &g.IOPS }},
	{"bw_mibps", func(g *fio.Group) *fio.Stat { return &g.BandwidthMiBps }},
	{"clat_mean_ns", func(g *fio.Group) *fio.Stat { return g.ClatMeanNs }},
	{"lat_mean_ns", func(g *fio.Group) *fio.Stat { return g.LatMeanNs }},
	{"p99_ns", func(g *fio.Group) *fio.Stat { return g.P99Ns }},
	{"fsync_mean_ns", func(g *fio.Group) *fio.Stat { return g.FsyncMeanNs }},
}

func statFields(s *fio.Stat) []string {
	if s == nil || s.N == 0 {
		return []string{"", "", "", "", ""}
	}
	f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
	cv := ""
	if s.CVPct != nil {
		cv = f(*s.CVPct)
	}
	return []string{f(s.Mean), f(s.Min), f(s.Max), f(s.SpreadPct), cv}
}

var statSuffixes = []string{"mean", "min", "max", "spread_pct", "cv_pct"}

func summaryCSV(w io.Writer, sum *fio.Summary) error {
	cw := csv.NewWriter(w)
	head := []string{"label", "job", "workload", "direction", "runs", "p99_of"}
	for _, m := range csvMetrics {
		for _, s := range statSuffixes {
			head = append(head, m.prefix+"_"+s)
		}
	}
	cw.Write(append(head, "warnings"))
	for i := range sum.Groups {
		g := &sum.Groups[i]
		row := []string{g.Label, g.Job, g.Workload, g.Dir, strconv.Itoa(g.Runs()), g.P99Of}
		for _, m := range csvMetrics {
			row = append(row, statFields(m.of(g))...)
		}
		var codes []string
		for _, w := range g.Warnings {
			if !slices.Contains(codes, w.Code) {
				codes = append(codes, w.Code)
			}
		}
		cw.Write(append(row, strings.Join(codes, ";")))
	}
	cw.Flush()
	return cw.Error()
}

func compareCSV(w io.Writer, cmp *fio.Comparisons) error {
	cw := csv.NewWriter(w)
	head := []string{"job", "direction", "workload", "metric", "latency_of", "a_runs", "b_runs"}
	for _, side := range []string{"a", "b"} {
		for _, s := range statSuffixes {
			head = append(head, side+"_"+s)
		}
	}
	cw.Write(append(head, "diff_pct", "verdict", "p_value", "better"))
	for _, r := range cmp.Rows {
		row := []string{r.Job, r.Dir, r.Workload, r.Metric, r.Of, strconv.Itoa(r.A.N), strconv.Itoa(r.B.N)}
		ra, rb := r.A, r.B
		row = append(append(row, statFields(&ra)...), statFields(&rb)...)
		p := ""
		if r.PValue != nil {
			p = strconv.FormatFloat(*r.PValue, 'g', -1, 64)
		}
		cw.Write(append(row, strconv.FormatFloat(r.DiffPct, 'f', -1, 64), string(r.Verdict), p, r.Better))
	}
	cw.Flush()
	return cw.Error()
}
