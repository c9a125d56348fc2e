package clidoc

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/pvediskcheck/pvediskcheck/"

// archRow is one row of ARCHITECTURE.md's package table: the packages it
// names and the ones they may import ("everything" or empty: no bound).
type archRow struct {
	pkgs   []string
	mayUse map[string]bool
	any    bool
}

var backticked = regexp.MustCompile("`([a-z0-9/]+)`")

func readArchitecture(t *testing.T, root string) map[string]*archRow {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]*archRow{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 5 {
			t.Fatalf("ARCHITECTURE.md: a table row without its three cells: %.60s", line)
		}
		r := &archRow{mayUse: map[string]bool{}}
		for _, m := range backticked.FindAllStringSubmatch(cells[1], -1) {
			r.pkgs = append(r.pkgs, m[1])
		}
		use := strings.TrimSpace(cells[len(cells)-2])
		r.any = use == "everything" || use == ""
		if use != "-" && !r.any {
			for _, u := range strings.Split(use, ",") {
				u, _, _ = strings.Cut(strings.TrimSpace(u), " (") // "qmp/qmptest (latencytest)"
				r.mayUse[u] = true
			}
		}
		for _, p := range r.pkgs {
			rows[p] = r
		}
	}
	return rows
}

// packages lists the module's packages (folders with non-test Go files)
// and, for each, the module packages its non-test files import.
func packages(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			switch {
			case rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "vendor" || d.Name() == "testdata" || rel == "tools" || rel == "debian"):
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(filepath.Dir(rel))
		imps := out[pkg]
		if imps == nil {
			imps = []string{} // present, even without imports of the module
		}
		for _, im := range f.Imports {
			p := strings.Trim(im.Path.Value, `"`)
			if strings.HasPrefix(p, module) {
				imps = append(imps, strings.TrimPrefix(p, module))
			}
		}
		out[pkg] = imps
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// foundation is what every package may use (ARCHITECTURE.md says so under
// its table): the exit-code contract, unit formatting and the node handle.
var foundation = map[string]bool{"exitcode": true, "units": true, "node": true}

// Every package of the module has a row in ARCHITECTURE.md's table, and
// what its production files import is within that row's "may use" (a
// package's own subpackages and the test helpers' rows aside).
func TestArchitectureNamesEveryPackage(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	rows := readArchitecture(t, root)
	pkgs := packages(t, root)
	if len(pkgs) < 40 {
		t.Fatalf("found %d packages under %s: the walk is wrong", len(pkgs), root)
	}
	var missing, stale []string
	for p := range pkgs {
		if rows[p] == nil {
			missing = append(missing, p)
		}
	}
	for p := range rows {
		if pkgs[p] == nil {
			stale = append(stale, p)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 {
		t.Errorf("packages without a row in ARCHITECTURE.md: %v", missing)
	}
	if len(stale) > 0 {
		t.Errorf("ARCHITECTURE.md names packages that do not exist: %v", stale)
	}
	for p, imps := range pkgs {
		r := rows[p]
		if r == nil || r.any {
			continue
		}
		seen := map[string]bool{}
		for _, im := range imps {
			if seen[im] || strings.HasPrefix(im, p+"/") || r.mayUse[im] || foundation[im] {
				continue
			}
			seen[im] = true
			same := false
			for _, q := range r.pkgs {
				same = same || q == im
			}
			if !same {
				t.Errorf("%s imports %s, which its row in ARCHITECTURE.md does not list under \"may use\"", p, im)
			}
		}
	}
}
