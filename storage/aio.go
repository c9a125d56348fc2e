package storage

import (
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/storage/aio"
)

// IOUringHazard says why qemu-server does not use io_uring by default for a
// disk on s opened with (cacheDirect) or without O_DIRECT: a hang or
// misbehaviour qemu-server works around (aio.IOUringHazard); "" where
// io_uring is its default, and for a disk given as a path (s nil).
func IOUringHazard(s *qemuserver.Storage, cacheDirect bool) string {
	if s == nil {
		return ""
	}
	return aio.IOUringHazard(s.Type, s.Bool("krbd"), cacheDirect)
}
