package top

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/latency/latencytest"
)

// histReplies are VM 370's query-blockstats answers recorded with latency
// histograms (latency/testdata: scsi1 alone, 8 writes in flight under
// iops-write=20, ~390 ms each), preceded by the first one with its
// histograms removed: the disk as top first finds it.
func histReplies(t *testing.T) []string {
	bare, a, b := latencytest.Recorded(t)
	return []string{bare, a, b}
}

// With --histogram: the histogram is set once, in the first sample's
// exchange; the samples after send what they send without it; each
// interval has percentiles (the first from the zero bins the set starts
// with); the sample says what was done; the run's end clears it.
func TestHistogramSetOnceAndCleared(t *testing.T) {
	r := recording(t, "blockdev")
	for _, hist := range []bool{false, true} {
		n := newFakeNode(t)
		v := n.addRecorded(r, 370)
		v.set("query-blockstats", histReplies(t)...)
		v.set("block-latency-histogram-set", "{}")
		m := n.monitor(Options{Histogram: hist})
		ctx := context.Background()
		var counts []int
		var samples []Sample
		for i := 0; i < 3; i++ {
			before := len(v.q.Seen())
			samples = append(samples, m.Sample(ctx))
			counts = append(counts, len(v.q.Seen())-before)
		}
		sets := 0
		for _, c := range v.q.Seen() {
			if c == "block-latency-histogram-set" {
				sets++
			}
		}
		if !hist {
			if sets != 0 || len(samples[2].Histograms) != 0 || diskRows(samples[2], 370)["scsi1"].Any() {
				t.Fatalf("without --histogram: %d sets, notes %v, row %+v", sets, samples[2].Histograms, diskRows(samples[2], 370)["scsi1"])
			}
			b, _ := json.Marshal(diskRows(samples[2], 370)["scsi1"])
			var keys map[string]any
			json.Unmarshal(b, &keys)
			if _, ok := keys["write_p50_ms"]; ok {
				t.Errorf("JSON without --histogram has percentiles: %s", b)
			}
			continue
		}
		if sets != 1 {
			t.Errorf("%d block-latency-histogram-set, want 1", sets)
		}
		// the first sample's extra command is the set; then none.
		if counts[1] != counts[2] || counts[0] < counts[1] {
			t.Errorf("commands per sample %v", counts)
		}
		for i, s := range samples[1:] {
			d := diskRows(s, 370)["scsi1"]
			// The recording's one read came before the first answer with
			// histograms: in the first interval (from the zero bins), not
			// in the second.
			if d.WriteP50Ms == nil || d.WriteP99Ms == nil || (d.ReadP50Ms != nil) != (i == 0) {
				t.Fatalf("sample %d: percentiles %+v", i+1, d.Percentiles)
			}
			if *d.WriteP50Ms < 300 || *d.WriteP50Ms > 450 {
				t.Errorf("sample %d: write p50 %.1f ms, want about 390", i+1, *d.WriteP50Ms)
			}
		}
		if got := samples[2].Histograms; len(got) != 1 || got[0].Disk != "scsi1" || got[0].Owner != "set" {
			t.Errorf("notes %+v", got)
		}
		if err := m.ReleaseHistograms(); err != nil {
			t.Fatal(err)
		}
		seen := v.q.Seen()
		if i := slices.Index(seen, "block-latency-histogram-set"); i < 0 || seen[len(seen)-1] != "block-latency-histogram-set" || len(seen)-1 == i {
			t.Errorf("release did not clear: %v", seen[max(0, len(seen)-4):])
		}
	}
}

// A histogram with pvediskcheck's boundaries that the run did not set (an
// earlier run killed) is said in every sample, with the command that
// clears it, as a latency-histogram-left finding, with or without
// --histogram (which then uses it as found and leaves it); the samples
// send the commands they send without it. One the run set itself is not.
func TestHistogramLeft(t *testing.T) {
	r := recording(t, "blockdev")
	bare, a, b := latencytest.Recorded(t)
	for _, c := range []struct {
		name    string
		hist    bool
		replies []string
		left    bool
	}{
		{"left, no --histogram", false, []string{a, a, b}, true},
		{"left, --histogram", true, []string{a, a, b}, true},
		{"none", false, []string{bare, bare, bare}, false},
		{"set by this run", true, []string{bare, a, b}, false},
	} {
		n := newFakeNode(t)
		v := n.addRecorded(r, 370)
		v.set("query-blockstats", c.replies...)
		v.set("block-latency-histogram-set", "{}")
		m := n.monitor(Options{Histogram: c.hist})
		var counts []int
		var samples []Sample
		for i := 0; i < 3; i++ {
			before := len(v.q.Seen())
			samples = append(samples, m.Sample(context.Background()))
			counts = append(counts, len(v.q.Seen())-before)
		}
		want := latency.Leftover{VMID: 370, Disk: "scsi1", Clear: latency.ClearCommand(n.paths.QMPSocket(370), "scsi1")}
		for i, s := range samples {
			var codes []Code
			for _, f := range s.Findings {
				if f.Code == HistogramLeft {
					codes = append(codes, f.Code)
					if f.VMID != 370 || !slices.Equal(f.Disks, []string{"scsi1"}) || f.Message != "VM 370: "+want.Message() {
						t.Errorf("%s: sample %d: finding %+v", c.name, i, f)
					}
				}
			}
			if !c.left {
				if len(s.HistogramsLeft) != 0 || len(codes) != 0 {
					t.Errorf("%s: sample %d: left %+v", c.name, i, s.HistogramsLeft)
				}
				continue
			}
			if !slices.Equal(s.HistogramsLeft, []latency.Leftover{want}) || len(codes) != 1 {
				t.Errorf("%s: sample %d: left %+v, %d findings", c.name, i, s.HistogramsLeft, len(codes))
			}
		}
		if c.hist && c.left {
			if got := samples[2].Histograms; len(got) != 1 || got[0].Owner != latency.Existing || !got[0].Leftover {
				t.Errorf("%s: notes %+v", c.name, got)
			}
		}
		sets := 0
		for _, cmd := range v.q.Seen() {
			if cmd == "block-latency-histogram-set" {
				sets++
			}
		}
		if want := map[bool]int{true: 1}[c.hist && !c.left]; sets != want {
			t.Errorf("%s: %d histogram sets, want %d", c.name, sets, want)
		}
		// Three commands per VM and sample after the first (README
		// "Speed"): the leftover costs none.
		if counts[1] != 3 || counts[2] != 3 {
			t.Errorf("%s: commands per sample %v", c.name, counts)
		}
	}
}
