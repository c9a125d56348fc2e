package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/bench"
)

func TestBenchUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "370"}, "name the disks to measure"},
		{[]string{"bench", "370", "scsi1", "--runs", "0"}, "--runs 0"},
		{[]string{"bench", "370", "scsi1", "--runtime", "1500ms"}, "whole seconds"},
		{[]string{"bench", "370", "scsi1", "--size", "512K"}, "--size"},
		{[]string{"bench", "370", "scsi1", "--job", "nosuch"}, `--job "nosuch": no such job`},
		{[]string{"bench", "370", "scsi1", "--jobs", "/nonexistent/my.fio"}, "--jobs"},
		{[]string{"bench", "370", "scsi1", "--report", "/nonexistent/r.html"}, "--report"},
		{[]string{"bench", "x", "scsi1"}, "VMID"},
	} {
		_, errs, code := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%v: exit %d: %s", c.args, code, errs)
		}
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
