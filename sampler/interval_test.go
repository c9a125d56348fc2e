package sampler

import (
	"errors"
	"os"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// scsi1 of Lab 37's VM 370 under a 20 MiB/s write limit, 256 KiB qemu-io
// writes 16 in flight: query-blockstats twice, 1.003195068 s apart (QEMU
// 7.2.22; top/testdata/lab370-blockdev, query-blockstats-a/b.json).
var (
	recA = qmp.BlockStats{ID: "scsi1", WrBytes: 86245376, WrOps: 329, WrTotalTimeNs: 56366257467}
	recB = qmp.BlockStats{ID: "scsi1", WrBytes: 107216896, WrOps: 409, WrTotalTimeNs: 70586735889}
)

const recSeconds = 1.003195068

func TestIntervalOfRecordedPair(t *testing.T) {
	iv, err := IntervalOf(recA, recB, recSeconds)
	if err != nil {
		t.Fatal(err)
	}
	// 20 MiB (80 x 256 KiB) in 1.0032 s.
	if got, want := iv.WriteBytesPerSec, 20971520/recSeconds; got != want {
		t.Errorf("write B/s = %v, want %v", got, want)
	}
	if got, want := iv.WriteOpsPerSec, 80/recSeconds; got != want {
		t.Errorf("write IOPS = %v, want %v", got, want)
	}
	// 14.22 s of request time over 80 writes: 177.8 ms each, queued in the
	// throttle; 14.2 requests in flight on average.
	if got, want := iv.WriteLatency, time.Duration(14220478422/80); got != want {
		t.Errorf("write latency = %v, want %v", got, want)
	}
	if got, want := iv.QueueDepth, 14.220478422/recSeconds; got != want {
		t.Errorf("queue depth = %v, want %v", got, want)
	}
	// Nothing else moved: exact zeros.
	if iv.ReadBytesPerSec != 0 || iv.ReadOpsPerSec != 0 || iv.FlushOpsPerSec != 0 || iv.ReadLatency != 0 || iv.FlushLatency != 0 || iv.FailedOps != 0 {
		t.Errorf("idle counters moved: %+v", iv)
	}
	if iv.Seconds != recSeconds {
		t.Errorf("seconds = %v", iv.Seconds)
	}
}

func TestIntervalOfEveryCounter(t *testing.T) {
	a := qmp.BlockStats{RdBytes: 100, WrBytes: 200, RdOps: 1, WrOps: 2, FlushOps: 3, RdTotalTimeNs: 1e6, WrTotalTimeNs: 2e6, FlushTotalTimeNs: 3e6, FailedOps: 1, InvalidOps: 2}
	b := qmp.BlockStats{RdBytes: 4196, WrBytes: 8392, RdOps: 5, WrOps: 10, FlushOps: 5, RdTotalTimeNs: 9e6, WrTotalTimeNs: 50e6, FlushTotalTimeNs: 7e6, FailedOps: 4, InvalidOps: 3}
	iv, err := IntervalOf(a, b, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := Interval{Seconds: 2, ReadOpsPerSec: 2, WriteOpsPerSec: 4, FlushOpsPerSec: 1, ReadBytesPerSec: 2048, WriteBytesPerSec: 4096,
		ReadLatency: 2 * time.Millisecond, WriteLatency: 6 * time.Millisecond, FlushLatency: 2 * time.Millisecond,
		QueueDepth: (8e6 + 48e6 + 4e6) / 1e9 / 2, FailedOps: 4}
	if iv != want {
		t.Errorf("IntervalOf =\n%+v\nwant\n%+v", iv, want)
	}
}

func TestIntervalOfRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    qmp.BlockStats
		sec  float64
		back bool
	}{
		{"no time", recB, 0, false},
		{"negative time", recB, -1, false},
		{"restarted", qmp.BlockStats{WrBytes: 10}, 1, true},
		{"ops back", qmp.BlockStats{WrBytes: recA.WrBytes, WrOps: recA.WrOps - 1, WrTotalTimeNs: recA.WrTotalTimeNs}, 1, true},
		{"time back", qmp.BlockStats{WrBytes: recA.WrBytes, WrOps: recA.WrOps, WrTotalTimeNs: recA.WrTotalTimeNs - 1}, 1, true},
		{"read back", qmp.BlockStats{WrBytes: recA.WrBytes, WrOps: recA.WrOps, WrTotalTimeNs: recA.WrTotalTimeNs, RdOps: -1}, 1, true},
		{"read bytes back", qmp.BlockStats{WrBytes: recA.WrBytes, WrOps: recA.WrOps, WrTotalTimeNs: recA.WrTotalTimeNs, RdBytes: -1}, 1, true},
		{"read time back", qmp.BlockStats{WrBytes: recA.WrBytes, WrOps: recA.WrOps, WrTotalTimeNs: recA.WrTotalTimeNs, RdTotalTimeNs: -1}, 1, true},
		{"flush back", qmp.BlockStats{WrBytes: recA.WrBytes, WrOps: recA.WrOps, WrTotalTimeNs: recA.WrTotalTimeNs, FlushOps: -1}, 1, true},
		{"flush time back", qmp.BlockStats{WrBytes: recA.WrBytes, WrOps: recA.WrOps, WrTotalTimeNs: recA.WrTotalTimeNs, FlushTotalTimeNs: -1}, 1, true},
		{"failed back", qmp.BlockStats{WrBytes: recA.WrBytes, WrOps: recA.WrOps, WrTotalTimeNs: recA.WrTotalTimeNs, FailedOps: -1}, 1, true},
		{"invalid back", qmp.BlockStats{WrBytes: recA.WrBytes, WrOps: recA.WrOps, WrTotalTimeNs: recA.WrTotalTimeNs, InvalidOps: -1}, 1, true},
	} {
		_, err := IntervalOf(recA, tc.b, tc.sec)
		if err == nil || errors.Is(err, ErrCountersBack) != tc.back {
			t.Errorf("%s: err = %v (counters back: %v)", tc.name, err, tc.back)
		}
	}
	// The same answer twice is a valid, empty interval.
	if iv, err := IntervalOf(recA, recA, 1); err != nil || iv.QueueDepth != 0 || iv.WriteBytesPerSec != 0 {
		t.Errorf("same answer: %+v %v", iv, err)
	}
}

