package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/flush"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/sampler"
)

// TestFlushVerdictsWithoutGuest covers the verdicts qemu-io can drive honestly
// (it cannot stand in for guest flushes: its aio_flush drains without
// flushing): not-applicable, zero-data and no-flushes, plus bad input.
func TestFlushVerdictsWithoutGuest(t *testing.T) {
	n := fakenode.NewT(t)
	for _, v := range []string{"vm-374-disk-1", "vm-374-disk-2"} {
		n.MustVolume(t, "local-lvm", v, 256<<20)
	}
	// Zeroes go to a file: the kernel zeroes a file range with fallocate,
	// while on a loop device QEMU falls back to writing zero buffers (which
	// do enter the page cache, and the tool then says so).
	n.MustVolume(t, "local", "374/vm-374-disk-3.raw", 256<<20)
	n.WriteConfig(374, `scsihw: virtio-scsi-single
scsi1: local-lvm:vm-374-disk-1,cache=none,size=256M
scsi2: local-lvm:vm-374-disk-2,cache=writeback,size=256M
scsi3: local:374/vm-374-disk-3.raw,cache=writeback,size=256M
`)
	vm := n.MustStart(t, 374, fakenode.ArgvOptions{})
	l1 := vm.StartLoad(fakenode.LoadSpec{Disk: "scsi1", Write: true, Size: 1 << 20, Depth: 4, Span: 200 << 20})
	l2 := vm.StartLoad(fakenode.LoadSpec{Disk: "scsi2", Write: true, Size: 1 << 20, Depth: 4, Span: 200 << 20})
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Zeroes on scsi3: detect-zeroes turns them into write-zeroes.
		for i := 0; i < 40; i++ {
			vm.QemuIO("scsi3", sf("aio_write -P 0 %d 1M", (i%100)<<20))
			time.Sleep(50 * time.Millisecond)
		}
	}()
	var out flush.Result
	stdout, errs, code, _ := runCLIHooked(t, nil, "--root", n.Root, "--json", "flush", "374", "--for", "3s")
	if err := json.Unmarshal([]byte(stdout), &out); err != nil {
		t.Fatalf("exit %d, not JSON: %v\n%s%s", code, err, stdout, errs)
	}
	record(t, "flush", "real-no-guest.json", stdout)
	l1.Stop()
	l2.Stop()
	<-done
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := map[string]flush.Verdict{"scsi1": flush.NotApplicable, "scsi2": flush.NoFlushes, "scsi3": flush.ZeroData}
	for _, v := range out.Verdicts {
		if v.Verdict != want[v.Disk] {
			t.Errorf("%s: %s (%s), want %s", v.Disk, v.Verdict, v.Reason, want[v.Disk])
		}
		if v.WrittenBytes < 4<<20 {
			t.Errorf("%s: only %d bytes written in the window", v.Disk, v.WrittenBytes)
		}
	}
	if len(out.Samples) < 8 {
		t.Errorf("%d samples in 3 s at 4 Hz", len(out.Samples))
	}
	for _, bad := range [][]string{{"flush", "374", "--hz", "50"}, {"flush", "374", "--for", "10ms"}, {"flush", "374", "scsi9"}} {
		if _, errs, code := runCLI(t, append([]string{"--root", n.Root}, bad...)...); code != 2 {
			t.Errorf("%v: exit %d %s", bad, code, errs)
		}
	}
	// A line Proxmox refuses, added to the config: the running disks are
	// measured and a note names the line (it was exit 2 for the VM).
	b, _ := os.ReadFile(n.Paths.VMConfig(374))
	os.WriteFile(n.Paths.VMConfig(374), append(b, "efidisk0: local-lvm:vm-374-disk-9,efitype=4m,discard=on,size=4M\n"...), 0o644)
	stdout, errs, code, _ = runCLIHooked(t, nil, "--root", n.Root, "flush", "374", "--for", "1s")
	if code != 0 || strings.Count(stdout, " (none):\n")+strings.Count(stdout, " (writeback):\n") != 3 ||
		!strings.Contains(stdout, "\nnote: "+n.Paths.VMConfig(374)+" line 5: efidisk0: discard is not an option of EFI disks") {
		t.Errorf("refused efidisk0 line: exit %d %s\n%s", code, errs, stdout)
	}
	vm.Stop()
	if _, errs, code := runCLI(t, "--root", n.Root, "flush", "374", "--for", "1s"); code != 3 || !strings.Contains(errs, "not running") {
		t.Errorf("stopped: exit %d %s", code, errs)
	}
}

