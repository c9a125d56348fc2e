package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/internal/heaptest"
)

// A node tree with etc/pve/qemu-server linked as pmxcfs links it, and
// outside it a FIFO and a secret.
func readTree(t *testing.T) (n Node, outside string) {
	t.Helper()
	root, outside := t.TempDir(), t.TempDir()
	for _, d := range []string{"etc/pve/nodes/pve1/qemu-server", "proc/4242", "var/run/qemu-server"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("nodes/pve1/qemu-server", filepath.Join(root, "etc/pve/qemu-server")); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"etc/pve/nodes/pve1/qemu-server/100.conf": "memory: 512\n", "etc/pve/storage.cfg": "dir: local\n",
		"etc/shadow": "root:$y$secret:19000::::::\n", "proc/4242/cmdline": "kvm\x00-id\x00100\x00", "var/run/qemu-server/100.pid": "4242\n"}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "shadow"), []byte("root:$y$secret:19000::::::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(root, "etc/pve/fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return New(NewPaths(root, "", ""), 2*time.Second), outside
}

func link(t *testing.T, target, name string) {
	t.Helper()
	os.Remove(name)
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

// What ReadFile reads and what it refuses, each refusal one message naming
// the file, exit 2, returned at once (nothing opened blocks).
func TestReadFile(t *testing.T) {
	n, outside := readTree(t)
	p := n.Paths
	ctx := context.Background()
	for path, want := range map[string]string{p.VMConfig(100): "memory: 512\n", p.StorageCfg(): "dir: local\n",
		filepath.Join(p.ProcPid(4242), "cmdline"): "kvm\x00-id\x00100\x00", p.PidFile(100): "4242\n"} {
		if b, err := n.ReadFile(ctx, path); err != nil || string(b) != want {
			t.Errorf("%s: %q, %v", path, b, err)
		}
	}
	if _, err := n.ReadFile(ctx, p.VMConfig(101)); !errors.Is(err, os.ErrNotExist) || errors.Is(err, ErrBadFile) {
		t.Errorf("missing: %v", err)
	}
	cfg := p.VMConfig(102)
	for _, c := range []struct {
		target, why string
	}{
		{filepath.Join(p.Root, "etc/pve/fifo"), "is a FIFO, not a regular file"},
		{"/dev/zero", "outside " + p.Root},
		{filepath.Join(outside, "shadow"), "outside " + p.Root},
		{"../../../../shadow", "outside " + p.Join("/etc/pve")}, // below --root, yet not in /etc/pve
		{"../../../../..", "outside"},
		{"100.conf", ""}, // another config: inside /etc/pve
	} {
		link(t, c.target, cfg)
		t0 := time.Now()
		b, err := n.ReadFile(ctx, cfg)
		if c.why == "" {
			if err != nil || string(b) != "memory: 512\n" {
				t.Errorf("-> %s: %q, %v", c.target, b, err)
			}
			continue
		}
		if !errors.Is(err, ErrBadFile) || exitcode.Of(err) != exitcode.Usage || !strings.HasPrefix(err.Error(), cfg+": ") ||
			!strings.Contains(err.Error(), c.why) || strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "\n") || b != nil {
			t.Errorf("-> %s: %q, %v", c.target, b, err)
		}
		if d := time.Since(t0); d > 10*time.Second {
			t.Errorf("-> %s: took %s", c.target, d)
		}
	}
	rootN := New(NewPaths("/", "", ""), time.Second)
	// /dev/zero named where a device is allowed by tree (--root /): still
	// not a regular file, refused before it is opened.
	if _, err := rootN.ReadFile(ctx, "/dev/zero"); !errors.Is(err, ErrBadFile) || !strings.Contains(err.Error(), "/dev/zero: is a character device, not a regular file") {
		t.Errorf("/dev/zero: %v", err)
	}
	// A directory.
	if _, err := n.ReadFile(ctx, p.QemuServerDir()); !errors.Is(err, ErrBadFile) || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: %v", err)
	}
}

