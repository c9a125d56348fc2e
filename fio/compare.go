package fio

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Metric is one number a group has, and whether more of it is better.
type Metric struct {
	Key            string // --metric name: iops, bw, clat, lat, p99, fsync
	Title          string // column title
	Column         string // CSV column prefix, with the unit
	HigherIsBetter bool
	Of             func(*Group) *Stat // nil when the group does not have it
}

// Metrics in the order tables print them.
var Metrics = []Metric{
	{"iops", "IOPS", "iops", true, func(g *Group) *Stat { return &g.IOPS }},
	{"bw", "MiB/s", "bw_mibps", true, func(g *Group) *Stat { return &g.BandwidthMiBps }},
	{"clat", "clat mean", "clat_mean_ns", false, func(g *Group) *Stat { return g.ClatMeanNs }},
	{"lat", "lat mean", "lat_mean_ns", false, func(g *Group) *Stat { return g.LatMeanNs }},
	{"p99", "p99", "p99_ns", false, func(g *Group) *Stat { return g.P99Ns }},
	{"fsync", "fsync mean", "fsync_mean_ns", false, func(g *Group) *Stat { return g.FsyncMeanNs }},
}

// MetricByKey finds a metric by its --metric name.
func MetricByKey(key string) (Metric, bool) {
	for _, m := range Metrics {
		if m.Key == key {
			return m, true
		}
	}
	return Metric{}, false
}

// Verdict on one metric of A vs B.
type Verdict string

const (
	// Different: the runs of A and B do not overlap and the difference of
	// the means exceeds the spread (max-min) of both sides.
	Different Verdict = "different"
	// WithinNoise: the difference is not larger than run-to-run variation.
	WithinNoise Verdict = "within-noise"
	// Insufficient: fewer than 2 runs on a side, so no spread to judge by.
	Insufficient Verdict = "insufficient"
)

// Judge gives the verdict on a vs b.
func Judge(a, b Stat) Verdict {
	if a.N < 2 || b.N < 2 {
		return Insufficient
	}
	overlap := a.Min <= b.Max && b.Min <= a.Max
	diff := math.Abs(b.Mean - a.Mean)
	if !overlap && diff > a.Range() && diff > b.Range() {
		return Different
	}
	return WithinNoise
}

// Comparison is one metric of one job, A vs B.
type Comparison struct {
	Job      string  `json:"job"`
	Dir      string  `json:"direction"`
	Workload string  `json:"workload"`
	Metric   string  `json:"metric"`
	Of       string  `json:"latency_of,omitempty"` // for p99: clat or lat
	A        Stat    `json:"a"`
	B        Stat    `json:"b"`
	DiffPct  float64 `json:"diff_pct"` // (B-A)/A in %
	Verdict  Verdict `json:"verdict"`
	// PValue is Welch's t-test, two-sided, with 3 or more runs on both sides.
	PValue *float64 `json:"p_value,omitempty"`
	// Better is "A" or "B" when the verdict is different.
	Better string `json:"better,omitempty"`
}

// Title is the row's metric as tables print it: the unit µs for the
// latencies (their Stats are ns), and which latency a p99 is of in front
// ("clat p99 µs").
func (c Comparison) Title() string {
	m, _ := MetricByKey(c.Metric)
	title := m.Title
	if c.Metric != "iops" && c.Metric != "bw" {
		title += " µs"
	}
	if c.Of != "" {
		title = c.Of + " " + title
	}
	return title
}

// Comparisons is the outcome of Compare.
type Comparisons struct {
	Rows []Comparison `json:"comparisons"`
	// Notes name jobs found on one side only, or whose options differ.
	Notes []string `json:"notes"`
}

// AnyDifferent reports whether a row of one of metrics (all when empty) is Different.
func (c *Comparisons) AnyDifferent(metrics []string) bool {
	for _, r := range c.Rows {
		if r.Verdict == Different && (len(metrics) == 0 || slices.Contains(metrics, r.Metric)) {
			return true
		}
	}
	return false
}

