package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/cache"
	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/volchain"
)

// chainFindings runs check --json on one VM and returns its volume-chain
// findings.
func chainFindings(t *testing.T, n *fakenode.Node, vmid string) []check.Finding {
	t.Helper()
	var rep check.Report
	if errs, code := runJSON(t, n, &rep, "check", vmid); code > 1 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var out []check.Finding
	for _, v := range rep.VMs {
		for _, f := range v.Findings {
			if f.Code == check.CodeVolumeChain {
				out = append(out, f)
			}
		}
	}
	return out
}

// TestCheckVolumeChain: real QEMU runs a disk of Proxmox 9's volume
// chains, qcow2 layers on loop devices standing in for thick LVs, made as
// LVMPlugin makes them after two snapshots (base s1, overlay s2, current):
// check shows QEMU's chain with each layer's use beside the config's
// snapshots, then the disagreements once the config changes under the
// running VM; a current layer whose qcow2 can outgrow its LV is a finding,
// a preallocated one (Proxmox's default) is not.
func TestCheckVolumeChain(t *testing.T) {
	n := fakenode.NewT(t)
	n.UseDoubles(t)
	if err := n.WriteStorageCfg(n.ChainStorageCfg()); err != nil {
		t.Fatal(err)
	}
	const vol = "vm-100-disk-0.qcow2"
	s1, s2 := volchain.LayerName(vol, "s1"), volchain.LayerName(vol, "s2")
	if _, err := n.CreateChain(64<<20, "metadata", fakenode.ChainLayer{LV: s1}, fakenode.ChainLayer{LV: s2}, fakenode.ChainLayer{LV: vol}); err != nil {
		t.Fatal(err)
	}
	const main = "scsihw: virtio-scsi-single\nparent: s2\nscsi0: chain:" + vol + ",iothread=1,size=64M\n"
	const snaps = "\n[s1]\nscsi0: chain:" + vol + ",iothread=1,size=64M\nsnaptime: 1795985763\n\n[s2]\nparent: s1\nscsi0: chain:" + vol + ",iothread=1,size=64M\nsnaptime: 1795985863\n"
	if err := n.WriteConfig(100, main+snaps); err != nil {
		t.Fatal(err)
	}
	vm := n.MustStart(t, 100, fakenode.ArgvOptions{})
	vm.MustQemuIO(t, "scsi0", "write -P 0x5a 0 4M")

	fs := chainFindings(t, n, "100")
	if len(fs) != 1 || fs[0].Severity != check.Info || fs[0].Disk != "scsi0" {
		t.Fatalf("%+v", fs)
	}
	msg := fs[0].Message
	t.Logf("%s", msg)
	for _, w := range []string{"volume chain, 3 layers in QEMU: " + vol + " (qcow2 ", s2 + " (qcow2 ", s1 + " (qcow2 ", "matches the config's snapshots (2)"} {
		if !strings.Contains(msg, w) {
			t.Errorf("%q lacks %q", msg, w)
		}
	}
	// The snapshot s1 deleted from the config (its layer still under the
	// running VM), a snapshot s3 the chain does not have.
	if err := n.WriteConfig(100, strings.Replace(main, "parent: s2", "parent: s3", 1)+"\n[s3]\nparent: s2\nscsi0: chain:"+vol+",size=64M\n\n[s2]\nscsi0: chain:"+vol+",size=64M\n"); err != nil {
		t.Fatal(err)
	}
	fs = chainFindings(t, n, "100")
	if len(fs) != 2 || fs[1].Severity != check.Warning {
		t.Fatalf("%+v", fs)
	}
	for _, w := range []string{"the layer of snapshot s1, which the config's snapshots do not name", "the config's snapshot s3 has its layer " + volchain.LayerName(vol, "s3") + " outside QEMU's chain"} {
		if !strings.Contains(fs[1].Message, w) {
			t.Errorf("%q lacks %q", fs[1].Message, w)
		}
	}
	if !os.IsNotExist(func() error {
		_, err := os.Stat("/dev/" + n.ChainVG() + "/" + volchain.LayerName(vol, "s3"))
		return err
	}()) {
		t.Error("s3 has a layer")
	}
}

