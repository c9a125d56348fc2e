package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/fakerun"
	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// fixture is one recorded running VM (testdata/README.md): what vmtest
// replays (config, storage.cfg, command line, every QMP reply a collection
// asked for), the QEMU process's thread counters and what lvs printed.
type fixture struct {
	vmtest.Fixture
	Pid int `json:"pid"`
	// Threads are /proc/PID/task/TID/{stat,schedstat} by thread id.
	Threads map[string]map[string]string `json:"threads"`
	LVS     string                       `json:"lvs"`
}

func loadFixture(t testing.TB, name string) fixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return f
}

// bare is a node of tree p whose runner has no lvs (nor any other tool):
// its pools are not read.
func bare(p node.Paths, timeout time.Duration) node.Node {
	return (&fakerun.Runner{}).Node(node.New(p, timeout))
}

// replayed is a node tree with one recorded VM running: its QMP socket a
// fake answering the recording, its threads' counters in procfs.
type replayed struct {
	n *vmtest.Node
	q *qmptest.QEMU
	// lvs runs lvs as recorded with the VM (no lvs when nothing was).
	lvs *fakerun.Runner
}

// start lays the fixture out as VM vmid (the recording's VMID when 0), on
// node tree n (a new one when nil), answering with greeting.
func (f fixture) start(t *testing.T, n *vmtest.Node, vmid int, greeting string) replayed {
	t.Helper()
	if vmid == 0 {
		vmid = f.VMID
	}
	if n == nil {
		n = vmtest.New(t, vmid, f.Conf, f.StorageCfg, f.Argv)
	} else {
		addVM(t, n, vmid, f)
	}
	q := qmptest.NewQEMU(t, vmtest.Recorded(f.Replies))
	q.Greeting = greeting
	if err := os.Symlink(q.Sock(), n.Paths.QMPSocket(vmid)); err != nil {
		t.Fatal(err)
	}
	pid := vmtest.Pid
	if vmid != n.VMID {
		pid = vmtest.Pid + vmid
	}
	for tid, files := range f.Threads {
		if tid == strconv.Itoa(f.Pid) {
			tid = strconv.Itoa(pid) // the main thread's id is the process id
		}
		for name, text := range files {
			p := filepath.Join(n.Paths.ProcPid(pid), "task", tid, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			n.Write(t, p, text)
		}
	}
	lvs := &fakerun.Runner{}
	if f.LVS != "" {
		lvs.Out = map[string]string{"lvs": f.LVS}
	}
	return replayed{n: n, q: q, lvs: lvs}
}

// addVM adds another running VM to a vmtest tree, with its own pid.
func addVM(t *testing.T, n *vmtest.Node, vmid int, f fixture) {
	t.Helper()
	pid := vmtest.Pid + vmid
	conf := strings.ReplaceAll(f.Conf, "vm-370-", fmt.Sprintf("vm-%d-", vmid))
	n.Write(t, n.Paths.VMConfig(vmid), conf)
	argv := strings.Join(f.Argv, "\x00")
	argv = strings.ReplaceAll(argv, "qemu-server/370.", fmt.Sprintf("qemu-server/%d.", vmid))
	argv = strings.ReplaceAll(argv, "vm-370-", fmt.Sprintf("vm-%d-", vmid))
	if err := os.MkdirAll(n.Paths.ProcPid(pid), 0o755); err != nil {
		t.Fatal(err)
	}
	n.Write(t, filepath.Join(n.Paths.ProcPid(pid), "cmdline"), argv+"\x00")
	n.Write(t, n.Paths.PidFile(vmid), strconv.Itoa(pid)+"\n")
}

func (r replayed) node() node.Node { return r.lvs.Node(node.New(r.n.Paths, 2*time.Second)) }

func (r replayed) collect(t *testing.T) *Snapshot {
	t.Helper()
	return Collect(context.Background(), r.node(), Options{})
}
