package discard

import (
	"fmt"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/storage/storagetype"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// Input is everything the verdict of one disk depends on; deltas are after
// minus before.
type Input struct {
	VMID              int
	DiskID            string
	Bus               string // scsi, sata, ide, virtio
	ConfiguredDiscard string // on | ignore (Proxmox)
	RunningDiscard    string // unmap | ignore (QEMU)
	// FixDrive is the disk's config value with discard=on, for the fix.
	FixDrive    string
	StorageID   string
	StorageType string
	// Thin: discards can give space back here (storage.ReturnsSpace).
	Thin bool
	// Reserved: a zvol of a zfspool without sparse (full refreservation);
	// Dataset is its dataset, for the fix.
	Reserved bool
	Dataset  string
	Mode     Mode // Trim or Wait

	// Guest side (trim mode): what guest-fstrim reported for filesystems
	// that sit on this disk alone.
	GuestMapped  bool   // filesystems could be placed on disks
	GuestTrimmed *int64 // nil: no mounted filesystem on this disk (or unknown)
	// GuestShared names the filesystems that span this disk and others.
	GuestShared []string

	// QEMU: the device's unmap_* (discards the guest sent; not counted on
	// virtio-blk) and the protocol node's discard-* (what the storage got).
	DevOps, DevBytes          int64
	DevCounts                 bool // the device counts discards (not virtio-blk)
	OKOps, OKBytes, FailedOps int64

	// The storage.
	Unmeasured        string
	Before, After     *int64
	Resolution        int64
	PoolName          string
	PoolBefore        *int64
	PoolAfter         *int64
	PoolResolution    int64
	PoolDiscards      string
	ChunkBytes        int64
	Snapshots         []string
	SnapshotHeldBytes *int64

	// The --wait window: its length, the part the counters cover, its
	// gaps, and why it was cut short ("" when it was not).
	WindowSeconds  float64
	CoveredSeconds float64
	Gaps           []Gap
	Missed         int
	Cut            string
}

// Thresholds of the verdict.
const (
	// resolutionTolerance: a change within this many resolutions of the
	// allocation figure (both readings rounded) is no change.
	resolutionTolerance = 2
	// poolSlackDivisor: the pool may get back up to 1/20 (5 %) less than
	// the volume gave before it counts as held back. A live pool is never
	// still: in Lab 37 the volume gave back 1.89 GiB, the pool 1.86 GiB.
	poolSlackDivisor = 20
)

// Judge turns the measurements of one disk into a verdict and the reasons
// that apply, in the order a discard travels: QEMU's option, the guest,
// the storage's acceptance, the pool, snapshots, chunk size; then how much
// of the window the verdict stands on.
func Judge(in Input) (Verdict, []Reason) {
	v, rs := judge(in)
	if r, ok := windowReason(in); ok {
		rs = append(rs, r)
	}
	return v, rs
}

func judge(in Input) (Verdict, []Reason) {
	var rs []Reason
	add := func(code Code, text, fix string) { rs = append(rs, Reason{code, text, fix}) }
	ignore := in.RunningDiscard == "ignore"
	activity := in.DevOps > 0 || in.OKOps > 0 || in.FailedOps > 0

	if ignore {
		text := "QEMU runs this disk with discard=ignore: it drops every discard the guest sends"
		if in.DevCounts && in.DevBytes > 0 {
			text += fmt.Sprintf(" (it received %s in %d requests and passed on none)", units.Bytes(in.DevBytes), in.DevOps)
		}
		if in.ConfiguredDiscard == "on" {
			add(CodeDiscardPending, text+"; the config already has discard=on, which applies at the next start", reboot(in.VMID))
		} else {
			add(CodeDiscardIgnore, text, fmt.Sprintf("qm set %d --%s %s, then %s", in.VMID, in.DiskID, in.FixDrive, reboot(in.VMID)))
		}
	}
	// The guest.
	switch {
	case in.Mode == Trim && in.GuestTrimmed != nil && *in.GuestTrimmed == 0:
		add(CodeGuestSentNothing, "the guest trimmed 0 bytes on this disk: ext4 only re-trims block groups that changed since its last trim, and space freed just now may still sit in the journal (ext4 commits every 5 s)",
			"in the guest: sync, wait a few seconds, then trim again")
	case in.Mode == Wait && !activity:
		text := "no discard reached QEMU during the window: the guest sent none (was fstrim run in the guest during the window?)"
		if in.Bus == "virtio" {
			text = "no discard reached the storage during the window, and QEMU does not count discards at a VirtIO Block device: either the guest sent none, or its kernel is older than 5.0 (no virtio-blk discard)"
			if ignore {
				text = "QEMU does not count discards at a VirtIO Block device, so what the guest sent cannot be told; with discard=ignore none reached the storage"
			}
		}
		add(CodeGuestSentNothing, text, "")
	}
	if in.Mode == Trim && len(in.GuestShared) > 0 {
		add(CodeSharedFilesystem, fmt.Sprintf("this disk is one of several under the guest's %s: what the guest trimmed there cannot be split between them", strings.Join(in.GuestShared, ", ")), "")
	}
	// The storage's answer.
	thinLV := storagetype.Of(in.StorageType, nil).Pool == storagetype.PoolLVMThin
	lvmIgnores := thinLV && in.PoolDiscards == "ignore"
	if in.FailedOps > 0 {
		text := fmt.Sprintf("the storage refused %d discard requests (QEMU's discard-nb-failed): the volume does not accept discards", in.FailedOps)
		if lvmIgnores {
			text += " because its thin pool ignores them"
		}
		add(CodeStorageRefused, text, "")
	}
	if lvmIgnores {
		add(CodePoolIgnoresDiscards, fmt.Sprintf("thin pool %s has discards=ignore: its thin volumes accept no discards, so nothing a guest trims is freed", in.PoolName),
			fmt.Sprintf("with every volume of the pool inactive (LVM refuses to leave 'ignore' on an active pool): lvchange --discards passdown %s", in.PoolName))
	}
	if in.Before == nil || in.After == nil {
		text := in.Unmeasured
		if text == "" {
			text = "the volume's allocation could not be read"
		}
		add(CodeUnmeasured, text, "")
		return Unmeasured, rs
	}
	returned := *in.Before - *in.After
	tol := resolutionTolerance * in.Resolution
	if returned < -tol {
		add(CodeAllocationGrew, fmt.Sprintf("the volume's allocation grew by %s during the measurement: the guest wrote meanwhile, which hides what a trim returned", units.Bytes(-returned)), "")
	}
	if returned > tol {
		return judgeReturned(in, returned, tol, rs)
	}
	// Nothing came back.
	if !ignore && in.FailedOps == 0 && in.OKBytes > 0 {
		held, snaps := snapshotText(in.Snapshots, in.SnapshotHeldBytes)
		switch {
		case thinLV && in.ChunkBytes > 0 && in.OKOps > 0 && in.OKBytes/in.OKOps < in.ChunkBytes:
			add(CodeBelowChunkSize, fmt.Sprintf("the storage accepted %s in %d discards, %s each on average, smaller than pool %s's chunk size (%s): a thin pool frees only whole chunks",
				units.Bytes(in.OKBytes), in.OKOps, units.Bytes(in.OKBytes/in.OKOps), in.PoolName, units.Bytes(in.ChunkBytes)), "")
		case snaps && in.SnapshotHeldBytes != nil && *in.SnapshotHeldBytes > 0:
			add(CodeSnapshotsHoldBlocks, fmt.Sprintf("the storage accepted %s of discards but %s hold %s of this volume's blocks", units.Bytes(in.OKBytes), held, units.Bytes(*in.SnapshotHeldBytes)),
				snapshotFix(in.VMID))
		default:
			add(CodeAlreadyFree, fmt.Sprintf("the storage accepted %s of discards but the volume's allocation did not change: those ranges held nothing (trimmed before, or never written)", units.Bytes(in.OKBytes)), "")
		}
	}
	if !ignore || !in.Thin {
		// A disk the guest did not trim at all is not a failure to return.
		noFS := in.Mode == Trim && in.GuestMapped && in.GuestTrimmed == nil && len(in.GuestShared) == 0
		if !activity && (noFS || len(in.GuestShared) > 0 || in.Mode == Wait) {
			if noFS {
				rs = append([]Reason{{Code: CodeNoFilesystem, Text: "no mounted filesystem of the guest sits on this disk: guest-fstrim trims mounted filesystems only"}}, rs...)
			}
			return NotTrimmed, rs
		}
	}
	return NotReturned, rs
}

// judgeReturned: the volume's allocation went down by returned. Whether
// the pool got it back too decides between returned and partly-returned.
func judgeReturned(in Input, returned, tol int64, rs []Reason) (Verdict, []Reason) {
	add := func(code Code, text, fix string) { rs = append(rs, Reason{code, text, fix}) }
	verdict := Returned
	if in.FailedOps > 0 {
		verdict = PartlyReturned
	}
	if in.PoolBefore != nil && in.PoolAfter != nil {
		poolRet := *in.PoolBefore - *in.PoolAfter
		// Rounding of both figures, plus the slack of a live pool.
		slack := resolutionTolerance*in.PoolResolution + tol + returned/poolSlackDivisor
		if poolRet < returned-slack {
			got := units.Bytes(max(poolRet, 0))
			held, snaps := snapshotText(in.Snapshots, in.SnapshotHeldBytes)
			if in.Reserved {
				verdict = PartlyReturned
				add(CodeZvolRefreservation, fmt.Sprintf("the zvol freed %s but pool %s got back %s: storage %s is a zfspool without sparse, so Proxmox created the zvol with a refreservation of its full size and the pool's free space cannot grow whatever discard says",
					units.Bytes(returned), in.PoolName, got, in.StorageID),
					fmt.Sprintf("zfs set refreservation=none %s (this zvol), and pvesm set %s --sparse 1 for the zvols created from now on", in.Dataset, in.StorageID))
			}
			if snaps {
				verdict = PartlyReturned
				add(CodeSnapshotsHoldBlocks, fmt.Sprintf("the volume gave back %s but pool %s only %s: %s still reference those blocks, which come back when the snapshots are deleted",
					units.Bytes(returned), in.PoolName, got, held), snapshotFix(in.VMID))
			}
			if !in.Reserved && !snaps {
				add(CodePoolBusy, fmt.Sprintf("pool %s got back %s of the volume's %s: other volumes of the pool allocated space meanwhile", in.PoolName, got, units.Bytes(returned)), "")
			}
		}
	}
	if in.PoolDiscards == "nopassdown" {
		add(CodePoolNopassdown, fmt.Sprintf("pool %s has discards=nopassdown: the space went back to the pool, but the disk below the pool is not told", in.PoolName), "")
	}
	return verdict, rs
}

func snapshotFix(vmid int) string {
	return fmt.Sprintf("qm listsnapshot %d, then qm delsnapshot %d <name> for snapshots you no longer need", vmid, vmid)
}

// windowReason says how much of a --wait window with gaps, or cut short,
// the verdict stands on. QEMU's counters are cumulative: a gap in the
// middle loses no discard, only a cut end does.
func windowReason(in Input) (Reason, bool) {
	w := units.Number(in.WindowSeconds) + " s"
	if in.Cut != "" {
		pct := 0.0
		if in.WindowSeconds > 0 {
			pct = min(100, in.CoveredSeconds*100/in.WindowSeconds)
		}
		return Reason{CodeWindowCut, fmt.Sprintf("QEMU stopped answering %.1f s into the %s window (%s): the counters stand on that part only (%s of the window); discards after it are not counted, the allocation after is",
			in.CoveredSeconds, w, in.Cut, units.PercentWhole(pct)), ""}, true
	}
	if len(in.Gaps) == 0 && in.Missed == 0 {
		return Reason{}, false
	}
	var spans []string
	for _, g := range in.Gaps {
		spans = append(spans, fmt.Sprintf("%.1f-%.1f s", g.FromSeconds, g.ToSeconds))
	}
	where := ""
	if len(spans) > 0 {
		where = " at " + strings.Join(spans, ", ")
	}
	return Reason{CodeWindowGaps, fmt.Sprintf("the window has gaps: %d sample(s) missed%s (QMP busy or QEMU stopped); QEMU's counters are cumulative, so the verdict still stands on the whole %.1f s from the measurement before the window to the one after",
		in.Missed, where, in.CoveredSeconds), ""}, true
}
