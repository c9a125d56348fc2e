package main

import (
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
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
	var out flushJSON
	errs, code := runJSON(t, n, &out, "flush", "374", "--for", "3s")
	l1.Stop()
	l2.Stop()
	<-done
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := map[string]string{"scsi1": "not-applicable", "scsi2": "no-flushes", "scsi3": "zero-data"}
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
	vm.Stop()
	if _, errs, code := runCLI(t, "--root", n.Root, "flush", "374", "--for", "1s"); code != 3 || !strings.Contains(errs, "not running") {
		t.Errorf("stopped: exit %d %s", code, errs)
	}
}
