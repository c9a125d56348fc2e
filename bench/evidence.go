package bench

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/layers"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/storage/zfs"
)

// Kind is one of Lab 19's traps, seen from the node.
type Kind string

const (
	// ServedFromNodeRAM: the volume's pages were in the node's page cache
	// during a read job: the IOPS describe RAM.
	ServedFromNodeRAM Kind = "served-from-node-ram"
	// NeverWritten: on thin or sparse storage the test area was not all
	// allocated when a read job started: reads of holes cost nothing.
	NeverWritten Kind = "never-written"
	// AckedInNodeRAM: the node's Dirty/Writeback grew during a write job
	// with a cache mode that goes through the page cache.
	AckedInNodeRAM Kind = "acked-in-node-ram"
	// FlushesIgnored: QEMU counted the guest's flushes during an fsync job
	// but the cache mode completes them at once (unsafe), or the disk's
	// zvol has sync=disabled (ZFS completes them without writing).
	FlushesIgnored Kind = "flushes-ignored"
	// LimitBound: the job ran at a running I/O limit: it measured the limit.
	LimitBound Kind = "limit-bound"
	// NeighbourIO: other VMs did I/O on the same storage during the job.
	NeighbourIO Kind = "neighbour-io"
	// ServedFromZFSARC: during a read job on a zvol that caches data
	// (primarycache=all) the node's ZFS ARC answered most demand data
	// reads: ZFS's own RAM cache, which no QEMU cache mode bypasses.
	ServedFromZFSARC Kind = "served-from-zfs-arc"
)

// Evidence is one finding next to the number it taints; Absent says that
// the node could not see (the kind is then neither found nor ruled out).
type Evidence struct {
	Kind    Kind   `json:"kind"`
	Message string `json:"message"`
	Absent  bool   `json:"absent,omitempty"`
	Runs    []int  `json:"runs,omitempty"` // the runs it was seen in
}

// Thresholds, each next to the rule that uses it.
const (
	// CachedShare: page-cache residency of the volume at the end of a read
	// job of at least this share of the area means reads could come from
	// RAM (Lab 19 saw writeback reads at 5-10x the device).
	CachedShare = 0.5
	// DirtyGrowthMin: node Dirty+Writeback growth during a write job that
	// counts as writes held in RAM; below it, other writers' noise on a
	// node-wide counter (the flush tests saw up to a few MiB of it).
	DirtyGrowthMin = 16 << 20
	// LimitShare: a job at this share of a running limit or above ran
	// against that limit (QEMU's throttle holds rates within a few percent).
	LimitShare = 0.9
	// AllocatedShare: a read job's area allocated below this share counts
	// as reading holes.
	AllocatedShare = 0.95
	// NeighbourMin: another VM's I/O on the storage during a job from this
	// much on (below it, a guest's background writes: journal commits,
	// logs) shares the storage with the benchmark.
	NeighbourMin = 1 << 20
	// ARCHitShare: a read job during which the node's ARC answered at
	// least this share of the demand data reads, ARCReadsMin of them at
	// least, was served from RAM (a benchmark area read again and again
	// fits the ARC after its first pass; a cold one misses).
	ARCHitShare = 0.5
	ARCReadsMin = 100
)

