package layers

import (
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/sampler"
)

// dev is a device's counters: ops reads+writes (split half and half) that
// took ms milliseconds in all, inflight outstanding.
func dev(name string, ops, ms, inflight int64) *sampler.BlockStat {
	return &sampler.BlockStat{Device: name, ReadIOs: ops / 2, WriteIOs: ops - ops/2, ReadTicksMs: ms / 2, WriteTicksMs: ms - ms/2, InFlight: inflight}
}

func qemu(ops int64, ms float64) *qmp.BlockStats {
	ns := int64(ms * 1e6)
	return &qmp.BlockStats{ID: "scsi1", WrOps: ops, WrTotalTimeNs: ns}
}

func f(v float64) *float64 { return &v }

// scene is one interval: each layer's ops and ms per request (0 ops: not
// read), from zero counters.
type scene struct {
	guestOps, qemuOps, nodeOps int64
	guestMs, qemuMs, nodeMs    float64
	guestWhy, nodeWhy          string
	ctx                        Context
	noClock                    bool // the interval unknown
}

func (s scene) split() Split {
	zero := Counters{QEMU: qemu(0, 0)}
	cur := Counters{QEMU: qemu(s.qemuOps, float64(s.qemuOps)*s.qemuMs)}
	if !s.noClock {
		zero.At = time.Unix(1764700000, 0)
		cur.At = zero.At.Add(time.Second)
	}
	if s.guestWhy == "" {
		zero.Guest = dev("sdb", 0, 0, 0)
		cur.Guest = dev("sdb", s.guestOps, int64(float64(s.guestOps)*s.guestMs), 3)
	} else {
		cur.GuestWhy = s.guestWhy
	}
	if s.nodeWhy == "" {
		zero.Node = dev("loop0", 0, 0, 0)
		cur.Node = dev("loop0", s.nodeOps, int64(float64(s.nodeOps)*s.nodeMs), 2)
	} else {
		cur.NodeWhy = s.nodeWhy
	}
	return Of(zero, cur, s.ctx)
}