// runCLIHooked runs the command in-process with onSample called after each
// sample of its window (runWith; nil for none) and returns stdout, stderr,
// the exit code and how long it took.
func runCLIHooked(t testing.TB, onSample sampler.OnSample, args ...string) (string, string, int, time.Duration) {
	t.Helper()
	return runCLIWith(t, context.Background(), onSample, args...)
}

// runCLICtx runs the command in-process under ctx (cancel it for a
// Ctrl-C) and returns stdout, stderr, the exit code and how long it took.
func runCLICtx(t testing.TB, ctx context.Context, args ...string) (string, string, int, time.Duration) {
	t.Helper()
	return runCLIWith(t, ctx, nil, args...)
}

func runCLIWith(t testing.TB, ctx context.Context, onSample sampler.OnSample, args ...string) (string, string, int, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	start := time.Now()
	code := runWith(ctx, append([]string{"pvediskcheck"}, args...), &out, &errb, onSample)
	return out.String(), errb.String(), code, time.Since(start)
}

// record saves a real run's output as a fixture of a package's unit tests
// when PVEDISKCHECK_RECORD=1 (the package's testdata/README.md says which
// test and QEMU made each file).
func record(t testing.TB, pkg, name, data string) {
	t.Helper()
	if os.Getenv("PVEDISKCHECK_RECORD") == "" {
		return
	}
	p := filepath.Join("..", "..", pkg, "testdata", name)
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s", p)
}

// flushFaultVM is a VM with one writeback disk under qemu-io write load.
func flushFaultVM(t *testing.T, n *fakenode.Node) (*fakenode.VM, *fakenode.Load) {
	t.Helper()
	if _, err := os.Stat(n.Paths.VMConfig(375)); err != nil {
		n.MustVolume(t, "local-lvm", "vm-375-disk-1", 256<<20)
		n.WriteConfig(375, "scsihw: virtio-scsi-single\nagent: 1\nscsi1: local-lvm:vm-375-disk-1,cache=writeback,size=256M\n")
	}
	vm := n.MustStart(t, 375, fakenode.ArgvOptions{})
	return vm, vm.StartLoad(fakenode.LoadSpec{Disk: "scsi1", Write: true, Size: 256 << 10, Depth: 2, Span: 128 << 20, Every: 50 * time.Millisecond})
}

