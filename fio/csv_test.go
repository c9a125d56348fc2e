package fio

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// The summary's CSV, cell by cell: every metric's five columns, empty for
// a metric a group does not have or has no runs of, cv_pct empty without a
// CV, shortest exact decimals, each warning code once, CSV quoting.
func TestSummaryCSV(t *testing.T) {
	cv := 2.5
	s := &Summary{Groups: []Group{
		{Label: "local-zfs", Job: "rr4k", Dir: "read", Workload: "randread 4k QD32", Files: []string{"a.json", "b.json", "c.json"},
			IOPS:           Stat{N: 3, Mean: 44289.5, Min: 43000, Max: 45578, SpreadPct: 5.82, CVPct: &cv},
			BandwidthMiBps: Stat{N: 3, Mean: 173, Min: 170, Max: 177.25, SpreadPct: 4},
			ClatMeanNs:     &Stat{N: 0},
			P99Ns:          &Stat{N: 3, Mean: 1e6, Min: 9e5, Max: 1.1e6, SpreadPct: 20}, P99Of: "lat",
			Warnings: []Warning{{File: "a.json", Code: WarnNoRamp}, {File: "b.json", Code: WarnNoRamp}, {File: "a.json", Code: WarnBuffered}}},
		{Job: "sync, odd", Dir: "write", Workload: "randwrite 4k QD1 fsync=1", Files: []string{"s.json"},
			IOPS: Stat{N: 1, Mean: 288, Min: 288, Max: 288}, FsyncMeanNs: &Stat{N: 1, Mean: 3390000, Min: 3390000, Max: 3390000}},
	}}
	var b bytes.Buffer
	if err := s.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	want := "label,job,workload,direction,runs,p99_of," +
		"iops_mean,iops_min,iops_max,iops_spread_pct,iops_cv_pct," +
		"bw_mibps_mean,bw_mibps_min,bw_mibps_max,bw_mibps_spread_pct,bw_mibps_cv_pct," +
		"clat_mean_ns_mean,clat_mean_ns_min,clat_mean_ns_max,clat_mean_ns_spread_pct,clat_mean_ns_cv_pct," +
		"lat_mean_ns_mean,lat_mean_ns_min,lat_mean_ns_max,lat_mean_ns_spread_pct,lat_mean_ns_cv_pct," +
		"p99_ns_mean,p99_ns_min,p99_ns_max,p99_ns_spread_pct,p99_ns_cv_pct," +
		"fsync_mean_ns_mean,fsync_mean_ns_min,fsync_mean_ns_max,fsync_mean_ns_spread_pct,fsync_mean_ns_cv_pct,warnings\n" +
		"local-zfs,rr4k,randread 4k QD32,read,3,lat,44289.5,43000,45578,5.82,2.5,173,170,177.25,4,,,,,,,,,,,,1000000,900000,1100000,20,,,,,,,no-ramp;buffered\n" +
		`,"sync, odd",randwrite 4k QD1 fsync=1,write,1,,288,288,288,0,,,,,,,,,,,,,,,,,,,,,,3390000,3390000,3390000,0,,` + "\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	var empty bytes.Buffer
	if err := (&Summary{}).WriteCSV(&empty); err != nil || strings.Count(empty.String(), "\n") != 1 {
		t.Errorf("no groups: the header alone; %v %q", err, empty.String())
	}
}

// The comparison's CSV: both sides' stats, the difference, the verdict,
// the p-value only where there is one, which side is better.
func TestComparisonsCSV(t *testing.T) {
	p := 0.0123
	c := &Comparisons{Rows: []Comparison{
		{Job: "rr4k", Dir: "read", Workload: "randread 4k QD32", Metric: "iops",
			A: Stat{N: 2, Mean: 100, Min: 99, Max: 101, SpreadPct: 2}, B: Stat{N: 3, Mean: 120.5, Min: 120, Max: 121, SpreadPct: 0.83},
			DiffPct: 20.5, Verdict: Different, PValue: &p, Better: "B"},
		{Job: "rw4k", Dir: "write", Workload: "randwrite 4k QD32", Metric: "p99", Of: "clat",
			A: Stat{N: 1, Mean: 5}, B: Stat{}, DiffPct: -100, Verdict: Insufficient},
	}}
	var b bytes.Buffer
	if err := c.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	want := "job,direction,workload,metric,latency_of,a_runs,b_runs," +
		"a_mean,a_min,a_max,a_spread_pct,a_cv_pct,b_mean,b_min,b_max,b_spread_pct,b_cv_pct,diff_pct,verdict,p_value,better\n" +
		"rr4k,read,randread 4k QD32,iops,,2,3,100,99,101,2,,120.5,120,121,0.83,,20.5,different,0.0123,B\n" +
		"rw4k,write,randwrite 4k QD32,p99,clat,1,0,5,0,0,0,,,,,,,-100,insufficient,,\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// A writer that fails is the error of both.
func TestCSVWriteError(t *testing.T) {
	if err := (&Summary{}).WriteCSV(failingWriter{}); err == nil {
		t.Error("summary: no error")
	}
	if err := (&Comparisons{}).WriteCSV(failingWriter{}); err == nil {
		t.Error("comparisons: no error")
	}
}
