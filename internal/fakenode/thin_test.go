package fakenode

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/lvm"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// blockstats returns device entries by disk id and node entries by node name.
func blockstats(t *testing.T, n *Node, vmid int) (map[string]qmp.BlockStats, map[string]qmp.BlockStats) {
	t.Helper()
	dev, nodes := map[string]qmp.BlockStats{}, map[string]qmp.BlockStats{}
	err := qmp.Do(context.Background(), n.Paths.QMPSocket(vmid), 5*time.Second, func(s qmp.Session) error {
		r, err := s.Exec("query-blockstats", nil)
		if err != nil {
			return err
		}
		for _, b := range qmp.ParseBlockstats(r) {
			dev[b.ID] = b
		}
		r, err = s.Exec("query-blockstats", map[string]any{"query-nodes": true})
		if err != nil {
			return err
		}
		for _, b := range qmp.ParseBlockstats(r) {
			nodes[b.NodeName] = b
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return dev, nodes
}

// TestLVSDoubleFollowsRealDiscards writes and discards through real QEMU on
// VirtIO SCSI, SATA and VirtIO Block disks with discard=on and
// discard=ignore, and checks the lvs double against the files' real
// allocation: what reaches the file lowers data_percent, what QEMU drops
// does not. It also pins QEMU's counters the discard command relies on.
func TestLVSDoubleFollowsRealDiscards(t *testing.T) {
	n := NewT(t)
	n.UseDoubles(t)
	const size = 64 << 20
	disks := map[string]string{ // disk -> discard option
		"scsi1": "on", "scsi2": "ignore", "sata1": "on", "sata2": "ignore", "virtio1": "on", "virtio2": "ignore",
	}
	var cfg strings.Builder
	cfg.WriteString("scsihw: virtio-scsi-single\n")
	vols := map[string]string{}
	i := 0
	for _, d := range []string{"scsi1", "scsi2", "sata1", "sata2", "virtio1", "virtio2"} {
		vol := "vm-380-disk-" + string(rune('0'+i))
		i++
		vols[d] = vol
		n.MustVolume(t, "local-lvm", vol, size)
		cfg.WriteString(d + ": local-lvm:" + vol + ",discard=" + disks[d] + ",size=64M\n")
	}
	if err := n.WriteConfig(380, cfg.String()); err != nil {
		t.Fatal(err)
	}
	if err := n.SetThinPool(ThinPool{SizeBytes: 128 << 20, ChunkSizeBytes: 4096}); err != nil {
		t.Fatal(err)
	}
	vm := n.MustStart(t, 380, ArgvOptions{})
	lvs := func() *lvm.Report {
		t.Helper()
		rep, err := lvm.List(context.Background(), node.Exec{Timeout: 5 * time.Second}, n.VG)
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	for d := range disks {
		vm.MustQemuIO(t, d, "write -P 0x5a 0 8M")
	}
	before := lvs()
	allocBefore := map[string]int64{}
	for d, vol := range vols {
		allocBefore[d] = MustAllocated(t, n.ThinVolumeFile(vol))
		if allocBefore[d] < 8<<20 {
			t.Errorf("%s: %d bytes allocated after writing 8 MiB of 0x5a", d, allocBefore[d])
		}
		got, ok := before.Find(n.VG, vol).AllocatedBytes()
		if !ok || abs(got-allocBefore[d]) > before.Find(n.VG, vol).ResolutionBytes() {
			t.Errorf("%s: lvs double says %d allocated, file has %d", d, got, allocBefore[d])
		}
	}
	for d := range disks {
		vm.MustQemuIO(t, d, "discard 0 4M")
	}
	after := lvs()
	dev, nodes := blockstats(t, n, 380)
	for d, vol := range vols {
		alloc := MustAllocated(t, n.ThinVolumeFile(vol))
		got, _ := after.Find(n.VG, vol).AllocatedBytes()
		t.Logf("%-8s discard=%-6s allocated %8d -> %8d bytes; lvs %s%% -> %s%%", d, disks[d], allocBefore[d], alloc,
			pct(before.Find(n.VG, vol)), pct(after.Find(n.VG, vol)))
		if abs(got-alloc) > after.Find(n.VG, vol).ResolutionBytes() {
			t.Errorf("%s: lvs double says %d allocated, file has %d", d, got, alloc)
		}
		drop := allocBefore[d] - alloc
		if disks[d] == "on" && drop != 4<<20 {
			t.Errorf("%s discard=on: allocation dropped by %d, want 4 MiB", d, drop)
		}
		if disks[d] == "ignore" && drop != 0 {
			t.Errorf("%s discard=ignore: allocation dropped by %d, want 0", d, drop)
		}
		// The protocol node counts what reached the file; the synchronous
		// qemu-io discard is not accounted at the device (QEMU-FACTS).
		ns := nodes[nodeOf(t, vm, d)]
		t.Logf("%-8s device unmap_operations=%d; protocol node discard-nb-ok=%d discard-bytes-ok=%d discard-nb-failed=%d",
			d, dev[d].UnmapOps, ns.DiscardNbOK, ns.DiscardBytesOK, ns.DiscardNbFailed)
		wantOK := int64(0)
		if disks[d] == "on" {
			wantOK = 4 << 20
		}
		if !ns.HasDriverSpecific || ns.DiscardBytesOK != wantOK || ns.DiscardNbFailed != 0 || dev[d].UnmapOps != 0 {
			t.Errorf("%s: protocol node %+v, device unmap %d; want discard-bytes-ok %d", d, ns, dev[d].UnmapOps, wantOK)
		}
	}
}

func nodeOf(t *testing.T, vm *VM, disk string) string {
	for _, a := range vm.Argv {
		if strings.Contains(a, `"node-name":"drive-`+disk+`"`) {
			return gjson.Get(a, "file.file.node-name").String()
		}
	}
	return ""
}

func pct(l *lvm.LV) string {
	if l == nil || l.DataPercent == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *l.DataPercent)
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}