// TestFlushFaults (issue 15 #8): QEMU stopped for 3 s mid-window, QEMU
// killed mid-window, and a guest agent that does not answer. Each is acted
// out at a known sample through the sample hook, with its exit code and
// its time to error.
func TestFlushFaults(t *testing.T) {
	n := fakenode.NewT(t)
	t.Run(qemuName(t)+"/sigstop", func(t *testing.T) {
		vm, load := flushFaultVM(t, n)
		defer vm.Stop()
		defer load.Stop()
		var stopped time.Time
		hook := func(tk sampler.Tick) {
			if tk.N == 5 && stopped.IsZero() {
				stopped = time.Now()
				syscall.Kill(vm.Pid, syscall.SIGSTOP)
				time.AfterFunc(3*time.Second, func() { syscall.Kill(vm.Pid, syscall.SIGCONT) })
			}
		}
		stdout, errs, code, took := runCLIHooked(t, hook, "--root", n.Root, "--json", "flush", "375", "--for", "7s")
		var out flush.Result
		if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != 0 {
			t.Fatalf("exit %d after %s: %v\n%s%s", code, took, err, stdout, errs)
		}
		record(t, "flush", "real-sigstop-3s.json", stdout)
		// One gap of the 3 s QEMU was stopped (a short one may follow while
		// the load generator catches up on the socket).
		long := 0
		for _, g := range out.Gaps {
			switch {
			case g.Seconds() >= 2.5 && g.Seconds() <= 4.5 && g.Missed >= 8 && g.FromS >= 0.5 && g.FromS <= 1.5:
				long++
			case g.Seconds() > 1:
				t.Errorf("unexpected gap %+v", g)
			}
		}
		if long != 1 {
			t.Errorf("gaps %+v, want one of ~3 s starting ~1 s in", out.Gaps)
		}
		if out.SampledS > out.WindowS-2.5 || out.SampledS < out.WindowS-5 {
			t.Errorf("sampled %.1f s of %.0f", out.SampledS, out.WindowS)
		}
		if len(out.Verdicts) != 1 || out.Verdicts[0].SampledS != out.SampledS || !strings.Contains(out.Verdicts[0].Reason, "stands on") {
			t.Errorf("verdicts %+v", out.Verdicts)
		}
		// The text table: one row per second, none twice, the gap said.
		vm2stop := time.Time{}
		hook2 := func(tk sampler.Tick) {
			if tk.N == 5 && vm2stop.IsZero() {
				vm2stop = time.Now()
				syscall.Kill(vm.Pid, syscall.SIGSTOP)
				time.AfterFunc(3*time.Second, func() { syscall.Kill(vm.Pid, syscall.SIGCONT) })
			}
		}
		stdout, errs, code, _ = runCLIHooked(t, hook2, "--root", n.Root, "flush", "375", "--for", "7s")
		t.Logf("$ pvediskcheck flush 375 --for 7s   # QEMU stopped for 3 s at the 5th sample\n%s%s(exit %d)", stdout, errs, code)
		seen := map[string]bool{}
		for _, l := range strings.Split(stdout, "\n") {
			f := strings.Fields(l)
			if len(f) == 0 || f[0] == "T(s)" || strings.HasSuffix(f[0], ":") || f[0] == "flushes:" {
				continue
			}
			if seen[f[0]] && f[0] != "gap" {
				t.Errorf("row %s printed twice", f[0])
			}
			seen[f[0]] = true
		}
		if code != 0 || !strings.Contains(stdout, "no samples from ") || !strings.Contains(stdout, "stands on") {
			t.Errorf("exit %d, the gap is not said:\n%s", code, stdout)
		}
	})
	t.Run(qemuName(t)+"/sigkill", func(t *testing.T) {
		for _, asJSON := range []bool{true, false} {
			vm, load := flushFaultVM(t, n)
			var killed time.Time
			hook := func(tk sampler.Tick) {
				if tk.N == 6 && killed.IsZero() {
					killed = time.Now()
					syscall.Kill(vm.Pid, syscall.SIGKILL)
				}
			}
			args := []string{"--root", n.Root, "--timeout", "1s", "flush", "375", "--for", "10s"}
			if asJSON {
				args = append([]string{"--json"}, args...)
			}
			stdout, errs, code, _ := runCLIHooked(t, hook, args...)
			after := time.Since(killed)
			load.Stop()
			vm.Stop()
			t.Logf("json=%v: exit %d %s after the kill\n%s%s", asJSON, code, after, stdout, errs)
			if code != exitUnreachable || after > 1*time.Second+2*time.Second {
				t.Errorf("exit %d %s after the kill (want 3 within --timeout 1s plus a margin)", code, after)
			}
			if !strings.Contains(errs, "QMP stopped answering") || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
				t.Errorf("stderr %q", errs)
			}
			if asJSON {
				var out flush.Result
				if err := json.Unmarshal([]byte(stdout), &out); err != nil {
					t.Fatalf("--json printed no JSON: %v\n%s", err, stdout)
				}
				record(t, "flush", "real-sigkill.json", stdout)
				last := out.Gaps[len(out.Gaps)-1]
				if len(out.Samples) < 5 || last.ToS != out.WindowS || !strings.Contains(last.Why, "QMP stopped answering") || len(out.Verdicts) != 1 || !strings.Contains(out.Verdicts[0].Reason, "stands on") {
					t.Errorf("%d samples, gaps %+v, verdicts %+v", len(out.Samples), out.Gaps, out.Verdicts)
				}
			} else if !strings.Contains(stdout, "T(s)") || !strings.Contains(stdout, "no samples from") || !strings.Contains(stdout, "scsi1 (writeback):") {
				t.Errorf("text output lacks the samples, the gap or the verdict:\n%s", stdout)
			}
		}
	})
	t.Run(qemuName(t)+"/dead-agent", func(t *testing.T) {
		vm, load := flushFaultVM(t, n)
		defer vm.Stop()
		defer load.Stop()
		// No agent socket at all.
		_, errs, code, took := runCLIHooked(t, nil, "--root", n.Root, "--timeout", "1s", "flush", "375", "--for", "20s", "--trigger")
		if code != exitUnreachable || took > 3*time.Second || !strings.Contains(errs, "guest agent") {
			t.Errorf("no agent socket: exit %d after %s: %s", code, took, errs)
		}
		// A socket QEMU's chardev accepts but nobody in the guest answers.
		a := qmptest.NewAgent(t)
		a.Silent = true
		if err := os.Symlink(a.Sock(), n.Paths.QGASocket(375)); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(n.Paths.QGASocket(375))
		_, errs, code, took = runCLIHooked(t, nil, "--root", n.Root, "--timeout", "1s", "flush", "375", "--for", "20s", "--trigger")
		t.Logf("silent agent: exit %d after %s: %s", code, took, errs)
		if code != exitUnreachable || took > 1*time.Second+2*time.Second || !strings.Contains(errs, "did not answer within 1s") || a.Requests() == 0 {
			t.Errorf("silent agent: exit %d after %s (want 3 within --timeout 1s plus a margin): %s", code, took, errs)
		}
	})
}

