package main

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var (
	fioReal = filepath.Join("..", "..", "fio", "testdata", "real")
	fioLab  = filepath.Join("..", "..", "fio", "testdata", "lab")
)

// tableRow finds the row of the table whose first fields are prefix, split
// on whitespace.
func tableRow(t *testing.T, out string, prefix ...string) []string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= len(prefix) && slices.Equal(f[:len(prefix)], prefix) {
			return f
		}
	}
	t.Fatalf("no row %q in\n%s", prefix, out)
	return nil
}

// Lab 19's table, from files rebuilt from its cells, prints back its cells.
func TestFioSummaryLab19Table(t *testing.T) {
	out, errs, code := runCLI(t, "fio", "summary", "--host-ram", "16G", filepath.Join(fioLab, "lab19"))
	if code != 0 || errs != "" {
		t.Fatalf("exit %d: %s", code, errs)
	}
	cases := []struct {
		prefix []string
		want   string
	}{
		{[]string{"local-zfs", "rr4k"}, "local-zfs rr4k randread 4k QD32 read 2 44,289 (±3%) 173 (±3%) - - -"},
		{[]string{"local-zfs", "rw4k"}, "local-zfs rw4k randwrite 4k QD32 write 2 2,336 (±50%) 9.12 (±50%) - - -"},
		{[]string{"local-zfs", "rw4kqd1"}, "local-zfs rw4kqd1 randwrite 4k QD1 write 2 4,766 (±6%) 18.6 (±6%) 210 (±6%) - -"},
		{[]string{"local-zfs", "sr1m"}, "local-zfs sr1m read 1M QD16 read 2 3,289 (±0%) 3,289 (±0%) - - -"},
		{[]string{"local-zfs", "sw1m"}, "local-zfs sw1m write 1M QD16 write 2 42.0 (±19%) 42.0 (±19%) - - -"},
		{[]string{"local-zfs", "sync"}, "local-zfs sync randwrite 4k QD1 fsync=1 write 1 288 1.12 - - 3,390"},
		{[]string{"rbd-vm", "rr4k"}, "rbd-vm rr4k randread 4k QD32 read 2 10,357 (±17%) 40.5 (±17%) - - -"},
		{[]string{"rbd-vm", "sr1m"}, "rbd-vm sr1m read 1M QD16 read 2 983 (±1%) 983 (±1%) - - -"},
		{[]string{"rbd-vm", "rw4kqd1"}, "rbd-vm rw4kqd1 randwrite 4k QD1 write 2 122 (±25%) 0.48 (±25%) 8,310 (±25%) - -"},
	}
	for _, c := range cases {
		if got := strings.Join(tableRow(t, out, c.prefix...), " "); got != c.want {
			t.Errorf("row\n got %s\nwant %s", got, c.want)
		}
	}
	for _, want := range []string{
		"LABEL  ", "CLAT MEAN µs", "CLAT P99 µs", "FSYNC MEAN µs",
		"area-below-ram: read area 2 GiB is smaller than host RAM 16 GiB",
		"      local-zfs/rr4k, local-zfs/sr1m, rbd-vm/rr4k, rbd-vm/sr1m\n",
		"short-runtime: measured for 15.0 s, under 20 s\n      local-zfs/sync, rbd-vm/sync\n",
		"single-run: ",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "fill") || strings.Contains(out, "no-fill") {
		t.Errorf("the fill pass is not a row, and it covers the reads:\n%s", out)
	}
}

