package cache

import (
	"fmt"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/flush"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// Unflushed is what the VM's QEMU holds in node RAM now: the page-cache
// bytes its cgroup has dirty and under writeback (layer disk.Cgroup), next
// to the cache modes that put them there (cache --json "unflushed").
type Unflushed struct {
	// Measured is false where the node has no cgroup of the VM to read;
	// NotMeasured then says why (the bytes are null, never 0).
	Measured    bool   `json:"measured"`
	NotMeasured string `json:"not_measured,omitempty"`
	// Cgroup is the VM's cgroup ("/qemu.slice/100.scope"), CgroupVersion
	// 1 or 2, From how it was found ("/proc/PID/cgroup" or "assumed").
	Cgroup        string `json:"cgroup,omitempty"`
	CgroupVersion int    `json:"cgroup_version,omitempty"`
	From          string `json:"from,omitempty"`
	// DirtyBytes and WritebackBytes are memory.stat's (v2 file_dirty and
	// file_writeback, v1 dirty and writeback); UnflushedBytes their sum,
	// the most a host crash now loses of what the guest was told is
	// written. Bytes; null when not measured.
	DirtyBytes     *int64 `json:"dirty_bytes"`
	WritebackBytes *int64 `json:"writeback_bytes"`
	UnflushedBytes *int64 `json:"unflushed_bytes"`
	// IOPressure is the cgroup's io.pressure (null where the node has
	// none); IO its io.stat per device (v2).
	IOPressure *sampler.Pressure  `json:"io_pressure"`
	IO         []sampler.DeviceIO `json:"io,omitempty"`
	// Risk is the worst of the VM's disks that write through the node page
	// cache: "flushed" (cache=unsafe: the guest's flushes do not write
	// these bytes), "unflushed" (writeback: what the guest has not flushed
	// yet), "" (none, directsync, writethrough: nothing acknowledged waits
	// in the page cache, the bytes should be about 0). Modes are those
	// disks' modes, by disk id.
	Risk  Risk              `json:"risk"`
	Modes map[string]string `json:"page_cache_modes"`
	// Verify is, with --verify, how the bytes moved over the flush window
	// (flush's: they fall for writeback when the guest flushes, stay for
	// unsafe); omitted without.
	Verify *flush.Unflushed `json:"verify,omitempty"`
	// Says is the sentence cache prints.
	Says  string   `json:"says"`
	Notes []string `json:"notes,omitempty"`
}

// StrayBytes is what the cgroup may have dirty with no disk in writeback
// or unsafe mode before cache says the bytes are not the disks': QEMU's
// own files (a log, a pid file) and rounding to pages stay below it.
const StrayBytes = 1 << 20

// unflushed is the view of a cgroup reading c (nil: the layer was not
// read) over the view's disks.
func unflushed(c *sampler.Cgroup, disks []Disk) *Unflushed {
	if c == nil {
		return nil
	}
	u := &Unflushed{Cgroup: c.Cgroup, CgroupVersion: c.Version, From: c.From, Modes: map[string]string{}, Notes: c.Notes}
	for _, d := range disks {
		if !d.pageCache {
			continue
		}
		r := risk(d)
		if r == RiskNone {
			continue
		}
		u.Modes[d.ID] = d.Shown
		if r == RiskFlushed || u.Risk == RiskNone {
			u.Risk = r
		}
	}
	if !c.Measured() {
		u.NotMeasured = c.Unmeasured
		u.Says = "unflushed bytes in node RAM not measured: " + c.Unmeasured
		return u
	}
	dirty, wb, sum := c.DirtyBytes, c.WritebackBytes, c.UnflushedBytes()
	u.Measured, u.DirtyBytes, u.WritebackBytes, u.UnflushedBytes = true, &dirty, &wb, &sum
	u.IOPressure, u.IO = c.IOPressure, c.IO
	u.Says = u.says(sum)
	return u
}

// says is the sentence for sum bytes under the VM's modes.
func (u *Unflushed) says(sum int64) string {
	held := fmt.Sprintf("%s dirty or under writeback in node RAM (cgroup %s)", units.Bytes(sum), u.Cgroup)
	loses := fmt.Sprintf("a host crash now loses up to %s of writes the guest was told were done", units.Bytes(sum))
	switch u.Risk {
	case RiskFlushed:
		return held + ": " + loses + "; " + modesText(u.Modes, "unsafe") + " ignores the guest's flushes, so all of it is at risk"
	case RiskUnflushed:
		return held + ": " + loses + ", the part the guest has not flushed yet (" + modesText(u.Modes, "writeback") + ": a guest flush writes it)"
	}
	if sum > StrayBytes {
		return held + ": no disk keeps the guest's writes in node page cache (none, directsync, writethrough), yet the VM's cgroup has this much dirty: QEMU or another process in its scope writes through the page cache"
	}
	return held + ": no disk keeps the guest's writes in node page cache (none, directsync, writethrough); about 0, as it should be"
}

// modesText names the disks in mode ("cache=unsafe on scsi0, scsi1"), or
// the mode alone when none of them has it.
func modesText(modes map[string]string, mode string) string {
	var ids []string
	for id, m := range modes {
		if m == mode {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return "cache=" + mode
	}
	sortStrings(ids)
	return "cache=" + mode + " on " + strings.Join(ids, ", ")
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
