package stall

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/threads"
)

// The zeroes recordings (testdata/README.md) were made on amd64.
func init() { arch = "amd64" }

// zeroes is one of the zeroes recordings: QEMU's pid, the two blocked pool
// workers (scsi1's zero write, scsi2's discard) with their descriptors,
// the frozen images, and QEMU's root as the fd links show it.
type zeroes struct {
	dir              string
	pid              int
	zeroTID, discTID int
	zeroFD, discFD   int
	img1, img2       string
	idle             [3]string // each disk's idle seconds, as the evidence says them
}

var (
	zeroes72 = zeroes{dir: "testdata/zeroes-7.2", pid: 25605, zeroTID: 25664, discTID: 25665, zeroFD: 20, discFD: 21,
		img1: "/tmp/TestStallGuestZeroes524359160/002/mnt/images/100/vm-100-disk-1.raw",
		img2: "/tmp/TestStallGuestZeroes524359160/002/mnt/images/100/vm-100-disk-2.raw", idle: [3]string{"4.9", "2.6", "2.6"}}
	// QEMU 11.1.3 in the test tier's chroot: its fd links and root name
	// the chroot, the images are QEMU's /tmp/...
	zeroes111 = zeroes{dir: "testdata/zeroes-11.1", pid: 389, zeroTID: 1168, discTID: 1169, zeroFD: 24, discFD: 25,
		img1: "/tmp/TestStallGuestZeroes3204014497/002/mnt/images/100/vm-100-disk-1.raw",
		img2: "/tmp/TestStallGuestZeroes3204014497/002/mnt/images/100/vm-100-disk-2.raw", idle: [3]string{"9.1", "2.8", "2.7"}}
)

// zeroesDisks is the rule's view of the recorded VM's disks, built as
// Disks builds it: the recorded config, storage.cfg and command line (the
// paths QEMU opened), the recorded iothreads; no node device (file
// volumes).
func zeroesDisks(t testing.TB, z zeroes) []Disk {
	t.Helper()
	read := func(f string) string {
		b, err := os.ReadFile(filepath.Join(z.dir, f))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	argv := strings.Split(strings.TrimSuffix(read("cmdline"), "\x00"), "\x00")
	v := vmtest.New(t, 100, read("100.conf"), read("storage.cfg"), argv).Load(t)
	m := threads.New(z.pid, gjson.Parse(read("query-iothreads.json")), gjson.Parse(read("query-cpus-fast.json")))
	set := disk.Of(v, v.Disks)
	set.PlaceThreads(m)
	return Disks(set)
}

// zeroesNode is the recording's node, its proc tree copied with the
// procfs links the recording lists (links: "PATH<tab>TARGET", kept out of
// the repository as symlinks) made again; mutate, when set, gets the
// copied tree's proc/PID to change.
func zeroesNode(t testing.TB, z zeroes, mutate func(pid string)) (node.Node, map[string]qmp.BlockStats) {
	t.Helper()
	n, stats := recordedIn(t, z.dir)
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(n.Paths.Proc)); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(z.dir, "links"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		p, target, ok := strings.Cut(line, "\t")
		rel, inProc := strings.CutPrefix(p, "proc/")
		if !ok || !inProc {
			t.Fatalf("%s/links: %q", z.dir, line)
		}
		p = filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, p); err != nil {
			t.Fatal(err)
		}
	}
	n.Paths.Proc = dst
	if mutate != nil {
		mutate(n.Paths.ProcPid(z.pid))
	}
	return n, stats
}

// TestRecordedZeroes: the guest's zero write on scsi1 and discard on
// scsi2, both aio=io_uring disks, wait in one pool worker each, in
// fallocate on the disk's own image: each disk is stalled with its own
// worker and nothing else, the idle scsi0 is not. The same threads without
// their files (the rule before they were placed) stall neither.
func TestRecordedZeroes(t *testing.T) {
	for _, z := range []zeroes{zeroes72, zeroes111} {
		t.Run(filepath.Base(z.dir), func(t *testing.T) { recordedZeroes(t, z) })
	}
}