func TestVerdicts(t *testing.T) {
	limit := Context{LimitPct: f(100), Limit: "iops_wr=200", Thread: "iothread-virtioscsi1", ThreadCPUPct: f(3)}
	for _, c := range []struct {
		name string
		s    scene
		want Verdict
		says string
	}{
		// fio at depth 32 against iops_wr=200: each request waits 32/200 s
		// in QEMU's throttle queue, the loop device takes a fraction of a
		// millisecond.
		{"limit", scene{guestOps: 2000, qemuOps: 2000, nodeOps: 2000, guestMs: 161, qemuMs: 160, nodeMs: 0.5, ctx: limit}, HeldIOLimit,
			"guest waits 161 ms per request, of which QEMU 160 ms, of which the storage 0.50 ms; held by QEMU: I/O limit: QEMU adds 160 ms (99%) at 100% of iops_wr=200"},
		{"limit at the edge", scene{guestOps: 10, qemuOps: 10, nodeOps: 10, guestMs: 20, qemuMs: 19, nodeMs: 1, ctx: Context{LimitPct: f(LimitHeldPct), Limit: "iops_wr=200"}}, HeldIOLimit, ""},
		{"under the limit, thread idle", scene{guestOps: 10, qemuOps: 10, nodeOps: 10, guestMs: 20, qemuMs: 19, nodeMs: 1, ctx: Context{LimitPct: f(89.9), Limit: "iops_wr=200", ThreadCPUPct: f(89.9)}}, HeldByQEMU,
			"guest waits 20.0 ms per request, of which QEMU 19.0 ms, of which the storage 1.00 ms; held by QEMU: QEMU adds 18.0 ms (90%)"},
		{"iothread busy", scene{guestOps: 10, qemuOps: 10, nodeOps: 10, guestMs: 20, qemuMs: 19, nodeMs: 1, ctx: Context{Thread: "iothread-virtio1", ThreadCPUPct: f(IOThreadBusyPct)}}, HeldIOThreadBusy,
			"guest waits 20.0 ms per request, of which QEMU 19.0 ms, of which the storage 1.00 ms; held by QEMU: iothread busy: QEMU adds 18.0 ms (90%), iothread-virtio1 at 90% of a core"},
		{"limit beats busy thread", scene{guestOps: 10, qemuOps: 10, nodeOps: 10, guestMs: 20, qemuMs: 19, nodeMs: 1, ctx: Context{LimitPct: f(100), Limit: "mbps_wr=20", ThreadCPUPct: f(100)}}, HeldIOLimit, ""},
		// The node device slowed (a throttled loop): QEMU passes the wait on.
		{"storage", scene{guestOps: 400, qemuOps: 400, nodeOps: 400, guestMs: 161, qemuMs: 160.5, nodeMs: 159, ctx: Context{ThreadCPUPct: f(2)}}, Storage,
			"guest waits 161 ms per request, of which QEMU 161 ms, of which the storage 159 ms; storage: the storage takes 159 ms (99%)"},
		// A throttled disk whose storage is slower still: the storage.
		{"storage behind a limit", scene{guestOps: 10, qemuOps: 10, nodeOps: 10, guestMs: 50, qemuMs: 50, nodeMs: 30, ctx: limit}, Storage, ""},
		{"QEMU and storage tie", scene{guestOps: 10, qemuOps: 10, nodeOps: 10, guestMs: 2, qemuMs: 2, nodeMs: 1, ctx: limit}, Storage, ""},
		{"guest queues", scene{guestOps: 100, qemuOps: 100, nodeOps: 100, guestMs: 50, qemuMs: 5, nodeMs: 4, ctx: limit}, QueuedInGuest,
			"guest waits 50.0 ms per request, of which QEMU 5.00 ms, of which the storage 4.00 ms; queued in the guest: the guest adds 45.0 ms (90%)"},
		{"guest ties QEMU", scene{guestOps: 10, qemuOps: 10, nodeOps: 10, guestMs: 20, qemuMs: 10, nodeMs: 0, ctx: limit}, HeldIOLimit, ""},
		// Guest unknown: the verdict is QEMU's or the storage's, the guest
		// named as not read.
		{"guest forbidden", scene{qemuOps: 2000, nodeOps: 2000, qemuMs: 160, nodeMs: 0.5, guestWhy: "the guest agent forbids guest-file-open and guest-exec", ctx: limit}, HeldIOLimit,
			"QEMU waits 160 ms per request (guest not read: the guest agent forbids guest-file-open and guest-exec), of which the storage 0.50 ms; held by QEMU: I/O limit: QEMU adds 160 ms (100%) at 100% of iops_wr=200"},
		// Node unknown: QEMU and the storage are one figure.
		{"no node device, guest queues", scene{guestOps: 100, qemuOps: 100, guestMs: 30, qemuMs: 10, nodeWhy: "librbd: no block device on the node", ctx: limit}, QueuedInGuest, ""},
		{"no node device", scene{guestOps: 10, qemuOps: 10, guestMs: 12, qemuMs: 10, nodeWhy: "librbd: no block device on the node", ctx: limit}, Unknown,
			"guest waits 12.0 ms per request, of which QEMU 10.0 ms, storage not read: librbd: no block device on the node; no verdict: QEMU's time is not split from the storage's: librbd: no block device on the node"},
		{"neither guest nor node", scene{qemuOps: 10, qemuMs: 10, guestWhy: "agent: 0", nodeWhy: "a file on NFS", ctx: limit}, Unknown, ""},
		{"idle", scene{ctx: limit}, Idle, "no read or write completed"},
		// The device's requests merged: fewer and longer than QEMU's. Its
		// part is QEMU's whole wait, no more (TestBenchEvidenceE2E's
		// cache=none sync job: 1.22 ms at QEMU, 1.31 ms at the loop).
		{"storage slower than QEMU", scene{guestOps: 100, qemuOps: 100, nodeOps: 50, guestMs: 1.3, qemuMs: 1.22, nodeMs: 1.32}, Storage,
			"guest waits 1.30 ms per request, of which QEMU 1.22 ms, of which the storage 1.32 ms (more than QEMU's: the device's requests are not QEMU's one for one; its part is counted as QEMU's whole wait); storage: the storage takes 1.22 ms (94%)"},
		// cache=writeback: the device's requests are the page cache's.
		{"page cache between", scene{guestOps: 100, qemuOps: 100, nodeOps: 10, guestMs: 0.3, qemuMs: 0.21, nodeMs: 2.9, ctx: Context{PageCache: "unsafe"}}, Unknown,
			"guest waits 0.30 ms per request, of which QEMU 0.21 ms, the device below the page cache 2.90 ms; no verdict: QEMU's time is not split from the storage's: cache=unsafe puts the node's page cache between QEMU and the device: the device's requests are its writeback and readahead, not the guest's"},
		{"page cache, guest queues", scene{guestOps: 100, qemuOps: 100, nodeOps: 10, guestMs: 30, qemuMs: 0.2, nodeMs: 2.9, ctx: Context{PageCache: "writeback"}}, QueuedInGuest, ""},
		// The real guest's depth-1 fsync writes under TCG: its driver adds
		// 0.8 ms to each, with half a request in flight: no queue.
		{"guest slower, no queue", scene{guestOps: 500, qemuOps: 500, nodeOps: 500, guestMs: 0.97, qemuMs: 0.13, nodeMs: 0.42}, Storage,
			"guest waits 0.97 ms per request, of which QEMU 0.13 ms, of which the storage 0.42 ms (more than QEMU's: the device's requests are not QEMU's one for one; its part is counted as QEMU's whole wait); storage: the storage takes 0.13 ms (13%)"},
		{"guest queue at the edge", scene{guestOps: 100, qemuOps: 100, nodeOps: 100, guestMs: 13, qemuMs: 3, nodeMs: 1}, QueuedInGuest, ""},
		{"guest queue under the edge", scene{guestOps: 100, qemuOps: 100, nodeOps: 100, guestMs: 12.9, qemuMs: 3, nodeMs: 1}, HeldByQEMU, ""},
		{"interval unknown", scene{guestOps: 100, qemuOps: 100, nodeOps: 100, guestMs: 50, qemuMs: 5, nodeMs: 4, noClock: true}, Storage, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := c.s.split()
			if s.Verdict != c.want {
				t.Errorf("verdict %q, want %q: %s", s.Verdict, c.want, s.Says)
			}
			if c.says != "" && s.Says != c.says {
				t.Errorf("says\n %q\nwant\n %q", s.Says, c.says)
			}
			// A layer not read is absent, with why, and takes no share.
			if c.s.guestWhy != "" && (s.Guest != nil || s.GuestUnknown != c.s.guestWhy) {
				t.Errorf("guest %+v (%q), want absent with %q", s.Guest, s.GuestUnknown, c.s.guestWhy)
			}
			if c.s.guestWhy == "" && (s.Guest == nil || s.GuestUnknown != "") {
				t.Errorf("guest read but absent: %q", s.GuestUnknown)
			}
			if c.s.nodeWhy != "" {
				if s.Storage != nil || s.StorageUnknown != c.s.nodeWhy || s.QEMU.AddsMs != nil || s.QEMU.AddsPct != nil {
					t.Errorf("storage %+v (%q), QEMU adds %v: want absent with %q, QEMU's share unsplit", s.Storage, s.StorageUnknown, s.QEMU.AddsMs, c.s.nodeWhy)
				}
				if strings.Contains(string(s.Verdict), "QEMU") || s.Verdict == Storage {
					t.Errorf("verdict %q guessed without the node device", s.Verdict)
				}
			}
			if c.s.ctx.PageCache != "" && (s.Storage == nil || s.StorageApart == "" || s.QEMU.AddsMs != nil || s.Storage.AddsMs != nil) {
				t.Errorf("behind the page cache: storage %+v apart %q, QEMU adds %v", s.Storage, s.StorageApart, s.QEMU.AddsMs)
			}
			for _, l := range []*Layer{s.Guest, s.QEMU, s.Storage} {
				if l != nil && l.AddsPct != nil && (*l.AddsPct < 0 || *l.AddsPct > 100) {
					t.Errorf("a share of %v %%", *l.AddsPct)
				}
			}
			if s.Verdict == Unknown && s.Why == "" || s.Verdict != Unknown && s.Why != "" {
				t.Errorf("verdict %q with why %q", s.Verdict, s.Why)
			}
		})
	}
}