// The size bound, at its edge, with a clear message; memory stays bounded
// by it (a /dev/zero or a huge file is never read whole).
func TestReadFileBound(t *testing.T) {
	n, _ := readTree(t)
	big := filepath.Join(n.Paths.Root, "big")
	if err := os.WriteFile(big, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{MaxFileBytes, MaxFileBytes + 1, 1 << 30} {
		if err := os.Truncate(big, size); err != nil {
			t.Fatal(err)
		}
		var b []byte
		var err error
		peak := heaptest.Peak(func() { b, err = n.ReadFile(context.Background(), big) })
		if size == MaxFileBytes && (err != nil || len(b) != MaxFileBytes) {
			t.Errorf("%d bytes: %d, %v", size, len(b), err)
		}
		if size > MaxFileBytes && (!errors.Is(err, ErrBadFile) || exitcode.Of(err) != exitcode.Usage || err.Error() != big+": is larger than 16 MiB: not a file of a Proxmox VE node") {
			t.Errorf("%d bytes: %v", size, err)
		}
		t.Logf("%d bytes: peak heap %.1f MiB", size, float64(peak)/(1<<20))
		if peak > 4*MaxFileBytes {
			t.Errorf("%d bytes: peak heap %d bytes", size, peak)
		}
	}
}

// stallOpens makes every open block until the test ends (a read that never
// returns, which no regular file on a test machine does). At the end the
// opens are let go and waited for before openFile is put back, so the
// reads the test gave up on do not race the restore.
func stallOpens(t *testing.T) {
	release := make(chan struct{})
	var opens sync.WaitGroup
	orig := openFile
	openFile = func(path string) (*os.File, error) {
		opens.Add(1)
		defer opens.Done()
		<-release
		return orig(path)
	}
	t.Cleanup(func() {
		close(release)
		opens.Wait()
		openFile = orig
	})
}

// A read that blocks (pmxcfs without quorum, a hung NFS) is given up after
// the node's timeout, exit 3 naming the file; a cancelled context (SIGINT,
// SIGTERM) ends it at once.
func TestReadFileStalls(t *testing.T) {
	n, _ := readTree(t)
	stallOpens(t)
	n.Timeout = 50 * time.Millisecond
	t0 := time.Now()
	_, err := n.ReadFile(context.Background(), n.Paths.StorageCfg())
	if !errors.Is(err, ErrFileTimeout) || exitcode.Of(err) != exitcode.Unreachable || err.Error() != n.Paths.StorageCfg()+": no answer within 50ms (raise --timeout if the node is just slow)" {
		t.Errorf("stall: %v", err)
	}
	n.Timeout = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := n.ReadFile(ctx, n.Paths.StorageCfg()); !errors.Is(err, context.Canceled) || exitcode.Of(err) != exitcode.Unreachable {
		t.Errorf("cancel: %v", err)
	}
	if d := time.Since(t0); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
}

// ReadSmall: a real procfs counter file read in place; the same refusals
// as ReadFile whether the file is on procfs or in a fixture tree (a FIFO,
// a link from the fixture tree to the real /proc, a file as large as the
// buffer), each exit 2 and at once; a fixture tree's regular file read
// through ReadFile.
func TestReadSmall(t *testing.T) {
	ctx := context.Background()
	buf := make([]byte, 2048)
	self := filepath.Join("/proc", strconv.Itoa(os.Getpid()), "task", strconv.Itoa(os.Getpid()), "stat")
	real := New(NewPaths("/", "/proc", ""), time.Second)
	if m, err := real.ReadSmall(ctx, self, buf); err != nil || !strings.HasPrefix(string(buf[:m]), strconv.Itoa(os.Getpid())+" (") || !strings.HasSuffix(string(buf[:m]), "\n") {
		t.Errorf("%s: %q, %v", self, buf[:m], err)
	}
	if m, err := real.ReadSmall(ctx, self, buf[:16]); !errors.Is(err, ErrBadFile) || exitcode.Of(err) != exitcode.Usage || err.Error() != self+": holds 16 bytes or more: not the counter file it should be" || m != 0 {
		t.Errorf("16-byte buffer: %d, %v", m, err)
	}
	if _, err := real.ReadSmall(ctx, "/proc/self/task/0/stat", buf); !errors.Is(err, os.ErrNotExist) || errors.Is(err, ErrBadFile) {
		t.Errorf("missing: %v", err)
	}
	if _, err := real.ReadSmall(ctx, "/proc/self/cwd", buf); !errors.Is(err, ErrBadFile) {
		t.Errorf("cwd: %v", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := real.ReadSmall(cancelled, self, buf); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}

	n, _ := readTree(t)
	dir := filepath.Join(n.Paths.ProcPid(4242), "task/4242")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "schedstat"), []byte("1 2 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if m, err := n.ReadSmall(ctx, filepath.Join(dir, "schedstat"), buf); err != nil || string(buf[:m]) != "1 2 3\n" {
		t.Errorf("fixture: %q, %v", buf[:m], err)
	}
	if m, err := n.ReadSmall(ctx, filepath.Join(dir, "schedstat"), buf[:6]); !errors.Is(err, ErrBadFile) || m != 0 {
		t.Errorf("fixture, 6-byte buffer: %d, %v", m, err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "stat"), 0o644); err != nil {
		t.Fatal(err)
	}
	link(t, self, filepath.Join(dir, "io"))
	for f, why := range map[string]string{"stat": "is a FIFO, not a regular file", "io": "leads to /proc/" + strconv.Itoa(os.Getpid()) + "/task/"} {
		t0 := time.Now()
		if m, err := n.ReadSmall(ctx, filepath.Join(dir, f), buf); !errors.Is(err, ErrBadFile) || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), "outside "+n.Paths.Proc) && f == "io" || m != 0 {
			t.Errorf("%s: %d, %v", f, m, err)
		}
		if d := time.Since(t0); d > 10*time.Second {
			t.Errorf("%s: took %s", f, d)
		}
	}
}