// Empty, truncated and non-fio files: one warning each, the table printed,
// exit 1.
func TestFioSummaryBrokenFiles(t *testing.T) {
	bad := filepath.Join(fioReal, "bad")
	out, errs, code := runCLI(t, "fio", "summary", "--host-ram", "0", bad, filepath.Join(fioReal, "lab19"))
	if code != 1 || errs != "" {
		t.Fatalf("exit %d, want 1: %s", code, errs)
	}
	if n := len(strings.Split(strings.TrimSpace(strings.Split(out, "\n\n")[0]), "\n")); n != 1+12+1 {
		t.Errorf("table has %d lines, want header + 12 groups + legend:\n%s", n, out)
	}
	for _, want := range []string{
		"Not summarised (4 unreadable files):",
		"warning: " + filepath.Join(bad, "empty.json") + ": empty file\n",
		"warning: " + filepath.Join(bad, "truncated.json") + ": JSON ends before its closing brace (truncated",
		"warning: " + filepath.Join(bad, "error-only.json") + `: no JSON object in it (not fio --output-format=json output?); it starts with "fio: pid=0`,
		"warning: " + filepath.Join(bad, "no-jobs.json") + ": no jobs[] array",
	} {
		if strings.Count(out, want) != 1 {
			t.Errorf("want %q once in:\n%s", want, out)
		}
	}
	// Only broken files: nothing to summarise, still exit 1 with the warnings.
	out, _, code = runCLI(t, "fio", "summary", "--host-ram", "0", filepath.Join(bad, "empty.json"))
	if code != 1 || !strings.Contains(out, "empty.json: empty file") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestFioSummaryJSONAndCSV(t *testing.T) {
	args := []string{"fio", "summary", "--host-ram", "1G", filepath.Join(fioReal, "lab19"), filepath.Join(fioReal, "bad", "truncated.json")}
	out, errs, code := runCLI(t, append([]string{"--json"}, args...)...)
	var res struct {
		HostRAMBytes int64 `json:"host_ram_bytes"`
		Groups       []struct {
			Label, Job, Direction string
			Files                 []string
			IOPS                  struct {
				Runs  int       `json:"runs"`
				Mean  float64   `json:"mean"`
				CVPct *float64  `json:"cv_pct"`
				Vals  []float64 `json:"values"`
			} `json:"iops"`
			P99Of       string `json:"p99_of"`
			FsyncMeanNs *struct {
				Mean float64 `json:"mean"`
			} `json:"fsync_mean_ns"`
			Warnings []struct{ File, Code, Message string }
		}
		Preconditioning []string
		Unreadable      []struct{ File, Code, Message string }
	}
	if err := jsonUnmarshal(out, &res); err != nil || code != 1 {
		t.Fatalf("exit %d, %v: %s %s", code, err, out, errs)
	}
	if res.HostRAMBytes != 1<<30 || len(res.Groups) != 12 || len(res.Preconditioning) != 2 || len(res.Unreadable) != 1 || res.Unreadable[0].Code != "unreadable" {
		t.Fatalf("%+v", res)
	}
	for _, g := range res.Groups {
		if g.IOPS.Runs != 3 || len(g.Files) != 3 || g.IOPS.CVPct == nil || g.P99Of != "clat" || (g.FsyncMeanNs != nil) != (g.Job == "sync") {
			t.Errorf("%+v", g)
		}
		area := false
		for _, w := range g.Warnings {
			area = area || w.Code == "area-below-ram"
		}
		if area != (g.Direction == "read") {
			t.Errorf("%s/%s %s: area-below-ram %v", g.Label, g.Job, g.Direction, area)
		}
	}

	out, errs, code = runCLI(t, append([]string{"fio", "summary", "--csv"}, args[2:]...)...)
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || code != 1 || len(rows) != 13 {
		t.Fatalf("exit %d, %v, %d rows:\n%s", code, err, len(rows), out)
	}
	for _, col := range []string{"label", "job", "runs", "p99_of", "iops_mean", "iops_cv_pct", "bw_mibps_spread_pct", "clat_mean_ns_mean", "p99_ns_max", "fsync_mean_ns_mean", "warnings"} {
		if !slices.Contains(rows[0], col) {
			t.Errorf("CSV header lacks %s: %v", col, rows[0])
		}
	}
	if !strings.Contains(errs, "truncated.json: JSON ends before") || strings.Contains(out, "truncated") {
		t.Errorf("unreadable files go to stderr with --csv; stderr %q", errs)
	}
}

// Host RAM comes from PROC/meminfo (the global --proc), or --host-ram.
func TestFioSummaryHostRAM(t *testing.T) {
	for _, c := range []struct {
		meminfo string
		warned  bool
		note    bool
	}{
		{"MemTotal:        1048576 kB\nMemFree: 1 kB\n", true, false},
		{"MemTotal:         131072 kB\n", false, false},
		{"", false, true},
	} {
		proc := t.TempDir()
		if c.meminfo != "" {
			os.WriteFile(filepath.Join(proc, "meminfo"), []byte(c.meminfo), 0o644)
		}
		out, errs, code := runCLI(t, "--proc", proc, "fio", "summary", filepath.Join(fioReal, "lab19"))
		if code != 0 || strings.Contains(out, "area-below-ram") != c.warned || strings.Contains(errs, "host RAM unknown") != c.note {
			t.Errorf("meminfo %q: exit %d, stderr %q\n%s", c.meminfo, code, errs, out)
		}
		if c.warned && !strings.Contains(out, "read area 256 MiB is smaller than host RAM 1 GiB") {
			t.Errorf("%s", out)
		}
	}
}

func TestFioCompareLab37(t *testing.T) {
	lab37 := filepath.Join(fioLab, "lab37")
	cases := []struct {
		args []string
		code int
		rows [][]string // leading fields of rows that must be there
	}{
		// "native and threads beat io_uring in both rounds": beyond the spread.
		{[]string{"--metric", "iops", "io_uring", "native"}, 1, [][]string{
			{"rr4k", "read", "IOPS", "27,291", "(±1%)", "n=2", "32,775", "(±2%)", "n=2", "+20.1%", "different,", "B", "better", "-"},
			{"rr4k", "read", "MiB/s"}, // absent: --metric iops only, checked below
			{"rw4k", "write", "IOPS", "14,102", "(±11%)", "n=2", "9,133", "(±68%)", "n=2", "-35.2%", "within-noise", "-"},
		}},
		// VirtIO SCSI vs Block: IOPS and bandwidth within the noise...
		{[]string{"--metric", "iops,bw", "scsi", "virtio-blk"}, 0, [][]string{
			{"rw4k", "write", "IOPS", "9,394", "(±24%)", "n=2", "7,346", "(±5%)", "n=2", "-21.8%", "within-noise"},
			{"sw1m", "write", "MiB/s", "469", "(±78%)", "n=2", "596", "(±11%)", "n=2", "+27.2%", "within-noise"},
		}},
		// ...but the mean clat of random writes is just beyond both spreads.
		{[]string{"scsi", "virtio-blk"}, 1, [][]string{
			{"rw4k", "write", "clat", "mean", "µs", "3,436", "(±25%)", "n=2", "4,336", "(±5%)", "n=2", "+26.2%", "different,", "A", "better"},
		}},
		// All five default-option rounds of scsi1 (sections 2-4) vs VirtIO Block.
		{[]string{"--metric", "iops", "scsi-default", "virtio-blk"}, 0, [][]string{
			{"rw4k", "write", "IOPS", "11,137", "(±59%)", "n=5", "7,346", "(±5%)", "n=2", "-34.0%", "within-noise"},
		}},
		{[]string{"--metric", "iops", "scsi", "sata"}, 1, [][]string{
			{"rr4k", "read", "IOPS", "27,976", "(±8%)", "n=2", "7,952", "(±5%)", "n=2", "-71.6%", "different,", "A", "better"},
		}},
	}
	for _, c := range cases {
		out, errs, code := runCLI(t, append([]string{"fio", "compare", "--dir", lab37}, c.args...)...)
		if code != c.code || errs != "" {
			t.Errorf("%v: exit %d, want %d: %s\n%s", c.args, code, c.code, errs, out)
			continue
		}
		for _, r := range c.rows {
			if len(r) == 3 && r[2] == "MiB/s" {
				if strings.Contains(out, "MiB/s") {
					t.Errorf("%v: --metric iops printed MiB/s:\n%s", c.args, out)
				}
				continue
			}
			if got := tableRow(t, out, r[:3]...); !slices.Equal(got[:len(r)], r) {
				t.Errorf("%v:\n got %q\nwant %q", c.args, got, r)
			}
		}
		want := "\nNo metric differs by more than the spread between runs.\n"
		if c.code == 1 {
			want = "\nAt least one metric differs by more than the spread between runs.\n"
		}
		if !strings.HasSuffix(out, want) {
			t.Errorf("%v: no conclusion %q:\n%s", c.args, want, out)
		}
	}
}

// A and B as directories: the same verdict as the labels inside one.
func TestFioCompareDirectories(t *testing.T) {
	root := t.TempDir()
	for _, side := range []string{"io_uring", "native"} {
		dir := filepath.Join(root, "aio-"+side)
		os.Mkdir(dir, 0o755)
		files, _ := filepath.Glob(filepath.Join(fioLab, "lab37", side+"-*.json"))
		for _, f := range files {
			copyFile(t, f, filepath.Join(dir, filepath.Base(f)))
		}
	}
	out, errs, code := runCLI(t, "--json", "fio", "compare", "--metric", "iops", filepath.Join(root, "aio-io_uring"), filepath.Join(root, "aio-native"))
	var res struct {
		A, B        string
		Metrics     []string `json:"metrics_of_interest"`
		Different   bool
		Comparisons []struct {
			Job, Metric, Verdict, Better string
			DiffPct                      float64 `json:"diff_pct"`
			PValue                       *float64
			A, B                         struct{ Runs int }
		}
		Notes []string
	}
	if err := jsonUnmarshal(out, &res); err != nil || code != 1 {
		t.Fatalf("exit %d %v: %s %s", code, err, out, errs)
	}
	if !res.Different || !slices.Equal(res.Metrics, []string{"iops"}) || len(res.Comparisons) != 2 || len(res.Notes) != 0 {
		t.Fatalf("%+v", res)
	}
	if c := res.Comparisons[0]; c.Job != "rr4k" || c.Verdict != "different" || c.Better != "B" || c.PValue != nil || c.A.Runs != 2 {
		t.Errorf("%+v", c)
	}

	out, _, code = runCLI(t, "fio", "compare", "--csv", filepath.Join(root, "aio-io_uring"), filepath.Join(root, "aio-native"))
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	if err != nil || code != 1 || len(rows) != 1+2*4 || rows[0][len(rows[0])-3] != "verdict" {
		t.Errorf("exit %d %v %d rows (2 jobs x iops, bw, clat, p99: the lab printed no lat): %s", code, err, len(rows), out)
	}
}

// Real runs, 3 a side: every row has a Welch p-value, nothing differs.
func TestFioCompareReal(t *testing.T) {
	out, errs, code := runCLI(t, "fio", "compare", "--dir", filepath.Join(fioReal, "lab19"), "libaio", "io_uring")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	r := tableRow(t, out, "sw1m", "write", "IOPS")
	if got := strings.Join(r, " "); got != "sw1m write IOPS 1,353 (±47%) n=3 1,625 (±42%) n=3 +20.1% within-noise 0.4" {
		t.Errorf("%s", got)
	}
	if !strings.Contains(out, "note: options differ in every job: ioengine=libaio vs io_uring\n") {
		t.Errorf("%s", out)
	}
}

func TestFioUsageErrors(t *testing.T) {
	lab37 := filepath.Join(fioLab, "lab37")
	empty := t.TempDir()
	cases := []struct {
		args []string
		msg  string
	}{
		{[]string{"fio", "summary"}, "name a directory or files"},
		{[]string{"fio", "summary", filepath.Join(empty, "nope")}, "no such file or directory"},
		{[]string{"fio", "summary", empty}, "no *.json file in"},
		{[]string{"fio", "summary", "--group-by", "storage", lab37}, `--group-by "storage"`},
		{[]string{"fio", "summary", "--host-ram", "lots", lab37}, `--host-ram "lots"`},
		{[]string{"--json", "fio", "summary", "--csv", lab37}, "exclude each other"},
		{[]string{"fio", "compare", lab37}, "needs A and B"},
		{[]string{"fio", "compare", lab37, lab37}, "holds 7 labels (io_uring, native, sata, scsi, scsi-default, threads, virtio-blk)"},
		{[]string{"fio", "compare", "io_uring", "native"}, "io_uring is not a directory; to compare labels, name their directory with --dir"},
		{[]string{"fio", "compare", "--dir", lab37, "io_uring", "ceph"}, `no label "ceph" in`},
		{[]string{"fio", "compare", "--dir", lab37, "--metric", "iops,speed", "io_uring", "native"}, `unknown --metric "speed"`},
		{[]string{"fio", "jobs"}, "name one disk"},
		{[]string{"fio", "jobs", "/dev/sdb"}, "not a /dev/disk/by-id/ path"},
		{[]string{"fio", "jobs", "--size", "big", "/dev/disk/by-id/virtio-x"}, `--size "big"`},
		{[]string{"fio", "jobs", "--runs", "0", "/dev/disk/by-id/virtio-x"}, `--runs "0": must be at least 1`},
		{[]string{"fio", "jobs", "--runtime", "0", "/dev/disk/by-id/virtio-x"}, `--runtime "0": must be at least 1`},
		{[]string{"fio", "jobs", "--ramp", "-1", "/dev/disk/by-id/virtio-x"}, `--ramp "-1": must be at least 0`},
		{[]string{"fio", "jobs", "--size", "0", "/dev/disk/by-id/virtio-x"}, `--size "0"`},
		// Nothing typed may start a line or a shell word in the job file.
		{[]string{"fio", "jobs", "--label", "x\n[evil]\nfilename=/dev/sda", "/dev/disk/by-id/virtio-x"}, `--label "x\n[evil]\nfilename=/dev/sda": letters, digits`},
		{[]string{"fio", "jobs", "--label", "a b", "/dev/disk/by-id/virtio-x"}, `--label "a b"`},
		{[]string{"fio", "jobs", "/dev/disk/by-id/x\nrw=write"}, `device "/dev/disk/by-id/x\nrw=write": a /dev/disk/by-id/ name holds`},
		{[]string{"fio", "jobs", "/dev/disk/by-id/../../sda"}, `device "/dev/disk/by-id/../../sda"`},
		{[]string{"fio", "summary", "--no-such-flag", lab37}, "flag provided but not defined"},
	}
	for _, c := range cases {
		out, errs, code := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errs, c.msg) {
			t.Errorf("%v: exit %d, want 2 and %q on stderr; stderr %q stdout %q", c.args, code, c.msg, errs, out)
		}
	}
}

