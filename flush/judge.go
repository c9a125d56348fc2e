package flush

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/storage"
	"github.com/pvediskcheck/pvediskcheck/storage/zfs"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// Input is what Judge needs about one disk: the cache QEMU runs it with,
// what its storage does with writes, and the series.
type Input struct {
	Disk string
	// Cache is the effective cache (vm.Disk.Effective): the flags QEMU runs
	// the disk with (the format node's cache options, the device's
	// write-cache) and the Proxmox mode they amount to.
	Cache qemuserver.Cache
	// Writes is what the disk's storage does with writes in this mode.
	Writes  storage.Writes
	Samples []Sample
	// ZFS is the disk's zvol as `zfs get` reports it (nil for a disk on
	// any other storage, or when not read): sync=disabled decides the
	// verdict without the counters.
	ZFS *zfs.Zvol
}

// InputFor builds a resolved disk's Input: its effective cache (the live
// flags when QMP gave them, else the running command line's; cache=none's
// for a disk that does not run), what its storage does with writes in it,
// and its zvol where it is one.
func InputFor(d *disk.Disk, samples []Sample) Input {
	in := Input{Disk: d.ID, Cache: qemuserver.CacheOf("none"), Samples: samples, ZFS: d.ZFS}
	var run *qemuserver.DiskSettings
	if g := d.Graph; g != nil {
		in.Cache, run = g.Effective, &g.DiskSettings
	}
	in.Writes = storage.ForDisk(d.Storage, run, in.Cache)
	return in
}

// evidence is what the series says about one disk.
type evidence struct {
	written, flushes int64
	flushNs          int64
	hasPC            bool  // the volume's own page cache was read (cachestat)
	cacheGrowth      int64 // growth of the volume's cached pages
	maxHeld, endHeld int64 // dirty+writeback bytes: most above the start, at the end
	qemuWritten      int64 // this QEMU's write_bytes less what its other disks wrote
}

func (e evidence) meanFlushMs() float64 {
	if e.flushes == 0 {
		return 0
	}
	return float64(e.flushNs) / 1e6 / float64(e.flushes)
}

// fast is the 1 ms rule.
func (e evidence) fast() bool { return e.meanFlushMs()*1e6 < float64(IgnoredBelow) }

// share reports x >= RealDataPercent of the bytes written.
func (e evidence) share(x int64) bool { return x*100 >= e.written*RealDataPercent }

func collect(disk string, samples []Sample) evidence {
	first, last := samples[0], samples[len(samples)-1]
	a, b := first.Disks[disk], last.Disks[disk]
	e := evidence{written: b.WrBytes - a.WrBytes, flushes: b.FlushOps - a.FlushOps, flushNs: b.FlushTotalTimeNs - a.FlushTotalTimeNs}
	_, e.hasPC = first.Volumes[disk]
	if e.hasPC {
		e.cacheGrowth = last.Volumes[disk].CachedBytes - first.Volumes[disk].CachedBytes
		base := first.Volumes[disk].DirtyBytes + first.Volumes[disk].WritebackBytes
		for _, s := range samples {
			if h := s.Volumes[disk].DirtyBytes + s.Volumes[disk].WritebackBytes - base; h > e.maxHeld {
				e.maxHeld = h
			}
		}
		e.endHeld = last.Volumes[disk].DirtyBytes + last.Volumes[disk].WritebackBytes
	} else {
		e.endHeld = last.DirtyBytes + last.WritebackBytes
	}
	e.qemuWritten = last.QEMUWriteBytes - first.QEMUWriteBytes
	for id, st := range last.Disks {
		if id != disk {
			e.qemuWritten -= st.WrBytes - first.Disks[id].WrBytes
		}
	}
	return e
}

// realData: did the guest's bytes reach the node as data? Best evidence:
// the volume's own page cache grew or held dirty pages; without it, this
// QEMU's write_bytes (write-zeroes and discards do not count there).
func (e evidence) realData() bool {
	if e.hasPC {
		return e.share(e.cacheGrowth) || e.share(e.maxHeld) || e.share(e.endHeld)
	}
	return e.share(e.qemuWritten)
}

