package fio

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The labs publish figures, not fio files. labSets rebuilds fio JSON files
// from those figures so the whole path (parse, group, compare, CLI) runs on
// them: fio/testdata/lab/<set>/<label>-<job>-<run>.json.
// `go test ./fio -run TestLabFixtures -update` rewrites them.
var update = flag.Bool("update", false, "rewrite fio/testdata/lab from labSets")

// labRun is one printed run: IOPS, MiB/s, mean clat and p99 in µs (the
// columns of Lab 37's fiorun.sh). Zero means the lab did not print it.
type labRun struct{ iops, mibps, clatUs, p99Us float64 }

type labJob struct {
	label, job, rw, bs, qd, extra string
	runs                          []labRun
	latUs, fsyncUs                float64 // Lab 19's fsync table: total write latency and fsync latency
}

// lab37 is Lab 37 (002_*.txt), sections 2-4, scsi1/virtio1/sata1 on
// local-lvm, fio --direct=1 --ioengine=libaio --size=2G --ramp_time=2.
func lab37() []labJob {
	return []labJob{
		// Section 2, two rounds per controller.
		{label: "scsi", job: "rr4k", rw: "randread", bs: "4k", qd: "32", runs: []labRun{{26867, 105.0, 1161, 2998}, {29085, 113.6, 1072, 2671}}},
		{label: "scsi", job: "rw4k", rw: "randwrite", bs: "4k", qd: "32", runs: []labRun{{8247, 32.2, 3865, 45351}, {10540, 41.2, 3007, 23200}}},
		{label: "scsi", job: "sw1m", rw: "write", bs: "1M", qd: "16", runs: []labRun{{284, 284.9, 27874, 379585}, {652, 652.1, 12245, 78119}}},
		{label: "virtio-blk", job: "rr4k", rw: "randread", bs: "4k", qd: "32", runs: []labRun{{30766, 120.2, 1014, 2736}, {29454, 115.1, 1060, 2736}}},
		{label: "virtio-blk", job: "rw4k", rw: "randwrite", bs: "4k", qd: "32", runs: []labRun{{7546, 29.5, 4220, 32637}, {7146, 27.9, 4451, 28705}}},
		{label: "virtio-blk", job: "sw1m", rw: "write", bs: "1M", qd: "16", runs: []labRun{{563, 563.1, 14024, 71827}, {628, 628.9, 12534, 63701}}},
		{label: "sata", job: "rr4k", rw: "randread", bs: "4k", qd: "32", runs: []labRun{{8155, 31.9, 3804, 6193}, {7748, 30.3, 4003, 6128}}},
		{label: "sata", job: "rw4k", rw: "randwrite", bs: "4k", qd: "32", runs: []labRun{{5767, 22.5, 5436, 32375}, {2646, 10.3, 11972, 304087}}},
		{label: "sata", job: "sw1m", rw: "write", bs: "1M", qd: "16", runs: []labRun{{468, 468.7, 17126, 114819}, {344, 344.2, 22930, 214958}}},
		// scsi1 with the default options (cache=none, aio=io_uring) across
		// sections 2-4: the two rounds of section 2, cache=none of section 3,
		// aio=io_uring of section 4. "between 26,063 and 29,085 IOPS for
		// random reads and between 8,247 and 14,864 for random writes".
		{label: "scsi-default", job: "rr4k", rw: "randread", bs: "4k", qd: "32", runs: []labRun{
			{26867, 105.0, 1161, 2998}, {29085, 113.6, 1072, 2671}, {26063, 101.8, 1200, 3097}, {27460, 107.3, 1137, 3064}, {27121, 106.0, 1155, 3293}}},
		{label: "scsi-default", job: "rw4k", rw: "randwrite", bs: "4k", qd: "32", runs: []labRun{
			{8247, 32.2, 3865, 45351}, {10540, 41.2, 3007, 23200}, {8693, 34.0, 3654, 22938}, {13340, 52.1, 2385, 13959}, {14864, 58.1, 2179, 11600}}},
		// Section 4, two rounds per aio mode, cache=none.
		{label: "io_uring", job: "rr4k", rw: "randread", bs: "4k", qd: "32", runs: []labRun{{27460, 107.3, 1137, 3064}, {27121, 106.0, 1155, 3293}}},
		{label: "io_uring", job: "rw4k", rw: "randwrite", bs: "4k", qd: "32", runs: []labRun{{13340, 52.1, 2385, 13959}, {14864, 58.1, 2179, 11600}}},
		{label: "native", job: "rr4k", rw: "randread", bs: "4k", qd: "32", runs: []labRun{{32438, 126.7, 967, 2933}, {33112, 129.4, 948, 3031}}},
		{label: "native", job: "rw4k", rw: "randwrite", bs: "4k", qd: "32", runs: []labRun{{6043, 23.6, 5268, 50594}, {12222, 47.8, 2594, 16908}}},
		{label: "threads", job: "rr4k", rw: "randread", bs: "4k", qd: "32", runs: []labRun{{31479, 123.0, 996, 2769}, {30716, 120.0, 1021, 3064}}},
		{label: "threads", job: "rw4k", rw: "randwrite", bs: "4k", qd: "32", runs: []labRun{{6368, 24.9, 4995, 31326}, {7674, 30.0, 4142, 57410}}},
	}
}

