package main

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
)

// thinCodes lists a pool's warning codes.
func thinCodes(ws []thinpool.Warning) []string {
	var out []string
	for _, w := range ws {
		out = append(out, string(w.Code))
	}
	return out
}

// fill writes n bytes of non-zero data at off into a volume's backing file.
func fill(t *testing.T, path string, off, n int64) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt([]byte(strings.Repeat("\x5a", int(n))), off); err != nil {
		t.Fatal(err)
	}
}

// TestThinReport: Lab 37's overcommit in miniature (four 64 MiB volumes on a
// 128 MiB pool), volumes matched to a VM, a container, an unused disk and a
// leftover, sorted by allocation, with a snapshot that counts toward
// overcommit; a pool past 90 % exits 1.
func TestThinReport(t *testing.T) {
	n := fakenode.NewT(t)
	n.UseDoubles(t)
	for i := 0; i < 4; i++ {
		n.MustVolume(t, "local-lvm", sf("vm-370-disk-%d", i), 64<<20)
	}
	n.MustVolume(t, "local-lvm", "vm-101-disk-0", 8<<20)
	n.MustVolume(t, "local-lvm", "vm-999-disk-0", 8<<20)
	if err := n.SetThinPool(fakenode.ThinPool{SizeBytes: 128 << 20, MetadataPercent: 12.5}); err != nil {
		t.Fatal(err)
	}
	if err := n.WriteConfig(370, `scsihw: virtio-scsi-single
scsi0: local-lvm:vm-370-disk-0,iothread=1,size=64M
scsi1: local-lvm:vm-370-disk-1,discard=on,size=64M
virtio1: local-lvm:vm-370-disk-2,size=64M
unused0: local-lvm:vm-370-disk-3
`); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(n.Paths.Join("/etc/pve/lxc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.Paths.Join("/etc/pve/lxc/101.conf"), []byte("arch: amd64\nrootfs: local-lvm:vm-101-disk-0,size=8M\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fill(t, n.ThinVolumeFile("vm-370-disk-0"), 0, 16<<20)
	fill(t, n.ThinVolumeFile("vm-370-disk-1"), 0, 4<<20)
	fill(t, n.ThinVolumeFile("vm-370-disk-2"), 0, 32<<20)
	fill(t, n.ThinVolumeFile("vm-101-disk-0"), 0, 1<<20)
	if err := n.SnapshotVolume("vm-370-disk-1", "snap_vm-370-disk-1_before"); err != nil {
		t.Fatal(err)
	}

	var out thinpool.Report
	errs, code := runJSON(t, n, &out, "thin")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if len(out.Pools) != 1 {
		t.Fatalf("%d pools", len(out.Pools))
	}
	p := out.Pools[0]
	if p.Storage != "local-lvm" || p.Pool != n.VG+"/data" || p.SizeBytes != 128<<20 || p.VirtualSumBytes != 4*64<<20+16<<20+64<<20 || p.SnapshotVirtualBytes != 64<<20 || p.OvercommitRatio != 2.625 {
		t.Errorf("pool %+v", p)
	}
	if *p.AllocatedBytes < 53<<20 || *p.AllocatedBytes > 54<<20 || *p.MetadataPercent != 12.5 || p.Discards != "passdown" {
		t.Errorf("pool use %d bytes, metadata %v", *p.AllocatedBytes, *p.MetadataPercent)
	}
	var order []string
	for _, v := range p.Volumes {
		order = append(order, sf("%s=%s/%d/%s/%s", v.Name, v.Guest, v.VMID, v.Disk, v.Discard))
	}
	want := []string{
		"vm-370-disk-2=vm/370/virtio1/ignore", "vm-370-disk-0=vm/370/scsi0/ignore", "vm-370-disk-1=vm/370/scsi1/on",
		"vm-101-disk-0=ct/101/rootfs/n/a", "vm-370-disk-3=vm/370/unused0/n/a", "vm-999-disk-0=unreferenced/999//n/a",
	}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("volumes\n got %v\nwant %v", order, want)
	}
	if s := p.Volumes[2].Snapshots; len(s) != 1 || s[0] != "snap_vm-370-disk-1_before" {
		t.Errorf("snapshots of vm-370-disk-1: %v", s)
	}
	if got := thinCodes(p.Warnings); !slices.Contains(got, "overcommit") || slices.Contains(got, "pool-data-full") {
		t.Errorf("warnings %v", got)
	}
	var offs []string
	for _, w := range p.Warnings {
		if w.Code == "discard-off" {
			offs = append(offs, w.Text)
		}
	}
	// scsi0 and virtio1 (64 MiB = 50 % of the pool) have discard off; scsi1 has it on.
	if len(offs) != 2 || !strings.Contains(offs[0], "VM 370 virtio1") || !strings.Contains(offs[1], "VM 370 scsi0") {
		t.Errorf("discard-off warnings: %q", offs)
	}

	// Fill the pool past 90 %: exit 1 and a warning.
	fill(t, n.ThinVolumeFile("vm-370-disk-3"), 0, 64<<20)
	errs, code = runJSON(t, n, &out, "thin", "local-lvm")
	if code != exitProblem || !slices.Contains(thinCodes(out.Pools[0].Warnings), "pool-data-full") {
		t.Errorf("full pool: exit %d (%s), %.2f %%, warnings %v", code, errs, *out.Pools[0].DataPercent, thinCodes(out.Pools[0].Warnings))
	}
	stdout, _, code := runCLI(t, "--root", n.Root, "thin")
	t.Logf("$ pvediskcheck thin\n%s[exit %d]", stdout, code)
	if !strings.Contains(stdout, "overcommit 2.62x") || !strings.Contains(stdout, "(64.0 MiB of them thin snapshots)") || !strings.Contains(stdout, "unreferenced (999?)") {
		t.Errorf("human output:\n%s", stdout)
	}

	// Bad input: unknown or non-thin storage (exit 2); lvs failing or hanging (exit 3).
	if _, errs, code := runCLI(t, "--root", n.Root, "thin", "local"); code != exitUsage || !strings.Contains(errs, "type dir") {
		t.Errorf("thin local: exit %d %s", code, errs)
	}
	if err := n.SetLVSFault("exit 5 Volume group \"" + n.VG + "\" not found"); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := runCLI(t, "--root", n.Root, "thin"); code != exitUnreachable || !strings.Contains(errs, "exited with status 5") {
		t.Errorf("lvs exit 5: exit %d %s", code, errs)
	}
	if err := n.SetLVSFault("sleep 20"); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := runCLI(t, "--root", n.Root, "--timeout", "500ms", "thin"); code != exitUnreachable || !strings.Contains(errs, "timed out after 500ms") {
		t.Errorf("lvs hangs: exit %d %s", code, errs)
	}
	n.SetLVSFault("")
}

// TestThinWhenFull: when the pool stops accepting writes and what happens
// to the VMs, from the lvs and lvmconfig doubles (real allocation of the
// volumes' files) and a real PV device that takes no discards: an "error"
// pool that autoextend grows into the VG, then one that cannot grow.
func TestThinWhenFull(t *testing.T) {
	n := fakenode.NewT(t)
	n.UseDoubles(t)
	n.MustVolume(t, "local-lvm", "vm-370-disk-0", 64<<20)
	if err := n.WriteConfig(370, "scsi0: local-lvm:vm-370-disk-0,discard=on,size=64M\n"); err != nil {
		t.Fatal(err)
	}
	pv, err := n.NewPV(true)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, n.ThinVolumeFile("vm-370-disk-0"), 0, 32<<20)
	pool := fakenode.ThinPool{SizeBytes: 128 << 20, MetadataPercent: 5, WhenFull: "error", VGFreeBytes: 256 << 20, PV: pv,
		AutoextendThreshold: 80, AutoextendPercent: 20}
	if err := n.SetThinPool(pool); err != nil {
		t.Fatal(err)
	}
	var out thinpool.Report
	if errs, code := runJSON(t, n, &out, "thin"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	f := out.Pools[0].Fill
	if f == nil || f.WhenFull != "error" || !f.Grows || f.VGFreeBytes != 256<<20 || f.Autoextend == nil || f.Autoextend.ThresholdPercent != 80 || f.FirstFull != "data" {
		t.Fatalf("fill %+v", f)
	}
	// 32 MiB of the file is allocated: 96 MiB left in the pool plus 256 MiB of VG.
	if a := *f.WritesStopAfterBytes; a != (128+256-32)<<20 {
		t.Errorf("writes stop after %d", a)
	}
	if len(f.PVs) != 1 || f.PVs[0].Device != pv || f.PVs[0].DiscardMaxBytes == nil || *f.PVs[0].DiscardMaxBytes != 0 {
		t.Errorf("PVs %+v", f.PVs)
	}
	if !slices.Contains(thinCodes(out.Pools[0].Warnings), "pool-discards-not-passed-down") {
		t.Errorf("warnings %v", thinCodes(out.Pools[0].Warnings))
	}
	// No VG space: it stops at 100 % data and the VMs pause.
	pool.VGFreeBytes = 0
	if err := n.SetThinPool(pool); err != nil {
		t.Fatal(err)
	}
	stdout, _, code := runCLI(t, "--root", n.Root, "thin")
	t.Logf("$ pvediskcheck thin\n%s[exit %d]", stdout, code)
	for _, w := range []string{"writes stop: after 96.0 MiB more data, at 100 % data; autoextend is set (at 80 % by 20 %) but VG " + n.VG + " has no free space",
		"then: writes to every volume on it fail at once with ENOSPC (lv_when_full error): QEMU pauses each VM that writes",
		"but " + pv + " below it takes no discards"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("human output lacks %q", w)
		}
	}
}
