package sampler

import (
	"errors"
	"time"

	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// Interval is one disk's activity between two query-blockstats answers,
// as QEMU counted it for the guest's device (throttle queue included).
type Interval struct {
	Seconds float64 // between the two answers

	ReadOpsPerSec, WriteOpsPerSec, FlushOpsPerSec float64
	ReadBytesPerSec, WriteBytesPerSec             float64
	// Mean latency of the requests completed in the interval, from the
	// rd/wr/flush_total_time_ns and _operations deltas; 0 when none
	// completed.
	ReadLatency, WriteLatency, FlushLatency time.Duration
	// QueueDepth is the time requests spent in flight per second of the
	// interval (reads, writes and flushes that completed in it): the mean
	// number of requests QEMU had outstanding, by Little's law.
	QueueDepth float64
	// FailedOps counts requests that failed or that QEMU refused in the
	// interval.
	FailedOps int64
}

// ErrCountersBack means a counter went backwards: not the same QEMU
// process (the VM restarted), so the two answers cannot be compared.
var ErrCountersBack = errors.New("counters went backwards (VM restarted?)")

// IntervalOf is the disk's activity from a to b, answers taken seconds
// apart.
func IntervalOf(a, b qmp.BlockStats, seconds float64) (Interval, error) {
	if seconds <= 0 {
		return Interval{}, errors.New("interval: no time between the two samples")
	}
	d := Diff(a, b)
	if d.RdOps < 0 || d.WrOps < 0 || d.FlushOps < 0 || d.RdBytes < 0 || d.WrBytes < 0 ||
		d.RdTotalTimeNs < 0 || d.WrTotalTimeNs < 0 || d.FlushTotalTimeNs < 0 || b.FailedOps < a.FailedOps || b.InvalidOps < a.InvalidOps {
		return Interval{}, ErrCountersBack
	}
	iv := Interval{
		Seconds:          seconds,
		ReadOpsPerSec:    float64(d.RdOps) / seconds,
		WriteOpsPerSec:   float64(d.WrOps) / seconds,
		FlushOpsPerSec:   float64(d.FlushOps) / seconds,
		ReadBytesPerSec:  float64(d.RdBytes) / seconds,
		WriteBytesPerSec: float64(d.WrBytes) / seconds,
		ReadLatency:      meanNs(d.RdTotalTimeNs, d.RdOps),
		WriteLatency:     meanNs(d.WrTotalTimeNs, d.WrOps),
		FlushLatency:     meanNs(d.FlushTotalTimeNs, d.FlushOps),
		QueueDepth:       float64(d.RdTotalTimeNs+d.WrTotalTimeNs+d.FlushTotalTimeNs) / 1e9 / seconds,
		FailedOps:        b.FailedOps - a.FailedOps + b.InvalidOps - a.InvalidOps,
	}
	return iv, nil
}

func meanNs(totalNs, ops int64) time.Duration {
	if ops <= 0 {
		return 0
	}
	return time.Duration(totalNs / ops)
}

// DeviceInterval is a node block device's own activity between two reads
// of its /sys/class/block/<dev>/stat: what the storage below QEMU did.
type DeviceInterval struct {
	Seconds                       float64
	ReadOpsPerSec, WriteOpsPerSec float64
	// Latency is the mean time a read or write spent in the device (block
	// layer queue included), over both; 0 when none completed. The stat
	// file counts milliseconds.
	Latency, ReadLatency, WriteLatency time.Duration
	// Busy is the share of the interval the device had requests in flight
	// (io_ticks), 0 to 1.
	Busy float64
}

// DeviceIntervalOf is the device's activity from a to b, read seconds
// apart; ok is false when a counter went backwards (another device under
// the same name) or seconds is not positive.
func DeviceIntervalOf(a, b BlockStat, seconds float64) (DeviceInterval, bool) {
	rd, wr := b.ReadIOs-a.ReadIOs, b.WriteIOs-a.WriteIOs
	rt, wt, io := b.ReadTicksMs-a.ReadTicksMs, b.WriteTicksMs-a.WriteTicksMs, b.IOTicksMs-a.IOTicksMs
	if seconds <= 0 || rd < 0 || wr < 0 || rt < 0 || wt < 0 || io < 0 {
		return DeviceInterval{}, false
	}
	ms := func(ticks, ops int64) time.Duration {
		if ops <= 0 {
			return 0
		}
		return time.Duration(ticks) * time.Millisecond / time.Duration(ops)
	}
	return DeviceInterval{
		Seconds:        seconds,
		ReadOpsPerSec:  float64(rd) / seconds,
		WriteOpsPerSec: float64(wr) / seconds,
		Latency:        ms(rt+wt, rd+wr),
		ReadLatency:    ms(rt, rd),
		WriteLatency:   ms(wt, wr),
		Busy:           min(float64(io)/1000/seconds, 1),
	}, true
}
