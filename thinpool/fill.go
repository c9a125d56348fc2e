package thinpool

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/lvm"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// What an LVM thin pool does when it fills, and when that is (issue 27).
//
// dm-thin (drivers/md/dm-thin.c) stops taking writes at 100 % data or 100 %
// metadata. At 100 % data a pool with lv_when_full "queue" (lvm2's default)
// holds the writes for no_space_timeout seconds (the dm_thin_pool module
// parameter, 60 by default, 0 for ever), then fails them with ENOSPC, as an
// "error" pool does at once (lvmthin(7), "Data space exhaustion"). QEMU's
// default werror=enospc (qemu-server sets no werror unless the drive has
// one) pauses the VM on ENOSPC (query-status io-error, io-status nospace).
// At 100 % metadata dm-thin turns the pool read-only: writes fail with EIO,
// which werror=enospc reports to the guest instead of pausing.
//
// lvm2's dmeventd extends a monitored pool (data and metadata) by
// thin_pool_autoextend_percent when it passes
// thin_pool_autoextend_threshold (100: off; lvm.conf, read with lvmconfig),
// as long as the VG has free extents.

// LVMConfigArgv reads LVM's autoextend policy as lvm2 applies it (defaults
// included).
var LVMConfigArgv = []string{"lvmconfig", "--type", "full",
	"activation/thin_pool_autoextend_threshold", "activation/thin_pool_autoextend_percent"}

// NoSpaceTimeoutPath is dm_thin_pool's no_space_timeout below sysfs.
const NoSpaceTimeoutPath = "module/dm_thin_pool/parameters/no_space_timeout"

// DefaultNoSpaceTimeout is dm-thin's no_space_timeout when the module
// parameter cannot be read (dm-thin.c: no_space_timeout_secs = 60).
const DefaultNoSpaceTimeout = 60

// MetadataFirstPercent is the metadata use from which a pool whose metadata
// fills before its data is worth a warning: below it a young pool's fixed
// metadata share (lvm2 sizes it for the pool's full chunk count) often
// exceeds its data share without any risk.
const MetadataFirstPercent = 50.0

// ThinMetadataMaxBytes is the largest thin pool metadata lvm2 creates or
// extends to (DM_THIN_MAX_METADATA_SIZE, 15.81 GiB).
const ThinMetadataMaxBytes = 16974323712

// Warning codes of a pool that fills.
const (
	CodeMetadataFirst          Code = "pool-metadata-first"
	CodeDiscardsNotPassed      Code = "pool-discards-not-passed-down"
	WhenFullQueue                   = "queue"
	WhenFullError                   = "error"
	LimitData                       = "data"
	LimitMetadata                   = "metadata"
	monitored                       = "monitored"
	notMonitored                    = "not monitored"
	autoextendOffThreshold          = 100
	autoextendMinimumThreshold      = 50
)

// Autoextend is LVM's autoextend policy (lvm.conf activation/).
type Autoextend struct {
	// ThresholdPercent is thin_pool_autoextend_threshold: 100 is off,
	// below 50 lvm2 uses 50.
	ThresholdPercent int `json:"threshold_percent"`
	// Percent is thin_pool_autoextend_percent, of the pool's current size.
	Percent int `json:"percent"`
}

// On reports a policy that extends pools.
func (a *Autoextend) On() bool {
	return a != nil && a.ThresholdPercent < autoextendOffThreshold && a.Percent > 0
}

// ParseLVMConfig reads lvmconfig's key=value lines (LVMConfigArgv).
func ParseLVMConfig(b []byte) (Autoextend, error) {
	a := Autoextend{ThresholdPercent: -1, Percent: -1}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < 0 {
			return Autoextend{}, fmt.Errorf("lvmconfig: %s is %s", units.Clip(k, 60), units.Clip(v, 40))
		}
		switch strings.TrimSpace(k) {
		case "thin_pool_autoextend_threshold":
			a.ThresholdPercent = n
		case "thin_pool_autoextend_percent":
			a.Percent = n
		}
	}
	if a.ThresholdPercent < 0 || a.Percent < 0 {
		return Autoextend{}, fmt.Errorf("lvmconfig printed no thin_pool_autoextend_threshold/percent: %.120q", strings.TrimSpace(string(b)))
	}
	if a.ThresholdPercent > autoextendOffThreshold {
		a.ThresholdPercent = autoextendOffThreshold
	}
	if a.ThresholdPercent < autoextendMinimumThreshold {
		a.ThresholdPercent = autoextendMinimumThreshold
	}
	return a, nil
}