// The shares: what each layer adds, of the top layer's wait, sum to 100 %
// where all three are read; the storage's mark of a shared device.
func TestShares(t *testing.T) {
	zero := Counters{Guest: dev("vdb", 0, 0, 0), QEMU: qemu(0, 0), Node: dev("sda", 0, 0, 0)}
	cur := Counters{Guest: dev("vdb", 100, 2000, 4), QEMU: qemu(100, 1500), Node: dev("sda", 300, 1500, 1), NodeShared: true}
	s := Of(zero, cur, Context{})
	if s.Guest.MsPerRequest != 20 || s.QEMU.MsPerRequest != 15 || s.Storage.MsPerRequest != 5 {
		t.Fatalf("ms per request %v %v %v, want 20 15 5", s.Guest.MsPerRequest, s.QEMU.MsPerRequest, s.Storage.MsPerRequest)
	}
	if *s.Guest.AddsPct != 25 || *s.QEMU.AddsPct != 50 || *s.Storage.AddsPct != 25 {
		t.Errorf("shares %v %v %v, want 25 50 25", *s.Guest.AddsPct, *s.QEMU.AddsPct, *s.Storage.AddsPct)
	}
	if s.Verdict != HeldByQEMU || !s.StorageShared || !strings.Contains(s.Says, "shared") {
		t.Errorf("verdict %q shared %v: %s", s.Verdict, s.StorageShared, s.Says)
	}
	if *s.Guest.InFlight != 4 || *s.Storage.InFlight != 1 || s.QEMU.InFlight != nil {
		t.Errorf("in flight %v %v %v", s.Guest.InFlight, s.Storage.InFlight, s.QEMU.InFlight)
	}
	if s.Guest.TimeMs != 2000 || s.QEMU.TimeMs != 1500 || s.Storage.TimeMs != 1500 {
		t.Errorf("time %v %v %v", s.Guest.TimeMs, s.QEMU.TimeMs, s.Storage.TimeMs)
	}
	// A device not shared is not said to be.
	cur.NodeShared = false
	if s := Of(zero, cur, Context{}); s.StorageShared || strings.Contains(s.Says, "shared") {
		t.Errorf("unshared device said shared: %s", s.Says)
	}
}