// Judge turns one disk's series (at least two samples) into a verdict. It
// is pure: the same input gives the same judgement.
//
// On storage reached through the node page cache the decision rests on the
// flush timing and on what the node holds for this volume (cachestat, else
// this QEMU's write_bytes, else node-wide Dirty, which other writers move).
// Where the layer holding acknowledged writes is invisible to the node
// (librbd's cache, ZFS, an iSCSI target, QEMU's qcow2 metadata cache), it
// rests on QEMU's flags and the flush timing, and the reason says so.
func Judge(in Input) Judgement {
	e := collect(in.Disk, in.Samples)
	mode := in.Cache.Mode
	w := in.Writes
	j := Judgement{Disk: in.Disk, Mode: mode, WrittenBytes: e.written, Flushes: e.flushes, Backend: string(w.Backend)}
	j.FlushTimeMs = float64(e.flushNs) / 1e6
	j.MeanFlushMs = e.meanFlushMs()
	first, last := in.Samples[0], in.Samples[len(in.Samples)-1]
	if f, ok := last.DeviceFlushIOs[in.Disk]; ok {
		df := f - first.DeviceFlushIOs[in.Disk]
		dw := (last.DeviceWriteSect[in.Disk] - first.DeviceWriteSect[in.Disk]) * 512
		j.DeviceFlushes, j.DeviceWriteBytes = &df, &dw
	}
	switch {
	case in.ZFS.FlushesDropped():
		// Known from the property, whatever the window shows: the flushes
		// QEMU passes down complete without writing.
		j.Verdict = Ignored
		j.Reason = fmt.Sprintf("zfs get: the zvol %s has sync=disabled: %s (%s); known from the property, not measured: %d flush(es) taking %.3f ms in the window, %s written",
			in.ZFS.Dataset, zfs.SyncDisabledLoss, zfs.SyncFix(in.ZFS.Dataset), e.flushes, j.FlushTimeMs, units.MiBf(float64(e.written)))
		return j
	case !in.Cache.NoFlush && !w.HeldOnNode:
		j.Verdict, j.Reason = NotApplicable, notApplicable(in, e)
	case w.Visible:
		judgePageCache(&j, in, e)
	default:
		j.TimingOnly = true
		judgeTiming(&j, in, e)
	}
	if j.Verdict != NotApplicable && w.Unseen != "" && w.Visible {
		j.Reason += "; not measurable from the node: " + w.Unseen
	}
	return j
}

// notApplicable says why nothing acknowledged waits on this node.
func notApplicable(in Input, e evidence) string {
	mode, written := in.Cache.Mode, units.MiBf(float64(e.written))
	flushes := fmt.Sprintf("%d flushes taking %.1f ms", e.flushes, float64(e.flushNs)/1e6)
	switch in.Writes.Backend {
	case storage.Librbd:
		if !in.Cache.Direct {
			return fmt.Sprintf("cache=%s: librbd's cache is on, but QEMU flushes every write before acknowledging it: nothing acknowledged waits (%s written)", mode, written)
		}
		return fmt.Sprintf("cache=%s turns librbd's cache off (rbd_cache=false): a write is acknowledged once all replicas have it (%s written, %s)", mode, written, flushes)
	case storage.Libiscsi:
		s := fmt.Sprintf("QEMU's libiscsi sends writes straight to the iSCSI target: nothing is held on this node (%s written, %s)", written, flushes)
		if in.Cache.WriteCache == "on" {
			s += "; flushes reach the target's write cache"
		}
		return s
	case storage.Zvol:
		return fmt.Sprintf("cache=%s: QEMU flushes every write (a ZIL commit) before acknowledging it, so nothing acknowledged waits in ZFS's open transaction group (%s written)", mode, written)
	}
	if mode == "writethrough" {
		return fmt.Sprintf("cache=writethrough: QEMU writes every write through to storage before acknowledging it, so nothing acknowledged waits in node RAM (%s written)", written)
	}
	s := fmt.Sprintf("cache=%s opens the volume with O_DIRECT: nothing is held in node RAM (%s written, %s)", mode, written, flushes)
	if mode == "none" {
		s += "; flushes reach the storage's own cache"
	}
	return s
}

// judgePageCache judges from what the node page cache shows.
func judgePageCache(j *Judgement, in Input, e evidence) {
	written := units.MiBf(float64(e.written))
	real := e.realData()
	switch {
	case e.written >= ZeroDataMinBytes && !real:
		j.Verdict = ZeroData
		j.Reason = fmt.Sprintf("the guest wrote %s but none of it entered node RAM: the writes were zeroes, which detect-zeroes turns into write-zeroes, so there is nothing to judge; write non-zero data (e.g. yes | dd ... oflag=direct conv=fsync)", written)
	case e.flushes == 0:
		j.Verdict = NoFlushes
		j.Reason = fmt.Sprintf("the guest sent no flush in the window (%s written): run a workload that fsyncs, or use --trigger to run sync in the guest", written)
	case e.fast() && (in.Cache.NoFlush || (real && e.endHeld > 0)):
		j.Verdict = Ignored
		// What a crash loses is what this volume holds in node RAM now
		// (whenever the guest wrote it); without cachestat, at most what
		// the guest wrote in the window.
		j.CrashLosesBytes = e.endHeld
		if !e.hasPC && e.written < e.endHeld {
			j.CrashLosesBytes = e.written
		}
		held := "this volume's dirty+writeback pages"
		if !e.hasPC {
			held = "node Dirty+Writeback"
		}
		j.Reason = fmt.Sprintf("%d flush(es) counted but took %.3f ms in all: the data the guest believes safe is still in node RAM (%s now %s, %s written in the window); a host crash would lose up to %s",
			e.flushes, j.FlushTimeMs, held, units.MiBf(float64(e.endHeld)), written, units.MiBf(float64(j.CrashLosesBytes)))
		if in.Cache.NoFlush {
			j.Reason += " (QEMU runs this disk with cache.no-flush: cache=unsafe)"
		}
	case e.fast():
		j.Verdict = Honored
		j.Reason = fmt.Sprintf("%d flush(es), %.3f ms each: nothing of this disk was waiting in node RAM to be written", e.flushes, j.MeanFlushMs)
	default:
		j.Verdict = Honored
		j.Reason = fmt.Sprintf("%d flush(es) took %.1f ms (%.2f ms each): the node wrote the guest's data to storage before acknowledging (%s written in the window)", e.flushes, j.FlushTimeMs, j.MeanFlushMs, written)
	}
}

