package sampler

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/node"
)

// cgroupNode is a node whose --proc and --sys are a fixture tree of
// testdata/cgroup (README.md there says where each file came from).
func cgroupNode(t *testing.T, tree string) node.Node {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("testdata", "cgroup", tree))
	if err != nil {
		t.Fatal(err)
	}
	return node.New(node.NewPaths(root, "", ""), 0)
}

func TestCgroupV2ProxmoxScope(t *testing.T) {
	n := cgroupNode(t, "v2")
	d := FindCgroup(context.Background(), n, 370, 5151)
	if d.Unmeasured != "" || d.Version != 2 || d.Cgroup != "/qemu.slice/370.scope" || d.From != "/proc/PID/cgroup" {
		t.Fatalf("dir = %+v", d)
	}
	if d.Memory != d.IO || !strings.HasSuffix(d.Memory, "/sys/fs/cgroup/qemu.slice/370.scope") {
		t.Fatalf("memory %q io %q", d.Memory, d.IO)
	}
	c := ReadCgroup(context.Background(), n, d, true)
	if !c.Measured() || c.DirtyBytes != 432013312 || c.WritebackBytes != 8388608 || c.UnflushedBytes() != 440401920 {
		t.Fatalf("reading = %+v", c)
	}
	want := Pressure{SomeAvg10: 1.66, FullAvg10: 0.58, SomeTotalUs: 72584591, FullTotalUs: 11651833}
	if c.IOPressure == nil || *c.IOPressure != want {
		t.Fatalf("io.pressure = %+v, want %+v", c.IOPressure, want)
	}
	if len(c.IO) != 2 || c.IO[1] != (DeviceIO{Device: "253:3", ReadBytes: 2293760, WriteBytes: 4831838208, ReadIOs: 420, WriteIOs: 9874, DiscardBytes: 1073741824, DiscardIOs: 8}) || c.IO[0].Device != "8:0" {
		t.Fatalf("io.stat = %+v", c.IO)
	}
	if len(c.Notes) != 0 {
		t.Fatalf("notes %q on a node with every file", c.Notes)
	}
}

func TestCgroupV1HybridRecorded(t *testing.T) {
	n := cgroupNode(t, "hybrid")
	d := FindCgroup(context.Background(), n, 100, 4242)
	if d.Unmeasured != "" || d.Version != 1 || d.Cgroup != "/qemu.slice/100.scope" {
		t.Fatalf("dir = %+v", d)
	}
	if !strings.HasSuffix(d.Memory, "/sys/fs/cgroup/memory/qemu.slice/100.scope") || !strings.HasSuffix(d.IO, "/sys/fs/cgroup/unified/qemu.slice/100.scope") {
		t.Fatalf("memory %q io %q", d.Memory, d.IO)
	}
	c := ReadCgroup(context.Background(), n, d, true)
	// The recorded 32 MiB write: dirty 33558528 (32 MiB and 3 pages).
	if !c.Measured() || c.DirtyBytes != 33558528 || c.WritebackBytes != 0 {
		t.Fatalf("reading = %+v", c)
	}
	if c.IOPressure == nil || c.IOPressure.SomeTotalUs != 76177 || c.IOPressure.FullTotalUs != 76177 || c.IOPressure.SomeAvg10 != 0 {
		t.Fatalf("io.pressure = %+v", c.IOPressure)
	}
	// v1 has no io.stat in the unified tree: not read, not invented.
	if c.IO != nil || len(c.Notes) != 0 {
		t.Fatalf("io %+v notes %q", c.IO, c.Notes)
	}
	b, err := os.ReadFile("testdata/cgroup/v1-memory.stat.synced")
	if err != nil {
		t.Fatal(err)
	}
	if dirty, wb, err := parseMemoryStat(string(b), 1); err != nil || dirty != 12288 || wb != 0 {
		t.Fatalf("after sync: %d %d %v", dirty, wb, err)
	}
	// v1's file read as v2's has no file_dirty: an error, not 0.
	if _, _, err := parseMemoryStat(string(b), 2); err == nil || !strings.Contains(err.Error(), "file_dirty") {
		t.Fatalf("v1 file as v2: %v", err)
	}
}

