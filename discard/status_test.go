package discard

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/vm"

	"github.com/pvediskcheck/pvediskcheck/internal/corpus"
)

const testStorageCfg = `dir: local
	path /var/lib/vz
	content iso,vztmpl,backup,images

lvmthin: local-lvm
	thinpool data
	vgname pve
	content rootdir,images

lvm: thick
	vgname big
	content images

zfspool: local-zfs
	pool rpool/data
	content images,rootdir

zfspool: zfs-sparse
	pool tank/vms
	sparse 1
	content images

rbd: ceph
	pool vms
	content images
`

// stoppedVM loads a VM from config text on a node tree without QEMU.
func stoppedVM(t testing.TB, conf, storageCfg string) *vm.VM {
	t.Helper()
	root := t.TempDir()
	p := node.NewPaths(root, filepath.Join(root, "proc"), "")
	if err := os.MkdirAll(p.QemuServerDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.VMConfig(100), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.StorageCfg(), []byte(storageCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := vm.Load(context.Background(), node.New(p, 0), 100)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// warningsOf is every target's warnings by disk id, with allocation a.
func warningsOf(v *vm.VM, a map[string]alloc.Result) map[string][]Reason {
	out := map[string][]Reason{}
	for _, t := range Targets(v, v.Disks) {
		j := t.View
		j.Allocation = a[t.Disk.ID]
		out[t.Disk.ID] = Warnings(v.VMID, v.Running, t, j)
	}
	return out
}

// TestWarnings: the standing problems of each storage and drive kind, as
// the exact set per disk; disks that are not guest block devices are not
// looked at at all.
func TestWarnings(t *testing.T) {
	v := stoppedVM(t, `scsihw: virtio-scsi-single
bios: ovmf
efidisk0: local-lvm:vm-100-disk-9,efitype=4m,size=4M
tpmstate0: local-lvm:vm-100-disk-8,size=4M,version=v2.0
ide2: local:iso/debian.iso,media=cdrom
ide3: none,media=cdrom
scsi0: local-lvm:vm-100-disk-0,iothread=1,size=32G
scsi1: local-lvm:vm-100-disk-1,discard=on,size=32G
scsi2: local-lvm:vm-100-disk-2,discard=on,ssd=1,size=32G
scsi3: local-lvm:vm-100-disk-3,ro=1,size=32G
scsi4: local-zfs:vm-100-disk-4,discard=on,ssd=1,size=32G
scsi5: local-zfs:vm-100-disk-5,size=32G
scsi6: zfs-sparse:vm-100-disk-6,size=32G
scsi7: thick:vm-100-disk-7,size=32G
scsi8: local:100/vm-100-disk-8.qcow2,discard=on,ssd=1,size=32G
scsi9: local:100/vm-100-disk-9.raw,size=32G
scsi10: ceph:vm-100-disk-10,discard=on,ssd=0,size=32G
virtio0: local-lvm:vm-100-disk-11,discard=on,size=32G
virtio1: local-lvm:vm-100-disk-12,size=32G
sata0: local-lvm:vm-100-disk-13,discard=on,ssd=1,size=32G
`, testStorageCfg)
	held := int64(1 << 20)
	w := warningsOf(v, map[string]alloc.Result{
		"scsi2": {Pool: &alloc.Pool{Name: "pve/data", Discards: "ignore"}, Snapshots: []string{"before"}},
		"scsi6": {SnapshotBytes: &held},
		"sata0": {SnapshotBytes: new(int64)},
	})
	want := map[string][]Code{
		"scsi0":   {CodeDiscardIgnore},
		"scsi1":   {CodeSSDOff},
		"scsi2":   {CodePoolIgnoresDiscards, CodeSnapshots},
		"scsi3":   {}, // ro=1: the guest cannot trim it
		"scsi4":   {CodeZvolRefreservation},
		"scsi5":   {CodeZvolRefreservation}, // not thin: discard=ignore costs nothing until the reservation goes
		"scsi6":   {CodeDiscardIgnore, CodeSnapshots},
		"scsi7":   {}, // thick LVM
		"scsi8":   {},
		"scsi9":   {}, // a raw file that is not sparse (absent here)
		"scsi10":  {CodeSSDOff},
		"virtio0": {CodeVirtioBlkDiscard},
		"virtio1": {CodeDiscardIgnore},
		"sata0":   {},
	}
	if len(w) != len(want) {
		ids := []string{}
		for id := range w {
			ids = append(ids, id)
		}
		slices.Sort(ids)
		t.Errorf("targets %v, want the %d guest disks (no efidisk0, tpmstate0, CD-ROM)", ids, len(want))
	}
	for id, codes := range want {
		if got := codesOf(w[id]); !slices.Equal(got, codes) {
			t.Errorf("%s: %v, want %v", id, got, codes)
		}
	}
	for id, rs := range w {
		for _, r := range rs {
			checkFix(t, id, r)
		}
	}
	// The fixes keep the disk's other options and add what is missing once.
	if f := w["scsi0"][0].Fix; f != "qm set 100 --scsi0 local-lvm:vm-100-disk-0,iothread=1,size=32G,discard=on" {
		t.Errorf("scsi0 fix %q (a stopped VM needs no reboot)", f)
	}
	if f := w["scsi10"][0].Fix; f != "qm set 100 --scsi10 ceph:vm-100-disk-10,discard=on,ssd=1,size=32G" {
		t.Errorf("scsi10 fix %q", f)
	}
	z := w["scsi4"][0]
	if !strings.Contains(z.Fix, "zfs set refreservation=none rpool/data/vm-100-disk-4") || !strings.Contains(z.Fix, "pvesm set local-zfs --sparse 1") ||
		!strings.Contains(z.Text, "storage local-zfs is a zfspool without sparse") {
		t.Errorf("refreservation: %+v", z)
	}
	if r := w["scsi6"][1]; !strings.Contains(r.Text, "snapshots holding 1.0 MiB (zfs usedbysnapshots)") {
		t.Errorf("zfs snapshots: %s", r.Text)
	}
	if r := w["scsi2"][1]; !strings.HasPrefix(r.Text, "snapshot(s) before reference") {
		t.Errorf("lvm snapshots: %s", r.Text)
	}
}

// TestTargetsViews: what each view of a stopped VM says.
func TestTargetsViews(t *testing.T) {
	v := stoppedVM(t, `scsihw: virtio-scsi-pci
scsi0: local-lvm:vm-100-disk-0,discard=on,ssd=1,size=8G
sata1: local-lvm:vm-100-disk-1,size=8G
virtio2: local-lvm:vm-100-disk-2,discard=on,size=8G
ide0: local-lvm:vm-100-disk-3,size=8G

[PENDING]
scsi0: local-lvm:vm-100-disk-0,discard=on,ssd=1,size=8G
sata1: local-lvm:vm-100-disk-1,discard=on,size=8G
virtio2: local-lvm:vm-100-disk-2,size=8G
ide0: local-lvm:vm-100-disk-3,size=8G
`, testStorageCfg)
	ts := Targets(v, v.Disks)
	got := map[string]Disk{}
	for _, t := range ts {
		got[t.Disk.ID] = t.View
	}
	s0, a1, v2, i0 := got["scsi0"], got["sata1"], got["virtio2"], got["ide0"]
	if s0.Controller != "virtio-scsi-pci" || s0.StorageType != "lvmthin" || !s0.Thin || s0.Discard.Configured != "on" || s0.Discard.Pending != nil || s0.Discard.Running != nil || !s0.SSD.Configured || s0.SSD.Running != nil || s0.ControllerDiscard != "yes" {
		t.Errorf("scsi0 %+v", s0)
	}
	if a1.Discard.Configured != "ignore" || a1.Discard.Pending == nil || *a1.Discard.Pending != "on" || a1.ControllerDiscard != "yes" || a1.Volume != "local-lvm:vm-100-disk-1" || a1.Storage != "local-lvm" {
		t.Errorf("sata1 %+v", a1)
	}
	if v2.Discard.Pending == nil || *v2.Discard.Pending != "ignore" || v2.ControllerDiscard != "guest kernel 5.0 or newer" || v2.Discard.Effective() != "on" {
		t.Errorf("virtio2 %+v", v2)
	}
	if i0.ControllerDiscard != "yes" || len(ts) != 4 {
		t.Errorf("ide0 %+v, %d targets", i0, len(ts))
	}
	// A pending discard=on is what the next start brings: one warning,
	// not a second qm set for the same change.
	w := warningsOf(v, nil)
	if codes := codesOf(w["sata1"]); !slices.Equal(codes, []Code{CodeDiscardPending}) {
		t.Errorf("sata1 pending: %v", codes)
	}
	if controllerDiscard("efidisk") != "no" {
		t.Error("efidisk passes discards?")
	}
}

func TestAgentEnabled(t *testing.T) {
	for conf, want := range map[string]bool{
		"agent: 1\n": true,
		"agent: enabled=1,fstrim_cloned_disks=1\n": true,
		"agent: 1,type=virtio\n":                   true,
		"agent: 0\n":                               false,
		"agent: enabled=0\n":                       false,
		"agent: yes\n":                             true,
		"ostype: l26\n":                            false,
	} {
		v := stoppedVM(t, conf, testStorageCfg)
		if got := guestdisk.AgentEnabled(v.Config.Main["agent"]); got != want {
			t.Errorf("%q: %v", conf, got)
		}
	}
}

var qmSetRe = regexp.MustCompile(`^qm set (\d+) --(\S+) (\S+?)(?:, then .*)?$`)

// checkFix: a fix that is a qm set is one Proxmox's parser accepts for the
// drive's kind (a key the kind lacks, or a duplicate key, is refused).
func checkFix(t *testing.T, id string, r Reason) {
	t.Helper()
	if !strings.HasPrefix(r.Fix, "qm set") {
		return
	}
	m := qmSetRe.FindStringSubmatch(r.Fix)
	if m == nil || m[2] != id {
		t.Errorf("%s %s: fix %q is not one qm set of this disk", id, r.Code, r.Fix)
		return
	}
	d, err := qemuserver.ParseDrive(m[2], m[3])
	if err != nil {
		t.Errorf("%s %s: Proxmox refuses the fix %q: %v", id, r.Code, r.Fix, err)
		return
	}
	if d.Kind() != qemuserver.KindDisk {
		t.Errorf("%s %s: fix for a %s", id, r.Code, d.Kind())
	}
	if strings.Count(m[3], "discard=") > 1 || strings.Count(m[3], "ssd=") > 1 {
		t.Errorf("%s: duplicate key in %q", id, m[3])
	}
}

// TestWarningsRealWorld: on every real VM config (../shared/real-world and
// Proxmox's own cfg2cmd cases), every disk is looked at or left out on
// purpose, and every fix printed is a line Proxmox accepts for that drive
// kind: never discard=on for an efidisk, never a key twice.
func TestWarningsRealWorld(t *testing.T) {
	rw := corpus.Dir(t, corpus.RealWorld)
	spongey, err := os.ReadFile(filepath.Join(rw, "storage", "spongey.storage.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	confs, _ := filepath.Glob(filepath.Join(rw, "configs", "*.conf"))
	if len(confs) < 30 {
		t.Fatalf("only %d configs in %s", len(confs), rw)
	}
	cfg2cmd := corpus.Find(corpus.CFG2CMD)
	proxmoxSt, err := os.ReadFile(filepath.Join(cfg2cmd, "storage.cfg"))
	if err == nil {
		more, _ := filepath.Glob(filepath.Join(cfg2cmd, "*.conf"))
		confs = append(confs, more...)
	}
	fixes, targets := 0, 0
	for _, p := range confs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		st := string(spongey)
		switch {
		case filepath.Dir(p) == cfg2cmd:
			st = string(proxmoxSt)
		case !strings.Contains(filepath.Base(p), "spongey"):
			// The other configs came without a storage.cfg: every storage
			// they name is taken as LVM-thin, where discard matters most.
			st = testStorageCfg
			for _, id := range regexp.MustCompile(`(?m)^\w+\d+: ([\w-]+):`).FindAllStringSubmatch(string(b), -1) {
				if !strings.Contains(st, ": "+id[1]+"\n") {
					st += "\nlvmthin: " + id[1] + "\n\tthinpool data\n\tvgname pve\n\tcontent images\n"
				}
			}
		}
		v := stoppedVM(t, string(b), st)
		ts := Targets(v, v.Disks)
		for _, tg := range ts {
			targets++
			if k := tg.Disk.Kind(); k != qemuserver.KindDisk || tg.Drive.IsNone() {
				t.Errorf("%s %s: a %s is a target", filepath.Base(p), tg.Disk.ID, k)
			}
			for _, r := range Warnings(v.VMID, false, tg, tg.View) {
				if strings.HasPrefix(r.Fix, "qm set") {
					fixes++
				}
				checkFix(t, tg.Disk.ID, r)
			}
		}
		for _, d := range v.Disks {
			if d.Kind() == qemuserver.KindDisk && d.Drive != nil && !d.Drive.IsNone() && !slices.ContainsFunc(ts, func(t *Target) bool { return t.Disk == d }) {
				t.Errorf("%s %s: a disk left out", filepath.Base(p), d.ID)
			}
		}
	}
	t.Logf("%d configs, %d disks looked at, %d qm set fixes checked", len(confs), targets, fixes)
	if fixes == 0 {
		t.Error("no fix was checked")
	}
}
