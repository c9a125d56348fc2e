package bench

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/fio"
	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/storage/zfs"
)

// The edges of the allocation share and of the total limits (reads and
// writes added up), and the evidence's text with and without its runs.
func TestJudgeEdgesMore(t *testing.T) {
	var rr4k Job
	for _, j := range LabJobSet() {
		if j.Name == "rr4k" {
			rr4k = j
		}
	}
	none := qemuserver.CacheOf("none")
	const area = 100 << 20 // 95 % of it is a whole number of bytes
	share := int64(AllocatedShare * area)
	for _, c := range []struct {
		name string
		f    DiskFacts
		o    Observation
		m    Measured
		want []Kind
	}{
		{"thin, exactly the share allocated", DiskFacts{Cache: none, AreaBytes: area, Thin: true}, Observation{AllocatedBytes: p(share)}, Measured{}, nil},
		{"thin, a byte under the share", DiskFacts{Cache: none, AreaBytes: area, Thin: true}, Observation{AllocatedBytes: p(share - 1)}, Measured{}, []Kind{NeverWritten}},
		{"reads and writes add up to the total iops limit", DiskFacts{Cache: none, AreaBytes: area, Limits: qemuserver.Limits{"iops-total": 1000}}, Observation{}, Measured{ReadIOPS: 600, WriteIOPS: 300}, []Kind{LimitBound}},
		{"the reads alone are under it", DiskFacts{Cache: none, AreaBytes: area, Limits: qemuserver.Limits{"iops-total": 1000}}, Observation{}, Measured{ReadIOPS: 600, WriteIOPS: 200}, nil},
		{"reads and writes add up to the total bandwidth limit", DiskFacts{Cache: none, AreaBytes: area, Limits: qemuserver.Limits{"bps-total": 10 << 20}}, Observation{}, Measured{ReadBytes: 6 << 20, WriteBytes: 3 << 20}, []Kind{LimitBound}},
		{"under the total bandwidth limit", DiskFacts{Cache: none, AreaBytes: area, Limits: qemuserver.Limits{"bps-total": 10 << 20}}, Observation{}, Measured{ReadBytes: 6 << 20, WriteBytes: 2 << 20}, nil},
	} {
		if got := kinds(Judge(rr4k, c.f, c.o, c.m)); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
	e := Evidence{Kind: LimitBound, Message: "900 IOPS against the running limit iops-total=1000"}
	if got := e.Text(); got != "limit-bound: 900 IOPS against the running limit iops-total=1000" {
		t.Errorf("%q", got)
	}
	e.Runs = []int{1, 3}
	if got := e.Text(); got != "limit-bound: 900 IOPS against the running limit iops-total=1000 (run 1, 3)" {
		t.Errorf("%q", got)
	}
}

// A job name goes into file names (<disk>-<job>-<run>.json): letters,
// digits and _.+ only, the ends of each range included.
func TestJobNameChars(t *testing.T) {
	for _, ok := range []string{"az", "AZ", "09", "rr4k_a.b+c"} {
		if !jobName(ok) {
			t.Errorf("%q refused", ok)
		}
	}
	for _, bad := range []string{"`", "{", "@", "[", "/", ":", "-", "a b", "a-b"} {
		if jobName(bad) {
			t.Errorf("%q accepted", bad)
		}
	}
}

// The settings line says the running limits, or that there are none.
func TestSettingsTextLimits(t *testing.T) {
	s := Settings{Controller: "virtio-scsi-single", Device: "scsi-hd", Cache: "none", AIO: "io_uring"}
	if got := s.Text(); !strings.Contains(got, "no limits") || strings.Contains(got, "limits iops") {
		t.Errorf("%q", got)
	}
	s.Limits = qemuserver.Limits{"iops-write": 200}
	if got := s.Text(); strings.Contains(got, "no limits") || !strings.Contains(got, "limits iops-write=200") {
		t.Errorf("%q", got)
	}
}

// A run's rates for the limit rule, from Lab 37's recorded rr4k run
// (iodepth 32 for 20 s: 1.6 requests a second can still sit in QEMU's
// throttle when fio stops); no result, no rates.
func TestMeasuredFromRun(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "fio", "testdata", "lab", "lab37", "io_uring-rr4k-1.json"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := fio.Parse("io_uring-rr4k-1.json", b)
	if err != nil {
		t.Fatal(err)
	}
	m := measured(res)
	if math.Abs(m.InFlightIOPS-1.6) > 1e-9 || m.ReadIOPS != res.Jobs[0].Read.IOPS || m.ReadIOPS < 27460 || m.ReadIOPS >= 27461 || m.WriteIOPS != 0 ||
		math.Abs(m.ReadBytes-112512204.8) > 1 || m.WriteBytes != 0 {
		t.Errorf("%+v", m)
	}
	if m := measured(nil); m != (Measured{}) {
		t.Errorf("nil: %+v", m)
	}
}

// The test file and a tenth more fit exactly; a byte less does not.
func TestPlaceFreeSpaceEdge(t *testing.T) {
	const size = 100 << 20
	for free, ok := range map[int64]bool{size + size/10: true, size + size/10 - 1: false} {
		p := Placement{Disk: "scsi1", Seen: guestdisk.Seen{Device: "/dev/sdb", Mounts: []string{"/mnt/x"}}, FreeBytes: map[string]int64{"/mnt/x": free}}
		g := &guest{status: func([]string) string { return "" }}
		_, err := Place(context.Background(), newGuest(t, g), p, size)
		if (err == nil) != ok {
			t.Errorf("free %d for %d: %v", free, size, err)
		}
	}
}

// TestServedFromZFSARC: a read job on a zvol that caches data, with the
// node's ARC answering at least ARCHitShare of at least ARCReadsMin demand
// data reads, was served from RAM; just below either edge it was not; a
// zvol with primarycache metadata or none, a write job, another storage
// are never judged; what could not be seen says why.
func TestServedFromZFSARC(t *testing.T) {
	rr, rw := LabJobSet()[1], LabJobSet()[2]
	zv := func(pc string) *zfs.Zvol {
		return &zfs.Zvol{Dataset: "rpool/data/vm-100-disk-1", PrimaryCache: pc, Sync: "standard"}
	}
	facts := func(z *zfs.Zvol) DiskFacts {
		return DiskFacts{Cache: qemuserver.CacheOf("none"), AreaBytes: 32 << 20, Zvol: z}
	}
	obs := func(h, m int64) Observation { return Observation{ARCDataHits: &h, ARCDataMisses: &m} }
	for _, c := range []struct {
		name string
		job  Job
		f    DiskFacts
		o    Observation
		want bool
	}{
		{"half hit, at the minimum", rr, facts(zv("all")), obs(ARCReadsMin, ARCReadsMin), true},
		{"all hits", rr, facts(zv("all")), obs(50000, 0), true},
		{"just under half", rr, facts(zv("all")), obs(ARCReadsMin, ARCReadsMin+1), false},
		{"under the minimum", rr, facts(zv("all")), obs(ARCReadsMin-1, 0), false},
		{"primarycache metadata", rr, facts(zv("metadata")), obs(50000, 0), false},
		{"primarycache none", rr, facts(zv("none")), obs(50000, 0), false},
		{"a write job", rw, facts(zv("all")), obs(50000, 0), false},
		{"not a zvol", rr, facts(nil), obs(50000, 0), false},
		{"counters not read", rr, facts(zv("all")), Observation{ARCWhy: "x"}, false},
	} {
		ev := Judge(c.job, c.f, c.o, Measured{})
		if got := slices.Contains(kinds(ev), ServedFromZFSARC); got != c.want {
			t.Errorf("%s: %v", c.name, ev)
		}
		if c.want && !strings.Contains(ev[0].Message, "(primarycache=all)") {
			t.Errorf("%s: %q", c.name, ev[0].Message)
		}
	}
	if ev := Judge(rr, facts(zv("all")), obs(300, 100), Measured{}); len(ev) != 1 ||
		ev[0].Message != "the node's ZFS ARC answered 300 of 400 demand data reads (75 %) during the read, and the zvol rpool/data/vm-100-disk-1 caches data (primarycache=all): ZFS served them from the node's RAM, whatever QEMU's cache mode (the ARC's counters are node-wide: other pools' reads count too)" {
		t.Errorf("message: %+v", ev)
	}
	for _, c := range []struct {
		name string
		f    DiskFacts
		o    Observation
		want string // "" for nothing unseen
	}{
		{"counters unreadable", facts(zv("all")), Observation{ARCWhy: "no arcstats"}, "not observed: no arcstats"},
		{"primarycache not printed", facts(zv("")), Observation{}, "not observed: zfs printed no primarycache for the zvol rpool/data/vm-100-disk-1"},
		{"primarycache none", facts(zv("none")), Observation{}, ""},
		{"read", facts(zv("all")), obs(1, 1), ""},
	} {
		var got []string
		for _, e := range Unseen(c.f, []Observed{{rr, c.o}}) {
			got = append(got, e.Message)
		}
		if strings.Join(got, "|") != c.want {
			t.Errorf("unseen %s: %q", c.name, got)
		}
	}
}
