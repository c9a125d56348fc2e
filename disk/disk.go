// Package disk is a VM's disks resolved once for one command: each disk's
// drive and the storage.cfg row of its storage, where its volume is on this
// node (the path this process opens, the block device under it, the
// allocation source), what the running QEMU runs it with (the node graph:
// the effective cache, aio, discard, detect-zeroes, throttle group and
// limits, the iothread that serves it) and the guest's name for it.
//
// Capabilities read a Set; none of them looks a storage up, maps a path
// through /proc/PID/root, finds a block device or places a disk on an
// iothread. A layer that costs a command, a QMP query or the guest agent
// (the node devices, the zvols' properties, the queue counts, the backing
// chains, the guest agent's view) is a field of Disk with its filler
// (Fill): asked once per command, by whoever needs it first, and read by
// everyone after.
package disk

import (
	"time"

	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/queues"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/storage/zfs"
	"github.com/pvediskcheck/pvediskcheck/threads"
	"github.com/pvediskcheck/pvediskcheck/vm"
	"github.com/pvediskcheck/pvediskcheck/volchain"
)

// Set is one VM with the disks one command looks at, resolved.
type Set struct {
	VM *vm.VM
	// Disks are the disks resolved, in the order given to Resolve (the
	// config's, from vm).
	Disks []*Disk
	// AskErr is why the running QEMU could not be asked (the exchange of
	// Live, Counters and Threads); nil when it answered or was not asked.
	AskErr error
	// Stats are QEMU's counters of the devices by disk id, produced at At
	// (Counters); nil when not read.
	Stats map[string]qmp.BlockStats
	At    time.Time
	// Threads is the thread map the disks were placed on (PlaceThreads);
	// zero until placed.
	Threads threads.Map
	// AgentErr is why the guest agent said nothing of the disks (Agent):
	// not configured, the VM not running, the PCI devices or the agent not
	// answering; nil when it answered or was not asked.
	AgentErr error
	// CgroupDir is where the VM's cgroup files are and Cgroup their reading
	// when the layer was filled (Cgroup); Cgroup nil before, and for a VM
	// that does not run.
	CgroupDir sampler.CgroupDir
	Cgroup    *sampler.Cgroup
	// AgentSkip is the guest agent answer layer Agent did not ask for
	// because a backup holds the VM (vm.VM.Agent), nil when it asked or
	// had nothing to ask.
	AgentSkip *vm.AgentSkip
	// filled are the layers Fill has filled.
	filled Layer
}

// Disk is one disk of the VM, resolved: vm's views of it (config,
// [PENDING], the running command line, QMP's live view) with what follows
// from them on this node.
type Disk struct {
	*vm.Disk

	// Storage is the storage.cfg row of the main section's drive (nil for
	// a path, none, a CD-ROM drive, a storage storage.cfg lacks, or no
	// drive); PendingStorage is the pending drive's. Now and NextStart
	// pick the pair in effect.
	Storage        *qemuserver.Storage
	PendingStorage *qemuserver.Storage

	// Path is the volume as this process opens it (vm.VM.HostPath:
	// through /proc/PID/root for a running QEMU): the path the running
	// QEMU has, else the configured one; "" when there is none (a Ceph or
	// iSCSI volume QEMU reaches itself). NextPath is the path of the
	// settings the next start uses ([PENDING]'s, else the config's).
	Path, NextPath string
	// Alloc is the volume as the allocation meter reads it (the main
	// section's volume at Path); zero without a main-section drive or
	// settings.
	Alloc alloc.Volume
	// Dataset is the zvol the volume is (pool/volume of a zfspool
	// storage, the drive in effect's), "" for any other disk.
	Dataset string

	// Graph is what the running QEMU runs the disk with; nil when it is
	// not attached to a running QEMU.
	Graph *Graph

	// Guest is the disk as the guest names it.
	Guest Guest

	// Dev is the kernel name of the node block device under a running
	// volume (dm-3 for an LV, zd16, loop0, rbd0), "" when the volume is no
	// block device of this node. Layer Devices.
	Dev string
	// FSDev is, for a running volume that is a file, the kernel name of
	// the block device under its filesystem (sda1, dm-0), shared with
	// every other file there; "" for a block device volume or a
	// filesystem on none (tmpfs, NFS). Layer Devices.
	FSDev string
	// ZFS is what `zfs get` says of Dataset; nil for a disk that is no
	// zvol. Layer ZFS.
	ZFS *zfs.Zvol
	// Queues are the disk's virtqueue counts; nil for a disk without any
	// to show. Layer Queues (top reads the running ones in its samples).
	Queues *queues.Count
	// Backing is the image chain QEMU runs the disk with, where its image
	// has a backing file; nil otherwise. Layer Backing.
	Backing *volchain.Backing
	// Chain is the disk's volume chain (lvm with snapshot-as-volume-chain)
	// beside the config's snapshots; nil for a disk on none. Layer Chains.
	Chain *volchain.Chain
}

