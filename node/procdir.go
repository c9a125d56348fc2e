package node

import (
	"context"
	"errors"
	"os"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// ProcDir is a procfs directory (/proc/PID/task) opened once to read many
// small counter files below it with ReadSmall's rules in fewer system
// calls: each file is one openat2 relative to the directory, an fstat and
// one read, no lookup of the whole path three times (stat, open,
// /proc/self/fd), which is where the kernel spent most of top's thread
// counter reads. Close it after use.
type ProcDir struct {
	n    Node
	path string
	fd   int // -1: not a real procfs directory in its tree; every read is ReadSmall's
}

// OpenProcDir opens path, a directory below --proc. Only a real procfs
// directory, found inside its tree through /proc/self/fd, is kept open;
// any other (a fixture tree, no procfs, no such directory) reads each file
// through ReadSmall, which refuses or explains.
func (n Node) OpenProcDir(path string) ProcDir {
	return n.openCounterDir(path, procSuperMagic)
}

// cgroupSuperMagic and cgroup2SuperMagic are cgroupfs's f_type in
// statfs(2): a v1 controller's hierarchy, the unified tree.
const (
	cgroupSuperMagic  = 0x27e0eb
	cgroup2SuperMagic = 0x63677270
)

// OpenCgroupDir opens path, a VM's cgroup directory below --sys
// (/sys/fs/cgroup/qemu.slice/<vmid>.scope, or a v1 controller's), as
// OpenProcDir opens a procfs one: kept open only when it is a real
// cgroupfs directory inside its tree, else each file is read through
// ReadSmall. cgroupfs, like procfs, holds no FIFO or device, and its
// memory.stat, io.pressure and io.stat are built from the cgroup's own
// counters (mm/memcontrol.c, kernel/sched/psi.c, block/blk-cgroup.c),
// waiting on no other process: top and metrics read them at every sample
// and per VM, where ReadFile's goroutine, timer and three lookups of the
// path cost more than the reads (docs/speed.md).
func (n Node) OpenCgroupDir(path string) ProcDir {
	return n.openCounterDir(path, cgroupSuperMagic, cgroup2SuperMagic)
}

func (n Node) openCounterDir(path string, magics ...int64) ProcDir {
	d := ProcDir{n: n, path: path, fd: -1}
	tree, err := n.Paths.treeOf(path)
	if err != nil {
		return d
	}
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return d
	}
	var fs unix.Statfs_t
	var link [512]byte
	l, err := unix.Readlink("/proc/self/fd/"+strconv.Itoa(fd), link[:])
	if err != nil || l >= len(link) || !below(string(link[:l]), tree) || unix.Fstatfs(fd, &fs) != nil || !oneOf(int64(fs.Type), magics) {
		unix.Close(fd)
		return d
	}
	d.fd = fd
	return d
}

func oneOf(x int64, of []int64) bool {
	for _, y := range of {
		if x == y {
			return true
		}
	}
	return false
}

// Close releases the directory.
func (d ProcDir) Close() {
	if d.fd >= 0 {
		unix.Close(d.fd)
	}
}

