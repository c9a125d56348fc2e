package flush

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/storage"
	"github.com/pvediskcheck/pvediskcheck/storage/zfs"
)

const mib = 1 << 20

func load(t *testing.T, name string) Result {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// input is a disk's Input for a Proxmox mode on a backend.
func input(disk, mode string, b storage.Backend, format string, samples []Sample) Input {
	c := qemuserver.CacheOf(mode)
	return Input{Disk: disk, Cache: c, Writes: storage.WritesFor(b, c, format), Samples: samples}
}

// TestJudgeRecorded judges series recorded from real QEMU (testdata/README.md)
// and must give the verdict and the reason the CLI printed then.
func TestJudgeRecorded(t *testing.T) {
	for _, c := range []struct {
		file, disk, mode string
		backend          storage.Backend
		format           string
		want             Verdict
		timingOnly       bool
	}{
		{"real-no-guest.json", "scsi1", "none", storage.Block, "raw", NotApplicable, false},
		{"real-no-guest.json", "scsi2", "writeback", storage.Block, "raw", NoFlushes, false},
		{"real-no-guest.json", "scsi3", "writeback", storage.File, "raw", ZeroData, false},
		{"real-storages.json", "scsi1", "writeback", storage.File, "raw", NoFlushes, false},
		{"real-storages.json", "scsi2", "writeback", storage.File, "qcow2", NoFlushes, false},
		{"real-storages.json", "scsi3", "writeback", storage.Block, "raw", NoFlushes, false},
		{"real-storages.json", "scsi4", "none", storage.File, "qcow2", NoFlushes, true},
		{"real-storages.json", "scsi5", "none", storage.File, "raw", NotApplicable, false},
		{"real-sigstop-3s.json", "scsi1", "writeback", storage.Block, "raw", NoFlushes, false},
		{"real-sigkill.json", "scsi1", "writeback", storage.Block, "raw", NoFlushes, false},
	} {
		r := load(t, c.file)
		var rec *Judgement
		for i := range r.Verdicts {
			if r.Verdicts[i].Disk == c.disk {
				rec = &r.Verdicts[i]
			}
		}
		j := Judge(input(c.disk, c.mode, c.backend, c.format, r.Samples))
		if j.Verdict != c.want || j.TimingOnly != c.timingOnly || j.Backend != string(c.backend) || j.Mode != c.mode {
			t.Errorf("%s %s: %s timing_only=%v backend %s mode %s, want %s %v", c.file, c.disk, j.Verdict, j.TimingOnly, j.Backend, j.Mode, c.want, c.timingOnly)
		}
		if rec == nil || j.Reason+standsOn(&r) != rec.Reason || j.Verdict != rec.Verdict || j.WrittenBytes != rec.WrittenBytes || j.Flushes != rec.Flushes {
			t.Errorf("%s %s: judged %+v\nrecorded %+v", c.file, c.disk, j, rec)
		}
	}
}

// pt is one point of a synthetic series for disk "scsi1" (and "scsi2", a
// second disk of the same QEMU that writes other2 bytes).
type pt struct {
	t                    float64
	wr, flushes, flushNs int64
	qemuWr               int64 // /proc/PID/io write_bytes
	cached, dirty, wb    int64 // the volume's page cache (cachestat)
	nodeDirty, nodeWB    int64
	other2               int64
}

// The counters of a running VM do not start at 0: every cumulative counter
// of a synthetic series starts from these.
const (
	wrBase, qemuBase, cachedBase = 3000 * mib, 9000 * mib, 700 * mib
	flushBase, flushNsBase       = 40, 2_500_000_000
	otherBase                    = 123 * mib
)

func series(pc bool, pts ...pt) []Sample {
	var out []Sample
	for _, p := range pts {
		s := Sample{TimeS: p.t, DirtyBytes: p.nodeDirty, WritebackBytes: p.nodeWB, QEMUWriteBytes: qemuBase + p.qemuWr,
			Disks: map[string]DiskStat{"scsi1": {wrBase + p.wr, flushBase + p.flushes, flushNsBase + p.flushNs}, "scsi2": {WrBytes: otherBase + p.other2}}}
		if pc {
			s.Volumes = map[string]sampler.PageCache{"scsi1": {CachedBytes: cachedBase + p.cached, DirtyBytes: p.dirty, WritebackBytes: p.wb}}
		}
		out = append(out, s)
	}
	return out
}

// The shapes the guest tier recorded (TestE2EFlushFiveModes, README's flush
// example): a guest writes 64-128 MiB of non-zero data with O_DIRECT and
// fsyncs. Built here because qemu-io cannot send an honest flush.
var (
	// writeback: the data enters the volume's page cache, the fsync's
	// flush takes 73.86 ms and leaves nothing dirty.
	honoredWriteback = series(true,
		pt{t: 0},
		pt{t: 1, wr: 64 * mib, qemuWr: 64 * mib, cached: 64 * mib, dirty: 64 * mib, nodeDirty: 200 * mib},
		pt{t: 2, wr: 64 * mib, flushes: 1, flushNs: 73_860_000, qemuWr: 64 * mib, cached: 64 * mib, nodeDirty: 143 * mib},
	)
	// unsafe: the flush is counted, takes 0.016 ms, and the 64 MiB stay
	// dirty.
	ignoredUnsafe = series(true,
		pt{t: 0},
		pt{t: 1, wr: 64 * mib, qemuWr: 64 * mib, cached: 64 * mib, dirty: 64 * mib, nodeDirty: 143 * mib},
		pt{t: 2, wr: 64 * mib, flushes: 1, flushNs: 16_000, qemuWr: 64 * mib, cached: 64 * mib, dirty: 64 * mib, nodeDirty: 143 * mib},
	)
)

func TestJudgeGuestShapes(t *testing.T) {
	j := Judge(input("scsi1", "writeback", storage.File, "raw", honoredWriteback))
	if j.Verdict != Honored || j.MeanFlushMs != 73.86 || j.CrashLosesBytes != 0 || !strings.Contains(j.Reason, "1 flush(es) took 73.9 ms (73.86 ms each)") {
		t.Errorf("writeback: %+v", j)
	}
	// Pages under writeback are still in node RAM: a crash loses them too.
	s := series(true, pt{t: 0}, pt{t: 1, wr: 64 * mib, flushes: 1, flushNs: 16_000, qemuWr: 64 * mib, cached: 64 * mib, dirty: 60 * mib, wb: 4 * mib})
	if j := Judge(input("scsi1", "unsafe", storage.File, "raw", s)); j.Verdict != Ignored || j.CrashLosesBytes != 64*mib {
		t.Errorf("unsafe with writeback pages: %+v", j)
	}
	j = Judge(input("scsi1", "unsafe", storage.File, "raw", ignoredUnsafe))
	if j.Verdict != Ignored || j.CrashLosesBytes != 64*mib || !strings.Contains(j.Reason, "this volume's dirty+writeback pages now 64.0 MiB") || !strings.HasSuffix(j.Reason, "(QEMU runs this disk with cache.no-flush: cache=unsafe)") {
		t.Errorf("unsafe: %+v", j)
	}
}

// TestJudgeOneMillisecond is the edge the 1 ms rule exists for: a
// writeback disk whose 64 MiB stay dirty after a flush of 0.9 ms mean is
// ignored; at 1.0 and 1.1 ms it is honored.
func TestJudgeOneMillisecond(t *testing.T) {
	for _, c := range []struct {
		flushNs int64 // for 2 flushes
		want    Verdict
	}{
		{1_800_000, Ignored},
		{1_999_998, Ignored},
		{2_000_000, Honored},
		{2_200_000, Honored},
	} {
		s := series(true,
			pt{t: 0},
			pt{t: 1, wr: 64 * mib, flushes: 2, flushNs: c.flushNs, qemuWr: 64 * mib, cached: 64 * mib, dirty: 64 * mib},
		)
		if j := Judge(input("scsi1", "writeback", storage.Block, "raw", s)); j.Verdict != c.want {
			t.Errorf("mean %.4f ms: %s (%s), want %s", float64(c.flushNs)/2e6, j.Verdict, j.Reason, c.want)
		}
	}
	// Fast flushes with nothing held (writeback, data already written
	// back): honored, nothing was waiting.
	s := series(true, pt{t: 0}, pt{t: 1, wr: 64 * mib, flushes: 2, flushNs: 1_800_000, qemuWr: 64 * mib, cached: 64 * mib})
	if j := Judge(input("scsi1", "writeback", storage.Block, "raw", s)); j.Verdict != Honored || !strings.Contains(j.Reason, "0.900 ms each: nothing of this disk was waiting") {
		t.Errorf("nothing held: %+v", j)
	}
	// Without cachestat, node Dirty stands in and what a crash loses is at
	// most what the guest wrote.
	s = series(false, pt{t: 0}, pt{t: 1, wr: 32 * mib, flushes: 1, flushNs: 20_000, qemuWr: 32 * mib, nodeDirty: 500 * mib, nodeWB: 4 * mib})
	if j := Judge(input("scsi1", "unsafe", storage.Block, "raw", s)); j.Verdict != Ignored || j.CrashLosesBytes != 32*mib || !strings.Contains(j.Reason, "node Dirty+Writeback now 504.0 MiB") {
		t.Errorf("without cachestat: %+v", j)
	}
	s = series(false, pt{t: 0}, pt{t: 1, wr: 32 * mib, flushes: 1, flushNs: 20_000, qemuWr: 32 * mib, nodeDirty: 8 * mib})
	if j := Judge(input("scsi1", "unsafe", storage.Block, "raw", s)); j.CrashLosesBytes != 8*mib {
		t.Errorf("crash loses %d, want what node RAM holds (8 MiB)", j.CrashLosesBytes)
	}
}

// TestJudgeZeroData is the 10 % edge: data reached the node when at least
// a tenth of what the guest wrote shows up, and 1 MiB must be written
// before "none of it" means zeroes.
func TestJudgeZeroData(t *testing.T) {
	for _, c := range []struct {
		name string
		pc   bool
		p    pt
		want Verdict
	}{
		{"write_bytes 10 %", false, pt{wr: 100 * mib, qemuWr: 10 * mib}, NoFlushes},
		{"write_bytes just below 10 %", false, pt{wr: 100 * mib, qemuWr: 10*mib - 1}, ZeroData},
		{"other disk's data does not count", false, pt{wr: 100 * mib, qemuWr: 60 * mib, other2: 55 * mib}, ZeroData},
		{"cache growth 10 %", true, pt{wr: 100 * mib, cached: 10 * mib}, NoFlushes},
		{"cache growth below 10 %", true, pt{wr: 100 * mib, cached: 10*mib - 1}, ZeroData},
		{"dirty at the end 10 %", true, pt{wr: 100 * mib, dirty: 10 * mib}, NoFlushes},
		{"writeback at the end 10 %", true, pt{wr: 100 * mib, wb: 10 * mib}, NoFlushes},
		{"cachestat wins over write_bytes", true, pt{wr: 100 * mib, qemuWr: 100 * mib}, ZeroData},
		{"1 MiB of zeroes", false, pt{wr: mib}, ZeroData},
		{"less than 1 MiB: too little to tell", false, pt{wr: mib - 1}, NoFlushes},
	} {
		c.p.t = 1
		j := Judge(input("scsi1", "writeback", storage.Block, "raw", series(c.pc, pt{}, c.p)))
		if j.Verdict != c.want {
			t.Errorf("%s: %s (%s), want %s", c.name, j.Verdict, j.Reason, c.want)
		}
	}
	// Held pages count at their peak in the window, over the start.
	s := series(true, pt{t: 0, dirty: 50 * mib}, pt{t: 1, wr: 100 * mib, dirty: 60 * mib}, pt{t: 2, wr: 100 * mib})
	if j := Judge(input("scsi1", "writeback", storage.Block, "raw", s)); j.Verdict != NoFlushes {
		t.Errorf("peak 10 MiB over the start: %s", j.Verdict)
	}
	s = series(true, pt{t: 0, dirty: 50 * mib}, pt{t: 1, wr: 100 * mib, dirty: 60*mib - 1}, pt{t: 2, wr: 100 * mib})
	if j := Judge(input("scsi1", "writeback", storage.Block, "raw", s)); j.Verdict != ZeroData {
		t.Errorf("peak just under 10 MiB: %s", j.Verdict)
	}
	// The start's writeback pages count in the base as its dirty ones do.
	s = series(true, pt{t: 0, wb: 50 * mib}, pt{t: 1, wr: 100 * mib, dirty: 59 * mib}, pt{t: 2, wr: 100 * mib})
	if j := Judge(input("scsi1", "writeback", storage.Block, "raw", s)); j.Verdict != ZeroData {
		t.Errorf("9 MiB over a base of writeback pages: %s", j.Verdict)
	}
	s = series(true, pt{t: 0}, pt{t: 1, wr: 100 * mib, wb: 10 * mib}, pt{t: 2, wr: 100 * mib})
	if j := Judge(input("scsi1", "writeback", storage.Block, "raw", s)); j.Verdict != NoFlushes {
		t.Errorf("10 MiB under writeback in the window: %s", j.Verdict)
	}
}

// TestJudgeNotApplicable: every mode and storage that keeps nothing
// acknowledged waiting on this node, with its own reason.
func TestJudgeNotApplicable(t *testing.T) {
	s := series(true, pt{t: 0}, pt{t: 1, wr: 8 * mib, flushes: 2, flushNs: 30_000_000, qemuWr: 8 * mib})
	for _, c := range []struct {
		mode    string
		backend storage.Backend
		reason  string
	}{
		{"none", storage.File, "cache=none opens the volume with O_DIRECT: nothing is held in node RAM (8.0 MiB written, 2 flushes taking 30.0 ms); flushes reach the storage's own cache"},
		{"directsync", storage.Block, "cache=directsync opens the volume with O_DIRECT: nothing is held in node RAM (8.0 MiB written, 2 flushes taking 30.0 ms)"},
		{"writethrough", storage.Block, "cache=writethrough: QEMU writes every write through to storage before acknowledging it, so nothing acknowledged waits in node RAM (8.0 MiB written)"},
		{"none", storage.KRBD, "cache=none opens the volume with O_DIRECT"},
		{"none", storage.Librbd, "cache=none turns librbd's cache off (rbd_cache=false): a write is acknowledged once all replicas have it (8.0 MiB written, 2 flushes taking 30.0 ms)"},
		{"directsync", storage.Librbd, "cache=directsync turns librbd's cache off"},
		{"writethrough", storage.Librbd, "cache=writethrough: librbd's cache is on, but QEMU flushes every write"},
		{"none", storage.Libiscsi, "QEMU's libiscsi sends writes straight to the iSCSI target: nothing is held on this node (8.0 MiB written, 2 flushes taking 30.0 ms); flushes reach the target's write cache"},
		{"writeback", storage.Libiscsi, "flushes reach the target's write cache"},
		{"writethrough", storage.Libiscsi, "nothing is held on this node (8.0 MiB written, 2 flushes taking 30.0 ms)"},
		{"writethrough", storage.Zvol, "cache=writethrough: QEMU flushes every write (a ZIL commit) before acknowledging it, so nothing acknowledged waits in ZFS's open transaction group (8.0 MiB written)"},
		{"directsync", storage.Zvol, "cache=directsync: QEMU flushes every write (a ZIL commit)"},
	} {
		j := Judge(input("scsi1", c.mode, c.backend, "raw", s))
		if j.Verdict != NotApplicable || !strings.Contains(j.Reason, c.reason) || j.TimingOnly {
			t.Errorf("%s on %s: %s %q", c.mode, c.backend, j.Verdict, j.Reason)
		}
		if (c.backend == storage.Libiscsi && c.mode == "writethrough") && strings.Contains(j.Reason, "target's write cache") {
			t.Errorf("writethrough on libiscsi: no write cache to reach: %q", j.Reason)
		}
	}
}

// TestJudgeTimingOnly: storage whose acknowledged writes the node cannot
// see is judged from QEMU's flags and the flush timing, and says so.
func TestJudgeTimingOnly(t *testing.T) {
	mk := func(wr, flushes, flushNs, qemuWr int64) []Sample {
		return series(false, pt{t: 0, nodeDirty: 300 * mib}, pt{t: 1, wr: wr, flushes: flushes, flushNs: flushNs, qemuWr: qemuWr, nodeDirty: 900 * mib})
	}
	for _, c := range []struct {
		name    string
		mode    string
		backend storage.Backend
		format  string
		s       []Sample
		want    Verdict
		reason  []string
	}{
		{"zvol, ZIL commit took time", "none", storage.Zvol, "raw", mk(64*mib, 1, 12_000_000, 64*mib), Honored,
			[]string{"1 flush(es) took 12.0 ms (12.00 ms each): each was a ZIL commit", "not measurable from the node: ZFS's open transaction group", "rests on QEMU's flags and the flush timing"}},
		{"zvol, a fast flush: nothing waited or sync=disabled", "none", storage.Zvol, "raw", mk(64*mib, 2, 100_000, 64*mib), Inconclusive,
			[]string{"2 flush(es), 0.050 ms each, after 64.0 MiB written", "either nothing was waiting or the zvol has sync=disabled"}},
		{"zvol, no flush", "none", storage.Zvol, "raw", mk(64*mib, 0, 0, 64*mib), NoFlushes,
			[]string{"the guest sent no flush in the window (64.0 MiB written)", "ZFS's open transaction group"}},
		{"zvol, zeroes", "none", storage.Zvol, "raw", mk(64*mib, 1, 12_000_000, 0), ZeroData,
			[]string{"QEMU sent none of it as data"}},
		{"qcow2 none, fast: QEMU always writes its metadata cache", "none", storage.File, "qcow2", mk(8*mib, 1, 200_000, 8*mib), Honored,
			[]string{"nothing was waiting", "qcow2 metadata cache"}},
		{"librbd writeback, fast flush honoured by librbd", "writeback", storage.Librbd, "raw", mk(8*mib, 1, 300_000, 0), Honored,
			[]string{"each was librbd writes its cache to the OSDs, and nothing was waiting", "librbd's cache lives in the QEMU process", "(whether the writes were zeroes cannot be told either)"}},
		{"librbd writeback, slow flush", "writeback", storage.Librbd, "raw", mk(8*mib, 1, 9_000_000, 0), Honored,
			[]string{"took 9.0 ms"}},
		{"librbd writeback: zeroes cannot be told", "writeback", storage.Librbd, "raw", mk(64*mib, 0, 0, 0), NoFlushes,
			[]string{"no flush", "librbd's cache"}},
		{"librbd unsafe", "unsafe", storage.Librbd, "raw", mk(64*mib, 3, 30_000, 0), Ignored,
			[]string{"3 flush(es) counted but took 0.030 ms in all: QEMU runs this disk with cache.no-flush", "cannot be measured from the node: librbd's cache"}},
		{"libiscsi unsafe", "unsafe", storage.Libiscsi, "raw", mk(64*mib, 1, 10_000, 0), Ignored,
			[]string{"iSCSI target's write cache is on another machine"}},
		{"libiscsi unsafe, no flush", "unsafe", storage.Libiscsi, "raw", mk(64*mib, 0, 0, 0), NoFlushes, nil},
	} {
		j := Judge(input("scsi1", c.mode, c.backend, c.format, c.s))
		if j.Verdict != c.want || !j.TimingOnly || j.CrashLosesBytes != 0 {
			t.Errorf("%s: %s timing_only=%v crash %d (%s), want %s", c.name, j.Verdict, j.TimingOnly, j.CrashLosesBytes, j.Reason, c.want)
		}
		for _, r := range c.reason {
			if !strings.Contains(j.Reason, r) {
				t.Errorf("%s: reason %q lacks %q", c.name, j.Reason, r)
			}
		}
	}
	// zvol writeback and unsafe: the page cache part is visible, ZFS is not.
	j := Judge(input("scsi1", "unsafe", storage.Zvol, "raw", ignoredUnsafe))
	if j.Verdict != Ignored || j.TimingOnly || j.CrashLosesBytes != 64*mib || !strings.HasSuffix(j.Reason, "; not measurable from the node: ZFS's open transaction group (ZFS's dirty data is not in Dirty, Writeback or cachestat)") {
		t.Errorf("zvol unsafe: %+v", j)
	}
}

func TestJudgeDeviceCounters(t *testing.T) {
	s := series(false, pt{t: 0}, pt{t: 1, wr: 8 * mib, qemuWr: 8 * mib})
	s[0].DeviceFlushIOs, s[0].DeviceWriteSect = map[string]int64{"scsi1": 5}, map[string]int64{"scsi1": 1000}
	s[1].DeviceFlushIOs, s[1].DeviceWriteSect = map[string]int64{"scsi1": 7}, map[string]int64{"scsi1": 3048}
	j := Judge(input("scsi1", "writeback", storage.Block, "raw", s))
	if j.DeviceFlushes == nil || *j.DeviceFlushes != 2 || *j.DeviceWriteBytes != 2048*512 {
		t.Errorf("device counters %v %v", j.DeviceFlushes, j.DeviceWriteBytes)
	}
	if j := Judge(input("scsi1", "writeback", storage.File, "raw", series(false, pt{}, pt{t: 1}))); j.DeviceFlushes != nil || j.DeviceWriteBytes != nil || j.MeanFlushMs != 0 {
		t.Errorf("a file has no device counters: %+v", j)
	}
}

// TestJudgeZFSProperty: what `zfs get` says of the zvol decides where the
// counters cannot: sync=disabled is ignored flushes whatever the window
// shows (even with no flush, or writethrough); sync=standard turns a fast
// flush into honoured; unknown properties leave the timing verdict, saying
// why.
func TestJudgeZFSProperty(t *testing.T) {
	mk := func(flushes, flushNs int64) []Sample {
		return series(false, pt{t: 0}, pt{t: 1, wr: 64 * mib, flushes: flushes, flushNs: flushNs, qemuWr: 64 * mib})
	}
	disabled := &zfs.Zvol{Dataset: "rpool/data/vm-100-disk-1", Sync: zfs.SyncDisabled}
	standard := &zfs.Zvol{Dataset: "rpool/data/vm-100-disk-1", Sync: zfs.SyncStandard}
	unknown := &zfs.Zvol{Dataset: "rpool/data/vm-100-disk-1", Unknown: "`zfs get` failed: exit status 1"}
	for _, c := range []struct {
		name   string
		mode   string
		z      *zfs.Zvol
		s      []Sample
		want   Verdict
		reason string
	}{
		{"disabled, fast flushes", "none", disabled, mk(2, 100_000), Ignored, "zfs get: the zvol rpool/data/vm-100-disk-1 has sync=disabled: ZFS completes the guest's flushes without writing anything"},
		{"disabled, slow flushes still lost", "none", disabled, mk(1, 12_000_000), Ignored, "known from the property, not measured: 1 flush(es) taking 12.000 ms in the window, 64.0 MiB written"},
		{"disabled, no flush in the window", "none", disabled, mk(0, 0), Ignored, "(zfs set sync=standard rpool/data/vm-100-disk-1)"},
		{"disabled under writethrough", "writethrough", disabled, mk(5, 50_000), Ignored, "the same loss as cache=unsafe"},
		{"standard, fast flush", "none", standard, mk(2, 100_000), Honored, "zfs get says the zvol rpool/data/vm-100-disk-1 has sync=standard (not disabled)"},
		{"standard, slow flush: as before", "none", standard, mk(1, 12_000_000), Honored, "1 flush(es) took 12.0 ms"},
		{"standard, writethrough: as before", "writethrough", standard, mk(5, 50_000), NotApplicable, "cache=writethrough: QEMU flushes every write"},
		{"unknown, fast flush", "none", unknown, mk(2, 100_000), Inconclusive, "ZFS then completes flushes without writing (zfs get could not tell: `zfs get` failed: exit status 1)"},
	} {
		in := input("scsi1", c.mode, storage.Zvol, "raw", c.s)
		in.ZFS = c.z
		j := Judge(in)
		if j.Verdict != c.want || !strings.Contains(j.Reason, c.reason) {
			t.Errorf("%s: %s %q, want %s with %q", c.name, j.Verdict, j.Reason, c.want, c.reason)
		}
	}
}
