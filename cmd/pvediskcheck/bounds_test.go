package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// Every number flag of every command has an upper bound its usage says,
// and a value past it is one line naming the flag, exit 2, before the
// command runs (issue 31, arguments: top --interval 1h1000000h hung;
// --runs and --interval had no bound).
func TestNumberFlagsBounded(t *testing.T) {
	app := newApp(&bytes.Buffer{}, &bytes.Buffer{})
	huge := map[string]string{"duration": "1h1000000h", "int": "2000000000", "float": "1e300"}
	type flagAt struct {
		path []string
		f    cli.Flag
	}
	var flags []flagAt
	for _, f := range app.Flags {
		flags = append(flags, flagAt{nil, f})
	}
	var walk func(path []string, cs []*cli.Command)
	walk = func(path []string, cs []*cli.Command) {
		for _, c := range cs {
			p := append(append([]string{}, path...), c.Name)
			for _, f := range c.Flags {
				flags = append(flags, flagAt{p, f})
			}
			walk(p, c.Subcommands)
		}
	}
	walk(nil, app.Commands)
	n := 0
	for _, fa := range flags {
		name := fa.f.Names()[0]
		var kind, usage string
		switch f := fa.f.(type) {
		case *cli.DurationFlag:
			kind, usage = "duration", f.Usage
		case *cli.IntFlag:
			kind, usage = "int", f.Usage
		case *cli.Float64Flag:
			kind, usage = "float", f.Usage
		case *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
			t.Errorf("%v --%s: a number flag of a kind this test does not know", fa.path, name)
			continue
		default:
			continue
		}
		n++
		if !strings.Contains(usage, "at most ") {
			t.Errorf("%v --%s: the usage says no bound: %q", fa.path, name, usage)
		}
		args := append(append([]string{}, fa.path...), "--"+name, huge[kind])
		if fa.path == nil {
			args = append(args, "check")
		}
		out, errs, code := runCLI(t, args...)
		if code != 2 || !strings.HasPrefix(errs, "pvediskcheck: --"+name+" ") || !strings.Contains(errs, ": at most ") || strings.Count(errs, "\n") != 1 || out != "" {
			t.Errorf("%q: exit %d\n%s%s", args, code, out, errs)
		}
	}
	if n < 19 {
		t.Errorf("only %d number flags seen", n)
	}
}

// The campaign's argument cases that hung or were taken (issue 31).
func TestArgumentsRefused(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"top", "--interval", "1h1000000h"}, "pvediskcheck: --interval 1000001h0m0s: at most 1h\n"},
		{[]string{"top", "--interval", "1h0m1s"}, "pvediskcheck: --interval 1h0m1s: at most 1h\n"},
		{[]string{"top", "--interval", "1h1000000000000h"}, "pvediskcheck: invalid value \"1h1000000000000h\" for flag -interval: parse error\n"},
		{[]string{"top", "--count", "1000001"}, "pvediskcheck: --count 1000001: at most 1000000\n"},
		{[]string{"--timeout", "11m", "check", "100"}, "pvediskcheck: --timeout 11m0s: at most 10m\n"},
		{[]string{"check", "--all", "--parallel", "65"}, "pvediskcheck: --parallel 65: at most 64\n"},
		{[]string{"metrics", "--deadline", "10m1s"}, "pvediskcheck: --deadline 10m1s: at most 10m\n"},
		{[]string{"flush", "100", "--hz", "NaN"}, "pvediskcheck: --hz NaN: at most 10\n"},
		{[]string{"discard", "100", "--wait", "7h"}, "pvediskcheck: --wait 7h0m0s: at most 6h\n"},
		{[]string{"bench", "100", "scsi0", "--runtime", "2h"}, "pvediskcheck: --runtime 2h0m0s: at most 1h\n"},
		{[]string{"fio", "jobs", "/dev/disk/by-id/x", "--runs", "101"}, "pvediskcheck: --runs 101: at most 100\n"},
		{[]string{"stall", "100", "--stall-after", "2h"}, "pvediskcheck: --stall-after 2h0m0s: at most 1h\n"},
	} {
		out, errs, code := runCLI(t, c.args...)
		if code != 2 || errs != c.want || out != "" {
			t.Errorf("%q: exit %d %q\nwant %q", c.args, code, out+errs, c.want)
		}
	}
}

// --capture's usage names its value DIR ("--capture pvediskcheck stall"
// before: urfave/cli takes a usage's backquoted word as the value's name).
func TestCaptureUsage(t *testing.T) {
	for _, cmd := range []string{"top", "metrics"} {
		out, _, _ := runCLI(t, cmd, "--help")
		if !strings.Contains(out, "--capture DIR ") || strings.Contains(out, "--capture pvediskcheck") {
			t.Errorf("%s --help:\n%s", cmd, out)
		}
	}
	out, _, _ := runCLI(t, "stall", "--help")
	if !strings.Contains(out, "--out DIR ") {
		t.Errorf("stall --help:\n%s", out)
	}
}

// stall refuses a disk the VM does not have, naming its disks, before it
// makes anything (issue 31: it was accepted and captured nothing of it).
func TestStallUnknownDisk(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "etc/pve/qemu-server")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(root, "etc/pve/storage.cfg"), []byte("dir: local\n\tpath /var/lib/vz\n\tcontent images\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "100.conf"), []byte("scsi0: local:100/vm-100-disk-0.raw,size=1G\nvirtio1: local:100/vm-100-disk-1.raw,size=1G\n"), 0o644)
	out := t.TempDir()
	_, errs, code := runCLI(t, "--root", root, "stall", "100", "scsi0", "sata3", "--out", out)
	if code != 2 || errs != "pvediskcheck: VM 100 has no disk \"sata3\" (disks: scsi0, virtio1)\n" {
		t.Errorf("exit %d %q", code, errs)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 0 {
		t.Errorf("made %v", ents)
	}
}
