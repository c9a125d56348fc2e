package node

import (
	"os"
	"path/filepath"
)

// ReadLink is the text of a procfs link below --proc (/proc/PID/fd/N,
// /proc/PID/root): what the kernel names, never followed. So nothing the
// link leads to is touched: the image of a disk on a hung NFS mount or a
// frozen filesystem is not stat'ed, and a link in a fixture tree may name
// a path that does not exist here. The directory holding the link,
// symlinks resolved, must lie below --proc; anything else is refused as
// ReadFile refuses a file outside its tree.
func (n Node) ReadLink(path string) (string, error) {
	proc, err := n.Paths.procTree()
	if err != nil {
		return "", err
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(path))
	if err != nil {
		return "", err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return "", err
	}
	if !below(dir, proc) {
		return "", &FileError{path, "is not below " + proc + ": refused"}
	}
	return os.Readlink(filepath.Join(dir, filepath.Base(path)))
}

// procTree is --proc, symlinks resolved (treeOf's rule for a path in it).
func (p Paths) procTree() (string, error) {
	if p.Proc == "" {
		return "", &FileError{"/proc", "no --proc: refused"}
	}
	return p.treeOf(p.Proc)
}
