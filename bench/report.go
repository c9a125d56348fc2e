package bench

import (
	"fmt"
	"html"
	"math"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/fio"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// The HTML report: one self-contained file (no script, no network), an
// inline SVG per job with one bar per disk (the mean IOPS), a whisker from
// the slowest to the fastest run, p99 beside the bar, evidence as a marker
// above it, the pairs' verdicts below and the settings at the end. The
// charts are a handful of rectangles and lines: written directly, simpler
// than a plotting library's axes for them.

// Chart geometry, px.
const (
	chartW, chartH = 640, 220
	barW, barGap   = 56, 110 // the gap holds the p99 label
	plotTop        = 30
	plotBottom     = 180
	plotLeft       = 60
)

// barColors, one per disk, in order (colour-blind safe, Okabe-Ito).
var barColors = []string{"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00"}

// HTML renders the result as a self-contained page.
func HTML(r *Result) []byte {
	var b strings.Builder
	e := html.EscapeString
	fmt.Fprintf(&b, `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>pvediskcheck bench VM %d</title>
<style>
body{font:14px sans-serif;margin:2em;color:#222}
h1{font-size:20px}h2{font-size:16px;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}
.different{color:#b00;font-weight:bold}.within-noise{color:#555}.insufficient{color:#999}
.evidence{color:#b00}.absent{color:#777}
footer{margin-top:3em;font-size:12px;color:#444}
</style></head><body>
<h1>VM %d: %s in the guest, %d run(s) per job, %ds + %ds ramp, area %s</h1>
`, r.VMID, r.VMID, e(r.Fio), r.Method.Runs, r.Method.RuntimeS, r.Method.RampS, e(r.Method.Size))
	if !r.Complete {
		fmt.Fprintf(&b, "<p class=\"evidence\">Incomplete: %d run(s) not measured: %s</p>\n", len(r.Missing), e(r.Stopped))
	}
	for _, job := range r.jobNames() {
		fmt.Fprintf(&b, "<h2 id=\"job-%s\">%s</h2>\n", e(job), e(job))
		b.WriteString(r.chart(job))
		var rows []Comparison
		for _, c := range r.Comparisons {
			if c.Job == job && c.Metric == "iops" {
				rows = append(rows, c)
			}
		}
		if len(rows) > 0 {
			b.WriteString("<table class=\"pairs\"><tr><th>A</th><th>B</th><th>IOPS B vs A</th><th>verdict</th></tr>\n")
			for _, c := range rows {
				v := string(c.Verdict)
				if c.Better != "" {
					v += ", " + c.Better + " better"
				}
				fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td>%+.1f%%</td><td class=\"%s\">%s</td></tr>\n", e(c.A), e(c.B), c.DiffPct, e(string(c.Verdict)), e(v))
			}
			b.WriteString("</table>\n")
		}
		for _, d := range r.Disks {
			for _, j := range d.Jobs {
				if j.Name != job {
					continue
				}
				for _, x := range j.Evidence {
					fmt.Fprintf(&b, "<p class=\"evidence\">&#9888; %s: %s</p>\n", e(d.ID), e(x.Text()))
				}
			}
		}
	}
	b.WriteString("<footer><h2>Settings as they ran</h2><ul>\n")
	for _, d := range r.Disks {
		fmt.Fprintf(&b, "<li><b>%s</b>: %s</li>\n", e(d.ID), e(d.Settings.Text()))
		for _, x := range d.Evidence {
			fmt.Fprintf(&b, "<li class=\"absent\">%s: %s %s</li>\n", e(d.ID), e(string(x.Kind)), e(x.Message))
		}
	}
	fmt.Fprintf(&b, "</ul><p>Raw fio JSON: %s</p></footer>\n</body></html>\n", e(r.Out))
	return []byte(b.String())
}

func (r *Result) jobNames() []string {
	var names []string
	seen := map[string]bool{}
	for _, d := range r.Disks {
		for _, j := range d.Jobs {
			if !seen[j.Name] {
				seen[j.Name] = true
				names = append(names, j.Name)
			}
		}
	}
	return names
}

