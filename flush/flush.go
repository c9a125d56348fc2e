// Package flush measures whether a VM's guest flushes are honoured: it
// samples each disk's write and flush counters (query-blockstats through
// the shared sampler), the node's page-cache state and the QEMU process's
// own write_bytes over a window, and judges each disk from that series with
// a pure Judge.
//
// Where acknowledged writes sit depends on the storage (package storage):
// on storage reached through the node page cache the tool can see data
// waiting in node RAM; for librbd's cache, ZFS's open transaction group or
// an iSCSI target it cannot, and the verdict then rests on QEMU's flags and
// the flush timing alone, and says so.
package flush

import (
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// Verdict is the judgement of one disk's flushes over a window.
type Verdict string

// Verdicts.
const (
	// Honored: guest flushes took time (the data went to storage), or the
	// flags prove they reach a layer that always writes what it holds.
	Honored Verdict = "honored"
	// Ignored: flushes were counted but took ~0 time while the disk's
	// data stayed in node RAM, or QEMU runs the disk with cache.no-flush.
	// A host crash loses what the guest believes is safe: exit 1.
	Ignored Verdict = "ignored"
	// NoFlushes: the guest sent no flush in the window.
	NoFlushes Verdict = "no-flushes"
	// ZeroData: the guest wrote only zeroes, which Proxmox's detect-zeroes
	// turns into write-zeroes: nothing reached node RAM to judge.
	ZeroData Verdict = "zero-data"
	// NotApplicable: the mode and storage keep nothing acknowledged waiting
	// on this node (O_DIRECT on a plain volume, writethrough, directsync,
	// librbd with its cache off, an iSCSI target).
	NotApplicable Verdict = "not-applicable"
	// Inconclusive: flushes reached a layer the node cannot see (a zvol,
	// an iSCSI target) and completed too fast to have written anything:
	// either nothing was waiting or that layer completes flushes without
	// writing, which no counter here can tell apart.
	Inconclusive Verdict = "inconclusive"
)

// IgnoredBelow is the 1 ms rule: a flush that takes less than this on
// average did not write anything. QEMU with cache.no-flush completes a
// flush at once (measured 0.006-0.1 ms on a loaded machine here; the README
// example: 0.016 ms), while a real flush of written data took 32-218 ms
// (guest fio with end_fsync, TestE2EFlushFiveModes: writeback 73.9 ms for
// 64 MiB; QEMU-FACTS: none 78 ms, writeback 218 ms for 128 MiB).
const IgnoredBelow = time.Millisecond

// ZeroDataMinBytes is how much a disk must write in the window before
// "none of it entered node RAM" means zeroes: below it, too little was
// written to tell.
const ZeroDataMinBytes = 1 << 20

// RealDataPercent: data reached the node when at least this share of the
// bytes the guest wrote shows up as QEMU's own write_bytes, as page cache
// growth or as dirty pages of the volume. Measured (QEMU-FACTS "Zero data
// proves nothing"): 128 MiB of zeroes on writeback left Dirty at 0 and
// write_bytes at 0, while 128 MiB of data showed 128 MiB; page cache
// accounting and writeback overlap make the real-data share somewhat less
// than 100 %, never near 0 - 10 % separates the two with a wide margin.
const RealDataPercent = 10

// DefaultWindow is the measurement window when the caller gives none.
const DefaultWindow = 15 * time.Second

// MaxWindow bounds --for (flush, cache --verify): ten minutes of samples
// at 10 Hz; a window longer says nothing a shorter one does not.
const MaxWindow = 10 * time.Minute

// DefaultHz is the sampling rate when the caller gives none.
const DefaultHz = 4

// MaxHz is the fastest sampling --hz takes (each sample is one QMP
// exchange); 2 the slowest.
const MaxHz = 10

// GapIntervals: two consecutive samples further apart than this many
// sampling intervals leave a gap (a tick that QMP did not answer).
const GapIntervals = 1.5

// Sample is one point of the time series (units in the names).
type Sample struct {
	TimeS           float64                      `json:"t_s"`
	DirtyBytes      int64                        `json:"dirty_bytes"`
	WritebackBytes  int64                        `json:"writeback_bytes"`
	QEMUWriteBytes  int64                        `json:"qemu_write_bytes"`
	Disks           map[string]DiskStat          `json:"disks"`
	Volumes         map[string]sampler.PageCache `json:"volume_page_cache,omitempty"`
	DeviceFlushIOs  map[string]int64             `json:"device_flush_ios,omitempty"`
	DeviceWriteSect map[string]int64             `json:"device_write_sectors,omitempty"`
	// CgroupUnflushedBytes is the VM's cgroup's memory.stat dirty plus
	// writeback (package sampler); null when not measured.
	CgroupUnflushedBytes *int64 `json:"cgroup_unflushed_bytes,omitempty"`
}

// DiskStat is one disk's query-blockstats counters in a sample.
type DiskStat struct {
	WrBytes          int64 `json:"wr_bytes"`
	FlushOps         int64 `json:"flush_operations"`
	FlushTotalTimeNs int64 `json:"flush_total_time_ns"`
}

// Judgement is the verdict on one disk, with the figures it rests on.
type Judgement struct {
	Disk             string  `json:"disk"`
	Mode             string  `json:"mode"`
	Verdict          Verdict `json:"verdict"`
	Reason           string  `json:"reason"`
	WrittenBytes     int64   `json:"written_bytes"`
	Flushes          int64   `json:"flushes"`
	FlushTimeMs      float64 `json:"flush_time_ms"`
	MeanFlushMs      float64 `json:"mean_flush_ms"`
	CrashLosesBytes  int64   `json:"crash_loses_bytes,omitempty"`
	DeviceFlushes    *int64  `json:"device_flushes,omitempty"`
	DeviceWriteBytes *int64  `json:"device_write_bytes,omitempty"`
	// Backend is how QEMU reaches the volume (storage.Backend): file,
	// block, krbd, zvol, librbd, libiscsi, unknown.
	Backend string `json:"backend"`
	// TimingOnly: the layer holding acknowledged writes is invisible to
	// the node's counters, so the verdict rests on QEMU's flags and the
	// flush timing.
	TimingOnly bool `json:"timing_only"`
	// SampledS is how much of the window the samples cover (the window
	// less its gaps); the verdict stands on that much.
	SampledS float64 `json:"sampled_s"`
}

// Gap is a stretch of the window without samples.
type Gap struct {
	FromS float64 `json:"from_s"`
	ToS   float64 `json:"to_s"`
	// Missed is the number of samples due in the gap.
	Missed int    `json:"missed_samples"`
	Why    string `json:"why"`
}

// Seconds is the gap's length.
func (g Gap) Seconds() float64 { return g.ToS - g.FromS }

// Result is one measurement: the series, its gaps and a verdict per disk.
type Result struct {
	VMID    int     `json:"vmid"`
	WindowS float64 `json:"window_s"`
	Trigger bool    `json:"trigger"`
	// IntervalS is the sampling interval (1/hz).
	IntervalS float64  `json:"interval_s"`
	Samples   []Sample `json:"samples"`
	// Gaps are the stretches without samples (QEMU stopped or killed, the
	// QMP socket held by another client); [] when the series is whole.
	Gaps []Gap `json:"gaps"`
	// SampledS is how much of the window the samples cover.
	SampledS float64     `json:"sampled_s"`
	Verdicts []Judgement `json:"verdicts"`
	// Percentiles are each disk's latency percentiles over the window
	// (flush_p50_ms ...) from latency histograms (--histogram), and
	// Histograms what was done about them; both omitted without.
	Percentiles map[string]latency.Percentiles `json:"latency_percentiles,omitempty"`
	Histograms  []latency.Note                 `json:"histograms,omitempty"`
	// HistogramsLeft are the latency histograms of pvediskcheck's on the
	// disks that this run did not set (latency.Leftover: a run killed
	// before it could clear them), each with the command that clears it;
	// with or without --histogram, omitted when none.
	HistogramsLeft []latency.Leftover `json:"histograms_left,omitempty"`
	// Unflushed is the VM's page cache in node RAM from its cgroup at the
	// window's start and end: it must fall for writeback, stay for unsafe.
	Unflushed *Unflushed `json:"unflushed,omitempty"`
}

// Ignored reports whether any disk's flushes are ignored (exit 1).
func (r *Result) Ignored() bool {
	for _, j := range r.Verdicts {
		if j.Verdict == Ignored {
			return true
		}
	}
	return false
}

// Validate checks a window and a sampling rate as the numbers they are.
func Validate(window time.Duration, hz float64) error {
	if !(hz >= 2 && hz <= MaxHz) {
		return exitcode.Usagef("--hz %g: use 2 to 10 samples per second", hz)
	}
	if window < time.Second {
		return exitcode.Usagef("--for %s: the window must be at least 1s", window)
	}
	if window > MaxWindow {
		return exitcode.Usagef("--for %s: at most %s", window, units.Short(MaxWindow))
	}
	return nil
}
