package fio

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

func TestNames(t *testing.T) {
	cases := []struct {
		file, jobname string
		jobs          int
		mode          GroupBy
		label, job    string
	}{
		{"res/local-zfs-rr4k-1.json", "rr4k", 1, GroupAuto, "local-zfs", "rr4k"},
		{"res/local-zfs-fill.json", "fill", 1, GroupAuto, "local-zfs", "fill"},
		{"res/nas-lvm-rw4kqd1-12.json", "rw4kqd1", 1, GroupAuto, "nas-lvm", "rw4kqd1"},
		{"res/rr4k-1.json", "rr4k", 1, GroupAuto, "res", "rr4k"},    // no label: the directory
		{"res/rr4k.json", "rr4k", 1, GroupAuto, "res", "rr4k"},      //
		{"res/job-2.json", "job-2", 1, GroupAuto, "res", "job-2"},   // a jobname ending in -digits
		{"res/a-job-2-3.json", "job-2", 1, GroupAuto, "a", "job-2"}, //
		{"res/random-1.json", "rr4k", 1, GroupAuto, "res", "rr4k"},  // name does not carry the job
		{"res/x-rr4k-1.json", "rr4k", 2, GroupAuto, "res", "rr4k"},  // several jobs: no name matching
		{"res/local-zfs-rr4k-1.json", "test", 1, GroupName, "local-zfs", "rr4k"},
		{"res/local-zfs-fill.json", "fill", 1, GroupName, "local-zfs", "fill"},
		{"res/plain.json", "test", 1, GroupName, "res", "test"},
		{"res/local-zfs-rr4k-1.json", "rr4k", 1, GroupJob, "", "rr4k"},
		{"res/local-zfs-rr4k-1.json", "rr4k", 1, GroupDir, "res", "rr4k"},
	}
	for _, c := range cases {
		l, j := names(c.file, c.jobname, c.jobs, c.mode)
		if l != c.label || j != c.job {
			t.Errorf("%s %s (%s): %q %q, want %q %q", c.file, c.jobname, c.mode, l, j, c.label, c.job)
		}
	}
}

func summarize(t *testing.T, opt Options, dirs ...string) *Summary {
	t.Helper()
	files, err := ListFiles(dirs)
	if err != nil {
		t.Fatal(err)
	}
	results, unreadable := ReadFiles(files)
	s := Summarize(results, opt)
	s.Unreadable = append(s.Unreadable, unreadable...)
	return s
}

func group(t *testing.T, s *Summary, name, dir string) *Group {
	t.Helper()
	for i := range s.Groups {
		if s.Groups[i].Name() == name && s.Groups[i].Dir == dir {
			return &s.Groups[i]
		}
	}
	t.Fatalf("no group %s %s", name, dir)
	return nil
}

func codes(g *Group) []string {
	var c []string
	for _, w := range g.Warnings {
		if !slices.Contains(c, w.Code) {
			c = append(c, w.Code)
		}
	}
	sort.Strings(c)
	return c
}

// checkCodes: the groups are exactly want's ("label/job direction"), each
// with exactly its warning codes ("a,b", sorted).
func checkCodes(t *testing.T, s *Summary, want map[string]string) {
	t.Helper()
	if len(s.Groups) != len(want) {
		t.Errorf("%d groups, want %d", len(s.Groups), len(want))
	}
	for _, g := range s.Groups {
		k := g.Name() + " " + g.Dir
		if got := strings.Join(codes(&g), ","); got != want[k] {
			t.Errorf("%s: %s, want %s", k, got, want[k])
		}
	}
}