func TestFioJobs(t *testing.T) {
	dev := "/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_drive-scsi1"
	out, errs, code := runCLI(t, "fio", "jobs", "--runs", "2", dev)
	if code != 0 || errs != "" {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"filename=" + dev + "\n", "--output=scsi1-$job-$run.json", "--output=scsi1-fill.json", "size=2G\n", "runtime=20\n", "ramp_time=3\n", "$(seq 2)", "[sync]"} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	out, _, _ = runCLI(t, "fio", "jobs", "--label", "local-zfs", "--size", "8G", "--runtime", "60", dev)
	if !strings.Contains(out, "--output=local-zfs-$job-$run.json") || !strings.Contains(out, "size=8G\n") || !strings.Contains(out, "runtime=60\n") {
		t.Errorf("%s", out)
	}
	// A USB disk's by-id name holds a colon: fio would read two files.
	out, _, code = runCLI(t, "fio", "jobs", "/dev/disk/by-id/usb-SanDisk_Cruzer_Blade_4C53-0:0")
	if code != 0 || !strings.Contains(out, "filename=/dev/disk/by-id/usb-SanDisk_Cruzer_Blade_4C53-0\\:0\n") || !strings.Contains(out, "--output=usb-SanDisk_Cruzer_Blade_4C53-0:0-fill.json") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestFioHelp(t *testing.T) {
	out, _, code := runCLI(t, "fio", "summary", "--help")
	if code != 0 || !strings.Contains(out, "44,289 (±3%)") || !strings.Contains(out, "Changes nothing") || !strings.Contains(out, "EXIT CODES") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{"fio 2.x files are read in the same units", "bw_bytes", "\"outcome\": \"nothing-usable\"", "interrupted", "no-options", "Not summarised"} {
		if !strings.Contains(out, want) {
			t.Errorf("fio summary --help lacks %q", want)
		}
	}
	out, _, _ = runCLI(t, "fio", "--help")
	for _, sub := range []string{"summary", "compare", "jobs", "Changes nothing"} {
		if !strings.Contains(out, sub) {
			t.Errorf("fio --help lacks %q:\n%s", sub, out)
		}
	}
}

// Real failed runs: each named with fio's error, the runs that measured
// something summarised, exit 1 (issue 14 #8).
func TestFioSummaryFailedRuns(t *testing.T) {
	failed := filepath.Join(fioReal, "failed")
	out, errs, code := runCLI(t, "fio", "summary", "--host-ram", "0", failed)
	if code != 1 || errs != "" {
		t.Fatalf("exit %d, want 1: %s\n%s", code, errs, out)
	}
	if r := strings.Join(tableRow(t, out, "failed", "fullrw"), " "); !strings.HasPrefix(r, "failed fullrw randrw 4k QD1 read 1 3,000 11.7 ") {
		t.Errorf("row %s", r)
	}
	for _, want := range []string{
		"job-error: fio reported error 28 (no space left on device) for job \"fullrw\": \"fio: pid=",
		"interrupted: fio was stopped (\"fio: terminating on signal 2\"): the run is shorter than asked\n      failed/stopped\n",
		"\nNot summarised (5 runs failed or without I/O):\n",
		"warning: " + filepath.Join(failed, "open-einval.json") + ": fio reported error 22 (invalid argument) for job \"odirect\": \"fio: pid=",
		"warning: " + filepath.Join(failed, "exitall-no-io.json") + ": job \"late\": fio measured no I/O in any direction\n",
		"warning: " + filepath.Join(failed, "eisdir.json") + ": fio reported error 21 (is a directory) for job \"isdir\": no I/O measured\n",
	} {
		if strings.Count(out, want) != 1 {
			t.Errorf("want %q once in:\n%s", want, out)
		}
	}
	out, _, code = runCLI(t, "--json", "fio", "summary", "--host-ram", "0", failed)
	var res struct {
		Outcome string
		Groups  []struct{ Job string }
		Failed  []struct{ File, Code, Message string }
	}
	if err := jsonUnmarshal(out, &res); err != nil || code != 1 || res.Outcome != "partial" || len(res.Groups) != 3 || len(res.Failed) != 5 {
		t.Fatalf("exit %d %v: %+v", code, err, res)
	}
	if f := res.Failed[1]; f.File != filepath.Join(failed, "eisdir.json") || f.Code != "job-error" {
		t.Errorf("%+v", f)
	}
	// Good runs only: exit 0, "complete".
	out, _, code = runCLI(t, "--json", "fio", "summary", "--host-ram", "0", filepath.Join(fioReal, "lab19"))
	if err := jsonUnmarshal(out, &res); err != nil || code != 0 || res.Outcome != "complete" || res.Failed == nil || len(res.Failed) != 0 {
		t.Errorf("exit %d %v: %+v", code, err, res)
	}
}

// Nothing usable: no table, every file named, exit 1 with one line on
// stderr; in JSON and CSV too (issues 14 #8, 15 #9).
func TestFioSummaryNothingUsable(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "empty-jobs.json"), []byte(`{"fio version": "fio-3.33", "jobs": []}`), 0o644)
	copyFile(t, filepath.Join(fioReal, "failed", "open-einval.json"), filepath.Join(dir, "open-einval.json"))
	out, errs, code := runCLI(t, "fio", "summary", "--host-ram", "0", dir)
	if code != 1 || strings.Contains(out, "LABEL") || strings.Contains(out, "±N%") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{
		"Not summarised (2 runs failed or without I/O):\n",
		"warning: " + filepath.Join(dir, "empty-jobs.json") + ": no job in it (\"jobs\": [])\n",
		"warning: " + filepath.Join(dir, "open-einval.json") + ": fio reported error 22 (invalid argument)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("lacks %q:\n%s", want, out)
		}
	}
	if want := "fio summary: no usable run in " + dir + " (2 not summarised, each named above)\n"; !strings.HasSuffix(errs, want) {
		t.Errorf("stderr %q, want %q", errs, want)
	}
	out, _, code = runCLI(t, "--json", "fio", "summary", "--host-ram", "0", dir)
	var res struct {
		Outcome string
		Groups  []any
		Failed  []any
	}
	if err := jsonUnmarshal(out, &res); err != nil || code != 1 || res.Outcome != "nothing-usable" || res.Groups == nil || len(res.Groups) != 0 || len(res.Failed) != 2 {
		t.Errorf("exit %d %v: %s", code, err, out)
	}
	out, errs, code = runCLI(t, "fio", "summary", "--csv", "--host-ram", "0", dir)
	if code != 1 || strings.Count(out, "\n") != 1 || !strings.Contains(errs, "empty-jobs.json: no job in it") {
		t.Errorf("exit %d, csv %q, stderr %q", code, out, errs)
	}
}

