//go:build integration

package discard

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// faultVM starts VM 372 on real QEMU: scsi1 (discard=on) on the local-lvm
// stand-in with 8 MiB written, and QEMU's guest agent channel without a
// guest behind it.
func faultVM(t *testing.T) (*fakenode.Node, *fakenode.VM, *vm.VM) {
	n := fakenode.NewT(t)
	n.UseDoubles(t)
	n.MustVolume(t, "local-lvm", "vm-372-disk-0", 64<<20)
	if err := n.WriteConfig(372, "agent: 1\nscsihw: virtio-scsi-single\nscsi1: local-lvm:vm-372-disk-0,discard=on,size=64M\n"); err != nil {
		t.Fatal(err)
	}
	fvm := n.MustStart(t, 372, fakenode.ArgvOptions{Blockdev: true, Extra: agentArgs(n, 372)})
	fvm.MustQemuIO(t, "scsi1", "write -P 0x5a 0 8M")
	v, err := vm.Load(context.Background(), node.New(n.Paths, 0), 372)
	if err != nil {
		t.Fatal(err)
	}
	return n, fvm, v
}

// faultWait runs --wait with 250 ms ticks; at the first sample 4 MiB are
// discarded (qemu-io), at sample `at` fault runs.
func faultWait(t *testing.T, fvm *fakenode.VM, window time.Duration, at int, fault func()) Options {
	k := 0
	return Options{Mode: Wait, Wait: window, Interval: 250 * time.Millisecond, TrimTimeout: time.Minute,
		OnSample: func(sampler.Tick) {
			k++
			if k == 1 {
				if err := fvm.QemuIO("scsi1", "discard 0 4M"); err != nil {
					t.Error(err)
				}
			}
			if k == at {
				fault()
			}
		}}
}

// TestFaultWaitSIGSTOP: QEMU stopped for 1.5 s inside a 4 s window, then
// continued: the gap is reported, the verdict stands on the whole window.
func TestFaultWaitSIGSTOP(t *testing.T) {
	n, fvm, v := faultVM(t)
	o := faultWait(t, fvm, 4*time.Second, 3, func() {
		_ = syscall.Kill(fvm.Pid, syscall.SIGSTOP)
		time.AfterFunc(1500*time.Millisecond, func() { _ = syscall.Kill(fvm.Pid, syscall.SIGCONT) })
	})
	start := time.Now()
	rep, err := Run(context.Background(), node.New(n.Paths, 2*time.Second), v, v.Disks, o)
	took := time.Since(start)
	if exitcode.Of(err) != exitcode.OK {
		t.Fatalf("exit %d: %v", exitcode.Of(err), err)
	}
	s, r := rep.Sampling, rep.Disks[0].Result
	t.Logf("exit 0 after %s; sampling %+v; %s %v", took.Round(time.Millisecond), s, r.Verdict, codesOf(r.Reasons))
	if s.Missed == 0 || len(s.Gaps) == 0 || s.Cut != "" || s.CoveredSeconds < 4 {
		t.Errorf("sampling %+v", s)
	}
	if r.Verdict != Returned || r.StorageAcceptedBytes != 4<<20 || r.StandsOnSeconds == nil || reasonOf(r.Reasons, CodeWindowGaps).Code == "" {
		t.Errorf("result %s %v %+v", r.Verdict, codesOf(r.Reasons), r)
	}
	if took > 4*time.Second+3*time.Second {
		t.Errorf("took %s", took)
	}
}

// TestFaultWaitSIGSTOPToTheEnd: QEMU still stopped when the window ends:
// exit 3 within the window plus the last sample's patience (2 s), with
// what was measured.
func TestFaultWaitSIGSTOPToTheEnd(t *testing.T) {
	n, fvm, v := faultVM(t)
	defer syscall.Kill(fvm.Pid, syscall.SIGCONT)
	const window = 2 * time.Second
	o := faultWait(t, fvm, window, 3, func() { _ = syscall.Kill(fvm.Pid, syscall.SIGSTOP) })
	start := time.Now()
	rep, err := Run(context.Background(), node.New(n.Paths, time.Second), v, v.Disks, o)
	took := time.Since(start)
	_ = syscall.Kill(fvm.Pid, syscall.SIGCONT)
	if exitcode.Of(err) != exitcode.Unreachable || rep == nil {
		t.Fatalf("exit %d: %v", exitcode.Of(err), err)
	}
	t.Logf("exit 3 after %s: %v", took.Round(time.Millisecond), err)
	if took > window+2*time.Second+time.Second {
		t.Errorf("took %s", took)
	}
	r := rep.Disks[0].Result
	if rep.Sampling.Cut == "" || r.StorageAcceptedBytes != 4<<20 || r.Verdict != Returned || reasonOf(r.Reasons, CodeWindowCut).Code == "" {
		t.Errorf("sampling %+v; result %s %v", rep.Sampling, r.Verdict, codesOf(r.Reasons))
	}
}

// TestFaultWaitSIGKILL: QEMU killed mid-window: exit 3 at once, the
// samples until then reported.
func TestFaultWaitSIGKILL(t *testing.T) {
	n, fvm, v := faultVM(t)
	var killed time.Time
	o := faultWait(t, fvm, 10*time.Second, 3, func() {
		killed = time.Now()
		_ = syscall.Kill(fvm.Pid, syscall.SIGKILL)
	})
	rep, err := Run(context.Background(), node.New(n.Paths, 2*time.Second), v, v.Disks, o)
	toError := time.Since(killed)
	if exitcode.Of(err) != exitcode.Unreachable || rep == nil {
		t.Fatalf("exit %d: %v", exitcode.Of(err), err)
	}
	t.Logf("exit 3 %s after SIGKILL: %v", toError.Round(time.Millisecond), err)
	if toError > time.Second {
		t.Errorf("exit 3 %s after the kill", toError)
	}
	r := rep.Disks[0].Result
	if !strings.Contains(rep.Sampling.Cut, "exited") || rep.Sampling.Samples < 3 || r.StorageAcceptedBytes != 4<<20 || r.Verdict != Returned || reasonOf(r.Reasons, CodeWindowCut).Code == "" {
		t.Errorf("sampling %+v; result %s %v", rep.Sampling, r.Verdict, codesOf(r.Reasons))
	}
}

// TestFaultTrimSilentAgent: QEMU's guest agent channel with no guest
// behind it: --trim fails within --timeout plus a small margin, before
// anything is trimmed.
func TestFaultTrimSilentAgent(t *testing.T) {
	n, _, v := faultVM(t)
	const timeout = time.Second
	trimmed := false
	start := time.Now()
	_, err := Run(context.Background(), node.New(n.Paths, timeout), v, v.Disks, Options{Mode: Trim, TrimTimeout: time.Minute,
		OnTrim: func(time.Duration) func() { trimmed = true; return func() {} }})
	took := time.Since(start)
	t.Logf("exit %d after %s: %v", exitcode.Of(err), took.Round(time.Millisecond), err)
	if exitcode.Of(err) != exitcode.Unreachable || !strings.Contains(err.Error(), "did not answer within 1s") || trimmed {
		t.Errorf("exit %d (trimmed %v): %v", exitcode.Of(err), trimmed, err)
	}
	if took > timeout+900*time.Millisecond { // a second wait would be 2 s
		t.Errorf("took %s", took)
	}
}