func TestCgroupNotMeasured(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, tree string
		vmid, pid  int
		want       string
	}{
		{"not running", "v2", 370, 0, "VM 370 does not run"},
		{"outside qemu.slice (v2)", "v2-noscope", 370, 5151, "runs in cgroup /user.slice/user-0.slice/session-3.scope, not in its own scope /qemu.slice/370.scope"},
		{"scope without memory.stat", "v2-noscope", 370, 5152, "runs in cgroup /qemu.slice/370.scope, which has no memory.stat below"},
		{"outside qemu.slice (hybrid)", "noscope", 100, 4242, "runs in cgroup /process_api/137d8506ac78487689fe111cb3e7900d, not in its own scope"},
		{"no /proc/PID/cgroup", "v2", 371, 999, "/proc/999/cgroup cannot be read"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := cgroupNode(t, tc.tree)
			d := FindCgroup(ctx, n, tc.vmid, tc.pid)
			if !strings.Contains(d.Unmeasured, tc.want) || d.Version != 0 || d.Memory != "" {
				t.Fatalf("dir = %+v, want unmeasured %q", d, tc.want)
			}
			c := ReadCgroup(ctx, n, d, true)
			if c.Measured() || c.DirtyBytes != 0 || c.IOPressure != nil {
				t.Fatalf("reading = %+v", c)
			}
		})
	}
	// A process found through its assumed scope when /proc/PID/cgroup is
	// gone (it exited between the pid file and the read): the scope exists.
	d := FindCgroup(ctx, cgroupNode(t, "v2"), 370, 999)
	if d.Unmeasured != "" || d.From != "assumed" || d.Version != 2 {
		t.Fatalf("assumed: %+v", d)
	}
	// The node root's io.pressure is never taken for the VM's: "0::/".
	if v2, v1 := parseProcCgroup("4:memory:/x\n0::/\n"); v2 != "/" || v1 != "/x" {
		t.Fatalf("parse: %q %q", v2, v1)
	}
	d = FindCgroup(ctx, cgroupNode(t, "noscope"), 100, 4242)
	if d.IO != "" {
		t.Fatalf("the unified root taken as the VM's: %+v", d)
	}
}

func TestCgroupParsersRefuse(t *testing.T) {
	for _, s := range []string{"file_dirty x\nfile_writeback 0\n", "file_dirty -1\nfile_writeback 0\n", "file_dirty 1\n", ""} {
		if _, _, err := parseMemoryStat(s, 2); err == nil {
			t.Errorf("memory.stat %q: no error", s)
		}
	}
	for _, s := range []string{"", "some avg10=x total=1\n", "some avg60=1.0\n", "full avg10=1 total=y\n"} {
		if _, err := parsePressure(s); err == nil {
			t.Errorf("io.pressure %q: no error", s)
		}
	}
	if _, err := parseIOStat("8:0 rbytes=x\n"); err == nil {
		t.Error("io.stat with a bad number: no error")
	}
	// Only "some" (kernels before 5.13 had no full for cpu; io always has
	// both, but a some-only file still reads).
	if p, err := parsePressure("some avg10=1.50 avg60=0 avg300=0 total=9\n"); err != nil || p.SomeAvg10 != 1.5 || p.SomeTotalUs != 9 || p.FullTotalUs != 0 {
		t.Fatalf("some only: %+v %v", p, err)
	}
}

// BenchmarkCgroupRead is one sample's cost per VM: memory.stat, io.pressure
// and io.stat read through node.ReadFile and parsed. On the real node
// (-bench with PVEDISKCHECK_CGROUP_BENCH=/sys/fs/cgroup/memory/...) the
// kernel builds the files; here the recorded v2 tree.
func BenchmarkCgroupRead(b *testing.B) {
	ctx := context.Background()
	root, _ := filepath.Abs("testdata/cgroup/v2")
	n := node.New(node.NewPaths(root, "", ""), 0)
	d := FindCgroup(ctx, n, 370, 5151)
	if d.Unmeasured != "" {
		b.Fatal(d.Unmeasured)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if c := ReadCgroup(ctx, n, d, true); !c.Measured() {
			b.Fatal(c.Unmeasured)
		}
	}
}