// fio 2.x, recorded from fio-2.0.13 to 2.99 (fio/testdata/real/README.md):
// the latency columns are filled (issue 14 #8), in µs as for fio 3, whether
// fio wrote µs (clat) or ns (clat_ns), and MiB/s from io_bytes in KiB (before
// 2.21) or bytes; clones add up; fio before 2.3 printed no options.
func TestFioSummaryFio2(t *testing.T) {
	out, errs, code := runCLI(t, "fio", "summary", "--host-ram", "0", filepath.Join(fioReal, "fio2"))
	if code != 0 || errs != "" {
		t.Fatalf("exit %d: %s\n%s", code, errs, out)
	}
	for _, c := range []struct{ prefix, want []string }{
		{[]string{"fio-2.0.13", "sync"}, strings.Fields("fio-2.0.13 sync options unknown write 1 16,800 65.6 44.0 80.0 -")},
		// Clones without total_ios (before fio 2.1.14): latencies weighted by IOPS x runtime.
		{[]string{"fio-2.0.13", "clones"}, strings.Fields("fio-2.0.13 clones options unknown read 1 83,223 325 380 2,480 -")},
		{[]string{"fio-2.18", "rr4k"}, strings.Fields("fio-2.18 rr4k randread 4k QD32 read 2 86,656 (±5%) 339 (±5%) 365 (±5%) 541 (±11%) -")},
		{[]string{"fio-2.21", "sw1m"}, strings.Fields("fio-2.21 sw1m write 1M QD16 write 1 2,812 2,817 5,634 6,880 -")},
		{[]string{"fio-2.99", "clones"}, strings.Fields("fio-2.99 clones randread 4k QD16 x2 read 1 86,717 339 364 553 -")},
	} {
		if got := tableRow(t, out, c.prefix...); !slices.Equal(got, c.want) {
			t.Errorf("row\n got %q\nwant %q", got, c.want)
		}
	}
	if !strings.Contains(out, "no-options: fio (\"fio-2.0.13\") printed no job options") {
		t.Errorf("%s", out)
	}
}

