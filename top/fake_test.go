package top

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/threads"
)

// rec is one recording of top/testdata (see testdata/README.md).
type rec struct {
	dir, tdir string // top/testdata/lab370-<gen>, threads/testdata/lab370-<gen>
	gen       string
	pid       int
}

func recording(t testing.TB, gen string) rec {
	t.Helper()
	r := rec{dir: filepath.Join("testdata", "lab370-"+gen), tdir: filepath.Join("..", "threads", "testdata", "lab370-"+gen), gen: gen}
	r.pid, _ = strconv.Atoi(strings.TrimSpace(string(r.read(t, "pid"))))
	return r
}

func (r rec) read(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (r rec) json(t testing.TB, name string) gjson.Result { return gjson.ParseBytes(r.read(t, name)) }

// devices maps disk ids to the node block devices recorded below them.
func (r rec) devices(t testing.TB) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(r.read(t, "devices.txt"))), "\n") {
		f := strings.Fields(l)
		out[f[0]] = f[1]
	}
	return out
}

// snapshot builds side "a" or "b" of the recording as sampleVM would have.
func (r rec) snapshot(t testing.TB, side string, limits map[string]qemuserver.Limits, tids []int) *snapshot {
	t.Helper()
	times := r.json(t, "times-"+side+".json")
	s := &snapshot{Stats: map[string]qmp.BlockStats{}, Jobs: map[string][]string{}, Limits: limits, Devices: map[string]sampler.BlockStat{},
		At:        time.Unix(0, times.Get("blockstats_ns").Int()),
		ThreadsAt: time.Unix(0, times.Get("threads_ns").Int()),
		DevicesAt: time.Unix(0, times.Get("devices_ns").Int())}
	for _, b := range qmp.ParseBlockstats(r.json(t, "query-blockstats-"+side+".json")) {
		s.Stats[b.ID] = b
	}
	tr, err := threads.NewReader(node.New(node.NewPaths("/", filepath.Join(r.tdir, "proc-"+side), ""), 0))
	if err != nil {
		t.Fatal(err)
	}
	s.Threads = tr.Read(r.pid, tids)
	host := sampler.Host{Sys: filepath.Join(r.dir, "sys-"+side)}
	for id, dev := range r.devices(t) {
		bs, err := host.BlockStatOf(dev)
		if err != nil {
			t.Fatal(err)
		}
		s.Devices[id] = bs
	}
	return s
}

// fakeNode is a node root for Monitor tests without QEMU or root: VM
// configs, pid files, a procfs tree with each VM's recorded command line
// and thread counters, and fake QMP sockets answering with the recorded
// replies.
type fakeNode struct {
	t     testing.TB
	root  string
	paths node.Paths
	vms   map[int]*fakeVM
}

