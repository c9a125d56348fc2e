package node

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ReadLink gives a link's text below --proc without following it (its
// target need not exist), refuses one outside --proc and one reached
// through a directory link that leaves it.
func TestReadLink(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	proc := filepath.Join(root, "proc")
	fd := filepath.Join(proc, "42", "fd")
	if err := os.MkdirAll(fd, 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		filepath.Join(fd, "13"):           "/mnt/pve/nfs/images/100/vm-100-disk-1.raw",
		filepath.Join(proc, "42", "root"): "/",
		filepath.Join(outside, "13"):      "/etc/shadow",
		filepath.Join(proc, "43"):         outside,
	} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	n := New(NewPaths(root, proc, filepath.Join(root, "sys")), time.Second)
	for _, c := range []struct{ path, want string }{
		{filepath.Join(fd, "13"), "/mnt/pve/nfs/images/100/vm-100-disk-1.raw"},
		{filepath.Join(proc, "42", "root"), "/"},
	} {
		if got, err := n.ReadLink(c.path); err != nil || got != c.want {
			t.Errorf("%s: %q %v, want %q", c.path, got, err, c.want)
		}
	}
	for _, p := range []string{filepath.Join(outside, "13"), filepath.Join(proc, "43", "13")} {
		if got, err := n.ReadLink(p); !errors.Is(err, ErrBadFile) {
			t.Errorf("%s: %q %v, want refused", p, got, err)
		}
	}
	if _, err := n.ReadLink(filepath.Join(fd, "14")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing fd: %v", err)
	}
}
