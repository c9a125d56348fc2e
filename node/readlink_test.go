package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// Readlink reads a link's text below the node's trees, the real procfs's
// /proc/self/exe included, and nothing outside them.
func TestReadlink(t *testing.T) {
	n, outside := readTree(t)
	p := n.Paths
	ctx := context.Background()
	exe := filepath.Join(p.ProcPid(4242), "exe")
	link(t, "/usr/bin/qemu-system-x86_64 (deleted)", exe)
	if got, err := n.Readlink(ctx, exe); err != nil || got != "/usr/bin/qemu-system-x86_64 (deleted)" {
		t.Fatalf("exe: %q %v", got, err)
	}
	// The link is read, never followed: its target may be anywhere.
	link(t, filepath.Join(outside, "shadow"), exe)
	if got, err := n.Readlink(ctx, exe); err != nil || got != filepath.Join(outside, "shadow") {
		t.Fatalf("a link to outside: %q %v", got, err)
	}
	if _, err := n.Readlink(ctx, filepath.Join(outside, "shadow")); !errors.Is(err, ErrBadFile) {
		t.Fatalf("outside the trees: %v", err)
	}
	if _, err := n.Readlink(ctx, filepath.Join(p.ProcPid(4243), "exe")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a process that is gone: %v", err)
	}
	if _, err := n.Readlink(ctx, filepath.Join(p.ProcPid(4242), "cmdline")); err == nil {
		t.Fatal("a regular file read as a link")
	}
	// A descriptor's link, its target absent here; and one reached through
	// a folder linked outside the tree, refused.
	fd := filepath.Join(p.ProcPid(4242), "fd")
	if err := os.MkdirAll(fd, 0o755); err != nil {
		t.Fatal(err)
	}
	link(t, "/mnt/pve/nfs/images/100/vm-100-disk-1.raw", filepath.Join(fd, "13"))
	if got, err := n.Readlink(ctx, filepath.Join(fd, "13")); err != nil || got != "/mnt/pve/nfs/images/100/vm-100-disk-1.raw" {
		t.Fatalf("fd/13: %q %v", got, err)
	}
	link(t, "/etc/shadow", filepath.Join(outside, "13"))
	link(t, outside, filepath.Join(p.ProcPid(4244)))
	if got, err := n.Readlink(ctx, filepath.Join(p.ProcPid(4244), "13")); !errors.Is(err, ErrBadFile) {
		t.Fatalf("through a folder linked outside: %q %v", got, err)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := n.Readlink(canceled, exe); !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
	// The real procfs: this test's own binary.
	real := New(NewPaths("/", "/proc", "/sys"), 0)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := real.Readlink(ctx, filepath.Join("/proc", strconv.Itoa(os.Getpid()), "exe")); err != nil || got != self {
		t.Fatalf("/proc/PID/exe: %q %v, want %q", got, err, self)
	}
}