func newFakeNode(t testing.TB) *fakeNode {
	root := t.TempDir()
	n := &fakeNode{t: t, root: root, paths: node.NewPaths(root, filepath.Join(root, "proc"), filepath.Join(root, "sys")), vms: map[int]*fakeVM{}}
	for _, d := range []string{"etc/pve/qemu-server", "var/run/qemu-server", "proc", "sys"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.write("etc/pve/storage.cfg", "dir: local\n\tpath /var/lib/vz\n\tcontent images\n\nlvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n\tcontent images\n")
	return n
}

func (n *fakeNode) write(rel, text string) {
	n.t.Helper()
	p := filepath.Join(n.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		n.t.Fatal(err)
	}
}

func (n *fakeNode) node() node.Node { return node.New(n.paths, 2*time.Second) }

// fakeVM is one VM of the fake node.
type fakeVM struct {
	n      *fakeNode
	vmid   int
	pid    int
	q      *qmptest.QEMU
	mu     sync.Mutex
	reply  map[string][]string // command -> replies in turn, the last one repeating
	served map[string]int
	argv   []byte
}

// handle answers with the next reply for the command.
func (v *fakeVM) handle(cmd string, _ gjson.Result) string {
	v.mu.Lock()
	defer v.mu.Unlock()
	rs, ok := v.reply[cmd]
	if !ok {
		return qmptest.NotFound(cmd)
	}
	i := min(v.served[cmd], len(rs)-1)
	v.served[cmd]++
	if strings.HasPrefix(rs[i], `{"error"`) {
		return rs[i]
	}
	return qmptest.Return(rs[i])
}

func (v *fakeVM) set(cmd string, replies ...string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.reply[cmd] = replies
	v.served[cmd] = 0
}

// start makes the VM run: process (its command line) and pid file.
func (v *fakeVM) start() {
	v.n.write(fmt.Sprintf("proc/%d/cmdline", v.pid), string(v.argv))
	v.n.write(fmt.Sprintf("var/run/qemu-server/%d.pid", v.vmid), strconv.Itoa(v.pid)+"\n")
}

// stop makes the VM gone: no pid file, no process.
func (v *fakeVM) stop() {
	os.Remove(v.n.paths.PidFile(v.vmid))
	os.RemoveAll(v.n.paths.ProcPid(v.pid))
}

// proc copies side "a" or "b" of a procfs tree as the VM's thread counters.
func (v *fakeVM) proc(tree string) {
	v.n.t.Helper()
	// A copy, not a link: the tool reads no procfs file through a
	// symlink that leaves --proc.
	dst := filepath.Join(v.n.paths.ProcPid(v.pid), "task")
	if err := os.RemoveAll(dst); err != nil {
		v.n.t.Fatal(err)
	}
	if err := os.CopyFS(dst, os.DirFS(filepath.Join(tree, strconv.Itoa(v.pid), "task"))); err != nil {
		v.n.t.Fatal(err)
	}
}

// addVM adds a VM with config text and the command line argv, answering
// QMP with greeting; its thread counters come from tree side a.
func (n *fakeNode) addVM(vmid, pid int, config string, argv []byte, greeting string) *fakeVM {
	n.t.Helper()
	v := &fakeVM{n: n, vmid: vmid, pid: pid, argv: argv, reply: map[string][]string{}, served: map[string]int{}}
	v.q = qmptest.NewQEMU(n.t, v.handle)
	v.q.Greeting = greeting
	n.write(fmt.Sprintf("etc/pve/qemu-server/%d.conf", vmid), config)
	if err := os.Symlink(v.q.Sock(), n.paths.QMPSocket(vmid)); err != nil {
		n.t.Fatal(err)
	}
	n.vms[vmid] = v
	return v
}

// addRecorded adds VM 370 as recorded on generation r.gen.
func (n *fakeNode) addRecorded(r rec, vmid int) *fakeVM {
	n.t.Helper()
	argv := strings.ReplaceAll(string(r.read(n.t, "cmdline")), "/ROOT/var/run/qemu-server/370.", fmt.Sprintf("/ROOT/var/run/qemu-server/%d.", vmid))
	v := n.addVM(vmid, r.pid, fakenode.Lab370Config, []byte(argv), qmptest.Greeting72)
	v.set("query-blockstats", string(r.read(n.t, "query-blockstats-a.json")), string(r.read(n.t, "query-blockstats-b.json")))
	v.set("query-block-jobs", "[]")
	v.set("query-block", string(r.read(n.t, "query-block.json")))
	v.set("query-iothreads", string(r.read(n.t, "query-iothreads.json")))
	v.set("query-cpus-fast", string(r.read(n.t, "query-cpus-fast.json")))
	if r.gen == "blockdev" {
		v.set("qom-get", string(r.read(n.t, "qom-get-throttle-drive-scsi1-limits.json")))
	}
	v.start()
	v.proc(filepath.Join(r.tdir, "proc-a"))
	return v
}

// monitor is a Monitor on the fake node.
func (n *fakeNode) monitor(o Options) *Monitor {
	n.t.Helper()
	if o.Interval == 0 {
		o.Interval = 400 * time.Millisecond
	}
	m, err := NewMonitor(n.node(), o)
	if err != nil {
		n.t.Fatal(err)
	}
	n.t.Cleanup(m.Close)
	return m
}

func vmRow(t testing.TB, s Sample, vmid int) VM {
	t.Helper()
	for _, v := range s.VMs {
		if v.VMID == vmid {
			return v
		}
	}
	t.Fatalf("VM %d not in the sample: %+v", vmid, s.VMs)
	return VM{}
}

func diskRows(s Sample, vmid int) map[string]Disk {
	out := map[string]Disk{}
	for _, d := range s.Disks {
		if d.VMID == vmid {
			out[d.Disk] = d
		}
	}
	return out
}
