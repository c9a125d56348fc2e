package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

// MaxFileBytes bounds what is read of one file of the node: everything the
// tool reads there (a VM config, storage.cfg, .vmlist at about 60 bytes per
// guest, /proc/<pid>/cmdline of a VM of many disks) is far smaller.
const MaxFileBytes = 16 << 20

// ErrBadFile is a node file the tool refuses to read: not a regular file
// (a FIFO, a device, a directory, a socket), larger than MaxFileBytes, or
// reached through a symlink that leaves the tree it belongs to. Bad input
// (exit 2): what is there is not what the path is for.
var ErrBadFile = exitcode.New(exitcode.Usage, "not a node file the tool reads")

// FileError names a refused file and why.
type FileError struct {
	Path string
	Why  string
}

func (e *FileError) Error() string { return e.Path + ": " + e.Why }

// ExitCode implements exitcode.Coder: bad input.
func (e *FileError) ExitCode() exitcode.Code { return exitcode.Usage }

// Is makes errors.Is(err, ErrBadFile) hold.
func (e *FileError) Is(target error) bool { return target == ErrBadFile }

// ErrFileTimeout is a read (or another call made Within) that did not
// finish within the node's timeout (pmxcfs waiting for quorum, a hung
// network filesystem, a /proc/<pid>/cmdline of a process holding its
// memory lock).
var ErrFileTimeout = exitcode.New(exitcode.Unreachable, "no answer")

// ReadFile is how every file of the node is read (configs, storage.cfg,
// ceph.conf, pmxcfs's .members and .vmlist, pid files, /proc and /sys
// files). Only a regular file is read (procfs and sysfs files are regular
// files too): a FIFO, a device, a directory or a socket is refused before
// it is opened, so nothing blocks on it or streams from it; at most
// MaxFileBytes; within n.Timeout and ctx. The file, symlinks resolved, must
// lie in the tree it belongs to: below --proc for a procfs file, below
// --sys for a sysfs one, below /etc/pve for a pmxcfs file (pmxcfs's own
// links, qemu-server -> nodes/<node>/qemu-server, stay inside it), else
// below --root. So a config linked to /etc/shadow is never read, even with
// --root /. A missing file is an error that errors.Is(os.ErrNotExist).
func (n Node) ReadFile(ctx context.Context, path string) ([]byte, error) {
	return n.readWithin(ctx, path, n.Paths.readFile)
}

// ReadInput reads a file the admin names on the command line (bench
// --jobs FILE, check --policy FILE): a path of this machine as given (relative to the working
// directory, not below --root), with ReadFile's rules: only a regular
// file is opened (a FIFO, /dev/zero or a directory is refused before it
// is), at most max bytes, within n.Timeout and ctx. Its errors are bad
// input (exit 2) but for a timeout (3).
func (n Node) ReadInput(ctx context.Context, path string, max int) ([]byte, error) {
	return n.readWithin(ctx, path, func(path string) ([]byte, error) { return readFileIn(path, "/", max) })
}

func (n Node) readWithin(ctx context.Context, path string, read func(string) ([]byte, error)) ([]byte, error) {
	timeout := n.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	b, err := Within(ctx, timeout, func() ([]byte, error) { return read(path) })
	switch {
	case errors.Is(err, ErrFileTimeout):
		return nil, fmt.Errorf("%s: %w within %s (raise --timeout if the node is just slow)", path, ErrFileTimeout, timeout)
	case GaveUp(err):
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, err
}

// openFile opens a file to read; tests replace it to stand for a read that
// blocks, which no regular file on a test machine does. O_NONBLOCK: should
// a FIFO replace the file between the stat and the open, the open does not
// wait for a writer.
var openFile = func(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
}

// readFile: a stat first, so that nothing but a regular file is ever
// opened (opening a device can act: /dev/watchdog arms on open); then what
// was opened is checked again, and where it really is (/proc/self/fd) must
// be inside its tree. top reads some 300 procfs files a second: this is
// six system calls and the tree's resolution, no walk of every component.
func (p Paths) readFile(path string) ([]byte, error) {
	tree, err := p.treeOf(path)
	if err != nil {
		return nil, err
	}
	return readFileIn(path, tree, MaxFileBytes)
}

// readFileIn is readFile's checks for a file that must lie in tree, of at
// most max bytes.
func readFileIn(path, tree string, max int) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, refused(path, "", tree, st.Mode())
	}
	f, err := openFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if st, err = f.Stat(); err != nil {
		return nil, err
	}
	real, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil { // no procfs: resolve the name instead
		if real, err = filepath.EvalSymlinks(path); err == nil {
			real, err = filepath.Abs(real)
		}
		if err != nil {
			return nil, err
		}
	}
	if !st.Mode().IsRegular() || !below(real, tree) {
		return nil, refused(path, real, tree, st.Mode())
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > max && max == MaxFileBytes {
		return nil, &FileError{path, fmt.Sprintf("is larger than %d MiB: not a file of a Proxmox VE node", MaxFileBytes>>20)}
	}
	if len(b) > max {
		return nil, &FileError{path, fmt.Sprintf("is larger than %s: not the file the option takes", sizeText(max))}
	}
	return b, nil
}

// sizeText says a byte bound as the admin reads it: 64 KiB, 16 MiB.
func sizeText(n int) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return strconv.Itoa(n>>20) + " MiB"
	case n >= 1<<10 && n%(1<<10) == 0:
		return strconv.Itoa(n>>10) + " KiB"
	}
	return strconv.Itoa(n) + " bytes"
}

