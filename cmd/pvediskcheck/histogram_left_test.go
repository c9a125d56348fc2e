//go:build integration

package main

import (
	"bufio"
	"context"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// TestHistogramLeftAfterSIGKILL (issue 31): `top --histogram`, killed with
// SIGKILL, cannot clear the latency histograms it set, and QEMU keeps
// them. The next run of every command that reads the VM's
// query-blockstats says so, per disk, with the command that clears it:
// check (a latency-histogram-left info: the exit stays the other
// findings'), top with and without
// --histogram (a finding and histograms_left; --histogram uses it as found
// and sets nothing), metrics (the finding's series, a note on stderr),
// flush, limit --verify and stall. The command printed, run as it is,
// clears them; then none of them says anything.
func TestHistogramLeftAfterSIGKILL(t *testing.T) {
	socat := requireTool(t, "socat")
	n := fakenode.NewT(t)
	n.MustVolume(t, "local", "100/vm-100-disk-0.raw", 16<<20)
	n.MustVolume(t, "local", "100/vm-100-disk-1.raw", 16<<20)
	if err := n.WriteConfig(100, "name: left\nscsihw: virtio-scsi-single\nscsi0: local:100/vm-100-disk-0.raw,iothread=1,size=16M\nscsi1: local:100/vm-100-disk-1.raw,iothread=1,size=16M\n"); err != nil {
		t.Fatal(err)
	}
	n.MustStart(t, 100, fakenode.ArgvOptions{})
	sock := n.Paths.QMPSocket(100)

	// top --histogram in a process of its own, killed once it has set them.
	bin := buildBinary(t)
	top := exec.Command(bin, "--root", n.Root, "--json", "top", "100", "--histogram", "--interval", "300ms", "--count", "0")
	stdout, err := top.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := top.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	set := false
	for !set && sc.Scan() {
		set = len(gjson.Get(sc.Text(), `histograms.#(histogram=="set")#`).Array()) == 2
	}
	if err := top.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = top.Wait()
	if !set {
		t.Fatal("top --histogram printed no sample with both histograms set")
	}
	if got := ours(t, sock); !slices.Equal(got, []string{"scsi0", "scsi1"}) {
		t.Fatalf("after SIGKILL, pvediskcheck's histograms on %v, want scsi0 and scsi1", got)
	}

	// check.
	out, errs, code := runCLI(t, "--root", n.Root, "--json", "check", "100")
	var fixes []string
	for _, f := range gjson.Get(out, `vms.0.findings.#(code=="latency-histogram-left")#`).Array() {
		if f.Get("severity").String() != "info" || !strings.Contains(f.Get("message").String(), "set by pvediskcheck and not cleared") {
			t.Errorf("check: %s", f.Raw)
		}
		want := latency.ClearCommand(sock, f.Get("disk").String())
		if f.Get("fix").String() != want {
			t.Errorf("check's fix %q, want %q", f.Get("fix"), want)
		}
		fixes = append(fixes, f.Get("fix").String())
	}
	if len(fixes) != 2 {
		t.Fatalf("check: exit %d, %d latency-histogram-left\n%s%s", code, len(fixes), out, errs)
	}
	checkCode := code // an info: the exit is the other findings' (the disks' own warnings)
	text, _, _ := runCLI(t, "--root", n.Root, "check", "100")
	if !strings.Contains(text, "latency-histogram-left") || !strings.Contains(text, "socat - UNIX-CONNECT:"+sock) {
		t.Errorf("check's text lacks the finding or its fix:\n%s", text)
	}

	// top, with and without --histogram: every sample says it.
	for _, args := range [][]string{{}, {"--histogram"}} {
		out, errs, code = runCLI(t, append([]string{"--root", n.Root, "--json", "top", "100", "--count", "2", "--interval", "300ms"}, args...)...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if code != exitOK || len(lines) != 2 {
			t.Fatalf("top %v: exit %d: %s%s", args, code, out, errs)
		}
		for _, l := range lines {
			left := gjson.Get(l, "histograms_left.#.disk").Array()
			f := gjson.Get(l, `findings.#(code=="latency-histogram-left")#`).Array()
			if len(left) != 2 || len(f) != 2 || !strings.Contains(f[0].Get("message").String(), "clear it: (echo") {
				t.Errorf("top %v: histograms_left %v, findings %v", args, left, f)
			}
			if len(args) > 0 && len(gjson.Get(l, `histograms.#(leftover==true)#`).Array()) != 2 {
				t.Errorf("top --histogram: notes %s", gjson.Get(l, "histograms"))
			}
		}
	}
	if got := ours(t, sock); !slices.Equal(got, []string{"scsi0", "scsi1"}) {
		t.Fatalf("top --histogram replaced or cleared what it found: ours on %v", got)
	}

	// metrics: the finding's series; said once on stderr.
	out, errs, code = runCLI(t, "--root", n.Root, "metrics")
	if code != exitOK || !strings.Contains(out, `pvediskcheck_check_findings{code="latency-histogram-left",severity="info",vmid="100"} 2`) ||
		strings.Count(errs, "latency histogram of") != 2 {
		t.Errorf("metrics: exit %d\n%s\n%s", code, grepLines(out, "latency-histogram-left"), errs)
	}

	// flush, limit --verify, stall.
	out, errs, code = runCLI(t, "--root", n.Root, "--json", "flush", "100", "--for", "1s")
	if got := gjson.Get(out, "histograms_left.#.disk").Array(); code != exitOK || len(got) != 2 {
		t.Errorf("flush: exit %d, histograms_left %v\n%s", code, got, errs)
	}
	out, errs, code = runCLI(t, "--root", n.Root, "--json", "limit", "100", "scsi1", "--verify", "--for", "5s")
	if got := gjson.Get(out, "histograms_left.#.disk").Array(); len(got) != 1 || got[0].String() != "scsi1" {
		t.Errorf("limit --verify: exit %d, histograms_left %v\n%s%s", code, got, out, errs)
	}
	out, errs, code = runCLI(t, "--root", n.Root, "--json", "stall", "100", "--out", t.TempDir())
	if got := gjson.Get(out, "histograms_left.#.disk").Array(); code != exitOK || len(got) != 2 {
		t.Errorf("stall: exit %d, histograms_left %v\n%s", code, got, errs)
	}

	// The printed command clears them; then nothing is said.
	for _, fix := range fixes {
		cmd := exec.Command("sh", "-c", fix)
		cmd.Env = append(cmd.Environ(), "PATH=/usr/bin:/bin:"+strings.TrimSuffix(socat, "/socat"))
		if b, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(b), `{"return": {}}`) {
			t.Errorf("%s: %v\n%s", fix, err, b)
		}
	}
	if got := ours(t, sock); len(got) != 0 {
		t.Fatalf("after the printed command: pvediskcheck's histograms on %v", got)
	}
	out, _, code = runCLI(t, "--root", n.Root, "--json", "check", "100")
	if f := gjson.Get(out, `vms.0.findings.#(code=="latency-histogram-left")#`).Array(); code != checkCode || len(f) != 0 {
		t.Errorf("check after clearing: exit %d %v", code, f)
	}
	out, _, _ = runCLI(t, "--root", n.Root, "--json", "top", "100", "--count", "1", "--interval", "300ms")
	if gjson.Get(out, "histograms_left").Exists() || strings.Contains(out, "latency-histogram-left") {
		t.Errorf("top after clearing: %s", out)
	}
	out, errs, _ = runCLI(t, "--root", n.Root, "metrics")
	if strings.Contains(out, "latency-histogram-left") || strings.Contains(errs, "latency histogram") {
		t.Errorf("metrics after clearing:\n%s\n%s", grepLines(out, "latency-histogram-left"), errs)
	}
}

// ours lists the disks whose query-blockstats entry has a histogram with
// pvediskcheck's boundaries.
func ours(t *testing.T, sock string) []string {
	t.Helper()
	var out []string
	err := qmp.Do(context.Background(), sock, 5*time.Second, func(s qmp.Session) error {
		ret, err := s.Exec("query-blockstats", nil)
		for _, b := range qmp.ParseBlockstats(ret) {
			if latency.Ours(b.WrLatency) {
				out = append(out, b.ID)
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// grepLines is text's lines that hold s.
func grepLines(text, s string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
