package fio

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseReal(t *testing.T) {
	cases := []struct {
		file      string
		jobs      int
		name, dir string
		ios       int64
		bwKiBps   float64
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
		{"lab19/libaio-rr4k-1.json", 1, "rr4k", "read", 170035, 226679, 56659.446851, 3001, 559829.834788, 564101.331107, 2834432, "clat", 0, 0, 0},
		// json+: the same fields, plus latency bins the parser skips.
		{"lab19/io_uring-sync-2.json", 1, "sync", "write", 7176, 9507, 2376.946009, 3019, 118145.846711, 144832.990106, 1433600, "clat", 7175, 249568.080976, 3588096},
		// fio's "note: ..." line before the JSON.
		{"pitfalls/with-note.json", 1, "preamble", "write", 22148, 44273, 11068.465767, 2001, 89483.884369, 89635.628951, 214016, "clat", 0, 0, 0},
		// clat_percentiles=0 lat_percentiles=1: the p99 is of lat.
		{"pitfalls/lat-percentiles.json", 1, "latpct", "read", 150764, 200971, 50237.920693, 3001, 311351.082896, 317831.86577, 1400832, "lat", 0, 0, 0},
		// --output-format=normal,json: header lines, JSON, then the normal report.
		{"pitfalls/normal-and-json.json", 1, "both", "write", 105686, 140887, 35216.927691, 3001, 446245.233593, 453552.241407, 3653632, "clat", 0, 0, 0},
		// numjobs=2 without group_reporting: two entries; the first is checked.
		{"pitfalls/numjobs2.json", 2, "twojobs", "read", 101649, 135506, 33871.70943, 3001, 468223.204389, 471877.933349, 3915776, "clat", 0, 0, 0},
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
			want := IOStats{c.ios, io.IOBytes, c.bwKiBps, c.iops, c.runtimeMs, c.clatNs, c.latNs, c.p99Ns, c.p99Of}
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
	}
	for _, c := range cases {
		if got, ok := ParseSize(c.in); got != c.want || ok != c.ok {
			t.Errorf("ParseSize(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}
