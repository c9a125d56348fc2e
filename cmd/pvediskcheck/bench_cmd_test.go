package main

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/bench"
	"github.com/pvediskcheck/pvediskcheck/fio"
	"github.com/pvediskcheck/pvediskcheck/latency"
)

func TestBenchUsageErrors(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "jobs.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	file := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	secret := file("shadow", "root:$y$j9T$s3cretsalt$hash:19700:0:99999:7:::\n")
	pwned := file("pwned.fio", "[a]\nrw=read\nexec_prer=touch /tmp/PWNED\n")
	big := file("big.fio", "[a]\n"+strings.Repeat("; comment\n", bench.MaxJobFileBytes/10+1))
	t0 := time.Now()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "370"}, "name the disks to measure"},
		{[]string{"bench", "370", "scsi1", "--runs", "0"}, "--runs 0"},
		{[]string{"bench", "370", "scsi1", "--runs", "101"}, "--runs 101: at most 100"},
		{[]string{"bench", "370", "scsi1", "--jobs", "/dev/zero"}, "--jobs: /dev/zero: is a character device, not a regular file"},
		{[]string{"bench", "370", "scsi1", "--jobs", fifo}, "is a FIFO, not a regular file"},
		{[]string{"bench", "370", "scsi1", "--jobs", dir}, "is a directory"},
		{[]string{"bench", "370", "scsi1", "--jobs", big}, "is larger than 1 MiB"},
		{[]string{"bench", "370", "scsi1", "--jobs", secret}, "not a fio job file (line 1 is neither a [section], a comment nor an option); nothing of it is shown"},
		{[]string{"bench", "370", "scsi1", "--jobs", pwned}, "pwned.fio:3: exec_prer is not a whole option name: fio's command line would take it for exec_prerun"},
		{[]string{"bench", "370", "scsi1", "--runtime", "1500ms"}, "whole seconds"},
		{[]string{"bench", "370", "scsi1", "--size", "512K"}, "--size"},
		{[]string{"bench", "370", "scsi1", "--job", "nosuch"}, `--job "nosuch": no such job`},
		{[]string{"bench", "370", "scsi1", "--jobs", "/nonexistent/my.fio"}, "--jobs"},
		{[]string{"bench", "370", "scsi1", "--report", "/nonexistent/r.html"}, "--report"},
		{[]string{"bench", "x", "scsi1"}, "VMID"},
	} {
		_, errs, code := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) || strings.Contains(errs, "s3cret") {
			t.Errorf("%v: exit %d: %s", c.args, code, errs)
		}
	}
	if d := time.Since(t0); d > time.Minute {
		t.Errorf("the refusals took %s (a FIFO or /dev/zero read?)", d)
	}
}

func TestBenchRunsBoundsAForwardedRun(t *testing.T) {
	cmd := benchCommand()
	set := flag.NewFlagSet("bench", flag.ContinueOnError)
	for _, f := range cmd.Flags {
		if err := f.Apply(set); err != nil {
			t.Fatal(err)
		}
	}
	if err := set.Parse([]string{"--runtime", "20s", "--ramp", "3s", "--size", "2G", "370", "scsi1", "virtio1"}); err != nil {
		t.Fatal(err)
	}
	c := cli.NewContext(cli.NewApp(), set, nil)
	c.Command = cmd
	// 2 disks x 6 jobs x 2 runs x 23 s, twice; 2 fills of 2 GiB at 10 MiB/s.
	want := 2*6*2*2*23*time.Second + 2*(2048/10+1)*time.Second
	if got := benchRuns(c); got != want {
		t.Errorf("benchRuns = %s, want %s", got, want)
	}
}

