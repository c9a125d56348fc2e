// Package latency owns QEMU's per-disk latency histograms: the boundaries
// pvediskcheck sets (block-latency-histogram-set), whose histogram a disk's
// figures rest on (set by the tool, or found set by someone else and used as
// it is), percentiles of an interval from the bins' deltas, and the
// cumulative buckets a Prometheus histogram wants.
//
// A mean latency hides what admins chase: four 1 ms requests and one of
// 500 ms average 100 ms. QEMU counts each completed request in a bin of its
// latency once a histogram is set on the device; the bins come back in
// query-blockstats (rd_/wr_/flush_latency_histogram), so reading them costs
// no command of its own. Setting one changes QEMU's state: only on request
// (top --histogram, metrics --histogram), and cleared again by whoever set
// it (Tracker.Release).
package latency

import (
	"math"
	"slices"
	"time"

	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// Kind is a request type with its own histogram.
type Kind string

// The histograms pvediskcheck reads (QEMU also has one for zone appends).
const (
	Read  Kind = "read"
	Write Kind = "write"
	Flush Kind = "flush"
)

// Kinds lists them in export order.
var Kinds = []Kind{Read, Write, Flush}

// Of is b's histogram of kind k; nil when none is set.
func Of(b *qmp.BlockStats, k Kind) *qmp.LatencyHistogram {
	switch k {
	case Read:
		return b.RdLatency
	case Write:
		return b.WrLatency
	case Flush:
		return b.FlushLatency
	}
	return nil
}

// TotalNs is b's summed latency of kind k (the *_total_time_ns QEMU adds
// to for the same requests it counts in the histogram's bins).
func TotalNs(b *qmp.BlockStats, k Kind) int64 {
	switch k {
	case Read:
		return b.RdTotalTimeNs
	case Write:
		return b.WrTotalTimeNs
	case Flush:
		return b.FlushTotalTimeNs
	}
	return 0
}

const (
	// Lowest and Highest are the range the boundaries resolve: a local
	// NVMe read takes tens of µs, a request stuck behind a throttle or a
	// backup seconds.
	Lowest  = 50 * time.Microsecond
	Highest = 10 * time.Second
	// StepsPerDoubling: each bin is 2^(1/8) = 9 % wider than the one below,
	// so a percentile read inside a bin is at most 4.4 % off (the bin's
	// geometric middle against either edge); 142 boundaries. Every 8th is a
	// doubling: those are the buckets exported to Prometheus (ExportBounds).
	StepsPerDoubling = 8
)

// Boundaries are the histogram boundaries pvediskcheck sets, in ns, for
// read, write and flush alike: Lowest x 2^(k/8), rounded to the µs, up to
// the first at or above Highest.
var Boundaries = func() []int64 {
	var b []int64
	for k := 0; ; k++ {
		ns := float64(Lowest) * math.Pow(2, float64(k)/StepsPerDoubling)
		v := int64(math.Round(ns/1e3)) * 1e3
		b = append(b, v)
		if v >= int64(Highest) {
			return b
		}
	}
}()

// Ours reports whether h has pvediskcheck's boundaries.
func Ours(h *qmp.LatencyHistogram) bool {
	return h != nil && slices.Equal(h.Boundaries, Boundaries)
}

// Delta is b's bins minus a's: the requests completed between the two
// samples. False when either is missing, their boundaries differ (reset
// with others in between) or a bin went backwards (reset, or the VM
// restarted).
func Delta(a, b *qmp.LatencyHistogram) ([]int64, bool) {
	if a == nil || b == nil || len(a.Bins) != len(b.Bins) || !slices.Equal(a.Boundaries, b.Boundaries) {
		return nil, false
	}
	d := make([]int64, len(b.Bins))
	for i := range d {
		if d[i] = b.Bins[i] - a.Bins[i]; d[i] < 0 {
			return nil, false
		}
	}
	return d, true
}

// Quantile is the latency below which the share q (0..1) of the requests
// counted in bins fell. Inside a bin it interpolates geometrically (bins
// grow by a constant factor), in the first bin [0, b0) linearly; in the last
// bin, open above, it is that bin's lower edge: a floor. False when bins
// count nothing.
func Quantile(bounds, bins []int64, q float64) (time.Duration, bool) {
	var total int64
	for _, n := range bins {
		total += n
	}
	if total == 0 || len(bins) != len(bounds)+1 {
		return 0, false
	}
	rank := q * float64(total)
	var below int64
	for i, n := range bins {
		if n == 0 || float64(below+n) < rank {
			below += n
			continue
		}
		frac := (rank - float64(below)) / float64(n)
		switch {
		case i == len(bounds):
			return time.Duration(bounds[i-1]), true
		case i == 0:
			return time.Duration(frac * float64(bounds[0])), true
		}
		lo, hi := float64(bounds[i-1]), float64(bounds[i])
		return time.Duration(lo * math.Pow(hi/lo, frac)), true
	}
	return time.Duration(bounds[len(bounds)-1]), true
}

// Percentiles are one disk's latency percentiles over one interval, in
// ms; nil where the disk has no histogram of that kind or completed no
// such request in the interval. Embedded in top's rows (JSON: omitted
// when nil, so output without --histogram is unchanged).
type Percentiles struct {
	ReadP50Ms  *float64 `json:"read_p50_ms,omitempty"`
	ReadP95Ms  *float64 `json:"read_p95_ms,omitempty"`
	ReadP99Ms  *float64 `json:"read_p99_ms,omitempty"`
	WriteP50Ms *float64 `json:"write_p50_ms,omitempty"`
	WriteP95Ms *float64 `json:"write_p95_ms,omitempty"`
	WriteP99Ms *float64 `json:"write_p99_ms,omitempty"`
	FlushP50Ms *float64 `json:"flush_p50_ms,omitempty"`
	FlushP95Ms *float64 `json:"flush_p95_ms,omitempty"`
	FlushP99Ms *float64 `json:"flush_p99_ms,omitempty"`
}

// Any reports whether any percentile is known.
func (p Percentiles) Any() bool {
	return p.ReadP50Ms != nil || p.WriteP50Ms != nil || p.FlushP50Ms != nil
}

// Of is the p50, p95 and p99 of kind k (nil each when unknown).
func (p Percentiles) Of(k Kind) (p50, p95, p99 *float64) {
	switch k {
	case Read:
		return p.ReadP50Ms, p.ReadP95Ms, p.ReadP99Ms
	case Write:
		return p.WriteP50Ms, p.WriteP95Ms, p.WriteP99Ms
	case Flush:
		return p.FlushP50Ms, p.FlushP95Ms, p.FlushP99Ms
	}
	return nil, nil, nil
}

// IntervalOf is the percentiles of the requests a disk completed between
// two of its query-blockstats entries (a before b).
func IntervalOf(a, b qmp.BlockStats) Percentiles {
	var p Percentiles
	for _, k := range Kinds {
		hb := Of(&b, k)
		d, ok := Delta(Of(&a, k), hb)
		if !ok {
			continue
		}
		p50, p95, p99 := ms(hb.Boundaries, d, 0.50), ms(hb.Boundaries, d, 0.95), ms(hb.Boundaries, d, 0.99)
		switch k {
		case Read:
			p.ReadP50Ms, p.ReadP95Ms, p.ReadP99Ms = p50, p95, p99
		case Write:
			p.WriteP50Ms, p.WriteP95Ms, p.WriteP99Ms = p50, p95, p99
		case Flush:
			p.FlushP50Ms, p.FlushP95Ms, p.FlushP99Ms = p50, p95, p99
		}
	}
	return p
}

func ms(bounds, bins []int64, q float64) *float64 {
	d, ok := Quantile(bounds, bins, q)
	if !ok {
		return nil
	}
	v := units.Round(units.Ms(d), 3)
	return &v
}

// ExportBounds are the histogram's boundaries Prometheus gets, in ns: for
// pvediskcheck's own every doubling (19 buckets from 50 µs to 10 s: a
// bucket per boundary would be 143 series per disk and kind), for anyone
// else's every boundary it has.
func ExportBounds(h *qmp.LatencyHistogram) []int64 {
	if !Ours(h) {
		return h.Boundaries
	}
	var out []int64
	for i := 0; i < len(h.Boundaries); i += StepsPerDoubling {
		out = append(out, h.Boundaries[i])
	}
	if last := h.Boundaries[len(h.Boundaries)-1]; out[len(out)-1] != last {
		out = append(out, last)
	}
	return out
}

// Cumulative turns bins into Prometheus' cumulative buckets at the upper
// bounds given (seconds -> requests at or below; QEMU's bins end just
// below each boundary, so a request of exactly a boundary's latency counts
// one bucket higher than Prometheus' le would put it), and their total.
// Every bound must be one of bounds.
func Cumulative(bounds, bins []int64, at []int64) (map[float64]uint64, uint64) {
	out := make(map[float64]uint64, len(at))
	var run uint64
	j := 0
	for i, b := range bounds {
		run += uint64(max(bins[i], 0))
		for j < len(at) && at[j] == b {
			out[float64(b)/1e9] = run
			j++
		}
	}
	return out, run + uint64(max(bins[len(bins)-1], 0))
}
