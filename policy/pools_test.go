package policy

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/node"
)

func TestParsePools(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "user.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	p := ParsePools(b)
	// "bad name" is refused (verify_poolname); lab is lab/gpu's parent.
	if !slices.Equal(p.Names, []string{"dup", "lab", "lab/gpu", "prod"}) {
		t.Errorf("names %v", p.Names)
	}
	for id, want := range map[int]string{100: "prod", 101: "prod", 102: "prod", 200: "lab", 201: "lab", 202: "lab", 300: "lab/gpu", 500: "dup"} {
		if p.ByVM[id] != want {
			t.Errorf("VM %d in %q, want %q", id, p.ByVM[id], want)
		}
	}
	if _, in := p.ByVM[400]; in || len(p.ByVM) != 8 {
		t.Errorf("members %v", p.ByVM)
	}
	// Fields trimmed, trailing ones absent, VMIDs not numbers skipped.
	p = ParsePools([]byte("  pool: a : c : 7 x12 +3 ,9  \npool:b\npoolx:c::1::\n"))
	if !slices.Equal(p.Names, []string{"a", "b"}) || len(p.ByVM) != 2 || p.ByVM[7] != "a" || p.ByVM[9] != "a" {
		t.Errorf("%+v", p)
	}
}

func TestReadPools(t *testing.T) {
	root := t.TempDir()
	n := node.New(node.NewPaths(root, "", ""), time.Second)
	// No user.cfg: no pools, no error.
	if p, err := ReadPools(context.Background(), n); err != nil || len(p.Names) != 0 || p.ByVM == nil {
		t.Errorf("absent: %+v %v", p, err)
	}
	if err := os.MkdirAll(filepath.Join(root, "etc/pve/user.cfg"), 0o755); err != nil {
		t.Fatal(err)
	}
	// Not a file: node.ReadFile's refusal, bad input.
	if _, err := ReadPools(context.Background(), n); err == nil || !strings.Contains(err.Error(), "is a directory, not a regular file") {
		t.Errorf("a directory: %v", err)
	}
	os.Remove(filepath.Join(root, "etc/pve/user.cfg"))
	os.WriteFile(filepath.Join(root, "etc/pve/user.cfg"), []byte("pool:x::100::\n"), 0o644)
	if p, err := ReadPools(context.Background(), n); err != nil || p.ByVM[100] != "x" {
		t.Errorf("%+v %v", p, err)
	}
	if (&Policy{}).UsesPools() || !mustParse(t, oneRule("pool: x", "cache: none")).UsesPools() || mustParse(t, oneRule("tag: x", "cache: none")).UsesPools() {
		t.Error("UsesPools")
	}
}