func TestSummarizeRealLab19(t *testing.T) {
	dir := filepath.Join("testdata", "real", "lab19")
	s := summarize(t, Options{GroupBy: GroupAuto}, dir)
	if len(s.Groups) != 12 || len(s.Preconditioning) != 2 || len(s.Unreadable) != 0 {
		t.Fatalf("%d groups, preconditioning %v, unreadable %v", len(s.Groups), s.Preconditioning, s.Unreadable)
	}
	for _, g := range s.Groups {
		if g.Runs() != 3 {
			t.Errorf("%s: %d runs", g.Name(), g.Runs())
		}
		// The fill job preceded every read; runs are 3 s with a 1 s ramp.
		if got := strings.Join(codes(&g), ","); got != WarnShortRuntime {
			t.Errorf("%s: warnings %s, want only %s", g.Name(), got, WarnShortRuntime)
		}
		if w := g.Warnings[0].Message; !strings.HasPrefix(w, "measured for 3.0 s, under 20 s") && !strings.HasPrefix(w, "measured for 3.1 s") {
			t.Errorf("%s: %q", g.Name(), w)
		}
		if (g.FsyncMeanNs != nil) != (g.Job == "sync") || g.P99Of != "clat" || g.ClatMeanNs == nil || g.LatMeanNs == nil {
			t.Errorf("%s: fsync %v p99 of %q", g.Name(), g.FsyncMeanNs, g.P99Of)
		}
	}
	g := group(t, s, "libaio/rr4k", "read")
	var want []float64
	for _, f := range g.Files {
		r, _ := ReadFile(f)
		want = append(want, r.Jobs[0].Read.IOPS)
	}
	if g.Workload != "randread 4k QD32" || !slices.Equal(g.IOPS.Values, want) || !near(g.BandwidthMiBps.Mean, g.IOPS.Mean*4/1024, 0.5) {
		t.Errorf("%s: %+v, want IOPS %v", g.Workload, g.IOPS, want)
	}
	if f := group(t, s, "io_uring/sync", "write").FsyncMeanNs; f.N != 3 || !slices.Contains(f.Values, 249568.080976) {
		t.Errorf("fsync %+v", f)
	}

	// The host's RAM against the 256 MiB area: only reads are warned.
	for _, c := range []struct {
		ram   int64
		warns int
	}{{1 << 30, 4}, {256<<20 + 1, 4}, {256 << 20, 0}, {128 << 20, 0}, {0, 0}} {
		s := summarize(t, Options{GroupBy: GroupAuto, HostRAMBytes: c.ram}, dir)
		n := 0
		for _, g := range s.Groups {
			if slices.Contains(codes(&g), WarnAreaBelowRAM) {
				n++
				if g.Dir != "read" || !strings.Contains(g.Warnings[len(g.Warnings)-1].Message, "256 MiB") {
					t.Errorf("RAM %d: %s %s: %v", c.ram, g.Name(), g.Dir, g.Warnings)
				}
			}
		}
		if n != c.warns {
			t.Errorf("RAM %d: %d groups warned, want %d", c.ram, n, c.warns)
		}
	}
}

func TestSummarizePitfalls(t *testing.T) {
	s := summarize(t, Options{GroupBy: GroupAuto}, filepath.Join("testdata", "real", "pitfalls"))
	want := map[string]string{
		"pitfalls/both write":     "short-runtime,single-run",
		"pitfalls/buffered read":  "buffered,no-fill,no-ramp,short-runtime,single-run",
		"pitfalls/latpct read":    "no-fill,short-runtime,single-run",
		"pitfalls/mixed read":     "no-fill,short-runtime,single-run",
		"pitfalls/mixed write":    "short-runtime,single-run",
		"pitfalls/preamble write": "short-runtime,single-run",
		"pitfalls/twojobs read":   "no-fill,short-runtime,single-run",
		"pitfalls/unwritten read": "no-fill,short-runtime,single-run",
	}
	checkCodes(t, s, want)
	for _, g := range s.Groups {
		k := g.Name() + " " + g.Dir
		for _, w := range g.Warnings {
			if w.File == "" || w.Message == "" {
				t.Errorf("%s: warning without file or message: %+v", k, w)
			}
		}
	}
	if g := group(t, s, "pitfalls/latpct", "read"); g.P99Of != "lat" || g.P99Ns.Mean != 1400832 {
		t.Errorf("latpct: p99 of %q %v", g.P99Of, g.P99Ns)
	}
	// numjobs=2 without group_reporting: one run, the clones added up.
	g := group(t, s, "pitfalls/twojobs", "read")
	wantClat := (468223.204389*101649 + 533267.829824*89269) / (101649 + 89269)
	if g.Runs() != 1 || !near(g.IOPS.Mean, 33871.70943+29746.417861, 1e-6) || !near(g.BandwidthMiBps.Mean, (138758995+121861800)/1048576.0, 1e-9) ||
		!near(g.ClatMeanNs.Mean, wantClat, 1e-6) || g.P99Ns.Mean != 4489216 || g.Workload != "randread 4k QD16 x2" {
		t.Errorf("twojobs: %s runs %d IOPS %v bw %v clat %v p99 %v", g.Workload, g.Runs(), g.IOPS.Mean, g.BandwidthMiBps.Mean, g.ClatMeanNs.Mean, g.P99Ns.Mean)
	}
}

// With --group-by job, labels are gone: lab19's libaio fill (same image
// file, written before) now covers the pitfall reads of that image, but not
// the read of the never-written image. Same-named jobs on two engines stay
// apart, and their workloads say how they differ.
func TestSummarizeGroupByJobFill(t *testing.T) {
	s := summarize(t, Options{GroupBy: GroupJob}, filepath.Join("testdata", "real", "lab19"), filepath.Join("testdata", "real", "pitfalls"))
	for name, noFill := range map[string]bool{"buffered": false, "latpct": false, "twojobs": false, "unwritten": true} {
		if got := slices.Contains(codes(group(t, s, name, "read")), WarnNoFill); got != noFill {
			t.Errorf("%s: no-fill %v, want %v", name, got, noFill)
		}
	}
	var rr []string
	for _, g := range s.Groups {
		if g.Job == "rr4k" {
			rr = append(rr, g.Workload)
		}
	}
	want := []string{
		"randread 4k QD32 filename=/tmp/pvediskcheck-fio/io_uring.img ioengine=io_uring",
		"randread 4k QD32 filename=/tmp/pvediskcheck-fio/libaio.img ioengine=libaio",
	}
	if !slices.Equal(rr, want) {
		t.Errorf("rr4k workloads %q, want %q", rr, want)
	}
}

