package sampler

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// TestDiffEveryCounter: b - a for each counter (each a distinct value, so
// a counter taken from the wrong field or added shows), b's names, and
// driver-specific stats only when both samples have them.
func TestDiffEveryCounter(t *testing.T) {
	a := qmp.BlockStats{ID: "old", NodeName: "n-old", RdBytes: 1, WrBytes: 2, RdOps: 3, WrOps: 4, FlushOps: 5, FlushTotalTimeNs: 6,
		RdTotalTimeNs: 7, WrTotalTimeNs: 8, UnmapOps: 9, UnmapBytes: 10, DiscardNbOK: 11, DiscardNbFailed: 12, DiscardBytesOK: 13,
		HasDriverSpecific: true, Timestamp: 14}
	b := qmp.BlockStats{ID: "scsi1", NodeName: "drive-scsi1", RdBytes: 101, WrBytes: 202, RdOps: 303, WrOps: 404, FlushOps: 505, FlushTotalTimeNs: 606,
		RdTotalTimeNs: 707, WrTotalTimeNs: 808, UnmapOps: 909, UnmapBytes: 1010, DiscardNbOK: 1111, DiscardNbFailed: 1212, DiscardBytesOK: 1313,
		HasDriverSpecific: true, Timestamp: 1414}
	want := qmp.BlockStats{ID: "scsi1", NodeName: "drive-scsi1", RdBytes: 100, WrBytes: 200, RdOps: 300, WrOps: 400, FlushOps: 500, FlushTotalTimeNs: 600,
		RdTotalTimeNs: 700, WrTotalTimeNs: 800, UnmapOps: 900, UnmapBytes: 1000, DiscardNbOK: 1100, DiscardNbFailed: 1200, DiscardBytesOK: 1300,
		HasDriverSpecific: true, Timestamp: 1400}
	if got := Diff(a, b); !reflect.DeepEqual(got, want) {
		t.Errorf("Diff\n got %+v\nwant %+v", got, want)
	}
	a.HasDriverSpecific = false
	if Diff(a, b).HasDriverSpecific || Diff(b, a).HasDriverSpecific {
		t.Error("driver-specific with one side only")
	}
}

// TestSlopeEdges: a line away from the origin (the means matter), a flat
// one, and no slope for fewer than two points or unequal lengths.
func TestSlopeEdges(t *testing.T) {
	if s := Slope([]float64{10, 11, 12, 13}, []float64{103, 105, 107, 109}); s != 2 {
		t.Errorf("offset line: %v", s)
	}
	if s := Slope([]float64{10, 11, 12}, []float64{5, 5, 5}); s != 0 {
		t.Errorf("flat: %v", s)
	}
	if s := Slope([]float64{-3, -2, -1}, []float64{9, 6, 3}); s != -3 {
		t.Errorf("falling: %v", s)
	}
	for name, c := range map[string][2][]float64{"one point": {{1}, {1}}, "unequal": {{1, 2, 3}, {1, 2}}, "none": {nil, nil}} {
		if s := Slope(c[0], c[1]); !math.IsNaN(s) {
			t.Errorf("%s: %v", name, s)
		}
	}
}

// TestDeltaRates: each rate over the seconds between the samples; none
// when no time passed or the samples are out of order.
func TestDeltaRates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	a := Sample{Time: t0, Stats: map[string]qmp.BlockStats{"scsi1": {RdBytes: 100, WrBytes: 200, RdOps: 10, WrOps: 20, FlushOps: 2}}}
	b := Sample{Time: t0.Add(2 * time.Second), Stats: map[string]qmp.BlockStats{"scsi1": {RdBytes: 4100, WrBytes: 8200, RdOps: 50, WrOps: 100, FlushOps: 8}}}
	r := DeltaRates("scsi1", a, b)
	if r.ReadBytesPerSec != 2000 || r.WriteBytesPerSec != 4000 || r.ReadOpsPerSec != 20 || r.WriteOpsPerSec != 40 || r.FlushOpsPerSec != 3 ||
		r.Samples != 2 || !r.From.Equal(t0) || !r.To.Equal(b.Time) || r.Disk != "scsi1" {
		t.Errorf("%+v", r)
	}
	for name, bt := range map[string]time.Time{"same time": t0, "before": t0.Add(-time.Second)} {
		b.Time = bt
		if r := DeltaRates("scsi1", a, b); r.ReadBytesPerSec != 0 || r.WriteOpsPerSec != 0 || r.FlushOpsPerSec != 0 {
			t.Errorf("%s: %+v", name, r)
		}
	}
}

// TestDeviceIntervalOfUnchanged: a counter that did not move is no
// counter going backwards (a device that only writes, or only reads);
// rates are per second of the interval.
func TestDeviceIntervalOfUnchanged(t *testing.T) {
	a := BlockStat{ReadIOs: 10, ReadTicksMs: 10, WriteIOs: 10, WriteTicksMs: 10, IOTicksMs: 100}
	for name, c := range map[string]struct {
		b          BlockStat
		rd, wr     float64
		busy       float64
		rlat, wlat time.Duration
	}{
		"writes only": {BlockStat{ReadIOs: 10, ReadTicksMs: 10, WriteIOs: 30, WriteTicksMs: 50, IOTicksMs: 600}, 0, 5, 0.125, 0, 2 * time.Millisecond},
		"reads only":  {BlockStat{ReadIOs: 18, ReadTicksMs: 42, WriteIOs: 10, WriteTicksMs: 10, IOTicksMs: 100}, 2, 0, 0, 4 * time.Millisecond, 0},
		"nothing":     {a, 0, 0, 0, 0, 0},
	} {
		di, ok := DeviceIntervalOf(a, c.b, 4)
		if !ok || di.ReadOpsPerSec != c.rd || di.WriteOpsPerSec != c.wr || di.Busy != c.busy || di.ReadLatency != c.rlat || di.WriteLatency != c.wlat || di.Seconds != 4 {
			t.Errorf("%s: %+v %v", name, di, ok)
		}
	}
}