func recordedZeroes(t *testing.T, z zeroes) {
	disks := zeroesDisks(t, z)
	if len(disks) != 3 || disks[1].Path != z.img1 || disks[2].Path != z.img2 || disks[1].ThreadPool || disks[2].ThreadPool {
		t.Fatalf("disks %+v", disks)
	}
	n, stats := zeroesNode(t, z, nil)
	got := Detect(context.Background(), n, z.pid, disks, stats, recAfter, 0)
	want := []string{
		"qemu: no request completed for " + z.idle[0] + " s (idle_time_ns); threads: no thread serving the disk is blocked",
		fmt.Sprintf("qemu: no request completed for %s s (idle_time_ns); threads: 1 thread(s) serving the disk in state D (worker; wchan 1 in percpu_rwsem_wait); 1 in fallocate(fd %d -> %s)", z.idle[1], z.zeroFD, z.img1),
		fmt.Sprintf("qemu: no request completed for %s s (idle_time_ns); threads: 1 thread(s) serving the disk in state D (worker; wchan 1 in percpu_rwsem_wait); 1 in fallocate(fd %d -> %s)", z.idle[2], z.discFD, z.img2),
	}
	for i, v := range got {
		if v.Summary() != want[i] {
			t.Errorf("%s:\n got %s\nwant %s", v.Disk, v.Summary(), want[i])
		}
	}
	if got[0].Stalled || len(got[0].Blocked) != 0 {
		t.Errorf("idle scsi0: %+v", got[0])
	}
	for i, tid := range map[int]int{1: z.zeroTID, 2: z.discTID} {
		v := got[i]
		if s := strconv.FormatFloat(v.StalledSeconds, 'f', 1, 64); !v.Stalled || s != z.idle[i] || len(v.Blocked) != 1 || v.Blocked[0].TID != tid || v.Blocked[0].Comm != "worker" || v.Blocked[0].Call != "fallocate" {
			t.Errorf("%s: %+v", v.Disk, v)
		}
	}
	// ZERO_RANGE for the zero write, PUNCH_HOLE|KEEP_SIZE for the discard.
	if b := got[1].Blocked[0]; !strings.HasPrefix(b.Syscall, fmt.Sprintf("285 %#x 0x10 ", z.zeroFD)) || *b.FD != z.zeroFD || b.File != z.img1 || b.Unread != "" {
		t.Errorf("scsi1's worker: %+v", b)
	}
	if b := got[2].Blocked[0]; !strings.HasPrefix(b.Syscall, fmt.Sprintf("285 %#x 0x3 ", z.discFD)) || *b.FD != z.discFD || b.File != z.img2 || b.Unread != "" {
		t.Errorf("scsi2's worker: %+v", b)
	}
	// The rule before: pool workers counted for aio=threads disks only,
	// and these are io_uring disks.
	look := Read(context.Background(), n, z.pid, nil)
	for i := range look.Blocked {
		look.Blocked[i].File, look.Blocked[i].Unread = "", ""
	}
	for _, d := range disks {
		if v := Judge(d, stats[d.ID], look, recAfter); v.Stalled {
			t.Errorf("%s stalled by unplaced workers on an io_uring disk: %s", d.ID, v.Summary())
		}
	}
}

