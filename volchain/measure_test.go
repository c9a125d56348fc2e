package volchain

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/internal/fakerun"
	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

const (
	cur  = "vm-101-disk-0.qcow2"
	base = "snap_vm-101-disk-0_s1.qcow2"
	// mib16 is TestCheckVolumeChainFills' LV of the current layer; base's
	// LV is qemu-img measure's fully-allocated figure for 64 MiB rounded up
	// to 4 MiB extents (68 MiB), as LVMPlugin sizes it.
	mib16, mib68 = 16 << 20, 68 << 20
)

// chainStorages: the volume-chain lvm storage and an lvm-thin one.
const chainStorages = "lvm: chain\n\tvgname vgchain\n\tcontent images\n\tsaferemove 0\n\tshared 0\n\tsnapshot-as-volume-chain 1\n\nlvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n"

// chainConf: after one `qm snapshot 101 s1`; scsi1 on lvm-thin is no chain.
const chainConf = "parent: s1\nscsi0: chain:" + cur + ",size=64M\nscsi1: local-lvm:vm-101-disk-1,size=8G\n\n[s1]\nscsi0: chain:" + cur + ",size=64M\nsnaptime: 1795985763\n"

var chainArgv = []string{"/usr/bin/kvm", "-id", "101", "-pidfile", "/var/run/qemu-server/101.pid"}

func testdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// chainNode is VM 101 running the chain cur <- base as QEMU's graph says
// (vm.Live of scsi0), each LV linked at /dev/vgchain/<lv> to its dm device
// as the VM sees /dev, the dm devices' sizes in sysfs, and qemu-img
// answering from the recordings named by path ("" for a path: no output,
// exit 1).
type chainNode struct {
	n   *vmtest.Node
	v   *vm.VM
	run *fakerun.Runner
}

