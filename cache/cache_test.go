package cache

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/flush"
	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/storage"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

var modes = []string{"none", "writethrough", "writeback", "directsync", "unsafe"}

// recorded replays a recorded running VM (testdata/README.md) and builds
// its view.
func recorded(t *testing.T, name string) (View, *vm.VM) {
	t.Helper()
	_, v := vmtest.LoadFixture(t, "testdata/"+name+".json").Start(t)
	if err := v.FetchLive(context.Background(), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	return Build(disk.Of(v, v.Disks)), v
}

func byID(view View) map[string]Disk {
	m := map[string]Disk{}
	for _, d := range view.Disks {
		m[d.ID] = d
	}
	return m
}

func texts(ls []Line) string {
	var out []string
	for _, l := range ls {
		p := ""
		if l.Drift {
			p = "DRIFT "
		}
		out = append(out, p+l.Text)
	}
	return strings.Join(out, "\n")
}

// TestBuildRecordedBlockdev: every mode on VirtIO SCSI (loop devices, the
// local-lvm stand-in) and VirtIO Block (raw files), a qcow2 SATA disk whose
// config was changed after the start, CD-ROMs with and without a medium, an
// EFI vars disk and [PENDING] changes, as QEMU 7.2 ran them (-blockdev).
func TestBuildRecordedBlockdev(t *testing.T) {
	view, _ := recorded(t, "real-blockdev-modes")
	if !view.Running || !view.Blockdev || len(view.Notes) != 1 || view.Notes[0] != "ide0 is an empty CD-ROM drive (no medium: QEMU opens nothing): not listed, on purpose" {
		t.Errorf("running %v blockdev %v notes %q", view.Running, view.Blockdev, view.Notes)
	}
	disks := byID(view)
	var ids []string
	for _, d := range view.Disks {
		ids = append(ids, d.ID)
	}
	// The empty CD-ROM (ide0) is not listed; the disk only [PENDING] adds is.
	if strings.Join(ids, " ") != "ide2 sata1 scsi1 scsi2 scsi3 scsi4 scsi5 scsi7 virtio1 virtio2 virtio3 virtio4 virtio5 efidisk0" {
		t.Errorf("disks %v", ids)
	}
	for i, m := range modes {
		for _, id := range []string{"scsi", "virtio"} {
			id = id + string(rune('1'+i))
			d := disks[id]
			direct, noFlush, wc := qemuserver.CacheFlags(m)
			if d.Cache.Configured != m || d.Cache.ConfiguredDefault || *d.Cache.Effective != m || *d.Cache.Direct != direct || *d.Cache.NoFlush != noFlush || *d.Cache.WriteCache != wc {
				t.Errorf("%s: %+v, want %s", id, d.Cache, m)
			}
			if d.AckedDataIn != storage.PageCacheFacts[m][0] || d.CrashLoses != storage.PageCacheFacts[m][1] || d.Heading != m || d.Shown != m || d.Unmeasured != "" || len(d.Drift) != 0 {
				t.Errorf("%s: %q %q heading %q unmeasured %q drift %v", id, d.AckedDataIn, d.CrashLoses, d.Heading, d.Unmeasured, d.Drift)
			}
			if d.Kind != "disk" || d.Media != "disk" || d.Flush != nil {
				t.Errorf("%s: kind %s media %s", id, d.Kind, d.Media)
			}
		}
	}
	if disks["scsi1"].Backend != "block" || disks["virtio1"].Backend != "file" || disks["scsi1"].Controller != "virtio-scsi-single" || disks["virtio1"].Controller != "virtio-blk" || disks["virtio1"].AIO != "io_uring" {
		t.Errorf("scsi1 %+v virtio1 %+v", disks["scsi1"], disks["virtio1"])
	}
	// SeaBIOS set every VirtIO Block device up without flushes: the write
	// cache is off at runtime, and what that can mean is said, without
	// claiming a guest chose it (issue 14 #9).
	for i, m := range modes {
		d := disks["virtio"+string(rune('1'+i))]
		lines := texts(d.Lines)
		if *d.Cache.GuestWriteCache {
			t.Errorf("%s: guest write cache on", d.ID)
		}
		switch m {
		case "writethrough", "directsync": // configured off: nothing to explain
			if lines != "" {
				t.Errorf("%s: lines %q", d.ID, lines)
			}
		default:
			want := "the write cache is off at runtime (configured on): either no guest OS driver has negotiated it yet (firmware such as SeaBIOS leaves it off until the guest loads its own driver) or the guest turned it off; the node cannot tell which; either way QEMU completes each write only once it is flushed, so nothing acknowledged waits"
			if m == "unsafe" {
				want += "; but cache.no-flush drops those flushes, so writes still wait in node RAM"
			}
			if lines != want {
				t.Errorf("%s: lines %q", d.ID, lines)
			}
		}
	}
	// SCSI disks: the guest write cache is the configured one.
	if d := disks["scsi3"]; !*d.Cache.GuestWriteCache || len(d.Lines) != 0 {
		t.Errorf("scsi3: %+v %v", d.Cache, d.Lines)
	}
	// scsi1: [PENDING] changes its cache.
	if d := disks["scsi1"]; d.Cache.Pending == nil || *d.Cache.Pending != "writeback" || texts(d.Lines) != "pending: the next start runs writeback" || d.Heading != "none" {
		t.Errorf("scsi1: pending %v lines %q", d.Cache.Pending, texts(d.Lines))
	}
	// scsi7: only [PENDING] adds it (issue 15 #9: no empty heading).
	if d := disks["scsi7"]; d.Cache.Configured != "" || *d.Cache.Pending != "unsafe" || d.Cache.Effective != nil || d.Shown != "unsafe" || d.Heading != "unsafe, at the next start" ||
		d.Volume != "local-lvm:vm-380-disk-7" || d.Storage != "local-lvm" || d.Backend != "block" || d.Controller != "virtio-scsi-single" || d.CrashLoses != storage.PageCacheFacts["unsafe"][1] || len(d.Drift) != 0 {
		t.Errorf("scsi7: %+v", d)
	}
	// sata1: qcow2 with cache=none running, writeback in the config since.
	d := disks["sata1"]
	if d.Cache.Configured != "writeback" || *d.Cache.Effective != "none" || d.Heading != "none, qcow2" || d.Backend != "file" || !strings.Contains(d.AckedDataIn, "qcow2 metadata cache") || !strings.Contains(d.Unmeasured, "qcow2 metadata cache") {
		t.Errorf("sata1: %+v", d)
	}
	if l := texts(d.Lines); !strings.HasPrefix(l, "DRIFT cache_direct: config false, running true\n") || !strings.Contains(l, "\nconfig says writeback, VM still runs none: restart the VM to apply\nnot measurable from the node: QEMU's qcow2 metadata cache") {
		t.Errorf("sata1 lines:\n%s", l)
	}
	if d := disks["ide2"]; d.Media != "cdrom" || d.Kind != "cdrom" || d.Heading != "cd-rom" || d.CrashLoses != "nothing" || len(d.Drift) != 0 || d.Unmeasured != "" {
		t.Errorf("ide2: %+v", d)
	}
	// efidisk0 was added to the config after the start: not attached.
	if d := disks["efidisk0"]; d.Kind != "efivars" || d.Media != "disk" || d.Heading != "EFI vars (writeback)" || !strings.Contains(d.AckedDataIn, "OVMF's variable store") || strings.Join(d.Drift, "") != "disk is in the config but not attached to the running VM" {
		t.Errorf("efidisk0: %+v", d)
	}
	// What --verify measures: writes that can wait on this node.
	if got := strings.Join(ToVerify(view), " "); got != "sata1 scsi3 scsi5 virtio3 virtio5" {
		t.Errorf("to verify: %s", got)
	}
}

func TestBuildRecordedDrive(t *testing.T) {
	view, _ := recorded(t, "real-drive-modes")
	if view.Blockdev || len(view.Disks) != 5 {
		t.Fatalf("blockdev %v, %d disks", view.Blockdev, len(view.Disks))
	}
	for i, d := range view.Disks {
		m := modes[i]
		if *d.Cache.Effective != m || d.Cache.Configured != m || len(d.Drift) != 0 || d.Controller != "virtio-scsi-pci" || d.AckedDataIn != storage.PageCacheFacts[m][0] {
			t.Errorf("%s: effective %s configured %s drift %v controller %s", d.ID, *d.Cache.Effective, d.Cache.Configured, d.Drift, d.Controller)
		}
	}
}

// TestBuildRecordedVirtioHeld: a VirtIO Block disk no driver has touched.
// Its write cache is on at runtime, as configured: nothing to explain, so
// the negotiation is not asked for (no extra QMP command per disk).
func TestBuildRecordedVirtioHeld(t *testing.T) {
	view, _ := recorded(t, "real-virtio-held")
	d := view.Disks[0]
	if !*d.Cache.GuestWriteCache || len(d.Lines) != 0 || !d.Cache.ConfiguredDefault || *d.Cache.Effective != "none" {
		t.Errorf("%+v %v", d.Cache, d.Lines)
	}
}

// TestBuildStorages: a stopped VM with a disk on each storage type shows
// each storage's sentences under a heading that names it where it differs
// from the page cache table, and says what the node cannot measure.
func TestBuildStorages(t *testing.T) {
	conf := `scsihw: virtio-scsi-single
scsi0: local-lvm:vm-100-disk-0,size=8G
scsi1: thick:vm-100-disk-1,size=8G
scsi2: nas:100/vm-100-disk-2.qcow2,cache=writeback,size=8G
scsi3: smb:100/vm-100-disk-3.raw,size=8G
scsi4: bt:100/vm-100-disk-4.raw,size=8G
scsi5: local-zfs:vm-100-disk-5,size=8G
scsi6: ceph:vm-100-disk-6,cache=writeback,size=8G
scsi7: ceph:vm-100-disk-7,size=8G
scsi8: ceph-krbd:vm-100-disk-8,size=8G
scsi9: san:0.0.1.scsi-36001405aabbccdd
scsi10: san-direct:lun2
scsi11: zfs-over-iscsi:vm-100-disk-11,cache=unsafe,size=8G
scsi12: local-zfs:vm-100-disk-12,cache=writeback,size=8G
scsi13: drbd:vm-100-disk-13,size=8G

[PENDING]
scsi0: local-lvm:vm-100-disk-0,size=8G,discard=on
scsi1: thick:vm-100-disk-1,size=8G,cache=none
`
	n := vmtest.New(t, 100, conf, everyType(t), nil)
	// The hyperconverged cluster's ceph.conf names krbd devices (its fsid).
	n.Write(t, filepath.Join(n.Root, "etc/pve/ceph.conf"), "[global]\n\tfsid = 2c6a1e6a-4bd5-4c1f-a9e8-3e0e8f54c1aa\n")
	v := n.Load(t)
	view := Build(disk.Of(v, v.Disks))
	// The plugin storage's volume cannot be placed without the node's
	// pvesm: said, and the disk is still listed as not modelled.
	if view.Running || len(view.Notes) != 2 || view.Notes[0] != "VM 100 is not running: showing the configured values" ||
		!strings.HasPrefix(view.Notes[1], "scsi13: drbd:vm-100-disk-13: storage drbd is of type linstor") {
		t.Errorf("running %v notes %q", view.Running, view.Notes)
	}
	for _, c := range []struct {
		id, backend, heading, acked, unmeasured string
	}{
		{"scsi0", "block", "none", storage.PageCacheFacts["none"][0], ""},
		{"scsi1", "block", "none", storage.PageCacheFacts["none"][0], ""},
		{"scsi2", "file", "writeback, qcow2", "qcow2 metadata cache", "qcow2"},
		{"scsi3", "file", "none", storage.PageCacheFacts["none"][0], ""},
		// btrfs without nocow: Proxmox's default is not O_DIRECT.
		{"scsi4", "file", "writeback", storage.PageCacheFacts["writeback"][0], ""},
		{"scsi5", "zvol", "none, ZFS zvol", "ZFS's open transaction group", "ZFS's open transaction group"},
		{"scsi6", "librbd", "writeback, Ceph through librbd", "librbd's cache in the QEMU process", "librbd's cache lives in the QEMU process"},
		{"scsi7", "librbd", "none, Ceph through librbd", "rbd_cache=false", ""},
		{"scsi8", "krbd", "none, Ceph through krbd", "krbd sends O_DIRECT writes straight to the OSDs", ""},
		{"scsi9", "block", "none", storage.PageCacheFacts["none"][0], ""},
		{"scsi10", "libiscsi", "none, iSCSI through libiscsi", "iSCSI target's write cache", "another machine"},
		{"scsi11", "libiscsi", "unsafe, iSCSI through libiscsi", "never reach it", "another machine"},
		{"scsi12", "zvol", "writeback, ZFS zvol", "the zvol's page cache", "transaction group"},
		// A third-party plugin: said to be not modelled.
		{"scsi13", "unknown", "none, storage type linstor, not modelled", "(the storage below QEMU is not modelled", ""},
	} {
		var d *Disk
		for i := range view.Disks {
			if view.Disks[i].ID == c.id {
				d = &view.Disks[i]
			}
		}
		if d == nil {
			t.Errorf("%s missing", c.id)
			continue
		}
		if d.Backend != c.backend || d.Heading != c.heading || !strings.Contains(d.AckedDataIn, c.acked) || (c.unmeasured == "") != (d.Unmeasured == "") || !strings.Contains(d.Unmeasured, c.unmeasured) {
			t.Errorf("%s: backend %s heading %q acked %q unmeasured %q", c.id, d.Backend, d.Heading, d.AckedDataIn, d.Unmeasured)
		}
		if d.Cache.Effective != nil || d.Cache.Direct != nil || len(d.Drift) != 0 {
			t.Errorf("%s: stopped VM with live values %+v", c.id, d.Cache)
		}
		if c.unmeasured != "" && !strings.HasSuffix(texts(d.Lines), d.Unmeasured) {
			t.Errorf("%s: lines %q", c.id, texts(d.Lines))
		}
	}
	if ids := ToVerify(view); len(ids) != 0 {
		t.Errorf("a stopped VM has nothing to verify: %v", ids)
	}
	// [PENDING] that leaves the mode alone shows no pending mode; an
	// explicit cache=none over the default does.
	for _, d := range view.Disks {
		switch d.ID {
		case "scsi0":
			if d.Cache.Pending != nil {
				t.Errorf("scsi0: pending %s for a discard change", *d.Cache.Pending)
			}
		case "scsi1":
			if d.Cache.Pending == nil || *d.Cache.Pending != "none" {
				t.Errorf("scsi1: pending %v", d.Cache.Pending)
			}
		}
	}
}

// TestBuildKinds: every drive kind, from config lines (TPM state is built
// here by hand: vm does not list it yet).
func TestBuildKinds(t *testing.T) {
	conf := "ide2: local:iso/x.iso,media=cdrom\nide0: none,media=cdrom\nide1: cdrom,media=cdrom\nefidisk0: local-lvm:vm-100-disk-1,efitype=4m,size=4M\nscsi0: local-lvm:vm-100-disk-0\n"
	n := vmtest.New(t, 100, conf, everyType(t), nil)
	v := n.Load(t)
	tpm, err := qemuserver.ParseDrive("tpmstate0", "local-lvm:vm-100-disk-2,size=4M,version=v2.0")
	if err != nil {
		t.Fatal(err)
	}
	disks := append(v.Disks, &vm.Disk{ID: "tpmstate0", Drive: tpm})
	got := map[string]string{}
	for _, d := range Build(disk.Of(v, disks)).Disks {
		got[d.ID] = d.Kind + "|" + d.Media + "|" + d.Heading + "|" + d.CrashLoses
	}
	want := map[string]string{
		"ide2":      "cdrom|cdrom|cd-rom|nothing",
		"ide1":      "cdrom|cdrom|cd-rom|nothing",
		"efidisk0":  "efivars|disk|EFI vars (writeback)|at most a firmware variable change (boot order, Secure Boot keys) not yet written to storage",
		"scsi0":     "disk|disk|none|" + storage.PageCacheFacts["none"][1],
		"tpmstate0": "tpmstate|disk|TPM state|nothing QEMU holds",
	}
	if len(got) != len(want) {
		t.Errorf("disks %v", got)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("%s: %q, want %q", id, got[id], w)
		}
	}
}

