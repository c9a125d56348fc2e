package fioreport

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/fio"
)

// page is fio compare's page of sides a and b (labels of dir, or
// directories when dir is "").
func page(t *testing.T, dir, a, b string, metrics []string) (string, *fio.CompareReport) {
	t.Helper()
	s, err := fio.LoadSides(a, b, dir, fio.Options{GroupBy: fio.GroupAuto})
	if err != nil {
		t.Fatal(err)
	}
	rep := fio.CompareSides(a, b, s, metrics)
	return string(HTML(Compare(rep, s))), rep
}

// selfContained fails the test for anything that leaves the page: a
// script, a link, a source, an address (but the SVG namespace).
func selfContained(t *testing.T, page string) {
	t.Helper()
	rest := strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, "")
	for _, bad := range []string{"<script", "http://", "https://", "<link", "src=", "<iframe", "<img"} {
		if strings.Contains(rest, bad) {
			t.Errorf("page holds %s", bad)
		}
	}
}

var barRE = regexp.MustCompile(`<rect class="bar" data-disk="([^"]+)"[^>]* fill="(#\w+)"`)

// Lab 37's scsi against sata (2 runs a side, 3 jobs): a chart per job, A
// and B each in its own colour on every chart, every row's verdict, the
// conclusion in red; with --metric iops only the IOPS rows, the charts
// still drawn from the groups.
func TestComparePage(t *testing.T) {
	lab37 := filepath.Join("..", "fio", "testdata", "lab", "lab37")
	p, rep := page(t, lab37, "scsi", "sata", nil)
	selfContained(t, p)
	if n := strings.Count(p, "<svg "); n != 3 {
		t.Errorf("%d charts, want one per job (rr4k, rw4k, sw1m)", n)
	}
	for _, job := range []string{"rr4k", "rw4k", "sw1m"} {
		if !strings.Contains(p, `<h2 id="job-`+job+`">`) {
			t.Errorf("no chart for %s", job)
		}
	}
	bars := barRE.FindAllStringSubmatch(p, -1)
	if len(bars) != 6 {
		t.Fatalf("bars %v", bars)
	}
	for i, b := range bars {
		want := [][2]string{{"A", "#0072B2"}, {"B", "#E69F00"}}[i%2]
		if b[1] != want[0] || b[2] != want[1] {
			t.Errorf("bar %d: %s %s, want %v", i, b[1], b[2], want)
		}
	}
	if strings.Count(p, `class="whisker"`) != 6 || strings.Count(p, `class="p99"`) != 6 {
		t.Errorf("whiskers %d, p99 %d", strings.Count(p, `class="whisker"`), strings.Count(p, `class="p99"`))
	}
	if n := strings.Count(p, "<tr><td>A</td><td>B</td>"); n != len(rep.Rows) || n != 12 {
		t.Errorf("%d verdict rows, want every row (%d)", n, len(rep.Rows))
	}
	if !strings.Contains(p, `<td>IOPS</td><td>-71.6%</td><td class="different">different, A better</td>`) ||
		!strings.Contains(p, `<td>clat p99 µs</td><td>+390.8%</td><td class="within-noise">within-noise</td>`) {
		t.Error("rr4k IOPS or rw4k p99 verdict missing")
	}
	if !strings.Contains(p, `<p class="evidence">At least one metric differs by more than the spread between runs.</p>`) ||
		!strings.Contains(p, "<h1>fio compare: A = scsi, B = sata</h1>") {
		t.Error("heading or conclusion missing")
	}

	p, _ = page(t, lab37, "scsi-default", "virtio-blk", []string{"iops"})
	selfContained(t, p)
	if n := strings.Count(p, "<tr><td>A</td>"); n != strings.Count(p, "<svg ") || n == 0 || strings.Contains(p, "MiB/s</td>") {
		t.Errorf("--metric iops: %d rows for %d charts", n, strings.Count(p, "<svg "))
	}
	if strings.Contains(p, "At least one metric differs") || !strings.Contains(p, "No metric differs by more than the spread between runs.") ||
		strings.Contains(p, `<p class="evidence">No metric`) {
		t.Error("within noise: the conclusion is not in red")
	}
}

// A job with both directions: one chart, a bar per side and direction,
// each side keeping its colour; the group's pitfalls as markers and
// evidence lines, once per bar however many runs carry them.
func TestComparePageMixedAndWarnings(t *testing.T) {
	root := t.TempDir()
	for _, side := range []string{"a", "b"} {
		d := filepath.Join(root, side)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join("..", "fio", "testdata", "real", "pitfalls", "rwmix.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{"1", "2"} { // two runs: a spread
			if err := os.WriteFile(filepath.Join(d, "rwmix-"+n+".json"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	s, err := fio.LoadSides(filepath.Join(root, "a"), filepath.Join(root, "b"), "", fio.Options{GroupBy: fio.GroupAuto})
	if err != nil {
		t.Fatal(err)
	}
	rep := fio.CompareSides("a", "b", s, nil)
	pg := Compare(rep, s)
	if len(pg.Jobs) != 1 {
		t.Fatalf("%d jobs", len(pg.Jobs))
	}
	var labels []string
	for _, b := range pg.Jobs[0].Bars {
		labels = append(labels, b.Label+" "+string(rune('0'+b.Series)))
	}
	if strings.Join(labels, ",") != "A read 0,B read 1,A write 0,B write 1" {
		t.Errorf("bars %v", labels)
	}
	for _, p := range pg.Jobs[0].Pairs {
		if !strings.HasPrefix(p.Metric, "read ") && !strings.HasPrefix(p.Metric, "write ") {
			t.Errorf("pair without its direction: %q", p.Metric)
		}
	}
	var warned int
	for _, g := range s.A {
		warned += len(g.Warnings)
	}
	if warned == 0 {
		t.Fatal("the mixed runs carry no warning: pick runs with a pitfall")
	}
	for _, b := range pg.Jobs[0].Bars {
		seen := map[string]bool{}
		for _, m := range b.Marks {
			if seen[m] {
				t.Errorf("%s: mark %s twice", b.Label, m)
			}
			seen[m] = true
		}
		if len(b.Marks) == 0 {
			t.Errorf("%s: no marker for its warnings", b.Label)
		}
	}
	seen := map[string]bool{}
	for _, e := range pg.Jobs[0].Evidence {
		if seen[e] {
			t.Errorf("evidence twice: %s", e)
		}
		seen[e] = true
	}
	selfContained(t, string(HTML(pg)))
}

// --report writes over a page of ours and no other file (issue 31): a
// page HTML renders and one from before Marker are ours; a password file,
// another program's HTML and an empty file are not.
func TestOurs(t *testing.T) {
	for _, c := range []struct {
		head string
		ours bool
	}{
		{string(HTML(Page{Title: "pvediskcheck bench VM 100"})), true},
		{string(HTML(Page{Title: "x"})), true},
		{"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>pvediskcheck fio compare</title>", true},
		{"root:x:0:0:root:/root:/bin/bash\n", false},
		{"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Grafana</title>", false},
		{"<html>" + Marker, false},
		{"", false},
	} {
		if got := Ours([]byte(c.head)); got != c.ours {
			t.Errorf("Ours(%.60q) = %v, want %v", c.head, got, c.ours)
		}
	}
}