// fio summary and fio compare of a folder bench wrote say what was measured.
func TestFioSummaryReadsBenchSettings(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"io_uring-rr4k-1.json", "io_uring-rr4k-2.json"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "fio", "testdata", "real", "lab19", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	settings := "# pvediskcheck bench: ...\nio_uring: virtio-scsi-single (scsi-hd), iothread, cache=none\n"
	if err := os.WriteFile(filepath.Join(dir, bench.SettingsFile), []byte(settings), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, _ := runCLI(t, "fio", "summary", dir)
	if !strings.Contains(out, "Measured by pvediskcheck bench") || !strings.Contains(out, "  io_uring: virtio-scsi-single (scsi-hd), iothread, cache=none\n") ||
		strings.Contains(out, "# pvediskcheck") || strings.Contains(errs, "settings") {
		t.Errorf("fio summary:\n%s\n%s", out, errs)
	}
	// A folder without it: nothing said.
	out, _, _ = runCLI(t, "fio", "summary", filepath.Join("..", "..", "fio", "testdata", "real", "lab19"))
	if strings.Contains(out, "Measured by") {
		t.Errorf("lab19 folder:\n%s", out)
	}
}

// TestPrintBenchLatency: the --histogram table has a row per job and kind
// QEMU has percentiles for, fio's p99 once per job, a run's reason for none
// and the notes; without --histogram nothing at all.
func TestPrintBenchLatency(t *testing.T) {
	st := func(v ...float64) fio.Stat { return fio.NewStat(v) }
	r := &bench.Result{Disks: []bench.DiskResult{{ID: "scsi4", Jobs: []bench.JobResult{
		{Name: "sync", P99: &fio.Stat{N: 2, Mean: 9.8e6, SpreadPct: 4}, QEMULatencyMs: map[string]fio.Stat{
			"write_p50": st(8.5, 8.7), "write_p95": st(9.4, 9.6), "write_p99": st(9.8, 9.8), "flush_p50": st(0.3), "flush_p95": st(0.6), "flush_p99": st(1)}},
		{Name: "rr4k", QEMULatencyWhy: "query-blockstats failed: gone"},
	}}}}
	var out strings.Builder
	printBenchLatency(&env{out: &out}, r)
	if out.Len() != 0 {
		t.Errorf("without --histogram: %q", out.String())
	}
	r.Histograms = []latency.Note{{VMID: 370, Disk: "scsi4", Owner: latency.SetByUs, Boundaries: 142}}
	printBenchLatency(&env{out: &out}, r)
	got := strings.Split(strings.TrimSpace(out.String()), "\n")
	want := []string{
		"QEMU's latency per job (its histograms, at the node; fio's P99 is the guest's):",
		"DISK   JOB   FIO P99      KIND   P50          P95          P99",
		"scsi4  sync  9.8ms (±4%)  write  8.6ms (±2%)  9.5ms (±2%)  9.8ms (±0%)",
		"scsi4  sync               flush  300µs        600µs        1ms",
		"  scsi4 rr4k: query-blockstats failed: gone",
		"  latency histogram of scsi4: set by pvediskcheck for the window, cleared after",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestBenchPlanHistogram: --dry-run with --histogram says which disks get
// a histogram, and is otherwise the same plan; without it, no such line.
func TestBenchPlanHistogram(t *testing.T) {
	jobs, err := bench.Pick(bench.LabJobSet(), []string{"rr4k"}, true)
	if err != nil {
		t.Fatal(err)
	}
	m, err := bench.NewMethod(jobs, 2, 2*time.Second, time.Second, "32M")
	if err != nil {
		t.Fatal(err)
	}
	disks := []bench.Disk{{ID: "scsi1", Target: bench.Target{Mode: bench.Raw, Path: "/dev/sdb"}}, {ID: "virtio1", Target: bench.Target{Mode: bench.Raw, Path: "/dev/vda"}}}
	var plain, hist strings.Builder
	printBenchPlan(&env{out: &plain}, 370, "fio-3.33", m, disks, "res", false)
	printBenchPlan(&env{out: &hist}, 370, "fio-3.33", m, disks, "res", true)
	const line = "--histogram: QEMU's latency histogram set on scsi1, virtio1 for the bench and cleared after (one found set is used as it is)\n"
	if strings.Contains(plain.String(), "--histogram") || strings.Replace(hist.String(), line, "", 1) != plain.String() {
		t.Errorf("without:\n%s\nwith:\n%s", plain.String(), hist.String())
	}
	if !strings.Contains(plain.String(), "results: res/\n\nscsi1-rr4k-1.json\tfio ") {
		t.Errorf("plan:\n%s", plain.String())
	}
}

// The first Ctrl-C ends main's context (bench gives the guest
// bench.InterruptGrace); the second ends bench's abort context at once.
func TestBenchSecondInterrupt(t *testing.T) {
	abort, stop := secondInterrupt(context.Background())
	defer stop()
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-abort.Done():
		t.Fatal("the first Ctrl-C ended the abort context")
	case <-time.After(200 * time.Millisecond):
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-abort.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the second Ctrl-C did not end the abort context")
	}
}
