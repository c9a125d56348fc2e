package flush

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

// rowsText is the rows in short: the time ("4", "1.2" off the second),
// written bytes / flushes / flush ns / dirty, or "gap FROM-TO".
func rowsText(rows []Row) string {
	var out []string
	for _, r := range rows {
		switch {
		case r.Gap != nil:
			out = append(out, fmt.Sprintf("gap %g-%g", r.Gap.FromS, r.Gap.ToS))
		case r.Whole:
			out = append(out, fmt.Sprintf("%g:%d/%d/%d/%d/%d", r.TimeS, r.WrittenBytes, r.Flushes, r.FlushTimeNs, r.DirtyBytes, r.WritebackBytes))
		default:
			out = append(out, fmt.Sprintf("~%g:%d/%d/%d/%d/%d", r.TimeS, r.WrittenBytes, r.Flushes, r.FlushTimeNs, r.DirtyBytes, r.WritebackBytes))
		}
	}
	return strings.Join(out, " ")
}

// The recorded series (testdata/README.md): one row per second and never a
// second twice, the sample before a gap, the gap, the sample that closes a
// cut window.
func TestRowsRecorded(t *testing.T) {
	for _, c := range []struct {
		file string
		at   string // the rows' times
	}{
		// QEMU stopped for 3 s at 1 s: two samples at 4.0 s (the late one
		// and the next tick) make one row.
		{"real-sigstop-3s.json", "1 gap 4 5 6 7"},
		// QEMU killed at 1.25 s: the last sample, then the gap to the end.
		{"real-sigkill.json", "1 ~1.25 gap"},
		// A loaded socket: samples off the grid, one row per second.
		{"real-storages.json", "1 2 ~2.93"},
	} {
		b, err := os.ReadFile("testdata/" + c.file)
		if err != nil {
			t.Fatal(err)
		}
		var r Result
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		var at []string
		var written int64
		for _, row := range r.Rows() {
			switch {
			case row.Gap != nil:
				at = append(at, "gap")
			case row.Whole:
				at = append(at, fmt.Sprintf("%g", row.TimeS))
			default:
				at = append(at, fmt.Sprintf("~%.3g", row.TimeS))
			}
			written += row.WrittenBytes
		}
		if strings.Join(at, " ") != c.at {
			t.Errorf("%s: rows at %q, want %q", c.file, strings.Join(at, " "), c.at)
		}
		// The rows add up to the whole series: nothing counted twice or lost.
		var want int64
		first, last := r.Samples[0], r.Samples[len(r.Samples)-1]
		for id, d := range last.Disks {
			want += d.WrBytes - first.Disks[id].WrBytes
		}
		if written != want {
			t.Errorf("%s: rows write %d bytes, the series %d", c.file, written, want)
		}
	}
}

func TestRows(t *testing.T) {
	s := func(at float64, wr, fl, ft, dirty int64) Sample {
		return Sample{TimeS: at, DirtyBytes: dirty, WritebackBytes: dirty / 2, Disks: map[string]DiskStat{
			"scsi1": {WrBytes: wr, FlushOps: fl, FlushTotalTimeNs: ft},
			"scsi2": {WrBytes: 2 * wr, FlushOps: 2 * fl, FlushTotalTimeNs: 2 * ft},
		}}
	}
	cases := []struct {
		name string
		r    Result
		want string
	}{
		{"nothing", Result{}, ""},
		{"one sample", Result{Samples: []Sample{s(0, 0, 0, 0, 10)}}, ""},
		{"only a gap", Result{Gaps: []Gap{{FromS: 0, ToS: 3}}}, "gap 0-3"},
		// Every second once, the disks added up; a sample read up to 50 ms
		// early stands for its second (1.95 is 2), 1.94 does not.
		{"per second", Result{Samples: []Sample{s(0, 0, 0, 0, 10), s(0.5, 10, 1, 5, 20), s(1.0, 20, 2, 10, 30), s(1.5, 30, 3, 15, 40), s(1.95, 40, 4, 20, 50), s(2.5, 50, 5, 25, 60), s(3, 60, 6, 30, 70)}},
			"1:60/6/30/30/15 2:60/6/30/50/25 3:60/6/30/70/35"},
		{"early by more than 50 ms", Result{Samples: []Sample{s(0, 0, 0, 0, 0), s(1.94, 10, 0, 0, 0), s(2.0, 20, 0, 0, 0)}},
			"1:30/0/0/0/0 2:30/0/0/0/0"},
		// The last sample before a gap, off the second; the gap; the next
		// second after it; a gap after the last sample.
		{"gaps", Result{Samples: []Sample{s(0, 0, 0, 0, 0), s(1.0, 10, 0, 0, 0), s(1.3, 20, 0, 0, 0), s(4.0, 30, 0, 0, 0), s(4.5, 40, 0, 0, 0)},
			Gaps: []Gap{{FromS: 1.3, ToS: 4.0}, {FromS: 4.5, ToS: 7}}},
			"1:30/0/0/0/0 ~1.3:30/0/0/0/0 gap 1.3-4 4:30/0/0/0/0 ~4.5:30/0/0/0/0 gap 4.5-7"},
		// A gap ending 50 ms after a sample is shown before it.
		{"gap just before", Result{Samples: []Sample{s(0, 0, 0, 0, 0), s(1, 10, 0, 0, 0), s(3.0, 20, 0, 0, 0)}, Gaps: []Gap{{FromS: 1, ToS: 3.04}}},
			"1:30/0/0/0/0 gap 1-3.04 3:30/0/0/0/0"},
		// The 50 ms edges, where they are exact in floating point (0.05 +
		// 0.05 is 0.1): a gap ending 50 ms after a sample comes before it; a
		// sample 50 ms before a gap is not "the last before it"; a closing
		// sample 50 ms past its second stands for the second.
		{"gap ends 50 ms after", Result{Samples: []Sample{s(0, 0, 0, 0, 0), s(0.05, 10, 0, 0, 0)}, Gaps: []Gap{{FromS: 0, ToS: 0.1}}},
			"gap 0-0.1 0:30/0/0/0/0"},
		{"gap starts 50 ms after", Result{Samples: []Sample{s(0, 0, 0, 0, 0), s(0.05, 10, 0, 0, 0), s(2, 20, 0, 0, 0)}, Gaps: []Gap{{FromS: 0.1, ToS: 2}}},
			"gap 0.1-2 2:60/0/0/0/0"},
		{"closing 50 ms past", Result{Samples: []Sample{s(0, 0, 0, 0, 0), s(0.05, 10, 0, 0, 0)}}, "0:30/0/0/0/0"},
		// The closing sample on the second keeps it whole.
		{"closing on the second", Result{Samples: []Sample{s(0, 0, 0, 0, 0), s(0.5, 10, 0, 0, 0), s(1.02, 20, 0, 0, 0)}}, "1:60/0/0/0/0"},
	}
	for _, c := range cases {
		if got := rowsText(c.r.Rows()); got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}
