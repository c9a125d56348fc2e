package clidoc

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestLintCannotDrift: make test runs lint; lint runs staticcheck on the
// default build, the integration tag's and tools/monitoring; the script
// pins one exact release (never @latest), make deps installs that one, and
// the developer guide names the same release.
func TestLintCannotDrift(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(root, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	mk := read("Makefile")
	// The test target's prerequisites name lint.
	test := regexp.MustCompile(`(?m)^test:([^\n]*)$`).FindStringSubmatch(mk)
	if test == nil || !strings.Contains(" "+test[1]+" ", " lint ") {
		t.Errorf("Makefile: make test does not run lint: %q", test)
	}
	// The lint recipe: its lines up to the next blank line.
	i := strings.Index(mk, "\nlint:\n")
	if i < 0 {
		t.Fatal("Makefile: no lint target")
	}
	recipe := mk[i+len("\nlint:\n"):]
	if j := strings.Index(recipe, "\n\n"); j >= 0 {
		recipe = recipe[:j]
	}
	for _, want := range []string{
		"scripts/staticcheck.sh ./...",
		"scripts/staticcheck.sh -tags integration ./...",
		"cd tools/monitoring && GO=$(GO) ../../scripts/staticcheck.sh ./...",
		"$(GO) vet ./...", "$(GO) vet -tags integration ./...", "gofmt -l",
	} {
		if !strings.Contains(recipe, want) {
			t.Errorf("Makefile: lint does not run %q:\n%s", want, recipe)
		}
	}
	sc := read("scripts/staticcheck.sh")
	rel := regexp.MustCompile(`(?m)^release=(\d{4}\.\d+\.\d+)\s`).FindStringSubmatch(sc)
	mod := regexp.MustCompile(`(?m)^module=(v\d+\.\d+\.\d+)\s`).FindStringSubmatch(sc)
	if rel == nil || mod == nil {
		t.Fatalf("scripts/staticcheck.sh pins no exact release and module version (release=%q module=%q)", rel, mod)
	}
	if !strings.Contains(sc, `honnef.co/go/tools/cmd/staticcheck@$module`) || strings.Contains(sc, "@latest") {
		t.Error("scripts/staticcheck.sh does not install the pinned module version (or names @latest)")
	}
	if !strings.Contains(read("scripts/test-deps.sh"), "staticcheck.sh\" --install") {
		t.Error("scripts/test-deps.sh (make deps) does not install staticcheck")
	}
	if dev := read("docs/developing.md"); !strings.Contains(dev, "staticcheck at the release") || !strings.Contains(dev, "("+rel[1]+",") {
		t.Errorf("docs/developing.md does not name staticcheck %s, the pinned release", rel[1])
	}
}
