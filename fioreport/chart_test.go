package fioreport

import (
	"encoding/xml"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/fio"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// elem is one element of a chart's SVG with its attributes and text.
type elem struct {
	name string
	attr map[string]string
	text string // its text content, its children's included
}

func (e elem) num(t *testing.T, k string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(e.attr[k], 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		t.Fatalf("<%s %s=%q>: not a finite number", e.name, k, e.attr[k])
	}
	return f
}

// svgs reads every chart of a page as XML: the SVG must be well formed.
func svgs(t *testing.T, page string) [][]elem {
	t.Helper()
	var out [][]elem
	for rest := page; ; {
		i := strings.Index(rest, "<svg ")
		if i < 0 {
			return out
		}
		j := strings.Index(rest[i:], "</svg>")
		if j < 0 {
			t.Fatal("an <svg> without its end")
		}
		d := xml.NewDecoder(strings.NewReader(rest[i : i+j+len("</svg>")]))
		var els []elem
		var stack []int
		for {
			tok, err := d.Token()
			if err != nil {
				break
			}
			switch tk := tok.(type) {
			case xml.StartElement:
				e := elem{name: tk.Name.Local, attr: map[string]string{}}
				for _, a := range tk.Attr {
					e.attr[a.Name.Local] = a.Value
				}
				els = append(els, e)
				stack = append(stack, len(els)-1)
			case xml.CharData:
				for _, k := range stack {
					els[k].text += string(tk)
				}
			case xml.EndElement:
				stack = stack[:len(stack)-1]
			}
		}
		out = append(out, els)
		rest = rest[i+j:]
	}
}

// chartOf is one chart's parts.
type chartOf struct {
	svg                     elem
	xAxis, yAxis            elem
	topLabel, zeroLabel     elem
	bars, whiskers, markers []elem
	caps, p99s, texts       []elem
}

func parts(t *testing.T, els []elem) chartOf {
	t.Helper()
	var c chartOf
	var lines []elem
	for _, e := range els {
		switch {
		case e.name == "svg":
			c.svg = e
		case e.name == "rect" && e.attr["class"] == "bar":
			c.bars = append(c.bars, e)
		case e.name == "line" && e.attr["class"] == "whisker":
			c.whiskers = append(c.whiskers, e)
		case e.name == "line":
			lines = append(lines, e)
		case e.name == "text" && e.attr["class"] == "marker":
			c.markers = append(c.markers, e)
		case e.name == "text" && e.attr["class"] == "p99":
			c.p99s = append(c.p99s, e)
		case e.name == "text" && e.attr["text-anchor"] == "end" && e.text == "0":
			c.zeroLabel = e
		case e.name == "text" && e.attr["text-anchor"] == "end":
			c.topLabel = e
		case e.name == "text":
			c.texts = append(c.texts, e)
		}
	}
	if len(lines) < 2 {
		t.Fatalf("%d axis lines", len(lines))
	}
	c.xAxis, c.yAxis, c.caps = lines[0], lines[1], lines[2:]
	return c
}

// checkChart holds a chart to what it says of job: each bar stands on the
// x axis at the height of its mean on the axis' scale (its top label the
// tallest whisker's top); the whisker spans the slowest to the fastest run
// at the bar's centre, capped both ends, only with several runs; the
// bar's name and value centred under the axis, the spread only with
// several runs; p99 in µs beside the bar in the gap before the next; the
// marker above the whisker, inside the chart; every bar inside the chart
// and the axis under all of them.
func checkChart(t *testing.T, job Job, c chartOf) {
	t.Helper()
	w, h := c.svg.num(t, "width"), c.svg.num(t, "height")
	if vb := strings.Fields(c.svg.attr["viewBox"]); len(vb) != 4 || vb[0] != "0" || vb[1] != "0" || vb[2] != c.svg.attr["width"] || vb[3] != c.svg.attr["height"] {
		t.Errorf("%s: viewBox %q for %gx%g", job.Name, c.svg.attr["viewBox"], w, h)
	}
	bottom, left := c.xAxis.num(t, "y1"), c.yAxis.num(t, "x1")
	if c.xAxis.num(t, "y2") != bottom || c.yAxis.num(t, "x2") != left || c.xAxis.num(t, "x1") != left || c.yAxis.num(t, "y2") != bottom {
		t.Errorf("%s: the axes do not meet at the origin: %v %v", job.Name, c.xAxis.attr, c.yAxis.attr)
	}
	topY := c.yAxis.num(t, "y1")
	if !(0 < topY && topY < bottom && bottom < h) || !(0 < left && left < w) {
		t.Errorf("%s: plot area x %g, y %g..%g outside %gx%g", job.Name, left, topY, bottom, w, h)
	}
	if x2 := c.xAxis.num(t, "x2"); x2 > w {
		t.Errorf("%s: x axis ends at %g, past the chart's width %g", job.Name, x2, w)
	}
	// The scale: the top label is the tallest whisker (or 1 when nothing
	// moved), right-aligned left of the y axis, each label beside its tick.
	top := 0.0
	for _, b := range job.Bars {
		top = math.Max(top, b.Value.Max)
	}
	if top == 0 {
		top = 1
	}
	if c.topLabel.text != units.Grouped(top) || c.zeroLabel.text != "0" {
		t.Errorf("%s: scale %q..%q, want 0..%s", job.Name, c.zeroLabel.text, c.topLabel.text, units.Grouped(top))
	}
	for _, l := range []struct {
		e    elem
		tick float64
	}{{c.topLabel, topY}, {c.zeroLabel, bottom}} {
		if x, y, size := l.e.num(t, "x"), l.e.num(t, "y"), l.e.num(t, "font-size"); x >= left || x < left-size || y <= l.tick || y >= l.tick+size {
			t.Errorf("%s: label %q at %g,%g, not beside its tick at %g,%g", job.Name, l.e.text, x, y, left, l.tick)
		}
	}
	scale := func(v float64) float64 { return bottom - v/top*(bottom-topY) }
	near := func(a, b float64) bool { return math.Abs(a-b) <= 0.1 }

	if len(c.bars) != len(job.Bars) {
		t.Fatalf("%s: %d bars, want %d", job.Name, len(c.bars), len(job.Bars))
	}
	whiskers, p99s, markers, caps := 0, 0, 0, 0
	prevRight := left
	for i, jb := range job.Bars {
		r := c.bars[i]
		x, y, bw, bh := r.num(t, "x"), r.num(t, "y"), r.num(t, "width"), r.num(t, "height")
		cx := x + bw/2
		if r.attr["data-disk"] != jb.Label || !near(y+bh, bottom) || !near(y, scale(jb.Value.Mean)) || bh < 0 {
			t.Errorf("%s %s: bar y %g height %g, want from %g up to the mean %g (%.1f)", job.Name, jb.Label, y, bh, bottom, jb.Value.Mean, scale(jb.Value.Mean))
		}
		if x <= prevRight || x+bw > w {
			t.Errorf("%s %s: bar at x %g..%g overlaps the one before (ends %g) or leaves the chart (%g)", job.Name, jb.Label, x, x+bw, prevRight, w)
		}
		if x+bw > c.xAxis.num(t, "x2") {
			t.Errorf("%s %s: bar ends at %g past the x axis' end %g", job.Name, jb.Label, x+bw, c.xAxis.num(t, "x2"))
		}
		next := w
		if i+1 < len(c.bars) {
			next = c.bars[i+1].num(t, "x")
		}
		if jb.Value.N > 1 {
			wh := c.whiskers[whiskers]
			whiskers++
			if wh.num(t, "x1") != math.Round(cx) || wh.num(t, "x2") != math.Round(cx) || !near(wh.num(t, "y1"), scale(jb.Value.Min)) || !near(wh.num(t, "y2"), scale(jb.Value.Max)) {
				t.Errorf("%s %s: whisker %v, want at x %g from %.1f (min) to %.1f (max)", job.Name, jb.Label, wh.attr, cx, scale(jb.Value.Min), scale(jb.Value.Max))
			}
			for k, v := range []float64{jb.Value.Min, jb.Value.Max} {
				cp := c.caps[caps+k]
				if x1, x2 := cp.num(t, "x1"), cp.num(t, "x2"); !(x1 < cx && cx < x2) || !near(cx-x1, x2-cx) || cp.num(t, "y1") != cp.num(t, "y2") || !near(cp.num(t, "y1"), scale(v)) {
					t.Errorf("%s %s: cap %v, want level across x %g at %.1f", job.Name, jb.Label, cp.attr, cx, scale(v))
				}
			}
			caps += 2
		}
		// The name, then the value, centred under the bar below the axis.
		name, value := c.texts[1+2*i], c.texts[2+2*i]
		wantValue := units.Grouped(jb.Value.Mean)
		if f := figureOf(job); f.Key == "clat" || f.Key == "fsync" {
			wantValue = strconv.FormatFloat(jb.Value.Mean/1e6, 'f', 2, 64) // ns shown in ms
		}
		if jb.Value.N > 1 {
			wantValue += " ±" + strconv.FormatFloat(jb.Value.SpreadPct, 'f', 0, 64) + "%"
		}
		if name.text != jb.Label || value.text != wantValue {
			t.Errorf("%s %s: labels %q, %q; want %q, %q", job.Name, jb.Label, name.text, value.text, jb.Label, wantValue)
		}
		if name.num(t, "x") != math.Round(cx) || value.num(t, "x") != math.Round(cx) || name.attr["text-anchor"] != "middle" ||
			!(bottom < name.num(t, "y") && name.num(t, "y") < value.num(t, "y") && value.num(t, "y") <= h) {
			t.Errorf("%s %s: labels at %v, %v; want centred at x %g under the axis (%g) in order, inside the chart (%g)", job.Name, jb.Label, name.attr, value.attr, cx, bottom, h)
		}
		if jb.P99 != nil {
			p := c.p99s[p99s]
			p99s++
			if want := "p99 " + units.Grouped(jb.P99.Mean/1000) + " µs"; p.text != want {
				t.Errorf("%s %s: %q, want %q", job.Name, jb.Label, p.text, want)
			}
			if px, py := p.num(t, "x"), p.num(t, "y"); px <= x+bw || px >= next || py <= y || py >= bottom+1 {
				t.Errorf("%s %s: p99 at %g,%g; want right of the bar (%g) before the next (%g), below its top (%g)", job.Name, jb.Label, px, py, x+bw, next, y)
			}
		}
		if len(jb.Marks) > 0 {
			m := c.markers[markers]
			markers++
			mx, my, size := m.num(t, "x"), m.num(t, "y"), m.num(t, "font-size")
			if mx != math.Round(cx) || my >= scale(jb.Value.Max) || my < size || !strings.Contains(m.text, strings.Join(jb.Marks, ", ")) {
				t.Errorf("%s %s: marker at %g,%g %q; want at x %g above the whisker's top %.1f, inside the chart, naming %v", job.Name, jb.Label, mx, my, m.text, cx, scale(jb.Value.Max), jb.Marks)
			}
		}
		prevRight = x + bw
	}
	if whiskers != len(c.whiskers) || p99s != len(c.p99s) || markers != len(c.markers) || caps != len(c.caps) {
		t.Errorf("%s: %d whiskers, %d caps, %d p99, %d markers drawn; want %d, %d, %d, %d", job.Name, len(c.whiskers), len(c.caps), len(c.p99s), len(c.markers), whiskers, caps, p99s, markers)
	}
	if len(c.texts) != 1+2*len(job.Bars) {
		t.Errorf("%s: %d texts, want the legend and two per bar", job.Name, len(c.texts))
	}
}

func checkPage(t *testing.T, pg Page) string {
	t.Helper()
	p := string(HTML(pg))
	charts := svgs(t, p)
	if len(charts) != len(pg.Jobs) {
		t.Fatalf("%d charts for %d jobs", len(charts), len(pg.Jobs))
	}
	for i, job := range pg.Jobs {
		checkChart(t, job, parts(t, charts[i]))
	}
	return p
}

// Lab 37's scsi against sata: two runs a side (whiskers), p99.
func TestChartLab37(t *testing.T) {
	s, err := fio.LoadSides("scsi", "sata", filepath.Join("..", "fio", "testdata", "lab", "lab37"), fio.Options{GroupBy: fio.GroupAuto})
	if err != nil {
		t.Fatal(err)
	}
	pg := Compare(fio.CompareSides("scsi", "sata", s, nil), s)
	checkPage(t, pg)
}

// sides writes the recorded mixed run (Lab 19's pitfalls: marks) runs
// times under a and b.
func sides(t *testing.T, runs int) *fio.Sides {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "fio", "testdata", "real", "pitfalls", "rwmix.json"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	for _, side := range []string{"a", "b"} {
		d := filepath.Join(root, side)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for n := 1; n <= runs; n++ {
			if err := os.WriteFile(filepath.Join(d, "rwmix-"+strconv.Itoa(n)+".json"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	s, err := fio.LoadSides(filepath.Join(root, "a"), filepath.Join(root, "b"), "", fio.Options{GroupBy: fio.GroupAuto})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// A job with both directions has four bars, more than the default width
// holds: the chart widens to keep every bar and its p99 inside; the
// pitfalls' markers sit above the bars. With one run a side there is no
// whisker and no spread.
func TestChartWideMarkedOneRun(t *testing.T) {
	for _, runs := range []int{1, 2} {
		s := sides(t, runs)
		pg := Compare(fio.CompareSides("a", "b", s, nil), s)
		if len(pg.Jobs) != 1 || len(pg.Jobs[0].Bars) != 4 {
			t.Fatalf("%d runs: jobs %+v", runs, pg.Jobs)
		}
		p := checkPage(t, pg)
		c := parts(t, svgs(t, p)[0])
		if w := c.svg.num(t, "width"); w <= chartW {
			t.Errorf("%d runs: width %g for four bars, want wider than %d", runs, w, chartW)
		}
		if n := len(c.whiskers); (runs == 1) != (n == 0) {
			t.Errorf("%d runs: %d whiskers", runs, n)
		}
		if strings.Contains(p, "±") != (runs > 1) {
			t.Errorf("%d runs: spread shown %v", runs, strings.Contains(p, "±"))
		}
	}
}

// A job whose runs did no IO (all zero) draws flat bars on the axis, not
// NaN; a bar without p99 or marks draws neither; a page without pairs
// has no verdict table, one without a last line no empty paragraph.
func TestChartNothingMoved(t *testing.T) {
	pg := Page{Title: "t", Heading: "h", FooterTitle: "f", Jobs: []Job{{Name: "idle", Bars: []Bar{
		{Label: "scsi0", Value: fio.Stat{N: 3, Values: []float64{0, 0, 0}}},
		{Label: "scsi1", Value: fio.Stat{N: 1, Values: []float64{0}}, Series: 1},
	}}}}
	p := checkPage(t, pg)
	if strings.Contains(p, "NaN") || strings.Contains(p, "Inf") {
		t.Errorf("NaN in the chart: %s", p)
	}
	for _, absent := range []string{`<table class="pairs">`, `class="p99"`, `class="marker"`, "<p></p>", `class="evidence"`} {
		if strings.Contains(p, absent) {
			t.Errorf("page holds %s", absent)
		}
	}
	if !strings.HasSuffix(p, "</ul></footer>\n</body></html>\n") {
		t.Errorf("footer: %q", p[len(p)-60:])
	}
	pg.Last = "raw fio JSON in /tmp/x"
	pg.Jobs[0].Pairs = []Pair{{A: "A", B: "B", Metric: "IOPS", DiffPct: 0, Verdict: fio.Verdict("within-noise")}}
	p = string(HTML(pg))
	if !strings.Contains(p, "</ul><p>raw fio JSON in /tmp/x</p></footer>") || !strings.Contains(p, `<table class="pairs">`) {
		t.Errorf("last line or pairs missing: %s", p)
	}
}
