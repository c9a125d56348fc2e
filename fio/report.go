package fio

import (
	"fmt"
	"slices"
	"strings"
)

// SummaryReport is `fio summary --json` (docs/json.md).
type SummaryReport struct {
	HostRAMBytes int64 `json:"host_ram_bytes"` // 0: unknown, area-below-ram not checked
	*Summary
}

// CompareReport is `fio compare --json` (docs/json.md).
type CompareReport struct {
	A          string    `json:"a"`
	B          string    `json:"b"`
	Metrics    []string  `json:"metrics_of_interest"`
	Different  bool      `json:"different"` // a metric of interest is different: exit 1
	Unreadable []Warning `json:"unreadable"`
	*Comparisons
}

// CompareSides compares the sides named a and b on metrics (all when
// none) and says whether a metric of interest is different.
func CompareSides(a, b string, s *Sides, metrics []string) *CompareReport {
	if metrics == nil {
		metrics = []string{}
	}
	cmp := Compare(s.A, s.B, metrics)
	return &CompareReport{A: a, B: b, Metrics: metrics, Different: cmp.AnyDifferent(metrics), Unreadable: s.Unreadable, Comparisons: cmp}
}

// WarningUse is one distinct warning of a summary and where it applies.
type WarningUse struct {
	Code, Message string
	// Where is "all runs" (it applies to every run of more than one group),
	// or the groups it applies to by name, with the direction when a job
	// has both, the workload when a job has several in one direction, and
	// "(2 of 3 runs)" when not all of a group's runs have it.
	Where string
}

// WarningUses lists each distinct warning (code and message) of the
// summary's groups once, by code, with where it applies.
func (s *Summary) WarningUses() []WarningUse {
	type entry struct {
		WarningUse
		groups []*Group
		files  map[*Group]map[string]bool
	}
	var entries []*entry
	at := map[string]*entry{}
	dirs := map[string]int{} // a job with both directions gets "(read)"/"(write)"
	sets := map[string]int{} // a job with several workloads in a direction gets its workload
	total := 0
	for i := range s.Groups {
		g := &s.Groups[i]
		dirs[g.Name()]++
		sets[g.Name()+keySep+g.Dir]++
		total += g.Runs()
	}
	for i := range s.Groups {
		g := &s.Groups[i]
		for _, w := range g.Warnings {
			k := w.Code + keySep + w.Message
			en := at[k]
			if en == nil {
				en = &entry{WarningUse: WarningUse{Code: w.Code, Message: w.Message}, files: map[*Group]map[string]bool{}}
				at[k] = en
				entries = append(entries, en)
			}
			if en.files[g] == nil {
				en.files[g] = map[string]bool{}
				en.groups = append(en.groups, g)
			}
			en.files[g][w.File] = true
		}
	}
	slices.SortStableFunc(entries, func(a, b *entry) int { return strings.Compare(a.Code, b.Code) })
	out := make([]WarningUse, len(entries))
	for i, en := range entries {
		covered := 0
		var where []string
		for _, g := range en.groups {
			covered += len(en.files[g])
			n := g.Name()
			if n == "" {
				n = "-"
			}
			switch {
			case sets[g.Name()+keySep+g.Dir] > 1:
				n += " (" + g.Dir + ", " + g.Workload + ")"
			case dirs[g.Name()] > 1:
				n += " (" + g.Dir + ")"
			}
			if len(en.files[g]) < g.Runs() {
				n += fmt.Sprintf(" (%d of %d runs)", len(en.files[g]), g.Runs())
			}
			where = append(where, n)
		}
		out[i] = en.WarningUse
		out[i].Where = strings.Join(where, ", ")
		if covered == total && len(s.Groups) > 1 {
			out[i].Where = "all runs"
		}
	}
	return out
}
