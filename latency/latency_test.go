package latency

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qmp"
)

func TestBoundaries(t *testing.T) {
	b := Boundaries
	if b[0] != int64(Lowest) || b[len(b)-1] < int64(Highest) || b[len(b)-2] >= int64(Highest) {
		t.Fatalf("boundaries %d .. %d (%d), want 50 µs up to the first at or above 10 s", b[0], b[len(b)-1], len(b))
	}
	if len(b) != 142 {
		t.Errorf("%d boundaries, want 142", len(b))
	}
	for i := 1; i < len(b); i++ {
		if r := float64(b[i]) / float64(b[i-1]); r < 1.06 || r > 1.12 {
			t.Errorf("boundary %d: %d / %d = %.3f, want about 2^(1/8)", i, b[i], b[i-1], r)
		}
	}
}

func TestQuantile(t *testing.T) {
	bounds := []int64{100, 200, 400}
	ms := func(d time.Duration) float64 { return float64(d) }
	for _, c := range []struct {
		name string
		bins []int64
		q    float64
		want float64 // ns; -1: not known
	}{
		{"empty", []int64{0, 0, 0, 0}, 0.5, -1},
		{"wrong length", []int64{1, 1}, 0.5, -1},
		{"first bin linear", []int64{10, 0, 0, 0}, 0.5, 50},
		{"middle bin geometric", []int64{0, 10, 0, 0}, 0.5, 100 * math.Sqrt2},
		{"bin edge", []int64{5, 5, 0, 0}, 0.5, 100},
		{"p99 in upper bin", []int64{90, 0, 10, 0}, 0.99, 200 * math.Pow(2, 0.9)},
		{"open last bin is a floor", []int64{0, 0, 0, 4}, 0.99, 400},
		{"p100", []int64{1, 1, 1, 0}, 1, 400},
	} {
		got, ok := Quantile(bounds, c.bins, c.q)
		if c.want < 0 {
			if ok {
				t.Errorf("%s: %v, want none", c.name, got)
			}
			continue
		}
		if !ok || math.Abs(ms(got)-c.want) > 1 {
			t.Errorf("%s: %v %v, want %.1f ns", c.name, ms(got), ok, c.want)
		}
	}
}

func TestDelta(t *testing.T) {
	a := &qmp.LatencyHistogram{Boundaries: []int64{1, 2}, Bins: []int64{1, 2, 3}}
	b := &qmp.LatencyHistogram{Boundaries: []int64{1, 2}, Bins: []int64{2, 2, 5}}
	if d, ok := Delta(a, b); !ok || !slices.Equal(d, []int64{1, 0, 2}) {
		t.Errorf("delta %v %v", d, ok)
	}
	if _, ok := Delta(b, a); ok {
		t.Error("bins went backwards (reset) and still a delta")
	}
	other := &qmp.LatencyHistogram{Boundaries: []int64{1, 3}, Bins: []int64{2, 2, 5}}
	if _, ok := Delta(a, other); ok {
		t.Error("other boundaries and still a delta")
	}
	if _, ok := Delta(nil, b); ok {
		t.Error("no histogram before and still a delta")
	}
}

// recordedEntry is scsi1 of a query-blockstats answer recorded from real
// QEMU (testdata/README.md).
func recordedEntry(t testing.TB, version, name string) (qmp.BlockStats, []byte) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "qemu-"+version, name))
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range qmp.ParseBlockstats(gjson.ParseBytes(raw)) {
		if b.ID == "scsi1" {
			return b, raw
		}
	}
	t.Fatalf("no scsi1 in %s", name)
	return qmp.BlockStats{}, nil
}

var recordedVersions = []string{"7.2.22", "11.1.3"}

// The recorded interval: 8 writes in flight under iops-write=20 for 8 s,
// each waiting about 390 ms; no read or flush was sent.
func TestIntervalOfRecorded(t *testing.T) {
	for _, v := range recordedVersions {
		a, _ := recordedEntry(t, v, "query-blockstats-iops20-depth8-a.json")
		b, _ := recordedEntry(t, v, "query-blockstats-iops20-depth8-b.json")
		for _, h := range []*qmp.LatencyHistogram{b.RdLatency, b.WrLatency, b.FlushLatency} {
			if !Ours(h) || len(h.Bins) != len(Boundaries)+1 {
				t.Fatalf("%s: histogram %+v is not pvediskcheck's", v, h)
			}
		}
		p := IntervalOf(a, b)
		if p.ReadP50Ms != nil || p.FlushP99Ms != nil {
			t.Errorf("%s: percentiles of requests never sent: %+v", v, p)
		}
		if p.WriteP50Ms == nil || p.WriteP99Ms == nil {
			t.Fatalf("%s: no write percentiles", v)
		}
		mean := float64(b.WrTotalTimeNs-a.WrTotalTimeNs) / float64(b.WrOps-a.WrOps) / 1e6
		if e := math.Abs(*p.WriteP50Ms-mean) / mean; e > 0.03 {
			t.Errorf("%s: p50 %.1f ms, mean %.1f ms", v, *p.WriteP50Ms, mean)
		}
		if *p.WriteP50Ms < 370 || *p.WriteP99Ms > 440 || *p.WriteP95Ms < *p.WriteP50Ms || *p.WriteP99Ms < *p.WriteP95Ms {
			t.Errorf("%s: p50 %.1f p95 %.1f p99 %.1f ms, want ordered around 390", v, *p.WriteP50Ms, *p.WriteP95Ms, *p.WriteP99Ms)
		}
		if got := IntervalOf(b, a); got.Any() {
			t.Errorf("%s: backwards interval gave %+v", v, got)
		}
	}
}

func TestExportBoundsAndCumulative(t *testing.T) {
	ours := &qmp.LatencyHistogram{Boundaries: Boundaries}
	at := ExportBounds(ours)
	if len(at) != 19 || at[0] != int64(Lowest) || at[len(at)-1] != Boundaries[len(Boundaries)-1] {
		t.Fatalf("exported bounds %v", at)
	}
	for i := 1; i < len(at)-1; i++ {
		if at[i] != 2*at[i-1] && math.Abs(float64(at[i])/float64(at[i-1])-2) > 0.02 {
			t.Errorf("exported bound %d: %d after %d, want a doubling", i, at[i], at[i-1])
		}
	}
	theirs := &qmp.LatencyHistogram{Boundaries: []int64{1000, 5000}}
	if got := ExportBounds(theirs); !slices.Equal(got, theirs.Boundaries) {
		t.Errorf("someone else's bounds exported as %v", got)
	}
	buckets, total := Cumulative([]int64{1000, 2000, 4000}, []int64{1, 2, 3, 4}, []int64{1000, 4000})
	if total != 10 || len(buckets) != 2 || buckets[1e-6] != 1 || buckets[4e-6] != 6 {
		t.Errorf("cumulative %v total %d, want le 1µs: 1, le 4µs: 6, total 10", buckets, total)
	}
}
