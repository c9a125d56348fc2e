// Package aio holds what Proxmox storage types forbid of QEMU's aio modes:
// where qemu-server avoids io_uring unless a disk asks for it, and why
// (Drive.pm storage_allows_io_uring_default). It imports nothing, so that
// qemuserver (which predicts the aio default from it) and package storage
// (whose rules warn about an explicit aio=io_uring there) share the one fact.
package aio

// IOUringHazard says why qemu-server does not pick io_uring by default for
// a disk on a storage of type storageType (krbd: the rbd storage maps images
// through the kernel; cacheDirect: the disk opens with O_DIRECT), quoting
// qemu-server's own comments; "" where io_uring is its default.
func IOUringHazard(storageType string, krbd, cacheDirect bool) string {
	switch {
	case storageType == "rbd" && krbd && !cacheDirect:
		return "io_uring with cache mode writeback or writethrough on krbd will hang"
	case storageType == "lvm":
		return "io_uring with cache mode writeback or writethrough on LVM will hang, without cache only sometimes"
	case storageType == "cifs":
		return "io_uring causes problems when used with CIFS since kernel 5.15"
	}
	return ""
}
