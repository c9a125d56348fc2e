package bench

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/internal/fakerun"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/sampler"
)

// A read job on thin storage reads the volume's allocation when it
// starts: a file's st_blocks, plus what the node's page cache still holds
// dirty for it when the disk's cache goes through it (written, not yet
// allocated, not a hole), not with cache=none; a volume without an
// allocation, or a tool that fails, says why. /proc/meminfo unreadable and
// QMP gone are said too.
func TestNodeObserverAllocation(t *testing.T) {
	q := qmptest.NewQEMU(t, qmptest.Replies(map[string]string{"query-blockstats": blockstats72(t)}))
	v := runningVM(t, 370, q)
	vol := filepath.Join(t.TempDir(), "vm-370-disk-1.raw")
	if err := os.WriteFile(vol, []byte(strings.Repeat("pvediskcheck", 1<<16)), 0o644); err != nil {
		t.Fatal(err)
	}
	var read Job
	for _, j := range LabJobSet() {
		if j.Read() {
			read = j
			break
		}
	}
	meter := alloc.NewMeter(&fakerun.Runner{}, 0)
	obs := func(cache string, v0 alloc.Volume) *NodeObserver {
		return &NodeObserver{Host: sampler.Host{Proc: "/proc", Sys: "/sys"}, VM: v, Meter: meter,
			Volumes: map[string]alloc.Volume{"scsi1": v0}, Facts: map[string]DiskFacts{"scsi1": {Cache: qemuserver.CacheOf(cache), Thin: true}}}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(vol, &st); err != nil {
		t.Fatal(err)
	}
	blocks := st.Blocks * 512
	got := obs("none", alloc.Volume{Path: vol}).Start(context.Background(), Step{Disk: "scsi1", Job: read, Run: 1})()
	if got.AllocatedBytes == nil || *got.AllocatedBytes != blocks || got.AllocatedWhy != "" {
		t.Errorf("cache=none: allocated %v (%q), want st_blocks %d", got.AllocatedBytes, got.AllocatedWhy, blocks)
	}
	pc0, pcErr := sampler.VolumePageCache(vol)
	got = obs("writeback", alloc.Volume{Path: vol}).Start(context.Background(), Step{Disk: "scsi1", Job: read, Run: 1})()
	if got.AllocatedBytes == nil || *got.AllocatedBytes < blocks || *got.AllocatedBytes > blocks+12<<16 {
		t.Errorf("cache=writeback: allocated %v, want st_blocks %d plus at most the file's dirty pages", got.AllocatedBytes, blocks)
	}
	// The file was just written: its pages are dirty (or under writeback)
	// for seconds, so they are counted (cachestat: Linux 6.5+).
	if pcErr == nil && pc0.DirtyBytes+pc0.WritebackBytes > 0 && *got.AllocatedBytes == blocks {
		t.Errorf("cache=writeback: allocated %d, the st_blocks alone; %d B of the file were dirty", *got.AllocatedBytes, pc0.DirtyBytes+pc0.WritebackBytes)
	}
	if pcErr != nil {
		t.Logf("page cache not readable here: %v", pcErr)
	}
	// A write job does not read it.
	got = obs("none", alloc.Volume{Path: vol}).Start(context.Background(), Step{Disk: "scsi1", Job: LabJobSet()[0], Run: 1})()
	if got.AllocatedBytes != nil || got.AllocatedWhy != "" {
		t.Errorf("write job: %+v", got)
	}
	got = obs("none", alloc.Volume{}).Start(context.Background(), Step{Disk: "scsi1", Job: read, Run: 1})()
	if got.AllocatedBytes != nil || got.AllocatedWhy != "allocation not reported (the disk has no volume)" {
		t.Errorf("no volume: %v %q", got.AllocatedBytes, got.AllocatedWhy)
	}
	st0, err := qemuserver.ParseStorages(strings.NewReader("lvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n"), "storage.cfg")
	if err != nil {
		t.Fatal(err)
	}
	got = obs("none", alloc.Volume{Storage: st0["local-lvm"], VolName: "vm-370-disk-1", Path: "/dev/pve/vm-370-disk-1"}).Start(context.Background(), Step{Disk: "scsi1", Job: read, Run: 1})()
	if got.AllocatedBytes != nil || !strings.HasPrefix(got.AllocatedWhy, "allocation unreadable: ") || !strings.Contains(got.AllocatedWhy, "lvs") {
		t.Errorf("lvs missing: %v %q", got.AllocatedBytes, got.AllocatedWhy)
	}

	o := obs("none", alloc.Volume{Path: vol})
	o.Host.Proc = filepath.Join(t.TempDir(), "proc")
	q.Kill()
	got = o.Start(context.Background(), Step{Disk: "scsi1", Job: read, Run: 1})()
	if got.DirtyGrowthBytes != nil || !strings.HasPrefix(got.DirtyWhy, "/proc/meminfo unreadable: ") {
		t.Errorf("no meminfo: %v %q", got.DirtyGrowthBytes, got.DirtyWhy)
	}
	if got.FlushOps != nil || !strings.HasPrefix(got.FlushWhy, "query-blockstats failed: ") || len(got.FlushWhy) <= len("query-blockstats failed: ") {
		t.Errorf("QMP gone: %v %q", got.FlushOps, got.FlushWhy)
	}
}

// A neighbour's bytes moved during the step: its counters at the end
// against those at the start (top's recorded lab370 pair: scsi1 wrote
// 20 MiB between them).
func TestNodeObserverNeighbourMoved(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join("..", "top", "testdata", "lab370-blockdev", name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	a, b := read("query-blockstats-a.json"), read("query-blockstats-b.json")
	calls := 0
	nq := qmptest.NewQEMU(t, func(cmd string, _ gjson.Result) string {
		if cmd != "query-blockstats" {
			return qmptest.NotFound(cmd)
		}
		calls++
		if calls == 1 {
			return qmptest.Return(a)
		}
		return qmptest.Return(b)
	})
	q := qmptest.NewQEMU(t, qmptest.Replies(map[string]string{"query-blockstats": blockstats72(t)}))
	o := &NodeObserver{Host: sampler.Host{Proc: "/proc", Sys: "/sys"}, VM: runningVM(t, 370, q),
		Facts:      map[string]DiskFacts{"scsi1": {Cache: qemuserver.CacheOf("none")}},
		Neighbours: map[string][]NeighbourVM{"scsi1": {{VMID: 371, VM: runningVM(t, 371, nq), Disks: []string{"scsi1"}}}}}
	got := o.Start(context.Background(), Step{Disk: "scsi1", Job: LabJobSet()[0], Run: 1})()
	if len(got.Neighbours) != 1 || got.Neighbours[0].VMID != 371 || got.Neighbours[0].Bytes != 107216896-86245376 || got.NeighbourWhy != "" {
		t.Errorf("neighbours %+v %q", got.Neighbours, got.NeighbourWhy)
	}
}
