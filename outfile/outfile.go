// Package outfile is the one way pvediskcheck writes a file or a folder
// of its own: bench --report and fio compare --report (a page), metrics
// --textfile (node_exporter's file), bench --out (a results folder) and the
// evidence folders of stall, top --capture and metrics --capture.
//
// Every output path is checked when the run starts, before it measures or
// writes anything: an empty name, a directory where a file is named (or a
// file where a folder is), a FIFO, a device, a socket, a symbolic link, a
// missing or unwritable directory, and an existing file the tool did not
// write are refused there, one line naming the flag and the path (exit 2).
// A file is then written whole through a new temporary file beside it
// (O_CREAT|O_EXCL|O_NOFOLLOW) renamed over the name, so a reader never sees
// half a file and a symbolic link put there meanwhile is replaced, never
// followed. A folder is made with mkdir of a name nobody made before (never
// an existing one, whoever made it), mode 0700, and its files are created
// in it with O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600: they hold kernel stacks
// and config lines. Prune keeps the folders a command makes in one place
// within a count and a size, the oldest removed first.
package outfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// Recognise reports whether the first HeadBytes of an existing file are a
// file this tool wrote (the producer's marker): only such a file is
// written over.
type Recognise func(head []byte) bool

// HeadBytes is how much of an existing file Recognise is shown.
const HeadBytes = 4 << 10

// File is an output file a flag names, checked when the run starts.
type File struct {
	flag, path string
	ours       Recognise
	mode       os.FileMode
}

// Check checks path, named by flag (its name without dashes, for messages),
// as a file the run will write with mode at its end: every refusal is bad
// input (exit 2) naming the flag and the path. A temporary file is made in
// its directory and removed at once, so an unwritable directory (no
// permission, a read-only filesystem) is found now, not after the run.
func Check(flag, path string, ours Recognise, mode os.FileMode) (*File, error) {
	f := &File{flag: flag, path: path, ours: ours, mode: mode}
	if path == "" {
		return nil, exitcode.Usagef(`--%s "": no file named (name a FILE, or leave --%s out)`, flag, flag)
	}
	dir := filepath.Dir(path)
	if err := checkDir(flag, path, dir, "to write it in"); err != nil {
		return nil, err
	}
	if err := f.checkTarget(); err != nil {
		return nil, err
	}
	tmp, err := f.temp()
	if err != nil {
		return nil, f.usage("cannot write in %s: %v", dir, bare(err))
	}
	tmp.Close()
	os.Remove(tmp.Name())
	return f, nil
}

// Path is the file's name as given.
func (f *File) Path() string { return f.path }

// checkTarget refuses what is at the path when it is not a regular file
// this tool wrote.
func (f *File) checkTarget() error {
	st, err := os.Lstat(f.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return f.usage("%v", bare(err))
	case st.Mode()&fs.ModeSymlink != 0:
		return f.usage("is a symbolic link: refused (pvediskcheck never writes through one; name the file itself)")
	case !st.Mode().IsRegular():
		return f.usage("is %s, not a file: refused", Kind(st.Mode()))
	}
	head, err := readHead(f.path)
	if err != nil {
		return f.usage("%v", bare(err))
	}
	if f.ours == nil || !f.ours(head) {
		return f.usage("exists and is not a file pvediskcheck wrote: refused (move it away, or name another file)")
	}
	return nil
}

// readHead reads the first HeadBytes of a regular file without following
// a symbolic link or waiting on a FIFO put there since the Lstat.
func readHead(path string) ([]byte, error) {
	fd, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, err
	}
	defer fd.Close()
	if st, err := fd.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	b := make([]byte, HeadBytes)
	n, err := io.ReadFull(fd, b)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b[:n], nil
}

// temp creates a new temporary file beside the target: a name of its own
// that no one made (O_EXCL), not a .prom or .html name (node_exporter
// reads *.prom only), never through a symbolic link.
func (f *File) temp() (*os.File, error) {
	dir, base := filepath.Dir(f.path), filepath.Base(f.path)
	for i := 0; ; i++ {
		name := filepath.Join(dir, "."+base+"."+random()+".tmp")
		fd, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_NOCTTY, 0o600)
		if errors.Is(err, fs.ErrExist) && i < 100 {
			continue
		}
		return fd, err
	}
}

// Write replaces the file with what write writes: a new temporary file
// beside it, given the file's mode, renamed over the name (not synced:
// each is written again at the next run; metrics --textfile rewrites its
// file every scrape interval). What is
// at the name is checked again first (the run took minutes; it may have
// been replaced): a refusal is exit 2, a failed write exit 3, and neither
// leaves the temporary file behind.
func (f *File) Write(write func(io.Writer) error) error {
	if err := f.checkTarget(); err != nil {
		return err
	}
	tmp, err := f.temp()
	if err != nil {
		return f.failed(err)
	}
	done := false
	defer func() {
		if !done {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err := write(tmp); err != nil {
		return f.failed(err)
	}
	if err := tmp.Chmod(f.mode); err != nil {
		return f.failed(err)
	}
	if err := tmp.Close(); err != nil {
		return f.failed(err)
	}
	if err := os.Rename(tmp.Name(), f.path); err != nil {
		return f.failed(err)
	}
	done = true
	return nil
}

// WriteBytes is Write of b.
func (f *File) WriteBytes(b []byte) error {
	return f.Write(func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}

func (f *File) usage(format string, a ...any) error {
	return exitcode.Usagef("--%s %s: %s", f.flag, quoted(f.path), fmt.Sprintf(format, a...))
}

func (f *File) failed(err error) error {
	return exitcode.Unreachablef("--%s %s: not written: %v", f.flag, quoted(f.path), bare(err))
}

// checkDir checks that dir, where path is to be made, is a directory.
func checkDir(flag, path, dir, what string) error {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return exitcode.Usagef("--%s %s: no directory %s %s", flag, quoted(path), quoted(dir), what)
	case err != nil:
		return exitcode.Usagef("--%s %s: %v", flag, quoted(path), bare(err))
	case !st.IsDir():
		return exitcode.Usagef("--%s %s: %s is %s, not a directory", flag, quoted(path), quoted(dir), Kind(st.Mode()))
	}
	return nil
}

// Kind names what a file mode is, for a refusal (node's one naming).
func Kind(m fs.FileMode) string { return node.Kind(m) }

// bare is err without the path an *fs.PathError repeats (the message names
// it already).
func bare(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var le *os.LinkError
	if errors.As(err, &le) {
		return le.Err
	}
	return err
}

// quoted is a path as a message shows it: as it is when it is plain,
// escaped and clipped when it holds what a terminal would act on.
func quoted(p string) string {
	if s := units.Printable(p); s == p && len(p) <= 200 {
		return p
	}
	return units.Clip(p, 200)
}

// random is 8 random bytes in hex: a name no one can guess beforehand.
func random() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}