// TestCheckVolumeChainFills: a current layer without preallocation on an
// LV smaller than its qcow2 can grow (16 MiB for a 64 MiB disk): check
// warns, and names what the LV needs.
func TestCheckVolumeChainFills(t *testing.T) {
	n := fakenode.NewT(t)
	n.UseDoubles(t)
	if err := n.WriteStorageCfg(n.ChainStorageCfg()); err != nil {
		t.Fatal(err)
	}
	const vol = "vm-101-disk-0.qcow2"
	s1 := volchain.LayerName(vol, "s1")
	if _, err := n.CreateChain(64<<20, "off", fakenode.ChainLayer{LV: s1}, fakenode.ChainLayer{LV: vol, LVSize: 16 << 20}); err != nil {
		t.Fatal(err)
	}
	if err := n.WriteConfig(101, "parent: s1\nscsi0: chain:"+vol+",size=64M\n\n[s1]\nscsi0: chain:"+vol+",size=64M\n"); err != nil {
		t.Fatal(err)
	}
	vm := n.MustStart(t, 101, fakenode.ArgvOptions{})
	// qemu-img check reads the image's on-disk metadata: QEMU's qcow2
	// cache holds new allocations until a flush writes them.
	vm.MustQemuIO(t, "scsi0", "write -P 0x5a 0 12M")
	vm.MustQemuIO(t, "scsi0", "flush")
	fs := chainFindings(t, n, "101")
	if len(fs) != 2 || fs[1].Severity != check.Warning || !strings.Contains(fs[1].Message, "its qcow2 reaches 12.6 MiB of 16.0 MiB (78.9 %) and can still allocate 52.0 MiB") {
		t.Fatalf("%+v", fs)
	}
	t.Logf("%s\n%s\nfix: %s", fs[0].Message, fs[1].Message, fs[1].Fix)
	if !strings.Contains(fs[1].Message, "the current layer "+vol+" can outgrow its LV") || !strings.Contains(fs[1].Fix, "lvextend -L +") {
		t.Errorf("%+v", fs[1])
	}
	// 2 MiB more: past 90 % of the LV, an error.
	vm.MustQemuIO(t, "scsi0", "write -P 0x5a 12M 2M")
	vm.MustQemuIO(t, "scsi0", "flush")
	if fs = chainFindings(t, n, "101"); len(fs) != 2 || fs[1].Severity != check.Error || !strings.Contains(fs[1].Message, "(91.4 %)") {
		t.Errorf("%+v", fs)
	}
}

// chainCacheVM starts VM 380 with three disks: scsi0 a volume chain of
// three qcow2 layers on loop devices standing in for thick LVs (s1, s2,
// the current layer, made as LVMPlugin makes them), scsi1 a linked clone
// on directory storage (a qcow2 backed by its base image, as qemu-server's
// clone makes it: `-b ../900/base-900-disk-0.qcow2`), scsi2 a raw thin LV
// without any backing file.
func chainCacheVM(t testing.TB) (*fakenode.Node, *fakenode.VM) {
	n := fakenode.NewT(t)
	n.UseDoubles(t)
	if err := n.WriteStorageCfg(n.ChainStorageCfg()); err != nil {
		t.Fatal(err)
	}
	const vol = "vm-380-disk-0.qcow2"
	if _, err := n.CreateChain(64<<20, "metadata", fakenode.ChainLayer{LV: volchain.LayerName(vol, "s1")}, fakenode.ChainLayer{LV: volchain.LayerName(vol, "s2")}, fakenode.ChainLayer{LV: vol}); err != nil {
		t.Fatal(err)
	}
	n.MustVolume(t, "local", "900/base-900-disk-0.qcow2", 64<<20)
	clone := n.MustVolume(t, "local", "380/vm-380-disk-1.qcow2", 64<<20)
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", "../900/base-900-disk-0.qcow2", clone, "64M").CombinedOutput(); err != nil {
		t.Fatalf("qemu-img create: %v: %s", err, out)
	}
	n.MustVolume(t, "local-lvm", "vm-380-disk-2", 64<<20)
	const main = "scsihw: virtio-scsi-single\nparent: s2\nscsi0: chain:" + vol + ",iothread=1,size=64M\nscsi1: local:900/base-900-disk-0.qcow2/380/vm-380-disk-1.qcow2,size=64M\nscsi2: local-lvm:vm-380-disk-2,size=64M\n"
	const snaps = "\n[s1]\nscsi0: chain:" + vol + ",iothread=1,size=64M\nsnaptime: 1795985763\n\n[s2]\nparent: s1\nscsi0: chain:" + vol + ",iothread=1,size=64M\nsnaptime: 1795985863\n"
	if err := n.WriteConfig(380, main+snaps); err != nil {
		t.Fatal(err)
	}
	return n, n.MustStart(t, 380, fakenode.ArgvOptions{Blockdev: true})
}