// BenchmarkCgroupReadNode is the same read from the kernel's cgroupfs: a
// cgroup made for it in the node's v1 memory hierarchy and unified tree
// (this machine's layout) or in a v2 node's /sys/fs/cgroup, with this
// process's page cache in it. Skipped where none can be made (not root,
// no cgroupfs).
func BenchmarkCgroupReadNode(b *testing.B) {
	ctx := context.Background()
	n := node.New(node.NewPaths("/", "", ""), 0)
	scope := "/pdc-bench.slice/" + strconv.Itoa(os.Getpid()) + ".scope"
	var d CgroupDir
	for _, try := range []struct {
		version    int
		memory, io string
	}{
		{2, "/sys/fs/cgroup" + scope, "/sys/fs/cgroup" + scope},
		{1, "/sys/fs/cgroup/memory" + scope, "/sys/fs/cgroup/unified" + scope},
	} {
		if os.MkdirAll(try.memory, 0o755) != nil {
			continue
		}
		b.Cleanup(func() { _ = os.Remove(try.memory); _ = os.Remove(filepath.Dir(try.memory)) })
		if _, err := os.Stat(try.memory + "/memory.stat"); err != nil {
			continue
		}
		if try.io != try.memory && os.MkdirAll(try.io, 0o755) == nil {
			b.Cleanup(func() { _ = os.Remove(try.io); _ = os.Remove(filepath.Dir(try.io)) })
		}
		d = CgroupDir{Version: try.version, Cgroup: scope, Memory: try.memory, IO: try.io}
		break
	}
	if d.Memory == "" {
		b.Skip("no cgroup can be made here (needs root and a writable cgroupfs with a memory controller)")
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime()
	for i := 0; i < b.N; i++ {
		if c := ReadCgroup(ctx, n, d, true); !c.Measured() || (d.IO != "" && c.IOPressure == nil) {
			b.Fatalf("%+v", c)
		}
	}
	// On a loaded node the wall time per read is mostly waiting for a
	// core; the CPU time is what each VM's read costs the node.
	b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N), "cpu-ns/op")
}

// cpuTime is this process's user and system CPU time, ns.
func cpuTime() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// TestCgroupQEMURecorded: the files of a real QEMU's cgroup (qemu-v1 in
// testdata/cgroup): its 32 MiB write dirty on writeback and unsafe, gone
// after a flush on writeback, kept on unsafe; the flush's wait in
// io.pressure.
func TestCgroupQEMURecorded(t *testing.T) {
	for _, tc := range []struct {
		dir       string
		dirty     int64
		someTotal int64
	}{
		{"writeback-written", 33538048, 0},
		{"writeback-flushed", 0, 17679},
		{"unsafe-written", 33538048, 0},
		{"unsafe-flushed", 33538048, 0},
	} {
		b, err := os.ReadFile(filepath.Join("testdata/cgroup/qemu-v1", tc.dir, "memory.stat"))
		if err != nil {
			t.Fatal(err)
		}
		dirty, wb, err := parseMemoryStat(string(b), 1)
		if err != nil || dirty != tc.dirty || wb != 0 {
			t.Errorf("%s: dirty %d writeback %d %v, want %d", tc.dir, dirty, wb, err, tc.dirty)
		}
		if b, err = os.ReadFile(filepath.Join("testdata/cgroup/qemu-v1", tc.dir, "io.pressure")); err != nil {
			t.Fatal(err)
		}
		if p, err := parsePressure(string(b)); err != nil || p.SomeTotalUs != tc.someTotal {
			t.Errorf("%s: io.pressure %+v %v, want some total %d", tc.dir, p, err, tc.someTotal)
		}
	}
}

// A hostile tree: memory.stat linked out of --sys, io.pressure a FIFO.
// The first makes the reading unmeasured with the refusal, the second a
// note; nothing is read from outside the tree and nothing blocks.
func TestCgroupHostileTree(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	scope := filepath.Join(root, "sys/fs/cgroup/qemu.slice/370.scope")
	if err := os.MkdirAll(scope, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(root, "proc/5151"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "proc/5151/cgroup"), []byte("0::/qemu.slice/370.scope\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "memory.stat")
	if err := os.WriteFile(outside, []byte("file_dirty 1\nfile_writeback 2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(scope, "memory.stat")); err != nil {
		t.Fatal(err)
	}
	n := node.New(node.NewPaths(root, "", ""), 0)
	d := FindCgroup(ctx, n, 370, 5151)
	c := ReadCgroup(ctx, n, d, true)
	if c.Measured() || c.DirtyBytes != 0 || !strings.Contains(c.Unmeasured, "outside") {
		t.Fatalf("linked out of the tree: %+v", c)
	}
	if err := os.Remove(filepath.Join(scope, "memory.stat")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(scope, "memory.stat"), []byte("file_dirty 4096\nfile_writeback 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(scope, "io.pressure"), 0o644); err != nil {
		t.Fatal(err)
	}
	c = ReadCgroup(ctx, n, FindCgroup(ctx, n, 370, 5151), true)
	if !c.Measured() || c.DirtyBytes != 4096 || c.IOPressure != nil || len(c.Notes) != 2 || !strings.Contains(c.Notes[0], "FIFO") {
		t.Fatalf("FIFO io.pressure: %+v", c)
	}
}
