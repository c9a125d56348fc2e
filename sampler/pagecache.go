package sampler

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// PageCache is one volume's share of the node's page cache, bytes, from
// cachestat(2) (Linux 6.5+) on the volume file or block device. Unlike
// /proc/meminfo's node-wide Dirty, other writers on the node do not move it.
type PageCache struct {
	CachedBytes    int64 `json:"cached_bytes"`
	DirtyBytes     int64 `json:"dirty_bytes"`
	WritebackBytes int64 `json:"writeback_bytes"`
}

// VolumePageCache reads the page-cache state of a file or block device.
func VolumePageCache(path string) (PageCache, error) {
	// O_NONBLOCK: a volume path that is a FIFO (a hostile tree) must not
	// wait for a writer; cachestat then refuses it.
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return PageCache{}, err
	}
	defer f.Close()
	var cs unix.Cachestat_t
	// Len 0 means "to the end of the file".
	if err := unix.Cachestat(uint(f.Fd()), &unix.CachestatRange{Off: 0, Len: 0}, &cs, 0); err != nil {
		return PageCache{}, fmt.Errorf("cachestat %s: %w", path, err)
	}
	page := int64(os.Getpagesize())
	return PageCache{CachedBytes: int64(cs.Cache) * page, DirtyBytes: int64(cs.Dirty) * page, WritebackBytes: int64(cs.Writeback) * page}, nil
}