// TestBuildISOWithoutMedia: an ISO volume without media= is a VM that
// does not start (pve-cfg2cmd: "sata0: explicit media parameter is
// required for iso images"): said, in the config and in [PENDING]; with
// media= set, either way, nothing is said.
func TestBuildISOWithoutMedia(t *testing.T) {
	for _, c := range []struct{ conf, note string }{
		{"sata0: local:iso/OpenCore.iso,size=100M\n", `sata0: local:iso/OpenCore.iso is an ISO image without media=: the VM does not start; qemu-server says "sata0: explicit media parameter is required for iso images"`},
		{"sata0: local:iso/OpenCore.iso,media=disk\n[PENDING]\nsata0: local:iso/OpenCore.iso\n", `sata0: local:iso/OpenCore.iso is an ISO image without media=: the VM does not start`},
		{"sata0: local:iso/OpenCore.iso,media=disk,size=100M\n", ""},
		{"ide2: local:iso/debian.iso,media=cdrom\n", ""},
	} {
		n := vmtest.New(t, 100, c.conf, everyType(t), nil)
		v := n.Load(t)
		view := Build(disk.Of(v, v.Disks))
		var iso []string
		for _, note := range view.Notes {
			if strings.Contains(note, "ISO image") {
				iso = append(iso, note)
			}
		}
		if c.note == "" && len(iso) != 0 || c.note != "" && (len(iso) != 1 || !strings.HasPrefix(iso[0], c.note)) {
			t.Errorf("%q: notes %q, want %q", c.conf, iso, c.note)
		}
	}
}

