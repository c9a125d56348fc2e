package discard

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// ReclaimVerdict says whether what a trim would give back to a thin
// volume is known (issue 34).
type ReclaimVerdict string

// Reclaim verdicts.
const (
	// ReclaimKnown: the guest's filesystems describe the whole disk; the
	// amount is an upper bound, with its reasons.
	ReclaimKnown ReclaimVerdict = "known"
	// ReclaimUnknown: the guest agent answered, but what the disk holds
	// outside the filesystems it describes cannot be told (no filesystem
	// it knows, a partition it does not describe, LVM or RAID in the
	// guest, a filesystem over several disks, no use figures) or the
	// storage's allocation cannot be read. Never 0.
	ReclaimUnknown ReclaimVerdict = "unknown"
	// ReclaimNoAgent: no guest agent to ask (not configured, the VM not
	// running, no answer).
	ReclaimNoAgent ReclaimVerdict = "no-agent"
)

// Codes of the reclaimable figure's reasons.
const (
	// CodeFSMetadata: the filesystems' metadata (journal, inode tables,
	// superblocks) is not in their used bytes.
	CodeFSMetadata Code = "fs-metadata"
	// CodeTrimGranularity: the storage frees whole allocation units.
	CodeTrimGranularity Code = "trim-granularity"
	// CodePartitionTable: the partition table and the gaps between
	// partitions are not in any filesystem.
	CodePartitionTable Code = "partition-table"
	// CodeGuestPartitions: the disk has partitions the agent describes no
	// filesystem on (swap, unmounted), or partitions it cannot list.
	CodeGuestPartitions Code = "guest-partitions"
	// CodeGuestVirtual: LVM, RAID or encryption in the guest over the disk.
	CodeGuestVirtual Code = "guest-lvm"
	// CodeNoUsage: the agent reports no used bytes (qemu-ga before 3.0).
	CodeNoUsage Code = "no-usage"
	// CodeNoAgent: no guest agent answered.
	CodeNoAgent Code = "no-agent"
	// CodeNothingAllocated: the storage holds nothing of the volume.
	CodeNothingAllocated Code = "nothing-allocated"
)

// Reclaim is what a trim would give back to a thin volume: the storage's
// allocation minus what the guest's filesystems on the disk use.
type Reclaim struct {
	Verdict ReclaimVerdict `json:"verdict"`
	// UpToBytes is AllocatedBytes minus GuestUsedBytes (0 at least): what a
	// trim gives back at most. AtLeastBytes also takes off what the
	// filesystems keep outside their counted blocks (the disk's size minus
	// their total bytes: metadata, the partition table), where that is
	// known. Both null unless known.
	UpToBytes    *int64 `json:"up_to_bytes"`
	AtLeastBytes *int64 `json:"at_least_bytes"`
	// AllocatedBytes is the storage's figure it stands on (before the trim
	// in trim mode), ResolutionBytes how far that figure can be off;
	// GuestUsedBytes the filesystems' used bytes summed, each device once.
	AllocatedBytes  *int64 `json:"allocated_bytes"`
	ResolutionBytes int64  `json:"resolution_bytes"`
	GuestUsedBytes  *int64 `json:"guest_used_bytes"`
	// Reasons say why UpToBytes is an upper bound (known), or why the
	// figure is unknown.
	Reasons []Reason `json:"reasons"`
	// Fix is the command that reclaims it.
	Fix string `json:"fix"`
}

// ReclaimInput is what the reclaimable figure of one disk depends on.
type ReclaimInput struct {
	VMID int
	// Agent: the guest agent is configured; AgentErr is why it said
	// nothing (nil when it answered).
	Agent    bool
	AgentErr error
	// Seen is the disk as the agent reports it; nil when the agent placed
	// nothing on it.
	Seen *guestdisk.Seen
	// Alloc is the storage's allocation of the volume (before the trim).
	Alloc alloc.Result
	// Discard is the setting in effect (on or ignore), with the warning
	// that says how to turn it on, when it is not.
	Discard     string
	DiscardWarn *Reason
}

