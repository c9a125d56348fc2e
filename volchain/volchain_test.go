package volchain

import (
	"slices"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
)

// conf is a VM config as qemu-server writes it after `qm snapshot 100 s1`
// and `qm snapshot 100 s2` on a volume-chain storage, with a disk added
// after s1 (scsi1: not in s1) and [PENDING] and cloud-init sections that
// are no snapshots.
const conf = `boot: order=scsi0
parent: s2
scsi0: chain:vm-100-disk-0.qcow2,size=4G
scsi1: chain:vm-100-disk-1.qcow2,size=1G

[PENDING]
scsi0: chain:vm-100-disk-0.qcow2,size=8G

[s1]
scsi0: chain:vm-100-disk-0.qcow2,size=4G
snaptime: 1795985763

[s2]
parent: s1
scsi0: chain:vm-100-disk-0.qcow2,size=4G
scsi1: chain:vm-100-disk-1.qcow2,size=1G
snaptime: 1795985863

[special:cloudinit]
ipconfig0: ip=dhcp
`

func TestExpected(t *testing.T) {
	snaps := qemuserver.ParseSnapshots([]byte(conf))
	if len(snaps) != 2 || snaps["s2"]["parent"] != "s1" {
		t.Fatalf("%v", snaps)
	}
	if l := snaps.Lineage("s2"); !slices.Equal(l, []string{"s2", "s1"}) {
		t.Errorf("lineage %v", l)
	}
	if l := snaps.Lineage("gone"); len(l) != 0 {
		t.Errorf("lineage of a missing snapshot %v", l)
	}
	loop := qemuserver.Snapshots{"a": {"parent": "b"}, "b": {"parent": "a"}}
	if l := loop.Lineage("a"); !slices.Equal(l, []string{"a", "b"}) {
		t.Errorf("a cycle: %v", l)
	}
	if e := Expected(snaps, "s2", "scsi0", "chain:vm-100-disk-0.qcow2"); !slices.Equal(e, []string{"vm-100-disk-0.qcow2", "snap_vm-100-disk-0_s2.qcow2", "snap_vm-100-disk-0_s1.qcow2"}) {
		t.Errorf("scsi0: %v", e)
	}
	if e := Expected(snaps, "s2", "scsi1", "chain:vm-100-disk-1.qcow2"); !slices.Equal(e, []string{"vm-100-disk-1.qcow2", "snap_vm-100-disk-1_s2.qcow2"}) {
		t.Errorf("scsi1 (added after s1): %v", e)
	}
	// A disk that was another volume in a snapshot: not this chain's layer.
	other := qemuserver.ParseSnapshots([]byte("[s1]\nscsi0: chain:vm-100-disk-5.qcow2,size=4G\n"))
	if e := Expected(other, "s1", "scsi0", "chain:vm-100-disk-0.qcow2"); len(e) != 1 {
		t.Errorf("other volume: %v", e)
	}
	if LayerName("vm-100-disk-0.qcow2", "before-upgrade") != "snap_vm-100-disk-0_before-upgrade.qcow2" ||
		snapOf("vm-100-disk-0.qcow2", "snap_vm-100-disk-0_before-upgrade.qcow2") != "before-upgrade" ||
		snapOf("vm-100-disk-0.qcow2", "vm-100-disk-0.qcow2") != "" || snapOf("vm-100-disk-0.qcow2", "snap_vm-100-disk-1_x.qcow2") != "" {
		t.Error("layer names")
	}
	s := &qemuserver.Storage{ID: "chain", Type: "lvm", Props: map[string]string{"vgname": "vg", "snapshot-as-volume-chain": "1"}}
	plain := &qemuserver.Storage{ID: "lvm", Type: "lvm", Props: map[string]string{"vgname": "vg"}}
	if !IsChained(s, "vm-100-disk-0.qcow2") || IsChained(s, "vm-100-disk-0") || IsChained(plain, "vm-100-disk-0.qcow2") || IsChained(nil, "x.qcow2") {
		t.Error("IsChained")
	}
}

