package fio

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/internal/corpus"
)

// realWorldFio is the real-world corpus's fio outputs from public
// repositories, read at test time (never copied in).
func realWorldFio(t *testing.T) string {
	return filepath.Join(corpus.Dir(t, corpus.RealWorld), "fio")
}

// TestRealWorldCorpus: every file of the corpus, as listed in its
// SOURCES.txt, is summarised or warned about, never silently dropped, and
// what is summarised is sane.
func TestRealWorldCorpus(t *testing.T) {
	dir := realWorldFio(t)
	listed := sourcesListed(t, filepath.Join(dir, "SOURCES.txt"))
	files, err := ListFiles([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, filepath.Base(f))
	}
	if !slices.Equal(names, listed) || len(files) < 45 {
		t.Fatalf("%d files, SOURCES.txt lists %d: %v vs %v", len(names), len(listed), names, listed)
	}
	groups := 0
	for _, f := range files {
		groups += checkFile(t, f)
	}
	t.Logf("%d files, %d groups", len(files), groups)
	// All at once, as `fio summary DIR` reads them: runs of the same test
	// group across files.
	s, err := Load([]string{dir}, Options{GroupBy: GroupAuto})
	if err != nil || s.Outcome != Complete {
		t.Fatalf("%v: %s, failed %v, unreadable %v", err, s.Outcome, s.Failed, s.Unreadable)
	}
	checkSane(t, s)
}

// The fixtures, the same way.
func TestFixturesAccountedAndSane(t *testing.T) {
	for _, d := range []string{"lab19", "pitfalls", "bad", "failed", "shapes", "fio2"} {
		files, _ := ListFiles([]string{filepath.Join("testdata", "real", d)})
		for _, f := range files {
			checkFile(t, f)
		}
	}
}

// checkFile summarises one file alone and checks it; it returns its groups.
func checkFile(t *testing.T, file string) int {
	t.Helper()
	s, err := Load([]string{file}, Options{GroupBy: GroupAuto, HostRAMBytes: 16 << 30})
	if err != nil {
		t.Fatal(err)
	}
	checkAccounted(t, file, s)
	checkSane(t, s)
	return len(s.Groups)
}

func sourcesListed(t *testing.T, path string) []string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) > 0 && strings.HasSuffix(fs[0], ".json") {
			out = append(out, fs[0])
		}
	}
	sort.Strings(out)
	return out
}

// checkAccounted: the file is unreadable (one warning), or each of its jobs
// is a fill, a group, or a failed run naming it.
func checkAccounted(t *testing.T, file string, s *Summary) {
	t.Helper()
	if len(s.Unreadable) > 0 {
		if len(s.Unreadable) != 1 || s.Unreadable[0].File != file || !strings.HasPrefix(s.Unreadable[0].Message, file+": ") ||
			len(s.Groups)+len(s.Failed) != 0 {
			t.Errorf("%s: unreadable %v, %d groups, failed %v", file, s.Unreadable, len(s.Groups), s.Failed)
		}
		return
	}
	data, _ := os.ReadFile(file)
	results, err := ParseAll(file, data)
	if err != nil {
		t.Fatalf("%s: read by Load, not by ParseAll: %v", file, err)
	}
	for _, r := range results {
		if len(r.Jobs) == 0 && !hasWarning(s.Failed, file, `"jobs": []`) {
			t.Errorf("%s: no jobs, no warning: %v", file, s.Failed)
		}
		for _, j := range mergeClones(r.Jobs) {
			measured := false
			for _, d := range Dirs {
				measured = measured || j.Dir(d).HasIO()
			}
			switch {
			case isPrecondition(j.Name):
				if !slices.Contains(s.Preconditioning, file) {
					t.Errorf("%s: fill %q not listed", file, j.Name)
				}
			case measured:
				found := false
				for _, g := range s.Groups {
					found = found || g.Job == j.Name && slices.Contains(g.Files, file)
				}
				if !found {
					t.Errorf("%s: job %q measured, in no group", file, j.Name)
				}
			default:
				if !hasWarning(s.Failed, file, clip(j.Name)) {
					t.Errorf("%s: job %q not summarised and not named: %v", file, j.Name, s.Failed)
				}
			}
		}
	}
}

func hasWarning(ws []Warning, file, text string) bool {
	for _, w := range ws {
		if w.File == file && strings.Contains(w.Message, text) {
			return true
		}
	}
	return false
}

// checkSane: checkValues, and what real fio output satisfies: a total
// latency is not below its completion latency, and IOPS x block size is the
// bandwidth where the job has one block size.
func checkSane(t *testing.T, s *Summary) {
	t.Helper()
	checkValues(t, s)
	for _, g := range s.Groups {
		if g.ClatMeanNs != nil && g.LatMeanNs != nil && g.LatMeanNs.Mean < g.ClatMeanNs.Mean*0.999 {
			t.Errorf("%s %s: lat %g < clat %g", g.Files[0], g.Name(), g.LatMeanNs.Mean, g.ClatMeanNs.Mean)
		}
		if bs, ok := ParseSize(g.Options["bs"]); ok && g.Options["bssplit"] == "" && g.Options["bsrange"] == "" {
			for i, iops := range g.IOPS.Values {
				if got, want := g.BandwidthMiBps.Values[i], iops*float64(bs)/(1<<20); math.Abs(got-want) > 0.02*want+0.01 {
					t.Errorf("%s %s run %d: %g MiB/s, IOPS x %d B = %g", g.Files[i], g.Name(), i, got, bs, want)
				}
			}
		}
	}
}

// checkValues holds whatever a file says: every value a finite number, rates
// and latencies above 0, one value per run, every warning naming its file in
// a few hundred bytes, and the summary encodes as JSON.
func checkValues(t *testing.T, s *Summary) {
	t.Helper()
	for _, g := range s.Groups {
		stats := map[string]*Stat{"iops": &g.IOPS, "bw": &g.BandwidthMiBps, "clat": g.ClatMeanNs, "lat": g.LatMeanNs,
			"p99": g.P99Ns, "fsync": g.FsyncMeanNs}
		for name, st := range stats {
			if st == nil {
				continue
			}
			if st.N != g.Runs() || len(st.Values) != st.N {
				t.Errorf("%s %s: %s has %d values for %d runs", g.Files[0], g.Name(), name, st.N, g.Runs())
			}
			for _, v := range append([]float64{st.Mean, st.Min, st.Max, st.SpreadPct, st.StdDev}, st.Values...) {
				if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
					t.Errorf("%s %s: %s has %g: %+v", g.Files[0], g.Name(), name, v, st)
				}
			}
			if st.Min <= 0 {
				t.Errorf("%s %s: %s min %g", g.Files[0], g.Name(), name, st.Min)
			}
		}
		if g.Runs() == 0 || g.Job != "" && g.Workload == "" {
			t.Errorf("%+v", g)
		}
		for _, w := range g.Warnings {
			if w.File == "" || w.Message == "" || len(w.Message) > 600 {
				t.Errorf("%s: warning %+v", g.Name(), w)
			}
		}
	}
	for _, w := range append(slices.Clone(s.Unreadable), s.Failed...) {
		if w.File == "" || !strings.HasPrefix(w.Message, w.File) || len(w.Message) > 600+len(w.File) {
			t.Errorf("not summarised without its file, or too long: %+v", w)
		}
	}
	if _, err := json.Marshal(s); err != nil {
		t.Errorf("summary does not encode: %v", err)
	}
}
