package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// Readlink is how the target of a node's symbolic link is read: a
// process's /proc/<pid>/exe, whose text is the binary the process runs
// (with " (deleted)" appended once that file was unlinked), a descriptor's
// /proc/<pid>/fd/N and the process's /proc/<pid>/root (the stall rule's:
// the file a blocked thread works on). Like ReadFile it reads only below
// the tree the path belongs to (--proc for a procfs path, else --root),
// the folder holding the link too, its own links resolved (a fixture's
// fd/ linked elsewhere is not read through); it never follows the link
// itself, so nothing the link names is touched (an image on a hung NFS
// mount is not stat'ed), and stops at ctx. procfs answers it from the
// task's own state (fs/proc/base.c proc_exe_link, proc_fd_link,
// proc_root_link: no lock another process can hold), so there is no timer.
func (n Node) Readlink(ctx context.Context, path string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	tree, err := n.Paths.treeOf(path)
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
	if !below(dir, tree) {
		return "", &FileError{path, "leads to " + dir + ", outside " + tree + ": refused"}
	}
	return os.Readlink(filepath.Join(dir, filepath.Base(path)))
}
