package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/sampler"
)

// blockstats72 is QEMU 7.2.22's recorded query-blockstats (qmp/testdata).
func blockstats72(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join("..", "qmp", "testdata", "qemu-7.2.22", "blockdev", "query-blockstats.json"))
	if err != nil {
		t.Fatal(err)
	}
	return gjson.GetBytes(b, "return").Raw
}

func TestNodeObserver(t *testing.T) {
	q := qmptest.NewQEMU(t, qmptest.Replies(map[string]string{"query-blockstats": blockstats72(t)}))
	vol := filepath.Join(t.TempDir(), "vm-370-disk-1.raw")
	if err := os.WriteFile(vol, []byte(strings.Repeat("pvediskcheck", 1<<16)), 0o644); err != nil {
		t.Fatal(err)
	}
	sync := LabJobSet()[6]
	o := &NodeObserver{Host: sampler.Host{Proc: "/proc", Sys: "/sys"}, QMPSocket: q.Sock(),
		Volumes:    map[string]alloc.Volume{"scsi1": {Path: vol}},
		Facts:      map[string]DiskFacts{"scsi1": {Cache: qemuserver.CacheOf("none")}},
		Neighbours: map[string][]NeighbourVM{"scsi1": {{VMID: 371, QMPSocket: q.Sock(), Disks: []string{"scsi2"}}}}}
	got := o.Start(context.Background(), Step{Disk: "scsi1", Job: sync, Run: 1})()
	// The same counters twice: no flush, no neighbour byte; the file just
	// written sits in this machine's page cache (cachestat: Linux 6.5+;
	// an older kernel says why not).
	if got.FlushOps == nil || *got.FlushOps != 0 || got.DirtyGrowthBytes == nil {
		t.Errorf("%+v", got)
	}
	if got.CachedBytes == nil && !strings.Contains(got.CachedWhy, "cachestat") || got.CachedBytes != nil && *got.CachedBytes < 12<<16 {
		t.Errorf("page cache: %v %q", got.CachedBytes, got.CachedWhy)
	}
	if len(got.Neighbours) != 1 || got.Neighbours[0].VMID != 371 || got.Neighbours[0].Bytes != 0 || got.NeighbourWhy != "" {
		t.Errorf("neighbours %+v %q", got.Neighbours, got.NeighbourWhy)
	}
	if got.AllocatedBytes != nil || got.AllocatedWhy != "" {
		t.Errorf("allocation read on thick storage: %+v", got)
	}
	// A disk QEMU does not list, a neighbour whose QMP is gone, no volume path.
	o.Neighbours["scsi9"] = []NeighbourVM{{VMID: 372, QMPSocket: filepath.Join(t.TempDir(), "372.qmp"), Disks: []string{"scsi0"}}}
	got = o.Start(context.Background(), Step{Disk: "scsi9", Job: sync, Run: 1})()
	if got.FlushOps != nil || !strings.Contains(got.FlushWhy, "does not list scsi9") || got.CachedBytes != nil || got.CachedWhy == "" ||
		!strings.Contains(got.NeighbourWhy, "VM 372") {
		t.Errorf("%+v", got)
	}
}