func newChainNode(t *testing.T, conf string, lvs map[string]int64, check map[string]string, info string, live ...string) *chainNode {
	t.Helper()
	n := vmtest.New(t, 101, conf, chainStorages, chainArgv)
	dev := filepath.Join(n.Root, "proc", strconv.Itoa(vmtest.Pid), "root", "dev")
	dm := 3
	for lv, size := range lvs {
		dm++
		name := "dm-" + strconv.Itoa(dm)
		write(t, filepath.Join(dev, name), "")
		if err := os.MkdirAll(filepath.Join(dev, "vgchain"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("../"+name, filepath.Join(dev, "vgchain", lv)); err != nil {
			t.Fatal(err)
		}
		sz := strconv.FormatInt(size/512, 10)
		if size < 0 {
			sz = "not a number"
		}
		write(t, filepath.Join(n.Paths.Sys, "class/block", name, "size"), sz+"\n")
	}
	c := &chainNode{n: n, v: n.Load(t)}
	c.run = &fakerun.Runner{Do: map[string]func([]string) ([]byte, error){
		"qemu-img check": func(argv []string) ([]byte, error) {
			f, ok := check[filepath.Base(argv[len(argv)-1])]
			if !ok || f == "" {
				return nil, errors.New("exit status 1")
			}
			return []byte(testdata(t, f)), nil
		},
		"qemu-img info": func(argv []string) ([]byte, error) {
			if info == "" {
				return nil, errors.New("exit status 1")
			}
			return []byte(testdata(t, info)), nil
		},
	}}
	if len(live) > 0 {
		l := &vm.Live{Inserted: true, Protocol: qmp.BlockNode{Driver: "host_device", Filename: "/dev/vgchain/" + live[0]}}
		for _, lv := range live[1:] {
			l.Backing = append(l.Backing, qmp.DriveChain{Format: qmp.BlockNode{Driver: "qcow2"}, Protocol: qmp.BlockNode{Driver: "host_device", Filename: "/dev/vgchain/" + lv}})
		}
		c.v.Disk("scsi0").Live = l
	}
	return c
}

// measure is every chain of the VM's disks, as package disk's Chains
// layer reads them.
func (c *chainNode) measure() []Chain {
	n := c.run.Node(node.New(c.n.Paths, 0))
	var out []Chain
	for _, d := range c.v.Disks {
		if OnChain(d.Drive, c.v.Storages.Of(d.Drive)) {
			out = append(out, *Measure(context.Background(), n, c.v, d, ReadSnapshots(context.Background(), n, c.v)))
		}
	}
	return out
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func pct(a, b int64) float64 { return float64(a) * 100 / float64(b) }

// TestMeasure: QEMU's chain beside the config's, each layer's LV and how
// far its qcow2 reaches into it, what the current layer can still
// allocate and whether that outgrows its LV; qemu-img info only for the
// current layer; the lvm-thin disk is no chain.
func TestMeasure(t *testing.T) {
	c := newChainNode(t, chainConf, map[string]int64{cur: mib16, base: mib68},
		map[string]string{cur: "check-current-12m.json", base: "check-base.json"}, "info-current.json", cur, base)
	got := c.measure()
	if len(got) != 1 {
		t.Fatalf("%d chains, want scsi0's alone: %+v", len(got), got)
	}
	ch := got[0]
	if ch.Disk != "scsi0" || ch.Volume != "chain:"+cur || ch.Depth != 2 || !reflect.DeepEqual(ch.Config, []string{cur, base}) || ch.Disagreements == nil || len(ch.Disagreements) != 0 {
		t.Errorf("chain %+v", ch)
	}
	if len(ch.Live) != 2 {
		t.Fatalf("live %+v", ch.Live)
	}
	top, old := ch.Live[0], ch.Live[1]
	un := int64(512-96) * 131072 // 52 MiB
	if top.LV != cur || top.Path != "/dev/vgchain/"+cur || top.Snapshot != "" || top.Error != "" ||
		top.LVSizeBytes == nil || *top.LVSizeBytes != mib16 || top.Qcow2EndBytes == nil || *top.Qcow2EndBytes != 13238272 ||
		top.UsedPercent == nil || math.Abs(*top.UsedPercent-pct(13238272, mib16)) > 1e-9 ||
		top.UnallocatedBytes == nil || *top.UnallocatedBytes != un || !top.CanFill {
		t.Errorf("current layer %+v", top)
	}
	if old.LV != base || old.Snapshot != "s1" || old.Error != "" || *old.LVSizeBytes != mib68 || *old.Qcow2EndBytes != 262144 ||
		math.Abs(*old.UsedPercent-pct(262144, mib68)) > 1e-9 || old.UnallocatedBytes != nil || old.CanFill {
		t.Errorf("base layer %+v", old)
	}
	if lvl := ch.Level(); lvl != thinpool.LevelWarning {
		t.Errorf("level %s, want warning (78.9 %% of the LV, can grow past it)", lvl)
	}
	if d := ch.Describe(); d != "volume chain, 2 layers in QEMU: "+cur+" (qcow2 12.6 MiB of LV 16.0 MiB, 78.9 %) <- "+base+" (qcow2 256.0 KiB of LV 68.0 MiB, 0.4 %)" {
		t.Errorf("%q", d)
	}
	want := []string{
		"qemu-img check --force-share --output=json /dev/vgchain/" + cur,
		"qemu-img info --force-share --output=json /dev/vgchain/" + cur,
		"qemu-img check --force-share --output=json /dev/vgchain/" + base,
	}
	if calls := c.run.Calls(); !reflect.DeepEqual(calls, want) {
		t.Errorf("ran %q\nwant %q", calls, want)
	}

	// 2 MiB more: 91.4 % of the LV, an error.
	c = newChainNode(t, chainConf, map[string]int64{cur: mib16, base: mib68},
		map[string]string{cur: "check-current-14m.json", base: "check-base.json"}, "info-current.json", cur, base)
	if ch := c.measure()[0]; ch.Level() != thinpool.LevelFailure || *ch.Live[0].UnallocatedBytes != int64(512-112)*131072 {
		t.Errorf("14 MiB: %s %+v", ch.Level(), ch.Live[0])
	}
}

// The current layer fills its LV when what it can still allocate takes
// its qcow2 past the LV's end: an LV of exactly the end plus the
// unallocated clusters holds it, one sector less does not.
func TestMeasureCanFillEdge(t *testing.T) {
	fits := int64(13238272 + (512-96)*131072)
	for _, c := range []struct {
		lv   int64
		fill bool
	}{{fits, false}, {fits - 512, true}, {fits + 512, false}} {
		n := newChainNode(t, chainConf, map[string]int64{cur: c.lv, base: mib68},
			map[string]string{cur: "check-current-12m.json", base: "check-base.json"}, "info-current.json", cur, base)
		if top := n.measure()[0].Live[0]; top.CanFill != c.fill {
			t.Errorf("LV %d for a qcow2 that can reach %d: can fill %v, want %v", c.lv, fits, top.CanFill, c.fill)
		}
	}
}

// What cannot be read is said per layer, and nothing is made up in its
// place.
func TestMeasureUnknowns(t *testing.T) {
	t.Run("an LV gone from /dev, qemu-img check failing", func(t *testing.T) {
		c := newChainNode(t, chainConf, map[string]int64{cur: mib16}, map[string]string{cur: "check-current-12m.json"}, "info-current.json", cur, base)
		ch := c.measure()[0]
		old := ch.Live[1]
		if old.LVSizeBytes != nil || old.Qcow2EndBytes != nil || old.UsedPercent != nil ||
			!strings.Contains(old.Error, "no such file or directory") ||
			!strings.HasSuffix(old.Error, "; `qemu-img check --force-share --output=json /dev/vgchain/"+base+"`: exit status 1") {
			t.Errorf("%+v", old)
		}
		if !strings.HasSuffix(ch.Describe(), base+" (use unknown: "+old.Error+")") {
			t.Errorf("%q", ch.Describe())
		}
		if ch.Live[0].Error != "" || ch.Level() != thinpool.LevelWarning {
			t.Errorf("the current layer is still measured: %+v", ch.Live[0])
		}
	})
	t.Run("qemu-img check failing alone", func(t *testing.T) {
		c := newChainNode(t, chainConf, map[string]int64{cur: mib16, base: mib68}, map[string]string{cur: "check-current-12m.json"}, "info-current.json", cur, base)
		if old := c.measure()[0].Live[1]; *old.LVSizeBytes != mib68 || old.Error != "`qemu-img check --force-share --output=json /dev/vgchain/"+base+"`: exit status 1" {
			t.Errorf("%+v", old)
		}
	})
	t.Run("sysfs size not a number; qemu-img info failing", func(t *testing.T) {
		c := newChainNode(t, chainConf, map[string]int64{cur: -1, base: mib68}, map[string]string{cur: "check-current-12m.json", base: "check-base.json"}, "", cur, base)
		top := c.measure()[0].Live[0]
		if top.LVSizeBytes != nil || top.UsedPercent != nil || *top.Qcow2EndBytes != 13238272 || top.UnallocatedBytes != nil || top.CanFill ||
			!strings.HasPrefix(top.Error, "/dev/vgchain/"+cur+": strconv.ParseInt") ||
			!strings.HasSuffix(top.Error, "; `qemu-img info --force-share --output=json /dev/vgchain/"+cur+"`: exit status 1") {
			t.Errorf("%+v", top)
		}
	})
	t.Run("an LV of size 0, qemu-img check without image-end-offset, info without a cluster size", func(t *testing.T) {
		c := newChainNode(t, chainConf, map[string]int64{cur: 0, base: mib68}, map[string]string{cur: "check-current-12m.json", base: "info-current.json"}, "check-base.json", cur, base)
		ch := c.measure()[0]
		top, old := ch.Live[0], ch.Live[1]
		if *top.LVSizeBytes != 0 || top.UsedPercent != nil || top.UnallocatedBytes != nil || top.CanFill || top.Error != "" {
			t.Errorf("current %+v", top)
		}
		if old.Qcow2EndBytes != nil || old.Error != "qemu-img check printed no image-end-offset" {
			t.Errorf("base %+v", old)
		}
	})
}

// QEMU's chain against the config's; a stopped VM has the config's
// alone; a VM without volume-chain disks has none.
func TestMeasureChains(t *testing.T) {
	checks := map[string]string{cur: "check-current-12m.json", base: "check-base.json"}
	lvs := map[string]int64{cur: mib16, base: mib68}
	// s1 deleted from the config while QEMU still runs on its layer.
	c := newChainNode(t, "scsi0: chain:"+cur+",size=64M\n", lvs, checks, "info-current.json", cur, base)
	ch := c.measure()[0]
	if ch.Depth != 2 || !reflect.DeepEqual(ch.Config, []string{cur}) ||
		!reflect.DeepEqual(ch.Disagreements, []string{"QEMU's chain has " + base + ", the layer of snapshot s1, which the config's snapshots do not name"}) {
		t.Errorf("%+v", ch)
	}
	// Stopped (no live graph): the config's chain and depth, nothing run.
	c = newChainNode(t, chainConf, lvs, checks, "info-current.json")
	ch = c.measure()[0]
	if ch.Depth != 2 || len(ch.Live) != 0 || ch.Live == nil || len(ch.Disagreements) != 0 || len(c.run.Calls()) != 0 {
		t.Errorf("%+v, ran %q", ch, c.run.Calls())
	}
	// An empty drive (no medium inserted in QEMU) is measured as stopped.
	c = newChainNode(t, chainConf, lvs, checks, "info-current.json", cur, base)
	c.v.Disk("scsi0").Live.Inserted = false
	if ch := c.measure()[0]; len(ch.Live) != 0 || ch.Depth != 2 || len(c.run.Calls()) != 0 {
		t.Errorf("not inserted: %+v", ch)
	}
	// No disk on a volume-chain storage, a raw volume on one (not a
	// qcow2), a disk only [PENDING] adds: nothing.
	c = newChainNode(t, "scsi1: local-lvm:vm-101-disk-1,size=8G\nscsi2: chain:vm-101-disk-2,size=8G\n\n[PENDING]\nscsi3: chain:vm-101-disk-3.qcow2,size=8G\n", lvs, checks, "")
	if got := c.measure(); got != nil || len(c.run.Calls()) != 0 {
		t.Errorf("%+v", got)
	}
}
