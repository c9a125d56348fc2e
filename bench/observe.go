package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/layers"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/storage/zfs"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// SampleEvery is how often the node's counters are read during a step:
// Dirty and Writeback move within a second under a write job, and one
// /proc/meminfo read every half second costs well under 1% of a core.
const SampleEvery = 500 * time.Millisecond

// NodeObserver reads the node's side of each step: /proc/meminfo
// (Dirty+Writeback), the volume's page-cache residency (cachestat), QEMU's
// flush counter for the disk (query-blockstats) and, when a read job starts
// on thin or sparse storage, the volume's allocation.
type NodeObserver struct {
	// Node reads the node's files (the ZFS ARC's counters).
	Node node.Node
	Host sampler.Host
	VM   *vm.VM // the benchmarked VM, asked through sampler.Window
	// Volumes are the disks' volumes by disk id: Path for cachestat, and
	// the volume for alloc when Thin (DiskFacts).
	Volumes map[string]alloc.Volume
	Facts   map[string]DiskFacts
	// Devices are, by disk id, the node block device under the volume
	// (the storage layer of the job's latency split: package layers).
	Devices map[string]NodeDevice
	Meter   *alloc.Meter
	// Neighbours are, by disk id, the other running VMs with disks on
	// that disk's storage.
	Neighbours map[string][]NeighbourVM
	// NeighbourWhy, when set, says why other VMs could not be listed.
	NeighbourWhy string
	// Latency, when set (--histogram), keeps QEMU latency histograms on
	// the benchmarked disks: set in a disk's first step's first sample
	// where none is (latency.Tracker.Ensure), read at each step's end;
	// ReleaseLatency clears those it set.
	Latency *latency.Tracker

	mu   sync.Mutex
	left map[string]latency.Leftover // by disk: HistogramsLeft
}

// HistogramsLeft are the latency histograms of pvediskcheck's the steps
// found on the disks and this run did not set (latency.Leftover), by disk.
func (n *NodeObserver) HistogramsLeft() []latency.Leftover {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make([]latency.Leftover, 0, len(n.left))
	for _, l := range n.left {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Disk < out[j].Disk })
	return out
}

// TrackLatency makes the observer set and read latency histograms.
func (n *NodeObserver) TrackLatency() { n.Latency = latency.Start(true, observeTimeout) }

// ReleaseLatency clears the histograms the observer set (on a context of
// its own: the run's may have ended) and says what was done per disk.
func (n *NodeObserver) ReleaseLatency(ctx context.Context) ([]latency.Note, error) {
	return n.Latency.Notes(), n.Latency.End(ctx)
}

// observeTimeout bounds each QMP exchange of the observer.
const observeTimeout = 2 * time.Second

// NodeDevice is the node block device under a volume: its own, or for a
// file the device under its filesystem (Shared).
type NodeDevice struct {
	Name   string
	Shared bool
}

// guestNotRead is why a job's split has no guest layer: bench runs fio in
// the guest and reads fio's own figures, not the guest's diskstats.
const guestNotRead = "bench does not read the guest's diskstats (fio's latency is the guest's figure)"

// layerCounters are the step's QEMU and node device counters at one end.
func (n *NodeObserver) layerCounters(disk string, stats map[string]qmp.BlockStats, err error) layers.Counters {
	c := layers.Counters{GuestWhy: guestNotRead, At: time.Now()}
	if b, ok := stats[disk]; ok && err == nil {
		c.QEMU = &b
	}
	dev, ok := n.Devices[disk]
	if !ok {
		c.NodeWhy = "the volume is on no block device of the node (librbd, iSCSI, NFS or tmpfs)"
		return c
	}
	if bs, err := n.Host.BlockStatOf(dev.Name); err == nil {
		c.Node, c.NodeShared = &bs, dev.Shared
	} else {
		c.NodeWhy = "node device " + dev.Name + " unreadable: " + err.Error()
	}
	return c
}

// NeighbourVM is another running VM of the node and its disks on one
// storage.
type NeighbourVM struct {
	VMID  int
	VM    *vm.VM
	Disks []string
}

// neighbourStats reads the neighbours' disks' counters; nil entries for a
// VM that did not answer.
func neighbourStats(ctx context.Context, vms []NeighbourVM) []map[string]qmp.BlockStats {
	out := make([]map[string]qmp.BlockStats, len(vms))
	for i, v := range vms {
		bs := sampler.Window{VM: v.VM, Disks: v.Disks, Timeout: time.Second, Patience: time.Second}
		if s, err := bs.Take(ctx); err == nil {
			out[i] = s.Stats
		}
	}
	return out
}

