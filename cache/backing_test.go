package cache

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/flush"
	"github.com/pvediskcheck/pvediskcheck/internal/fakerun"
	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/volchain"
)

// The recorded VM with backing chains (testdata/README.md): scsi0 a volume
// chain of three layers, scsi1 a linked clone, scsi2 a raw LV. cache shows
// each chain top to base from the graph FetchLive read, and asks QEMU
// nothing more for it: the commands are FetchLive's, the same as for a VM
// without chains. Only the volume chain's layers are measured (qemu-img
// check through the runner, one per layer; no LV here, so the use is
// unknown and says why); the raw disk has no backing_chain at all.
func TestRunBackingChain(t *testing.T) {
	f := vmtest.LoadFixture(t, "testdata/real-blockdev-chain.json")
	n := vmtest.New(t, f.VMID, f.Conf, f.StorageCfg, f.Argv)
	q := qmptest.NewQEMU(t, vmtest.Recorded(f.Replies))
	n.Serve(t, q)
	v := n.Load(t)
	r := &fakerun.Runner{}
	view, err := Run(context.Background(), r.Node(node.New(n.Paths, 2*time.Second)), v, v.Disks, false, flush.Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"query-status", "query-block", "query-named-block-nodes", "x-debug-query-block-graph",
		"qom-get", "qom-get", "qom-get", "qom-get", "qom-get", "qom-get"}
	if got := q.Seen(); !reflect.DeepEqual(got, want) {
		t.Errorf("QMP commands %v, want %v (FetchLive's)", got, want)
	}
	d := byID(*view)
	const vol = "vm-380-disk-0.qcow2"
	ch := d["scsi0"].Backing
	if ch == nil || ch.Depth != 3 || len(ch.Layers) != 3 {
		t.Fatalf("scsi0: %+v", ch)
	}
	for i, w := range []struct{ lv, snap string }{{vol, ""}, {volchain.LayerName(vol, "s2"), "s2"}, {volchain.LayerName(vol, "s1"), "s1"}} {
		l := ch.Layers[i]
		if filepath.Base(l.File) != w.lv || l.Format != "qcow2" || l.Protocol != "host_device" || l.Node == "" || l.LV == nil || l.LV.Snapshot != w.snap ||
			l.LV.UsedPercent != nil || !strings.Contains(l.LV.Error, "qemu-img check") {
			t.Errorf("scsi0 layer %d: %+v %+v", i, l, l.LV)
		}
	}
	cl := d["scsi1"].Backing
	if cl == nil || cl.Depth != 2 || cl.Layers[0].LV != nil || cl.Layers[1].LV != nil || !strings.HasSuffix(cl.Layers[1].File, "/900/base-900-disk-0.qcow2") || cl.Layers[1].Format != "qcow2" || cl.Layers[1].Protocol != "file" {
		t.Errorf("scsi1: %+v", cl)
	}
	if d["scsi2"].Backing != nil {
		t.Errorf("scsi2: %+v", d["scsi2"].Backing)
	}
	if got := r.Calls(); len(got) != 3 || r.Count("qemu-img check") != 3 || !strings.HasSuffix(got[2], volchain.LayerName(vol, "s1")) {
		t.Errorf("commands run %q, want qemu-img check of the 3 volume-chain layers alone", got)
	}
	// Text: a heading and a line per layer on the chained disks only.
	lines := func(id string) string {
		var s []string
		for _, l := range d[id].Lines {
			s = append(s, l.Text)
		}
		return strings.Join(s, "\n")
	}
	if s := lines("scsi0"); !strings.Contains(s, "backing chain, 3 layers, top to base:\n  1. qcow2 ") || !strings.Contains(s, ", current layer: LV use unknown: ") || !strings.Contains(s, "\n  3. qcow2 ") || !strings.Contains(s, ", snapshot s1: LV use unknown: ") {
		t.Errorf("scsi0's lines:\n%s", s)
	}
	if s := lines("scsi1"); !strings.Contains(s, "backing chain, 2 layers, top to base:\n  1. qcow2 ") || !strings.Contains(s, "/900/base-900-disk-0.qcow2 on file (node #block") || strings.Contains(s, "LV") {
		t.Errorf("scsi1's lines:\n%s", s)
	}
	if s := lines("scsi2"); strings.Contains(s, "backing") {
		t.Errorf("scsi2's lines:\n%s", s)
	}
	b, _ := json.Marshal(view)
	if c := strings.Count(string(b), `"backing_chain":`); c != 2 {
		t.Errorf("backing_chain %d times in %s", c, b)
	}

	// The recorded VM without chains (its qcow2 sata1 has no backing
	// file): nothing of it, and the runner runs nothing for it.
	n2, v2 := vmtest.LoadFixture(t, "testdata/real-blockdev-modes.json").Start(t)
	r2 := &fakerun.Runner{}
	view2, _ := Run(context.Background(), r2.Node(node.New(n2.Paths, 2*time.Second)), v2, v2.Disks, false, flush.Options{})
	for _, dd := range view2.Disks {
		if dd.Backing != nil {
			t.Errorf("%s: %+v", dd.ID, dd.Backing)
		}
	}
	if b, _ := json.Marshal(view2); strings.Contains(string(b), "backing_chain") || r2.Count("qemu-img") != 0 {
		t.Errorf("a VM without chains: %s, ran %q", b, r2.Calls())
	}
}
