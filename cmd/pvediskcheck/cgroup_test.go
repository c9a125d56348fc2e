//go:build integration

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/cache"
	"github.com/pvediskcheck/pvediskcheck/flush"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/top"
)

// promValue is the value of the series named exactly (name and labels)
// in a Prometheus text exposition; nil when absent.
func promValue(text, series string) *float64 {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return &f
			}
		}
	}
	return nil
}

// enterScope moves the VM's QEMU into qemu.slice/<vmid>.scope as qm start
// does: in the v1 memory hierarchy and the unified tree on a hybrid node
// (this machine's layout), or in /sys/fs/cgroup on a v2 node with the
// memory controller. It skips where neither can be made, and moves QEMU
// back to the hierarchy's root before removing the scope.
func enterScope(t *testing.T, vm *fakenode.VM) {
	t.Helper()
	scope := filepath.Join("qemu.slice", strconv.Itoa(vm.VMID)+".scope")
	var roots []string
	switch {
	case isMemoryHierarchy("/sys/fs/cgroup/memory"):
		roots = []string{"/sys/fs/cgroup/memory"}
		if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.procs"); err == nil {
			roots = append(roots, "/sys/fs/cgroup/unified")
		}
	case isMemoryHierarchy("/sys/fs/cgroup"):
		roots = []string{"/sys/fs/cgroup"}
	default:
		t.Skip("no cgroup memory controller here: neither /sys/fs/cgroup/memory (v1) nor /sys/fs/cgroup with memory.stat (v2)")
	}
	for _, root := range roots {
		dir := filepath.Join(root, scope)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Skipf("cannot make the VM's scope %s: %v", dir, err)
		}
		t.Cleanup(func() {
			// QEMU may still run: back to the root, then remove the scope.
			_ = os.WriteFile(filepath.Join(root, "cgroup.procs"), []byte(strconv.Itoa(vm.Pid)), 0)
			_ = os.Remove(dir)
			_ = os.Remove(filepath.Dir(dir))
		})
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(vm.Pid)), 0); err != nil {
			t.Skipf("cannot move QEMU into %s: %v", dir, err)
		}
	}
}

// recordCgroup copies the VM's cgroup files as they are now into
// $PVEDISKCHECK_RECORD_CGROUP/<name>/ (sampler/testdata/cgroup/qemu-v1 was
// recorded so); nothing without it.
func recordCgroup(t *testing.T, vmid int, name string) {
	dir := os.Getenv("PVEDISKCHECK_RECORD_CGROUP")
	if dir == "" {
		return
	}
	scope := filepath.Join("qemu.slice", strconv.Itoa(vmid)+".scope")
	for _, f := range []string{"memory/" + scope + "/memory.stat", "unified/" + scope + "/io.pressure"} {
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", f))
		if err != nil {
			continue
		}
		out := filepath.Join(dir, name, filepath.Base(f))
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil || os.WriteFile(out, b, 0o644) != nil {
			t.Fatalf("recording %s: %v", out, err)
		}
	}
}

// isMemoryHierarchy: a cgroupfs directory with memory.stat at its root (a
// v1 memory hierarchy has it; a v2 tree only in its children, but its
// cgroup.controllers lists memory).
func isMemoryHierarchy(dir string) bool {
	if _, err := os.Stat(filepath.Join(dir, "memory.stat")); err == nil {
		return true
	}
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	return err == nil && strings.Contains(" "+string(b)+" ", " memory ")
}

// unflushedOf is cache --json's unflushed section of a VM, or fails.
func cacheUnflushed(t *testing.T, n *fakenode.Node, vmid int) *cache.Unflushed {
	t.Helper()
	var out cache.View
	if errs, code := runJSON(t, n, &out, "cache", strconv.Itoa(vmid)); code != 0 {
		t.Fatalf("cache %d: exit %d: %s", vmid, code, errs)
	}
	if out.Unflushed == nil {
		t.Fatalf("cache %d --json has no unflushed section", vmid)
	}
	return out.Unflushed
}

const cgroupWrite = 32 << 20

