// Package discard proves whether space a guest trims really goes back to the
// storage. The guest cannot tell (every controller advertises discard
// whatever the disk's setting, and fstrim reports what the filesystem handed
// down), and QEMU's device counters (unmap_*) count discards even when QEMU
// drops them. What proves it is the protocol block node's discard-* counters
// (what reached the storage) and the storage's own allocation figure
// (package alloc).
//
// The package owns the status view of a VM's disks (Targets, Warnings), the
// measurement (Measure, Watch on the shared sampler, guest-fstrim through
// the guest agent with the guest's filesystems placed on disks), and the
// pure verdict (Judge). Run does all of it for the command.
package discard

// Mode is what `discard` was asked to do.
type Mode string

// Modes.
const (
	// Status reports settings, allocation and since-start counters.
	Status Mode = "status"
	// Trim asks the guest agent for guest-fstrim and proves what came back.
	Trim Mode = "trim"
	// Wait watches a window while the admin trims in the guest.
	Wait Mode = "wait"
)

// Verdict is what a trim did for one disk.
type Verdict string

// Verdicts of --trim / --wait, per disk.
const (
	// Returned: the volume's allocation went down.
	Returned Verdict = "returned"
	// PartlyReturned: it went down, but something held part of it back
	// (snapshots, a zvol's refreservation) or the storage refused some
	// discards.
	PartlyReturned Verdict = "partly-returned"
	// NotReturned: it did not go down (exit 1).
	NotReturned Verdict = "not-returned"
	// NotTrimmed: the guest trimmed nothing on this disk (no filesystem,
	// no discards seen): nothing to prove.
	NotTrimmed Verdict = "not-trimmed"
	// Unmeasured: the storage's allocation cannot be measured here.
	Unmeasured Verdict = "unmeasured"
)

// Code names a reason or a warning; it is stable (scripts match on it).
type Code string

// Reason and warning codes, in the order a discard travels.
const (
	// CodeDiscardIgnore: QEMU drops the disk's discards (discard=ignore).
	CodeDiscardIgnore Code = "discard-ignore"
	// CodeDiscardPending: discard=on is configured but not running yet.
	CodeDiscardPending Code = "discard-pending"
	// CodeVirtioBlkDiscard: VirtIO Block needs a guest kernel >= 5.0 and
	// is not counted at the device.
	CodeVirtioBlkDiscard Code = "virtio-blk-discard"
	// CodeSSDOff: the guest sees a rotational disk.
	CodeSSDOff Code = "ssd-off"
	// CodeGuestSentNothing: no discard reached QEMU (or the guest trimmed
	// 0 bytes).
	CodeGuestSentNothing Code = "guest-sent-nothing"
	// CodeNoFilesystem: no mounted guest filesystem sits on the disk.
	CodeNoFilesystem Code = "no-filesystem"
	// CodeSharedFilesystem: the disk is one of several under a guest
	// filesystem; the guest's figure cannot be split between them.
	CodeSharedFilesystem Code = "shared-filesystem"
	// CodeStorageRefused: the storage failed discards (discard-nb-failed).
	CodeStorageRefused Code = "storage-refused"
	// CodePoolIgnoresDiscards: an LVM-thin pool with discards=ignore.
	CodePoolIgnoresDiscards Code = "pool-ignores-discards"
	// CodePoolNopassdown: an LVM-thin pool that does not pass discards down.
	CodePoolNopassdown Code = "pool-nopassdown"
	// CodeZvolRefreservation: a zvol of a zfspool without sparse reserves
	// its full size, so the pool's free space cannot grow.
	CodeZvolRefreservation Code = "zvol-refreservation"
	// CodeSnapshots: snapshots reference the volume's blocks (warning).
	CodeSnapshots Code = "snapshots"
	// CodeSnapshotsHoldBlocks: snapshots kept what the trim freed.
	CodeSnapshotsHoldBlocks Code = "snapshots-hold-blocks"
	// CodeBelowChunkSize: discards smaller than the thin pool's chunk.
	CodeBelowChunkSize Code = "below-chunk-size"
	// CodeAlreadyFree: discards accepted on ranges that held nothing.
	CodeAlreadyFree Code = "already-free"
	// CodeAllocationGrew: the guest wrote during the measurement.
	CodeAllocationGrew Code = "allocation-grew"
	// CodePoolBusy: other volumes of the pool allocated meanwhile.
	CodePoolBusy Code = "pool-busy"
	// CodeUnmeasured: the allocation cannot be read.
	CodeUnmeasured Code = "unmeasured"
	// CodeWindowGaps: samples of a --wait window were missed.
	CodeWindowGaps Code = "window-gaps"
	// CodeWindowCut: QEMU stopped answering before the window ended; the
	// verdict stands on the part before.
	CodeWindowCut Code = "window-cut"
)

// Reason is one link of the reason chain (or a standing warning): a stable
// code, the sentence, and the command that fixes it when there is one.
type Reason struct {
	Code Code   `json:"code"`
	Text string `json:"text"`
	Fix  string `json:"fix,omitempty"`
}