// TestBuildRunningOnlyAndLiveError: a disk the running QEMU has but the
// config lost, and a QMP that did not answer.
func TestBuildRunningOnlyAndLiveError(t *testing.T) {
	f := vmtest.LoadFixture(t, "testdata/real-drive-modes.json")
	// efidisk0: the legacy generation attaches EFI vars as pflash, not a
	// disk: not "in the config but not attached".
	f.Conf = "scsihw: virtio-scsi-pci\nscsi1: local-lvm:vm-380-disk-1,cache=none,size=64M\nefidisk0: local-lvm:vm-380-disk-9,size=4M\n"
	_, v := f.Start(t)
	set := disk.Of(v, v.Disks)
	set.AskErr = fmt.Errorf("%w: /var/run/qemu-server/380.qmp sent no greeting within 5s", qmp.ErrBusy)
	view := Build(set)
	if len(view.Notes) != 1 || view.Notes[0] != "QMP socket busy (another client, e.g. pvestatd, holds it): /var/run/qemu-server/380.qmp sent no greeting within 5s; effective modes are taken from the command line" {
		t.Errorf("notes %v", view.Notes)
	}
	d := byID(view)["scsi3"]
	if strings.Join(d.Drift, "") != "disk is attached to the running VM but not in the config" || *d.Cache.Effective != "writeback" || d.Cache.Configured != "" || d.Backend != "block" || d.Cache.GuestWriteCache != nil {
		t.Errorf("scsi3: %+v", d)
	}
	if d.Heading != "writeback" || d.AckedDataIn != storage.PageCacheFacts["writeback"][0] {
		t.Errorf("scsi3 heading %q", d.Heading)
	}
	if d := byID(view)["efidisk0"]; d.Kind != "efivars" || len(d.Drift) != 0 {
		t.Errorf("efidisk0 under -drive: %+v", d)
	}
}

