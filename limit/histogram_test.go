package limit

import (
	"os"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/sampler"
)

// The steady part's percentiles come from the two samples that bound it:
// here latency/testdata's recorded answers (8 writes in flight under
// iops-write=20, ~390 ms each); without histograms there are none.
func TestSteadyPercentiles(t *testing.T) {
	sample := func(name string, at time.Time) sampler.Sample {
		b, err := os.ReadFile("../latency/testdata/qemu-7.2.22/" + name)
		if err != nil {
			t.Fatal(err)
		}
		s := sampler.Sample{Time: at, Stats: map[string]qmp.BlockStats{}}
		for _, st := range qmp.ParseBlockstats(gjson.ParseBytes(b)) {
			s.Stats[st.ID] = st
		}
		return s
	}
	t0 := time.Unix(1764590000, 0)
	m := &Measurement{Disk: "scsi1", Start: t0, Window: 12 * time.Second, Interval: Interval, Samples: []sampler.Sample{
		sample("query-blockstats-iops20-depth8-a.json", t0),
		sample("query-blockstats-iops20-depth8-a.json", t0.Add(Skip)),
		sample("query-blockstats-iops20-depth8-b.json", t0.Add(11*time.Second)),
	}}
	r, err := m.Steady()
	if err != nil {
		t.Fatal(err)
	}
	p := m.steadyPercentiles(r)
	if p == nil || p.WriteP50Ms == nil || *p.WriteP50Ms < 380 || *p.WriteP50Ms > 400 || p.ReadP50Ms != nil {
		t.Fatalf("percentiles %+v", p)
	}
	for i := range m.Samples {
		st := m.Samples[i].Stats["scsi1"]
		st.RdLatency, st.WrLatency, st.FlushLatency = nil, nil, nil
		m.Samples[i].Stats["scsi1"] = st
	}
	if p := m.steadyPercentiles(r); p != nil {
		t.Errorf("percentiles without histograms: %+v", p)
	}
}
