//go:build integration

package limit

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// limit --verify --histogram on real QEMU: 8 writes of 4 KiB in flight
// under iops_wr=20 each wait about 8/20 s (less half the load's 20 ms
// refill period: 390 ms); the steady part's p50 is within 5 % of it, the
// histogram was set for the window and is gone after.
func TestVerifyHistogramRealQEMU(t *testing.T) {
	n := fakenode.NewT(t)
	n.MustVolume(t, "local-lvm", "vm-370-disk-1", 256<<20)
	if err := n.WriteConfig(370, "scsihw: virtio-scsi-single\nscsi1: local-lvm:vm-370-disk-1,iothread=1,iops_wr=20,size=256M\n"); err != nil {
		t.Fatal(err)
	}
	vmq := n.MustStart(t, 370, fakenode.ArgvOptions{Blockdev: true})
	sock := n.Paths.QMPSocket(370)
	if err := qmp.Do(context.Background(), sock, 5*time.Second, func(s qmp.Session) error {
		return s.SetThrottleLimits("scsi1", true, qemuserver.Limits{"iops-write": 20}.Full())
	}); err != nil {
		t.Fatal(err)
	}
	load := vmq.StartLoad(fakenode.LoadSpec{Disk: "scsi1", Write: true, Size: 4 << 10, Depth: 8})
	defer load.Stop()
	nd := node.New(n.Paths, 5*time.Second)
	v, err := vm.Load(context.Background(), nd, 370)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := Run(context.Background(), nd, v, []*vm.Disk{v.Disk("scsi1")}, Request{Verify: 9 * time.Second, Histogram: true})
	if err != nil {
		t.Fatal(err)
	}
	res := rs[0]
	if res.Histogram == nil || res.Histogram.Owner != "set" {
		t.Fatalf("histogram note %+v", res.Histogram)
	}
	p := res.Verify.Latency
	if p == nil || p.WriteP50Ms == nil {
		t.Fatalf("no percentiles: %+v", res.Verify)
	}
	t.Logf("p50 %.1f ms p95 %.1f p99 %.1f, mean %.1f ms", *p.WriteP50Ms, *p.WriteP95Ms, *p.WriteP99Ms, res.Verify.Measured.WriteLatencyMs)
	if e := math.Abs(*p.WriteP50Ms-390) / 390; e > 0.05 {
		t.Errorf("p50 %.1f ms, want 390 ms within 5 %%", *p.WriteP50Ms)
	}
	if err := qmp.Do(context.Background(), sock, 5*time.Second, func(s qmp.Session) error {
		ret, err := s.Exec("query-blockstats", nil)
		for _, b := range qmp.ParseBlockstats(ret) {
			if b.ID == "scsi1" && b.WrLatency != nil {
				t.Error("histogram left set after --verify")
			}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