// judgeTiming judges a disk whose acknowledged writes wait where the node
// cannot see them: from QEMU's flags and the flush timing.
func judgeTiming(j *Judgement, in Input, e evidence) {
	w := in.Writes
	written := units.MiBf(float64(e.written))
	unseen := "not measurable from the node: " + w.Unseen + ", so the verdict rests on QEMU's flags and the flush timing"
	// Zeroes: QEMU's write_bytes counts data it sends to a block device or
	// file, not write-zeroes; it counts nothing for librbd or libiscsi,
	// which send over the network.
	countsData := w.Backend != storage.Librbd && w.Backend != storage.Libiscsi
	switch {
	case countsData && e.written >= ZeroDataMinBytes && !e.share(e.qemuWritten):
		j.Verdict = ZeroData
		j.Reason = fmt.Sprintf("the guest wrote %s but QEMU sent none of it as data: the writes were zeroes, which detect-zeroes turns into write-zeroes, so there is nothing to judge; write non-zero data (e.g. yes | dd ... oflag=direct conv=fsync)", written)
		return
	case e.flushes == 0:
		j.Verdict = NoFlushes
		j.Reason = fmt.Sprintf("the guest sent no flush in the window (%s written): run a workload that fsyncs, or use --trigger to run sync in the guest; %s", written, unseen)
		return
	case in.Cache.NoFlush && e.fast():
		j.Verdict = Ignored
		j.Reason = fmt.Sprintf("%d flush(es) counted but took %.3f ms in all: QEMU runs this disk with cache.no-flush (cache=unsafe), so they never reach the storage and what the guest believes safe stays where it was acknowledged (%s written in the window); how much that is cannot be measured from the node: %s",
			e.flushes, j.FlushTimeMs, written, w.Unseen)
		return
	case !e.fast():
		j.Verdict = Honored
		j.Reason = fmt.Sprintf("%d flush(es) took %.1f ms (%.2f ms each): each was %s (%s written in the window)", e.flushes, j.FlushTimeMs, j.MeanFlushMs, w.Flush, written)
	case w.FastFlushMeans == "":
		j.Verdict = Honored
		j.Reason = fmt.Sprintf("%d flush(es), %.3f ms each: each was %s, and nothing was waiting (%s written in the window)", e.flushes, j.MeanFlushMs, w.Flush, written)
	case w.Backend == storage.Zvol && in.ZFS != nil && in.ZFS.Unknown == "":
		// zfs get rules the other reading out: sync is not disabled, so
		// each flush was a ZIL commit of whatever waited.
		j.Verdict = Honored
		j.Reason = fmt.Sprintf("%d flush(es), %.3f ms each, after %s written: each was %s, and zfs get says the zvol %s has sync=%s (not disabled), so ZFS completes a flush only once what waited is in its intent log: this fast, nothing was waiting or the log device is that fast", e.flushes, j.MeanFlushMs, written, w.Flush, in.ZFS.Dataset, in.ZFS.Sync)
	default:
		j.Verdict = Inconclusive
		j.Reason = fmt.Sprintf("%d flush(es), %.3f ms each, after %s written: each should be %s, which takes time when data waits; this fast, either nothing was waiting or %s", e.flushes, j.MeanFlushMs, written, w.Flush, w.FastFlushMeans)
		if in.ZFS != nil && in.ZFS.Unknown != "" {
			j.Reason += " (zfs get could not tell: " + in.ZFS.Unknown + ")"
		}
	}
	j.Reason += "; " + unseen
	if !countsData {
		j.Reason += " (whether the writes were zeroes cannot be told either)"
	}
}

// standsOn is the note a verdict from a window with gaps carries.
func standsOn(r *Result) string {
	if len(r.Gaps) == 0 {
		return ""
	}
	var missing float64
	var parts []string
	for _, g := range r.Gaps {
		missing += g.Seconds()
		parts = append(parts, fmt.Sprintf("%.1f to %.1f s", g.FromS, g.ToS))
	}
	return fmt.Sprintf(" (stands on %.1f s of samples in the %s s window: none from %s, %.1f s in all)", r.SampledS, strconv.FormatFloat(r.WindowS, 'g', -1, 64), strings.Join(parts, ", "), missing)
}