// TestCacheBackingChain: real QEMU on qcow2 layers. cache shows, per disk
// whose running image has a backing file, the chain top to base from
// QEMU's graph: the volume chain's three layers with their snapshots and
// each LV's use, the linked clone's overlay and base image (no LV); the
// raw disk without a backing file shows nothing of it, in text or JSON.
func TestCacheBackingChain(t *testing.T) {
	n, vm := chainCacheVM(t)
	vm.MustQemuIO(t, "scsi0", "write -P 0x5a 0 4M")
	vm.MustQemuIO(t, "scsi0", "flush")
	var view cache.View
	if errs, code := runJSON(t, n, &view, "cache", "380"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	disks := map[string]cache.Disk{}
	for _, d := range view.Disks {
		disks[d.ID] = d
	}
	const vol = "vm-380-disk-0.qcow2"
	ch := disks["scsi0"].Backing
	if ch == nil || ch.Depth != 3 || len(ch.Layers) != 3 {
		t.Fatalf("scsi0's chain %+v", ch)
	}
	for i, want := range []struct{ lv, snap string }{{vol, ""}, {volchain.LayerName(vol, "s2"), "s2"}, {volchain.LayerName(vol, "s1"), "s1"}} {
		l := ch.Layers[i]
		if l.Format != "qcow2" || l.Protocol != "host_device" || l.Node == "" || filepath.Base(l.File) != want.lv || l.LV == nil || l.LV.Snapshot != want.snap ||
			l.LV.UsedPercent == nil || l.LV.LVSizeBytes == nil || *l.LV.Qcow2EndBytes <= 0 || l.LV.Error != "" {
			t.Errorf("scsi0 layer %d: %+v lv %+v", i, l, l.LV)
		}
	}
	if *ch.Layers[0].LV.Qcow2EndBytes < 4<<20 {
		t.Errorf("the current layer holds the 4 MiB written: %d", *ch.Layers[0].LV.Qcow2EndBytes)
	}
	cl := disks["scsi1"].Backing
	if cl == nil || cl.Depth != 2 || !strings.HasSuffix(cl.Layers[0].File, "/380/vm-380-disk-1.qcow2") || !strings.HasSuffix(cl.Layers[1].File, "/900/base-900-disk-0.qcow2") {
		t.Fatalf("scsi1's chain %+v", cl)
	}
	for i, l := range cl.Layers {
		if l.LV != nil || l.Format != "qcow2" || l.Protocol != "file" {
			t.Errorf("linked clone layer %d: %+v", i, l)
		}
	}
	if disks["scsi2"].Backing != nil {
		t.Errorf("scsi2 has no backing file: %+v", disks["scsi2"].Backing)
	}
	raw, _, _ := runCLI(t, "--root", n.Root, "--json", "cache", "380")
	if strings.Count(raw, `"backing_chain"`) != 2 {
		t.Errorf("backing_chain on other disks than scsi0 and scsi1: %s", raw)
	}
	out, errs, code := runCLI(t, "--root", n.Root, "cache", "380")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	t.Logf("%s", out)
	_, s0, _ := strings.Cut(out, "\nscsi0:\n")
	s0, s1, _ := strings.Cut(s0, "\nscsi1:\n")
	s1, s2, _ := strings.Cut(s1, "\nscsi2:\n")
	for _, w := range []string{"\n  backing chain, 3 layers, top to base:\n    1. qcow2 /dev/" + n.ChainVG() + "/" + vol + " on host_device (node ",
		", current layer: qcow2 reaches ", "\n    2. qcow2 /dev/" + n.ChainVG() + "/" + volchain.LayerName(vol, "s2") + " on host_device (node ", ", snapshot s2: qcow2 reaches ",
		"\n    3. qcow2 /dev/" + n.ChainVG() + "/" + volchain.LayerName(vol, "s1"), ", snapshot s1: qcow2 reaches "} {
		if !strings.Contains(s0, w) {
			t.Errorf("scsi0's text lacks %q", w)
		}
	}
	if !strings.Contains(s1, "\n  backing chain, 2 layers, top to base:\n    1. qcow2 ") || !strings.Contains(s1, "/900/base-900-disk-0.qcow2 on file (node ") || strings.Contains(s1, "LV") {
		t.Errorf("scsi1's text: %s", s1)
	}
	if s2 == "" || strings.Contains(s2, "backing") || strings.Count(out, "backing chain") != 2 {
		t.Errorf("scsi2 shows a chain: %q", s2)
	}
}
