package fio

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseReal(t *testing.T) {
	cases := []struct {
		file      string
		jobs      int
		name, dir string
		ios       int64
		bwBps     float64 // fio's bw_bytes
		iops      float64
		runtimeMs int64
		clatNs    float64
		latNs     float64
		p99Ns     float64
		p99Of     string
		syncIOs   int64
		syncNs    float64
		syncP99Ns float64
	}{
		{"lab19/libaio-rr4k-1.json", 1, "rr4k", "read", 170035, 232119405, 56659.446851, 3001, 559829.834788, 564101.331107, 2834432, "clat", 0, 0, 0},
		// json+: the same fields, plus latency bins the parser skips.
		{"lab19/io_uring-sync-2.json", 1, "sync", "write", 7176, 9735970, 2376.946009, 3019, 118145.846711, 144832.990106, 1433600, "clat", 7175, 249568.080976, 3588096},
		// fio's "note: ..." line before the JSON.
		{"pitfalls/with-note.json", 1, "preamble", "write", 22148, 45336435, 11068.465767, 2001, 89483.884369, 89635.628951, 214016, "clat", 0, 0, 0},
		// clat_percentiles=0 lat_percentiles=1: the p99 is of lat.
		{"pitfalls/lat-percentiles.json", 1, "latpct", "read", 150764, 205794996, 50237.920693, 3001, 311351.082896, 317831.86577, 1400832, "lat", 0, 0, 0},
		// --output-format=normal,json: header lines, JSON, then the normal report.
		{"pitfalls/normal-and-json.json", 1, "both", "write", 105686, 144269008, 35216.927691, 3001, 446245.233593, 453552.241407, 3653632, "clat", 0, 0, 0},
		// numjobs=2 without group_reporting: two entries; the first is checked.
		{"pitfalls/numjobs2.json", 2, "twojobs", "read", 101649, 138758995, 33871.70943, 3001, 468223.204389, 471877.933349, 3915776, "clat", 0, 0, 0},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			r, err := ReadFile(filepath.Join("testdata", "real", c.file))
			if err != nil {
				t.Fatal(err)
			}
			if r.Version != "fio-3.33" || r.Timestamp < 1795985000 || len(r.Jobs) != c.jobs {
				t.Fatalf("version %q timestamp %d jobs %d", r.Version, r.Timestamp, len(r.Jobs))
			}
			j := r.Jobs[0]
			io := j.Dir(c.dir)
			want := IOStats{c.ios, io.IOBytes, c.bwBps, c.iops, c.runtimeMs, c.clatNs, c.latNs, c.p99Ns, c.p99Of}
			if j.Name != c.name || *io != want {
				t.Errorf("%s %s:\n got %+v\nwant %+v", j.Name, c.dir, *io, want)
			}
			if (j.Sync != SyncStats{c.syncIOs, c.syncNs, c.syncP99Ns}) {
				t.Errorf("sync %+v", j.Sync)
			}
			if j.Options["direct"] != "1" || j.Options["filename"] == "" || j.Options["name"] != c.name {
				t.Errorf("options %v", j.Options)
			}
		})
	}
}

