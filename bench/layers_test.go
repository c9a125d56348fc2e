package bench

import (
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/layers"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/sampler"
)

// A job's split: the limit fio's rates used most of names the verdict's
// limit; the storage's share decides where it ran slow; without a node
// device there is no verdict between QEMU and the storage; the guest layer
// is never read by bench, and said so.
func TestJobLayers(t *testing.T) {
	counters := func(ops int64, qemuMs, nodeMs float64, node bool) Observation {
		from := layers.Counters{GuestWhy: guestNotRead, QEMU: &qmp.BlockStats{}}
		to := layers.Counters{GuestWhy: guestNotRead, QEMU: &qmp.BlockStats{WrOps: ops, WrTotalTimeNs: int64(float64(ops) * qemuMs * 1e6)}}
		if node {
			from.Node = &sampler.BlockStat{Device: "dm-3"}
			to.Node = &sampler.BlockStat{Device: "dm-3", WriteIOs: ops, WriteTicksMs: int64(float64(ops) * nodeMs)}
		} else {
			to.NodeWhy = "the volume is on no block device of the node (librbd, iSCSI, NFS or tmpfs)"
		}
		return Observation{LayersFrom: from, LayersTo: to}
	}
	limited := DiskFacts{Limits: qemuserver.Limits{"iops-write": 100, "bps-write": 100 << 20}}
	for _, c := range []struct {
		name string
		f    DiskFacts
		o    Observation
		m    Measured
		want layers.Verdict
		says string
	}{
		// rw4k at QD32 against iops_wr=100 (the real-guest test's job): 84
		// IOPS + 16 in flight is the limit.
		{"limit", limited, counters(2520, 320, 0.4, true), Measured{WriteIOPS: 84, InFlightIOPS: 16, WriteBytes: 84 * 4096}, layers.HeldIOLimit, "at 100% of iops_wr=100"},
		{"storage", limited, counters(600, 50, 48, true), Measured{WriteIOPS: 20, WriteBytes: 20 * 4096}, layers.Storage, "storage: the storage takes 48.0 ms"},
		{"no node device", limited, counters(600, 50, 0, false), Measured{WriteIOPS: 84, InFlightIOPS: 16}, layers.Unknown, "storage not read"},
		{"unlimited, QEMU slow", DiskFacts{}, counters(600, 50, 5, true), Measured{WriteIOPS: 600}, layers.HeldByQEMU, "held by QEMU: QEMU adds 45.0 ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := Layers(c.f, c.o, c.m)
			if s.Verdict != c.want || !strings.Contains(s.Says, c.says) {
				t.Errorf("%q: %s, want %q with %q", s.Verdict, s.Says, c.want, c.says)
			}
			if s.Guest != nil || s.GuestUnknown != guestNotRead {
				t.Errorf("guest layer %+v %q", s.Guest, s.GuestUnknown)
			}
		})
	}
}
