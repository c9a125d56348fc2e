package latency

import (
	"encoding/json"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// withoutHistograms is the recorded answer with the three histograms
// removed: what the same disk's entry is without --histogram.
func withoutHistograms(t testing.TB, raw []byte) []byte {
	var entries []map[string]any
	if err := json.Unmarshal(raw, &entries); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		st := e["stats"].(map[string]any)
		for _, k := range []string{"rd_latency_histogram", "wr_latency_histogram", "flush_latency_histogram"} {
			delete(st, k)
		}
	}
	b, err := json.Marshal(entries)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestWithoutHistogramsSameCounters(t *testing.T) {
	with, raw := recordedEntry(t, "7.2.22", "query-blockstats-iops20-depth8-b.json")
	without := qmp.ParseBlockstats(gjson.ParseBytes(withoutHistograms(t, raw)))[0]
	if without.WrLatency != nil || with.WrLatency == nil {
		t.Fatal("histograms not where expected")
	}
	with.RdLatency, with.WrLatency, with.FlushLatency = nil, nil, nil
	if with != without {
		t.Errorf("counters differ:\n%+v\n%+v", with, without)
	}
}

// BenchmarkParseDisk is the cost of parsing one disk's query-blockstats
// entry (qmp.ParseBlockstats, as top and metrics do every sample) with
// pvediskcheck's three 142-boundary histograms and without them: the
// difference is what --histogram adds per disk and sample (README
// "Latency histograms": under 20 µs is the bound).
func BenchmarkParseDisk(b *testing.B) {
	_, raw := recordedEntry(b, "7.2.22", "query-blockstats-iops20-depth8-b.json")
	for _, c := range []struct {
		name string
		raw  []byte
	}{{"without", withoutHistograms(b, raw)}, {"with", raw}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				r := gjson.ParseBytes(c.raw)
				if len(qmp.ParseBlockstats(r)) != 1 {
					b.Fatal("one disk expected")
				}
			}
		})
	}
}

// BenchmarkIntervalOf is the percentiles of one disk and interval.
func BenchmarkIntervalOf(b *testing.B) {
	a, _ := recordedEntry(b, "7.2.22", "query-blockstats-iops20-depth8-a.json")
	c, _ := recordedEntry(b, "7.2.22", "query-blockstats-iops20-depth8-b.json")
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if !IntervalOf(a, c).Any() {
			b.Fatal("no percentiles")
		}
	}
}