// Unreadable files are named once each; the good ones are still summarised.
func TestSummarizeWithBrokenFiles(t *testing.T) {
	s := summarize(t, Options{GroupBy: GroupAuto}, filepath.Join("testdata", "real", "bad"), filepath.Join("testdata", "real", "lab19"))
	if len(s.Groups) != 12 || len(s.Unreadable) != 4 {
		t.Fatalf("%d groups, %d unreadable", len(s.Groups), len(s.Unreadable))
	}
	for _, w := range s.Unreadable {
		if w.Code != WarnUnreadable || !strings.HasPrefix(w.Message, w.File+": ") {
			t.Errorf("%+v", w)
		}
	}
}

// Lab 19's table, rebuilt from its own cells, prints back the same means and
// spreads.
func TestSummarizeLab19Figures(t *testing.T) {
	s := summarize(t, Options{GroupBy: GroupAuto, HostRAMBytes: 16 << 30}, filepath.Join("testdata", "lab", "lab19"))
	cases := []struct {
		name         string
		stat         func(*Group) *Stat
		mean, spread float64
	}{
		{"local-zfs/rr4k", func(g *Group) *Stat { return &g.IOPS }, 44289, 3},
		{"local-zfs/rw4k", func(g *Group) *Stat { return &g.IOPS }, 2336, 50},
		{"local-zfs/rw4kqd1", func(g *Group) *Stat { return g.ClatMeanNs }, 210000, 6},
		{"local-zfs/sr1m", func(g *Group) *Stat { return &g.BandwidthMiBps }, 3289, 0},
		{"local-zfs/sw1m", func(g *Group) *Stat { return &g.BandwidthMiBps }, 42, 19},
		{"rbd-vm/rr4k", func(g *Group) *Stat { return &g.IOPS }, 10357, 17},
		{"rbd-vm/rw4kqd1", func(g *Group) *Stat { return g.ClatMeanNs }, 8310000, 25},
		{"local-zfs/sync", func(g *Group) *Stat { return g.FsyncMeanNs }, 3390000, 0},
		{"rbd-vm/sync", func(g *Group) *Stat { return g.LatMeanNs }, 38210000, 0},
	}
	for _, c := range cases {
		var g *Group
		for i := range s.Groups {
			if s.Groups[i].Name() == c.name {
				g = &s.Groups[i]
			}
		}
		if g == nil {
			t.Fatalf("no group %s", c.name)
		}
		st := c.stat(g)
		if st == nil || !near(st.Mean, c.mean, 1e-6*c.mean) || !near(st.SpreadPct, c.spread, 1e-9) {
			t.Errorf("%s: %+v, want %g (±%g%%)", c.name, st, c.mean, c.spread)
		}
	}
	// The lab's own caveats: 2 GiB area under the node's RAM; one 15 s fsync run.
	if got := strings.Join(codes(group(t, s, "local-zfs/rr4k", "read")), ","); got != WarnAreaBelowRAM {
		t.Errorf("rr4k: %s", got)
	}
	if got := strings.Join(codes(group(t, s, "rbd-vm/sync", "write")), ","); got != "short-runtime,single-run" {
		t.Errorf("sync: %s", got)
	}
}