// PV is a device under the pool's data and whether it takes discards.
type PV struct {
	Device string `json:"device"`
	// DiscardMaxBytes is the device's queue/discard_max_bytes (0: it takes
	// no discards); nil when sysfs could not tell.
	DiscardMaxBytes *int64 `json:"discard_max_bytes"`
}

// Fill is when an LVM thin pool stops accepting writes and what then
// happens to the VMs on it (docs/json.md: `thin --json` pools[].fill).
type Fill struct {
	// WhenFull is lv_when_full: queue or error ("" when lvs printed none).
	WhenFull string `json:"when_full"`
	// NoSpaceTimeoutSeconds is dm_thin_pool's no_space_timeout; nil when
	// sysfs has none (module not loaded, a copied tree).
	NoSpaceTimeoutSeconds *int `json:"no_space_timeout_seconds"`
	// Monitor is seg_monitor: monitored, not monitored, "" (unknown).
	Monitor string `json:"monitor"`
	// Autoextend is LVM's policy; nil when lvmconfig failed.
	Autoextend *Autoextend `json:"autoextend"`
	// VGFreeBytes is the VG's free space, what autoextend grows into.
	VGFreeBytes int64 `json:"vg_free_bytes"`
	// Grows: autoextend is on, dmeventd monitors the pool (or lvs did not
	// say) and the VG has free space.
	Grows bool `json:"grows"`
	// DataFreeBytes and MetadataFreeBytes are what is left now.
	DataFreeBytes     *int64 `json:"data_free_bytes"`
	MetadataFreeBytes *int64 `json:"metadata_free_bytes"`
	// FirstFull is what fills first at today's ratio of metadata to data:
	// data or metadata ("" when the pool's use is unknown).
	FirstFull string `json:"first_full,omitempty"`
	// WritesStopAfterBytes is how much more data the pool takes before it
	// stops accepting writes, autoextend's growth into the VG included.
	WritesStopAfterBytes *int64 `json:"writes_stop_after_bytes"`
	// Stops says when the pool stops accepting writes.
	Stops string `json:"stops"`
	// Then says what happens to the VMs on it.
	Then string `json:"then"`
	// PVs are the devices under the pool's data.
	PVs []PV `json:"pvs"`
}

// Facts are the node's facts a pool's Fill needs beyond lvs: read once
// per run (ReadFacts).
type Facts struct {
	Autoextend     *Autoextend
	NoSpaceTimeout *int
	// Discard maps a device to its discard_max_bytes (absent: unread).
	Discard map[string]int64
	Notes   []string
}

// ReadFacts runs lvmconfig and reads no_space_timeout and the PVs'
// discard_max_bytes of the report's pools. What cannot be read is a note:
// the pool figures stand without it.
func ReadFacts(ctx context.Context, n node.Node, r node.Runner, rep *lvm.Report) Facts {
	f := Facts{Discard: map[string]int64{}}
	if rep == nil {
		return f
	}
	hasPool := false
	var mapper map[string]string // /dev/mapper name -> dm-N, read once
	for i := range rep.LVs {
		l := &rep.LVs[i]
		if !l.IsThinPool() {
			continue
		}
		hasPool = true
		for _, d := range rep.PVs(l) {
			if _, done := f.Discard[d]; done {
				continue
			}
			dev := d
			if name, ok := strings.CutPrefix(d, "/dev/mapper/"); ok {
				if mapper == nil {
					mapper = dmNames(ctx, n)
				}
				if dev = mapper[name]; dev == "" {
					continue // not mapped: unread
				}
			}
			if v, ok := discardMax(ctx, n, dev); ok {
				f.Discard[d] = v
			}
		}
	}
	if !hasPool {
		return f
	}
	if out, err := r.Run(ctx, LVMConfigArgv...); err != nil {
		f.Notes = append(f.Notes, fmt.Sprintf("autoextend unknown: `%s`: %v", strings.Join(LVMConfigArgv, " "), err))
	} else if a, err := ParseLVMConfig(out); err != nil {
		f.Notes = append(f.Notes, "autoextend unknown: "+err.Error())
	} else {
		f.Autoextend = &a
	}
	if n.Paths.Sys != "" {
		if b, err := n.ReadFile(ctx, filepath.Join(n.Paths.Sys, NoSpaceTimeoutPath)); err == nil {
			if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && v >= 0 {
				f.NoSpaceTimeout = &v
			}
		}
	}
	return f
}