// A side with no usable run has nothing to compare: exit 2 naming it, never
// "no difference" (exit 0) nor "different" (1).
func TestFioCompareNoUsableRun(t *testing.T) {
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	os.Mkdir(a, 0o755)
	os.Mkdir(b, 0o755)
	copyFile(t, filepath.Join(fioReal, "failed", "open-einval.json"), filepath.Join(a, "x-rr4k-1.json"))
	copyFile(t, filepath.Join(fioReal, "lab19", "libaio-rr4k-1.json"), filepath.Join(b, "libaio-rr4k-1.json"))
	_, errs, code := runCLI(t, "fio", "compare", a, b)
	if code != 2 || !strings.Contains(errs, "fio compare: "+a+": no usable run (1 file(s) or run(s) not summarised; first: "+
		filepath.Join(a, "x-rr4k-1.json")+": fio reported error 22") {
		t.Errorf("exit %d: %s", code, errs)
	}
	_, errs, code = runCLI(t, "fio", "compare", "--dir", a, "x", "y")
	if code != 2 || !strings.Contains(errs, "fio compare: "+a+": no usable run") {
		t.Errorf("--dir: exit %d: %s", code, errs)
	}
	// Only a fill pass: nothing to compare either.
	fill := filepath.Join(root, "fill")
	os.Mkdir(fill, 0o755)
	copyFile(t, filepath.Join(fioReal, "lab19", "libaio-fill.json"), filepath.Join(fill, "libaio-fill.json"))
	if _, errs, code := runCLI(t, "fio", "compare", fill, b); code != 2 || !strings.Contains(errs, "fio compare: "+fill+": no usable run (only fill passes: 1)") {
		t.Errorf("fill only: exit %d: %s", code, errs)
	}
	// A failed run beside usable ones is listed under the table.
	copyFile(t, filepath.Join(fioReal, "lab19", "libaio-rr4k-2.json"), filepath.Join(a, "libaio-rr4k-2.json"))
	out, _, code := runCLI(t, "fio", "compare", a, b)
	if code != 0 || !strings.Contains(out, "Not summarised (1 runs failed or without I/O):\n  warning: "+filepath.Join(a, "x-rr4k-1.json")) {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// Error lines quote at most a short prefix of what a file holds (issue 15 #9).
func TestFioErrorLinesAreShort(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "garbage.json"), []byte(strings.Repeat("A", 5000)+"\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "longname.json"), []byte(`{"jobs": [{"jobname": "`+strings.Repeat("n", 5000)+`", "error": 5}]}`), 0o644)
	out, _, code := runCLI(t, "fio", "summary", "--host-ram", "0", dir)
	if code != 1 {
		t.Errorf("exit %d", code)
	}
	for _, l := range strings.Split(out, "\n") {
		if len(l) > 400 {
			t.Errorf("%d-byte line: %.100s...", len(l), l)
		}
	}
	if !strings.Contains(out, `it starts with "AAAA`) || !strings.Contains(out, `... (5000 bytes)`) {
		t.Errorf("%s", out)
	}
}

// fio's -1 (unknown) never prints as a number (issue 15 #9): IOPS falls back
// to total_ios/runtime, an unknown latency is "-".
func TestFioSummaryUnknownValues(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "neg.json"), []byte(`{"fio version": "fio-3.33", "jobs": [{"jobname": "n",
		"job options": {"rw": "randread", "bs": "4k", "direct": "1", "ramp_time": "2"},
		"read": {"iops": -1, "total_ios": 3000, "runtime": 1000, "bw_bytes": -1, "io_bytes": 12288000,
			"clat_ns": {"mean": -1, "percentile": {"99.000000": -1}}, "lat_ns": {"mean": -1}}}]}`), 0o644)
	out, _, code := runCLI(t, "fio", "summary", "--host-ram", "0", dir)
	if got := strings.Join(tableRow(t, out, filepath.Base(dir), "n"), " "); code != 0 || got != filepath.Base(dir)+" n randread 4k QD1 read 1 3,000 11.7 - - -" {
		t.Errorf("exit %d: %s", code, got)
	}
	if strings.Contains(out, "-1") {
		t.Errorf("%s", out)
	}
}

