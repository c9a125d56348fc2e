package fakenode

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/lvm"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
)

// TestFillDoubles: the lvmconfig double prints what lvm2's lvmconfig
// printed (lvm/testdata/real-lvmconfig-*.txt, byte for byte), and the lvs
// double's new fields read back as lvm2's do: lv_when_full, vg_free,
// seg_monitor, and with -a the pool's hidden data LV naming a real PV.
func TestFillDoubles(t *testing.T) {
	n := NewT(t)
	n.UseDoubles(t)
	n.MustVolume(t, "local-lvm", "vm-100-disk-0", 8<<20)
	r := node.Exec{Timeout: 5 * time.Second}
	ctx := context.Background()
	for _, c := range []struct {
		pool    ThinPool
		fixture string
	}{
		{ThinPool{}, "../../lvm/testdata/real-lvmconfig-default.txt"},
		{ThinPool{AutoextendThreshold: 80, AutoextendPercent: 10}, "../../lvm/testdata/real-lvmconfig-autoextend.txt"},
	} {
		if err := n.SetThinPool(c.pool); err != nil {
			t.Fatal(err)
		}
		out, err := r.Run(ctx, thinpool.LVMConfigArgv...)
		want, _ := os.ReadFile(c.fixture)
		if err != nil || string(out) != string(want) {
			t.Errorf("lvmconfig double: %q %v, lvm2 printed %q", out, err, want)
		}
	}
	pv, err := n.NewPV(false)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.SetThinPool(ThinPool{WhenFull: "error", VGFreeBytes: 1 << 30, Monitor: "not monitored", PV: pv}); err != nil {
		t.Fatal(err)
	}
	rep, err := lvm.List(ctx, r, n.VG)
	if err != nil {
		t.Fatal(err)
	}
	p := rep.Find(n.VG, "data")
	if p == nil || p.WhenFull != "error" || p.VGFreeBytes != 1<<30 || p.Monitor != "not monitored" || p.Devices != "data_tdata(0)" {
		t.Fatalf("pool %+v", p)
	}
	if pvs := rep.PVs(p); len(pvs) != 1 || pvs[0] != pv {
		t.Errorf("PVs %v, want %s", pvs, pv)
	}
	if v := rep.Find(n.VG, "vm-100-disk-0"); v == nil || v.WhenFull != "" || v.VGFreeBytes != 1<<30 {
		t.Errorf("volume %+v", v)
	}
	if len(rep.Volumes(n.VG, "data")) != 1 {
		t.Error("the hidden data LV counts as a volume")
	}
}