var (
	blockName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)
	// A partition's disk: nvme0n1p3, mmcblk0p1, loop0p1 -> ...p; sda3, vdb1 -> sda, vdb.
	partP     = regexp.MustCompile(`^(.*\d)p\d+$`)
	partPlain = regexp.MustCompile(`^([a-z]+)\d+$`)
)

// dmNames maps each device-mapper device's name (its /dev/mapper/ name: a
// PV on LUKS or multipath) to its kernel name dm-N, from sysfs'
// block/dm-N/dm/name (Linux Documentation/ABI/testing/sysfs-block-dm). A
// LUKS mapping opened without allow-discards has discard_max_bytes 0 there
// whatever the disk below takes.
func dmNames(ctx context.Context, n node.Node) map[string]string {
	out := map[string]string{}
	if n.Paths.Sys == "" {
		return out
	}
	ents, err := os.ReadDir(filepath.Join(n.Paths.Sys, "class/block"))
	if err != nil {
		return out
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "dm-") {
			continue
		}
		if b, err := n.ReadFile(ctx, filepath.Join(n.Paths.Sys, "class/block", e.Name(), "dm/name")); err == nil {
			if name := strings.TrimSpace(string(b)); name != "" {
				out[name] = e.Name()
			}
		}
	}
	return out
}

// discardMax reads a device's queue/discard_max_bytes, a partition's from
// its disk.
func discardMax(ctx context.Context, n node.Node, dev string) (int64, bool) {
	name := strings.TrimPrefix(dev, "/dev/")
	if n.Paths.Sys == "" || !blockName.MatchString(name) {
		return 0, false
	}
	names := []string{name}
	if m := partP.FindStringSubmatch(name); m != nil {
		names = append(names, m[1])
	} else if m := partPlain.FindStringSubmatch(name); m != nil {
		names = append(names, m[1])
	}
	for _, nm := range names {
		b, err := n.ReadFile(ctx, filepath.Join(n.Paths.Sys, "class/block", nm, "queue/discard_max_bytes"))
		if err != nil {
			continue
		}
		if v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && v >= 0 {
			return v, true
		}
	}
	return 0, false
}

// FillOf works out when pool p (built from row pl of rep) stops accepting
// writes and what then happens, from the node's facts f.
func FillOf(p *Pool, pl *lvm.LV, rep *lvm.Report, f Facts) *Fill {
	fl := &Fill{WhenFull: pl.WhenFull, NoSpaceTimeoutSeconds: f.NoSpaceTimeout, Monitor: pl.Monitor,
		Autoextend: f.Autoextend, VGFreeBytes: pl.VGFreeBytes, PVs: []PV{}}
	for _, d := range rep.PVs(pl) {
		pv := PV{Device: d}
		if v, ok := f.Discard[d]; ok {
			pv.DiscardMaxBytes = &v
		}
		fl.PVs = append(fl.PVs, pv)
	}
	fl.Grows = fl.Autoextend.On() && fl.Monitor != notMonitored && fl.VGFreeBytes > 0
	if p.AllocatedBytes != nil {
		free := max(p.SizeBytes-*p.AllocatedBytes, 0)
		fl.DataFreeBytes = &free
	}
	if p.MetadataPercent != nil && p.MetadataSizeBytes > 0 {
		free := int64(float64(p.MetadataSizeBytes) * (100 - *p.MetadataPercent) / 100)
		fl.MetadataFreeBytes = &free
	}
	fl.limits(p)
	fl.Stops = fl.stops(p)
	fl.Then = fl.then()
	return fl
}

