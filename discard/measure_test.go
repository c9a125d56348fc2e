package discard

import (
	"slices"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/sampler"
)

// TestSampling: a gap is where two readings lie more than 1.5 intervals
// apart (a sample that waited for a busy socket comes up to half an
// interval late); covered is the span from the reading before to the last.
func TestSampling(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms ...int) []sampler.Sample {
		var out []sampler.Sample
		for _, m := range ms {
			out = append(out, sampler.Sample{Time: t0.Add(time.Duration(m) * time.Millisecond)})
		}
		return out
	}
	iv := time.Second
	// 1.0 -> 2.5 s and 2.5 -> 4.0 s are exactly 1.5 intervals: no gap;
	// 4.0 -> 5.501 s is one.
	s := sampling(t0, at(20, 1000, 2500, 4000, 5501, 6000), 2, iv, "")
	want := []Gap{{4.0, 5.5}}
	if !slices.Equal(s.Gaps, want) || s.CoveredSeconds != 6 || s.Samples != 6 || s.Missed != 2 || s.IntervalSeconds != 1 {
		t.Errorf("%+v, want gaps %v", s, want)
	}
	// The reading before and the first sample are a reading apart too.
	if s := sampling(t0, at(1600), 1, iv, "cut"); !slices.Equal(s.Gaps, []Gap{{0, 1.6}}) || s.Cut != "cut" || s.CoveredSeconds != 1.6 {
		t.Errorf("%+v", s)
	}
	if s := sampling(t0, nil, 0, iv, "gone"); len(s.Gaps) != 0 || s.Gaps == nil || s.CoveredSeconds != 0 {
		t.Errorf("no samples: %+v", s)
	}
	// README and the help text say --wait samples every second.
	if DefaultInterval != time.Second {
		t.Errorf("DefaultInterval %s", DefaultInterval)
	}
}
