package storage

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

func TestReturnsSpace(t *testing.T) {
	dir := t.TempDir()
	sparse := filepath.Join(dir, "sparse.raw")
	if err := os.WriteFile(sparse, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(sparse, 1<<20); err != nil {
		t.Fatal(err)
	}
	full := filepath.Join(dir, "full.raw")
	if err := os.WriteFile(full, make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	st := func(typ string, props ...string) *qemuserver.Storage {
		s := &qemuserver.Storage{ID: "s", Type: typ, Props: map[string]string{}}
		for i := 0; i+1 < len(props); i += 2 {
			s.Props[props[i]] = props[i+1]
		}
		return s
	}
	for _, c := range []struct {
		name   string
		s      *qemuserver.Storage
		format string
		path   string
		want   bool
	}{
		{"no storage (a path)", nil, "raw", sparse, false},
		{"lvmthin", st("lvmthin", "vgname", "pve"), "raw", "", true},
		{"rbd", st("rbd", "pool", "rbd"), "raw", "", true},
		{"zfspool sparse", st("zfspool", "pool", "rpool/data", "sparse", "1"), "raw", "", true},
		{"zfspool without sparse: refreservation", st("zfspool", "pool", "rpool/data"), "raw", "", false},
		{"zfspool sparse 0", st("zfspool", "pool", "rpool/data", "sparse", "0"), "raw", "", false},
		{"thick lvm", st("lvm", "vgname", "pve"), "raw", "", false},
		{"iscsi", st("iscsi"), "raw", "", false},
		{"dir qcow2", st("dir", "path", dir), "qcow2", full, true},
		{"dir sparse raw", st("dir", "path", dir), "raw", sparse, true},
		{"dir fully allocated raw", st("dir", "path", dir), "raw", full, false},
		{"nfs sparse raw", st("nfs", "path", dir), "raw", sparse, true},
		{"dir missing file", st("dir", "path", dir), "raw", filepath.Join(dir, "none"), false},
	} {
		if got := ReturnsSpace(c.s, c.format, c.path); got != c.want {
			t.Errorf("%s: ReturnsSpace = %v, want %v", c.name, got, c.want)
		}
	}
	if IsSparse(dir) {
		t.Error("a directory is not a sparse file")
	}
}
