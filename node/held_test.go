package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// TestProcDirNames: the held directory lists what os.ReadDir lists (the
// real procfs, through getdents on the open directory), a fixture tree
// the same through its path, and a missing directory says so.
func TestProcDirNames(t *testing.T) {
	n := New(NewPaths("/", "/proc", ""), 0)
	task := n.OpenProcDir("/proc/self/task")
	defer task.Close()
	if task.fd < 0 {
		t.Fatal("/proc/self/task not held open")
	}
	for i := 0; i < 2; i++ { // listed again from the start
		got, err := task.Names()
		if err != nil || !slices.Contains(got, strconv.Itoa(os.Getpid())) {
			t.Fatalf("held listing %d: %v %v", i, got, err)
		}
	}
	dir := t.TempDir()
	for _, name := range []string{"100", "101", "x"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	fixture := New(NewPaths("/", dir, ""), 0).OpenProcDir(dir)
	if got, err := fixture.Names(); err != nil || !slices.Equal(got, []string{"100", "101", "x"}) {
		t.Errorf("fixture: %v %v", got, err)
	}
	gone := New(NewPaths("/", dir, ""), 0).OpenProcDir(filepath.Join(dir, "none"))
	if _, err := gone.Names(); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing directory: %v", err)
	}
}

// TestHeldDir: a file held open is read again in place with fresh
// content; Sweep closes the files not read since the last Sweep; a file
// that does not exist is an error that is os.ErrNotExist; a fixture tree's
// files are read, none held.
func TestHeldDir(t *testing.T) {
	n := New(NewPaths("/", "/proc", ""), 0)
	h := n.HoldProcDir("/proc/self")
	defer h.Close()
	var buf [4096]byte
	ctx := context.Background()
	for _, name := range []string{"schedstat", "stat"} {
		if _, err := h.ReadSmall(ctx, name, buf[:]); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	if h.Held() != 2 {
		t.Fatalf("%d held, want 2", h.Held())
	}
	if _, err := h.ReadSmall(ctx, "no-such-file", buf[:]); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	h.Sweep()
	if _, err := h.ReadSmall(ctx, "stat", buf[:]); err != nil {
		t.Fatal(err)
	}
	h.Sweep()
	if h.Held() != 1 || h.files["stat"].fd < 0 {
		t.Errorf("after a sweep with stat alone read: %d held %v", h.Held(), h.files)
	}
	h.Reopen()
	if h.Held() != 0 {
		t.Errorf("reopened: %d held", h.Held())
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte("1 (x) S\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f := New(NewPaths("/", dir, ""), 0).HoldProcDir(dir)
	defer f.Close()
	if m, err := f.ReadSmall(ctx, "stat", buf[:]); err != nil || string(buf[:m]) != "1 (x) S\n" || f.Held() != 0 {
		t.Errorf("fixture: %q %v, %d held", buf[:m], err, f.Held())
	}
}
