package bench

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/latency/latencytest"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/storage/zfs"
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
	if got.Latency != nil || got.LatencyWhy != "" || slices.Contains(q.Seen(), "block-latency-histogram-set") {
		t.Errorf("latency without TrackLatency: %+v %q, QMP %v", got.Latency, got.LatencyWhy, q.Seen())
	}
	// A disk QEMU does not list, a neighbour whose QMP is gone, no volume path.
	o.Neighbours["scsi9"] = []NeighbourVM{{VMID: 372, VM: runningVM(t, 372, nil), Disks: []string{"scsi0"}}}
	got = o.Start(context.Background(), Step{Disk: "scsi9", Job: sync, Run: 1})()
	if got.FlushOps != nil || !strings.Contains(got.FlushWhy, "does not list scsi9") || got.CachedBytes != nil || got.CachedWhy == "" ||
		!strings.Contains(got.NeighbourWhy, "VM 372") {
		t.Errorf("%+v", got)
	}
}

// With TrackLatency a step's percentiles come from the histogram between
// its first and last sample, on the recorded answers of latency/testdata
// (scsi1: 8 writes in flight under iops-write=20, ~390 ms each; no flush):
// the histogram is set once, in the disk's first step (the disk as found
// has none), a step in which no request completed has none and says why,
// and ReleaseLatency clears what was set.
func TestNodeObserverLatency(t *testing.T) {
	bare, a, b := latencytest.Recorded(t)
	fake := latencytest.NewQEMU(bare, a, a, b, b, b)
	q := qmptest.NewQEMU(t, fake.Handle)
	v := runningVM(t, 370, q)
	o := &NodeObserver{Host: sampler.Host{Proc: "/proc", Sys: "/sys"}, VM: v, Facts: map[string]DiskFacts{"scsi1": {Cache: qemuserver.CacheOf("none")}}}
	o.TrackLatency()
	rw := LabJobSet()[2]
	first := o.Start(context.Background(), Step{Disk: "scsi1", Job: rw, Run: 1})()
	second := o.Start(context.Background(), Step{Disk: "scsi1", Job: rw, Run: 2})()
	idle := o.Start(context.Background(), Step{Disk: "scsi1", Job: rw, Run: 3})()
	if first.Latency == nil || first.Latency.WriteP50Ms == nil || first.LatencyWhy != "" {
		t.Errorf("first step (from the set histogram's zero bins): %+v %q", first.Latency, first.LatencyWhy)
	}
	if p := second.Latency; p == nil || p.WriteP50Ms == nil || *p.WriteP50Ms < 370 || *p.WriteP50Ms > 410 || p.FlushP50Ms != nil || p.ReadP50Ms != nil {
		t.Errorf("second step: %+v", p)
	}
	if idle.Latency != nil || !strings.Contains(idle.LatencyWhy, "no request completed") {
		t.Errorf("a step without requests: %+v %q", idle.Latency, idle.LatencyWhy)
	}
	notes, err := o.ReleaseLatency(context.Background())
	if err != nil || len(notes) != 1 || notes[0].Owner != "set" || notes[0].Disk != "scsi1" {
		t.Errorf("release: %v %+v", err, notes)
	}
	if sets := fake.Sets(); len(sets) != 2 || !strings.Contains(sets[0], "boundaries-write") || sets[1] != `{"id":"scsi1"}` {
		t.Errorf("sets %v, want one set and one clear", sets)
	}
}

// TestQEMULatencyFolds: each percentile over the runs that have it, the
// first reason a run had none, nothing without --histogram.
func TestQEMULatencyFolds(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	runs := []Observation{
		{Latency: &latency.Percentiles{WriteP50Ms: f(300), WriteP95Ms: f(400), WriteP99Ms: f(410), FlushP50Ms: f(2)}},
		{LatencyWhy: "query-blockstats failed: gone"},
		{Latency: &latency.Percentiles{WriteP50Ms: f(330), WriteP95Ms: f(420), WriteP99Ms: f(430)}},
		{LatencyWhy: "no request completed in a latency histogram during the step"},
	}
	got, why := qemuLatency(runs, latency.Kinds)
	w := got["write_p50"]
	if len(got) != 4 || w.N != 2 || w.Mean != 315 || got["flush_p50"].N != 1 || got["write_p99"].Mean != 420 || why != "query-blockstats failed: gone" {
		t.Errorf("%+v %q", got, why)
	}
	if _, ok := got["read_p50"]; ok {
		t.Errorf("read_p50 without a read")
	}
	if got, why := qemuLatency([]Observation{{}, {}}, latency.Kinds); got != nil || why != "" {
		t.Errorf("without --histogram: %+v %q", got, why)
	}
	if got, why := qemuLatency([]Observation{{LatencyWhy: "x"}}, latency.Kinds); got != nil || why != "x" {
		t.Errorf("no run with percentiles: %+v %q", got, why)
	}
}