// Observation is what the node saw during one step; a nil pointer is a
// counter the node could not read, with the reason in the matching Why.
type Observation struct {
	// CachedBytes is the volume's page-cache residency at the end of the
	// step (cachestat).
	CachedBytes *int64
	CachedWhy   string
	// DirtyGrowthBytes is the largest growth of the node's Dirty+Writeback
	// over the step's samples (/proc/meminfo).
	DirtyGrowthBytes *int64
	DirtyWhy         string
	// FlushOps are the flushes QEMU counted for the disk during the step
	// (query-blockstats flush_operations).
	FlushOps *int64
	FlushWhy string
	// AllocatedBytes is the volume's allocation when the step started
	// (thin or sparse storage only), plus its pages still dirty in the
	// node's page cache (written, not yet allocated).
	AllocatedBytes *int64
	AllocatedWhy   string
	// Neighbours are the other running VMs of this node with a disk on the
	// same storage, with the bytes those disks read and wrote during the
	// step (query-blockstats of each); nil with NeighbourWhy when not read.
	Neighbours   []Neighbour
	NeighbourWhy string
	// Latency is QEMU's latency percentiles of the disk's requests during
	// the step, from the histogram between its first and last sample
	// (--histogram: NodeObserver.Latency); nil with LatencyWhy otherwise.
	Latency    *latency.Percentiles
	LatencyWhy string
	// ARCDataHits and ARCDataMisses are the node's ZFS ARC demand data
	// reads during a read job on a zvol (arcstats; node-wide); nil with
	// ARCWhy when not read.
	ARCDataHits, ARCDataMisses *int64
	ARCWhy                     string
	// LayersFrom and LayersTo are the disk's counters per layer at the
	// step's first and last sample (QEMU's and the node device's; the
	// guest's is not read): the job's latency split (package layers).
	LayersFrom, LayersTo layers.Counters
}

// Neighbour is another VM's I/O on the storage during one step.
type Neighbour struct {
	VMID  int    `json:"vmid"`
	Disks string `json:"disks"`
	Bytes int64  `json:"bytes"`
}

// Measured are fio's numbers of one run, for the limit rule.
type Measured struct {
	ReadIOPS, WriteIOPS   float64
	ReadBytes, WriteBytes float64 // per second
	// InFlightIOPS is the job's queue depth over its runtime: the requests
	// still queued in QEMU's throttle when fio stops are not counted, so a
	// job at the limit measures up to this much below it (QD32 over 2 s:
	// 16 IOPS; the real-guest test measured 87 IOPS at iops_wr=100).
	InFlightIOPS float64
}

// DiskFacts are what the rules need about the disk as it ran.
type DiskFacts struct {
	Cache  qemuserver.Cache
	Limits qemuserver.Limits
	// AreaBytes is the test area (the --size, at most the disk).
	AreaBytes int64
	Thin      bool // thin or sparse storage: unwritten blocks are holes
	// Zvol is the disk's zvol as ZFS reported it (layer disk.ZFS): nil for a
	// disk on any other storage, Unknown when zfs could not answer.
	Zvol *zfs.Zvol
}

