package fio

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fio2Dir holds fio 2.x output recorded here from six releases built from
// fio's tags (testdata/real/README.md, "fio2/"): <version>-<job>-<run>.json.
var fio2Dir = filepath.Join("testdata", "real", "fio2")

// fio2Versions each stand beside one change of fio's JSON.
var fio2Versions = []string{"fio-2.0.13", "fio-2.2.13", "fio-2.18", "fio-2.20", "fio-2.21", "fio-2.99"}

// fio2Jobs: what make-fio2.sh ran, by job name: the direction, block size and
// I/Os in flight of each jobs[] entry (iodepth, x2 for group_reporting of
// numjobs=2).
var fio2Jobs = map[string]struct {
	dir      string
	bs       int64
	inFlight float64
}{
	"fill": {"write", 1 << 20, 16}, "rr4k": {"read", 4096, 32}, "rw4k": {"write", 4096, 32},
	"rw4kqd1": {"write", 4096, 1}, "sr1m": {"read", 1 << 20, 16}, "sw1m": {"write", 1 << 20, 16},
	"sync": {"write", 4096, 1}, "clones": {"read", 4096, 16}, "grouped": {"read", 4096, 32},
}

// One run per version, every field pinned as fio printed it: latencies in µs
// under clat/lat until 2.99 (ns under clat_ns), io_bytes in KiB until 2.20,
// no bw_bytes; fio-2.0.13 prints no total_ios and an integer iops, and keys
// its percentiles "99.00". Everything comes out in ns and bytes, bandwidth
// as io_bytes/runtime.
func TestParseFio2(t *testing.T) {
	cases := []struct {
		file, dir           string
		ioBytes             int64   // io_bytes
		bwKiBps             float64 // fio's bw, rounded down
		iops                float64
		runtimeMs, totalIOs int64
		clat, lat, p99      float64 // clat and lat means, clat's 99th percentile
		ioUnit              int64   // bytes per io_bytes unit: KiB before fio 2.21
		latUnit             float64 // ns per latency unit: µs before fio 2.99
	}{
		{"fio-2.0.13-rr4k-1.json", "read", 1052656, 350768, 87681, 3001, 0, 360.11, 364.59, 740, 1024, 1000},
		{"fio-2.2.13-sw1m-1.json", "write", 11567104, 3849285, 3754.08, 3005, 11281, 4194.65, 4257.78, 5024, 1024, 1000},
		{"fio-2.18-rr4k-1.json", "read", 1068164, 355936, 88973.675442, 3001, 267010, 355.315843, 359.659468, 510, 1024, 1000},
		{"fio-2.20-rw4kqd1-1.json", "write", 225924, 75282, 18820.726425, 3001, 56481, 38.553549, 52.638356, 74, 1024, 1000},
		{"fio-2.21-rw4k-1.json", "write", 2176487424, 708255, 177053.315561, 3001, 531337, 176.300558, 180.46528, 306, 1, 1000},
		{"fio-2.99-sr1m-1.json", "read", 7637827584, 2481309, 2418.163673, 3006, 7269, 6578136.774849, 6608264.42257, 8290304, 1, 1},
	}
	for _, c := range cases {
		r, err := ReadFile(filepath.Join(fio2Dir, c.file))
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Jobs) != 1 {
			t.Fatalf("%s: %d jobs", c.file, len(r.Jobs))
		}
		io := r.Jobs[0].Dir(c.dir)
		b := c.ioBytes * c.ioUnit
		want := IOStats{c.totalIOs, b, float64(b) / (float64(c.runtimeMs) / 1000), c.iops, c.runtimeMs,
			c.clat * c.latUnit, c.lat * c.latUnit, c.p99 * c.latUnit, "clat"}
		if *io != want {
			t.Errorf("%s %s:\n got %+v\nwant %+v", c.file, c.dir, *io, want)
		}
		// fio's own bw is io_bytes/runtime in KiB/s, rounded down.
		if kib := io.BandwidthBps / 1024; kib < c.bwKiBps || kib >= c.bwKiBps+1 {
			t.Errorf("%s: %.3f KiB/s, fio printed %g", c.file, kib, c.bwKiBps)
		}
	}
}

