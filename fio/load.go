package fio

import (
	"os"
	"slices"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

// Load reads the *.json files directly inside each directory of paths and
// each file named, and summarises them; a file that cannot be read or
// parsed is in Unreadable. A path that does not exist, or no *.json file at
// all, is a usage error (exit 2).
func Load(paths []string, opt Options) (*Summary, error) {
	files, err := ListFiles(paths)
	if err != nil {
		return nil, exitcode.Usagef("%v", err)
	}
	if len(files) == 0 {
		return nil, exitcode.Usagef("no *.json file in %s", strings.Join(paths, " "))
	}
	results, unreadable := ReadFiles(files)
	sum := Summarize(results, opt)
	sum.Unreadable = append(sum.Unreadable, unreadable...)
	return sum, nil
}

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
	// Unreadable are the files of either side that could not be read, each
	// once (two labels of one directory share its list).
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
			if l := Labels(sum.Groups); len(l) > 1 {
				return nil, nil, exitcode.Usagef("fio compare: %s holds %d labels (%s): name two of them with --dir %s LABEL-A LABEL-B",
					arg, len(l), strings.Join(l, ", "), arg)
			}
			return sum.Groups, sum.Unreadable, nil
		}
		if dir == "" {
			return nil, nil, exitcode.Usagef("fio compare: %s is not a directory; to compare labels, name their directory with --dir", arg)
		}
		if inDir == nil {
			sum, err := Load([]string{dir}, opt)
			if err != nil {
				return nil, nil, err
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
		return gs, inDir.Unreadable, nil
	}
	ga, ua, err := side(a)
	if err != nil {
		return nil, err
	}
	gb, ub, err := side(b)
	if err != nil {
		return nil, err
	}
	s := &Sides{A: ga, B: gb, Unreadable: slices.Clone(ua)}
	for _, w := range ub {
		if !slices.Contains(s.Unreadable, w) {
			s.Unreadable = append(s.Unreadable, w)
		}
	}
	return s, nil
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
