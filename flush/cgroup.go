package flush

import (
	"fmt"

	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// Unflushed is the VM's page cache in node RAM from its cgroup (memory.stat
// dirty and writeback) at the window's first and last sample: a guest
// flush on cache=writeback makes it fall, on cache=unsafe it stays
// (flush --json "unflushed").
type Unflushed struct {
	Cgroup      string `json:"cgroup,omitempty"`
	Measured    bool   `json:"measured"`
	NotMeasured string `json:"not_measured,omitempty"`
	// BeforeBytes and AfterBytes are dirty plus writeback at the first and
	// the last sample, bytes; null when not measured.
	BeforeBytes *int64 `json:"before_bytes"`
	AfterBytes  *int64 `json:"after_bytes"`
	// Fell: AfterBytes is at least FellBytes below BeforeBytes.
	Fell bool   `json:"fell"`
	Says string `json:"says"`
}

// FellBytes is how far the VM's unflushed bytes must drop over the window
// to count as fallen: QEMU's own small writes and page rounding move them
// by a few pages; a flush of a guest's writes moves MiBs.
const FellBytes = 1 << 20

// unflushedOf is the change between the first and last sample's readings
// (cgroup dirty plus writeback), said for the modes of the disks measured.
func unflushedOf(dir sampler.CgroupDir, samples []Sample, modes []string) *Unflushed {
	u := &Unflushed{Cgroup: dir.Cgroup}
	if dir.Unmeasured != "" {
		u.NotMeasured = dir.Unmeasured
		u.Says = "the VM's unflushed bytes in node RAM are not measured: " + dir.Unmeasured
		return u
	}
	var first, last *Sample
	for i := range samples {
		if samples[i].CgroupUnflushedBytes != nil {
			if first == nil {
				first = &samples[i]
			}
			last = &samples[i]
		}
	}
	if first == nil || first == last {
		u.NotMeasured = "the cgroup's memory.stat could not be read at two samples"
		u.Says = "the VM's unflushed bytes in node RAM are not measured: " + u.NotMeasured
		return u
	}
	b, a := *first.CgroupUnflushedBytes, *last.CgroupUnflushedBytes
	u.Measured, u.BeforeBytes, u.AfterBytes, u.Fell = true, &b, &a, b-a >= FellBytes
	change := fmt.Sprintf("the VM's dirty and writeback bytes in node RAM (cgroup %s) went from %s to %s", dir.Cgroup, units.Bytes(b), units.Bytes(a))
	unsafe, writeback := has(modes, "unsafe"), has(modes, "writeback")
	switch {
	case unsafe && !u.Fell:
		u.Says = change + ": they stay, as cache=unsafe keeps them however often the guest flushes"
	case unsafe:
		u.Says = change + ": they fell, yet cache=unsafe ignores the guest's flushes: the node wrote them back on its own (vm.dirty_expire_centisecs), or another disk's flush did"
	case writeback && u.Fell:
		u.Says = change + ": they fell, as cache=writeback's flushes write what the guest was told is done"
	case writeback && b < FellBytes:
		u.Says = change + ": nothing much was waiting to fall"
	case writeback:
		u.Says = change + ": they did not fall: the guest sent no flush that wrote them, or the flush did not reach storage"
	default:
		u.Says = change + ": no disk measured keeps writes in node page cache (none, directsync, writethrough)"
	}
	return u
}

func has(modes []string, m string) bool {
	for _, x := range modes {
		if x == m {
			return true
		}
	}
	return false
}
