// Package fioreport renders fio results as one self-contained HTML page
// (no script, no network): an inline SVG per job with one bar per series
// (a disk for bench, a side for fio compare) at the mean of the figure
// Lab 19's summary table reads that job by (fio.LabFigure: IOPS, MiB/s, a
// mean completion or fsync latency in ms), a whisker
// from the slowest to the fastest run, p99 beside the bar, evidence as a
// marker above it, the verdicts of the pairs below and the settings at the
// end. The charts are a handful of rectangles and lines: written directly,
// simpler than a plotting library's axes for them. bench and fio compare
// build a Page from what they measured or compared; this package decides
// only how it looks.
package fioreport

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/fio"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// Page is what the report shows.
type Page struct {
	Title   string // the <title>
	Heading string // the <h1>
	// Alert is a line in red under the heading ("" for none), e.g. an
	// incomplete run.
	Alert string
	Jobs  []Job
	// FooterTitle heads the footer's list (the settings as they ran).
	FooterTitle string
	Footer      []Line
	// Last is the footer's last paragraph ("" for none), e.g. where the
	// raw fio JSON is.
	Last string
}

// Line is one item of the footer list; Absent greys it (a kind not
// observed, a note).
type Line struct {
	Bold, Text string
	Absent     bool
}

// Job is one job's chart, its pairs' verdicts and the evidence against
// its numbers.
type Job struct {
	Name string
	// Figure is what the bars show (the zero Figure is IOPS).
	Figure   fio.Figure
	Bars     []Bar
	Pairs    []Pair
	Evidence []string // one warning line each, in red
	Notes    []string // one plain line each, after the evidence
}

// Bar is one series on one job over its runs.
type Bar struct {
	Label string
	Value fio.Stat // the job's Figure, in the metric's own unit (ns for latencies)
	P99   *fio.Stat
	Marks []string // evidence kinds: a marker above the bar
	// Series picks the colour (barColors, in order): the same disk or side
	// keeps its colour across the charts.
	Series int
}

// Pair is one verdict: B against A on one metric.
type Pair struct {
	A, B    string
	Metric  string // the metric's title, e.g. IOPS
	DiffPct float64
	Verdict fio.Verdict
	Better  string // the better one's name, when different
}

// Chart geometry, px.
const (
	chartW, chartH = 640, 220
	barW, barGap   = 56, 110 // the gap holds the p99 label
	plotTop        = 30
	plotBottom     = 180
	plotLeft       = 60
)

// barColors, one per series, in order (colour-blind safe, Okabe-Ito).
var barColors = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00"}

// Marker is in the head of every page HTML renders: what Ours recognises,
// so that --report writes over a report of pvediskcheck's and no other file.
const Marker = `<meta name="generator" content="pvediskcheck">`

// head begins every page; the pages written before Marker have their
// title there instead (every title begins with "pvediskcheck "): they are
// reports of ours too.
const (
	head       = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
	legacyHead = head + "<title>pvediskcheck "
)

// Ours reports whether the head of a file (its first few KiB) is a page
// HTML wrote: --report replaces it, and refuses any other file.
func Ours(b []byte) bool {
	s := string(b)
	return strings.HasPrefix(s, head+Marker) || strings.HasPrefix(s, legacyHead)
}

// HTML renders the page.
func HTML(p Page) []byte {
	var b strings.Builder
	e := html.EscapeString
	fmt.Fprintf(&b, head+Marker+`<title>%s</title>
<style>
body{font:14px sans-serif;margin:2em;color:#222}
h1{font-size:20px}h2{font-size:16px;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}
.different{color:#0b4f8a;font-weight:bold}.within-noise{color:#555}.insufficient{color:#999}
.evidence{color:#b00}.absent{color:#777}
footer{margin-top:3em;font-size:12px;color:#444}
</style></head><body>
<h1>%s</h1>
`, e(p.Title), e(p.Heading))
	if p.Alert != "" {
		fmt.Fprintf(&b, "<p class=\"evidence\">%s</p>\n", e(p.Alert))
	}
	for _, job := range p.Jobs {
		fmt.Fprintf(&b, "<h2 id=\"job-%s\">%s</h2>\n", e(job.Name), e(job.Name))
		b.WriteString(chart(job))
		if len(job.Pairs) > 0 {
			b.WriteString("<table class=\"pairs\"><tr><th>A</th><th>B</th><th>metric</th><th>B vs A</th><th>verdict</th></tr>\n")
			for _, c := range job.Pairs {
				v := string(c.Verdict)
				if c.Better != "" {
					v += ", " + c.Better + " better"
				}
				fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%s</td><td>%+.1f%%</td><td class=\"%s\">%s</td></tr>\n",
					e(c.A), e(c.B), e(c.Metric), c.DiffPct, e(string(c.Verdict)), e(v))
			}
			b.WriteString("</table>\n")
		}
		for _, x := range job.Evidence {
			fmt.Fprintf(&b, "<p class=\"evidence\">&#9888; %s</p>\n", e(x))
		}
		for _, x := range job.Notes {
			fmt.Fprintf(&b, "<p class=\"note\">%s</p>\n", e(x))
		}
	}
	fmt.Fprintf(&b, "<footer><h2>%s</h2><ul>\n", e(p.FooterTitle))
	for _, l := range p.Footer {
		switch {
		case l.Absent:
			fmt.Fprintf(&b, "<li class=\"absent\">%s: %s</li>\n", e(l.Bold), e(l.Text))
		default:
			fmt.Fprintf(&b, "<li><b>%s</b>: %s</li>\n", e(l.Bold), e(l.Text))
		}
	}
	b.WriteString("</ul>")
	if p.Last != "" {
		fmt.Fprintf(&b, "<p>%s</p>", e(p.Last))
	}
	b.WriteString("</footer>\n</body></html>\n")
	return []byte(b.String())
}