// Failed runs, runs that measured nothing and a stopped run: each named once,
// with fio's error; what did measure is summarised.
func TestSummarizeFailedRuns(t *testing.T) {
	dir := filepath.Join("testdata", "real", "failed")
	s, err := Load([]string{dir}, Options{GroupBy: GroupAuto})
	if err != nil {
		t.Fatal(err)
	}
	f := func(name string) string { return filepath.Join(dir, name) }
	wantFailed := []Warning{
		{f("continue-on-error.json"), WarnJobError, f("continue-on-error.json") + `: fio reported error 28 (no space left on device) for job "coe": ` +
			`"fio: pid=30245, err=28/file:io_u.c:1876, func=io_u error, error=No space left on device"; fio counted 1 I/O errors in job "coe" ` +
			`and went on (continue_on_error), the first 28 (no space left on device): no I/O measured`},
		{f("eisdir.json"), WarnJobError, f("eisdir.json") + `: fio reported error 21 (is a directory) for job "isdir": no I/O measured`},
		{f("enospc-no-line.json"), WarnJobError, f("enospc-no-line.json") + `: fio reported error 28 (no space left on device) for job "fullwrite": no I/O measured`},
		{f("exitall-no-io.json"), WarnNoIO, f("exitall-no-io.json") + `: job "late": fio measured no I/O in any direction`},
		{f("open-einval.json"), WarnJobError, f("open-einval.json") + `: fio reported error 22 (invalid argument) for job "odirect": ` +
			`"fio: pid=30192, err=22/file:filesetup.c:805, func=open(/dev/null), error=Invalid argument": no I/O measured`},
	}
	if !slices.Equal(s.Failed, wantFailed) {
		t.Errorf("failed:\n%q\nwant\n%q", s.Failed, wantFailed)
	}
	if len(s.Unreadable) != 0 || len(s.Preconditioning) != 0 || s.Outcome != Partial {
		t.Errorf("unreadable %v preconditioning %v outcome %s", s.Unreadable, s.Preconditioning, s.Outcome)
	}
	want := map[string]string{
		"failed/fullrw read":  "buffered,job-error,no-fill,no-ramp,short-runtime,single-run",
		"failed/quick read":   "buffered,no-fill,no-ramp,short-runtime,single-run",
		"failed/stopped read": "buffered,interrupted,no-fill,no-ramp,short-runtime,single-run",
	}
	checkCodes(t, s, want)
	g := group(t, s, "failed/fullrw", "read")
	if w := g.Warnings[0]; w.Code != WarnJobError || w.Message != `fio reported error 28 (no space left on device) for job "fullrw": `+
		`"fio: pid=30236, err=28/file:io_u.c:1876, func=io_u error, error=No space left on device": its numbers cover only part of the run` {
		t.Errorf("%+v", w)
	}
	g = group(t, s, "failed/stopped", "read")
	if w := g.Warnings[0]; w.Code != WarnInterrupted || w.Message != `fio was stopped ("fio: terminating on signal 2"): the run is shorter than asked` {
		t.Errorf("%+v", w)
	}

	// Only failed runs: nothing usable.
	for _, only := range []string{"open-einval.json", "exitall-no-io.json"} {
		s, _ := Load([]string{f(only)}, Options{})
		wantGroups := map[string]int{"open-einval.json": 0, "exitall-no-io.json": 1}[only]
		wantOutcome := map[string]Outcome{"open-einval.json": NothingUsable, "exitall-no-io.json": Partial}[only]
		if len(s.Groups) != wantGroups || len(s.Failed) != 1 || s.Outcome != wantOutcome {
			t.Errorf("%s: %d groups, failed %v, outcome %s", only, len(s.Groups), s.Failed, s.Outcome)
		}
	}
}

func TestOutcome(t *testing.T) {
	ok := Group{Warnings: []Warning{{Code: WarnShortRuntime}}}
	bad := Group{Warnings: []Warning{{Code: WarnShortRuntime}, {Code: WarnJobError}}}
	w := []Warning{{Code: WarnUnreadable}}
	cases := []struct {
		s    Summary
		want Outcome
	}{
		{Summary{Groups: []Group{ok}}, Complete},
		{Summary{Groups: []Group{ok, bad}}, Partial},
		{Summary{Groups: []Group{ok}, Unreadable: w}, Partial},
		{Summary{Groups: []Group{ok}, Failed: w}, Partial},
		{Summary{Unreadable: w, Failed: w}, NothingUsable},
		{Summary{}, NothingUsable},
	}
	for i, c := range cases {
		c.s.judge()
		if c.s.Outcome != c.want {
			t.Errorf("%d: %s, want %s", i, c.s.Outcome, c.want)
		}
	}
	// Load: what it cannot list is bad input.
	for _, bad := range [][]string{{filepath.Join("testdata", "nope")}, {t.TempDir()}} {
		if _, err := Load(bad, Options{}); exitcode.Of(err) != exitcode.Usage {
			t.Errorf("%v: %v", bad, err)
		}
	}
	s, err := Load([]string{filepath.Join("testdata", "real", "lab19")}, Options{})
	if err != nil || s.Outcome != Complete || len(s.Failed) != 0 || len(s.Groups) != 12 {
		t.Errorf("%v %s %v", err, s.Outcome, s.Failed)
	}
}

// Hostile and degenerate shapes: nothing dropped silently, nothing negative.
func TestSummarizeEmptyAndOdd(t *testing.T) {
	parse := func(name, data string) *Result {
		r, err := Parse(name, []byte(data))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r
	}
	s := Summarize([]*Result{
		parse("empty.json", `{"fio version": "fio-3.33", "jobs": []}`),
		parse("neg.json", `{"fio version": "fio-3.33", "jobs": [{"jobname": "n", "job options": {"rw": "randread", "direct": "1", "ramp_time": "2"},
			"read": {"iops": -1, "total_ios": 3000, "runtime": 1000, "bw_bytes": -1, "io_bytes": 12288000, "clat_ns": {"mean": -1}}}]}`),
	}, Options{GroupBy: GroupJob})
	if !slices.Equal(s.Failed, []Warning{{"empty.json", WarnNoIO, `empty.json: no job in it ("jobs": [])`}}) || s.Outcome != Partial {
		t.Errorf("failed %q outcome %s", s.Failed, s.Outcome)
	}
	g := group(t, s, "n", "read")
	if g.IOPS.Mean != 3000 || g.BandwidthMiBps.Mean != 12288000/float64(1<<20) || g.ClatMeanNs != nil || g.P99Ns != nil || g.P99Of != "" {
		t.Errorf("%+v", g)
	}
	s = Summarize([]*Result{parse("empty.json", `{"jobs": []}`)}, Options{})
	if s.Outcome != NothingUsable || len(s.Groups) != 0 {
		t.Errorf("%+v", s)
	}
	// A job name of kilobytes is quoted short.
	long := strings.Repeat("j", 5000)
	s = Summarize([]*Result{parse("long.json", `{"jobs": [{"jobname": "`+long+`", "error": 5}]}`)}, Options{})
	if m := s.Failed[0].Message; len(m) > 200 || !strings.Contains(m, `"jjjj`) || !strings.Contains(m, "(5000 bytes)") || !strings.Contains(m, "error 5 (input/output error)") {
		t.Errorf("%d bytes: %s", len(m), m)
	}
}

