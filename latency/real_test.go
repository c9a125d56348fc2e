//go:build integration || record

package latency_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// throttled is the scene both real-QEMU tests use: VM 370's scsi1 under an
// iops-write limit, qemu-io keeping depth 4 KiB writes in flight, the
// latency histograms set through a Tracker, and two query-blockstats
// answers window apart, taken after the throttle's first burst.
type throttled struct {
	iops, depth int
	every       time.Duration // the load's refill period
	a, b        json.RawMessage
	tracker     *latency.Tracker
	exch        func(ctx context.Context, fn func(qmp.Session) error) error
	sock        string
}

func runThrottled(t *testing.T, iops, depth int, window time.Duration) *throttled {
	t.Helper()
	n := fakenode.NewT(t)
	n.MustVolume(t, "local-lvm", "vm-370-disk-1", 256<<20)
	if err := n.WriteConfig(370, "scsihw: virtio-scsi-single\nscsi1: local-lvm:vm-370-disk-1,iothread=1,size=256M\n"); err != nil {
		t.Fatal(err)
	}
	vmq := n.MustStart(t, 370, fakenode.ArgvOptions{Blockdev: true})
	sc := &throttled{iops: iops, depth: depth, every: 20 * time.Millisecond, tracker: latency.NewTracker(), sock: n.Paths.QMPSocket(370)}
	sc.exch = func(ctx context.Context, fn func(qmp.Session) error) error {
		return qmp.Do(ctx, sc.sock, 5*time.Second, fn)
	}
	do := func(fn func(qmp.Session) error) {
		t.Helper()
		if err := sc.exch(context.Background(), fn); err != nil {
			t.Fatal(err)
		}
	}
	do(func(s qmp.Session) error {
		return s.SetThrottleLimits("scsi1", true, qemuserver.Limits{"iops-write": int64(iops)}.Full())
	})
	// A sample's exchange sets the histogram, as the commands' do.
	v, err := vm.Load(context.Background(), node.New(n.Paths, 5*time.Second), 370)
	if err != nil || v.Pid != vmq.Pid {
		t.Fatalf("VM 370: %v (pid %d, QEMU's %d)", err, v.Pid, vmq.Pid)
	}
	if _, err := v.Ask(context.Background(), 5*time.Second, vm.Query{Need: vm.NeedStats, Then: sc.tracker.Hook(v, 5*time.Second, []string{"scsi1"})}); err != nil {
		t.Fatal(err)
	}
	if notes := sc.tracker.Notes(); len(notes) != 1 || notes[0].Owner != latency.SetByUs {
		t.Fatalf("tracker notes %+v, want scsi1 set", notes)
	}
	load := vmq.StartLoad(fakenode.LoadSpec{Disk: "scsi1", Write: true, Size: 4 << 10, Depth: depth, Every: sc.every})
	defer load.Stop()
	time.Sleep(4 * time.Second) // past the throttle's first burst
	blockstats := func() json.RawMessage {
		var raw json.RawMessage
		do(func(s qmp.Session) error {
			r, err := s.Exec("query-blockstats", nil)
			raw = json.RawMessage(r.Raw)
			return err
		})
		return raw
	}
	sc.a = blockstats()
	time.Sleep(window)
	sc.b = blockstats()
	return sc
}
