package fioreport

import (
	"fmt"
	"slices"

	"github.com/pvediskcheck/pvediskcheck/fio"
)

// Compare is fio compare's page: a chart per job compared with a bar per
// side (A, B; "A read", "B write" ... for a job with several directions)
// from the sides' groups, every verdict compared (the metrics of interest),
// the groups' warnings (Lab 19's pitfalls) against the bars they taint,
// and in the footer the sides, the notes and the files not read.
func Compare(rep *fio.CompareReport, s *fio.Sides) Page {
	p := Page{Title: "pvediskcheck fio compare", Heading: fmt.Sprintf("fio compare: A = %s, B = %s", rep.A, rep.B), FooterTitle: "What was compared"}
	verdict := "No metric differs by more than the spread between runs."
	if rep.Different {
		verdict = "At least one metric differs by more than the spread between runs."
		p.Alert = verdict
	}
	p.Footer = append(p.Footer, Line{Bold: "A", Text: rep.A}, Line{Bold: "B", Text: rep.B}, Line{Bold: "verdict", Text: verdict})
	var jobs []string
	dirs := map[string][]string{}
	for _, r := range rep.Rows {
		if !slices.Contains(jobs, r.Job) {
			jobs = append(jobs, r.Job)
		}
		if !slices.Contains(dirs[r.Job], r.Dir) {
			dirs[r.Job] = append(dirs[r.Job], r.Dir)
		}
	}
	for _, job := range jobs {
		pj := Job{Name: job}
		for _, dir := range dirs[job] {
			for side, gs := range [][]fio.Group{s.A, s.B} {
				name := []string{"A", "B"}[side]
				label := name
				if len(dirs[job]) > 1 {
					label += " " + dir
				}
				for i := range gs {
					g := &gs[i]
					if g.Job != job || g.Dir != dir {
						continue
					}
					var marks []string
					for _, w := range g.Warnings { // each run's: once per bar
						if line := label + ": " + w.Code + ": " + w.Message; !slices.Contains(pj.Evidence, line) {
							pj.Evidence = append(pj.Evidence, line)
						}
						if !slices.Contains(marks, w.Code) {
							marks = append(marks, w.Code)
						}
					}
					if len(pj.Bars) == 0 {
						pj.Figure = fio.LabFigure(g)
					}
					v := g.IOPS
					if st := pj.Figure.Of(g); st != nil {
						v = *st
					}
					pj.Bars = append(pj.Bars, Bar{Label: label, Value: v, P99: g.P99Ns, Marks: marks, Series: side})
				}
			}
		}
		for _, r := range rep.Rows {
			if r.Job != job {
				continue
			}
			metric := r.Title()
			if len(dirs[job]) > 1 {
				metric = r.Dir + " " + metric
			}
			pj.Pairs = append(pj.Pairs, Pair{A: "A", B: "B", Metric: metric, DiffPct: r.DiffPct, Verdict: r.Verdict, Better: r.Better})
		}
		p.Jobs = append(p.Jobs, pj)
	}
	for _, n := range rep.Notes {
		p.Footer = append(p.Footer, Line{Bold: "note", Text: n, Absent: true})
	}
	for _, w := range rep.Unreadable {
		p.Footer = append(p.Footer, Line{Bold: "not summarised", Text: w.Message, Absent: true})
	}
	return p
}
