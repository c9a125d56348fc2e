package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
)

// step is one command of the demo and the line that explains it.
type step struct {
	why  string
	args []string
	load *fakenode.LoadSpec // kept in flight on the VM while the command runs
}

// demoSteps are the commands `make demo` shows, in order.
var demoSteps = []step{
	{why: "which cache mode each disk really runs with (the config against the running QEMU, read over QMP), and what a host crash would lose",
		args: []string{"cache", "370"}},
	{why: "disk settings that will make the next start fail, are silently ignored, are risky, or differ from what runs",
		args: []string{"check", "370"}},
	{why: "set a 20 MiB/s write limit on scsi1 live and prove it holds, under writes sent through QEMU's own qemu-io (no guest OS needed)",
		args: []string{"limit", "370", "scsi1", "--mbps-wr", "20", "--verify"},
		load: &fakenode.LoadSpec{Disk: "scsi1", Write: true, Depth: 32}},
	{why: "whether space the guest trims can go back to the thin pool: discard setting, controller, and each volume's real allocation",
		args: []string{"discard", "370"}},
}

var exitMeaning = map[int]string{
	0: "ran and found nothing wrong",
	1: "ran and found a problem",
	2: "bad input or usage",
	3: "could not reach what it needs",
}

// demo runs every step against the lab's VM with the binary at bin,
// explaining on stdout; the commands write to stdout and stderr.
func demo(ctx context.Context, l *lab, bin string, stdout, stderr io.Writer) error {
	start := time.Now()
	bin, err := filepath.Abs(bin)
	if err != nil {
		return err
	}
	have, err := builtCommands(ctx, bin)
	if err != nil {
		return err
	}
	env, err := l.toolEnv()
	if err != nil {
		return err
	}

	qemu, _ := fakenode.QEMUVersion(l.node.QEMU)
	fmt.Fprintf(stdout, "pvediskcheck demo: Lab 37's VM 370 on a scratch Proxmox VE node (QEMU %s, no guest OS), started in %.2f s\n", qemu, l.startup.Seconds())
	fmt.Fprintf(stdout, "  VM 370     scsi0 system disk; scsi1 VirtIO SCSI single + iothread; virtio1 VirtIO Block + iothread; sata1 SATA\n")
	fmt.Fprintf(stdout, "  storage    local-lvm: %d MiB thin volumes, sparse files behind loop devices (an lvs stand-in reports their allocation)\n", labDiskSize>>20)
	fmt.Fprintf(stdout, "  node root  %s (every command below runs as: %s --root %s ...)\n", l.node.Root, filepath.Base(bin), l.node.Root)

	var failed []string
	for i, s := range demoSteps {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		fmt.Fprintf(stdout, "\n[%d/%d] %s: %s\n", i+1, len(demoSteps), s.args[0], s.why)
		fmt.Fprintf(stdout, "$ pvediskcheck %s\n", strings.Join(s.args, " "))
		if !have[s.args[0]] {
			fmt.Fprintln(stdout, "(not built yet)")
			continue
		}
		var load *fakenode.Load
		if s.load != nil {
			fmt.Fprintf(stdout, "  (load: %d x 1 MiB aio_write kept in flight on %s through HMP qemu-io while the command runs)\n", s.load.Depth, s.load.Disk)
			load = l.vm.StartLoad(*s.load)
		}
		code, err := runStep(ctx, bin, l.node.Root, env, s.args, stdout, stderr)
		if load != nil {
			st := load.Stop()
			fmt.Fprintf(stdout, "  (load: %d requests of 1 MiB submitted in %d QMP exchanges", st.Submitted, st.Exchanges)
			if st.Err != nil {
				fmt.Fprintf(stdout, "; stopped early: %v", st.Err)
			}
			fmt.Fprintln(stdout, ")")
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "-> exit %d: %s\n", code, exitMeaning[code])
		if code > 1 {
			failed = append(failed, s.args[0])
		}
	}
	fmt.Fprintf(stdout, "\ndemo done in %.1f s; stopping VM 370 and releasing its loop devices.\n", time.Since(start).Seconds())
	if len(failed) > 0 {
		return fmt.Errorf("could not run against the VM: %s", strings.Join(failed, ", "))
	}
	return nil
}

// runStep runs one command and returns its exit code. On cancellation it is
// interrupted as Ctrl-C would.
func runStep(ctx context.Context, bin, root string, env, args []string, stdout, stderr io.Writer) (int, error) {
	cmd := exec.CommandContext(ctx, bin, append([]string{"--root", root}, args...)...)
	cmd.Stdout, cmd.Stderr, cmd.Env = stdout, stderr, env
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		return 0, ctx.Err()
	}
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), nil
	}
	if err != nil {
		return 0, err
	}
	return 0, nil
}

// builtCommands lists the commands the binary has, from its --help.
func builtCommands(ctx context.Context, bin string) (map[string]bool, error) {
	out, err := exec.CommandContext(ctx, bin, "--help").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --help: %v (run make build)", bin, err)
	}
	return parseCommands(out), nil
}

var commandLine = regexp.MustCompile(`^\s+([a-z][a-z0-9-]*)(?:,\s*[a-z0-9-]+)*(?:\s{2,}|$)`)

// parseCommands reads the COMMANDS section of urfave/cli's help.
func parseCommands(help []byte) map[string]bool {
	have := map[string]bool{}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(help))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "COMMANDS:"):
			in = true
		case in && strings.TrimSpace(line) == "":
			in = false
		case in:
			if m := commandLine.FindStringSubmatch(line); m != nil {
				have[m[1]] = true
			}
		}
	}
	return have
}

// toolEnv is the environment the tool runs in against the lab: lvs, qm and
// pvesm are the harness' doubles, reporting the loop-backed volumes' real
// allocation (there is no device-mapper or Proxmox here), below the lab's
// root.
func (l *lab) toolEnv() ([]string, error) {
	doubles, err := fakenode.BuildDoubles()
	if err != nil {
		return nil, err
	}
	return append(os.Environ(),
		"PATH="+doubles+string(os.PathListSeparator)+os.Getenv("PATH"),
		fakenode.EnvRoot+"="+l.node.Root), nil
}