// TestFlushStorages measures what QEMU can run here (issue 14 #4): a raw
// file, a qcow2 file and a loop device with cache=writeback, qcow2 and raw
// with cache=none, under non-zero qemu-io writes. Where data sits in the
// node page cache the series shows it (cachestat); QEMU's qcow2 metadata
// cache is invisible, so qcow2 with cache=none is judged on timing only.
func TestFlushStorages(t *testing.T) {
	n := fakenode.NewT(t)
	n.MustVolume(t, "local", "377/vm-377-disk-1.raw", 256<<20)
	n.MustVolume(t, "local", "377/vm-377-disk-2.qcow2", 256<<20)
	n.MustVolume(t, "local-lvm", "vm-377-disk-3", 256<<20)
	n.MustVolume(t, "local", "377/vm-377-disk-4.qcow2", 256<<20)
	n.MustVolume(t, "local", "377/vm-377-disk-5.raw", 256<<20)
	n.WriteConfig(377, `scsihw: virtio-scsi-single
scsi1: local:377/vm-377-disk-1.raw,cache=writeback,size=256M
scsi2: local:377/vm-377-disk-2.qcow2,cache=writeback,size=256M
scsi3: local-lvm:vm-377-disk-3,cache=writeback,size=256M
scsi4: local:377/vm-377-disk-4.qcow2,size=256M
scsi5: local:377/vm-377-disk-5.raw,size=256M
`)
	vm := n.MustStart(t, 377, fakenode.ArgvOptions{})
	var specs []fakenode.LoadSpec
	for i := 1; i <= 5; i++ {
		specs = append(specs, fakenode.LoadSpec{Disk: sf("scsi%d", i), Write: true, Size: 1 << 20, Depth: 2, Span: 200 << 20, Every: 100 * time.Millisecond})
	}
	load := vm.StartLoad(specs...)
	stdout, errs, code, _ := runCLIHooked(t, nil, "--root", n.Root, "--json", "flush", "377", "--for", "3s")
	load.Stop()
	var out flush.Result
	if err := json.Unmarshal([]byte(stdout), &out); err != nil || code != 0 {
		t.Fatalf("exit %d: %v\n%s", code, err, errs)
	}
	record(t, "flush", "real-storages.json", stdout)
	type want struct {
		verdict    flush.Verdict
		backend    string
		timingOnly bool
		pageCache  bool // cachestat shows the written data
	}
	wants := map[string]want{
		"scsi1": {flush.NoFlushes, "file", false, true},
		"scsi2": {flush.NoFlushes, "file", false, true},
		"scsi3": {flush.NoFlushes, "block", false, true},
		"scsi4": {flush.NoFlushes, "file", true, false},
		"scsi5": {flush.NotApplicable, "file", false, false},
	}
	first, last := out.Samples[0], out.Samples[len(out.Samples)-1]
	for _, v := range out.Verdicts {
		w := wants[v.Disk]
		t.Logf("%s: %s (%s): %s", v.Disk, v.Verdict, v.Backend, v.Reason)
		if v.Verdict != w.verdict || v.Backend != w.backend || v.TimingOnly != w.timingOnly || v.WrittenBytes < 8<<20 {
			t.Errorf("%s: %s backend %s timing_only %v written %d, want %+v", v.Disk, v.Verdict, v.Backend, v.TimingOnly, v.WrittenBytes, w)
		}
		grew := last.Volumes[v.Disk].CachedBytes - first.Volumes[v.Disk].CachedBytes
		if w.pageCache != (grew >= v.WrittenBytes/10) {
			t.Errorf("%s: page cache grew %d for %d written (want visible=%v)", v.Disk, grew, v.WrittenBytes, w.pageCache)
		}
	}
	if len(out.Verdicts) != 5 {
		t.Errorf("%d verdicts", len(out.Verdicts))
	}
	if !strings.Contains(out.Verdicts[1].Reason, "qcow2 metadata cache") || !strings.Contains(out.Verdicts[3].Reason, "qcow2 metadata cache") {
		t.Errorf("qcow2 disks do not say what cannot be measured: %q / %q", out.Verdicts[1].Reason, out.Verdicts[3].Reason)
	}
}

