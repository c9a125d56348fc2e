// Package sampler reads host counters (procfs, sysfs) and QEMU's block
// statistics over a window, and turns them into rates.
package sampler

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/pvediskcheck/pvediskcheck/node"
)

// Host reads the node's counters below one procfs and sysfs root, every
// file through node.Node.ReadFile (regular files only, bounded, within
// node.DefaultTimeout: a FIFO in a fixture tree cannot hang a sampler).
type Host struct {
	Proc string // e.g. /proc
	Sys  string // e.g. /sys
}

func (h Host) read(path string) ([]byte, error) {
	return node.New(node.NewPaths("/", h.Proc, h.Sys), 0).ReadFile(context.Background(), path)
}

// Memory is the node's page-cache state, bytes.
type Memory struct {
	DirtyBytes     int64 // /proc/meminfo Dirty: written, not yet sent to storage
	WritebackBytes int64 // /proc/meminfo Writeback: being written to storage now
	TotalBytes     int64 // /proc/meminfo MemTotal: the node's RAM
}

// Memory reads Dirty, Writeback and MemTotal from /proc/meminfo (kB: KiB).
func (h Host) Memory() (Memory, error) {
	b, err := h.read(filepath.Join(h.Proc, "meminfo"))
	if err != nil {
		return Memory{}, err
	}
	var m Memory
	for _, line := range strings.Split(string(b), "\n") {
		key, rest, ok := strings.Cut(line, ":")
		f := strings.Fields(rest)
		if !ok || len(f) == 0 {
			continue
		}
		v, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("%s/meminfo: %s: %q is not a number", h.Proc, key, f[0])
		}
		if len(f) > 1 && f[1] == "kB" {
			v *= 1024
		}
		switch key {
		case "Dirty":
			m.DirtyBytes = v
		case "Writeback":
			m.WritebackBytes = v
		case "MemTotal":
			m.TotalBytes = v
		}
	}
	return m, nil
}

