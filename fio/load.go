package fio

import (
	"os"
	"slices"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

// Labels lists the groups' labels, each once, in order.
func Labels(gs []Group) []string {
	var l []string
	for _, g := range gs {
		if !slices.Contains(l, g.Label) {
			l = append(l, g.Label)
		}
	}
	return l
}

// Sides are the two sides of a comparison, loaded.
type Sides struct {
	A, B []Group
	// Unreadable are the files of either side that could not be read and
	// the runs that failed or measured nothing, each once (two labels of one
	// directory share its list); never nil.
	Unreadable []Warning
}

// LoadSides loads A and B for Compare. Each is a directory holding one
// label, or, when it is not a directory and dir is given, a label among
// the files of dir (read once for both). A directory holding several
// labels, a label not found, or no dir for a label is a usage error.
func LoadSides(a, b, dir string, opt Options) (*Sides, error) {
	var inDir *Summary
	side := func(arg string) ([]Group, []Warning, error) {
		if st, err := os.Stat(arg); err == nil && st.IsDir() {
			sum, err := Load([]string{arg}, opt)
			if err != nil {
				return nil, nil, err
			}
			if len(sum.Groups) == 0 {
				return nil, nil, noUsableRun(arg, sum)
			}
			if l := Labels(sum.Groups); len(l) > 1 {
				return nil, nil, exitcode.Usagef("fio compare: %s holds %d labels (%s): name two of them with --dir %s LABEL-A LABEL-B",
					arg, len(l), strings.Join(l, ", "), arg)
			}
			return sum.Groups, sum.NotSummarised(), nil
		}
		if dir == "" {
			return nil, nil, exitcode.Usagef("fio compare: %s is not a directory; to compare labels, name their directory with --dir", arg)
		}
		if inDir == nil {
			sum, err := Load([]string{dir}, opt)
			if err != nil {
				return nil, nil, err
			}
			if len(sum.Groups) == 0 {
				return nil, nil, noUsableRun(dir, sum)
			}
			inDir = sum
		}
		var gs []Group
		for _, g := range inDir.Groups {
			if g.Label == arg {
				gs = append(gs, g)
			}
		}
		if len(gs) == 0 {
			return nil, nil, exitcode.Usagef("fio compare: no label %q in %s (labels: %s)", arg, dir, strings.Join(Labels(inDir.Groups), ", "))
		}
		return gs, inDir.NotSummarised(), nil
	}
	ga, ua, err := side(a)
	if err != nil {
		return nil, err
	}
	gb, ub, err := side(b)
	if err != nil {
		return nil, err
	}
	s := &Sides{A: ga, B: gb, Unreadable: append([]Warning{}, ua...)}
	for _, w := range ub {
		if !slices.Contains(s.Unreadable, w) {
			s.Unreadable = append(s.Unreadable, w)
		}
	}
	return s, nil
}

// NotSummarised is a summary's unreadable files and failed runs, in that order.
func (s *Summary) NotSummarised() []Warning {
	return append(slices.Clone(s.Unreadable), s.Failed...)
}

// noUsableRun is compare's error for a side with nothing to compare: bad
// input (exit 2), not a verdict: exit 0 would read as "no difference", 1 as
// "different".
func noUsableRun(arg string, sum *Summary) error {
	ws := sum.NotSummarised()
	if len(ws) == 0 {
		return exitcode.Usagef("fio compare: %s: no usable run (only fill passes: %d)", arg, len(sum.Preconditioning))
	}
	return exitcode.Usagef("fio compare: %s: no usable run (%d file(s) or run(s) not summarised; first: %s)",
		arg, len(ws), ws[0].Message)
}

// ParseMetrics reads --metric: metric keys, comma-separated or given
// several times; none means all (nil).
func ParseMetrics(values []string) ([]string, error) {
	var metrics []string
	for _, m := range values {
		for _, k := range strings.Split(m, ",") {
			if k = strings.TrimSpace(k); k == "" {
				continue
			}
			if _, ok := MetricByKey(k); !ok {
				return nil, exitcode.Usagef("fio compare: unknown --metric %q (iops, bw, clat, lat, p99, fsync)", k)
			}
			metrics = append(metrics, k)
		}
	}
	return metrics, nil
}

// ParseGroupBy reads --group-by.
func ParseGroupBy(s string) (GroupBy, error) {
	g := GroupBy(s)
	if !slices.Contains(GroupBys, g) {
		return "", exitcode.Usagef("--group-by %q: expected auto, name, job or dir", g)
	}
	return g, nil
}