// Start begins sampling for step s.
func (n *NodeObserver) Start(ctx context.Context, s Step) func() Observation {
	var o Observation
	f := n.Facts[s.Disk]
	vol, hasVol := n.Volumes[s.Disk]
	if f.Thin && s.Job.Read() && hasVol && n.Meter != nil {
		res, err := n.Meter.Measure(ctx, vol)
		switch {
		case err != nil:
			o.AllocatedWhy = "allocation unreadable: " + err.Error()
		case res.AllocatedBytes == nil:
			o.AllocatedWhy = "allocation not reported (" + res.Unmeasured + ")"
		default:
			// Written data still dirty in the node's page cache (a cache
			// mode through it) is not allocated yet, but it is not a hole.
			w := *res.AllocatedBytes
			if pc, err := sampler.VolumePageCache(vol.Path); err == nil && !f.Cache.Direct {
				w += pc.DirtyBytes + pc.WritebackBytes
			}
			o.AllocatedBytes = &w
		}
	}
	arc := n.Facts[s.Disk].Zvol.CachesData() && s.Job.Read() && !s.Job.Write()
	var arc0 zfs.ARC
	var errARC error
	if arc {
		arc0, errARC = zfs.ReadARC(ctx, n.Node)
	}
	nbs := n.Neighbours[s.Disk]
	nb0 := neighbourStats(ctx, nbs)
	// Each sample's exchange gets observeTimeout whatever the wait for a
	// busy socket (Patience: a Window's default of its interval cut the
	// exchange to what was left of 500 ms, and a loaded QEMU's histogram
	// set missed it), and a failed one is asked once more: a sample that
	// still fails is said for this disk's step (FlushWhy, LatencyWhy),
	// never the whole result.
	bs := sampler.Window{VM: n.VM, Disks: []string{s.Disk}, Timeout: observeTimeout, Patience: observeTimeout}
	bs.Query.Then = n.Latency.Hook(n.VM, observeTimeout, []string{s.Disk})
	flush0, errFlush := takeTwice(ctx, &bs)
	o.LayersFrom = n.layerCounters(s.Disk, flush0.Stats, errFlush)
	if errFlush == nil {
		left := n.Latency.Leftovers(n.VM.VMID, n.VM.Pid, n.VM.QMPSocket(), flush0.Stats)
		n.mu.Lock()
		for _, l := range left {
			if n.left == nil {
				n.left = map[string]latency.Leftover{}
			}
			n.left[l.Disk] = l
		}
		n.mu.Unlock()
	}
	mem0, errMem := n.Host.Memory()
	if errMem != nil {
		o.DirtyWhy = "/proc/meminfo unreadable: " + errMem.Error()
	}
	var mu sync.Mutex
	var peak int64
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(SampleEvery)
		defer t.Stop()
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
			if errMem != nil {
				continue
			}
			if m, err := n.Host.Memory(); err == nil {
				g := m.DirtyBytes + m.WritebackBytes - mem0.DirtyBytes - mem0.WritebackBytes
				mu.Lock()
				peak = max(peak, g)
				mu.Unlock()
			}
		}
	}()
	return func() Observation {
		cancel()
		<-done
		if errMem == nil {
			g := peak
			o.DirtyGrowthBytes = &g
		}
		if hasVol && vol.Path != "" {
			if pc, err := sampler.VolumePageCache(vol.Path); err == nil {
				c := pc.CachedBytes
				o.CachedBytes = &c
			} else {
				o.CachedWhy = "the volume's page cache is not readable here (" + err.Error() + ")"
			}
		} else {
			o.CachedWhy = "the volume has no path on the node (librbd, iSCSI: the node's page cache is not used or not visible)"
		}
		if n.NeighbourWhy != "" {
			o.NeighbourWhy = n.NeighbourWhy
		} else {
			o.Neighbours = []Neighbour{}
			for i, after := range neighbourStats(context.WithoutCancel(ctx), nbs) {
				if nb0[i] == nil || after == nil {
					o.NeighbourWhy = fmt.Sprintf("VM %d's QMP did not answer", nbs[i].VMID)
					continue
				}
				var moved int64
				for id, b := range after {
					if a, ok := nb0[i][id]; ok {
						moved += b.RdBytes - a.RdBytes + b.WrBytes - a.WrBytes
					}
				}
				o.Neighbours = append(o.Neighbours, Neighbour{VMID: nbs[i].VMID, Disks: strings.Join(nbs[i].Disks, " "), Bytes: moved})
			}
		}
		flush1, err := takeTwice(context.WithoutCancel(ctx), &bs)
		o.LayersTo = n.layerCounters(s.Disk, flush1.Stats, err)
		a, okA := flush0.Stats[s.Disk]
		b, okB := flush1.Stats[s.Disk]
		switch {
		case errFlush != nil || err != nil:
			o.FlushWhy = fmt.Sprintf("query-blockstats failed: %v", errorsOf(errFlush, err))
		case !okA || !okB:
			o.FlushWhy = "query-blockstats does not list " + s.Disk
		default:
			d := b.FlushOps - a.FlushOps
			o.FlushOps = &d
		}
		if arc {
			arc1, err := zfs.ReadARC(context.WithoutCancel(ctx), n.Node)
			hits, misses, ok := zfs.DataReads(arc0, arc1)
			switch {
			case errARC != nil || err != nil:
				o.ARCWhy = fmt.Sprintf("the node's ARC counters are unreadable (%s): %v", zfs.ArcstatsPath(n.Node.Paths.Proc), errorsOf(errARC, err))
			case !ok:
				o.ARCWhy = "arcstats has no demand data counters, or they went back (the zfs module reloaded)"
			default:
				o.ARCDataHits, o.ARCDataMisses = &hits, &misses
			}
		}
		if n.Latency != nil {
			if p := latency.IntervalOf(a, b); o.FlushWhy == "" && p.Any() {
				o.Latency = &p
			} else {
				o.LatencyWhy = latencyWhy(o.FlushWhy)
			}
		}
		return o
	}
}

// takeTwice is one sample, asked again once when it failed (not when ctx
// ended).
func takeTwice(ctx context.Context, w *sampler.Window) (sampler.Sample, error) {
	s, err := w.Take(ctx)
	if err != nil && ctx.Err() == nil {
		s, err = w.Take(ctx)
	}
	return s, err
}

// latencyWhy says why a step has no percentiles: its samples failed
// (flushWhy), or no request completed in a histogram during it (QEMU
// refused one, or one found set lacks the request's kind: the notes say).
func latencyWhy(flushWhy string) string {
	if flushWhy != "" {
		return flushWhy
	}
	return "no request completed in a latency histogram during the step"
}

func errorsOf(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
