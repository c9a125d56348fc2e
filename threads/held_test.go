package threads

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/node"
)

// TestHeldReadsAsRead: Held gives what Read gives, on the real procfs
// (files held open, read again in place: the run time grows between two
// reads) and on a fixture tree (read as Read reads it); a thread not asked
// for any more has its file closed; a thread that never was is absent.
func TestHeldReadsAsRead(t *testing.T) {
	r, err := NewReader(node.New(node.NewPaths("/", "/proc", ""), 0))
	if err != nil {
		t.Fatal(err)
	}
	pid := os.Getpid()
	h := r.Hold(pid)
	defer h.Close()
	a := h.Read([]int{pid, 1 << 30})
	want := r.Read(pid, []int{pid})
	if len(a) != 1 || a[pid].Start != want[pid].Start || a[pid].Comm != want[pid].Comm || !a[pid].HasSchedstat {
		t.Fatalf("held %+v, Read %+v", a, want)
	}
	if h.task.Held() != 2 { // the main thread's schedstat and stat
		t.Errorf("%d files held after the first read, want 2: %v", h.task.Held(), h.task)
	}
	// A thread that runs: its run time read again in place grows.
	spin, stop := spinThread()
	a = h.Read([]int{pid, spin})
	time.Sleep(50 * time.Millisecond)
	b := h.Read([]int{pid, spin})
	stop()
	if b[spin].RunNs <= a[spin].RunNs {
		t.Errorf("thread %d's run time read again in place did not grow: %d then %d", spin, a[spin].RunNs, b[spin].RunNs)
	}
	h.Read([]int{pid})
	if tid := otherThread(t, pid); tid > 0 {
		if c := h.Read([]int{pid, tid}); len(c) != 2 || h.task.Held() != 3 {
			t.Errorf("thread %d added: %v, %d files held, want 3", tid, c, h.task.Held())
		}
		if h.Read([]int{pid}); h.task.Held() != 2 {
			t.Errorf("thread %d no longer asked: %d files held, want 2", tid, h.task.Held())
		}
	}

	proc := t.TempDir()
	stat := "100 (t100) S 1 1 1 0 -1 0 0 0 0 0 7 3 0 0 20 0 3 0 42 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
	for name, body := range map[string]string{"100/task/100/stat": stat, "100/task/100/schedstat": "5 6 7\n", "100/task/101/schedstat": "8 9 10\n"} {
		p := filepath.Join(proc, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fr, err := NewReader(node.New(node.NewPaths("/", proc, ""), 0))
	if err != nil {
		t.Fatal(err)
	}
	fh := fr.Hold(100)
	defer fh.Close()
	got, exp := fh.Read([]int{100, 101, 102}), fr.Read(100, []int{100, 101, 102})
	if len(got) != 2 || got[100] != exp[100] || got[101] != exp[101] || fh.task.Held() != 0 {
		t.Errorf("fixture tree: held %+v (%d files), Read %+v", got, fh.task.Held(), exp)
	}
}

// otherThread is a thread of this process other than its main one (the Go
// runtime runs several); 0 when none is listed.
func otherThread(t *testing.T, pid int) int {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if tid, err := strconv.Atoi(e.Name()); err == nil && tid != pid {
			return tid
		}
	}
	return 0
}
