// Package vmtest lays out a node tree with one "running" VM for unit tests
// that need neither root nor QEMU: the VM's config and storage.cfg, its pid
// file, /proc/PID/cmdline holding a recorded (or generated) QEMU command
// line, /proc/PID/io and /proc/meminfo, and a QMP socket served by a
// qmptest fake (recorded replies, or a handler of the test's own).
package vmtest

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// Pid is the process id the fake QEMU "runs" as.
const Pid = 4242

// Node is a node tree below Root (short: unix socket paths stay under 108
// bytes), removed at cleanup.
type Node struct {
	Root  string
	Paths node.Paths
	VMID  int
}

// New writes the tree. argv nil leaves the VM stopped.
func New(t testing.TB, vmid int, conf, storageCfg string, argv []string) *Node {
	t.Helper()
	root, err := os.MkdirTemp("", "vmtest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	n := &Node{Root: root, Paths: node.NewPaths(root, filepath.Join(root, "proc"), filepath.Join(root, "sys")), VMID: vmid}
	for _, d := range []string{"etc/pve/qemu-server", "var/run/qemu-server", "proc/4242"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n.Write(t, n.Paths.StorageCfg(), storageCfg)
	n.Write(t, n.Paths.VMConfig(vmid), conf)
	n.Write(t, filepath.Join(root, "proc/meminfo"), "MemTotal: 1000 kB\nDirty: 2048 kB\nWriteback: 0 kB\n")
	n.SetWriteBytes(t, 0)
	if argv != nil {
		n.Write(t, filepath.Join(root, "proc/4242/cmdline"), strings.Join(argv, "\x00")+"\x00")
		n.Write(t, n.Paths.PidFile(vmid), "4242\n")
	}
	return n
}

// Write writes a file of the tree.
func (n *Node) Write(t testing.TB, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// SetWriteBytes sets /proc/PID/io write_bytes.
func (n *Node) SetWriteBytes(t testing.TB, b int64) {
	t.Helper()
	n.Write(t, filepath.Join(n.Root, "proc/4242/io"), "rchar: 0\nwchar: 0\nsyscr: 0\nsyscw: 0\nread_bytes: 0\nwrite_bytes: "+itoa(b)+"\ncancelled_write_bytes: 0\n")
}

func itoa(b int64) string { j, _ := json.Marshal(b); return string(j) }

// Serve makes q the VM's QMP socket.
func (n *Node) Serve(t testing.TB, q *qmptest.QEMU) {
	t.Helper()
	if err := os.Symlink(q.Sock(), n.Paths.QMPSocket(n.VMID)); err != nil {
		t.Fatal(err)
	}
}

// Load loads the VM.
func (n *Node) Load(t testing.TB) *vm.VM {
	t.Helper()
	v, err := vm.Load(context.Background(), node.New(n.Paths, 0), n.VMID)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Key is how a recorded reply is found: the command, then its arguments as
// canonical JSON (sorted keys) when it has any.
func Key(cmd string, args map[string]any) string {
	if len(args) == 0 {
		return cmd
	}
	b, _ := json.Marshal(args)
	return cmd + " " + string(b)
}

// Recorded answers each command from replies (Key -> the "return" value);
// a command that was not recorded gets QEMU's CommandNotFound, as from a
// QEMU without it.
func Recorded(replies map[string]json.RawMessage) func(cmd string, args gjson.Result) string {
	return func(cmd string, args gjson.Result) string {
		var m map[string]any
		if args.Exists() {
			_ = json.Unmarshal([]byte(args.Raw), &m)
		}
		if r, ok := replies[Key(cmd, m)]; ok {
			// One line: QMP replies are newline-delimited.
			var b bytes.Buffer
			if err := json.Compact(&b, r); err == nil {
				return qmptest.Return(b.String())
			}
			return qmptest.Return(string(r))
		}
		return qmptest.NotFound(cmd)
	}
}

// Fixture is one recorded running VM: what a real node had and what its
// QEMU answered (see the fixture directory's README for how it was made).
type Fixture struct {
	VMID       int                        `json:"vmid"`
	QEMU       string                     `json:"qemu"`
	Conf       string                     `json:"conf"`
	StorageCfg string                     `json:"storage_cfg"`
	Argv       []string                   `json:"argv"`
	Replies    map[string]json.RawMessage `json:"qmp"`
}

// LoadFixture reads a recorded fixture.
func LoadFixture(t testing.TB, path string) Fixture {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f Fixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// Start lays out a fixture's node with its QEMU answering from the
// recording, and loads the VM.
func (f Fixture) Start(t testing.TB) (*Node, *vm.VM) {
	t.Helper()
	n := New(t, f.VMID, f.Conf, f.StorageCfg, f.Argv)
	n.Serve(t, qmptest.NewQEMU(t, Recorded(f.Replies)))
	return n, n.Load(t)
}