// figureOf is the job's figure, IOPS when unset.
func figureOf(job Job) fio.Figure {
	if job.Figure.Key == "" {
		return fio.FigureIOPS
	}
	return job.Figure
}

// figureText is a value of the figure in its unit: grouped digits for
// rates, two decimals for milliseconds.
func figureText(f fio.Figure, v float64) string {
	v *= f.Scale
	if f.Scale < 1 {
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return units.Grouped(v)
}

// chart is one job's SVG: a bar per series at its mean figure, the whisker
// from min to max, the mean and p99 as text, a marker for evidence.
func chart(job Job) string {
	f := figureOf(job)
	top := 0.0
	for _, br := range job.Bars {
		top = math.Max(top, br.Value.Max)
	}
	if top <= 0 {
		top = 1
	}
	y := func(v float64) float64 { return plotBottom - v/top*(plotBottom-plotTop) }
	var b strings.Builder
	e := html.EscapeString
	w := max(chartW, plotLeft+len(job.Bars)*(barW+barGap)+10)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-figure="%s" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s %s per disk">`+"\n",
		e(f.Key), w, chartH, w, chartH, e(job.Name), e(f.Title))
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", plotLeft, plotBottom, w-10, plotBottom)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", plotLeft, plotTop, plotLeft, plotBottom)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" text-anchor="end">%s</text>`+"\n", plotLeft-4, plotTop+4, e(figureText(f, top)))
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" text-anchor="end">0</text>`+"\n", plotLeft-4, plotBottom+4)
	better := "higher is better"
	if !f.HigherBetter {
		better = "lower is better"
	}
	fmt.Fprintf(&b, `<text class="axis" x="%d" y="%d" font-size="11">%s, %s (bar: mean; whisker: slowest to fastest run)</text>`+"\n", plotLeft, 14, e(f.Title), better)
	for i, br := range job.Bars {
		x := float64(plotLeft + 20 + i*(barW+barGap))
		col := barColors[br.Series%len(barColors)]
		fmt.Fprintf(&b, `<rect class="bar" data-disk="%s" x="%.0f" y="%.1f" width="%d" height="%.1f" fill="%s"><title>%s: %s %s</title></rect>`+"\n",
			e(br.Label), x, y(br.Value.Mean), barW, plotBottom-y(br.Value.Mean), col, e(br.Label), e(figureText(f, br.Value.Mean)), e(f.Title))
		cx := x + barW/2
		if br.Value.N > 1 {
			fmt.Fprintf(&b, `<line class="whisker" x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#000"/>`, cx, y(br.Value.Min), cx, y(br.Value.Max))
			fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#000"/><line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#000"/>`+"\n",
				cx-8, y(br.Value.Min), cx+8, y(br.Value.Min), cx-8, y(br.Value.Max), cx+8, y(br.Value.Max))
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%d" font-size="12" text-anchor="middle">%s</text>`+"\n", cx, plotBottom+16, e(br.Label))
		label := figureText(f, br.Value.Mean)
		if br.Value.N > 1 {
			label += fmt.Sprintf(" ±%.0f%%", br.Value.SpreadPct)
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%d" font-size="11" text-anchor="middle">%s</text>`+"\n", cx, plotBottom+30, e(label))
		if br.P99 != nil {
			fmt.Fprintf(&b, `<text class="p99" x="%.0f" y="%.1f" font-size="10">p99 %s µs</text>`+"\n", x+barW+2, y(br.Value.Mean)+10, e(units.Grouped(br.P99.Mean/1000)))
		}
		if len(br.Marks) > 0 {
			fmt.Fprintf(&b, `<text class="marker" x="%.0f" y="%.1f" font-size="16" text-anchor="middle" fill="#b00">&#9888;<title>%s</title></text>`+"\n",
				cx, math.Max(y(br.Value.Max)-4, 16), e(strings.Join(br.Marks, ", ")))
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}