// numjobs=16 without group_reporting: 16 entries whose rounded bw (KiB/s)
// would add up 1.6 % short; bw_bytes adds up exactly (issue 14 #8).
func TestMergeClonesBandwidthBytes(t *testing.T) {
	clone := `{"jobname": "j", "job options": {"rw": "randread", "numjobs": "16"}, "read": {"bw": 49, "bw_bytes": 51000, "iops": 12.45, "runtime": 20000, "total_ios": 249, "io_bytes": 1020000}}`
	doc := `{"fio version": "fio-3.33", "jobs": [` + strings.TrimSuffix(strings.Repeat(clone+",", 16), ",") + `]}`
	r, err := Parse("c.json", []byte(doc))
	if err != nil || len(r.Jobs) != 16 {
		t.Fatal(err)
	}
	g := Summarize([]*Result{r}, Options{GroupBy: GroupJob}).Groups[0]
	if g.Runs() != 1 || g.BandwidthMiBps.Mean != 16*51000/float64(1<<20) || !near(g.IOPS.Mean, 16*12.45, 1e-9) {
		t.Errorf("%+v %+v", g.BandwidthMiBps, g.IOPS)
	}
	if rounded := 16 * 49 / 1024.0; (g.BandwidthMiBps.Mean-rounded)/g.BandwidthMiBps.Mean < 0.015 {
		t.Errorf("the rounded sum %g is not 1.5 %% off %g", rounded, g.BandwidthMiBps.Mean)
	}
}

