package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/discard"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
)

// discardDisks380 are VM 380's disks: every controller with discard=on and
// discard=ignore, all on local-lvm (loop devices behind the lvs double).
var discardDisks380 = []struct{ id, discard string }{
	{"scsi1", "on"}, {"scsi2", "ignore"}, {"sata1", "on"}, {"sata2", "ignore"}, {"virtio1", "on"}, {"virtio2", "ignore"},
}

const discardVolSize = 64 << 20

// discardVM380 builds VM 380 on a node with the doubles on PATH, starts it
// and writes 8 MiB of non-zero data at the start of every disk.
// With agent, QEMU gets Proxmox's guest agent channel (a virtio-serial port
// on /var/run/qemu-server/380.qga) but there is no guest to answer on it.
// legacy starts it with the -drive generation (machine < 10.0).
func discardVM380(t *testing.T, extra string, agent, legacy bool) (*fakenode.Node, *fakenode.VM, map[string]string) {
	t.Helper()
	n := fakenode.NewT(t)
	n.UseDoubles(t)
	var cfg strings.Builder
	cfg.WriteString("scsihw: virtio-scsi-single\n" + extra)
	vols := map[string]string{}
	for i, d := range discardDisks380 {
		vol := sf("vm-380-disk-%d", i)
		vols[d.id] = vol
		n.MustVolume(t, "local-lvm", vol, discardVolSize)
		cfg.WriteString(sf("%s: local-lvm:%s,discard=%s,size=64M\n", d.id, vol, d.discard))
	}
	if err := n.WriteConfig(380, cfg.String()); err != nil {
		t.Fatal(err)
	}
	o := fakenode.ArgvOptions{Legacy: legacy, Blockdev: !legacy}
	if agent {
		o.Extra = []string{"-chardev", "socket,path=" + n.Paths.QGASocket(380) + ",server=on,wait=off,id=qga0",
			"-device", "virtio-serial,id=qga0-bus", "-device", "virtserialport,chardev=qga0,name=org.qemu.guest_agent.0"}
	}
	vm := n.MustStart(t, 380, o)
	for _, d := range discardDisks380 {
		vm.MustQemuIO(t, d.id, "write -P 0x5a 0 8M")
	}
	return n, vm, vols
}

// hasAioDiscard: qemu-io's aio_discard exists from QEMU 8 on (7.2 has only
// the synchronous discard, which no counter sees); aio_discard is accounted
// as an unmap on the device's BlockBackend, like a guest's discard.
func hasAioDiscard(t *testing.T) bool {
	v, err := fakenode.QEMUVersion(fakenode.QEMUBinary())
	if err != nil {
		t.Fatal(err)
	}
	var major int
	fmt.Sscanf(v, "%d", &major)
	return major >= 8
}

// TestDiscardWaitVerdicts runs `discard --wait` while a goroutine discards
// 4 MiB on every disk during the window, and checks the allocation drop on
// discard=on disks only, the protocol node counters, and the verdicts.
func TestDiscardWaitVerdicts(t *testing.T) {
	for _, gen := range []string{"blockdev", "drive"} {
		t.Run(qemuName(t)+"/"+gen, func(t *testing.T) { discardWaitVerdicts(t, gen == "drive") })
	}
}