// lab19 is Lab 19 (003_*.txt): two rows of its table, each cell "mean (±s%)"
// turned back into two runs mean*(1-s/200) and mean*(1+s/200), so that their
// gap is s% of the mean. Lab 19 prints no per-run values and no IOPS for the
// QD1 latency job: its IOPS here are 1/clat, and 1M jobs have IOPS = MiB/s.
func lab19() []labJob {
	two := func(mean, spreadPct float64, f func(v float64) labRun) []labRun {
		d := mean * spreadPct / 200
		return []labRun{f(mean - d), f(mean + d)}
	}
	iops4k := func(v float64) labRun { return labRun{iops: v, mibps: v * 4 / 1024} }
	mib1m := func(v float64) labRun { return labRun{iops: v, mibps: v} }
	qd1 := func(ms float64) labRun {
		return labRun{iops: 1000 / ms, mibps: 1000 / ms * 4 / 1024, clatUs: ms * 1000}
	}
	row := func(label string, rr, rrS, rw, rwS, qd1ms, qd1S, sr, srS, sw, swS, syncIOPS, syncLatMs, fsyncMs float64) []labJob {
		return []labJob{
			{label: label, job: "rr4k", rw: "randread", bs: "4k", qd: "32", runs: two(rr, rrS, iops4k)},
			{label: label, job: "rw4k", rw: "randwrite", bs: "4k", qd: "32", runs: two(rw, rwS, iops4k)},
			{label: label, job: "rw4kqd1", rw: "randwrite", bs: "4k", qd: "1", runs: two(qd1ms, qd1S, qd1)},
			{label: label, job: "sr1m", rw: "read", bs: "1M", qd: "16", runs: two(sr, srS, mib1m)},
			{label: label, job: "sw1m", rw: "write", bs: "1M", qd: "16", runs: two(sw, swS, mib1m)},
			// One run, 15 s with a 2 s ramp, as in the lab.
			{label: label, job: "sync", rw: "randwrite", bs: "4k", qd: "1", extra: "fsync",
				runs: []labRun{{syncIOPS, syncIOPS * 4 / 1024, 0, 0}}, latUs: syncLatMs * 1000, fsyncUs: fsyncMs * 1000},
		}
	}
	jobs := row("local-zfs", 44289, 3, 2336, 50, 0.21, 6, 3289, 0, 42, 19, 288, 0.52, 3.39)
	return append(jobs, row("rbd-vm", 10357, 17, 306, 11, 8.31, 25, 983, 1, 20, 27, 26, 38.21, 38.53)...)
}

var labSets = map[string]func() []labJob{"lab37": lab37, "lab19": lab19}

