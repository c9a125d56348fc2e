package main

import (
	"fmt"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/units"
)

// Verdicts of `discard --trim` / `--wait`, per disk.
const (
	verdictReturned   = "returned"        // the volume's allocation went down
	verdictPartly     = "partly-returned" // it went down, but something held part of it back
	verdictNot        = "not-returned"    // it did not go down (exit 1)
	verdictNotTrimmed = "not-trimmed"     // the guest trimmed nothing on this disk (no filesystem, no discards)
	verdictUnmeasured = "unmeasured"      // the storage's allocation cannot be measured here
)

// discardReason is one link of the reason chain: a stable code, the
// sentence, and the command that fixes it when there is one.
type discardReason struct {
	Code string `json:"code"`
	Text string `json:"text"`
	Fix  string `json:"fix,omitempty"`
}

// verdictIn is everything the verdict of one disk depends on; deltas are
// after minus before.
type verdictIn struct {
	VMID              int
	DiskID            string
	Bus               string // scsi, sata, ide, virtio
	ConfiguredDiscard string // on | ignore (Proxmox)
	RunningDiscard    string // unmap | ignore (QEMU)
	FixDrive          string // the disk's config line with discard=on, for the fix
	StorageType       string
	Thin              bool
	Mode              string // trim | wait

	// Guest side (trim mode): what guest-fstrim reported for filesystems
	// that sit on this disk alone.
	GuestMapped  bool   // filesystems could be placed on disks
	GuestTrimmed *int64 // nil: no mounted filesystem on this disk (or unknown)
	GuestShared  bool   // the disk is part of a multi-disk filesystem

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
}