// TestParseBlockStatOldKernel: a stat of 11 fields (kernels before 4.18,
// without discard and flush counters) is read, the missing counters 0; 10
// fields are refused.
func TestParseBlockStatOldKernel(t *testing.T) {
	s, err := parseBlockStat("sda", "1 2 3 4 5 6 7 8 9 10 11\n")
	if err != nil || s.ReadIOs != 1 || s.ReadSectors != 3 || s.ReadTicksMs != 4 || s.WriteIOs != 5 || s.WriteSectors != 7 || s.WriteTicksMs != 8 ||
		s.InFlight != 9 || s.IOTicksMs != 10 || s.QueueTicksMs != 11 || s.DiscardIOs != 0 || s.FlushIOs != 0 || s.FlushTicksMs != 0 {
		t.Errorf("%+v %v", s, err)
	}
	if _, err := parseBlockStat("sda", "1 2 3 4 5 6 7 8 9 10\n"); err == nil {
		t.Error("10 fields accepted")
	}
}

// TestWindowDefaults: a zero Interval is 500 ms, a zero Patience the
// interval; set ones are kept.
func TestWindowDefaults(t *testing.T) {
	for _, c := range []struct {
		w                  Window
		interval, patience time.Duration
	}{
		{Window{}, 500 * time.Millisecond, 500 * time.Millisecond},
		{Window{Interval: 200 * time.Millisecond}, 200 * time.Millisecond, 200 * time.Millisecond},
		{Window{Interval: 200 * time.Millisecond, Patience: time.Second}, 200 * time.Millisecond, time.Second},
		{Window{Patience: time.Nanosecond}, 500 * time.Millisecond, time.Nanosecond},
	} {
		if iv, p := c.w.interval(), c.w.patience(); iv != c.interval || p != c.patience {
			t.Errorf("%+v: interval %s patience %s, want %s %s", c.w, iv, p, c.interval, c.patience)
		}
	}
}

// TestWindowTwoSamples: a window of one interval gives exactly its two
// samples, enough for a rate; a VM that answers none says how many of how
// many it got.
func TestWindowTwoSamples(t *testing.T) {
	v, _ := runningVM(t, func(cmd string, args gjson.Result) string {
		return qmptest.Return(`[{"device":"","qdev":"scsi1","node-name":"drive-scsi1","stats":{"wr_bytes":1}}]`)
	})
	w := &Window{VM: v, Interval: 100 * time.Millisecond}
	ser, err := w.Run(context.Background(), 100*time.Millisecond)
	if err != nil || len(ser.Samples) != 2 {
		t.Fatalf("%v, %d samples", err, len(ser.Samples))
	}
	held, q := runningVM(t, func(cmd string, args gjson.Result) string { return qmptest.Return("[]") })
	release := q.Hold(t)
	defer release()
	w = &Window{VM: held, Interval: 100 * time.Millisecond, Patience: 20 * time.Millisecond, Timeout: 100 * time.Millisecond}
	ser, err = w.Run(context.Background(), 300*time.Millisecond)
	if !errors.Is(err, ErrTooFewSamples) || !strings.Contains(err.Error(), ": 0 of 4 in 300ms") || len(ser.Samples) != 0 || ser.Missed == 0 {
		t.Errorf("a socket held all window: %v, %+v", err, ser)
	}
}

// TestBlockDeviceNameKinds: only a block device with sysfs counters is
// named, through a symlink too; a character device or a regular file is
// not, even where sysfs has an entry of its name.
func TestBlockDeviceNameKinds(t *testing.T) {
	// A machine without /dev/loop0 (loop devices not set up yet) tests the
	// refusals only: the unit tier may not skip.
	st, err := os.Stat("/dev/loop0")
	loop := err == nil && st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0
	sys := t.TempDir()
	dir := t.TempDir()
	file := filepath.Join(dir, "x")
	for _, name := range []string{"loop0", "null", "x"} {
		if err := os.MkdirAll(filepath.Join(sys, "class", "block", name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(sys, "class", "block", name, "stat"), []byte(realStat), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "vm-100-disk-0")
	if err := os.Symlink("/dev/loop0", link); err != nil {
		t.Fatal(err)
	}
	h := Host{Sys: sys}
	for path, want := range map[string]string{"/dev/loop0": "loop0", link: "loop0", "/dev/null": "", file: "", filepath.Join(dir, "nope"): ""} {
		if want != "" && !loop {
			continue
		}
		name, ok := h.BlockDeviceName(path)
		if ok != (want != "") || name != want {
			t.Errorf("%s: %q %v, want %q", path, name, ok, want)
		}
	}
	// The same device without its sysfs counters is not named.
	if err := os.Remove(filepath.Join(sys, "class", "block", "loop0", "stat")); err != nil {
		t.Fatal(err)
	}
	if name, ok := h.BlockDeviceName("/dev/loop0"); ok {
		t.Errorf("no stat: named %q", name)
	}
}