// The ZFS ARC (PROC/spl/kstat/zfs/arcstats, storage/zfs's recorded file)
// is shown beside the table and in the JSON as evidence that reads may
// come from node RAM; a node without ZFS shows nothing, an unreadable file
// is said on stderr.
func TestFioSummaryARC(t *testing.T) {
	arc, err := os.ReadFile("../../storage/zfs/testdata/arcstats-openzfs2.txt")
	if err != nil {
		t.Fatal(err)
	}
	proc := t.TempDir()
	os.WriteFile(filepath.Join(proc, "meminfo"), []byte("MemTotal:         131072 kB\n"), 0o644)
	out, errs, code := runCLI(t, "--proc", proc, "fio", "summary", filepath.Join(fioReal, "lab19"))
	if code != 0 || strings.Contains(out, "ZFS ARC") || strings.Contains(errs, "ARC") {
		t.Errorf("no ZFS: exit %d %q\n%s", code, errs, out)
	}
	os.MkdirAll(filepath.Join(proc, "spl/kstat/zfs"), 0o755)
	os.WriteFile(filepath.Join(proc, "spl/kstat/zfs/arcstats"), arc, 0o644)
	out, errs, code = runCLI(t, "--proc", proc, "fio", "summary", filepath.Join(fioReal, "lab19"))
	if code != 0 || !strings.Contains(out, "ZFS ARC on this node, since the zfs module loaded: 90.27 % of reads hit (174896434 hits, 18851609 misses), 31.43 GiB held of 31.36 GiB at most") {
		t.Errorf("exit %d %q\n%s", code, errs, out)
	}
	out, _, _ = runCLI(t, "--proc", proc, "--json", "fio", "summary", filepath.Join(fioReal, "lab19"))
	if !strings.Contains(out, `"arc": {`) || !strings.Contains(out, `"hits": 174896434,`) || !strings.Contains(out, `"hit_percent": 90.27`) || !strings.Contains(out, `"max_bytes": 33676691456`) || !strings.Contains(out, `"host_ram_bytes": 134217728`) {
		t.Errorf("json %.300s ... %s", out, out[max(0, len(out)-300):])
	}
	os.WriteFile(filepath.Join(proc, "spl/kstat/zfs/arcstats"), []byte("name type data\n"), 0o644)
	if _, errs, code = runCLI(t, "--proc", proc, "fio", "summary", filepath.Join(fioReal, "lab19")); code != 0 || !strings.Contains(errs, "ZFS ARC unknown:") {
		t.Errorf("exit %d %q", code, errs)
	}
}