func discardWaitVerdicts(t *testing.T, legacy bool) {
	n, vm, vols := discardVM380(t, "", false, legacy)
	aio := hasAioDiscard(t)
	before := map[string]int64{}
	for id, vol := range vols {
		before[id] = fakenode.MustAllocated(t, n.ThinVolumeFile(vol))
	}
	var wg sync.WaitGroup
	wg.Add(1)
	var ioErr error
	go func() {
		defer wg.Done()
		time.Sleep(1500 * time.Millisecond) // inside the window, after the first snapshot
		for _, d := range discardDisks380 {
			cmd := "discard 0 4M"
			if aio {
				cmd = "aio_discard 0 4M"
			}
			if err := vm.QemuIO(d.id, cmd); err != nil {
				ioErr = err
				return
			}
		}
	}()
	start := time.Now()
	var out discard.Report
	errs, code := runJSON(t, n, &out, "discard", "380", "--wait", "4s")
	took := time.Since(start)
	wg.Wait()
	if ioErr != nil {
		t.Fatal(ioErr)
	}
	if code != exitProblem {
		t.Errorf("exit %d, want 1 (discard=ignore disks on thin storage): %s", code, errs)
	}
	t.Logf("discard --wait 4s took %s", took.Round(10*time.Millisecond))
	if out.Mode != "wait" || len(out.Disks) != 6 {
		t.Fatalf("mode %s, %d disks", out.Mode, len(out.Disks))
	}
	for _, d := range out.Disks {
		r := d.Result
		after := fakenode.MustAllocated(t, n.ThinVolumeFile(vols[d.ID]))
		t.Logf("%-8s discard=%-6s file %d -> %d; tool: %v -> %v returned %v; qemu received %d/%d; storage ok %d/%d failed %d; %s %v",
			d.ID, d.Discard.Configured, before[d.ID], after, deref(r.AllocatedBeforeBytes), deref(r.AllocatedAfterBytes), deref(r.ReturnedBytes),
			r.QEMUReceivedOps, r.QEMUReceivedBytes, r.StorageAcceptedOps, r.StorageAcceptedBytes, r.StorageFailedOps, r.Verdict, reasonCodes(r.Reasons))
		if !d.Thin || d.StorageType != "lvmthin" || d.Allocation.Method != "lvs" {
			t.Errorf("%s: thin=%v type=%s method=%s", d.ID, d.Thin, d.StorageType, d.Allocation.Method)
		}
		if d.Discard.Configured == "on" {
			if before[d.ID]-after != 4<<20 {
				t.Errorf("%s: file allocation dropped by %d, want 4 MiB", d.ID, before[d.ID]-after)
			}
			if r.StorageAcceptedOps != 1 || r.StorageAcceptedBytes != 4<<20 || r.StorageFailedOps != 0 {
				t.Errorf("%s: protocol node counters %d/%d failed %d, want 1/4 MiB/0", d.ID, r.StorageAcceptedOps, r.StorageAcceptedBytes, r.StorageFailedOps)
			}
			if r.ReturnedBytes == nil || abs64(*r.ReturnedBytes-4<<20) > 2*r.ResolutionBytes {
				t.Errorf("%s: returned %v, want 4 MiB +-%d", d.ID, deref(r.ReturnedBytes), 2*r.ResolutionBytes)
			}
			if r.Verdict != discard.Returned {
				t.Errorf("%s: verdict %s %v, want returned", d.ID, r.Verdict, r.Reasons)
			}
		} else {
			if before[d.ID] != after {
				t.Errorf("%s discard=ignore: file allocation changed %d -> %d", d.ID, before[d.ID], after)
			}
			if r.StorageAcceptedOps != 0 || r.StorageAcceptedBytes != 0 {
				t.Errorf("%s: protocol node counted %d/%d with discard=ignore", d.ID, r.StorageAcceptedOps, r.StorageAcceptedBytes)
			}
			if r.Verdict != discard.NotReturned || !hasReason(r.Reasons, "discard-ignore") {
				t.Errorf("%s: verdict %s %v, want not-returned with discard-ignore", d.ID, r.Verdict, reasonCodes(r.Reasons))
			}
			if fix := r.Reasons[0].Fix; !strings.Contains(fix, "qm set 380 --"+d.ID+" local-lvm:"+vols[d.ID]+",discard=on,size=64M") || !strings.Contains(fix, "qm reboot 380") {
				t.Errorf("%s: fix %q", d.ID, fix)
			}
		}
		// The device's unmap_* counts what qemu-io's aio_discard sent on
		// every device, whatever QEMU then did with it; the synchronous
		// discard (7.2) is counted nowhere at the device.
		wantDev := int64(0)
		if aio {
			wantDev = 4 << 20
		}
		if r.QEMUReceivedBytes != wantDev {
			t.Errorf("%s: device unmap_bytes delta %d, want %d", d.ID, r.QEMUReceivedBytes, wantDev)
		}
	}
}