// Every fio 2.x run, read in ns and bytes, agrees with what fio knew of it:
// its text report of the same run (after the JSON in the file: latencies in
// usec or msec, sizes, issued I/Os), Little's law (IOPS x mean latency = the
// I/Os in flight: a latency in the wrong unit is 1000 times off), and IOPS x
// runtime x block size = the bytes moved (io_bytes in the wrong unit is 1024
// times off). The idle directions are empty.
func TestFio2AgreesWithFio(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(fio2Dir, "*.json"))
	if len(files) != 60 {
		t.Fatalf("%d files", len(files))
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r, err := Parse(f, data)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(f)
		if !slices.Contains(fio2Versions, r.Version) || !strings.HasPrefix(base, r.Version+"-") {
			t.Fatalf("%s: version %q", f, r.Version)
		}
		job, _, _ := strings.Cut(strings.TrimPrefix(base, r.Version+"-"), "-")
		job = strings.TrimSuffix(job, ".json")
		shape, ok := fio2Jobs[job]
		if !ok || len(r.Jobs) != map[bool]int{true: 2, false: 1}[job == "clones"] {
			t.Fatalf("%s: job %q, %d entries", f, job, len(r.Jobs))
		}
		report := fioTextReport(data)
		// fio-2.0.13 writes one output format only: no text beside its JSON.
		if (len(report) == 0) != (r.Version == "fio-2.0.13") || len(report) > 0 && len(report) != len(r.Jobs) {
			t.Fatalf("%s: %d text entries for %d jobs", f, len(report), len(r.Jobs))
		}
		for i, j := range r.Jobs {
			for _, d := range Dirs {
				io := j.Dir(d)
				if d != shape.dir {
					if *io != (IOStats{}) {
						t.Errorf("%s %s: idle direction %s has %+v", f, j.Name, d, *io)
					}
					continue
				}
				if !io.HasIO() || io.P99Of != "clat" || (io.TotalIOs > 0) != (r.Version != "fio-2.0.13") {
					t.Errorf("%s %s: %+v", f, j.Name, *io)
				}
				// fsync=1 spends time outside the latency, in fsync calls.
				inFlight, least := io.IOPS*io.LatMeanNs/1e9, 0.9*shape.inFlight
				if job == "sync" {
					least = 0.4
				}
				if inFlight < least || inFlight > shape.inFlight*1.001 {
					t.Errorf("%s %s: %.3f I/Os in flight, iodepth %g", f, j.Name, inFlight, shape.inFlight)
				}
				if moved := io.IOPS * float64(io.RuntimeMs) / 1000 * float64(shape.bs); math.Abs(moved/float64(io.IOBytes)-1) > 0.01 {
					t.Errorf("%s %s: IOPS x runtime x bs = %.0f B, io_bytes %d B", f, j.Name, moved, io.IOBytes)
				}
				if len(report) > 0 {
					checkFioText(t, f+" "+j.Name+" "+d, io, report[i][d])
				}
			}
		}
	}
}

// checkFioText: the run as read agrees with fio's text report of it, each
// value within half the last digit fio printed (the 99th percentile within
// one unit: fio 2.99 rounds ns up to whole µs; sizes within 0.5 %).
func checkFioText(t *testing.T, what string, io *IOStats, rep *textDir) {
	t.Helper()
	if rep == nil {
		t.Errorf("%s: not in fio's text report", what)
		return
	}
	for _, c := range []struct {
		name      string
		got, want printed
	}{
		{"clat mean ns", printed{io.ClatMeanNs, 0}, rep.clat},
		{"lat mean ns", printed{io.LatMeanNs, 0}, rep.lat},
		{"clat p99 ns", printed{io.P99Ns, 0}, rep.p99},
		{"bytes", printed{float64(io.IOBytes), 0}, rep.io},
		{"runtime ms", printed{float64(io.RuntimeMs), 0}, rep.runtimeMs},
		{"I/Os", printed{float64(io.TotalIOs), 0}, rep.issued},
	} {
		if c.want.v <= 0 || math.Abs(c.got.v-c.want.v) > c.want.tol {
			t.Errorf("%s: %s %f, fio's text says %f (±%g)", what, c.name, c.got.v, c.want.v, c.want.tol)
		}
	}
}

// printed is a number in fio's text report: its value in ns, bytes, ms or
// I/Os, and how far the printed digits let the value be.
type printed struct{ v, tol float64 }

// textDir is one direction of one job entry in fio's normal report.
type textDir struct{ clat, lat, p99, io, runtimeMs, issued printed }

