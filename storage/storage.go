// Package storage says what each Proxmox storage type does with a VM's
// writes, flushes and discards, as far as the node can know it: whether a
// discard can give space back, where an acknowledged write sits, which aio
// modes qemu-server avoids there. qemuserver parses storage.cfg; this package
// holds what the types mean.
package storage

import (
	"context"
	"os"
	"syscall"

	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// ReturnsSpace reports whether discards that reach this volume can give
// space back to the storage, as its row of the storage-type table says:
// thin storages (lvmthin, rbd, zfspool with sparse), and on file storages
// qcow2 images and raw files that are sparse. hostPath is the volume's path
// as this process can open it (for the sparse test of raw files).
//
// A zfspool without `sparse 1` creates its zvols without -s
// (ZFSPoolPlugin.pm zfs_create_zvol), so each carries a refreservation of its
// full size: a discard frees the zvol's blocks, but the pool's free space
// does not grow, whatever the disk's discard setting.
func ReturnsSpace(s *qemuserver.Storage, format, hostPath string) bool {
	return ReturnsSpaceOf(s, format, func() bool { return IsSparse(hostPath) })
}

// ReturnsSpaceOf is ReturnsSpace with the sparse test of a raw file given:
// sparse answers it (check measured the image before its rules ran).
func ReturnsSpaceOf(s *qemuserver.Storage, format string, sparse func() bool) bool {
	if s == nil {
		return false
	}
	return s.Facts().ReturnsSpace(func() bool { return format == "qcow2" || sparse() })
}

// IOUringHazard says why qemu-server does not use io_uring by default for a
// disk on s opened with (cacheDirect) or without O_DIRECT: a hang or
// misbehaviour qemu-server works around (the storage row's IOUringWhy); ""
// where io_uring is its default, and for a disk given as a path (s nil).
func IOUringHazard(s *qemuserver.Storage, cacheDirect bool) string {
	if s == nil {
		return ""
	}
	return s.Facts().IOUringHazard(cacheDirect)
}

// IsSparse reports a regular file that allocates less than its size (its
// stat StatImage's): an image on a hung NFS or CIFS mount is not known to
// be sparse, as one that cannot be read.
func IsSparse(path string) bool {
	st, err := StatImage(path)
	return err == nil && Sparse(st)
}

// StatImage stats an image, bounded like alloc's (node.Within,
// node.DefaultTimeout).
func StatImage(path string) (os.FileInfo, error) {
	return node.Within(context.Background(), node.DefaultTimeout, func() (os.FileInfo, error) { return os.Stat(path) })
}

// Sparse reports a regular file that allocates less than its size.
func Sparse(st os.FileInfo) bool {
	if !st.Mode().IsRegular() {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	return ok && sys.Blocks*512 < st.Size()
}