// Judge gives the evidence of one run: pure, from what was observed.
func Judge(j Job, f DiskFacts, o Observation, m Measured) []Evidence {
	var ev []Evidence
	add := func(k Kind, format string, a ...any) {
		ev = append(ev, Evidence{Kind: k, Message: fmt.Sprintf(format, a...)})
	}
	if j.Read() && !j.Write() && !f.Cache.Direct && o.CachedBytes != nil &&
		float64(*o.CachedBytes) >= CachedShare*float64(f.AreaBytes) {
		add(ServedFromNodeRAM, "%d MiB of the volume sat in the node's page cache (cache=%s, not O_DIRECT) during the read: the IOPS describe the node's RAM",
			*o.CachedBytes>>20, f.Cache.Mode)
	}
	if j.Read() && f.Thin && o.AllocatedBytes != nil && float64(*o.AllocatedBytes) < AllocatedShare*float64(f.AreaBytes) {
		add(NeverWritten, "only %d of the %d MiB test area were allocated on the storage (or waiting in the node's page cache) when the read started: reads of holes cost the storage nothing (the fill job writes the area first)",
			*o.AllocatedBytes>>20, f.AreaBytes>>20)
	}
	if j.Write() && !f.Cache.Direct && o.DirtyGrowthBytes != nil && *o.DirtyGrowthBytes >= DirtyGrowthMin {
		add(AckedInNodeRAM, "the node's Dirty+Writeback grew by %d MiB during the write (cache=%s goes through the node's page cache): writes were acknowledged from the node's RAM",
			*o.DirtyGrowthBytes>>20, f.Cache.Mode)
	}
	if j.Fsync() && o.FlushOps != nil && *o.FlushOps > 0 {
		switch zvol := f.Zvol.FlushesDropped(); {
		case f.Cache.NoFlush && zvol:
			add(FlushesIgnored, "QEMU counted %d guest flushes, and cache=%s completes them without reaching the storage (the zvol %s has sync=disabled as well): the fsync latency is the node's RAM",
				*o.FlushOps, f.Cache.Mode, f.Zvol.Dataset)
		case f.Cache.NoFlush:
			add(FlushesIgnored, "QEMU counted %d guest flushes, and cache=%s completes them without reaching the storage: the fsync latency is the node's RAM",
				*o.FlushOps, f.Cache.Mode)
		case zvol:
			add(FlushesIgnored, "QEMU counted %d guest flushes, and the zvol %s has sync=disabled: ZFS completes them without writing anything (a host crash loses up to the last transaction group, as with cache=unsafe): the fsync latency is the node's RAM",
				*o.FlushOps, f.Zvol.Dataset)
		}
	}
	if j.Read() && !j.Write() && f.Zvol.CachesData() && o.ARCDataHits != nil && o.ARCDataMisses != nil {
		h, mi := *o.ARCDataHits, *o.ARCDataMisses
		if h >= ARCReadsMin && float64(h) >= ARCHitShare*float64(h+mi) {
			add(ServedFromZFSARC, "the node's ZFS ARC answered %d of %d demand data reads (%.0f %%) during the read, and the zvol %s caches data (primarycache=%s): ZFS served them from the node's RAM, whatever QEMU's cache mode (the ARC's counters are node-wide: other pools' reads count too)",
				h, h+mi, 100*float64(h)/float64(h+mi), f.Zvol.Dataset, f.Zvol.PrimaryCache)
		}
	}
	for _, nb := range o.Neighbours {
		if nb.Bytes >= NeighbourMin {
			add(NeighbourIO, "VM %d moved %d MiB on the same storage (%s) during the job: the storage was shared", nb.VMID, nb.Bytes>>20, nb.Disks)
		}
	}
	for _, l := range []struct {
		key        string
		got, slack float64
		unit       string
	}{
		{"iops-total", m.ReadIOPS + m.WriteIOPS, m.InFlightIOPS, "IOPS"}, {"iops-read", m.ReadIOPS, m.InFlightIOPS, "IOPS"},
		{"iops-write", m.WriteIOPS, m.InFlightIOPS, "IOPS"},
		{"bps-total", m.ReadBytes + m.WriteBytes, 0, "B/s"}, {"bps-read", m.ReadBytes, 0, "B/s"}, {"bps-write", m.WriteBytes, 0, "B/s"},
	} {
		if lim := f.Limits[l.key]; lim > 0 && l.got > 0 && l.got+l.slack >= LimitShare*float64(lim) {
			add(LimitBound, "%.0f %s against the running limit %s=%d: the job measured the limit, not the storage", l.got, l.unit, l.key, lim)
		}
	}
	return ev
}

// Layers is the run's latency split (package layers): QEMU's and the
// storage's share of each request's wait, and the verdict, with the
// limit the job used most of (from fio's rates against the running
// limits, as the limit-bound rule reads them).
func Layers(f DiskFacts, o Observation, m Measured) layers.Split {
	c := layers.Context{}
	if !f.Cache.Direct {
		c.PageCache = f.Cache.Mode
	}
	best := 0.0
	for _, l := range []struct {
		key  string
		got  float64
		name string
	}{
		{"iops-total", m.ReadIOPS + m.WriteIOPS + m.InFlightIOPS, "iops"}, {"iops-read", m.ReadIOPS + m.InFlightIOPS, "iops_rd"},
		{"iops-write", m.WriteIOPS + m.InFlightIOPS, "iops_wr"},
		{"bps-total", m.ReadBytes + m.WriteBytes, "mbps"}, {"bps-read", m.ReadBytes, "mbps_rd"}, {"bps-write", m.WriteBytes, "mbps_wr"},
	} {
		if lim := f.Limits[l.key]; lim > 0 && l.got > 0 {
			if p := 100 * l.got / float64(lim); p > best {
				best = p
				c.LimitPct = &p
				c.Limit = l.name + "=" + limitValue(l.key, lim)
			}
		}
	}
	return layers.Of(o.LayersFrom, o.LayersTo, c)
}

