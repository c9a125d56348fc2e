package discard

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/units"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// Snapshot is one measurement of every disk: QEMU's counters (one
// exchange) and each volume's allocation.
type Snapshot struct {
	// At is when QEMU produced the counters (zero without counters).
	At    time.Time
	Dev   map[string]qmp.BlockStats // device counters by disk id
	Nodes map[string]qmp.BlockStats // protocol node counters by node name
	Alloc map[string]alloc.Result   // by disk id
}

// Meter measures one volume's allocation (alloc.Meter: each storage's own
// tool). One Meter is one moment: lvs runs once per volume group.
type Meter interface {
	Measure(ctx context.Context, v alloc.Volume) (alloc.Result, error)
}

// counters is the sampler the run reads QEMU's counters with: the
// targets' devices and their protocol nodes, one exchange per reading.
func counters(n node.Node, v *vm.VM, ts []*Target) *sampler.Window {
	bs := &sampler.Window{VM: v, Timeout: n.Timeout, Patience: n.Timeout}
	for _, t := range ts {
		bs.Disks = append(bs.Disks, t.Disk.ID)
		if t.Node != "" {
			bs.Nodes = append(bs.Nodes, t.Node)
		}
	}
	return bs
}

func snapshotOf(s sampler.Sample) *Snapshot {
	return &Snapshot{At: s.Time, Dev: s.Stats, Nodes: s.Nodes, Alloc: map[string]alloc.Result{}}
}

// measureAlloc adds every volume's allocation to s. A tool that fails is
// exit 3: nothing is guessed.
func measureAlloc(ctx context.Context, m Meter, vmid int, ts []*Target, s *Snapshot) error {
	for _, t := range ts {
		r, err := m.Measure(ctx, t.Volume)
		if err != nil {
			return exitcode.Unreachablef("VM %d %s: cannot measure the allocation of %s: %v", vmid, t.Disk.ID, t.Drive.Volume, err)
		}
		s.Alloc[t.Disk.ID] = r
	}
	return nil
}

// DefaultInterval is how often a --wait window samples the counters: the
// progress line's tick, and the resolution of the gaps it reports.
const DefaultInterval = time.Second

// gapFactor: samples further apart than this many intervals leave a gap.
// A sample that waited for a briefly busy socket comes up to half an
// interval late (sampler.Window skips a tick beyond that).
const gapFactor = 1.5

// watch samples the window on the shared sampler (one exchange per tick,
// a briefly busy socket retried, a silent one given up per tick) and
// returns its samples. Each tick's Detail says what the window has seen so
// far: the devices' unmap_bytes since the measurement before the window
// (not counted on VirtIO Block) and the protocol nodes' discard-bytes-ok.
// An error other than a busy or silent socket ends it: QEMU gone.
func watch(ctx context.Context, bs sampler.Window, window, interval time.Duration, before *Snapshot, ts []*Target, on sampler.OnSample) (*sampler.Series, error) {
	bs.Interval, bs.Patience = interval, interval
	bs.OnSample = func(tk sampler.Tick) {
		if on == nil {
			return
		}
		var received, accepted int64
		for _, t := range ts {
			received += tk.Sample.Stats[t.Disk.ID].UnmapBytes - before.Dev[t.Disk.ID].UnmapBytes
			if t.Node != "" {
				accepted += tk.Sample.Nodes[t.Node].DiscardBytesOK - before.Nodes[t.Node].DiscardBytesOK
			}
		}
		tk.Detail = ProgressDetail(received, accepted)
		on(tk)
	}
	ser, err := bs.Run(ctx, window)
	if errors.Is(err, sampler.ErrTooFewSamples) {
		err = nil // a busy or silent socket: the gaps and the window's end say it
	}
	return ser, err
}

// ProgressDetail is a --wait window's progress: what QEMU received and the
// storage accepted since the window began.
func ProgressDetail(received, accepted int64) string {
	return fmt.Sprintf("QEMU received %s, storage accepted %s", units.Bytes(received), units.Bytes(accepted))
}

// sampling describes a window from its readings: the one before it and
// the samples (the last one closes the window unless cut says otherwise).
func sampling(before time.Time, samples []sampler.Sample, missed int, interval time.Duration, cut string) *Sampling {
	s := &Sampling{IntervalSeconds: interval.Seconds(), Samples: len(samples), Missed: missed, Gaps: []Gap{}, Cut: cut}
	prev := before
	limit := time.Duration(gapFactor * float64(interval))
	for _, sm := range samples {
		if sm.Time.Sub(prev) > limit {
			s.Gaps = append(s.Gaps, Gap{FromSeconds: secs(prev.Sub(before)), ToSeconds: secs(sm.Time.Sub(before))})
		}
		prev = sm.Time
	}
	s.CoveredSeconds = secs(prev.Sub(before))
	return s
}

func secs(d time.Duration) float64 {
	return float64(d.Round(100*time.Millisecond)) / float64(time.Second)
}