// ProcDir: the real /proc/PID/task read beneath its descriptor; what
// openat2 will not open beneath it (a symlink: /proc/self) read through
// ReadSmall, which follows it inside /proc; a fixture tree's directory
// read file by file through ReadSmall, its FIFO and its link to the real
// /proc refused.
func TestProcDir(t *testing.T) {
	ctx := context.Background()
	buf := make([]byte, 2048)
	pid := strconv.Itoa(os.Getpid())
	real := New(NewPaths("/", "/proc", ""), time.Second)
	d := real.OpenProcDir("/proc/" + pid + "/task")
	defer d.Close()
	if d.fd < 0 {
		t.Fatal("/proc/PID/task not opened")
	}
	if m, err := d.ReadSmall(ctx, pid+"/stat", buf); err != nil || !strings.HasPrefix(string(buf[:m]), pid+" (") {
		t.Errorf("stat: %q, %v", buf[:m], err)
	}
	if m, err := d.ReadSmall(ctx, pid+"/stat", buf[:16]); !errors.Is(err, ErrBadFile) || m != 0 {
		t.Errorf("16-byte buffer: %d, %v", m, err)
	}
	if _, err := d.ReadSmall(ctx, "0/stat", buf); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	if _, err := d.ReadSmall(ctx, pid, buf); !errors.Is(err, ErrBadFile) || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("directory: %v", err)
	}
	procd := real.OpenProcDir("/proc")
	defer procd.Close()
	if m, err := procd.ReadSmall(ctx, "self/stat", buf); err != nil || !strings.HasPrefix(string(buf[:m]), pid+" (") {
		t.Errorf("self/stat: %q, %v", buf[:m], err)
	}

	n, _ := readTree(t)
	dir := filepath.Join(n.Paths.ProcPid(4242), "task")
	if err := os.MkdirAll(filepath.Join(dir, "4242"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "4242/stat"), 0o644); err != nil {
		t.Fatal(err)
	}
	link(t, "/proc/"+pid+"/stat", filepath.Join(dir, "4242/io"))
	fd := n.OpenProcDir(dir)
	defer fd.Close()
	if fd.fd >= 0 {
		t.Errorf("%s: a fixture directory kept open", dir)
	}
	for f, why := range map[string]string{"4242/stat": "is a FIFO", "4242/io": "outside " + n.Paths.Proc} {
		if m, err := fd.ReadSmall(ctx, f, buf); !errors.Is(err, ErrBadFile) || !strings.Contains(err.Error(), why) || m != 0 {
			t.Errorf("%s: %d, %v", f, m, err)
		}
	}
}

// OpenCgroupDir: a real cgroupfs directory is held open (this process's
// own cgroup, where the machine has one to read); procfs is not cgroupfs,
// and a fixture directory is read through ReadSmall with its refusals.
func TestCgroupDir(t *testing.T) {
	ctx := context.Background()
	buf := make([]byte, 64<<10)
	real := New(NewPaths("/", "", ""), time.Second)
	found := false
	for _, dir := range []string{"/sys/fs/cgroup", "/sys/fs/cgroup/unified", "/sys/fs/cgroup/memory"} {
		d := real.OpenCgroupDir(dir)
		if d.fd < 0 {
			d.Close()
			continue
		}
		found = true
		if m, err := d.ReadSmall(ctx, "cgroup.procs", buf); err != nil || m == 0 {
			t.Errorf("%s/cgroup.procs: %d, %v", dir, m, err)
		}
		d.Close()
	}
	if !found {
		t.Log("no cgroupfs here: only the fixture half runs")
	}
	if p := real.OpenCgroupDir("/proc"); p.fd >= 0 {
		p.Close()
		t.Error("procfs held open as a cgroup directory")
	}
	n, _ := readTree(t)
	dir := filepath.Join(n.Paths.Sys, "fs/cgroup/qemu.slice/100.scope")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "memory.stat"), []byte("file_dirty 4096\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "io.pressure"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := n.OpenCgroupDir(dir)
	defer d.Close()
	if d.fd >= 0 {
		t.Errorf("%s: a fixture directory kept open", dir)
	}
	if m, err := d.ReadSmall(ctx, "memory.stat", buf); err != nil || string(buf[:m]) != "file_dirty 4096\n" {
		t.Errorf("memory.stat: %q, %v", buf[:m], err)
	}
	if m, err := d.ReadSmall(ctx, "io.pressure", buf); !errors.Is(err, ErrBadFile) || !strings.Contains(err.Error(), "is a FIFO") || m != 0 {
		t.Errorf("FIFO: %d, %v", m, err)
	}
}