var (
	textJob    = regexp.MustCompile(`^\S+: \(groupid=\d+, jobs=\d+\): err=`)
	textDirRE  = regexp.MustCompile(`^\s+(read|write|trim)\s?: `)
	textIO     = regexp.MustCompile(`io=([\d.]+)([KMG])i?B, .*runt=\s*(\d+)msec|\(([\d.]+)([KMG])iB/(\d+)msec\)`)
	textLat    = regexp.MustCompile(`^\s+(clat|lat) \((nsec|usec|msec)\): min=.*avg=\s*([\d.]+),`)
	textPct    = regexp.MustCompile(`clat percentiles \((nsec|usec|msec)\)`)
	textP99    = regexp.MustCompile(`99\.00th=\[\s*(\d+)\]`)
	textIssued = regexp.MustCompile(`issued.*total=(?:r=)?(\d+)[,/](?:w=)?(\d+)`)
	textUnit   = map[string]float64{"nsec": 1, "usec": 1e3, "msec": 1e6, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
)

// printedAs reads a number fio printed in unit: tol is half its last digit.
func printedAs(s string, unit float64) printed {
	v, _ := strconv.ParseFloat(s, 64)
	decimals := 0
	if _, frac, ok := strings.Cut(s, "."); ok {
		decimals = len(frac)
	}
	return printed{v * unit, 0.5 * math.Pow10(-decimals) * unit}
}

// fioTextReport reads fio's normal report (fio 2.x's two styles: "read : io=
// 1033.4MB, ..., runt= 3001msec" and "read: IOPS=88.1k, ...(1043MiB/3001msec)"),
// one map of directions per job entry, in fio's order, up to "Run status".
func fioTextReport(data []byte) []map[string]*textDir {
	var out []map[string]*textDir
	var cur *textDir
	pctUnit := 0.0
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "Run status") {
			break
		}
		if textJob.MatchString(l) {
			out = append(out, map[string]*textDir{})
			cur = nil
			continue
		}
		if len(out) == 0 {
			continue
		}
		if m := textDirRE.FindStringSubmatch(l); m != nil {
			cur = &textDir{}
			out[len(out)-1][m[1]] = cur
			if m := textIO.FindStringSubmatch(l); m != nil {
				if m[1] == "" {
					m = append([]string{m[0]}, m[4:]...)
				}
				// fio 2.2's num2str takes a size's decimals from the
				// remainder of a division by 1024 and rounds them up
				// (1048.23 MiB prints as "1048.3MB"): sizes within 0.5 %.
				io := printedAs(m[1], textUnit[m[2]])
				io.tol += 0.005 * io.v
				cur.io, cur.runtimeMs = io, printedAs(m[3], 1)
			}
		}
		if cur == nil {
			continue
		}
		if m := textLat.FindStringSubmatch(l); m != nil {
			p := printedAs(m[3], textUnit[m[2]])
			if m[1] == "clat" {
				cur.clat = p
			} else {
				cur.lat = p
			}
		}
		if m := textPct.FindStringSubmatch(l); m != nil {
			pctUnit = textUnit[m[1]]
		}
		if m := textP99.FindStringSubmatch(l); m != nil {
			cur.p99 = printed{printedAs(m[1], pctUnit).v, pctUnit}
		}
		if m := textIssued.FindStringSubmatch(l); m != nil {
			// issued is the job's line for all directions: read, then write.
			for d, n := range map[string]string{"read": m[1], "write": m[2]} {
				if td := out[len(out)-1][d]; td != nil {
					td.issued = printedAs(n, 1)
				}
			}
		}
	}
	return out
}