// A fill that failed is named: the reads after it may hit unwritten blocks.
// Clones of an fsync job: fsync latency weighted by calls, p99 the highest.
func TestSummarizeFailedFillAndSyncClones(t *testing.T) {
	r, err := Parse("res/l-fill.json", []byte(`{"fio version": "fio-3.33", "timestamp": 10, "jobs": [{"jobname": "fill", "error": 28,
		"job options": {"rw": "write", "filename": "/dev/x", "size": "1G"},
		"write": {"io_bytes": 1048576, "bw_bytes": 1048576, "iops": 1, "runtime": 1000, "total_ios": 1}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	clone := func(ios int, lat, p99 float64) string {
		return fmt.Sprintf(`{"jobname": "sync", "job options": {"rw": "randwrite", "fsync": "1", "direct": "1", "ramp_time": "1"},
			"write": {"bw_bytes": 4096, "iops": 1, "runtime": 30000, "total_ios": 30},
			"sync": {"total_ios": %d, "lat_ns": {"mean": %g, "percentile": {"99.000000": %g}}}}`, ios, lat, p99)
	}
	r2, err := Parse("res/l-sync-1.json", []byte(`{"fio version": "fio-3.33", "timestamp": 20, "jobs": [`+clone(10, 100, 300)+`,`+clone(30, 200, 250)+`,`+clone(0, 0, 0)+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	s := Summarize([]*Result{r, r2}, Options{GroupBy: GroupAuto})
	want := []Warning{{"res/l-fill.json", WarnJobError, `res/l-fill.json: fio reported error 28 (no space left on device) for job "fill": ` +
		`reads judged against this fill may hit never-written blocks`}}
	if !slices.Equal(s.Failed, want) || !slices.Equal(s.Preconditioning, []string{"res/l-fill.json"}) || s.Outcome != Partial {
		t.Errorf("failed %q preconditioning %v outcome %s", s.Failed, s.Preconditioning, s.Outcome)
	}
	g := group(t, s, "l/sync", "write")
	if g.FsyncMeanNs == nil || g.FsyncMeanNs.Mean != (100*10+200*30)/40.0 || g.IOPS.Mean != 3 || g.Workload != "randwrite 4k QD1 fsync=1" {
		t.Errorf("%+v %+v", g.FsyncMeanNs, g)
	}
	merged := mergeClones(r2.Jobs)
	if len(merged) != 1 || merged[0].Sync != (SyncStats{40, 175, 300}) || merged[0].Read != (IOStats{}) {
		t.Errorf("%+v", merged)
	}
	// Clones without fsync calls, without I/O in a direction, or without a
	// p99 in the first: zeros stay zeros, the p99 comes from the clone that has it.
	r3, _ := Parse("p.json", []byte(`{"jobs": [{"jobname": "p", "write": {"bw_bytes": 1, "iops": 1, "runtime": 1, "total_ios": 1, "clat_ns": {"mean": 10}}},
		{"jobname": "p", "write": {"bw_bytes": 1, "iops": 1, "runtime": 1, "total_ios": 3, "clat_ns": {"mean": 30, "percentile": {"99.000000": 70}}}}]}`))
	if m := mergeClones(r3.Jobs)[0]; m.Sync != (SyncStats{}) || m.Read != (IOStats{}) || m.Write.P99Of != "clat" || m.Write.P99Ns != 70 || m.Write.ClatMeanNs != 25 {
		t.Errorf("%+v", m)
	}
}

func TestJobError(t *testing.T) {
	cases := []struct {
		j    Job
		want string
	}{
		{Job{Name: "a", Error: 5}, `fio reported error 5 (input/output error) for job "a"`},
		{Job{Name: "a", Error: 5, ErrorText: "fio: pid=1, err=5/x"}, `fio reported error 5 (input/output error) for job "a": "fio: pid=1, err=5/x"`},
		{Job{Name: "a", IOErrors: 3, FirstIOError: 61}, `fio counted 3 I/O errors in job "a" and went on (continue_on_error), the first 61 (no data available)`},
		{Job{Name: "a", Error: 9999, IOErrors: 1}, `fio reported error 9999 (errno 9999) for job "a"; fio counted 1 I/O errors in job "a" and went on (continue_on_error), the first 0 (errno 0)`},
		{Job{Name: "a"}, ""},
	}
	for _, c := range cases {
		if got := jobError(&c.j); got != c.want {
			t.Errorf("%+v:\n got %s\nwant %s", c.j, got, c.want)
		}
	}
	for n, want := range map[int]string{1: "operation not permitted", 4095: "errno 4095", 4096: "errno 4096", 0: "errno 0", -1: "errno -1"} {
		if got := errnoName(n); got != want {
			t.Errorf("%d: %q, want %q", n, got, want)
		}
	}
	if got := clip(strings.Repeat("x", clipLen)); got != `"`+strings.Repeat("x", clipLen)+`"` {
		t.Errorf("%s", got)
	}
	if got := clip(strings.Repeat("x", clipLen+1)); !strings.HasSuffix(got, `"... (65 bytes)`) {
		t.Errorf("%s", got)
	}
}

// Clones with an error in one of them: the merged job carries it, and I/O
// errors fio went on past are a job-error too; a file without version or
// options says so.
func TestCloneErrorsAndNoVersion(t *testing.T) {
	clone := func(errno, ioErrs, first int, text string) string {
		return fmt.Sprintf(`{"jobname": "c", "error": %d, "total_err": %d, "first_error": %d,
			"read": {"bw_bytes": 4096, "iops": 1, "runtime": 1000, "total_ios": 1}}`, errno, ioErrs, first)
	}
	r, err := Parse("c.json", []byte("fio: pid=2, err=5/file:io_u.c:1, func=io_u error, error=Input/output error\n"+
		`{"jobs": [`+clone(0, 2, 61, "")+`,`+clone(5, 3, 5, "")+`,`+clone(7, 0, 0, "")+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	m := mergeClones(r.Jobs)
	if len(m) != 1 || m[0].Error != 5 || m[0].ErrorText != "fio: pid=2, err=5/file:io_u.c:1, func=io_u error, error=Input/output error" ||
		m[0].IOErrors != 5 || m[0].FirstIOError != 61 {
		t.Errorf("%+v", m)
	}
	s := Summarize([]*Result{r}, Options{GroupBy: GroupJob})
	g := group(t, s, "c", "read")
	if got := strings.Join(codes(g), ","); got != "job-error,no-options,short-runtime,single-run" || s.Outcome != Partial {
		t.Errorf("%s %s", got, s.Outcome)
	}
	if w := g.Warnings[2]; w.Message != `fio (no version) printed no job options, as fio before 2.3 does: direct=1, ramp_time and a fill before reads not checked` {
		t.Errorf("%+v", w)
	}
	// continue_on_error alone (fio's error 0): still a job-error.
	r, _ = Parse("d.json", []byte(`{"fio version": "fio-3.33", "jobs": [`+clone(0, 4, 5, "")+`]}`))
	if g := Summarize([]*Result{r}, Options{GroupBy: GroupJob}).Groups[0]; g.Warnings[0].Code != WarnJobError ||
		g.Warnings[0].Message != `fio counted 4 I/O errors in job "c" and went on (continue_on_error), the first 5 (input/output error): its numbers cover only part of the run` {
		t.Errorf("%+v", g.Warnings)
	}
}

func TestAddCapped(t *testing.T) {
	for _, c := range [][3]int64{{1, 2, 3}, {0, 0, 0}, {maxValue, 0, maxValue}, {maxValue - 1, 1, maxValue}, {maxValue, 1, maxValue}, {maxValue, maxValue, maxValue}} {
		if got := addCapped(c[0], c[1]); got != c[2] {
			t.Errorf("%d + %d = %d, want %d", c[0], c[1], got, c[2])
		}
	}
	// Clones whose counters would wrap an int64.
	clone := `{"jobname": "c", "total_err": 4611686018427387904, "read": {"io_bytes": 4611686018427387904, "io_kbytes": 0, "total_ios": 4611686018427387904, "bw_bytes": 1, "iops": 1, "runtime": 1}}`
	r, _ := Parse("w.json", []byte(`{"jobs": [`+clone+`,`+clone+`,`+clone+`]}`))
	if m := mergeClones(r.Jobs)[0]; m.Read.IOBytes != maxValue || m.Read.TotalIOs != maxValue || m.IOErrors != maxValue {
		t.Errorf("%+v", m)
	}
}

// The file-name parsers at their edges: a dash first, digits only.
func TestNameParsers(t *testing.T) {
	for _, c := range []struct{ base, label, job string }{
		{"local-zfs-rr4k-1", "local-zfs", "rr4k"}, {"a-b", "a", "b"}, {"ab-2", "", "ab"}, {"ab", "", "ab"},
		{"-1", "", "-1"}, {"-x", "", "-x"}, {"a--1", "a", ""},
	} {
		if l, j := nameParts(c.base); l != c.label || j != c.job {
			t.Errorf("nameParts(%q) = %q, %q; want %q, %q", c.base, l, j, c.label, c.job)
		}
	}
	for _, c := range []struct {
		base, job, label string
		ok               bool
	}{
		{"local-zfs-rr4k-1", "rr4k", "local-zfs", true}, {"rr4k", "rr4k", "", true}, {"rr4k-3", "rr4k", "", true},
		{"job-2", "job-2", "", true}, {"x-job-2-1", "job-2", "x", true}, {"x-job-2", "job-2", "", false}, {"other", "rr4k", "", false},
		{"-1", "", "", false}, {"-1", "-1", "", true},
	} {
		if l, ok := labelFromName(c.base, c.job); l != c.label || ok != c.ok {
			t.Errorf("labelFromName(%q, %q) = %q, %v; want %q, %v", c.base, c.job, l, ok, c.label, c.ok)
		}
	}
	for s, want := range map[string]bool{"0": true, "9": true, "0123456789": true, "": false, "1a": false, "/": false, ":": false, "-1": false} {
		if isDigits(s) != want {
			t.Errorf("isDigits(%q) != %v", s, want)
		}
	}
	wd, _ := os.Getwd()
	if got := dirLabel("x.json"); got != filepath.Base(wd) {
		t.Errorf("dirLabel(x.json) = %q, want %q", got, filepath.Base(wd))
	}
	if got := dirLabel("res/x.json"); got != "res" {
		t.Errorf("%q", got)
	}
	for v, want := range map[string]bool{"2": true, "0": false, "": false, "2s": true, "0.5": true, "0.0": false, "9": true,
		"0s": false, "s": false, "10m": true, "1.5s": true, ".5": true} {
		if hasRamp(map[string]string{"ramp_time": v}) != want {
			t.Errorf("hasRamp(%q) != %v", v, want)
		}
	}
}

// Lab 19's fill rule: the same label and file, at least the area, before
// the read (or no timestamps to tell); a write of nothing fills nothing.
func TestFillRule(t *testing.T) {
	read := run{file: "r.json", label: "l", dir: "read", ts: 100, src: &Job{},
		opts: map[string]string{"filename": "/dev/x", "size": "1G", "direct": "1", "ramp_time": "1"}, io: IOStats{RuntimeMs: MinRuntimeMs}}
	cases := []struct {
		name   string
		f      fill
		filled bool
	}{
		{"before", fill{"l", "/dev/x", 1 << 30, 99}, true},
		{"same second", fill{"l", "/dev/x", 1 << 30, 100}, true},
		{"after", fill{"l", "/dev/x", 1 << 30, 101}, false},
		{"fill without timestamp", fill{"l", "/dev/x", 1 << 30, 0}, true},
		{"smaller than the area", fill{"l", "/dev/x", 1<<30 - 1, 99}, false},
		{"other label", fill{"m", "/dev/x", 1 << 30, 99}, false},
		{"other file", fill{"l", "/dev/y", 1 << 30, 99}, false},
	}
	for _, c := range cases {
		var got []string
		for _, w := range pitfalls(read, []fill{c.f}, 0) {
			got = append(got, w.Code)
		}
		if filled := !slices.Contains(got, WarnNoFill); filled != c.filled || len(got) != map[bool]int{true: 0, false: 1}[c.filled] {
			t.Errorf("%s: %v", c.name, got)
		}
	}
	noTS := read
	noTS.ts = 0
	if w := pitfalls(noTS, []fill{{"l", "/dev/x", 1 << 30, 500}}, 0); len(w) != 0 {
		t.Errorf("read without timestamp: %v", w)
	}
	// A write job that wrote nothing is no fill.
	r, _ := Parse("l-w.json", []byte(`{"timestamp": 1, "jobs": [{"jobname": "w", "error": 5, "job options": {"rw": "write", "filename": "/dev/x"},
		"write": {"io_bytes": 0, "io_kbytes": 0}},
		{"jobname": "r", "job options": {"rw": "read", "filename": "/dev/x", "direct": "1", "ramp_time": "1"},
		"read": {"bw_bytes": 1, "iops": 1, "runtime": 30000, "total_ios": 1}}]}`))
	s := Summarize([]*Result{r}, Options{GroupBy: GroupJob})
	if got := strings.Join(codes(group(t, s, "r", "read")), ","); got != "no-fill,single-run" {
		t.Errorf("%s", got)
	}
}

// fsync latency needs fsync calls and a latency: neither alone is one.
func TestFsyncNeedsCallsAndLatency(t *testing.T) {
	job := func(name, sync string) string {
		return `{"jobname": "` + name + `", "job options": {"rw": "randwrite", "fsync": "1"},
			"write": {"bw_bytes": 1, "iops": 1, "runtime": 1000, "total_ios": 1}, "sync": ` + sync + `}`
	}
	r, _ := Parse("s.json", []byte(`{"jobs": [`+job("calls", `{"total_ios": 5, "lat_ns": {"mean": 0}}`)+`,`+
		job("latency", `{"total_ios": 0, "lat_ns": {"mean": 7}}`)+`,`+job("both", `{"total_ios": 5, "lat_ns": {"mean": 7}}`)+`]}`))
	s := Summarize([]*Result{r}, Options{GroupBy: GroupJob})
	for name, want := range map[string]bool{"calls": false, "latency": false, "both": true} {
		if got := group(t, s, name, "write").FsyncMeanNs; (got != nil) != want || want && got.Mean != 7 {
			t.Errorf("%s: %+v", name, got)
		}
	}
}

// Groups come sorted by label, job, direction, workload.
func TestGroupOrder(t *testing.T) {
	s := summarize(t, Options{GroupBy: GroupAuto}, filepath.Join("testdata", "real", "lab19"), filepath.Join("testdata", "real", "pitfalls"))
	var got []string
	for _, g := range s.Groups {
		got = append(got, g.Label+" "+g.Job+" "+g.Dir)
	}
	want := []string{
		"io_uring rr4k read", "io_uring rw4k write", "io_uring rw4kqd1 write", "io_uring sr1m read", "io_uring sw1m write", "io_uring sync write",
		"libaio rr4k read", "libaio rw4k write", "libaio rw4kqd1 write", "libaio sr1m read", "libaio sw1m write", "libaio sync write",
		"pitfalls both write", "pitfalls buffered read", "pitfalls latpct read", "pitfalls mixed read", "pitfalls mixed write",
		"pitfalls preamble write", "pitfalls twojobs read", "pitfalls unwritten read",
	}
	if !slices.Equal(got, want) {
		t.Errorf("order:\n%q\nwant\n%q", got, want)
	}
}

// TestWorkloadMix: the real-world arau-*-writes files are rw=randrw with
// rwmixread=0 and rwmixwrite=100; their workload said "randrw 4k QD16"
// (fio's default mix being 50/50) beside "... rwmixread=100" for the
// reads.
func TestWorkloadMix(t *testing.T) {
	for _, c := range []struct {
		opts map[string]string
		want string
	}{
		{map[string]string{"rw": "randrw", "bs": "4k", "iodepth": "16", "rwmixread": "0", "rwmixwrite": "100"}, "randrw 4k QD16 rwmixread=0"},
		{map[string]string{"rw": "randrw", "bs": "4k", "iodepth": "16", "rwmixread": "100"}, "randrw 4k QD16 rwmixread=100"},
		{map[string]string{"rw": "randrw", "rwmixwrite": "30"}, "randrw 4k QD1 rwmixread=70"},
		{map[string]string{"rw": "randrw", "rwmixwrite": "300"}, "randrw 4k QD1"},
		{map[string]string{"rw": "randrw", "rwmixwrite": "x"}, "randrw 4k QD1"},
		{map[string]string{"rw": "randrw"}, "randrw 4k QD1"},
		{map[string]string{"rw": "randwrite", "fsync": "0", "fdatasync": "1"}, "randwrite 4k QD1 fdatasync=1"},
		{nil, "options unknown"},
	} {
		if got := workload(c.opts); got != c.want {
			t.Errorf("%v: %q, want %q", c.opts, got, c.want)
		}
	}
}
