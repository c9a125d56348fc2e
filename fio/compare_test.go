package fio

import (
	"path/filepath"
	"slices"
	"testing"
)

func TestJudge(t *testing.T) {
	cases := []struct {
		name string
		a, b []float64
		want Verdict
	}{
		{"one run a side", []float64{100}, []float64{200, 210}, Insufficient},
		{"ranges apart, gap beyond both spreads", []float64{100, 110}, []float64{130, 135}, Different},
		{"ranges overlap", []float64{100, 130}, []float64{125, 140}, WithinNoise},
		{"ranges touch", []float64{100, 120}, []float64{120, 125}, WithinNoise},
		{"apart, but gap below A's spread", []float64{100, 140}, []float64{141, 142}, WithinNoise},
		{"apart, but gap below B's spread", []float64{141, 142}, []float64{100, 140}, WithinNoise},
		{"lower side works too", []float64{200, 205}, []float64{100, 101}, Different},
		// With 3 runs the means move off the middle of the ranges: touching
		// ranges whose means are further apart than either spread.
		{"A's top touches B's bottom", []float64{100, 100, 110}, []float64{110, 120, 120}, WithinNoise},
		{"B's top touches A's bottom", []float64{110, 120, 120}, []float64{100, 100, 110}, WithinNoise},
		{"gap equal to A's spread", []float64{100, 100, 130}, []float64{140, 140, 140}, WithinNoise},
		{"gap equal to B's spread", []float64{140, 140, 140}, []float64{100, 100, 130}, WithinNoise},
		{"gap just beyond both", []float64{100, 100, 129}, []float64{140, 140, 140}, Different},
	}
	for _, c := range cases {
		if got := Judge(NewStat(c.a), NewStat(c.b)); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

func labGroups(t *testing.T, set, label string) []Group {
	t.Helper()
	s := summarize(t, Options{GroupBy: GroupAuto}, filepath.Join("testdata", "lab", set))
	var gs []Group
	for _, g := range s.Groups {
		if g.Label == label {
			gs = append(gs, g)
		}
	}
	if len(gs) == 0 {
		t.Fatalf("no label %s in %s", label, set)
	}
	return gs
}

func row(t *testing.T, c *Comparisons, job, metric string) Comparison {
	t.Helper()
	for _, r := range c.Rows {
		if r.Job == job && r.Metric == metric {
			return r
		}
	}
	t.Fatalf("no row %s %s in %+v", job, metric, c.Rows)
	return Comparison{}
}

// The labs' own comparisons, run on files rebuilt from their figures. The
// verdicts match what the labs conclude in words.
func TestCompareLabFigures(t *testing.T) {
	cases := []struct {
		set, a, b, job, metric string
		want                   Verdict
		better                 string
		why                    string
	}{
		// Lab 37 section 4: "native and threads beat io_uring in both rounds, by 13-22%".
		{"lab37", "io_uring", "native", "rr4k", "iops", Different, "B", "27,121-27,460 vs 32,438-33,112: apart by far more than either spread"},
		{"lab37", "io_uring", "threads", "rr4k", "iops", Different, "B", ""},
		{"lab37", "io_uring", "native", "rr4k", "clat", Different, "B", ""},
		// "The spread of an unchanged configuration covers the differences between modes."
		{"lab37", "io_uring", "native", "rw4k", "iops", WithinNoise, "", "ranges apart, but native's own runs differ by 6,179"},
		{"lab37", "io_uring", "threads", "rw4k", "iops", Different, "A", "threads 6,368-7,674 never came near io_uring 13,340-14,864"},
		// Lab 37 section 2: "VirtIO SCSI and Block indistinguishable".
		{"lab37", "scsi", "virtio-blk", "rw4k", "iops", WithinNoise, "", "SCSI ahead in both rounds, but by 2,047 < its own 2,293 spread"},
		{"lab37", "scsi", "virtio-blk", "rr4k", "iops", WithinNoise, "", ""},
		{"lab37", "scsi", "virtio-blk", "sw1m", "bw", WithinNoise, "", "285 and 652 MiB/s on the same disk"},
		{"lab37", "scsi", "virtio-blk", "rr4k", "p99", WithinNoise, "", ""},
		// Not in the lab's words: the mean clat of random writes is just
		// beyond both spreads (899.5 µs apart, SCSI's own runs 858 µs).
		{"lab37", "scsi", "virtio-blk", "rw4k", "clat", Different, "A", ""},
		// "SATA falls far behind both VirtIO controllers for random reads."
		{"lab37", "scsi", "sata", "rr4k", "iops", Different, "A", ""},
		{"lab37", "virtio-blk", "sata", "rr4k", "clat", Different, "A", ""},
		{"lab37", "scsi", "sata", "sw1m", "bw", WithinNoise, "", ""},
		// All five default-option rounds of scsi1 (sections 2-4) against VirtIO Block.
		{"lab37", "scsi-default", "virtio-blk", "rw4k", "iops", WithinNoise, "", "8,247-14,864 covers Block's 7,146-7,546 gap"},
		{"lab37", "scsi-default", "virtio-blk", "rr4k", "iops", WithinNoise, "", ""},
		{"lab37", "scsi-default", "native", "rr4k", "iops", Different, "B", "native beats every default read"},
		// Lab 19: one fsync run per storage.
		{"lab19", "local-zfs", "rbd-vm", "sync", "fsync", Insufficient, "", ""},
		{"lab19", "local-zfs", "rbd-vm", "rr4k", "iops", Different, "A", ""},
		{"lab19", "local-zfs", "rbd-vm", "sw1m", "bw", Different, "A", "42 (±19%) vs 20 (±27%): 38-46 vs 17-23 MiB/s"},
		{"lab19", "local-zfs", "rbd-vm", "rw4k", "iops", Different, "A", "2,336 (±50%) vs 306 (±11%): 2,030 apart, more than local-zfs's 1,168"},
	}
	for _, c := range cases {
		cmp := Compare(labGroups(t, c.set, c.a), labGroups(t, c.set, c.b), nil)
		r := row(t, cmp, c.job, c.metric)
		if r.Verdict != c.want || r.Better != c.better {
			t.Errorf("%s %s vs %s %s %s: %s (better %q), want %s (%q) %s\n A %+v\n B %+v",
				c.set, c.a, c.b, c.job, c.metric, r.Verdict, r.Better, c.want, c.better, c.why, r.A, r.B)
		}
		if r.PValue != nil {
			t.Errorf("%s %s: p-value with %d and %d runs", c.a, c.b, r.A.N, r.B.N)
		}
	}

	cmp := Compare(labGroups(t, "lab37", "io_uring"), labGroups(t, "lab37", "native"), []string{"iops"})
	if r := row(t, cmp, "rr4k", "iops"); !near(r.DiffPct, (32775-27290.5)/27290.5*100, 1e-9) || len(cmp.Rows) != 2 {
		t.Errorf("diff %v, %d rows", r.DiffPct, len(cmp.Rows))
	}
	// --metric gates the exit code: writes' clat differs, their IOPS do not.
	cmp = Compare(labGroups(t, "lab37", "scsi"), labGroups(t, "lab37", "virtio-blk"), nil)
	if !cmp.AnyDifferent(nil) || cmp.AnyDifferent([]string{"iops"}) || cmp.AnyDifferent([]string{"iops", "bw", "p99"}) {
		t.Error("AnyDifferent")
	}
	cmp = Compare(labGroups(t, "lab37", "io_uring"), labGroups(t, "lab37", "scsi"), nil)
	if !slices.Contains(cmp.Notes, "sw1m (write): only in B") {
		t.Errorf("notes %q", cmp.Notes)
	}
}

// Real runs, 3 a side, of two fio engines on the same container disk: no
// difference stands out of the noise, and every row has a p-value.
func TestCompareReal(t *testing.T) {
	s := summarize(t, Options{GroupBy: GroupAuto}, filepath.Join("testdata", "real", "lab19"))
	var a, b []Group
	for _, g := range s.Groups {
		if g.Label == "libaio" {
			a = append(a, g)
		} else {
			b = append(b, g)
		}
	}
	cmp := Compare(a, b, nil)
	if len(cmp.Rows) != 6*5+1 || !slices.Equal(cmp.Notes, []string{"options differ in every job: ioengine=libaio vs io_uring"}) {
		t.Errorf("%d rows, notes %q", len(cmp.Rows), cmp.Notes)
	}
	for _, r := range cmp.Rows {
		if r.Verdict != WithinNoise || r.PValue == nil || *r.PValue <= 0 || *r.PValue > 1 {
			t.Errorf("%s %s: %s p %v", r.Job, r.Metric, r.Verdict, r.PValue)
		}
	}
	if cmp.AnyDifferent(nil) {
		t.Error("AnyDifferent")
	}
	// sw1m IOPS: Welch by the independent Python integration (t=-0.939, df=3.87).
	r := row(t, cmp, "sw1m", "iops")
	if !slices.Equal(r.A.Values, []float64{1652.491694, 1014.588859, 1393.023256}) || !near(*r.PValue, 0.40236972501313006, 1e-8) {
		t.Errorf("sw1m: %v p=%v", r.A.Values, *r.PValue)
	}
}

func TestMetricByKey(t *testing.T) {
	for _, m := range Metrics {
		if got, ok := MetricByKey(m.Key); !ok || got.Key != m.Key || got.Title != m.Title || got.HigherIsBetter != m.HigherIsBetter {
			t.Errorf("%s: %+v %v", m.Key, got, ok)
		}
	}
	if m, ok := MetricByKey("speed"); ok || m.Key != "" {
		t.Errorf("speed: %+v", m)
	}
}

// Shapes the labs do not have: a job with two option sets in B, p99 of
// different latencies, a mean of 0, options only one side has.
func TestCompareEdges(t *testing.T) {
	g := func(job, p99Of string, opts map[string]string, iops ...float64) Group {
		p99 := NewStat(iops)
		return Group{Job: job, Dir: "read", Workload: workload(opts), Options: opts, IOPS: NewStat(iops), BandwidthMiBps: NewStat(iops), P99Ns: &p99, P99Of: p99Of}
	}
	a := []Group{g("rr4k", "clat", map[string]string{"bs": "4k", "filename": "/a"}, 100, 110), g("sw1m", "clat", nil, 0, 0)}
	b := []Group{
		g("rr4k", "lat", map[string]string{"bs": "4k", "filename": "/b", "ramp_time": "2", "iodepth": "8"}, 200, 210),
		g("sw1m", "clat", nil, 5, 6), g("sw1m", "clat", map[string]string{"bs": "1M"}, 5, 6),
	}
	cmp := Compare(a, b, nil)
	var rows []string
	for _, r := range cmp.Rows {
		rows = append(rows, r.Job+" "+r.Metric)
	}
	// rr4k: no p99 row (clat vs lat); sw1m: two option sets in B, the one
	// of A's options compared, the other only in B.
	if !slices.Equal(rows, []string{"rr4k iops", "rr4k bw", "sw1m iops", "sw1m bw", "sw1m p99"}) {
		t.Errorf("rows %q", rows)
	}
	wantNotes := []string{"options differ in rr4k: iodepth=(unset) vs 8", "sw1m (read, read 1M QD1): only in B"}
	if !slices.Equal(cmp.Notes, wantNotes) {
		t.Errorf("notes %q, want %q", cmp.Notes, wantNotes)
	}
	if r := row(t, cmp, "rr4k", "iops"); r.Verdict != Different || r.Better != "B" || !near(r.DiffPct, 100/105.0*100, 1e-12) {
		t.Errorf("%+v", r)
	}
	// A mean of 0 has no percentage difference.
	cmp = Compare([]Group{g("z", "clat", nil, 0, 0)}, []Group{g("z", "clat", nil, 5, 6)}, []string{"iops", "p99"})
	if len(cmp.Rows) != 2 || cmp.Rows[0].DiffPct != 0 || cmp.Rows[1].Of != "clat" || cmp.Rows[0].Of != "" || cmp.Rows[0].Better != "B" {
		t.Errorf("%+v", cmp.Rows)
	}
}

// TestCompareSeveralOptionSets: real directories where every run names its
// job "test" (../shared/real-world/fio's brahiam-*: randread, read and
// randrw at 100M, 500M and 1G). A set is compared only with the other
// side's set of the same options, whichever side holds several: A with
// nine sets against B with one compared randread with randrw ("different,
// A better", exit 1) while B against A compared nothing.
func TestCompareSeveralOptionSets(t *testing.T) {
	g := func(rw, size string, iops ...float64) Group {
		o := map[string]string{"rw": rw, "bs": "128k", "filesize": size, "filename": "./testfile"}
		return Group{Job: "test", Dir: "read", Workload: workload(o) + " filesize=" + size, Options: o, IOPS: NewStat(iops), BandwidthMiBps: NewStat(iops)}
	}
	many := []Group{g("randread", "100M", 1407, 1409, 1447), g("read", "100M", 2190, 2209, 2220), g("randrw", "1G", 400, 585, 770)}
	one := []Group{g("randrw", "1G", 700, 712, 725)}
	for _, c := range []struct {
		name  string
		a, b  []Group
		rows  []string
		notes []string
	}{
		{"several in A", many, one, []string{"test randrw 128k QD1 filesize=1G iops", "test randrw 128k QD1 filesize=1G bw"},
			[]string{"test (read, randread 128k QD1 filesize=100M): only in A", "test (read, read 128k QD1 filesize=100M): only in A"}},
		{"several in B", one, many, []string{"test randrw 128k QD1 filesize=1G iops", "test randrw 128k QD1 filesize=1G bw"},
			[]string{"test (read, randread 128k QD1 filesize=100M): only in B", "test (read, read 128k QD1 filesize=100M): only in B"}},
		{"several on both sides", many, many, []string{
			"test randread 128k QD1 filesize=100M iops", "test randread 128k QD1 filesize=100M bw",
			"test read 128k QD1 filesize=100M iops", "test read 128k QD1 filesize=100M bw",
			"test randrw 128k QD1 filesize=1G iops", "test randrw 128k QD1 filesize=1G bw"}, []string{}},
		{"several in A, none the same in B", many[:2], one, nil, []string{
			"test (read, randread 128k QD1 filesize=100M): only in A", "test (read, read 128k QD1 filesize=100M): only in A",
			"test (read, randrw 128k QD1 filesize=1G): only in B"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cmp := Compare(c.a, c.b, []string{"iops", "bw"})
			var rows []string
			for _, r := range cmp.Rows {
				rows = append(rows, r.Job+" "+r.Workload+" "+r.Metric)
				if r.Verdict == Different {
					t.Errorf("%s: different, but only the same options are compared", r.Workload)
				}
			}
			if !slices.Equal(rows, c.rows) || !slices.Equal(cmp.Notes, c.notes) {
				t.Errorf("rows %q\nnotes %q\nwant %q\n     %q", rows, cmp.Notes, c.rows, c.notes)
			}
		})
	}
}