// TestRecordedZeroesPlacement: the recorded workers changed as the node
// could show them. Each case gives the exact verdicts (stalled or not)
// and the blocked threads counted per disk.
func TestRecordedZeroesPlacement(t *testing.T) {
	z := zeroes72
	zw, dw := "task/25664", "task/25665"
	for _, c := range []struct {
		name    string
		mutate  func(pid string)
		threads bool // scsi1 and scsi2 aio=threads
		stalled []int
		blocked [][]int
		says    []string // in scsi1's and scsi2's evidence
		idle    string   // what scsi0's evidence adds
	}{
		{name: "recorded: each worker on its own disk", stalled: []int{1, 2}, blocked: [][]int{nil, {25664}, {25665}}},
		{name: "both workers on scsi2's image", mutate: func(pid string) {
			relink(t, filepath.Join(pid, "fd", "20"), z.img2)
		}, stalled: []int{2}, blocked: [][]int{nil, nil, {25664, 25665}}},
		{name: "a worker on a file of no disk (a backup target)", mutate: func(pid string) {
			relink(t, filepath.Join(pid, "fd", "20"), "/var/lib/vz/dump/vzdump-qemu-100.vma")
		}, stalled: []int{2}, blocked: [][]int{nil, nil, {25665}}},
		{name: "syscall unreadable, io_uring disks: not counted, said", mutate: func(pid string) {
			rm(t, filepath.Join(pid, zw, "syscall"))
		}, stalled: []int{2}, blocked: [][]int{nil, nil, {25665}},
			says: []string{"no thread serving the disk is blocked; 1 pool worker(s) in state D whose disk could not be read (syscall: no such file or directory): this disk's zero writes and discards run there too", ""},
			idle: "; 1 pool worker(s) in state D whose disk could not be read (syscall: no such file or directory): this disk's zero writes and discards run there too"},
		{name: "fd unreadable, io_uring disks: not counted, said", mutate: func(pid string) {
			rm(t, filepath.Join(pid, "fd", "21"))
		}, stalled: []int{1}, blocked: [][]int{nil, {25664}, nil},
			says: []string{"", "1 pool worker(s) in state D whose disk could not be read (fd 21: no such file or directory)"},
			idle: "; 1 pool worker(s) in state D whose disk could not be read (fd 21: no such file or directory): this disk's zero writes and discards run there too"},
		{name: "syscall unreadable, aio=threads disks: counted for both, said", mutate: func(pid string) {
			rm(t, filepath.Join(pid, zw, "syscall"))
		}, threads: true, stalled: []int{1, 2}, blocked: [][]int{nil, {25664}, {25664, 25665}},
			says: []string{"1 pool worker(s) counted for the aio=threads disks, their own disk not read (syscall: no such file or directory)", "1 in fallocate(fd 21 -> "},
			idle: "; 1 pool worker(s) in state D whose disk could not be read (syscall: no such file or directory): this disk's zero writes and discards run there too"},
		{name: "QEMU's root unreadable: no worker placed", mutate: func(pid string) {
			rm(t, filepath.Join(pid, "root"))
		}, stalled: nil, blocked: [][]int{nil, nil, nil},
			says: []string{"", ""},
			idle: "; 2 pool worker(s) in state D whose disk could not be read (QEMU's root: no such file or directory (2 threads)): this disk's zero writes and discards run there too"},
		{name: "blocked outside a system call", mutate: func(pid string) {
			write(t, filepath.Join(pid, dw, "syscall"), "-1 0x7f951dee75e0 0x7f95d1150e07\n")
		}, stalled: []int{1}, blocked: [][]int{nil, {25664}, nil},
			says: []string{"", "(blocked outside a system call)"},
			idle: "; 1 pool worker(s) in state D whose disk could not be read (blocked outside a system call): this disk's zero writes and discards run there too"},
		{name: "in a call on no descriptor (futex)", mutate: func(pid string) {
			write(t, filepath.Join(pid, dw, "syscall"), "202 0x55bdd90e54a0 0x189 0x0 0x0 0x0 0xffffffff 0x7f95373fe4a0 0x7f95d10d9f16\n")
		}, stalled: []int{1}, blocked: [][]int{nil, {25664}, nil},
			says: []string{"", "(in system call 202, not one on a disk's descriptor)"},
			idle: "; 1 pool worker(s) in state D whose disk could not be read (in system call 202, not one on a disk's descriptor): this disk's zero writes and discards run there too"},
		{name: "the zero write's worker not in D", mutate: func(pid string) {
			b, _ := os.ReadFile(filepath.Join(pid, zw, "stat"))
			write(t, filepath.Join(pid, zw, "stat"), strings.Replace(string(b), "(worker) D ", "(worker) S ", 1))
		}, stalled: []int{2}, blocked: [][]int{nil, nil, {25665}},
			says: []string{"threads: no thread serving the disk is blocked", ""}},
	} {
		t.Run(c.name, func(t *testing.T) {
			disks := zeroesDisks(t, z)
			disks[1].ThreadPool, disks[2].ThreadPool = c.threads, c.threads
			n, stats := zeroesNode(t, z, c.mutate)
			got := Detect(context.Background(), n, z.pid, disks, stats, recAfter, 0)
			var stalled []int
			for i, v := range got {
				if v.Stalled {
					stalled = append(stalled, i)
				}
				var tids []int
				for _, th := range v.Blocked {
					tids = append(tids, th.TID)
				}
				if !slices.Equal(tids, c.blocked[i]) {
					t.Errorf("%s: blocked %v, want %v (%s)", v.Disk, tids, c.blocked[i], v.Summary())
				}
			}
			if !slices.Equal(stalled, c.stalled) {
				t.Errorf("stalled disks %v, want %v", stalled, c.stalled)
			}
			for i, s := range c.says {
				if !strings.Contains(got[i+1].Summary(), s) {
					t.Errorf("%s's evidence lacks %q: %s", got[i+1].Disk, s, got[i+1].Summary())
				}
			}
			if got[0].Stalled || got[0].Summary() != "qemu: no request completed for 4.9 s (idle_time_ns); threads: no thread serving the disk is blocked"+c.idle {
				t.Errorf("idle scsi0:\n got %s\nwant suffix %q", got[0].Summary(), c.idle)
			}
		})
	}
}