// decideDiscard turns the measurements of one disk into a verdict and the
// reasons that apply, in the order a discard travels: QEMU's option, the
// guest, the storage's acceptance, the pool, snapshots, chunk size.
func decideDiscard(in verdictIn) (string, []discardReason) {
	var rs []discardReason
	add := func(code, text, fix string) { rs = append(rs, discardReason{code, text, fix}) }
	ignore := in.RunningDiscard == "ignore"
	activity := in.DevOps > 0 || in.OKOps > 0 || in.FailedOps > 0

	if ignore {
		text := "QEMU runs this disk with discard=ignore: it drops every discard the guest sends"
		if in.DevCounts && in.DevBytes > 0 {
			text += fmt.Sprintf(" (it received %s in %d requests and passed on none)", units.Bytes(in.DevBytes), in.DevOps)
		}
		if in.ConfiguredDiscard == "on" {
			add("discard-pending", text+"; the config already has discard=on, which applies at the next start",
				fmt.Sprintf("qm reboot %d (a full stop and start; a reboot inside the guest is not enough)", in.VMID))
		} else {
			add("discard-ignore", text, fmt.Sprintf("qm set %d --%s %s, then qm reboot %d (a full stop and start; a reboot inside the guest is not enough)",
				in.VMID, in.DiskID, in.FixDrive, in.VMID))
		}
	}
	// The guest.
	switch {
	case in.Mode == "trim" && in.GuestTrimmed != nil && *in.GuestTrimmed == 0:
		add("guest-sent-nothing", "the guest trimmed 0 bytes on this disk: ext4 only re-trims block groups that changed since its last trim, and space freed just now may still sit in the journal (ext4 commits every 5 s)",
			"in the guest: sync, wait a few seconds, then trim again")
	case in.Mode == "wait" && !activity:
		text := "no discard reached QEMU during the window: the guest sent none (was fstrim run in the guest during the window?)"
		if in.Bus == "virtio" {
			text = "no discard reached the storage during the window, and QEMU does not count discards at a VirtIO Block device: either the guest sent none, or its kernel is older than 5.0 (no virtio-blk discard)"
			if ignore {
				text = "QEMU does not count discards at a VirtIO Block device, so what the guest sent cannot be told; with discard=ignore none reached the storage"
			}
		}
		add("guest-sent-nothing", text, "")
	}
	// The storage's answer.
	if in.FailedOps > 0 {
		text := fmt.Sprintf("the storage refused %d discard requests (QEMU's discard-nb-failed): the volume does not accept discards", in.FailedOps)
		if in.StorageType == "lvmthin" && in.PoolDiscards == "ignore" {
			text += " because its thin pool ignores them"
		}
		add("storage-refused", text, "")
	}
	if in.StorageType == "lvmthin" && in.PoolDiscards == "ignore" {
		add("pool-ignores-discards", fmt.Sprintf("thin pool %s has discards=ignore: its thin volumes accept no discards, so nothing a guest trims is freed", in.PoolName),
			fmt.Sprintf("with every volume of the pool inactive (LVM refuses to leave 'ignore' on an active pool): lvchange --discards passdown %s", in.PoolName))
	}
	if in.Before == nil || in.After == nil {
		text := in.Unmeasured
		if text == "" {
			text = "the volume's allocation could not be read"
		}
		add("unmeasured", text, "")
		return verdictUnmeasured, rs
	}
	returned := *in.Before - *in.After
	tol := 2 * in.Resolution
	if returned < -tol {
		add("allocation-grew", fmt.Sprintf("the volume's allocation grew by %s during the measurement: the guest wrote meanwhile, which hides what a trim returned", units.Bytes(-returned)), "")
	}
	if returned > tol {
		verdict := verdictReturned
		if in.FailedOps > 0 {
			verdict = verdictPartly
		}
		if in.PoolBefore != nil && in.PoolAfter != nil {
			poolRet := *in.PoolBefore - *in.PoolAfter
			// Rounding of both figures, plus 5 %: a live pool is never
			// still (the lab: the volume gave back 1.89 GiB, the pool 1.86).
			slack := 2*in.PoolResolution + tol + returned/20
			if poolRet < returned-slack {
				if len(in.Snapshots) > 0 {
					verdict = verdictPartly
					add("snapshots-hold-blocks", fmt.Sprintf("the volume gave back %s but pool %s only %s: snapshot(s) %s still reference those blocks, which come back when the snapshots are deleted",
						units.Bytes(returned), in.PoolName, units.Bytes(max(poolRet, 0)), strings.Join(in.Snapshots, ", ")),
						fmt.Sprintf("qm delsnapshot %d <name> for snapshots you no longer need", in.VMID))
				} else {
					add("pool-busy", fmt.Sprintf("pool %s got back %s of the volume's %s: other volumes of the pool allocated space meanwhile", in.PoolName, units.Bytes(max(poolRet, 0)), units.Bytes(returned)), "")
				}
			}
		}
		if in.PoolDiscards == "nopassdown" {
			add("pool-nopassdown", fmt.Sprintf("pool %s has discards=nopassdown: the space went back to the pool, but the disk below the pool is not told", in.PoolName), "")
		}
		return verdict, rs
	}
	// Nothing came back.
	if !ignore && in.FailedOps == 0 && in.OKBytes > 0 {
		if in.StorageType == "lvmthin" && in.ChunkBytes > 0 && in.OKOps > 0 && in.OKBytes/in.OKOps < in.ChunkBytes {
			add("below-chunk-size", fmt.Sprintf("the storage accepted %s in %d discards, %s each on average, smaller than pool %s's chunk size (%s): a thin pool frees only whole chunks",
				units.Bytes(in.OKBytes), in.OKOps, units.Bytes(in.OKBytes/in.OKOps), in.PoolName, units.Bytes(in.ChunkBytes)), "")
		} else if len(in.Snapshots) > 0 && in.SnapshotHeldBytes != nil && *in.SnapshotHeldBytes > 0 {
			add("snapshots-hold-blocks", fmt.Sprintf("the storage accepted %s of discards but snapshot(s) %s hold %s of this volume's blocks", units.Bytes(in.OKBytes), strings.Join(in.Snapshots, ", "), units.Bytes(*in.SnapshotHeldBytes)),
				fmt.Sprintf("qm delsnapshot %d <name> for snapshots you no longer need", in.VMID))
		} else {
			add("already-free", fmt.Sprintf("the storage accepted %s of discards but the volume's allocation did not change: those ranges held nothing (trimmed before, or never written)", units.Bytes(in.OKBytes)), "")
		}
	}
	if !ignore || !in.Thin {
		// A disk the guest did not trim at all is not a failure to return.
		noFS := in.Mode == "trim" && in.GuestMapped && in.GuestTrimmed == nil && !in.GuestShared
		if !activity && (noFS || in.Mode == "wait") {
			if noFS {
				rs = append([]discardReason{{Code: "no-filesystem", Text: "no mounted filesystem of the guest sits on this disk: guest-fstrim trims mounted filesystems only"}}, rs...)
			}
			return verdictNotTrimmed, rs
		}
	}
	return verdictNot, rs
}