// labFiles renders a set: a fill file per label (both labs fill the 2 GiB
// area first), then one file per run, timestamps in that order.
func labFiles(jobs []labJob) map[string][]byte {
	files := map[string][]byte{}
	ts := int64(1794000000) // November 2026, when both labs ran
	dev := map[string]string{}
	for _, j := range jobs {
		if _, ok := dev[j.label]; !ok {
			dev[j.label] = fmt.Sprintf("/dev/disk/by-id/virtio-lab-%s", j.label)
			ts += 60
			fill := labRun{iops: 1000, mibps: 1000}
			files[j.label+"-fill.json"] = labJSON(labJob{label: j.label, job: "fill", rw: "write", bs: "1M", qd: "16"}, fill, dev[j.label], ts, 2<<30)
		}
	}
	for _, j := range jobs {
		for i, r := range j.runs {
			ts += 30
			files[fmt.Sprintf("%s-%s-%d.json", j.label, j.job, i+1)] = labJSON(j, r, dev[j.label], ts, 0)
		}
	}
	return files
}

// labJSON is the subset of fio's JSON the package reads, shaped as fio 3.39 prints it.
func labJSON(j labJob, r labRun, dev string, ts int64, ioBytes int64) []byte {
	runtimeS, ramp := 20, 2
	if j.job == "sync" {
		runtimeS = 15
	}
	opts := map[string]string{"name": j.job, "filename": dev, "rw": j.rw, "bs": j.bs, "iodepth": j.qd,
		"size": "2G", "direct": "1", "ioengine": "libaio"}
	if j.job != "fill" {
		opts["time_based"], opts["runtime"], opts["ramp_time"] = "1", fmt.Sprint(runtimeS), fmt.Sprint(ramp)
	}
	if j.extra == "fsync" {
		opts["fsync"] = "1"
	}
	zero := map[string]any{"io_bytes": 0, "io_kbytes": 0, "bw_bytes": 0, "bw": 0, "iops": 0, "runtime": 0, "total_ios": 0}
	dir := map[string]any{
		"bw_bytes":  r.mibps * (1 << 20), // fio prints whole numbers; the labs' figures are not
		"bw":        r.mibps * 1024,
		"iops":      r.iops,
		"runtime":   runtimeS * 1000,
		"total_ios": int64(r.iops * float64(runtimeS)),
		"io_bytes":  int64(r.mibps * float64(runtimeS) * (1 << 20)),
	}
	if ioBytes > 0 {
		dir["io_bytes"], dir["runtime"] = ioBytes, ioBytes/(1<<20)
	}
	dir["io_kbytes"] = dir["io_bytes"].(int64) >> 10
	if r.clatUs > 0 {
		clat := map[string]any{"mean": r.clatUs * 1000}
		if r.p99Us > 0 {
			clat["percentile"] = map[string]any{"99.000000": r.p99Us * 1000}
		}
		dir["clat_ns"] = clat
	}
	if j.latUs > 0 {
		dir["lat_ns"] = map[string]any{"mean": j.latUs * 1000}
	}
	job := map[string]any{"jobname": j.job, "groupid": 0, "error": 0, "job options": opts,
		"read": zero, "write": zero, "trim": zero, "sync": map[string]any{"total_ios": 0, "lat_ns": map[string]any{"mean": 0}}}
	if j.rw == "randread" || j.rw == "read" {
		job["read"] = dir
	} else {
		job["write"] = dir
	}
	if j.fsyncUs > 0 {
		job["sync"] = map[string]any{"total_ios": dir["total_ios"], "lat_ns": map[string]any{"mean": j.fsyncUs * 1000}}
	}
	out, err := json.MarshalIndent(map[string]any{"fio version": "fio-3.39", "timestamp": ts, "jobs": []any{job}}, "", "  ")
	if err != nil {
		panic(err)
	}
	return append(out, '\n')
}

// TestLabFixtures keeps fio/testdata/lab in step with labSets.
func TestLabFixtures(t *testing.T) {
	for set, jobs := range labSets {
		dir := filepath.Join("testdata", "lab", set)
		want := labFiles(jobs())
		if *update {
			os.RemoveAll(dir)
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, data := range want {
				if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		got, _ := filepath.Glob(filepath.Join(dir, "*.json"))
		if len(got) != len(want) {
			t.Errorf("%s: %d files, labSets makes %d (run go test ./fio -run TestLabFixtures -update)", dir, len(got), len(want))
		}
		for name, data := range want {
			have, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil || !bytes.Equal(have, data) {
				t.Errorf("%s/%s out of date (run go test ./fio -run TestLabFixtures -update)", dir, name)
			}
		}
	}
}