func TestParseBroken(t *testing.T) {
	cases := []struct {
		file string
		want error
		msg  string
	}{
		{"bad/empty.json", ErrEmpty, "empty file"},
		{"bad/truncated.json", ErrTruncated, "truncated"},
		{"bad/error-only.json", ErrNoJSON, `starts with "fio: pid=0, err=2/file:filesetup.c:805`},
		{"bad/no-jobs.json", ErrNotFio, "no jobs[]"},
	}
	for _, c := range cases {
		path := filepath.Join("testdata", "real", c.file)
		_, err := ReadFile(path)
		if !errors.Is(err, c.want) || !strings.HasPrefix(err.Error(), path+": ") || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v; want %v naming the file, with %q", c.file, err, c.want, c.msg)
		}
	}
	// Inline shapes the files above do not cover.
	inline := []struct {
		name, data string
		want       error
	}{
		{"spaces only", " \n\t\n", ErrEmpty},
		{"missing colon", `{"jobs": [ {"a" 1} ]}`, ErrMalformed},
		{"cut in a string", `{"jobs": [ {"jobname": "x`, ErrTruncated},
		{"cut after a brace", `{"jobs": [ {"jobname": "x"}`, ErrTruncated},
		{"jobs not an array", `{"jobs": {}}`, ErrNotFio},
		{"a brace at the very end", "fio: x {", ErrNoJSON},
		{"blanks at the very end", "fio: x\n   ", ErrNoJSON},
		// The first object is the output, even when a later one would do.
		{"empty object first", "{}\n{\"jobs\": []}", ErrNotFio},
		{"a brace before a number", "x {1}", ErrNoJSON},
	}
	for _, c := range inline {
		if _, err := Parse("x.json", []byte(c.data)); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := ReadFile(filepath.Join("testdata", "nope.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// Every real file parses, and the global options reach the job.
func TestParseAllRealAndGlobalOptions(t *testing.T) {
	files, err := ListFiles([]string{"testdata/real/lab19", "testdata/real/pitfalls"})
	if err != nil || len(files) != 38+7 {
		t.Fatalf("%d files, %v", len(files), err)
	}
	results, warns := ReadFiles(files)
	if len(results) != len(files) || len(warns) != 0 {
		t.Fatalf("%d results, warnings %v", len(results), warns)
	}
	for i, r := range results {
		if r.File != files[i] {
			t.Fatalf("order: %s at %d, want %s", r.File, i, files[i])
		}
	}
	r, err := Parse("g.json", []byte(`{"global options": {"direct": "1", "bs": "8k"},
		"jobs": [{"jobname": "j", "job options": {"bs": "4k"}}]}`))
	if err != nil || r.Jobs[0].Options["direct"] != "1" || r.Jobs[0].Options["bs"] != "4k" {
		t.Errorf("%v %+v", err, r)
	}
}

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"2G", 2 << 30, true}, {"256M", 256 << 20, true}, {"256m", 256 << 20, true}, {"4096", 4096, true},
		{"1GiB", 1 << 30, true}, {"1gb", 1 << 30, true}, {"1.5T", 3 << 39, true}, {"4k", 4096, true},
		{"50%", 0, false}, {"", 0, false}, {"2X", 0, false},
		// Up to what an int64 holds with room: 2^62.
		{"4095P", 4095 << 50, true}, {"4096P", 0, false}, {"99999999999999999999P", 0, false},
	}
	for _, c := range cases {
		if got, ok := ParseSize(c.in); got != c.want || ok != c.ok {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// Units by fio version, at the boundaries fio's history sets (parse.go).
func TestParseUnitsByVersion(t *testing.T) {
	doc := func(version, dir string) string {
		v := ""
		if version != "" {
			v = `"fio version": "` + version + `", `
		}
		return `{` + v + `"jobs": [{"jobname": "j", "read": {` + dir + `}}]}`
	}
	cases := []struct {
		name, version, dir string
		ioBytes            int64
		bwBps              float64
		clatNs, p99Ns      float64
	}{
		// io_bytes in KiB up to 2.20, bytes from 2.21; bandwidth = io_bytes/runtime.
		{"2.20 KiB", "fio-2.20", `"io_bytes": 1000, "bw": 999, "runtime": 1000, "iops": 250`, 1024000, 1024000, 0, 0},
		{"2.21 bytes", "fio-2.21", `"io_bytes": 1000, "io_kbytes": 0, "bw": 0, "runtime": 1000, "iops": 250`, 1000, 1000, 0, 0},
		{"2.2.10", "fio-2.2.10", `"io_bytes": 8, "runtime": 2000, "iops": 1`, 8192, 4096, 0, 0},
		{"git build 2.18", "fio-2.18-59-g618e", `"io_bytes": 1, "runtime": 1000, "iops": 1`, 1024, 1024, 0, 0},
		{"1.x", "fio-1.59", `"io_bytes": 1, "runtime": 1000, "iops": 1`, 1024, 1024, 0, 0},
		{"3.0", "fio-3.0", `"io_bytes": 1, "runtime": 1000, "iops": 1`, 1, 1, 0, 0},
		// fio 3.2+: bw_bytes wins over io_bytes/runtime and over bw.
		{"bw_bytes", "fio-3.33", `"io_bytes": 4096, "bw_bytes": 5000, "bw": 4, "runtime": 1000, "iops": 1`, 4096, 5000, 0, 0},
		// Only the rounded bw: KiB/s.
		{"bw only", "fio-3.33", `"bw": 4, "runtime": 1000, "iops": 1`, 0, 4096, 0, 0},
		// No version: io_kbytes or clat_ns say bytes, their absence KiB.
		{"no version, io_kbytes", "", `"io_bytes": 2048, "io_kbytes": 2, "runtime": 1000, "iops": 1`, 2048, 2048, 0, 0},
		{"no version, clat_ns", "", `"io_bytes": 2048, "clat_ns": {"mean": 5}, "runtime": 1000, "iops": 1`, 2048, 2048, 5, 0},
		{"no version, old keys", "", `"io_bytes": 2, "clat": {"mean": 5}, "runtime": 1000, "iops": 1`, 2048, 2048, 5000, 0},
		// Latency: µs under clat (and its percentiles), ns under clat_ns;
		// fio before 2.0.13 keys the 99th percentile "99.00".
		{"µs", "fio-2.18", `"clat": {"mean": 1.5, "percentile": {"1.000000": 1, "99.000000": 7}}`, 0, 0, 1500, 7000},
		{"old percentile key", "fio-2.0.10", `"clat": {"mean": 2, "percentile": {"99.00": 9, "0.00": 0}}`, 0, 0, 2000, 9000},
		{"ns", "fio-3.33", `"clat_ns": {"mean": 1.5, "percentile": {"99.000000": 7}}`, 0, 0, 1.5, 7},
		{"both: ns", "fio-3.33", `"clat": {"mean": 9, "percentile": {"99.000000": 1}}, "clat_ns": {"mean": 4, "percentile": {"99.000000": 2}}`, 0, 0, 4, 1000},
		// A 99th percentile of 0 (no samples) is none.
		{"p99 zero", "fio-3.33", `"clat_ns": {"mean": 3, "percentile": {"99.000000": 0}}`, 0, 0, 3, 0},
	}
	for _, c := range cases {
		r, err := Parse("u.json", []byte(doc(c.version, c.dir)))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		s := r.Jobs[0].Read
		if s.IOBytes != c.ioBytes || s.BandwidthBps != c.bwBps || s.ClatMeanNs != c.clatNs || s.P99Ns != c.p99Ns {
			t.Errorf("%s: %+v, want io_bytes %d bw %g clat %g p99 %g", c.name, s, c.ioBytes, c.bwBps, c.clatNs, c.p99Ns)
		}
		if wantOf := map[bool]string{true: "clat", false: ""}[c.p99Ns > 0]; s.P99Of != wantOf {
			t.Errorf("%s: p99 of %q, want %q", c.name, s.P99Of, wantOf)
		}
	}
}

// fio writes -1 (or its unsigned wrap, 18446744073709551615) for unknown
// values in places; a hostile file can write anything. Unknown is 0, never a
// negative or absurd number, and IOPS falls back to fio's own formula.
func TestParseUnknownValues(t *testing.T) {
	cases := []struct {
		name, dir string
		want      IOStats
	}{
		{"iops -1: total_ios/runtime", `"iops": -1, "total_ios": 500, "runtime": 2000, "bw_bytes": 100`,
			IOStats{TotalIOs: 500, IOPS: 250, RuntimeMs: 2000, BandwidthBps: 100}},
		{"iops -1, no total_ios", `"iops": -1, "runtime": 2000, "bw_bytes": 100`,
			IOStats{RuntimeMs: 2000, BandwidthBps: 100}},
		{"wrapped unsigned", `"iops": 18446744073709551615, "total_ios": 18446744073709551615, "runtime": 1000, "bw": -1, "io_bytes": -1`,
			IOStats{RuntimeMs: 1000}},
		{"runtime -1", `"iops": 10, "total_ios": 10, "runtime": -1, "io_bytes": 4096`,
			IOStats{TotalIOs: 10, IOPS: 10, IOBytes: 4096}},
		{"no runtime to derive from", `"iops": -1, "total_ios": 5, "runtime": 0, "io_bytes": 4096, "bw": 3`,
			IOStats{TotalIOs: 5, IOBytes: 4096, BandwidthBps: 3072}},
		{"latencies -1", `"iops": 10, "clat_ns": {"mean": -1, "percentile": {"99.000000": -1}}, "lat_ns": {"mean": -5}`,
			IOStats{IOPS: 10}},
		{"tiny", `"iops": 1e-300, "bw_bytes": 1e-12, "clat_ns": {"mean": 5e-10}`, IOStats{}},
		{"huge", `"iops": 1e300, "bw_bytes": 5e18, "clat_ns": {"mean": 1e19}`, IOStats{}},
		{"strings", `"iops": "100", "bw_bytes": "5", "runtime": "1000", "total_ios": true`, IOStats{}},
	}
	for _, c := range cases {
		r, err := Parse("u.json", []byte(`{"fio version": "fio-3.33", "jobs": [{"jobname": "j", "read": {`+c.dir+`}}]}`))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := r.Jobs[0].Read; got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
	// Bounds of what counts as a measurement.
	for _, c := range []struct {
		v    string
		want float64
	}{{"0", 0}, {"1e-9", 1e-9}, {"9e-10", 0}, {"4611686018427387904", 1 << 62}, {"4611686018427388905", 0}} {
		r, _ := Parse("u.json", []byte(`{"jobs": [{"read": {"iops": `+c.v+`}}]}`))
		if got := r.Jobs[0].Read.IOPS; got != c.want {
			t.Errorf("iops %s: %g, want %g", c.v, got, c.want)
		}
	}
}

func TestHasIO(t *testing.T) {
	ok := IOStats{RuntimeMs: 1, IOPS: 1, BandwidthBps: 1}
	for _, c := range []struct {
		s    IOStats
		want bool
	}{
		{ok, true},
		{IOStats{RuntimeMs: 0, IOPS: 1, BandwidthBps: 1}, false},
		{IOStats{RuntimeMs: 1, IOPS: 0, BandwidthBps: 1}, false},
		{IOStats{RuntimeMs: 1, IOPS: 1, BandwidthBps: 0}, false},
	} {
		if got := c.s.HasIO(); got != c.want {
			t.Errorf("%+v: %v", c.s, got)
		}
	}
}

// What fio printed before its JSON, and files holding several outputs.
func TestParseAll(t *testing.T) {
	doc := func(ts int) string {
		return fmt.Sprintf(`{"fio version": "fio-3.33", "timestamp": %d, "jobs": [{"jobname": "j", "error": 0}]}`, ts)
	}
	cases := []struct {
		name, data string
		ts         []int64
		err        string
	}{
		{"one", doc(1), []int64{1}, ""},
		{"appended runs", doc(1) + "\n" + doc(2) + "\n", []int64{1, 2}, ""},
		// A terminal session pasted twice, prompt and ls between (a real-world file).
		{"same output twice", doc(1) + "\nroot@host:~# cat out-0\n" + doc(1) + "\n", []int64{1}, ""},
		{"prompt before the brace", ">" + doc(3), []int64{3}, ""},
		// The brace after the prompt, not the first line that starts with
		// one: that is the first job (a real-world file).
		{"prompt, fio's indentation", ">{\n  \"timestamp\": 5,\n  \"jobs\": [\n    {\"jobname\": \"j\"}\n  ]\n}\n", []int64{5}, ""},
		{"normal report after", "fio-3.33\n" + doc(4) + "\nRun status group 0 (all jobs):\n", []int64{4}, ""},
		{"second cut", doc(1) + "\n" + doc(2)[:30], nil, "x.json (fio output 2 in the file): JSON ends before its closing brace"},
		{"second broken", doc(1) + "\n{\"jobs\": [1,]}\n", nil, "x.json (fio output 2 in the file): not valid JSON"},
		{"second not fio", doc(1) + "\n{\"a\": 1}\n", nil, "x.json (fio output 2 in the file): no jobs[] array"},
		{"braces in strings", `{"jobs": [{"jobname": "a}b{\"c"}]}`, []int64{0}, ""},
	}
	for _, c := range cases {
		rs, err := ParseAll("x.json", []byte(c.data))
		if c.err != "" {
			if err == nil || !strings.HasPrefix(err.Error(), c.err) {
				t.Errorf("%s: %v, want %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var ts []int64
		for _, r := range rs {
			ts = append(ts, r.Timestamp)
			if r.File != "x.json" || len(r.Jobs) != 1 {
				t.Errorf("%s: %+v", c.name, r)
			}
		}
		if !slices.Equal(ts, c.ts) {
			t.Errorf("%s: timestamps %v, want %v", c.name, ts, c.ts)
		}
	}
	if r, _ := Parse("x.json", []byte(`{"jobs": [{"jobname": "a}b{\"c"}]}`)); r.Jobs[0].Name != `a}b{"c` {
		t.Errorf("%q", r.Jobs[0].Name)
	}
}

// fio's own lines before the JSON: notes, error lines matched to the job by
// errno, and where they are not in the file (--output=FILE sends them to the
// terminal).
func TestParseFailedReal(t *testing.T) {
	cases := []struct {
		file, job string
		err       int
		errText   string // prefix
		ioErrors  int64
		firstErr  int
		notes     int
		measured  []string
	}{
		{"open-einval.json", "odirect", 22, "fio: pid=", 0, 0, 1, nil},
		{"enospc-no-line.json", "fullwrite", 28, "", 0, 0, 0, nil},
		{"enospc-partial.json", "fullrw", 28, "fio: pid=", 0, 0, 1, []string{"read"}},
		{"continue-on-error.json", "coe", 28, "fio: pid=", 1, 28, 1, nil},
		{"eisdir.json", "isdir", 21, "", 0, 0, 0, nil},
		{"interrupted.json", "stopped", 0, "", 0, 0, 1, []string{"read"}},
	}
	for _, c := range cases {
		r, err := ReadFile(filepath.Join("testdata", "real", "failed", c.file))
		if err != nil {
			t.Fatal(err)
		}
		j := r.Jobs[0]
		var measured []string
		for _, d := range Dirs {
			if j.Dir(d).HasIO() {
				measured = append(measured, d)
			}
		}
		if j.Name != c.job || j.Error != c.err || !strings.HasPrefix(j.ErrorText, c.errText) || (c.errText == "") != (j.ErrorText == "") ||
			j.IOErrors != c.ioErrors || j.FirstIOError != c.firstErr || len(r.Notes) != c.notes || !slices.Equal(measured, c.measured) {
			t.Errorf("%s: %s error %d %q io errors %d first %d notes %q measured %v", c.file, j.Name, j.Error, j.ErrorText,
				j.IOErrors, j.FirstIOError, r.Notes, measured)
		}
		if c.errText != "" && !strings.Contains(j.ErrorText, fmt.Sprintf("err=%d/", c.err)) {
			t.Errorf("%s: %q is not fio's line for error %d", c.file, j.ErrorText, c.err)
		}
	}
	r, _ := ReadFile(filepath.Join("testdata", "real", "failed", "interrupted.json"))
	if !slices.Equal(r.Notes, []string{"fio: terminating on signal 2"}) {
		t.Errorf("notes %q", r.Notes)
	}
	// unified_rw_reporting=1: one "mixed" direction.
	r, _ = ReadFile(filepath.Join("testdata", "real", "shapes", "mixed.json"))
	if j := &r.Jobs[0]; !j.Mixed.HasIO() || j.Read.HasIO() || j.Write.HasIO() || j.Dir("mixed") != &j.Mixed || j.Mixed.TotalIOs != 1024 {
		t.Errorf("mixed: %+v", j)
	}
	if (&Job{}).Dir("sideways") != nil {
		t.Error("Dir of an unknown direction")
	}
}

func TestNotes(t *testing.T) {
	long := "fio: " + strings.Repeat("x", 500)
	var many []string
	for i := 0; i < 12; i++ {
		many = append(many, fmt.Sprintf("fio: note %d", i))
	}
	cases := []struct {
		text string
		want []string
	}{
		{"note: both iodepth >= 1 and synchronous I/O engine\n  fio: indented\nfiona: no\n", []string{"fio: indented"}},
		{long, []string{long[:quoteLen] + "..."}},
		{long[:quoteLen], []string{long[:quoteLen]}},
		{strings.Join(many, "\n"), many[:maxNotes]},
		{"", nil},
	}
	for _, c := range cases {
		if got := notes([]byte(c.text)); !slices.Equal(got, c.want) {
			t.Errorf("%q: %q, want %q", c.text, got, c.want)
		}
	}
	ns := []string{"fio: pid=1, err=2/file:a", "fio: pid=1, err=28/file:b"}
	for n, want := range map[int]string{0: "", 2: ns[0], 28: ns[1], 8: ""} {
		if got := errorLine(ns, n); got != want {
			t.Errorf("errorLine %d: %q, want %q", n, got, want)
		}
	}
}
