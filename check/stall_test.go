package check

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// stallNode is stall's recording (stall/testdata/README.md) as a node tree:
// VM 100's config, command line, threads and QEMU's answers.
func stallNode(t *testing.T) (node.Node, *qmptest.QEMU) {
	t.Helper()
	rec := filepath.Join("..", "stall", "testdata", "frozen-7.2")
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(rec, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	root := t.TempDir()
	n := node.New(node.NewPaths(root, filepath.Join(root, "proc"), filepath.Join(root, "sys")), 5*time.Second)
	write := func(p, text string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(n.Paths.StorageCfg(), "dir: local\n\tpath /var/lib/vz\n\tcontent images\n\ndir: frozen\n\tpath /mnt/frozen\n\tcontent images\n")
	write(n.Paths.VMConfig(100), fakenode.StallConfig)
	write(filepath.Join(n.Paths.ProcPid(2452), "cmdline"), read("cmdline"))
	write(n.Paths.PidFile(100), "2452\n")
	if err := os.CopyFS(filepath.Join(n.Paths.ProcPid(2452), "task"), os.DirFS(filepath.Join(rec, "proc", "2452", "task"))); err != nil {
		t.Fatal(err)
	}
	q := qmptest.NewQEMU(t, qmptest.Replies(map[string]string{
		"query-blockstats": read("query-blockstats.json"),
		"query-iothreads":  read("query-iothreads.json"),
		"query-cpus-fast":  read("query-cpus-fast.json"),
	}))
	if err := os.Symlink(q.Sock(), n.Paths.QMPSocket(100)); err != nil {
		t.Fatal(err)
	}
	return n, q
}

// TestDiskStalled: the frozen disk is a disk-stalled error with its
// storage and evidence, confirmed by a second look; the idle disk is none;
// past the recorded idle time nothing is reported; three commands.
func TestDiskStalled(t *testing.T) {
	n, q := stallNode(t)
	v, err := vm.Load(context.Background(), n, 100)
	if err != nil {
		t.Fatal(err)
	}
	var out VMResult
	stalls(context.Background(), n, v, 2*time.Second, &out)
	want := "no request completed for 2.3 s while requests are outstanding (storage frozen): qemu: no request completed for 2.3 s (idle_time_ns); threads: 8 thread(s) serving the disk in state D (iou-wrk-2455 and 7 more; wchan 8 in percpu_rwsem_wait); threads: still outstanding 500ms later"
	if len(out.Findings) != 1 || out.Findings[0].Code != CodeDiskStalled || out.Findings[0].Severity != Error || out.Findings[0].Disk != "scsi1" ||
		out.Findings[0].Message != want || !strings.HasPrefix(out.Findings[0].Fix, "pvediskcheck stall 100 ") {
		t.Fatalf("findings %+v", out.Findings)
	}
	if got := strings.Join(q.Seen(), " "); got != "query-blockstats query-iothreads query-cpus-fast" {
		t.Errorf("commands %s", got)
	}
	var later VMResult
	stalls(context.Background(), n, v, 2300*time.Millisecond, &later)
	if len(later.Findings) != 0 || len(later.NotChecked) != 0 {
		t.Errorf("past the idle time: %+v", later)
	}
	// QEMU gone: not checked, said.
	q.Kill()
	var gone VMResult
	stalls(context.Background(), n, v, 2*time.Second, &gone)
	if len(gone.Findings) != 0 || len(gone.NotChecked) != 1 || gone.NotChecked[0] != CodeDiskStalled || !strings.HasPrefix(strings.Join(gone.Notes, ""), "disk-stalled not checked: ") {
		t.Errorf("QEMU gone: %+v", gone)
	}
}