// TestDiscardStatus: the since-start counters and the standing warnings,
// without trimming anything.
func TestDiscardStatus(t *testing.T) {
	n, vm, vols := discardVM380(t, "", false, false)
	vm.MustQemuIO(t, "scsi1", "discard 0 2M")
	vm.MustQemuIO(t, "scsi2", "discard 0 2M")
	var out discard.Report
	start := time.Now()
	errs, code := runJSON(t, n, &out, "discard", "380")
	t.Logf("discard 380 (status, 6 disks, one lvs run, two QMP exchanges) took %s", time.Since(start).Round(time.Millisecond))
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	byID := map[string]discard.Disk{}
	for _, d := range out.Disks {
		byID[d.ID] = d
		if d.Result != nil {
			t.Errorf("%s: status mode has a verdict", d.ID)
		}
	}
	s1, s2, v1 := byID["scsi1"], byID["scsi2"], byID["virtio1"]
	if s1.SinceStart == nil || s1.SinceStart.StorageAcceptedBytes != 2<<20 || s1.SinceStart.StorageAcceptedOps != 1 || !strings.HasPrefix(s1.SinceStart.ProtocolNode, "e") {
		t.Errorf("scsi1 counters %+v", s1.SinceStart)
	}
	if s2.SinceStart == nil || s2.SinceStart.StorageAcceptedBytes != 0 {
		t.Errorf("scsi2 counters %+v", s2.SinceStart)
	}
	if abs64(*s1.Allocation.AllocatedBytes-6<<20) > s1.Allocation.ResolutionBytes || *s1.Allocation.VirtualBytes != discardVolSize || s1.Allocation.Pool == nil || s1.Allocation.Pool.Name != n.VG+"/data" {
		t.Errorf("scsi1 allocation %+v (file %d)", s1.Allocation, fakenode.MustAllocated(t, n.ThinVolumeFile(vols["scsi1"])))
	}
	if *s1.Discard.Running != "on" || *s2.Discard.Running != "ignore" || s1.ControllerDiscard != "yes" || v1.ControllerDiscard != "guest kernel 5.0 or newer" {
		t.Errorf("discard views: %+v %+v %s %s", s1.Discard, s2.Discard, s1.ControllerDiscard, v1.ControllerDiscard)
	}
	if !hasReason(s2.Warnings, "discard-ignore") || hasReason(s1.Warnings, "discard-ignore") || !hasReason(v1.Warnings, "virtio-blk-discard") || !hasReason(s1.Warnings, "ssd-off") {
		t.Errorf("warnings: scsi1 %v scsi2 %v virtio1 %v", reasonCodes(s1.Warnings), reasonCodes(s2.Warnings), reasonCodes(v1.Warnings))
	}
	if v1.SinceStart.DeviceCounts || !s1.SinceStart.DeviceCounts {
		t.Errorf("device_counts_discards: virtio1 %v scsi1 %v", v1.SinceStart.DeviceCounts, s1.SinceStart.DeviceCounts)
	}
	stdout, _, code := runCLI(t, "--root", n.Root, "discard", "380")
	if code != 0 || !strings.Contains(stdout, "GUEST SENT") || !strings.Contains(stdout, "discard=ignore on thin storage") {
		t.Errorf("human output (exit %d):\n%s", code, stdout)
	}
	// Stopped: the allocation is still reported, without counters, exit 3.
	vm.Stop()
	errs, code = runJSON(t, n, &out, "discard", "380", "scsi1")
	if code != exitUnreachable || out.Running || len(out.Disks) != 1 || out.Disks[0].SinceStart != nil || out.Disks[0].Allocation.AllocatedBytes == nil || !strings.Contains(errs, "not running") {
		t.Errorf("stopped VM: exit %d %s %+v", code, errs, out)
	}
	if _, errs, code := runCLI(t, "--root", n.Root, "discard", "380", "--wait", "1s"); code != exitUnreachable || !strings.Contains(errs, "needs the running QEMU") {
		t.Errorf("stopped VM --wait: exit %d %s", code, errs)
	}
}