// ReadInput: a file the admin names is read wherever it is (not held to
// the tree below --root), a regular file only, at most max bytes at the
// edge, within the timeout.
func TestReadInputPolicy(t *testing.T) {
	n, _ := readTree(t)
	ctx := context.Background()
	outside := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(outside, []byte("12345678"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, err := n.ReadInput(ctx, outside, 8); err != nil || string(b) != "12345678" {
		t.Errorf("outside the root, at the bound: %q %v", b, err)
	}
	// ReadFile refuses the same file: it is not the node's.
	if _, err := n.ReadFile(ctx, outside); !errors.Is(err, ErrBadFile) {
		t.Errorf("ReadFile of a file outside the root: %v", err)
	}
	if _, err := n.ReadInput(ctx, outside, 7); !errors.Is(err, ErrBadFile) || exitcode.Of(err) != exitcode.Usage || err.Error() != outside+": is larger than 7 bytes: not the file the option takes" {
		t.Errorf("one byte over: %v", err)
	}
	if _, err := n.ReadInput(ctx, outside, 1<<10); err != nil {
		t.Errorf("%v", err)
	}
	big := filepath.Join(t.TempDir(), "big")
	os.WriteFile(big, make([]byte, 64<<10+1), 0o644)
	if _, err := n.ReadInput(ctx, big, 64<<10); err == nil || err.Error() != big+": is larger than 64 KiB: not the file the option takes" {
		t.Errorf("64 KiB + 1: %v", err)
	}
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, "/dev/zero", t.TempDir()} {
		if _, err := n.ReadInput(ctx, p, 1<<10); !errors.Is(err, ErrBadFile) || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("%s: %v", p, err)
		}
	}
	if _, err := n.ReadInput(ctx, filepath.Join(t.TempDir(), "absent"), 1<<10); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("absent: %v", err)
	}
	stallOpens(t)
	n.Timeout = 50 * time.Millisecond
	if _, err := n.ReadInput(ctx, outside, 1<<10); !errors.Is(err, ErrFileTimeout) {
		t.Errorf("stall: %v", err)
	}
}

// ReadInput (bench --jobs FILE): a file of this machine as given, with
// ReadFile's refusals, each exit 2 at once: /dev/zero (it streamed 360
// MB/s into memory), a FIFO (it hung), a directory, a file over the bound;
// a relative path and one outside --root are read; a missing one is
// os.ErrNotExist.
func TestReadInput(t *testing.T) {
	n, outside := readTree(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	job := filepath.Join(outside, "my.fio")
	if err := os.WriteFile(job, []byte("[a]\nrw=read\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, make([]byte, 1025), 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	for _, c := range []struct{ path, want string }{
		{"/dev/zero", "/dev/zero: is a character device, not a regular file"},
		{fifo, fifo + ": is a FIFO, not a regular file"},
		{dir, dir + ": is a directory, not a regular file"},
		{big, big + ": is larger than 1 KiB: not the file the option takes"},
	} {
		b, err := n.ReadInput(context.Background(), c.path, 1024)
		if b != nil || !errors.Is(err, ErrBadFile) || exitcode.Of(err) != exitcode.Usage || err.Error() != c.want {
			t.Errorf("%s: %d bytes, %v", c.path, len(b), err)
		}
	}
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("refusals took %s", d)
	}
	if b, err := n.ReadInput(context.Background(), job, 1024); err != nil || string(b) != "[a]\nrw=read\n" {
		t.Errorf("outside --root: %q %v", b, err)
	}
	t.Chdir(outside)
	if b, err := n.ReadInput(context.Background(), "my.fio", 1024); err != nil || len(b) != 12 {
		t.Errorf("relative: %q %v", b, err)
	}
	if _, err := n.ReadInput(context.Background(), "nosuch.fio", 1024); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
}