// limitValue is a limit in Proxmox's terms: IOPS as they are, bytes/s in
// MB/s (mbps_wr=20).
func limitValue(key string, v int64) string {
	if strings.HasPrefix(key, "bps") {
		return strconv.FormatFloat(float64(v)/(1<<20), 'f', -1, 64)
	}
	return strconv.FormatInt(v, 10)
}

// Observed is one step's job with what the node saw during it.
type Observed struct {
	Job Job
	Obs Observation
}

// Unseen says, once per disk, which kinds the node could not observe
// during the jobs they apply to (the first reason of each), as Absent
// evidence.
func Unseen(f DiskFacts, runs []Observed) []Evidence {
	var ev []Evidence
	seen := map[Kind]bool{}
	add := func(k Kind, why string) {
		if why == "" {
			why = "the counter was not read"
		}
		if !seen[k] {
			seen[k] = true
			ev = append(ev, Evidence{Kind: k, Absent: true, Message: "not observed: " + why})
		}
	}
	for _, r := range runs {
		o, j := r.Obs, r.Job
		if j.Read() && !j.Write() && !f.Cache.Direct && o.CachedBytes == nil {
			add(ServedFromNodeRAM, o.CachedWhy)
		}
		if j.Read() && f.Thin && o.AllocatedBytes == nil {
			add(NeverWritten, o.AllocatedWhy)
		}
		if j.Write() && !f.Cache.Direct && o.DirtyGrowthBytes == nil {
			add(AckedInNodeRAM, o.DirtyWhy)
		}
		if j.Fsync() && (f.Cache.NoFlush || f.Zvol.FlushesDropped()) && o.FlushOps == nil {
			add(FlushesIgnored, o.FlushWhy)
		}
		if j.Fsync() && !f.Cache.NoFlush && f.Zvol != nil && f.Zvol.Unknown != "" {
			add(FlushesIgnored, "ZFS's sync property of the zvol "+f.Zvol.Dataset+" is unknown: "+f.Zvol.Unknown)
		}
		if z := f.Zvol; j.Read() && !j.Write() && z != nil {
			switch {
			case z.Unknown != "":
				add(ServedFromZFSARC, "the zvol "+z.Dataset+"'s primarycache is unknown: "+z.Unknown)
			case z.PrimaryCache == "":
				add(ServedFromZFSARC, "zfs printed no primarycache for the zvol "+z.Dataset)
			case z.CachesData() && (o.ARCDataHits == nil || o.ARCDataMisses == nil):
				add(ServedFromZFSARC, o.ARCWhy)
			}
		}
		if o.NeighbourWhy != "" {
			add(NeighbourIO, o.NeighbourWhy)
		}
	}
	return ev
}

// merge folds one run's evidence into a job's list: one entry per kind,
// with the runs it was seen in (the first run's message).
func merge(list []Evidence, run int, ev []Evidence) []Evidence {
	for _, e := range ev {
		found := false
		for i := range list {
			if list[i].Kind == e.Kind && !list[i].Absent {
				list[i].Runs = append(list[i].Runs, run)
				found = true
			}
		}
		if !found {
			e.Runs = []int{run}
			list = append(list, e)
		}
	}
	return list
}

// Text is the evidence for the text output.
func (e Evidence) Text() string {
	s := string(e.Kind) + ": " + e.Message
	if len(e.Runs) > 0 {
		var r []string
		for _, n := range e.Runs {
			r = append(r, fmt.Sprint(n))
		}
		s += " (run " + strings.Join(r, ", ") + ")"
	}
	return s
}