// Compare matches A's groups with B's by job and direction, and judges each
// metric in metrics (all when empty). Labels and target file names are
// expected to differ between the sides; other option differences are noted.
// Where a side has several option sets of one job and direction (a
// directory of runs that all name their job "test"), each set is matched
// with the other side's set of the same options, the same on both sides
// (A's and B's roles swapped give the same pairs); a set without one is
// only on its side.
func Compare(a, b []Group, metrics []string) *Comparisons {
	out := &Comparisons{Rows: []Comparison{}, Notes: []string{}}
	key := func(g *Group) string { return g.Job + " " + g.Dir }
	index := func(gs []Group) map[string][]*Group {
		m := map[string][]*Group{}
		for i := range gs {
			m[key(&gs[i])] = append(m[key(&gs[i])], &gs[i])
		}
		return m
	}
	ai, bi := index(a), index(b)
	// name is the job as a note names it: with its workload where a side
	// has several option sets of it.
	name := func(g *Group) string {
		if k := key(g); len(ai[k]) > 1 || len(bi[k]) > 1 {
			return fmt.Sprintf("%s (%s, %s)", g.Job, g.Dir, g.Workload)
		}
		return fmt.Sprintf("%s (%s)", g.Job, g.Dir)
	}
	pairedB := map[*Group]bool{}
	diffs := map[string][]string{} // option difference -> jobs that have it
	var diffOrder []string
	matched := 0
	for i := range a {
		ga := &a[i]
		k := key(ga)
		gbs := bi[k]
		var gb *Group
		switch {
		case len(ai[k]) == 1 && len(gbs) == 1:
			gb = gbs[0]
		default:
			for _, c := range gbs {
				if optionDiff(ga.Options, c.Options) == "" && !pairedB[c] {
					gb = c
					break
				}
			}
		}
		if gb == nil {
			out.Notes = append(out.Notes, name(ga)+": only in A")
			continue
		}
		pairedB[gb] = true
		if d := optionDiff(ga.Options, gb.Options); d != "" {
			if diffs[d] == nil {
				diffOrder = append(diffOrder, d)
			}
			diffs[d] = append(diffs[d], ga.Job)
		}
		matched++
		for _, m := range Metrics {
			if len(metrics) > 0 && !slices.Contains(metrics, m.Key) {
				continue
			}
			sa, sb := m.Of(ga), m.Of(gb)
			if sa == nil || sb == nil || (m.Key == "p99" && ga.P99Of != gb.P99Of) {
				continue
			}
			out.Rows = append(out.Rows, compareStat(ga, m, *sa, *sb))
		}
	}
	for _, d := range diffOrder {
		jobs := slices.Compact(diffs[d])
		if len(diffs[d]) == matched {
			out.Notes = append(out.Notes, "options differ in every job: "+d)
		} else {
			out.Notes = append(out.Notes, fmt.Sprintf("options differ in %s: %s", strings.Join(jobs, ", "), d))
		}
	}
	var onlyB []string
	for i := range b {
		if !pairedB[&b[i]] {
			onlyB = append(onlyB, name(&b[i])+": only in B")
		}
	}
	sort.Strings(onlyB)
	out.Notes = append(out.Notes, slices.Compact(onlyB)...)
	return out
}

func compareStat(g *Group, m Metric, a, b Stat) Comparison {
	c := Comparison{Job: g.Job, Dir: g.Dir, Workload: g.Workload, Metric: m.Key, A: a, B: b, Verdict: Judge(a, b)}
	if m.Key == "p99" {
		c.Of = g.P99Of
	}
	if a.Mean != 0 {
		c.DiffPct = (b.Mean - a.Mean) / math.Abs(a.Mean) * 100
	}
	if p, ok := WelchP(a, b); ok {
		c.PValue = &p
	}
	if c.Verdict == Different {
		c.Better = "A"
		if (b.Mean > a.Mean) == m.HigherIsBetter {
			c.Better = "B"
		}
	}
	return c
}

// optionDiff lists the workload options that differ, target file aside.
func optionDiff(a, b map[string]string) string {
	var d []string
	for k, v := range a {
		if bv, ok := b[k]; !notWorkload[k] && k != "filename" && bv != v {
			if !ok {
				bv = "(unset)"
			}
			d = append(d, fmt.Sprintf("%s=%s vs %s", k, v, bv))
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok && !notWorkload[k] && k != "filename" {
			d = append(d, fmt.Sprintf("%s=(unset) vs %s", k, v))
		}
	}
	sort.Strings(d)
	return strings.Join(d, ", ")
}
