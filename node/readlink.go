package node

import (
	"context"
	"fmt"
	"os"
)

// Readlink is how the target of a node's symbolic link is read: a
// process's /proc/<pid>/exe, whose text is the binary the process runs
// (with " (deleted)" appended once that file was unlinked). Like ReadFile
// it reads only below the tree the path belongs to (--proc for a procfs
// path, else --root), never follows the link, and stops at ctx; procfs
// answers it from the task's own state (fs/proc/base.c proc_exe_link, no
// lock another process can hold), so there is no timer.
func (n Node) Readlink(ctx context.Context, path string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	if _, err := n.Paths.treeOf(path); err != nil {
		return "", err
	}
	return os.Readlink(path)
}
