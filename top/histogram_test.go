package top

import (
	"context"
	"encoding/json"
	"slices"
	"testing"

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