// ReadSmall reads the file name (e.g. "1234/schedstat") below the
// directory into buf as node.ReadSmall does. The file is opened with
// openat2 beneath the directory, with no symlink and no mount crossed
// (RESOLVE_BENEATH, RESOLVE_NO_SYMLINKS, RESOLVE_NO_XDEV): so it is a
// procfs file inside the tree, and procfs holds no FIFO or device whose
// open could block or act, which is why no stat precedes the open here;
// fstat then checks it is a regular file. Whatever openat2 will not open
// that way (a symlink, a mount on top of a procfs file, a kernel before
// 5.6) and whatever is not a regular file is read through node.ReadSmall.
func (d ProcDir) ReadSmall(ctx context.Context, name string, buf []byte) (int, error) {
	if d.fd < 0 || ctx.Err() != nil {
		return d.n.ReadSmall(ctx, d.path+"/"+name, buf)
	}
	fd, err := unix.Openat2(d.fd, name, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err == unix.ENOENT || err == unix.ESRCH {
		return 0, &os.PathError{Op: "open", Path: d.path + "/" + name, Err: syscall.ENOENT}
	}
	if err != nil {
		return d.n.ReadSmall(ctx, d.path+"/"+name, buf)
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return d.n.ReadSmall(ctx, d.path+"/"+name, buf)
	}
	return readOnce(fd, d.path+"/"+name, buf)
}

// CounterFile is a file below a ProcDir kept open to be read again at
// every sample (ReadAgain): a procfs counter file is made anew at each
// read from offset 0 (seq_file), so a sampler that holds it open pays one
// pread per read instead of ReadSmall's openat2, fstat, read and close,
// and a file of a process that has gone answers ESRCH, whatever process
// has its pid since. Close it when done.
type CounterFile struct {
	fd   int
	path string
}

// ErrNotHeld is OpenCounter's answer where the directory is not held open
// (a fixture tree, no procfs) or the file cannot be opened beneath it the
// way ReadSmall opens it: read it with ReadSmall then, which refuses or
// explains.
var ErrNotHeld = errors.New("not a counter file held open")

// OpenCounter opens name below d as ReadSmall does (openat2 beneath the
// directory, no symlink, no mount crossed, a regular file), to be read
// with ReadAgain. A missing file (or a gone thread) is an error that
// errors.Is(os.ErrNotExist); ErrNotHeld where ReadSmall would read the
// file through node.ReadSmall.
func (d ProcDir) OpenCounter(name string) (CounterFile, error) {
	if d.fd < 0 {
		return CounterFile{fd: -1}, ErrNotHeld
	}
	fd, err := unix.Openat2(d.fd, name, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_XDEV | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err == unix.ENOENT || err == unix.ESRCH {
		return CounterFile{fd: -1}, &os.PathError{Op: "open", Path: d.path + "/" + name, Err: syscall.ENOENT}
	}
	if err != nil {
		return CounterFile{fd: -1}, ErrNotHeld
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return CounterFile{fd: -1}, ErrNotHeld
	}
	return CounterFile{fd: fd, path: d.path + "/" + name}, nil
}

// ReadAgain reads the whole file from its start into buf, bounded as
// ReadSmall is (a file that fills buf is refused). A thread or process
// that has gone is an error that errors.Is(os.ErrNotExist).
func (f CounterFile) ReadAgain(buf []byte) (int, error) {
	for {
		m, err := unix.Pread(f.fd, buf, 0)
		if err == unix.EINTR {
			continue
		}
		if err == unix.ESRCH || err == unix.ENOENT {
			return 0, &os.PathError{Op: "read", Path: f.path, Err: syscall.ENOENT}
		}
		if err != nil {
			return 0, &os.PathError{Op: "read", Path: f.path, Err: err}
		}
		if m >= len(buf) {
			return 0, tooLarge(f.path, len(buf))
		}
		return m, nil
	}
}

// Close releases the file.
func (f CounterFile) Close() {
	if f.fd >= 0 {
		unix.Close(f.fd)
	}
}

// HeldDir is a ProcDir whose counter files stay open between reads
// (CounterFile): a sampler that reads the same files of one process at
// every sample (top's thread counters, the stall rule's thread states)
// pays one pread per file. A file that cannot be held (a fixture tree)
// is read through ReadSmall each time. Each open file costs the kernel
// its read buffer (a page) until Sweep or Close. Not safe for concurrent
// use.
type HeldDir struct {
	n     Node
	path  string
	dir   ProcDir
	files map[string]CounterFile
	read  map[string]bool // read since the last Sweep
}

// HoldProcDir opens path as OpenProcDir does, to hold its files open.
func (n Node) HoldProcDir(path string) *HeldDir {
	return &HeldDir{n: n, path: path, dir: n.OpenProcDir(path), files: map[string]CounterFile{}, read: map[string]bool{}}
}

// ReadSmall reads name below the directory into buf as ProcDir.ReadSmall
// does, through the file held open (opened at its first read). A file
// that fails is closed, and opened again at its next read.
func (h *HeldDir) ReadSmall(ctx context.Context, name string, buf []byte) (int, error) {
	f, ok := h.files[name]
	if !ok {
		var err error
		if f, err = h.dir.OpenCounter(name); errors.Is(err, ErrNotHeld) {
			return h.dir.ReadSmall(ctx, name, buf)
		} else if err != nil {
			return 0, err
		}
		h.files[name] = f
	}
	m, err := f.ReadAgain(buf)
	if err != nil {
		f.Close()
		delete(h.files, name)
		return 0, err
	}
	h.read[name] = true
	return m, nil
}

// Dir is the directory itself, for reads that are not held (ReadSmall).
func (h *HeldDir) Dir() ProcDir { return h.dir }

// Held is how many files are held open.
func (h *HeldDir) Held() int { return len(h.files) }

// Sweep closes the files not read since the last Sweep (threads that have
// gone, or are no longer asked for).
func (h *HeldDir) Sweep() {
	if len(h.files) > len(h.read) {
		for name, f := range h.files {
			if !h.read[name] {
				f.Close()
				delete(h.files, name)
			}
		}
	}
	clear(h.read)
}

// Reopen closes every file and opens the directory again: files held
// belong to the process they were opened in, and a new process under the
// same pid is another directory.
func (h *HeldDir) Reopen() {
	h.Close()
	h.dir = h.n.OpenProcDir(h.path)
}

// Close releases the files held and the directory.
func (h *HeldDir) Close() {
	for name, f := range h.files {
		f.Close()
		delete(h.files, name)
	}
	clear(h.read)
	h.dir.Close()
	h.dir.fd = -1
}

// Names lists the directory's entries (no "." or ".."), in the order the
// directory gives them: through the directory held open (getdents from
// its start, no open, no stat of each entry), else as os.ReadDir lists
// the path, whose error it returns.
func (d ProcDir) Names() ([]string, error) {
	if d.fd >= 0 {
		if names, err := d.heldNames(); err == nil {
			return names, nil
		}
	}
	ents, err := os.ReadDir(d.path)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	return names, nil
}

func (d ProcDir) heldNames() ([]string, error) {
	if _, err := unix.Seek(d.fd, 0, 0); err != nil {
		return nil, err
	}
	var buf [8192]byte
	var names []string
	for {
		n, err := unix.Getdents(d.fd, buf[:])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}