// The ARC's demand data reads over a read job on a zvol that caches data:
// arcstats (a real OpenZFS 2 capture, storage/zfs/testdata) read when the
// step starts and again when it stops; missing arcstats says where it was
// looked for; a write job, or a zvol without primarycache=all, reads none.
func TestNodeObserverARC(t *testing.T) {
	q := qmptest.NewQEMU(t, qmptest.Replies(map[string]string{"query-blockstats": blockstats72(t)}))
	v := runningVM(t, 370, q)
	root := t.TempDir()
	paths := node.NewPaths(root, filepath.Join(root, "proc"), filepath.Join(root, "sys"))
	capture, err := os.ReadFile("../storage/zfs/testdata/arcstats-openzfs2.txt")
	if err != nil {
		t.Fatal(err)
	}
	arcstats := zfs.ArcstatsPath(paths.Proc)
	write := func(b []byte) {
		if err := os.MkdirAll(filepath.Dir(arcstats), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(arcstats, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(capture)
	zv := &zfs.Zvol{Dataset: "rpool/data/vm-370-disk-1", PrimaryCache: "all", Sync: "standard"}
	o := &NodeObserver{Node: node.New(paths, 0), Host: sampler.Host{Proc: paths.Proc, Sys: paths.Sys}, VM: v,
		Facts: map[string]DiskFacts{"scsi1": {Cache: qemuserver.CacheOf("none"), Zvol: zv}}}
	rr, rw := LabJobSet()[1], LabJobSet()[2]
	stop := o.Start(context.Background(), Step{Disk: "scsi1", Job: rr, Run: 1})
	// 6,000 hits and 200 misses more while the job ran.
	later := strings.Replace(strings.Replace(string(capture), "94794984", "94800984", 1), "2513667", "2513867", 1)
	write([]byte(later))
	got := stop()
	if got.ARCDataHits == nil || *got.ARCDataHits != 6000 || *got.ARCDataMisses != 200 || got.ARCWhy != "" {
		t.Errorf("read job: %v %v %q", got.ARCDataHits, got.ARCDataMisses, got.ARCWhy)
	}
	if ev := Judge(rr, o.Facts["scsi1"], got, Measured{}); len(ev) != 1 || ev[0].Kind != ServedFromZFSARC || !strings.Contains(ev[0].Message, "6000 of 6200") {
		t.Errorf("judged %+v", ev)
	}
	if got := o.Start(context.Background(), Step{Disk: "scsi1", Job: rw, Run: 1})(); got.ARCDataHits != nil || got.ARCWhy != "" {
		t.Errorf("write job: %+v", got)
	}
	o.Facts["scsi1"] = DiskFacts{Cache: qemuserver.CacheOf("none"), Zvol: &zfs.Zvol{Dataset: zv.Dataset, PrimaryCache: "metadata"}}
	if got := o.Start(context.Background(), Step{Disk: "scsi1", Job: rr, Run: 1})(); got.ARCDataHits != nil || got.ARCWhy != "" {
		t.Errorf("primarycache=metadata: %+v", got)
	}
	o.Facts["scsi1"] = DiskFacts{Cache: qemuserver.CacheOf("none"), Zvol: zv}
	if err := os.Remove(arcstats); err != nil {
		t.Fatal(err)
	}
	if got := o.Start(context.Background(), Step{Disk: "scsi1", Job: rr, Run: 1})(); got.ARCDataHits != nil || !strings.Contains(got.ARCWhy, arcstats) {
		t.Errorf("no arcstats: %+v", got)
	}
}

// Issue 31: a sample whose exchange fails (a loaded QEMU on a shared
// socket, here an error for the first query-blockstats) is asked again,
// and the step keeps its figures; one that fails twice is said for that
// disk's step alone.
func TestNodeObserverRetriesASample(t *testing.T) {
	for _, fails := range []int{1, 2} {
		n := 0
		stats := blockstats72(t)
		q := qmptest.NewQEMU(t, func(cmd string, _ gjson.Result) string {
			if cmd == "query-blockstats" {
				if n++; n <= fails {
					return qmptest.Fail("GenericError", "busy")
				}
				return qmptest.Return(stats)
			}
			return qmptest.NotFound(cmd)
		})
		v := runningVM(t, 370, q)
		o := &NodeObserver{Host: sampler.Host{Proc: "/proc", Sys: "/sys"}, VM: v, Facts: map[string]DiskFacts{"scsi1": {Cache: qemuserver.CacheOf("none")}}}
		got := o.Start(context.Background(), Step{Disk: "scsi1", Job: LabJobSet()[6], Run: 1})()
		switch fails {
		case 1:
			if got.FlushOps == nil || got.FlushWhy != "" {
				t.Errorf("one failure: %+v", got)
			}
		case 2:
			if got.FlushOps != nil || !strings.Contains(got.FlushWhy, "busy") {
				t.Errorf("two failures: %+v", got)
			}
		}
	}
}

// The steps say a histogram of pvediskcheck's they find and this run did
// not set (a killed run's), with or without TrackLatency; not one the
// observer set.
func TestNodeObserverHistogramsLeft(t *testing.T) {
	bare, a, b := latencytest.Recorded(t)
	for _, c := range []struct {
		name    string
		track   bool
		replies []string
		left    bool
	}{{"left", false, []string{a, b}, true}, {"left, --histogram", true, []string{a, b}, true}, {"set by this run", true, []string{bare, a, b}, false}, {"none", false, []string{bare}, false}} {
		q := qmptest.NewQEMU(t, latencytest.NewQEMU(c.replies...).Handle)
		v := runningVM(t, 370, q)
		o := &NodeObserver{Host: sampler.Host{Proc: "/proc", Sys: "/sys"}, VM: v, Facts: map[string]DiskFacts{"scsi1": {Cache: qemuserver.CacheOf("none")}}}
		if c.track {
			o.TrackLatency()
		}
		rw := LabJobSet()[2]
		o.Start(context.Background(), Step{Disk: "scsi1", Job: rw, Run: 1})()
		o.Start(context.Background(), Step{Disk: "scsi1", Job: rw, Run: 2})()
		want := []latency.Leftover{}
		if c.left {
			want = append(want, latency.Leftover{VMID: 370, Disk: "scsi1", Clear: latency.ClearCommand(v.QMPSocket(), "scsi1")})
		}
		if got := o.HistogramsLeft(); !slices.Equal(got, want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, want)
		}
	}
}
