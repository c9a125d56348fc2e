package top

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/sampler"
)

// TestVMRowCgroup: a VM's row carries its cgroup's dirty and writeback
// bytes and io.pressure from the sample (the recorded hybrid tree of
// sampler/testdata/cgroup), and says why when the node has no scope of
// the VM: null figures, never 0.
func TestVMRowCgroup(t *testing.T) {
	ctx := context.Background()
	r := recording(t, "blockdev")
	v := recordedView(t, r)
	a, b := r.snapshot(t, "a", nil, v.Map.TIDs()), r.snapshot(t, "b", nil, v.Map.TIDs())

	root, _ := filepath.Abs("../sampler/testdata/cgroup/hybrid")
	n := node.New(node.NewPaths(root, "", ""), 0)
	b.Cgroup = sampler.ReadCgroup(ctx, n, sampler.FindCgroup(ctx, n, 100, 4242), false)
	row, _ := assemble(v, a, b)
	if row.DirtyBytes == nil || *row.DirtyBytes != 33558528 || row.WritebackBytes == nil || *row.WritebackBytes != 0 || row.CgroupNotMeasured != "" {
		t.Fatalf("measured: %+v", row)
	}
	if row.IOPressure == nil || row.IOPressure.SomeTotalUs != 76177 {
		t.Fatalf("io.pressure: %+v", row.IOPressure)
	}

	b.Cgroup = sampler.ReadCgroup(ctx, n, sampler.FindCgroup(ctx, n, 101, 4242), false)
	row, _ = assemble(v, a, b)
	if row.DirtyBytes != nil || row.WritebackBytes != nil || row.IOPressure != nil || row.CgroupNotMeasured == "" {
		t.Fatalf("another VM's pid: %+v", row)
	}
	b.Cgroup = nil
	row, _ = assemble(v, a, b)
	if row.DirtyBytes != nil || row.CgroupNotMeasured != "" {
		t.Fatalf("no reading: %+v", row)
	}
}
