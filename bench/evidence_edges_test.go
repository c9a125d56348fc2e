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