// ProcessWriteBytes is /proc/<pid>/io write_bytes: bytes the process caused
// to be sent to storage, accounted when it dirties page cache (buffered) or
// submits I/O (O_DIRECT). Write-zeroes and discards do not count, which is
// how zero data is told apart from real data.
func (h Host) ProcessWriteBytes(pid int) (int64, error) {
	path := filepath.Join(h.Proc, strconv.Itoa(pid), "io")
	b, err := h.read(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "write_bytes:"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: write_bytes %q is not a number", path, strings.TrimSpace(v))
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("%s: no write_bytes", path)
}

// BlockStat is a block device's counters from /sys/class/block/<dev>/stat
// (Documentation/block/stat.rst): sectors are 512 bytes.
type BlockStat struct {
	Device         string
	WriteIOs       int64
	WriteSectors   int64
	DiscardIOs     int64
	DiscardSectors int64
	FlushIOs       int64 // kernel 5.5+
	ReadIOs        int64
	ReadSectors    int64
	// Milliseconds requests of each kind spent from submission to
	// completion, summed over requests (so several in flight add up).
	ReadTicksMs, WriteTicksMs, FlushTicksMs int64
	InFlight                                int64 // requests in flight now
	IOTicksMs                               int64 // time the device had requests in flight
	QueueTicksMs                            int64 // weighted: in-flight requests x time
}

// BlockDeviceStat reads the stat file of the block device at devPath
// (following symlinks such as /dev/<vg>/<lv>).
func (h Host) BlockDeviceStat(devPath string) (BlockStat, error) {
	real, err := filepath.EvalSymlinks(devPath)
	if err != nil {
		return BlockStat{}, err
	}
	name := filepath.Base(real)
	b, err := h.read(filepath.Join(h.Sys, "class", "block", name, "stat"))
	if err != nil {
		return BlockStat{}, err
	}
	return parseBlockStat(name, string(b))
}

func parseBlockStat(name, s string) (BlockStat, error) {
	f := strings.Fields(s)
	if len(f) < 11 {
		return BlockStat{}, fmt.Errorf("%s stat: %d fields, want at least 11", name, len(f))
	}
	n := func(i int) int64 {
		if i >= len(f) {
			return 0
		}
		v, _ := strconv.ParseInt(f[i], 10, 64)
		return v
	}
	return BlockStat{Device: name, WriteIOs: n(4), WriteSectors: n(6), DiscardIOs: n(11), DiscardSectors: n(13), FlushIOs: n(15),
		ReadIOs: n(0), ReadSectors: n(2), ReadTicksMs: n(3), WriteTicksMs: n(7), InFlight: n(8), IOTicksMs: n(9),
		QueueTicksMs: n(10), FlushTicksMs: n(16)}, nil
}

// BlockDeviceName is the kernel name (dm-3, loop0, zd16, rbd0) of the block
// device at devPath, following symlinks (/dev/<vg>/<lv>, /dev/zvol/...),
// when sysfs has its counters; ok is false for anything else (a file, a
// path that does not exist).
func (h Host) BlockDeviceName(devPath string) (name string, ok bool) {
	real, err := filepath.EvalSymlinks(devPath)
	if err != nil {
		return "", false
	}
	st, err := os.Stat(real)
	if err != nil || st.Mode()&os.ModeDevice == 0 || st.Mode()&os.ModeCharDevice != 0 {
		return "", false
	}
	name = filepath.Base(real)
	if _, err := os.Stat(filepath.Join(h.Sys, "class", "block", name, "stat")); err != nil {
		return "", false
	}
	return name, true
}

// FilesystemDeviceName is the kernel name of the block device under the
// filesystem the file at path is on (its st_dev through
// /sys/dev/block/MAJ:MIN: sda1, dm-0, nvme0n1p2); ok is false for a
// filesystem on no block device (tmpfs, overlay, NFS) or a path that does
// not exist.
func (h Host) FilesystemDeviceName(path string) (name string, ok bool) {
	st, err := os.Stat(path)
	if err != nil {
		return "", false
	}
	sys, isUnix := st.Sys().(*syscall.Stat_t)
	if !isUnix {
		return "", false
	}
	dev := uint64(sys.Dev)
	major := (dev>>8)&0xfff | (dev>>32)&^uint64(0xfff)
	minor := dev&0xff | (dev>>12)&^uint64(0xff)
	link, err := os.Readlink(filepath.Join(h.Sys, "dev", "block", fmt.Sprintf("%d:%d", major, minor)))
	if err != nil {
		return "", false
	}
	name = filepath.Base(link)
	if _, err := os.Stat(filepath.Join(h.Sys, "class", "block", name, "stat")); err != nil {
		return "", false
	}
	return name, true
}

// BlockStatOf reads /sys/class/block/<name>/stat.
func (h Host) BlockStatOf(name string) (BlockStat, error) {
	b, err := h.read(filepath.Join(h.Sys, "class", "block", name, "stat"))
	if err != nil {
		return BlockStat{}, err
	}
	return parseBlockStat(name, string(b))
}

// Slaves lists the block devices under a device-mapper or md device
// (/sys/class/block/<dev>/slaves), so LVM volumes resolve to their disks.
func (h Host) Slaves(devPath string) []string {
	real, err := filepath.EvalSymlinks(devPath)
	if err != nil {
		return nil
	}
	ents, err := os.ReadDir(filepath.Join(h.Sys, "class", "block", filepath.Base(real), "slaves"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range ents {
		out = append(out, "/dev/"+e.Name())
	}
	return out
}

// ParseDiskstats reads /proc/diskstats (major, minor, name, then the
// fields of a device's stat file: Documentation/admin-guide/iostats.rst)
// into each device's counters by kernel name; a line with too few fields
// is skipped.
func ParseDiskstats(s string) map[string]BlockStat {
	out := map[string]BlockStat{}
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) < 14 {
			continue
		}
		if bs, err := parseBlockStat(f[2], strings.Join(f[3:], " ")); err == nil {
			out[f[2]] = bs
		}
	}
	return out
}
