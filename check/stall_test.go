package check

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/latency/latencytest"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// stallNode is stall's recording (stall/testdata/README.md) as a node tree:
// VM 100's config, command line, threads and QEMU's answers.
func stallNode(t *testing.T) (node.Node, *qmptest.QEMU) {
	t.Helper()
	return stallNodeWith(t, "")
}

// stallNodeWith is stallNode answering query-blockstats with blockstats
// ("": the recording's).
func stallNodeWith(t *testing.T, blockstats string) (node.Node, *qmptest.QEMU) {
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
	if blockstats == "" {
		blockstats = read("query-blockstats.json")
	}
	q := qmptest.NewQEMU(t, qmptest.Replies(map[string]string{
		"query-blockstats": blockstats,
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
	look := func(after time.Duration) VMResult {
		var out VMResult
		set := disk.Resolve(context.Background(), n, v, v.Disks, stallLayers, disk.Options{})
		stalls(set, detectStalls(context.Background(), n, set, after), &out)
		return out
	}
	out := look(2 * time.Second)
	want := "no request completed for 2.3 s while requests are outstanding (storage frozen): qemu: no request completed for 2.3 s (idle_time_ns); threads: 8 thread(s) serving the disk in state D (iou-wrk-2455 and 7 more; wchan 8 in percpu_rwsem_wait); threads: still outstanding 500ms later"
	if len(out.Findings) != 1 || out.Findings[0].Code != CodeDiskStalled || out.Findings[0].Severity != Error || out.Findings[0].Disk != "scsi1" ||
		out.Findings[0].Message != want || !strings.HasPrefix(out.Findings[0].Fix, "pvediskcheck stall 100 ") {
		t.Fatalf("findings %+v", out.Findings)
	}
	if got := strings.Join(q.Seen(), " "); got != "query-blockstats query-iothreads query-cpus-fast" {
		t.Errorf("commands %s", got)
	}
	later := look(2300 * time.Millisecond)
	if len(later.Findings) != 0 || len(later.NotChecked) != 0 {
		t.Errorf("past the idle time: %+v", later)
	}
	// QEMU gone: not checked (nor latency-histogram-left, which rests on
	// the same query-blockstats), said.
	q.Kill()
	gone := look(2 * time.Second)
	if len(gone.Findings) != 0 || !slices.Equal(gone.NotChecked, []Code{CodeDiskStalled, CodeHistogramLeft}) || !strings.HasPrefix(strings.Join(gone.Notes, ""), "disk-stalled and latency-histogram-left not checked: ") {
		t.Errorf("QEMU gone: %+v", gone)
	}
}

// TestHistogramLeft: a latency histogram with pvediskcheck's boundaries on
// a disk is a latency-histogram-left info with the command that clears it
// (check sets none: any of pvediskcheck's is another run's); someone
// else's histogram and none at all are no finding. Read from the stall
// look's query-blockstats: no command more.
func TestHistogramLeft(t *testing.T) {
	bare, ours, _ := latencytest.Recorded(t)
	foreign, err := os.ReadFile("../latency/testdata/qemu-7.2.22/query-blockstats-foreign.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, stats string
		left        bool
	}{{"pvediskcheck's", ours, true}, {"someone else's", string(foreign), false}, {"none", bare, false}} {
		n, q := stallNodeWith(t, c.stats)
		v, err := vm.Load(context.Background(), n, 100)
		if err != nil {
			t.Fatal(err)
		}
		var out VMResult
		set := disk.Resolve(context.Background(), n, v, v.Disks, stallLayers, disk.Options{})
		stalls(set, detectStalls(context.Background(), n, set, time.Hour), &out)
		var got []Finding
		for _, f := range out.Findings {
			if f.Code == CodeHistogramLeft {
				got = append(got, f)
			}
		}
		if got := strings.Join(q.Seen(), " "); got != "query-blockstats query-iothreads query-cpus-fast" {
			t.Errorf("%s: commands %s", c.name, got)
		}
		if !c.left {
			if len(got) != 0 || len(out.NotChecked) != 0 {
				t.Errorf("%s: %+v", c.name, out)
			}
			continue
		}
		l := latency.Leftover{VMID: 100, Disk: "scsi1", Clear: latency.ClearCommand(n.Paths.QMPSocket(100), "scsi1")}
		if len(got) != 1 || !reflect.DeepEqual(got[0], Finding{Severity: Info, Code: CodeHistogramLeft, Disk: "scsi1", Message: l.Message(), Fix: l.Clear}) {
			t.Errorf("%s: %+v", c.name, got)
		}
	}
}