// --report: the page is written beside an unchanged table and exit code;
// a directory that does not exist is refused before anything is read.
func TestFioCompareReport(t *testing.T) {
	lab37 := filepath.Join(fioLab, "lab37")
	plain, _, code := runCLI(t, "fio", "compare", "--dir", lab37, "scsi", "sata")
	f := filepath.Join(t.TempDir(), "cmp.html")
	out, errs, code2 := runCLI(t, "fio", "compare", "--dir", lab37, "--report", f, "scsi", "sata")
	if out != plain || code2 != code || code != 1 || errs != "" {
		t.Errorf("--report changed the output: exit %d vs %d %s\n%s", code2, code, errs, out)
	}
	b, err := os.ReadFile(f)
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	if strings.Count(page, "<svg ") != 3 || strings.Count(page, `class="bar"`) != 6 || !strings.Contains(page, `<td class="different">different, A better</td>`) ||
		strings.Contains(page, "<script") || strings.Contains(strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, ""), "http") {
		t.Errorf("page:\n%.3000s", page)
	}
	_, errs, code = runCLI(t, "fio", "compare", "--dir", filepath.Join(t.TempDir(), "none"), "--report", filepath.Join(t.TempDir(), "no", "cmp.html"), "scsi", "sata")
	if code != 2 || !strings.Contains(errs, "--report") || !strings.Contains(errs, "no directory") {
		t.Errorf("exit %d: %s", code, errs)
	}
}
