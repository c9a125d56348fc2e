package fio

import (
	"encoding/csv"
	"io"
	"slices"
	"strconv"
	"strings"
)

// CSV is the other output format of a summary and a comparison (fio
// summary --csv, fio compare --csv), beside their JSON: one row per group or
// per comparison, raw numbers with the unit in the column name, a Stat as
// five columns (StatColumns), empty where there is no value.

// StatColumns are the columns of one Stat, after its metric's prefix.
var StatColumns = []string{"mean", "min", "max", "spread_pct", "cv_pct"}

// statFields is s as StatColumns: shortest exact decimals; all empty when
// there are no runs, cv_pct empty without a CV.
func statFields(s *Stat) []string {
	if s == nil || s.N == 0 {
		return []string{"", "", "", "", ""}
	}
	cv := ""
	if s.CVPct != nil {
		cv = decimal(*s.CVPct)
	}
	return []string{decimal(s.Mean), decimal(s.Min), decimal(s.Max), decimal(s.SpreadPct), cv}
}

func decimal(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

// WriteCSV writes the summary: label, job, workload, direction, runs,
// p99_of, each metric's StatColumns (Metrics, under Metric.Column), and
// the codes of the group's warnings, each once, ";"-separated.
func (s *Summary) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	head := []string{"label", "job", "workload", "direction", "runs", "p99_of"}
	for _, m := range Metrics {
		for _, c := range StatColumns {
			head = append(head, m.Column+"_"+c)
		}
	}
	cw.Write(append(head, "warnings"))
	for i := range s.Groups {
		g := &s.Groups[i]
		row := []string{g.Label, g.Job, g.Workload, g.Dir, strconv.Itoa(g.Runs()), g.P99Of}
		for _, m := range Metrics {
			row = append(row, statFields(m.Of(g))...)
		}
		var codes []string
		for _, w := range g.Warnings {
			if !slices.Contains(codes, w.Code) {
				codes = append(codes, w.Code)
			}
		}
		cw.Write(append(row, strings.Join(codes, ";")))
	}
	cw.Flush()
	return cw.Error()
}

// WriteCSV writes the comparisons: job, direction, workload, metric,
// latency_of, the runs of each side, each side's StatColumns (a_, b_),
// diff_pct, verdict, p_value (empty without one) and better.
func (c *Comparisons) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	head := []string{"job", "direction", "workload", "metric", "latency_of", "a_runs", "b_runs"}
	for _, side := range []string{"a", "b"} {
		for _, s := range StatColumns {
			head = append(head, side+"_"+s)
		}
	}
	cw.Write(append(head, "diff_pct", "verdict", "p_value", "better"))
	for _, r := range c.Rows {
		row := []string{r.Job, r.Dir, r.Workload, r.Metric, r.Of, strconv.Itoa(r.A.N), strconv.Itoa(r.B.N)}
		row = append(append(row, statFields(&r.A)...), statFields(&r.B)...)
		p := ""
		if r.PValue != nil {
			p = strconv.FormatFloat(*r.PValue, 'g', -1, 64)
		}
		cw.Write(append(row, decimal(r.DiffPct), string(r.Verdict), p, r.Better))
	}
	cw.Flush()
	return cw.Error()
}