// Graph is the disk in the running QEMU: the command line's settings with
// what QMP reported live in their place (vm.Disk.RunningNow: cache flags,
// write-cache, limits), the cache they amount to, its throttling and the
// thread that serves it.
type Graph struct {
	qemuserver.DiskSettings
	// Effective is the cache the disk runs with (qemuserver.EffectiveCache
	// of the settings above: vm.Disk.Effective).
	Effective qemuserver.Cache
	// ThrottleGroup: QEMU keeps the disk's limits in a throttle-group
	// object (vm.VM.HasThrottleGroup); Throttled: QEMU reports running
	// limits for it (vm.VM.Throttled, the one decision Ask reads).
	ThrottleGroup, Throttled bool
	// IOThread is the iothread that serves the disk as QEMU reports it
	// (query-iothreads), "" when its I/O runs in the main loop;
	// ServingTID is that thread's id (the main loop's is the process id).
	// Set by PlaceThreads.
	IOThread   string
	ServingTID int
}

// Guest is the disk as the guest sees it.
type Guest struct {
	// Name is the /dev/disk/by-id name Proxmox's layout gives it
	// (guestdisk.ByID); Name.ByID is "" when it has none.
	Name guestdisk.Name
	// Seen is what the guest agent reports of it (its device and mount
	// points); nil when not asked, not answered or not found. Layer Agent.
	Seen *guestdisk.Seen
}

// Now is the drive in effect and its storage: the main section's, else
// (a disk only [PENDING] adds) the pending one's; nil for a disk only the
// running QEMU has.
func (d *Disk) Now() (*qemuserver.Drive, *qemuserver.Storage) {
	if d.Drive == nil && d.PendingDrive != nil {
		return d.PendingDrive, d.PendingStorage
	}
	return d.Drive, d.Storage
}

// NextStart is the drive the next start uses and its storage: the pending
// one where [PENDING] changes the disk, else the main section's.
func (d *Disk) NextStart() (*qemuserver.Drive, *qemuserver.Storage) {
	if d.PendingDrive != nil {
		return d.PendingDrive, d.PendingStorage
	}
	return d.Drive, d.Storage
}

// Disk is the resolved disk with id, or nil.
func (s *Set) Disk(id string) *Disk {
	for _, d := range s.Disks {
		if d.ID == id {
			return d
		}
	}
	return nil
}

// Running are the disks attached to the running QEMU.
func (s *Set) Running() []*Disk {
	var out []*Disk
	for _, d := range s.Disks {
		if d.Graph != nil {
			out = append(out, d)
		}
	}
	return out
}

// Only is the set with the disks of ids alone (in the set's order).
func (s *Set) Only(ids []string) *Set {
	out := *s
	out.Disks = nil
	for _, d := range s.Disks {
		for _, id := range ids {
			if d.ID == id {
				out.Disks = append(out.Disks, d)
				break
			}
		}
	}
	return &out
}

// Filled reports whether layer l has been read for the set (by Resolve or
// Fill), whatever it found.
func (s *Set) Filled(l Layer) bool { return s.filled&l == l }