// JudgeReclaim says what a trim would give back to a thin volume.
func JudgeReclaim(in ReclaimInput) *Reclaim {
	r := &Reclaim{Reasons: []Reason{}, AllocatedBytes: in.Alloc.AllocatedBytes, ResolutionBytes: in.Alloc.ResolutionBytes}
	r.Fix = fmt.Sprintf("pvediskcheck discard %d --trim (or fstrim -av in the guest)", in.VMID)
	if !in.Agent {
		r.Fix = fmt.Sprintf("fstrim -av in the guest (pvediskcheck discard %d --wait 2m watches what it gives back)", in.VMID)
	}
	if in.Discard == "ignore" && in.DiscardWarn != nil {
		r.Reasons = append(r.Reasons, Reason{CodeDiscardIgnore, "QEMU drops this disk's discards now: a trim gives nothing back until discard=on runs", in.DiscardWarn.Fix})
	}
	if a := in.Alloc.AllocatedBytes; a != nil && *a == 0 {
		// Whatever the guest has: nothing to give back.
		zero := int64(0)
		r.Verdict, r.UpToBytes, r.AtLeastBytes = ReclaimKnown, &zero, &zero
		r.Reasons = append(r.Reasons, Reason{Code: CodeNothingAllocated, Text: "the storage holds nothing of this volume: a trim has nothing to give back"})
		return r
	}
	unknown := func(code Code, text string) *Reclaim {
		r.Verdict = ReclaimUnknown
		r.Reasons = append(r.Reasons, Reason{Code: code, Text: text})
		return r
	}
	if !in.Agent || in.AgentErr != nil {
		why := "no guest agent configured (agent: 1)"
		if in.AgentErr != nil {
			why = "the guest agent said nothing: " + in.AgentErr.Error()
		}
		r.Verdict = ReclaimNoAgent
		r.Reasons = append(r.Reasons, Reason{Code: CodeNoAgent, Text: why + ": what the guest's filesystems use is unknown, so is what a trim gives back"})
		return r
	}
	var fs []guestdisk.Filesystem
	if in.Seen != nil {
		fs = in.Seen.Filesystems
	}
	if len(fs) == 0 {
		return unknown(CodeNoFilesystem, "the guest agent knows no mounted filesystem on this disk (unmounted, swap, a raw database, or nothing): what its blocks hold is unknown")
	}
	byDevice := map[string]guestdisk.Filesystem{} // bind mounts: one device, several mount points
	var devices []string
	for _, f := range fs {
		switch {
		case len(f.Disks) > 1:
			return unknown(CodeSharedFilesystem, fmt.Sprintf("%s spans %s: its use cannot be split between them", f.Mountpoint, strings.Join(f.Disks, "+")))
		case f.Layout == guestdisk.OnVirtual:
			return unknown(CodeGuestVirtual, fmt.Sprintf("%s is on %s (LVM, RAID or encryption in the guest): what else it holds on this disk (other volumes, free extents) the agent does not describe", f.Mountpoint, f.Device))
		case f.UsedBytes == nil:
			return unknown(CodeNoUsage, fmt.Sprintf("the guest agent reports no use for %s (qemu-ga before 3.0)", f.Mountpoint))
		}
		if _, ok := byDevice[f.Device]; !ok {
			byDevice[f.Device] = f
			devices = append(devices, f.Device)
		}
	}
	partitioned := byDevice[devices[0]].Layout == guestdisk.OnPartition
	if partitioned {
		if in.Seen.Partitions == nil {
			return unknown(CodeGuestPartitions, "the filesystems are on partitions and the guest agent lists no partitions of the disk (guest-get-disks, qemu-ga 5.2): others (swap, unmounted) may hold blocks")
		}
		var bare []string
		for _, p := range in.Seen.Partitions {
			if _, ok := byDevice[path.Base(p)]; !ok {
				bare = append(bare, path.Base(p))
			}
		}
		if len(bare) > 0 {
			return unknown(CodeGuestPartitions, fmt.Sprintf("partition %s holds no filesystem the guest agent knows (swap, unmounted): what it holds is unknown", strings.Join(bare, ", ")))
		}
	}
	a := in.Alloc.AllocatedBytes
	if a == nil {
		return unknown(CodeUnmeasured, "the storage's allocation cannot be measured: "+units.OrDash(in.Alloc.Unmeasured))
	}
	var used, total int64
	totals := true
	slices.Sort(devices)
	for _, dev := range devices {
		f := byDevice[dev]
		used += *f.UsedBytes
		if f.TotalBytes == nil {
			totals = false
		} else {
			total += *f.TotalBytes
		}
	}
	r.Verdict = ReclaimKnown
	r.GuestUsedBytes = &used
	up := max(*a-used, 0)
	r.UpToBytes = &up
	outside := "some"
	if totals && in.Alloc.VirtualBytes != nil && *in.Alloc.VirtualBytes >= total {
		keep := *in.Alloc.VirtualBytes - total
		low := max(*a-used-keep, 0)
		r.AtLeastBytes = &low
		outside = "up to " + units.Bytes(keep)
	}
	r.Reasons = append(r.Reasons, Reason{Code: CodeFSMetadata, Text: fmt.Sprintf("the filesystems' own metadata (journal, inode tables: %s outside the blocks they count) is allocated on the node and not in their used bytes: a trim keeps what of it was written", outside)})
	if partitioned {
		r.Reasons = append(r.Reasons, Reason{Code: CodePartitionTable, Text: "the partition table and the gaps between partitions are in no filesystem: a trim keeps what of them was written"})
	}
	if p := in.Alloc.Pool; p != nil && p.ChunkSizeBytes > 0 {
		r.Reasons = append(r.Reasons, Reason{Code: CodeTrimGranularity, Text: fmt.Sprintf("the pool frees whole %s chunks: a chunk the guest still uses part of stays allocated", units.Bytes(p.ChunkSizeBytes))})
	} else {
		r.Reasons = append(r.Reasons, Reason{Code: CodeTrimGranularity, Text: "the storage frees whole allocation units: one the guest still uses part of stays allocated"})
	}
	return r
}