// TestFlushSeriesTable renders recorded series (no QEMU): one row per
// second and never a second twice, the sample before a gap, the gap itself
// with dashes in every column, and the sample that closes a cut window.
func TestFlushSeriesTable(t *testing.T) {
	for _, c := range []struct {
		file string
		rows []string // the T(s) column, in order
	}{
		// QEMU stopped for 3 s at 1 s: two samples at 4.0 s (the late one and
		// the next tick) must not print T=4 twice.
		{"real-sigstop-3s.json", []string{"1", "gap", "4", "5", "6", "7"}},
		// QEMU killed at 1.25 s: the last sample, then the gap to the end.
		{"real-sigkill.json", []string{"1", "1.2", "gap"}},
		// A loaded socket: samples off the grid, one row per second.
		{"real-storages.json", []string{"1", "2", "2.9"}},
	} {
		b, err := os.ReadFile("../../flush/testdata/" + c.file)
		if err != nil {
			t.Fatal(err)
		}
		var r flush.Result
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		printFlushSeries(&env{out: &out}, &r)
		var rows []string
		width := -1
		for i, l := range strings.Split(strings.TrimRight(out.String(), "\n"), "\n") {
			f := strings.Fields(l)
			if i == 0 {
				width = strings.Index(l, "WRITEBACK MiB")
				continue
			}
			rows = append(rows, f[0])
			if f[0] == "gap" && (strings.Index(l, "no samples from") <= width || len(f) < 7) {
				t.Errorf("%s: gap row not aligned with the columns: %q", c.file, l)
			}
		}
		if strings.Join(rows, " ") != strings.Join(c.rows, " ") {
			t.Errorf("%s: rows %v, want %v\n%s", c.file, rows, c.rows, out.String())
		}
	}
}