// chart is one job's SVG: a bar per disk at its mean IOPS, the whisker
// from min to max, the mean and p99 as text, a marker for evidence.
func (r *Result) chart(job string) string {
	type bar struct {
		disk  string
		iops  fio.Stat
		p99   *fio.Stat
		marks []string
	}
	var bars []bar
	top := 0.0
	for _, d := range r.Disks {
		for _, j := range d.Jobs {
			if j.Name == job {
				var m []string
				for _, x := range j.Evidence {
					m = append(m, string(x.Kind))
				}
				bars = append(bars, bar{d.ID, j.IOPS, j.P99, m})
				top = math.Max(top, j.IOPS.Max)
			}
		}
	}
	if top <= 0 {
		top = 1
	}
	y := func(v float64) float64 { return plotBottom - v/top*(plotBottom-plotTop) }
	var b strings.Builder
	e := html.EscapeString
	w := max(chartW, plotLeft+len(bars)*(barW+barGap)+10)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="chart" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s IOPS per disk">`+"\n",
		w, chartH, w, chartH, e(job))
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", plotLeft, plotBottom, w-10, plotBottom)
	fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", plotLeft, plotTop, plotLeft, plotBottom)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" text-anchor="end">%s</text>`+"\n", plotLeft-4, plotTop+4, e(units.Grouped(top)))
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11" text-anchor="end">0</text>`+"\n", plotLeft-4, plotBottom+4)
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11">IOPS (bar: mean; whisker: slowest to fastest run)</text>`+"\n", plotLeft, 14)
	for i, br := range bars {
		x := float64(plotLeft + 20 + i*(barW+barGap))
		col := barColors[i%len(barColors)]
		fmt.Fprintf(&b, `<rect class="bar" data-disk="%s" x="%.0f" y="%.1f" width="%d" height="%.1f" fill="%s"><title>%s: %s IOPS</title></rect>`+"\n",
			e(br.disk), x, y(br.iops.Mean), barW, plotBottom-y(br.iops.Mean), col, e(br.disk), e(units.Grouped(br.iops.Mean)))
		cx := x + barW/2
		if br.iops.N > 1 {
			fmt.Fprintf(&b, `<line class="whisker" x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#000"/>`, cx, y(br.iops.Min), cx, y(br.iops.Max))
			fmt.Fprintf(&b, `<line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#000"/><line x1="%.0f" y1="%.1f" x2="%.0f" y2="%.1f" stroke="#000"/>`+"\n",
				cx-8, y(br.iops.Min), cx+8, y(br.iops.Min), cx-8, y(br.iops.Max), cx+8, y(br.iops.Max))
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%d" font-size="12" text-anchor="middle">%s</text>`+"\n", cx, plotBottom+16, e(br.disk))
		label := units.Grouped(br.iops.Mean)
		if br.iops.N > 1 {
			label += fmt.Sprintf(" ±%.0f%%", br.iops.SpreadPct)
		}
		fmt.Fprintf(&b, `<text x="%.0f" y="%d" font-size="11" text-anchor="middle">%s</text>`+"\n", cx, plotBottom+30, e(label))
		if br.p99 != nil {
			fmt.Fprintf(&b, `<text class="p99" x="%.0f" y="%.1f" font-size="10">p99 %s µs</text>`+"\n", x+barW+2, y(br.iops.Mean)+10, e(units.Grouped(br.p99.Mean/1000)))
		}
		if len(br.marks) > 0 {
			fmt.Fprintf(&b, `<text class="marker" x="%.0f" y="%.1f" font-size="16" text-anchor="middle" fill="#b00">&#9888;<title>%s</title></text>`+"\n",
				cx, math.Max(y(br.iops.Max)-4, 16), e(strings.Join(br.marks, ", ")))
		}
	}
	b.WriteString("</svg>\n")
	return b.String()
}
