package bench

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/internal/fakerun"
	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

func p(v int64) *int64 { return &v }

func kinds(ev []Evidence) []Kind {
	var k []Kind
	for _, e := range ev {
		k = append(k, e.Kind)
	}
	return k
}

func TestJudgeEvidence(t *testing.T) {
	jobs := LabJobSet()
	job := func(name string) Job {
		for _, j := range jobs {
			if j.Name == name {
				return j
			}
		}
		t.Fatalf("no job %s", name)
		return Job{}
	}
	none := qemuserver.CacheOf("none")
	wb := qemuserver.CacheOf("writeback")
	unsafe := qemuserver.CacheOf("unsafe")
	const area = 64 << 20
	for _, c := range []struct {
		name string
		job  string
		f    DiskFacts
		o    Observation
		m    Measured
		want []Kind
	}{
		{"writeback read from page cache", "rr4k", DiskFacts{Cache: wb, AreaBytes: area}, Observation{CachedBytes: p(area / 2)}, Measured{}, []Kind{ServedFromNodeRAM}},
		{"writeback read, just under half cached", "rr4k", DiskFacts{Cache: wb, AreaBytes: area}, Observation{CachedBytes: p(area/2 - 4096)}, Measured{}, nil},
		{"cache=none: residency says nothing", "rr4k", DiskFacts{Cache: none, AreaBytes: area}, Observation{CachedBytes: p(area)}, Measured{}, nil},
		{"write job with cached pages is not a read", "rw4k", DiskFacts{Cache: wb, AreaBytes: area}, Observation{CachedBytes: p(area)}, Measured{}, nil},
		{"thin, holes read", "sr1m", DiskFacts{Cache: none, AreaBytes: area, Thin: true}, Observation{AllocatedBytes: p(area / 2)}, Measured{}, []Kind{NeverWritten}},
		{"thin, all written", "sr1m", DiskFacts{Cache: none, AreaBytes: area, Thin: true}, Observation{AllocatedBytes: p(area)}, Measured{}, nil},
		{"thick: allocation not judged", "sr1m", DiskFacts{Cache: none, AreaBytes: area}, Observation{AllocatedBytes: p(0)}, Measured{}, nil},
		{"writeback write into Dirty", "sw1m", DiskFacts{Cache: wb, AreaBytes: area}, Observation{DirtyGrowthBytes: p(DirtyGrowthMin)}, Measured{}, []Kind{AckedInNodeRAM}},
		{"writeback write, noise", "sw1m", DiskFacts{Cache: wb, AreaBytes: area}, Observation{DirtyGrowthBytes: p(DirtyGrowthMin - 1)}, Measured{}, nil},
		{"cache=none: Dirty is another writer's", "sw1m", DiskFacts{Cache: none, AreaBytes: area}, Observation{DirtyGrowthBytes: p(1 << 30)}, Measured{}, nil},
		{"unsafe fsync job", "sync", DiskFacts{Cache: unsafe, AreaBytes: area}, Observation{FlushOps: p(500), DirtyGrowthBytes: p(0)}, Measured{}, []Kind{FlushesIgnored}},
		{"unsafe, no flush counted", "sync", DiskFacts{Cache: unsafe, AreaBytes: area}, Observation{FlushOps: p(0)}, Measured{}, nil},
		{"none fsync job honours flushes", "sync", DiskFacts{Cache: none, AreaBytes: area}, Observation{FlushOps: p(500)}, Measured{}, nil},
		{"at the iops limit", "rw4k", DiskFacts{Cache: none, AreaBytes: area, Limits: qemuserver.Limits{"iops-write": 200}}, Observation{}, Measured{WriteIOPS: 180}, []Kind{LimitBound}},
		{"below the iops limit", "rw4k", DiskFacts{Cache: none, AreaBytes: area, Limits: qemuserver.Limits{"iops-write": 200}}, Observation{}, Measured{WriteIOPS: 179}, nil},
		{"at the limit but for the queue in flight", "rw4k", DiskFacts{Cache: none, AreaBytes: area, Limits: qemuserver.Limits{"iops-write": 100}}, Observation{}, Measured{WriteIOPS: 84, InFlightIOPS: 16}, []Kind{LimitBound}},
		{"queue slack does not reach the limit", "rw4k", DiskFacts{Cache: none, AreaBytes: area, Limits: qemuserver.Limits{"iops-write": 100}}, Observation{}, Measured{WriteIOPS: 73, InFlightIOPS: 16}, nil},
		{"no I/O in that direction", "rr4k", DiskFacts{Cache: none, AreaBytes: area, Limits: qemuserver.Limits{"iops-write": 10}}, Observation{}, Measured{ReadIOPS: 5000, InFlightIOPS: 16}, nil},
		{"total bandwidth limit", "sr1m", DiskFacts{Cache: none, AreaBytes: area, Limits: qemuserver.Limits{"bps-total": 10 << 20}}, Observation{}, Measured{ReadBytes: 10 << 20}, []Kind{LimitBound}},
		{"read limit, write job", "rw4k", DiskFacts{Cache: none, AreaBytes: area, Limits: qemuserver.Limits{"iops-read": 100}}, Observation{}, Measured{WriteIOPS: 5000}, nil},
		{"a neighbour's I/O", "rr4k", DiskFacts{Cache: none, AreaBytes: area}, Observation{Neighbours: []Neighbour{{VMID: 375, Disks: "scsi1", Bytes: NeighbourMin}}}, Measured{}, []Kind{NeighbourIO}},
		{"a neighbour's background writes", "rr4k", DiskFacts{Cache: none, AreaBytes: area}, Observation{Neighbours: []Neighbour{{VMID: 375, Disks: "scsi1", Bytes: NeighbourMin - 1}}}, Measured{}, nil},
		{"nothing observed", "rr4k", DiskFacts{Cache: wb, AreaBytes: area, Thin: true}, Observation{}, Measured{}, nil},
	} {
		got := kinds(Judge(job(c.job), c.f, c.o, c.m))
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestUnseenSaysAbsent(t *testing.T) {
	wb := qemuserver.CacheOf("writeback")
	jobs := LabJobSet()
	rr, rw := jobs[1], jobs[2]
	ev := Unseen(DiskFacts{Cache: wb, Thin: true}, []Observed{
		{rr, Observation{CachedWhy: "librbd", AllocatedWhy: "no tool"}},
		{rr, Observation{CachedWhy: "again"}},
		// A write job reads no allocation: not "unobserved" for it.
		{rw, Observation{DirtyGrowthBytes: p(0)}},
		{rw, Observation{NeighbourWhy: "VM 375's QMP did not answer"}},
	})
	got := kinds(ev)
	if !slices.Equal(got, []Kind{ServedFromNodeRAM, NeverWritten, AckedInNodeRAM, NeighbourIO}) {
		t.Errorf("%v", got)
	}
	for _, e := range ev {
		if !e.Absent {
			t.Errorf("%s not marked absent", e.Kind)
		}
	}
	if ev[0].Message != "not observed: librbd" || ev[2].Message != "not observed: the counter was not read" || ev[3].Message != "not observed: VM 375's QMP did not answer" {
		t.Errorf("first reason kept: %q", ev[0].Message)
	}
	// cache=none: the page cache and Dirty are not in play: not listed;
	// neighbours read: nothing absent.
	if got := kinds(Unseen(DiskFacts{Cache: qemuserver.CacheOf("none")}, []Observed{{rr, Observation{Neighbours: []Neighbour{}}}, {rw, Observation{}}})); len(got) != 0 {
		t.Errorf("cache=none: %v", got)
	}
}

func TestMergeEvidence(t *testing.T) {
	e := Evidence{Kind: LimitBound, Message: "m1"}
	l := merge(nil, 1, []Evidence{e})
	l = merge(l, 2, []Evidence{{Kind: LimitBound, Message: "m2"}})
	if len(l) != 1 || !slices.Equal(l[0].Runs, []int{1, 2}) || l[0].Message != "m1" || l[0].Text() != "limit-bound: m1 (run 1, 2)" {
		t.Errorf("%+v", l)
	}
}

// TestZvolSyncDisabledFlushesIgnored: the zvol's sync as storage/zfs reads
// it (one zfs get, the recorded zvol): sync=disabled makes an fsync job's
// counted flushes flushes-ignored naming the dataset; sync=standard and a
// disk on other storage do not; zfs that cannot answer is "not observed"
// with its reason, never a finding.
func TestZvolSyncDisabledFlushesIgnored(t *testing.T) {
	b, err := os.ReadFile("../storage/testdata/every-type.cfg")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := os.ReadFile("../storage/zfs/testdata/get-sparse-512.txt")
	if err != nil {
		t.Fatal(err)
	}
	conf := "scsi0: local-lvm:vm-100-disk-0,size=8G\nscsi5: local-zfs:vm-100-disk-5,size=8G\nscsi13: local-zfs:vm-100-disk-13,size=8G\n"
	v := vmtest.New(t, 100, conf, string(b), nil).Load(t)
	jobs := LabJobSet()
	sync, rr := jobs[len(jobs)-1], jobs[1]
	if !sync.Fsync() || rr.Fsync() {
		t.Fatalf("job set changed: %s %s", sync.Name, rr.Name)
	}
	none := qemuserver.CacheOf("none")
	facts := func(r *fakerun.Runner) map[string]DiskFacts {
		set := disk.Resolve(context.Background(), node.Node{Runner: r}, v, v.Disks, disk.ZFS, disk.Options{})
		if n := len(r.Calls()); n != 1 {
			t.Errorf("%d zfs calls, want 1", n)
		}
		out := map[string]DiskFacts{}
		for _, d := range set.Disks {
			out[d.ID] = DiskFacts{Cache: none, AreaBytes: 32 << 20, Zvol: d.ZFS}
		}
		return out
	}
	fs := facts(&fakerun.Runner{Do: map[string]func([]string) ([]byte, error){"zfs get name,property,value": fakerun.Zvols(string(rec), "pool/test",
		map[string]string{"rpool/data/vm-100-disk-5": "disabled", "rpool/data/vm-100-disk-13": "standard"})}})
	flushed := Observation{FlushOps: p(500)}
	for _, c := range []struct {
		disk string
		job  Job
		o    Observation
		want []Kind
	}{
		{"scsi5", sync, flushed, []Kind{FlushesIgnored}},
		{"scsi5", sync, Observation{FlushOps: p(0)}, nil},
		{"scsi5", rr, flushed, nil},
		{"scsi13", sync, flushed, nil},
		{"scsi0", sync, flushed, nil},
	} {
		ev := Judge(c.job, fs[c.disk], c.o, Measured{})
		if got := kinds(ev); !slices.Equal(got, c.want) {
			t.Errorf("%s %s %+v: %v, want %v", c.disk, c.job.Name, c.o, got, c.want)
		}
		if len(ev) == 1 && !strings.Contains(ev[0].Message, "zvol rpool/data/vm-100-disk-5 has sync=disabled") {
			t.Errorf("%s: %q", c.disk, ev[0].Message)
		}
		// A read job on a zvol that caches data (primarycache=all) wants
		// the ARC's counters, which this observation lacks.
		wantUnseen := 0
		if c.job.Name == "rr4k" && c.disk == "scsi5" {
			wantUnseen = 1
		}
		if got := Unseen(fs[c.disk], []Observed{{c.job, c.o}}); len(got) != wantUnseen || wantUnseen == 1 && (got[0].Kind != ServedFromZFSARC || !got[0].Absent) {
			t.Errorf("%s %s: unseen %+v", c.disk, c.job.Name, got)
		}
	}
	// cache=unsafe on the same zvol: one finding naming both.
	f := fs["scsi5"]
	f.Cache = qemuserver.CacheOf("unsafe")
	if ev := Judge(sync, f, flushed, Measured{}); len(ev) != 1 || !strings.Contains(ev[0].Message, "cache=unsafe") || !strings.Contains(ev[0].Message, "sync=disabled") {
		t.Errorf("unsafe on sync=disabled: %+v", ev)
	}
	// Flushes not counted on sync=disabled: not observed, with the reason.
	if ev := Unseen(fs["scsi5"], []Observed{{sync, Observation{FlushWhy: "query-blockstats failed"}}}); len(ev) != 1 || ev[0].Kind != FlushesIgnored || !ev[0].Absent || ev[0].Message != "not observed: query-blockstats failed" {
		t.Errorf("unseen flushes: %+v", ev)
	}

	fs = facts(&fakerun.Runner{Do: map[string]func([]string) ([]byte, error){"zfs get name,property,value": fakerun.Zvols(string(rec), "pool/test",
		map[string]string{"rpool/data/vm-100-disk-5": "gone"})}})
	for _, id := range []string{"scsi5", "scsi13"} {
		if ev := Judge(sync, fs[id], flushed, Measured{}); len(ev) != 0 {
			t.Errorf("%s unknown: judged %+v", id, ev)
		}
		ev := Unseen(fs[id], []Observed{{sync, flushed}, {sync, flushed}})
		if len(ev) != 1 || ev[0].Kind != FlushesIgnored || !ev[0].Absent ||
			!strings.HasPrefix(ev[0].Message, "not observed: ZFS's sync property of the zvol rpool/data/vm-100-"+strings.Replace(id, "scsi", "disk-", 1)+" is unknown: `zfs get -Hp") ||
			!strings.Contains(ev[0].Message, "dataset does not exist") {
			t.Errorf("%s unknown: %+v", id, ev)
		}
		if ev := Unseen(fs[id], []Observed{{rr, flushed}}); len(ev) != 1 || ev[0].Kind != ServedFromZFSARC ||
			!strings.HasPrefix(ev[0].Message, "not observed: the zvol rpool/data/vm-100-"+strings.Replace(id, "scsi", "disk-", 1)+"'s primarycache is unknown: `zfs get") {
			t.Errorf("%s unknown, read job: %+v", id, ev)
		}
	}
	if ev := Unseen(fs["scsi0"], []Observed{{sync, flushed}}); len(ev) != 0 {
		t.Errorf("scsi0 (lvm) with zfs failing: %+v", ev)
	}
	// cache=unsafe decides alone: the unknown zvol is not "not observed".
	f = fs["scsi5"]
	f.Cache = qemuserver.CacheOf("unsafe")
	if ev := Unseen(f, []Observed{{sync, Observation{FlushOps: p(500), DirtyGrowthBytes: p(0)}}}); len(ev) != 0 {
		t.Errorf("unsafe, zvol unknown: %+v", ev)
	}
}
