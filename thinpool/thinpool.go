// Package thinpool owns the figures of the thin pools VM disks live on
// (LVM-thin pools and zfspool datasets): how full the pool's data and
// metadata are, how far its volumes' virtual sizes overcommit it, its discards
// mode, the volumes that hold its space and which VM or container uses each.
// `thin` reports them and `check` judges a VM's pools with the same figures and
// the same thresholds.
//
// One figure: thin snapshots count toward overcommit. A thin snapshot is a
// thin volume of its own: once its origin (or the snapshot) is rewritten,
// each can come to hold its full virtual size in the pool, and lvm2 sums them
// too in its "Sum of all thin volume sizes exceeds the size of thin pool"
// warning (lib/metadata/thin_manip.c, pool_check_overprovisioning). A ZFS
// snapshot likewise keeps what its zvol overwrites, up to the zvol's size.
// Their share is reported on its own (SnapshotVirtualBytes) so the ratio
// explains itself.
package thinpool

import (
	"fmt"
	"math"
	"sort"

	"github.com/pvediskcheck/pvediskcheck/storage/storagetype"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// Thresholds of every pool figure.
const (
	// WarnPercent is the data or metadata use from which a pool is worth a
	// warning: lvm2's dmeventd thin plugin starts logging "Thin pool ... is
	// now 80.00% full" at 80 % (daemons/dmeventd/plugins/thin, WARNING_THRESH)
	// and its autoextend policy acts from a threshold there at the earliest.
	WarnPercent = 80.0
	// FailPercent is the use from which a pool is a failure: `thin` exits 1
	// and `check` reports an error. At 100 % data dm-thin stops (or errors)
	// every write of every volume on the pool; at 100 % metadata the pool can
	// be damaged. 90 % leaves one dmeventd step (85 -> 90 -> 95) to act.
	FailPercent = 90.0
	// OvercommitRatio is the share of the pool the volumes' virtual sizes may
	// add up to: above it (not at it) the pool can fill before the guests'
	// disks do, what lvm2 warns about as "exceeds the size of thin pool".
	OvercommitRatio = 1.0
	// LargeVolumeBytes and LargeVolumeShare make a volume worth a
	// discard-off warning: from 1 GiB, or from 10 % of its pool (a small
	// pool's big volume), what it keeps after a trim matters.
	LargeVolumeBytes = 1 << 30
	LargeVolumeShare = 0.10
)

// Level is how a pool figure stands against the thresholds.
type Level string

// Levels.
const (
	LevelOK      Level = "ok"
	LevelWarning Level = "warning" // WarnPercent or more, or overcommitted
	LevelFailure Level = "failure" // FailPercent or more
)

// UseLevel judges a data or metadata use in percent (nil: unknown, LevelOK).
func UseLevel(percent *float64) Level {
	switch {
	case percent == nil:
		return LevelOK
	case *percent >= FailPercent:
		return LevelFailure
	case *percent >= WarnPercent:
		return LevelWarning
	}
	return LevelOK
}

// Code names a pool warning (docs/json.md: `thin --json` warnings[].code).
type Code string

// Warning codes.
const (
	CodeDataFull       Code = "pool-data-full"
	CodeMetadataFull   Code = "pool-metadata-full"
	CodeOvercommit     Code = "overcommit"
	CodeIgnoresDiscard Code = "pool-ignores-discards"
	CodeDiscardOff     Code = "discard-off"
)

// Warning is one thing wrong with a pool, with what fixes it.
type Warning struct {
	Code  Code   `json:"code"`
	Text  string `json:"text"`
	Fix   string `json:"fix,omitempty"`
	Level Level  `json:"-"` // Warning or Failure
}

// Storage types a pool is reported for, as Pool.Type names them.
const (
	TypeLVMThin = storagetype.NameLVMThin
	TypeZFSPool = storagetype.NameZFSPool
)

// Pool is one thin pool's figures (docs/json.md: `thin --json` pools[]).
type Pool struct {
	Storage           string   `json:"storage"`
	Type              string   `json:"type"` // lvmthin, zfspool
	Pool              string   `json:"pool"` // vg/thinpool or the ZFS dataset
	SizeBytes         int64    `json:"size_bytes"`
	AllocatedBytes    *int64   `json:"allocated_bytes"`
	DataPercent       *float64 `json:"data_percent"`
	MetadataPercent   *float64 `json:"metadata_percent"`
	MetadataSizeBytes int64    `json:"metadata_size_bytes,omitempty"`
	ChunkSizeBytes    int64    `json:"chunk_size_bytes,omitempty"`
	Discards          string   `json:"discards,omitempty"`
	// VirtualSumBytes is the sum of every thin volume's virtual size,
	// thin snapshots included (see the package comment).
	VirtualSumBytes int64 `json:"virtual_sum_bytes"`
	// SnapshotVirtualBytes is the snapshots' share of VirtualSumBytes.
	SnapshotVirtualBytes int64 `json:"snapshot_virtual_bytes"`
	// OvercommitRatio is VirtualSumBytes / SizeBytes (0 for a pool of size 0).
	OvercommitRatio float64 `json:"overcommit_ratio"`
	// Volumes are the volumes (not the snapshots), biggest allocation first.
	Volumes  []Volume  `json:"volumes"`
	Warnings []Warning `json:"warnings"`
	// Fill is when the pool stops accepting writes and what then happens
	// (LVM thin pools only).
	Fill *Fill `json:"fill,omitempty"`
}

// Volume is one thin volume of a pool and who uses it.
type Volume struct {
	Name           string   `json:"name"`
	VMID           int      `json:"vmid"`           // 0 when unknown
	Guest          string   `json:"guest"`          // vm, ct, unreferenced
	Disk           string   `json:"disk,omitempty"` // scsi1, rootfs, mp0, unused0
	VirtualBytes   int64    `json:"virtual_bytes"`
	AllocatedBytes *int64   `json:"allocated_bytes"`
	DataPercent    *float64 `json:"data_percent"`
	Discard        string   `json:"discard"` // on, ignore, n/a (containers: pct fstrim)
	Snapshots      []string `json:"snapshots"`
}

// Report is what `thin` prints (docs/json.md: `thin --json`).
type Report struct {
	Pools []Pool   `json:"pools"`
	Notes []string `json:"notes,omitempty"`
}

// Failing reports a pool whose data or metadata use is at FailPercent or more.
func (r *Report) Failing() bool {
	for i := range r.Pools {
		if r.Pools[i].Level() == LevelFailure {
			return true
		}
	}
	return false
}

// Level is the worse of the pool's data and metadata levels.
func (p *Pool) Level() Level {
	d, m := UseLevel(p.DataPercent), UseLevel(p.MetadataPercent)
	if d == LevelFailure || m == LevelFailure {
		return LevelFailure
	}
	if d == LevelWarning || m == LevelWarning {
		return LevelWarning
	}
	return LevelOK
}

// Overcommitted reports virtual sizes above OvercommitRatio times the pool.
func (p *Pool) Overcommitted() bool { return p.OvercommitRatio > OvercommitRatio }

// finish computes the ratio and sorts the volumes by allocation, biggest
// first (unknown last), then by name.
func (p *Pool) finish() {
	if p.SizeBytes > 0 {
		p.OvercommitRatio = float64(p.VirtualSumBytes) / float64(p.SizeBytes)
	}
	sort.SliceStable(p.Volumes, func(i, j int) bool {
		a, b := p.Volumes[i].AllocatedBytes, p.Volumes[j].AllocatedBytes
		switch {
		case a == nil && b == nil:
		case a == nil:
			return false
		case b == nil:
			return true
		case *a != *b:
			return *a > *b
		}
		return p.Volumes[i].Name < p.Volumes[j].Name
	})
}

// isZFS: the pool is a ZFS dataset (its storage type's row says).
func (p *Pool) isZFS() bool { return storagetype.Of(p.Type, nil).Pool == storagetype.PoolZFS }

// growHint is how the pool grows, for the fixes.
func (p *Pool) growHint() string {
	if p.isZFS() {
		return "add space to the ZFS pool (zpool add, or larger disks) holding " + p.Pool
	}
	return "grow the pool (lvextend -L +SIZE " + p.Pool + ")"
}

// Judge lists what is wrong with the pool (pure: from its figures).
func Judge(p *Pool) []Warning {
	ws := []Warning{}
	use := func(code Code, what string, pct *float64, consequence, fix string) {
		lvl := UseLevel(pct)
		if lvl == LevelOK {
			return
		}
		ws = append(ws, Warning{code, fmt.Sprintf("%s at %.2f %% (warning from %.0f %%, failure from %.0f %%): %s",
			what, *pct, WarnPercent, FailPercent, consequence), fix, lvl})
	}
	if p.Overcommitted() {
		text := fmt.Sprintf("its volumes total %.1f GiB on a %.1f GiB pool (%.1fx)", units.GiBf(p.VirtualSumBytes), units.GiBf(p.SizeBytes), p.OvercommitRatio)
		if p.SnapshotVirtualBytes > 0 {
			text += fmt.Sprintf(", %.1f GiB of it thin snapshots (each can come to hold its full size)", units.GiBf(p.SnapshotVirtualBytes))
		}
		text += ": writes fail for every guest on it once the pool fills"
		fix := fmt.Sprintf("lvextend -L +%.0fG %s (or move disks to other storage, or delete old snapshots)",
			math.Ceil(units.GiBf(p.VirtualSumBytes-p.SizeBytes)), p.Pool)
		if p.isZFS() {
			fix = p.growHint() + " (or move disks to other storage, or delete old snapshots)"
		}
		ws = append(ws, Warning{CodeOvercommit, text, fix, LevelWarning})
	}
	use(CodeDataFull, "data", p.DataPercent, "at 100 % the pool stops every write of every volume on it",
		"trim the guests (pvediskcheck discard VMID --trim), delete old snapshots, or "+p.growHint())
	use(CodeMetadataFull, "metadata", p.MetadataPercent, "a pool whose metadata fills up can be damaged",
		"lvextend --poolmetadatasize +SIZE "+p.Pool)
	if p.Discards == "ignore" {
		ws = append(ws, Warning{CodeIgnoresDiscard, "the pool ignores discards: nothing a guest trims is freed",
			"with every volume of the pool inactive: lvchange --discards passdown " + p.Pool, LevelWarning})
	}
	for _, v := range p.Volumes {
		if v.Guest != GuestVM || v.Discard != DiscardIgnore {
			continue
		}
		if v.VirtualBytes >= LargeVolumeBytes || p.SizeBytes > 0 && float64(v.VirtualBytes) >= LargeVolumeShare*float64(p.SizeBytes) {
			ws = append(ws, Warning{CodeDiscardOff,
				fmt.Sprintf("VM %d %s (%s, %s allocated of %s) has discard off: what its guest trims never returns to the pool",
					v.VMID, v.Disk, v.Name, units.BytesPtr(v.AllocatedBytes), units.Bytes(v.VirtualBytes)),
				fmt.Sprintf("pvediskcheck discard %d %s (shows the qm set that turns it on)", v.VMID, v.Disk), LevelWarning})
		}
	}
	return append(ws, judgeFill(p)...)
}