// TestDiscardBadInput: a volume missing from lvs, an lvs that exits
// non-zero or hangs, a guest agent that does not answer, a stopped VM:
// exit 3 with a message that says what failed, and nothing trimmed.
func TestDiscardBadInput(t *testing.T) {
	n, _, _ := discardVM380(t, "agent: 1\n", true, false)
	cases := []struct {
		name, fault string
		args        []string
		want        []string
	}{
		{"lvs exits 5", `exit 5 Volume group "` + n.VG + `" not found`, []string{"discard", "380"},
			[]string{"cannot measure the allocation of local-lvm:vm-380-disk-", "exited with status 5", "not found"}},
		{"lvs hangs", "sleep 30", []string{"--timeout", "1s", "discard", "380", "scsi1"},
			[]string{"scsi1: cannot measure", "timed out after 1s", "raise --timeout"}},
		{"no guest agent", "", []string{"--timeout", "1s", "discard", "380", "--trim"},
			[]string{"guest agent", "did not answer within 1s", "qemu-guest-agent running"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if err := n.SetLVSFault(c.fault); err != nil {
				t.Fatal(err)
			}
			defer n.SetLVSFault("")
			start := time.Now()
			_, errs, code := runCLI(t, append([]string{"--root", n.Root}, c.args...)...)
			if code != exitUnreachable {
				t.Errorf("exit %d, want 3: %s", code, errs)
			}
			for _, w := range c.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr lacks %q:\n%s", w, errs)
				}
			}
			if time.Since(start) > 10*time.Second {
				t.Errorf("took %s", time.Since(start))
			}
		})
	}
	t.Run("volume missing from lvs", func(t *testing.T) {
		// Drop vm-380-disk-3 (sata2) from the double's volume list.
		p := n.ThinDir() + "/volumes"
		b, _ := os.ReadFile(p)
		var keep []string
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if !strings.Contains(l, " vm-380-disk-3 ") {
				keep = append(keep, l)
			}
		}
		if err := os.WriteFile(p, []byte(strings.Join(keep, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, errs, code := runCLI(t, "--root", n.Root, "discard", "380", "--trim")
		if code != exitUnreachable || !strings.Contains(errs, n.VG+"/vm-380-disk-3 (storage local-lvm) is not in lvs's report") {
			t.Errorf("exit %d: %s", code, errs)
		}
	})
	t.Run("usage", func(t *testing.T) {
		_, errs, code := runCLI(t, "--root", n.Root, "discard", "380", "--trim", "--wait", "1s")
		if code != exitUsage || !strings.Contains(errs, "exclude each other") {
			t.Errorf("exit %d: %s", code, errs)
		}
	})
}

func deref(p *int64) any {
	if p == nil {
		return nil
	}
	return *p
}

func abs64(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

// discardDuring runs `discard --wait` on the node's VM while fn issues I/O
// inside the window.
func discardDuring(t *testing.T, n *fakenode.Node, vmid int, window string, fn func() error) (discard.Report, int, string) {
	t.Helper()
	var wg sync.WaitGroup
	var ioErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		time.Sleep(1200 * time.Millisecond)
		ioErr = fn()
	}()
	var out discard.Report
	errs, code := runJSON(t, n, &out, "discard", sf("%d", vmid), "--wait", window)
	wg.Wait()
	if ioErr != nil {
		t.Fatal(ioErr)
	}
	return out, code, errs
}

func diskByID(t *testing.T, out discard.Report, id string) discard.Disk {
	t.Helper()
	for _, d := range out.Disks {
		if d.ID == id {
			return d
		}
	}
	t.Fatalf("no disk %s in %+v", id, out)
	return discard.Disk{}
}

// TestDiscardReasons: the reason chain on real discards. A thin snapshot
// keeps the pool from getting back what the volume gave up; discards smaller
// than the pool's chunk free nothing; raw and qcow2 files on a directory
// storage are measured through st_blocks and qemu-img.
func TestDiscardReasons(t *testing.T) {
	n := fakenode.NewT(t)
	n.UseDoubles(t)
	n.MustVolume(t, "local-lvm", "vm-390-disk-0", discardVolSize)
	n.MustVolume(t, "local-lvm", "vm-390-disk-1", discardVolSize)
	raw := n.MustVolume(t, "local", "390/vm-390-disk-2.raw", discardVolSize)
	qcow := n.MustVolume(t, "local", "390/vm-390-disk-3.qcow2", discardVolSize)
	if err := n.SetThinPool(fakenode.ThinPool{SizeBytes: 96 << 20, ChunkSizeBytes: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	if err := n.WriteConfig(390, `scsihw: virtio-scsi-single
scsi1: local-lvm:vm-390-disk-0,discard=on,size=64M
scsi2: local-lvm:vm-390-disk-1,discard=on,size=64M
scsi3: local:390/vm-390-disk-2.raw,discard=on,size=64M
scsi4: local:390/vm-390-disk-3.qcow2,discard=on,size=64M
`); err != nil {
		t.Fatal(err)
	}
	vm := n.MustStart(t, 390, fakenode.ArgvOptions{})
	for _, d := range []string{"scsi1", "scsi2", "scsi3", "scsi4"} {
		vm.MustQemuIO(t, d, "write -P 0x5a 0 8M")
	}
	// Proxmox's snapshot of scsi1's volume, taken after the data was written.
	if err := n.SnapshotVolume("vm-390-disk-0", "snap_vm-390-disk-0_before"); err != nil {
		t.Fatal(err)
	}
	rawBefore, qcowBefore := fakenode.MustAllocated(t, raw), fakenode.MustAllocated(t, qcow)
	out, code, errs := discardDuring(t, n, 390, "3s", func() error {
		if err := vm.QemuIO("scsi1", "discard 0 4M"); err != nil {
			return err
		}
		// 16 KiB at the start of each of 64 chunks of 64 KiB: every chunk
		// keeps data, so the pool frees none of them.
		for i := 0; i < 64; i++ {
			if err := vm.QemuIO("scsi2", sf("discard %d 16k", i*(64<<10))); err != nil {
				return err
			}
		}
		if err := vm.QemuIO("scsi3", "discard 0 4M"); err != nil {
			return err
		}
		return vm.QemuIO("scsi4", "discard 0 4M")
	})
	if code != exitProblem {
		t.Errorf("exit %d, want 1 (scsi2 returned nothing): %s", code, errs)
	}
	for _, d := range out.Disks {
		r := d.Result
		t.Logf("%s %s: %v -> %v (returned %v, %s) pool %v -> %v; ok %d/%d; %s %v", d.ID, d.StorageType, deref(r.AllocatedBeforeBytes), deref(r.AllocatedAfterBytes),
			deref(r.ReturnedBytes), d.Allocation.Method, deref(r.PoolBeforeBytes), deref(r.PoolAfterBytes), r.StorageAcceptedOps, r.StorageAcceptedBytes, r.Verdict, reasonCodes(r.Reasons))
	}
	s1 := diskByID(t, out, "scsi1")
	if s1.Result.Verdict != discard.PartlyReturned || !hasReason(s1.Result.Reasons, "snapshots-hold-blocks") || len(s1.Allocation.Snapshots) != 1 {
		t.Errorf("scsi1 (snapshot): %s %v snapshots %v", s1.Result.Verdict, reasonCodes(s1.Result.Reasons), s1.Allocation.Snapshots)
	}
	if r := s1.Result; abs64(*r.ReturnedBytes-4<<20) > 2*r.ResolutionBytes || *r.PoolReturnedBytes > 2*(s1.Allocation.Pool.ResolutionBytes) {
		t.Errorf("scsi1: volume returned %d (want 4 MiB), pool returned %d (want 0)", *r.ReturnedBytes, *r.PoolReturnedBytes)
	}
	s2 := diskByID(t, out, "scsi2")
	if s2.Result.Verdict != discard.NotReturned || !hasReason(s2.Result.Reasons, "below-chunk-size") || s2.Result.StorageAcceptedOps != 64 || s2.Result.StorageAcceptedBytes != 1<<20 {
		t.Errorf("scsi2 (small discards): %s %v ok %d/%d", s2.Result.Verdict, reasonCodes(s2.Result.Reasons), s2.Result.StorageAcceptedOps, s2.Result.StorageAcceptedBytes)
	}
	s3 := diskByID(t, out, "scsi3")
	if s3.Allocation.Method != "st_blocks" || s3.Result.Verdict != discard.Returned || *s3.Result.ReturnedBytes != 4<<20 || *s3.Result.AllocatedBeforeBytes != rawBefore {
		t.Errorf("scsi3 (raw): %+v %s", s3.Allocation, s3.Result.Verdict)
	}
	s4 := diskByID(t, out, "scsi4")
	if s4.Allocation.Method != "qemu-img" || s4.Result.Verdict != discard.Returned || *s4.Result.ReturnedBytes < 4<<20 || *s4.Result.AllocatedBeforeBytes != qcowBefore {
		t.Errorf("scsi4 (qcow2): %+v %s returned %v before %v (file %d)", s4.Allocation, s4.Result.Verdict, deref(s4.Result.ReturnedBytes), deref(s4.Result.AllocatedBeforeBytes), qcowBefore)
	}
	if s3.Thin != true || s4.Thin != true {
		t.Errorf("sparse raw / qcow2 on dir storage are thin: %v %v", s3.Thin, s4.Thin)
	}
}

// TestDiscardPoolIgnores: a thin pool with discards=ignore makes its volumes
// refuse discards; QEMU counts them as failed and nothing is freed.
func TestDiscardPoolIgnores(t *testing.T) {
	n := fakenode.NewT(t)
	n.UseDoubles(t)
	n.MustVolume(t, "local-lvm", "vm-391-disk-0", discardVolSize)
	if err := n.WriteConfig(391, "scsihw: virtio-scsi-single\nscsi1: local-lvm:vm-391-disk-0,discard=on,size=64M\n"); err != nil {
		t.Fatal(err)
	}
	if err := n.SetThinPool(fakenode.ThinPool{Discards: "ignore"}); err != nil {
		t.Fatal(err)
	}
	vm := n.MustStart(t, 391, fakenode.ArgvOptions{})
	vm.MustQemuIO(t, "scsi1", "write -P 0x5a 0 8M")
	out, code, errs := discardDuring(t, n, 391, "3s", func() error { return vm.QemuIO("scsi1", "discard 0 4M") })
	if code != exitProblem {
		t.Errorf("exit %d: %s", code, errs)
	}
	d := diskByID(t, out, "scsi1")
	r := d.Result
	t.Logf("%s: %v -> %v; ok %d/%d failed %d; %s %v", d.ID, deref(r.AllocatedBeforeBytes), deref(r.AllocatedAfterBytes), r.StorageAcceptedOps, r.StorageAcceptedBytes, r.StorageFailedOps, r.Verdict, reasonCodes(r.Reasons))
	if r.Verdict != discard.NotReturned || r.StorageFailedOps < 1 || r.StorageAcceptedOps != 0 || *r.ReturnedBytes != 0 {
		t.Errorf("verdict %s failed %d ok %d returned %d", r.Verdict, r.StorageFailedOps, r.StorageAcceptedOps, *r.ReturnedBytes)
	}
	if !hasReason(r.Reasons, "storage-refused") || !hasReason(r.Reasons, "pool-ignores-discards") || !strings.Contains(r.Reasons[len(r.Reasons)-1].Fix, "lvchange --discards passdown "+n.VG+"/data") {
		t.Errorf("reasons %+v", r.Reasons)
	}
	if !hasReason(d.Warnings, "pool-ignores-discards") {
		t.Errorf("warnings %v", reasonCodes(d.Warnings))
	}
}

func hasReason(rs []discard.Reason, code discard.Code) bool {
	for _, r := range rs {
		if r.Code == code {
			return true
		}
	}
	return false
}

func reasonCodes(rs []discard.Reason) []discard.Code {
	var out []discard.Code
	for _, r := range rs {
		out = append(out, r.Code)
	}
	return out
}

// TestDiscardWaitQEMUKilled: QEMU killed during --wait: exit 3 soon after,
// and the report of what was measured until then is still printed (JSON
// and text), with where the window was cut. Any moment inside the window
// will do; the window is long so that the kill lands inside it.
func TestDiscardWaitQEMUKilled(t *testing.T) {
	for _, asJSON := range []bool{true, false} {
		t.Run(sf("json=%v", asJSON), func(t *testing.T) {
			n, vm, _ := discardVM380(t, "", false, false)
			killedAt := make(chan time.Time, 1)
			go func() {
				time.Sleep(1500 * time.Millisecond)
				killedAt <- time.Now()
				_ = syscall.Kill(vm.Pid, syscall.SIGKILL)
			}()
			args := []string{"--root", n.Root, "discard", "380", "scsi1", "--wait", "30s"}
			if asJSON {
				args = append([]string{"--json"}, args...)
			}
			stdout, errs, code := runCLI(t, args...)
			toError := time.Since(<-killedAt)
			t.Logf("exit %d %s after SIGKILL: %s", code, toError.Round(time.Millisecond), strings.TrimSpace(errs))
			if code != exitUnreachable || toError > 3*time.Second || !strings.Contains(errs, "QEMU stopped answering") {
				t.Errorf("exit %d after %s: %s", code, toError, errs)
			}
			if !asJSON {
				if !strings.Contains(stdout, "cut: QEMU stopped answering") || !strings.Contains(stdout, "scsi1 (local-lvm:vm-380-disk-0") {
					t.Errorf("text:\n%s", stdout)
				}
				return
			}
			var out discard.Report
			if err := json.Unmarshal([]byte(stdout), &out); err != nil {
				t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
			}
			r := out.Disks[0].Result
			if out.Sampling == nil || !strings.Contains(out.Sampling.Cut, "exited") || out.Sampling.Samples < 1 || r == nil || r.StandsOnSeconds == nil || !hasReason(r.Reasons, discard.CodeWindowCut) {
				t.Errorf("report %s", stdout)
			}
		})
	}
}