// refused says why path is not read: where it leads when that is outside
// its tree (real, "" to resolve it here), else what kind of file it is.
func refused(path, real, tree string, m os.FileMode) error {
	if real == "" {
		if r, err := filepath.EvalSymlinks(path); err == nil {
			real, _ = filepath.Abs(r)
		}
	}
	if real != "" && !below(real, tree) {
		return &FileError{path, fmt.Sprintf("leads to %s, outside %s: refused", real, tree)}
	}
	return &FileError{path, "is " + Kind(m) + ", not a regular file"}
}

// treeOf is the tree path must stay in, symlinks resolved: the most
// specific of --proc, --sys, ROOT/etc/pve and --root that holds it.
func (p Paths) treeOf(path string) (string, error) {
	path, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	for _, t := range []string{p.Proc, p.Sys, p.Join("/etc/pve"), p.Root} {
		if t == "" {
			continue
		}
		if t, err = filepath.Abs(t); err != nil || !below(path, t) {
			continue
		}
		if real, ok := resolvedTrees.Load(t); ok {
			return real.(string), nil
		}
		real, err := filepath.EvalSymlinks(t)
		if err != nil {
			return "", err
		}
		if real, err = filepath.Abs(real); err != nil {
			return "", err
		}
		resolvedTrees.Store(t, real)
		return real, nil
	}
	return "", &FileError{path, "is not below " + p.Root + ": refused"}
}

// resolvedTrees holds each tree's resolution (--proc, --sys, --root, ...,
// symlinks resolved), made once per process: top reads some 400 files a
// second and resolving the tree walked each component of it every time. A
// tree whose symlink is pointed elsewhere during a run keeps its first
// resolution, so a file in the new target fails the in-tree check: it is
// refused, never read from outside.
var resolvedTrees sync.Map // absolute tree -> resolved absolute tree

// below reports whether path is dir or inside it.
func below(path, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(path, "/")
	}
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// Kind names what a file mode is, for a refusal ("is a FIFO, not a
// regular file"): of a file read here, and of one the tool would write
// (package outfile).
func Kind(m os.FileMode) string {
	switch {
	case m&os.ModeSymlink != 0:
		return "a symbolic link"
	case m&os.ModeNamedPipe != 0:
		return "a FIFO"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a block device"
	case m.IsDir():
		return "a directory"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m.IsRegular():
		return "a regular file"
	}
	return "not a file (" + m.Type().String() + ")"
}

// errNotFast: ReadSmall's fast path does not vouch for the file (not on
// procfs, not a regular file, outside its tree, no /proc/self/fd): it is
// read through ReadFile, which refuses what must be refused and explains.
var errNotFast = errors.New("not for the fast path")

// procSuperMagic is procfs's f_type in statfs(2).
const procSuperMagic = 0x9fa0

// ReadSmall reads a small procfs counter file (/proc/PID/task/TID/schedstat
// or stat) into buf and returns how many bytes it holds, with ReadFile's
// refusals: not a regular file, reached through a symlink that leaves its
// tree, or as large as buf (the file is not what the path is for).
//
// On a real procfs the read is done in the calling goroutine, with no
// goroutine, timer or copy: the kernel builds schedstat and stat from the
// task's own fields under spinlocks at most (fs/proc/base.c
// proc_pid_schedstat, fs/proc/array.c do_task_stat), so the read cannot
// wait on anything another process holds, unlike cmdline, environ or maps,
// which take the target's memory lock and must go through ReadFile. The
// checks are ReadFile's, in as few system calls: a stat before the open
// (nothing but a regular file is opened: a FIFO or device in a fixture
// tree never is), the open non-blocking, then on the descriptor fstatfs
// (procfs), fstat (still a regular file) and /proc/self/fd (inside the
// tree), one read. Anything else, e.g. the same file in a fixture tree on
// a disk or a network filesystem, is read through ReadFile, within the
// node's timeout. top reads about 300 of these a second on a node of 50
// VMs; this is where its CPU went (docs/speed.md).
func (n Node) ReadSmall(ctx context.Context, path string, buf []byte) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	m, err := n.Paths.readSmall(path, buf)
	if err != errNotFast {
		return m, err
	}
	b, err := n.ReadFile(ctx, path)
	if err != nil {
		return 0, err
	}
	if len(b) >= len(buf) {
		return 0, tooLarge(path, len(buf))
	}
	return copy(buf, b), nil
}

func tooLarge(path string, max int) error {
	return &FileError{path, fmt.Sprintf("holds %d bytes or more: not the counter file it should be", max)}
}

func (p Paths) readSmall(path string, buf []byte) (int, error) {
	tree, err := p.treeOf(path)
	if err != nil {
		return 0, err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		return 0, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0, errNotFast
	}
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	var fs syscall.Statfs_t
	if err := syscall.Fstatfs(fd, &fs); err != nil || fs.Type != procSuperMagic {
		return 0, errNotFast
	}
	if err := syscall.Fstat(fd, &st); err != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return 0, errNotFast
	}
	var link [512]byte
	l, err := syscall.Readlink("/proc/self/fd/"+strconv.Itoa(fd), link[:])
	if err != nil || l >= len(link) || !below(string(link[:l]), tree) {
		return 0, errNotFast
	}
	return readOnce(fd, path, buf)
}

// readOnce is one read of a procfs file into buf: a seq_file gives all of
// a file that fits in one read; one that fills buf is refused.
func readOnce(fd int, path string, buf []byte) (int, error) {
	for {
		m, err := syscall.Read(fd, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return 0, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if m >= len(buf) {
			return 0, tooLarge(path, len(buf))
		}
		return m, nil
	}
}
