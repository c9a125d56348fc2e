package node

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

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

// ErrFileTimeout is a read that did not finish within the node's timeout
// (pmxcfs waiting for quorum, a hung network filesystem, a /proc/<pid>/cmdline
// of a process holding its memory lock).
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
	timeout := n.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	type result struct {
		b   []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		b, err := n.Paths.readFile(path)
		ch <- result{b, err}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.b, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", path, ctx.Err())
	case <-t.C:
		return nil, fmt.Errorf("%s: %w within %s (raise --timeout if the node is just slow)", path, ErrFileTimeout, timeout)
	}
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
	b, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxFileBytes {
		return nil, &FileError{path, fmt.Sprintf("is larger than %d MiB: not a file of a Proxmox VE node", MaxFileBytes>>20)}
	}
	return b, nil
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
	return &FileError{path, "is " + kind(m) + ", not a regular file"}
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
		real, err := filepath.EvalSymlinks(t)
		if err != nil {
			return "", err
		}
		return filepath.Abs(real)
	}
	return "", &FileError{path, "is not below " + p.Root + ": refused"}
}

// below reports whether path is dir or inside it.
func below(path, dir string) bool {
	if dir == "/" {
		return strings.HasPrefix(path, "/")
	}
	return path == dir || strings.HasPrefix(path, dir+"/")
}

func kind(m os.FileMode) string {
	switch {
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
	}
	return "not a file (" + m.Type().String() + ")"
}