// TestRuntimeWriteCache: every way the runtime write cache can differ from
// the configured one, and what it means for flushes.
func TestRuntimeWriteCache(t *testing.T) {
	on, off := "on", "off"
	tr, fa := true, false
	for _, c := range []struct {
		name      string
		wc        *string
		guest     *bool
		noFlush   *bool
		virtioBlk bool
		want      string // "" means no line
	}{
		{"same", &on, &tr, &fa, true, ""},
		{"no live data", &on, nil, &fa, false, ""},
		{"configured off, turned on", &off, &tr, &fa, true, "the guest has turned the write cache on at runtime (configured off)"},
		{"SCSI: the guest turned it off", &on, &fa, &fa, false, "the guest has turned the write cache off at runtime (configured on): QEMU completes each write only once it is flushed"},
		{"VirtIO Block: firmware or the guest", &on, &fa, &fa, true, "the write cache is off at runtime (configured on): either no guest OS driver has negotiated it yet (firmware such as SeaBIOS leaves it off until the guest loads its own driver) or the guest turned it off; the node cannot tell which; either way QEMU completes each write only once it is flushed, so nothing acknowledged waits"},
		{"unsafe: the flushes are dropped", &on, &fa, &tr, false, "the guest has turned the write cache off at runtime (configured on): QEMU completes each write only once it is flushed; but cache.no-flush drops those flushes, so writes still wait in node RAM"},
	} {
		d := Disk{Cache: Modes{WriteCache: c.wc, GuestWriteCache: c.guest, NoFlush: c.noFlush}}
		if c.virtioBlk {
			d.Controller = "virtio-blk"
		}
		if got := texts(lines(d)); got != c.want {
			t.Errorf("%s: %q\nwant %q", c.name, got, c.want)
		}
	}
}

func TestAttachAndIgnored(t *testing.T) {
	view := View{Disks: []Disk{{ID: "scsi1"}, {ID: "scsi2"}}}
	view.Attach(&flush.Result{Verdicts: []flush.Judgement{{Disk: "scsi2", Verdict: flush.Honored}}})
	if view.Disks[0].Flush != nil || view.Disks[1].Flush == nil || view.Disks[1].Flush.Verdict != flush.Honored || view.Ignored() {
		t.Errorf("%+v", view.Disks)
	}
	view.Attach(&flush.Result{Verdicts: []flush.Judgement{{Disk: "scsi1", Verdict: flush.Ignored}}})
	if !view.Ignored() || view.Disks[1].Flush == nil {
		t.Errorf("%+v", view.Disks)
	}
}

// everyType is storage.cfg with every storage type Proxmox has, and a
// third-party plugin (the storage package's fixture).
func everyType(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../storage/testdata/every-type.cfg")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
