package fio

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

var (
	labDir  = filepath.Join("testdata", "lab")
	realDir = filepath.Join("testdata", "real")
)

// link puts the named files of dir into a new directory.
func link(t *testing.T, dir string, names ...string) string {
	t.Helper()
	to := t.TempDir()
	for _, n := range names {
		if err := os.Symlink(mustAbs(t, filepath.Join(dir, n)), filepath.Join(to, n)); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestLoad(t *testing.T) {
	sum, err := Load([]string{filepath.Join(realDir, "lab19"), filepath.Join(realDir, "bad")}, Options{GroupBy: GroupAuto})
	if err != nil || len(sum.Groups) != 12 || len(sum.Unreadable) != 4 || len(sum.Preconditioning) != 2 {
		t.Fatalf("%v: %d groups, %d unreadable", err, len(sum.Groups), len(sum.Unreadable))
	}
	for _, c := range []struct {
		paths []string
		msg   string
	}{
		{[]string{filepath.Join(realDir, "nope")}, "no such file or directory"},
		{[]string{t.TempDir()}, "no *.json file in "},
	} {
		_, err := Load(c.paths, Options{})
		if exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%v: %v, want exit 2 and %q", c.paths, err, c.msg)
		}
	}
}

func TestLabels(t *testing.T) {
	gs := []Group{{Label: "b"}, {Label: "a"}, {Label: "b"}, {Label: ""}, {Label: "a"}}
	if got := Labels(gs); !slices.Equal(got, []string{"b", "a", ""}) {
		t.Errorf("%q", got)
	}
	if Labels(nil) != nil {
		t.Error("no groups: no labels")
	}
}

func TestLoadSides(t *testing.T) {
	lab37 := filepath.Join(labDir, "lab37")
	native := link(t, lab37, "native-rr4k-1.json", "native-rr4k-2.json", "native-rw4k-1.json")
	uring := link(t, lab37, "io_uring-rr4k-1.json", "io_uring-rr4k-2.json")
	// A directory with two labels and a broken file.
	mixed := link(t, lab37, "native-rr4k-1.json", "io_uring-rr4k-1.json")
	if err := os.WriteFile(filepath.Join(mixed, "broken.json"), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	opt := Options{GroupBy: GroupAuto}

	// Two directories, one label each.
	s, err := LoadSides(uring, native, "", opt)
	if err != nil || len(s.A) != 1 || len(s.B) != 2 || s.A[0].Label != "io_uring" || len(s.Unreadable) != 0 {
		t.Fatalf("directories: %v %+v", err, s)
	}
	// Two labels of one directory: its broken file counted once.
	s, err = LoadSides("native", "io_uring", mixed, opt)
	if err != nil || len(s.A) != 1 || s.A[0].Label != "native" || len(s.B) != 1 || s.B[0].Label != "io_uring" || len(s.Unreadable) != 1 {
		t.Fatalf("labels: %v %+v", err, s)
	}
	// A directory and a label.
	if s, err = LoadSides(uring, "native", mixed, opt); err != nil || len(s.A) != 1 || s.B[0].Label != "native" || len(s.Unreadable) != 1 {
		t.Fatalf("directory and label: %v %+v", err, s)
	}
	for _, c := range []struct {
		a, b, dir string
		msg       string
	}{
		{mixed, native, "", "holds 2 labels (io_uring, native): name two of them with --dir " + mixed + " LABEL-A LABEL-B"},
		{native, mixed, "", "holds 2 labels"},
		{"native", "io_uring", "", "native is not a directory; to compare labels, name their directory with --dir"},
		{native, "io_uring", "", "io_uring is not a directory"},
		{"native", "ceph", mixed, `no label "ceph" in ` + mixed + " (labels: io_uring, native)"},
		{"native", "io_uring", t.TempDir(), "no *.json file in"},
		{t.TempDir(), native, "", "no *.json file in"},
	} {
		_, err := LoadSides(c.a, c.b, c.dir, opt)
		if exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s %s --dir %q: %v, want exit 2 and %q", c.a, c.b, c.dir, err, c.msg)
		}
	}
}

func TestParseMetrics(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want []string
		err  string
	}{
		{nil, nil, ""},
		{[]string{""}, nil, ""},
		{[]string{"iops"}, []string{"iops"}, ""},
		{[]string{"iops, bw", "p99"}, []string{"iops", "bw", "p99"}, ""},
		{[]string{"clat,,lat,fsync"}, []string{"clat", "lat", "fsync"}, ""},
		{[]string{"iops,speed"}, nil, `fio compare: unknown --metric "speed" (iops, bw, clat, lat, p99, fsync)`},
		{[]string{"IOPS"}, nil, `unknown --metric "IOPS"`},
	} {
		got, err := ParseMetrics(c.in)
		if c.err != "" {
			if exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q: %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%q: %q %v, want %q", c.in, got, err, c.want)
		}
	}
}

func TestParseGroupBy(t *testing.T) {
	for _, g := range GroupBys {
		if got, err := ParseGroupBy(string(g)); got != g || err != nil {
			t.Errorf("%s: %s %v", g, got, err)
		}
	}
	for _, s := range []string{"", "storage", "Auto"} {
		if _, err := ParseGroupBy(s); exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "expected auto, name, job or dir") {
			t.Errorf("%q: %v", s, err)
		}
	}
}