// /sys/class/block/loop1/stat below scsi1 at the same moments (the loop
// device behind the local-lvm stand-in; top/testdata/lab370-blockdev).
const (
	recDevA = "   40530        2   323790    59568    13317        0 13825472    78816        0    19608   139500       65        0    10240        2       33     1112\n"
	recDevB = "   40530        2   323790    59568    13397        0 13866432    78842        0    19624   139525       65        0    10240        2       33     1112\n"
)

func TestDeviceIntervalOfRecorded(t *testing.T) {
	a, err := parseBlockStat("loop1", recDevA)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := parseBlockStat("loop1", recDevB)
	if a.ReadIOs != 40530 || a.ReadSectors != 323790 || a.ReadTicksMs != 59568 || a.WriteTicksMs != 78816 || a.InFlight != 0 ||
		a.IOTicksMs != 19608 || a.QueueTicksMs != 139500 || a.FlushIOs != 33 || a.FlushTicksMs != 1112 {
		t.Fatalf("parsed %+v", a)
	}
	const sec = 1.006878968 // devices_ns b - a
	di, ok := DeviceIntervalOf(a, b, sec)
	if !ok {
		t.Fatal("not comparable")
	}
	// The same 80 writes reached the loop device and took 26 ms together:
	// 0.325 ms each, against 177.8 ms in QEMU (the throttle's queue).
	if di.WriteLatency != 325*time.Microsecond || di.Latency != 325*time.Microsecond || di.ReadLatency != 0 {
		t.Errorf("latency %v (write %v, read %v)", di.Latency, di.WriteLatency, di.ReadLatency)
	}
	if di.WriteOpsPerSec != 80/sec || di.ReadOpsPerSec != 0 || di.Busy != 0.016/sec || di.Seconds != sec {
		t.Errorf("%+v", di)
	}
}

func TestDeviceIntervalOfMixedAndEdges(t *testing.T) {
	a := BlockStat{ReadIOs: 10, ReadTicksMs: 10, WriteIOs: 10, WriteTicksMs: 10}
	b := BlockStat{ReadIOs: 12, ReadTicksMs: 30, WriteIOs: 16, WriteTicksMs: 16, IOTicksMs: 5000}
	di, ok := DeviceIntervalOf(a, b, 2)
	// reads 20 ms / 2, writes 6 ms / 6, both 26 ms / 8; busy capped at 1.
	if !ok || di.ReadLatency != 10*time.Millisecond || di.WriteLatency != time.Millisecond || di.Latency != 3250*time.Microsecond || di.Busy != 1 {
		t.Errorf("%+v %v", di, ok)
	}
	for name, b := range map[string]BlockStat{
		"reads back":       {ReadIOs: 9, ReadTicksMs: 10, WriteIOs: 10, WriteTicksMs: 10},
		"writes back":      {ReadIOs: 10, ReadTicksMs: 10, WriteIOs: 9, WriteTicksMs: 10},
		"read ticks back":  {ReadIOs: 10, ReadTicksMs: 9, WriteIOs: 10, WriteTicksMs: 10},
		"write ticks back": {ReadIOs: 10, ReadTicksMs: 10, WriteIOs: 10, WriteTicksMs: 9},
		"io ticks back":    {ReadIOs: 10, ReadTicksMs: 10, WriteIOs: 10, WriteTicksMs: 10, IOTicksMs: -1},
	} {
		if _, ok := DeviceIntervalOf(a, b, 1); ok {
			t.Errorf("%s: compared", name)
		}
	}
	if _, ok := DeviceIntervalOf(a, a, 0); ok {
		t.Error("no time: compared")
	}
}

func TestBlockDeviceName(t *testing.T) {
	sys := t.TempDir()
	h := Host{Sys: sys}
	// Not a block device: a plain file, a missing path.
	f := sys + "/file"
	writeFile(t, f, "x")
	if _, ok := h.BlockDeviceName(f); ok {
		t.Error("a file is a block device")
	}
	if _, ok := h.BlockDeviceName(sys + "/nope"); ok {
		t.Error("a missing path is a block device")
	}
	// A real block device of this machine, when there is one with sysfs
	// counters (loop devices are, once created; /dev/loop0 exists as a node
	// even unused).
	real := Host{Sys: "/sys"}
	if name, ok := real.BlockDeviceName("/dev/loop0"); ok {
		if name != "loop0" {
			t.Errorf("name = %q", name)
		}
		if _, err := real.BlockStatOf(name); err != nil {
			t.Error(err)
		}
		// The same device without its sysfs counters is not used.
		if _, ok := h.BlockDeviceName("/dev/loop0"); ok {
			t.Error("no sysfs stat, yet named")
		}
	}
	if _, err := h.BlockStatOf("nope"); err == nil {
		t.Error("missing stat read")
	}
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}