// TestCgroupUnflushedReal: a real QEMU in its memory cgroup, as Proxmox
// starts it. On cache=writeback a 32 MiB qemu-io write of non-zero data
// raises the VM's dirty bytes by about 32 MiB, cache says what a host
// crash loses, and flush sees them fall when a flush comes in its window;
// on cache=unsafe they stay. Before QEMU enters its scope, cache says not
// measured and why, never 0.
func TestCgroupUnflushedReal(t *testing.T) {
	for _, tc := range []struct {
		mode string
		vmid int
	}{{"writeback", 934}, {"unsafe", 935}} {
		t.Run(tc.mode, func(t *testing.T) {
			n := fakenode.NewT(t)
			vol := strconv.Itoa(tc.vmid) + "/vm-" + strconv.Itoa(tc.vmid) + "-disk-0.raw"
			n.MustVolume(t, "local", vol, 128<<20)
			if err := n.WriteConfig(tc.vmid, sf("scsihw: virtio-scsi-single\nscsi0: local:%s,cache=%s,size=128M\n", vol, tc.mode)); err != nil {
				t.Fatal(err)
			}
			vm := n.MustStart(t, tc.vmid, fakenode.ArgvOptions{})

			// Outside its scope (the test's own cgroup): not measured.
			u := cacheUnflushed(t, n, tc.vmid)
			if u.Measured || u.DirtyBytes != nil || u.UnflushedBytes != nil || !strings.Contains(u.NotMeasured, "not in its own scope /qemu.slice/"+strconv.Itoa(tc.vmid)+".scope") {
				t.Fatalf("outside its scope: %+v", u)
			}
			stdout, _, _ := runCLI(t, "--root", n.Root, "cache", strconv.Itoa(tc.vmid))
			if !strings.Contains(stdout, "\nunflushed bytes in node RAM not measured: QEMU (pid") {
				t.Fatalf("human output says no reason:\n%s", stdout)
			}

			enterScope(t, vm)
			before := cacheUnflushed(t, n, tc.vmid)
			if !before.Measured || before.UnflushedBytes == nil || before.Cgroup != "/qemu.slice/"+strconv.Itoa(tc.vmid)+".scope" {
				t.Fatalf("in its scope: %+v", before)
			}
			vm.MustQemuIO(t, "scsi0", "write -P 0x5a 0 32M")
			after := cacheUnflushed(t, n, tc.vmid)
			recordCgroup(t, tc.vmid, tc.mode+"-written")
			human, _, _ := runCLI(t, "--root", n.Root, "cache", strconv.Itoa(tc.vmid))
			t.Logf("cache %d:\n%s", tc.vmid, human)
			if !strings.Contains(human, "\n32.0 MiB dirty or under writeback in node RAM (cgroup /qemu.slice/") {
				t.Errorf("human output:\n%s", human)
			}
			rose := *after.UnflushedBytes - *before.UnflushedBytes
			t.Logf("%s: dirty+writeback %d -> %d bytes (+%d for a %d-byte write); io.pressure %+v", tc.mode, *before.UnflushedBytes, *after.UnflushedBytes, rose, cgroupWrite, after.IOPressure)
			// About what was written: the node may start writing some of it
			// back, and QEMU's own pages add a few.
			if rose < cgroupWrite*3/4 || rose > cgroupWrite*5/4 {
				t.Fatalf("%s: unflushed bytes rose by %d after a %d-byte write", tc.mode, rose, cgroupWrite)
			}
			wantRisk, wantSays := cache.RiskUnflushed, "the part the guest has not flushed yet"
			if tc.mode == "unsafe" {
				wantRisk, wantSays = cache.RiskFlushed, "ignores the guest's flushes, so all of it is at risk"
			}
			if after.Risk != wantRisk || !strings.Contains(after.Says, "a host crash now loses up to") || !strings.Contains(after.Says, wantSays) || after.Modes["scsi0"] != tc.mode {
				t.Fatalf("%s: %+v", tc.mode, after)
			}
			if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.procs"); err == nil && after.IOPressure == nil {
				t.Fatalf("the unified tree is there, yet no io.pressure: %+v", after)
			}

			// top and metrics: the VM's row and series carry the same bytes.
			topOut, topErr, code := runCLI(t, "--root", n.Root, "top", "--json", "--count", "2", "--interval", "1s", strconv.Itoa(tc.vmid))
			lines := strings.Split(strings.TrimSpace(topOut), "\n")
			var last top.Sample
			if code != 0 || len(lines) != 2 || jsonUnmarshal(lines[1], &last) != nil || len(last.VMs) != 1 {
				t.Fatalf("top: exit %d, %d lines: %s %s", code, len(lines), topOut, topErr)
			}
			if r := last.VMs[0]; r.DirtyBytes == nil || r.WritebackBytes == nil || *r.DirtyBytes+*r.WritebackBytes < cgroupWrite*3/4 || r.CgroupNotMeasured != "" {
				t.Fatalf("top's VM row: %+v", r)
			}
			promOut, promErr, code := runCLI(t, "--root", n.Root, "metrics")
			dirty := promValue(promOut, sf(`pvediskcheck_vm_page_cache_dirty_bytes{vmid="%d"}`, tc.vmid))
			wb := promValue(promOut, sf(`pvediskcheck_vm_page_cache_writeback_bytes{vmid="%d"}`, tc.vmid))
			if code != 0 || dirty == nil || wb == nil || *dirty+*wb < cgroupWrite*3/4 {
				t.Fatalf("metrics: exit %d, dirty %v writeback %v: %s", code, dirty, wb, promErr)
			}
			if _, err := os.Stat("/sys/fs/cgroup/unified/cgroup.procs"); err == nil && !strings.Contains(promOut, sf(`pvediskcheck_vm_io_pressure_seconds_total{kind="some",vmid="%d"}`, tc.vmid)) {
				t.Fatalf("metrics: no io.pressure series:\n%s", promOut)
			}

			// flush: a guest flush (qemu-io's, on the disk's BlockBackend)
			// one second into a 3 s window.
			go func() {
				time.Sleep(time.Second)
				_ = vm.QemuIO("scsi0", "flush")
			}()
			var res flush.Result
			errs, code := runJSON(t, n, &res, "flush", strconv.Itoa(tc.vmid), "--for", "3s")
			if res.Unflushed == nil || !res.Unflushed.Measured {
				t.Fatalf("flush: exit %d %s: %+v", code, errs, res.Unflushed)
			}
			fu := res.Unflushed
			t.Logf("%s: flush window: %d -> %d bytes: %s", tc.mode, *fu.BeforeBytes, *fu.AfterBytes, fu.Says)
			if *fu.BeforeBytes < cgroupWrite*3/4 {
				t.Fatalf("%s: only %d bytes unflushed at the window's start", tc.mode, *fu.BeforeBytes)
			}
			recordCgroup(t, tc.vmid, tc.mode+"-flushed")
			switch tc.mode {
			case "writeback":
				// The flush's fdatasync waited for the storage in the VM's
				// cgroup: its io.pressure counts the wait.
				if end := cacheUnflushed(t, n, tc.vmid); after.IOPressure != nil && (end.IOPressure == nil || end.IOPressure.SomeTotalUs <= after.IOPressure.SomeTotalUs) {
					t.Errorf("writeback: io.pressure did not count the flush's wait: %+v then %+v", after.IOPressure, end.IOPressure)
				} else if end.IOPressure != nil {
					t.Logf("writeback: io.pressure some total %d -> %d us over the flush", after.IOPressure.SomeTotalUs, end.IOPressure.SomeTotalUs)
				}
				if !fu.Fell || *fu.AfterBytes > *fu.BeforeBytes-cgroupWrite*3/4 || !strings.Contains(fu.Says, "they fell, as cache=writeback's flushes write") || code != 0 {
					t.Fatalf("writeback: exit %d: %+v", code, fu)
				}
			case "unsafe":
				if fu.Fell || *fu.AfterBytes < *fu.BeforeBytes-flush.FellBytes || !strings.Contains(fu.Says, "they stay, as cache=unsafe keeps them") {
					t.Fatalf("unsafe: exit %d: %+v", code, fu)
				}
			}
		})
	}
}