// Counters that went backwards, or another device under the name, make the
// layer absent, never a negative wait.
func TestCountersBack(t *testing.T) {
	a := Counters{Guest: dev("sdb", 100, 1000, 0), QEMU: qemu(100, 100), Node: dev("dm-3", 100, 100, 0)}
	b := Counters{Guest: dev("sdb", 50, 500, 0), QEMU: qemu(200, 200), Node: dev("dm-4", 200, 200, 0)}
	s := Of(a, b, Context{})
	if s.Guest != nil || !strings.Contains(s.GuestUnknown, "backwards") {
		t.Errorf("guest %+v %q", s.Guest, s.GuestUnknown)
	}
	if s.Storage != nil || s.StorageUnknown != "node device dm-3 became dm-4" {
		t.Errorf("storage %+v %q", s.Storage, s.StorageUnknown)
	}
	if s.Verdict != Unknown {
		t.Errorf("verdict %q", s.Verdict)
	}
	b.QEMU = qemu(50, 50)
	if s := Of(a, b, Context{}); s.QEMU != nil || s.Verdict != Idle || s.Why == "" {
		t.Errorf("QEMU backwards: %+v %q", s.QEMU, s.Verdict)
	}
}

func TestParseDiskstats(t *testing.T) {
	b := mustRead(t, "testdata/diskstats-6.18.txt")
	m := sampler.ParseDiskstats(b + "\n  7 3 short 1 2\n")
	if len(m) != 2 {
		t.Fatalf("%d devices: %v", len(m), m)
	}
	l := m["loop1"]
	want := sampler.BlockStat{Device: "loop1", ReadIOs: 144285, ReadSectors: 55020049, ReadTicksMs: 21260, WriteIOs: 158231, WriteSectors: 47136358,
		WriteTicksMs: 26854, InFlight: 0, IOTicksMs: 12800, QueueTicksMs: 49410, DiscardIOs: 64, DiscardSectors: 2048, FlushIOs: 5922, FlushTicksMs: 1293}
	if l != want {
		t.Errorf("loop1 %+v\nwant %+v", l, want)
	}
}
