package bench

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// blockstats72 is QEMU 7.2.22's recorded query-blockstats (qmp/testdata).
func blockstats72(t *testing.T) string {
	b, err := os.ReadFile(filepath.Join("..", "qmp", "testdata", "qemu-7.2.22", "blockdev", "query-blockstats.json"))
	if err != nil {
		t.Fatal(err)
	}
	return gjson.GetBytes(b, "return").Raw
}

// runningVM is VM vmid with one disk, "running" with a generated command
// line, its QMP socket served by q (nil: no socket, a QEMU gone).
func runningVM(t *testing.T, vmid int, q *qmptest.QEMU) *vm.VM {
	t.Helper()
	conf := "scsihw: virtio-scsi-single\nscsi1: local-lvm:vm-" + strconv.Itoa(vmid) + "-disk-1,size=1G\n"
	const storageCfg = "lvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n"
	cfg, err := qemuserver.ParseConfig(strings.NewReader(conf), strconv.Itoa(vmid)+".conf")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := qemuserver.ParseStorages(strings.NewReader(storageCfg), "storage.cfg")
	argv, err := fakenode.Argv("qemu-system-x86_64", cfg, st, fakenode.ArgvOptions{VMID: vmid, RunDir: "/var/run/qemu-server"})
	if err != nil {
		t.Fatal(err)
	}
	tree := vmtest.New(t, vmid, conf, storageCfg, argv)
	if q != nil {
		tree.Serve(t, q)
	}
	v := tree.Load(t)
	if !v.Running {
		t.Fatal("fake VM not running")
	}
	return v
}

func TestNodeObserver(t *testing.T) {
	q := qmptest.NewQEMU(t, qmptest.Replies(map[string]string{"query-blockstats": blockstats72(t)}))
	v := runningVM(t, 370, q)
	vol := filepath.Join(t.TempDir(), "vm-370-disk-1.raw")
	if err := os.WriteFile(vol, []byte(strings.Repeat("pvediskcheck", 1<<16)), 0o644); err != nil {
		t.Fatal(err)
	}
	sync := LabJobSet()[6]
	o := &NodeObserver{Host: sampler.Host{Proc: "/proc", Sys: "/sys"}, VM: v,
		Volumes:    map[string]alloc.Volume{"scsi1": {Path: vol}},
		Facts:      map[string]DiskFacts{"scsi1": {Cache: qemuserver.CacheOf("none")}},
		Neighbours: map[string][]NeighbourVM{"scsi1": {{VMID: 371, VM: v, Disks: []string{"scsi2"}}}}}
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
	o.Neighbours["scsi9"] = []NeighbourVM{{VMID: 372, VM: runningVM(t, 372, nil), Disks: []string{"scsi0"}}}
	got = o.Start(context.Background(), Step{Disk: "scsi9", Job: sync, Run: 1})()
	if got.FlushOps != nil || !strings.Contains(got.FlushWhy, "does not list scsi9") || got.CachedBytes != nil || got.CachedWhy == "" ||
		!strings.Contains(got.NeighbourWhy, "VM 372") {
		t.Errorf("%+v", got)
	}
}
