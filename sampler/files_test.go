package sampler

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/node"
)

// (issue 21) Host reads its files through node.ReadFile: a FIFO where
// /proc/meminfo, /proc/<pid>/io or a sysfs stat file should be is refused at
// once (it used to block the sampler for good); the node's own files read
// as before.
func TestHostFiles(t *testing.T) {
	m, err := (Host{Proc: "/proc", Sys: "/sys"}).Memory()
	if err != nil || m.TotalBytes <= 0 || m.TotalBytes%1024 != 0 || m.DirtyBytes > m.TotalBytes {
		t.Errorf("this machine's /proc/meminfo: %+v %v", m, err)
	}
	if n, err := (Host{Proc: "/proc"}).ProcessWriteBytes(os.Getpid()); err != nil || n < 0 {
		t.Errorf("this process's io: %d %v", n, err)
	}
	proc, sys := t.TempDir(), t.TempDir()
	for _, p := range []string{filepath.Join(proc, "meminfo"), filepath.Join(proc, "42", "io"), filepath.Join(sys, "class", "block", "dm-0", "stat")} {
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	h := Host{Proc: proc, Sys: sys}
	t0 := time.Now()
	if _, err := h.Memory(); !errors.Is(err, node.ErrBadFile) {
		t.Errorf("meminfo a FIFO: %v", err)
	}
	if _, err := h.ProcessWriteBytes(42); !errors.Is(err, node.ErrBadFile) {
		t.Errorf("io a FIFO: %v", err)
	}
	if _, err := h.BlockStatOf("dm-0"); !errors.Is(err, node.ErrBadFile) {
		t.Errorf("stat a FIFO: %v", err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
}