func relink(t *testing.T, p, target string) {
	t.Helper()
	rm(t, p)
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

func rm(t *testing.T, p string) {
	t.Helper()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, p, s string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The serving rule on threads as the node shows them, one disk at a time:
// a thread placed on a file counts for the disk it names only (its image,
// or its node device), whatever the disk's aio; an unplaced pool worker
// for an aio=threads disk only; the serving thread and its io_uring
// workers whatever file they name.
func TestServingPlaced(t *testing.T) {
	idle := qmp.BlockStats{IdleTimeNs: int64(time.Minute), HasIdleTime: true}
	fd := func(n int) *int { return &n }
	img := "/var/lib/vz/images/100/vm-100-disk-1.raw"
	onImg := Thread{TID: 60, Comm: "worker", State: "D", Call: "fallocate", FD: fd(20), File: img}
	onOther := Thread{TID: 61, Comm: "worker", State: "D", Call: "fallocate", FD: fd(21), File: "/var/lib/vz/images/100/vm-100-disk-2.raw"}
	onDev := Thread{TID: 62, Comm: "worker", State: "D", Call: "ioctl", FD: fd(22), File: "/dev/dm-3"}
	vcpu := Thread{TID: 63, Comm: "CPU 0/KVM", State: "D", Call: "pwritev", FD: fd(20), File: img}
	unread := Thread{TID: 64, Comm: "worker", State: "D", Unread: "syscall: permission denied"}
	unnamed := Thread{TID: 65, Comm: "kvm", State: "D", Unread: "syscall: permission denied"}
	self := Thread{TID: 20, Comm: "kvm", State: "D", Call: "fdatasync", FD: fd(21), File: "/var/lib/vz/images/100/vm-100-disk-2.raw"}
	file := Disk{ID: "scsi1", ServingTID: 20, Path: img}
	pool := Disk{ID: "scsi1", ServingTID: 20, Path: img, ThreadPool: true}
	lvm := Disk{ID: "scsi1", ServingTID: 20, Path: "/dev/pve/vm-100-disk-1", Dev: "dm-3"}
	for _, c := range []struct {
		name string
		d    Disk
		in   []Thread
		want []int
	}{
		{"a worker on the disk's image", file, []Thread{onImg}, []int{60}},
		{"a worker on another disk's image", file, []Thread{onOther}, nil},
		{"a worker on another disk's image, aio=threads disk", pool, []Thread{onOther}, nil},
		{"a worker on the disk's device, opened through its link", lvm, []Thread{onDev, onImg}, []int{62}},
		{"a vCPU thread writing to the image", file, []Thread{vcpu}, []int{63}},
		{"a worker unread, io_uring disk", file, []Thread{unread}, nil},
		{"a worker unread, aio=threads disk", pool, []Thread{unread, onOther}, []int{64}},
		{"an unnamed thread unread, aio=threads disk", pool, []Thread{unnamed}, nil},
		{"the serving thread on another disk's file", file, []Thread{self}, []int{20}},
		{"a disk with no path (rbd)", Disk{ID: "scsi1", ServingTID: 20}, []Thread{onImg, {TID: 66, Comm: "worker", State: "D", Call: "fallocate", FD: fd(3), File: "."}}, nil},
	} {
		v := Judge(c.d, idle, Look{Blocked: c.in}, DefaultAfter)
		var got []int
		for _, th := range v.Blocked {
			got = append(got, th.TID)
		}
		if !slices.Equal(got, c.want) || v.Stalled != (len(c.want) > 0) {
			t.Errorf("%s: blocked %v stalled %v, want %v (%s)", c.name, got, v.Stalled, c.want, v.Summary())
		}
	}
}

func TestSyscallCall(t *testing.T) {
	for _, c := range []struct {
		line, arch, call string
		fd               int
		why              string
	}{
		{"285 0x14 0x10 0x0 0x10000 0x0 0x0 0x7f951e6e85e0 0x7f95d1150e07\n", "amd64", "fallocate", 20, ""},
		{"296 0x3 0x7f00 0x2 0x0 0x0 0x0 0x1 0x2", "amd64", "pwritev", 3, ""},
		{"16 0x15 0x1277 0x7f00 0x0 0x0 0x0 0x1 0x2", "amd64", "ioctl", 21, ""},
		{"75 0x9 0x0 0x0 0x0 0x0 0x0 0x1 0x2", "amd64", "fdatasync", 9, ""},
		{"47 0x14 0x3 0x0 0x100000 0x0 0x0 0x1 0x2", "arm64", "fallocate", 20, ""},
		{"285 0x14 0x3 0x0 0x100000 0x0 0x0 0x1 0x2", "arm64", "copy_file_range", 20, ""},
		{"47 0x14 0x3 0x0 0x100000 0x0 0x0 0x1 0x2", "amd64", "", 0, "in system call 47, not one on a disk's descriptor"},
		{"285 0x14 0x3", "riscv64", "", 0, "in system call 285, not one on a disk's descriptor"},
		{"202 0x55bdd90e54a0 0x189 0x0 0x0 0x0 0xffffffff 0x1 0x2", "amd64", "", 0, "in system call 202, not one on a disk's descriptor"},
		{"-1 0x7f951dee75e0 0x7f95d1150e07", "amd64", "", 0, "blocked outside a system call"},
		{"running\n", "amd64", "", 0, "running"},
		{"", "amd64", "", 0, "empty syscall file"},
		{"285", "amd64", "", 0, `syscall file "285" has no arguments`},
		{"285 0xfffffffffffffff6 0x0", "amd64", "", 0, `fallocate's descriptor "0xfffffffffffffff6" not understood`},
		{"285 zz", "amd64", "", 0, `fallocate's descriptor "zz" not understood`},
		{"fallocate 0x3", "amd64", "", 0, `syscall file "fallocate 0x3" not understood`},
	} {
		call, fd, why := syscallCall(c.line, c.arch)
		if call != c.call || fd != c.fd || why != c.why {
			t.Errorf("%q on %s: %q %d %q, want %q %d %q", c.line, c.arch, call, fd, why, c.call, c.fd, c.why)
		}
	}
}

func TestQEMUView(t *testing.T) {
	const chroot = "/var/cache/pvediskcheck/trixie-qemu11"
	for _, c := range []struct{ root, link, want string }{
		{"/", "/var/lib/vz/images/100/vm-100-disk-1.raw", "/var/lib/vz/images/100/vm-100-disk-1.raw"},
		{chroot, chroot + "/tmp/x/mnt/images/100/vm-100-disk-1.raw", "/tmp/x/mnt/images/100/vm-100-disk-1.raw"},
		{chroot, chroot + "-other/tmp/x.raw", chroot + "-other/tmp/x.raw"},
		{chroot, "/dev/dm-3", "/dev/dm-3"},
		{"/", "/var/lib/vz/images/100/vm-100-disk-1.raw (deleted)", "/var/lib/vz/images/100/vm-100-disk-1.raw"},
		{"/", "/dev//dm-3", "/dev/dm-3"},
	} {
		if got := qemuView(c.root, c.link); got != c.want {
			t.Errorf("%s under %s: %s, want %s", c.link, c.root, got, c.want)
		}
	}
}

// A thread's file is read through node.Readlink: a recording's fd link
// that leaves the proc tree through a directory link is refused, and the
// worker stays unplaced with the reason.
func TestPlaceRefusesOutsideProc(t *testing.T) {
	z := zeroes72
	outside := t.TempDir()
	n, stats := zeroesNode(t, z, func(pid string) {
		if err := os.RemoveAll(filepath.Join(pid, "fd")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(pid, "fd")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(z.img1, filepath.Join(outside, "20")); err != nil {
			t.Fatal(err)
		}
	})
	look := Read(context.Background(), n, z.pid, nil)
	for _, th := range look.Blocked {
		if th.File != "" || !strings.HasPrefix(th.Unread, "fd ") || !strings.Contains(th.Unread, "refused") {
			t.Errorf("%+v", th)
		}
	}
	if got := Detect(context.Background(), n, z.pid, zeroesDisks(t, z), stats, recAfter, 0); got[1].Stalled || got[2].Stalled {
		t.Errorf("stalled through a link outside --proc: %+v", got)
	}
	var fe *node.FileError
	if _, err := n.Readlink(context.Background(), filepath.Join(n.Paths.ProcPid(z.pid), "fd", "20")); !errors.As(err, &fe) {
		t.Errorf("Readlink: %v", err)
	}
}

// BenchmarkDetectZeroes: a look at the recorded VM with two pool workers
// blocked: the thread listing, each D thread's wchan and syscall, QEMU's
// root and the two descriptors' links (BenchmarkDetectCandidate's 8
// io_uring workers are placed by name, with no syscall read).
func BenchmarkDetectZeroes(b *testing.B) {
	disks := zeroesDisks(b, zeroes72)
	n, stats := zeroesNode(b, zeroes72, nil)
	for i := 0; i < b.N; i++ {
		Detect(context.Background(), n, zeroes72.pid, disks, stats, recAfter, 0)
	}
}