// limits sets FirstFull and WritesStopAfterBytes: the pool's data can reach
// its size plus what autoextend adds from the VG; its metadata, grown by
// the same factor (up to ThinMetadataMaxBytes), fills at today's ratio of
// metadata to data once the data reaches alloc x 100 / metadata%.
func (fl *Fill) limits(p *Pool) {
	if p.AllocatedBytes == nil || p.SizeBytes <= 0 {
		return
	}
	alloc := float64(*p.AllocatedBytes)
	dataCap := float64(p.SizeBytes)
	if fl.Grows {
		dataCap += float64(fl.VGFreeBytes)
	}
	limit, first := dataCap, LimitData
	if m := p.MetadataPercent; m != nil && *m > 0 && p.MetadataSizeBytes > 0 {
		meta := float64(p.MetadataSizeBytes) * dataCap / float64(p.SizeBytes)
		meta = min(meta, max(float64(ThinMetadataMaxBytes), float64(p.MetadataSizeBytes)))
		metaCap := alloc * 100 / *m * meta / float64(p.MetadataSizeBytes)
		if *m >= 100 || metaCap < limit {
			limit, first = metaCap, LimitMetadata
		}
	}
	after := max(int64(limit-alloc), 0)
	fl.WritesStopAfterBytes, fl.FirstFull = &after, first
}

// stops says when the pool stops accepting writes.
func (fl *Fill) stops(p *Pool) string {
	grow := ""
	switch a := fl.Autoextend; {
	case a == nil:
		grow = "autoextend unknown (lvmconfig failed)"
	case !a.On():
		grow = fmt.Sprintf("autoextend off (thin_pool_autoextend_threshold %d)", a.ThresholdPercent)
	case fl.Monitor == notMonitored:
		grow = fmt.Sprintf("autoextend is set (at %d %% by %d %%) but dmeventd does not monitor the pool, so it does not grow", a.ThresholdPercent, a.Percent)
	case fl.VGFreeBytes <= 0:
		grow = fmt.Sprintf("autoextend is set (at %d %% by %d %%) but VG %s has no free space to grow into", a.ThresholdPercent, a.Percent, vgOf(p.Pool))
	default:
		grow = fmt.Sprintf("autoextend grows it at %d %% by %d %% while VG %s has free space (%s)", a.ThresholdPercent, a.Percent, vgOf(p.Pool), units.Bytes(fl.VGFreeBytes))
	}
	if fl.WritesStopAfterBytes == nil {
		return "at 100 % data or metadata (use unknown: the pool is not active); " + grow
	}
	at := "100 % data"
	if fl.FirstFull == LimitMetadata {
		at = "100 % metadata (it fills before the data at today's ratio)"
	}
	if fl.Grows {
		at += ", once the VG's free space is used up"
	}
	return fmt.Sprintf("after %s more data, at %s; %s", units.Bytes(*fl.WritesStopAfterBytes), at, grow)
}

// then says what happens to the VMs when the pool stops.
func (fl *Fill) then() string {
	const pause = "QEMU pauses each VM that writes (werror=enospc, its default; a drive with werror=report or ignore hands the error to the guest instead) until space is added and the VM is resumed (qm resume)"
	if fl.FirstFull == LimitMetadata {
		return "dm-thin turns the pool read-only: writes fail with EIO, which QEMU passes to the guests (werror=enospc pauses only on ENOSPC), so their filesystems see I/O errors; the pool needs more metadata (lvextend --poolmetadatasize) and may need lvconvert --repair before it takes writes again"
	}
	switch fl.WhenFull {
	case WhenFullError:
		return "writes to every volume on it fail at once with ENOSPC (lv_when_full error): " + pause
	case WhenFullQueue:
		t := DefaultNoSpaceTimeout
		known := "no_space_timeout"
		if fl.NoSpaceTimeoutSeconds == nil {
			known = "no_space_timeout unread, dm-thin's default"
		} else {
			t = *fl.NoSpaceTimeoutSeconds
		}
		if t == 0 {
			return "writes to every volume on it wait with no time limit (lv_when_full queue, no_space_timeout 0): the guests hang and QEMU does not pause them; memory fills with the held writes"
		}
		return fmt.Sprintf("writes to every volume on it wait (lv_when_full queue): the guests hang for up to %d s (%s), then the writes fail with ENOSPC: %s", t, known, pause)
	}
	return "writes to every volume on it wait or fail (lv_when_full unknown); on ENOSPC " + pause
}

func vgOf(pool string) string {
	vg, _, _ := strings.Cut(pool, "/")
	return vg
}