// The fio 2.x runs all at once, as `fio summary DIR` reads them: one group
// per version and job (the file names carry both), rr4k's two runs in one,
// every latency there in ns. "no-options" exactly for the versions before
// 2.3, with nothing guessed from options fio did not print; where fio
// printed them, none of the pitfalls they rule out (direct=1, a ramp, a
// fill: its 128 MiB are read as KiB before 2.21, else the area would look
// unfilled). 2.x has no fsync statistics: the sync job has none.
func TestSummarizeFio2(t *testing.T) {
	s := summarize(t, Options{GroupBy: GroupAuto}, fio2Dir)
	if len(s.Groups) != 48 || len(s.Preconditioning) != 6 || len(s.Failed)+len(s.Unreadable) != 0 || s.Outcome != Complete {
		t.Fatalf("%d groups, preconditioning %v, failed %v, unreadable %v, %s", len(s.Groups), s.Preconditioning, s.Failed, s.Unreadable, s.Outcome)
	}
	workloads := map[string]string{
		"rr4k": "randread 4k QD32", "rw4k": "randwrite 4k QD32", "rw4kqd1": "randwrite 4k QD1", "sr1m": "read 1M QD16",
		"sw1m": "write 1M QD16", "sync": "randwrite 4k QD1 fsync=1", "clones": "randread 4k QD16 x2", "grouped": "randread 4k QD16 x2",
	}
	want := map[string]string{}
	for _, v := range fio2Versions {
		for job, w := range workloads {
			codes := "short-runtime,single-run"
			if job == "rr4k" {
				codes = "short-runtime"
			}
			if v == "fio-2.0.13" || v == "fio-2.2.13" {
				w, codes = "options unknown", "no-options,"+codes
			}
			want[v+"/"+job+" "+fio2Jobs[job].dir] = w + " " + codes
		}
	}
	for _, g := range s.Groups {
		k := g.Name() + " " + g.Dir
		if got := g.Workload + " " + strings.Join(codes(&g), ","); got != want[k] {
			t.Errorf("%s: %q, want %q", k, got, want[k])
		}
		if g.ClatMeanNs == nil || g.LatMeanNs == nil || g.P99Ns == nil || g.P99Of != "clat" || g.FsyncMeanNs != nil ||
			g.Runs() != map[bool]int{true: 2, false: 1}[g.Job == "rr4k"] {
			t.Errorf("%s: %+v", k, g)
		}
	}
	g := group(t, s, "fio-2.0.13/rr4k", "read")
	if !near(g.ClatMeanNs.Mean, (360.11+355.39)/2*1000, 1e-9) || g.P99Ns.Max != 740000 || !near(g.IOPS.Mean, (87681+88916)/2.0, 1e-9) {
		t.Errorf("%+v %+v %+v", *g.ClatMeanNs, *g.P99Ns, g.IOPS)
	}
	g = group(t, s, "fio-2.2.13/sync", "write")
	if w := g.Warnings[1]; w.Code != WarnNoOptions || w.File != filepath.Join(fio2Dir, "fio-2.2.13-sync-1.json") ||
		w.Message != `fio ("fio-2.2.13") printed no job options, as fio before 2.3 does: direct=1, ramp_time and a fill before reads not checked` {
		t.Errorf("%+v", g.Warnings)
	}
}

// numjobs=2 without group_reporting: two entries named "clones", merged
// into one run: IOPS and bandwidth add up, the latencies are the means of
// all I/Os. fio-2.0.13 prints no total_ios: its I/Os are IOPS x runtime.
func TestMergeClonesFio2(t *testing.T) {
	for _, v := range fio2Versions {
		r, err := ReadFile(filepath.Join(fio2Dir, v+"-clones-1.json"))
		if err != nil || len(r.Jobs) != 2 {
			t.Fatal(err)
		}
		a, b := r.Jobs[0].Read, r.Jobs[1].Read
		if a.ClatMeanNs == b.ClatMeanNs || a.IOPS == b.IOPS {
			t.Fatalf("%s: clones alike, nothing to weigh: %+v %+v", v, a, b)
		}
		na, nb := float64(a.TotalIOs), float64(b.TotalIOs)
		if v == "fio-2.0.13" {
			na, nb = a.IOPS*float64(a.RuntimeMs)/1000, b.IOPS*float64(b.RuntimeMs)/1000
		}
		m := mergeClones(r.Jobs)[0].Read
		if m.IOPS != a.IOPS+b.IOPS || m.BandwidthBps != a.BandwidthBps+b.BandwidthBps || m.IOBytes != a.IOBytes+b.IOBytes ||
			m.TotalIOs != a.TotalIOs+b.TotalIOs || m.P99Ns != max(a.P99Ns, b.P99Ns) ||
			!near(m.ClatMeanNs, (a.ClatMeanNs*na+b.ClatMeanNs*nb)/(na+nb), 1e-6) ||
			!near(m.LatMeanNs, (a.LatMeanNs*na+b.LatMeanNs*nb)/(na+nb), 1e-6) {
			t.Errorf("%s: %+v from %+v and %+v", v, m, a, b)
		}
	}
}

// ioCount is the same count whichever way a clone gives it: 3 I/Os counted
// by total_ios weigh three times 1 I/O known as 1 IOPS over 1 s.
func TestIOCount(t *testing.T) {
	r, _ := Parse("c.json", []byte(`{"jobs": [{"jobname": "c", "read": {"total_ios": 3, "iops": 3, "runtime": 1000, "bw": 1, "clat": {"mean": 10}}},
		{"jobname": "c", "read": {"iops": 1, "runtime": 1000, "bw": 1, "clat": {"mean": 30}}}]}`))
	if m := mergeClones(r.Jobs)[0].Read; m.ClatMeanNs != 15000 || ioCount(&r.Jobs[1].Read) != 1 || ioCount(&r.Jobs[0].Read) != 3 {
		t.Errorf("%+v", m)
	}
}
