package bench

import (
	"slices"
	"testing"

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