func TestCompare(t *testing.T) {
	const v = "vm-100-disk-0.qcow2"
	cur, s1, s2 := v, LayerName(v, "s1"), LayerName(v, "s2")
	for _, c := range []struct {
		name         string
		live, config []string
		want         []string
	}{
		{"agree", []string{cur, s2, s1}, []string{cur, s2, s1}, nil},
		{"no snapshots", []string{cur}, []string{cur}, nil},
		{"snapshot deleted from the config, layer still in QEMU", []string{cur, s2, s1}, []string{cur, s2},
			[]string{"QEMU's chain has snap_vm-100-disk-0_s1.qcow2, the layer of snapshot s1, which the config's snapshots do not name"}},
		{"snapshot in the config, not in QEMU", []string{cur, s1}, []string{cur, s2, s1},
			[]string{"the config's snapshot s2 has its layer snap_vm-100-disk-0_s2.qcow2 outside QEMU's chain"}},
		{"a foreign image", []string{cur, "base.qcow2"}, []string{cur}, []string{"QEMU's chain has base.qcow2, which is no layer of this volume"}},
		{"order", []string{cur, s1, s2}, []string{cur, s2, s1}, []string{"QEMU's chain runs vm-100-disk-0.qcow2 <- snap_vm-100-disk-0_s1.qcow2 <- snap_vm-100-disk-0_s2.qcow2, the config's snapshots vm-100-disk-0.qcow2 <- snap_vm-100-disk-0_s2.qcow2 <- snap_vm-100-disk-0_s1.qcow2"}},
	} {
		got := Compare(v, c.live, c.config)
		if len(got) != len(c.want) || (len(got) > 0 && !slices.Equal(got, c.want)) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestLevel(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	f := func(v float64) *float64 { return &v }
	for _, c := range []struct {
		top  Layer
		want thinpool.Level
	}{
		{Layer{CanFill: false, UsedPercent: f(99.9)}, thinpool.LevelOK}, // preallocated: cannot grow
		{Layer{CanFill: true, UsedPercent: f(89.99)}, thinpool.LevelWarning},
		{Layer{CanFill: true, UsedPercent: f(90)}, thinpool.LevelFailure},
		{Layer{CanFill: true}, thinpool.LevelWarning},
	} {
		ch := Chain{Live: []Layer{c.top}}
		if got := ch.Level(); got != c.want {
			t.Errorf("%+v: %s, want %s", c.top, got, c.want)
		}
	}
	if (&Chain{}).Level() != thinpool.LevelOK {
		t.Error("not running")
	}
	ch := Chain{Depth: 2, Live: []Layer{{LV: "vm-100-disk-0.qcow2", LVSizeBytes: i(8 << 20), Qcow2EndBytes: i(2 << 20), UsedPercent: f(25)}, {LV: "snap_vm-100-disk-0_s1.qcow2", Error: "no sysfs"}}}
	if d := ch.Describe(); d != "volume chain, 2 layers in QEMU: vm-100-disk-0.qcow2 (qcow2 2.0 MiB of LV 8.0 MiB, 25.0 %) <- snap_vm-100-disk-0_s1.qcow2 (use unknown: no sysfs)" {
		t.Errorf("%q", d)
	}
	stopped := Chain{Config: []string{"a", "b"}}
	if d := stopped.Describe(); !strings.Contains(d, "VM not running): 2 layers: a <- b") {
		t.Errorf("%q", d)
	}
}

// A chain's lines: the heading, then per layer its format, file, protocol
// and node; a volume chain's layer with its snapshot (or "current layer")
// and its LV's use, or why that is unknown; no LV part elsewhere.
func TestBackingLines(t *testing.T) {
	i := func(v int64) *int64 { return &v }
	f := func(v float64) *float64 { return &v }
	b := Backing{Depth: 3, Layers: []BackingLayer{
		{Node: "fa", File: "/dev/vg/vm-100-disk-0.qcow2", Format: "qcow2", Protocol: "host_device", LV: &Layer{LV: "vm-100-disk-0.qcow2", LVSizeBytes: i(8 << 20), Qcow2EndBytes: i(2 << 20), UsedPercent: f(25)}},
		{Node: "#block1", File: "/dev/vg/snap_vm-100-disk-0_s1.qcow2", Format: "qcow2", Protocol: "host_device", LV: &Layer{Snapshot: "s1", Error: "no sysfs"}},
		{Node: "#block2", File: "/var/lib/vz/images/900/base-900-disk-0.qcow2", Format: "qcow2", Protocol: "file"},
	}}
	want := []string{
		"backing chain, 3 layers, top to base:",
		"  1. qcow2 /dev/vg/vm-100-disk-0.qcow2 on host_device (node fa), current layer: qcow2 reaches 2.0 MiB of its LV's 8.0 MiB (25.0 %)",
		"  2. qcow2 /dev/vg/snap_vm-100-disk-0_s1.qcow2 on host_device (node #block1), snapshot s1: LV use unknown: no sysfs",
		"  3. qcow2 /var/lib/vz/images/900/base-900-disk-0.qcow2 on file (node #block2)",
	}
	if got := b.Lines(); !slices.Equal(got, want) {
		t.Errorf("%q\nwant %q", got, want)
	}
}