// judgeFill adds the warnings of a pool that fills: metadata that fills
// before the data, and discards that the pool frees but does not pass to
// the devices below.
func judgeFill(p *Pool) []Warning {
	fl := p.Fill
	if fl == nil {
		return nil
	}
	var ws []Warning
	if fl.FirstFull == LimitMetadata && p.MetadataPercent != nil && *p.MetadataPercent >= MetadataFirstPercent && UseLevel(p.MetadataPercent) == LevelOK {
		ws = append(ws, Warning{CodeMetadataFirst,
			fmt.Sprintf("metadata (%.2f %%) fills before data (%s): at 100 %% metadata the pool turns read-only and guests get I/O errors instead of pausing", *p.MetadataPercent, units.PercentPtr(p.DataPercent)),
			"lvextend --poolmetadatasize +SIZE " + p.Pool, LevelWarning})
	}
	if p.Discards == "nopassdown" {
		ws = append(ws, Warning{CodeDiscardsNotPassed,
			"the pool frees what the guests trim but does not pass the discards down (discards nopassdown): the SSD below never learns the space is free",
			"with every volume of the pool inactive: lvchange --discards passdown " + p.Pool, LevelWarning})
	} else if p.Discards == "passdown" && len(fl.PVs) > 0 {
		var none []string
		for _, pv := range fl.PVs {
			if pv.DiscardMaxBytes == nil {
				return ws // one unread: cannot say
			}
			if *pv.DiscardMaxBytes == 0 {
				none = append(none, pv.Device)
			}
		}
		if len(none) == len(fl.PVs) {
			ws = append(ws, Warning{CodeDiscardsNotPassed,
				fmt.Sprintf("the pool frees what the guests trim, but %s below it takes no discards (discard_max_bytes 0): dm-thin stops passing them down, and the SSD never learns the space is free", strings.Join(none, ", ")),
				"nothing on the pool: the device below does not support discard (a RAID controller or a virtual disk in between); trim the disk at a layer that does", LevelWarning})
		}
	}
	return ws
}

// DiskThen says what a full pool does to one disk with the drive's werror
// ("" is QEMU's default, enospc): ENOSPC (data full) pauses the VM under
// enospc and stop; EIO (metadata full, a read-only pool) pauses it only
// under stop; report and ignore hand the error to the guest.
func (fl *Fill) DiskThen(werror string) string {
	eio := fl.FirstFull == LimitMetadata
	switch {
	case werror == "stop":
		return "werror=stop: the VM pauses"
	case werror == "report" || werror == "ignore":
		return "werror=" + werror + ": the guest gets the write errors"
	case eio:
		return "werror " + orDefault(werror) + ": EIO reaches the guest"
	case fl.WhenFull == WhenFullQueue && fl.NoSpaceTimeoutSeconds != nil && *fl.NoSpaceTimeoutSeconds == 0:
		return "werror " + orDefault(werror) + ": the guest hangs, the VM is not paused"
	}
	return "werror " + orDefault(werror) + ": the VM pauses"
}

func orDefault(werror string) string {
	if werror == "" || werror == "enospc" {
		return "enospc (default)"
	}
	return werror
}

// Fix is what keeps the pool from filling: autoextend where the VG has
// space, more metadata where that fills first, else space in the VG.
func (fl *Fill) Fix(p *Pool) string {
	switch {
	case fl.FirstFull == LimitMetadata:
		return "lvextend --poolmetadatasize +SIZE " + p.Pool
	case fl.Grows:
		return "keep free space in VG " + vgOf(p.Pool) + " for autoextend (vgextend " + vgOf(p.Pool) + " DEVICE), or trim the guests and delete old snapshots"
	case fl.VGFreeBytes > 0:
		return fmt.Sprintf("lvextend -L +SIZE %s (VG %s has %s free), or let dmeventd do it: thin_pool_autoextend_threshold = 80 in /etc/lvm/lvm.conf", p.Pool, vgOf(p.Pool), units.Bytes(fl.VGFreeBytes))
	}
	return "trim the guests (pvediskcheck discard VMID --trim) and delete old snapshots, or add a disk to VG " + vgOf(p.Pool) + " (vgextend) and grow the pool"
}

// FillLevel is how worth a finding of its own a pool's filling is is worth a finding of its own: data
// or metadata at WarnPercent or more, or metadata filling first from
// MetadataFirstPercent; the level is the pool's, warning at least.
func (p *Pool) FillLevel() Level {
	if p.Fill == nil {
		return LevelOK
	}
	if l := p.Level(); l != LevelOK {
		return l
	}
	if p.Fill.FirstFull == LimitMetadata && p.MetadataPercent != nil && *p.MetadataPercent >= MetadataFirstPercent {
		return LevelWarning
	}
	return LevelOK
}
