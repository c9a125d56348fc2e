package storage

// What each storage type does with a VM's writes and flushes. The cache
// mode alone does not say where a write sits once the guest has its
// acknowledgement: below QEMU's block layer each way of reaching a volume
// has its own memory (the node page cache, ZFS's open transaction group,
// librbd's cache inside the QEMU process, an iSCSI target's write cache),
// and only the node page cache shows in the counters this tool can read
// (/proc/meminfo Dirty/Writeback, cachestat(2), /proc/PID/io).
//
// Sources, per backend:
//   - qemu-server Drive.pm/Blockdev.pm: which QEMU driver each storage gets
//     (host_device for lvm, lvmthin, zfspool and krbd; file for dir, nfs,
//     cifs, btrfs; rbd for librbd; iscsi for iscsidirect and ZFS over
//     iSCSI) and cache.direct/no-flush per mode;
//   - pve-storage ISCSIPlugin.pm (kernel iSCSI: /dev/disk/by-id/<lun>),
//     RBDPlugin.pm (krbd: /dev/rbd-pve/...; librbd otherwise);
//   - QEMU block/rbd.c: rbd_cache=false when cache.direct, true otherwise,
//     set after ceph.conf is read; Proxmox's QEMU also sets
//     rbd_cache_writethrough_until_flush=false (pve-qemu patch "rbd: block:
//     rbd: disable rbd_cache_writethrough_until_flush");
//   - Ceph rbd.yaml.in: rbd_cache_policy writearound, rbd_cache_max_dirty
//     24 MiB (writes return at once until that much is unwritten);
//   - OpenZFS zvol_os.c: a flush bio is zil_commit(); writes land in the open
//     transaction group (synced every zfs_txg_timeout, 5 s by default)
//     unless sync=always; zil_commit does nothing with sync=disabled;
//   - QEMU block/iscsi.c: libiscsi talks to the target itself (no node page
//     cache whatever cache.direct says); a flush is SYNCHRONIZE CACHE(10);
//   - measured here (cmd/pvediskcheck/cache_test.go TestCacheQcow2Metadata):
//     a qcow2 image with cache=none has the data of a completed write in
//     the file, but the new cluster's L2 entry only after a flush.

import (
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/storage/storagetype"
)

// Backend is the way QEMU reaches a volume (storagetype.Backend); it
// decides which layers below QEMU can hold an acknowledged write.
type Backend = storagetype.Backend

// Backends (storagetype's, named here for the packages reading Writes).
const (
	File     = storagetype.File
	Block    = storagetype.Block
	KRBD     = storagetype.KRBD
	Zvol     = storagetype.Zvol
	Librbd   = storagetype.Librbd
	Libiscsi = storagetype.Libiscsi
	Unknown  = storagetype.Unknown
)

// BackendOf classifies a volume from its storage (nil for a path or a
// storage.cfg entry that is missing) and the protocol driver QEMU uses for
// it (qemuserver.DiskSettings.Driver): the storage's row says, except that
// QEMU's own rbd and iscsi drivers decide for any storage, and a path is
// what its driver opens.
func BackendOf(s *qemuserver.Storage, driver string) Backend {
	switch driver {
	case "rbd":
		return Librbd
	case "iscsi":
		return Libiscsi
	}
	if s == nil {
		switch driver {
		case "file":
			return File
		case "host_device", "host_cdrom":
			return Block
		}
		return Unknown
	}
	return s.Facts().Writes
}

// EvidenceOf is which sentence says where a disk's unflushed writes sit:
// the storage's row's, or for a path and a plugin's volume the protocol
// driver's (librbd's cache, the remote end of iscsi and nbd, else the node
// page cache).
func EvidenceOf(s *qemuserver.Storage, driver string) storagetype.Evidence {
	if s != nil {
		if e := s.Facts().Evidence; e != storagetype.EvidenceByDriver {
			return e
		}
	}
	switch driver {
	case "rbd":
		return storagetype.EvidenceLibrbd
	case "iscsi", "nbd":
		return storagetype.EvidenceRemote
	}
	return storagetype.EvidencePageCache
}

// Writes is what one backend does with a guest's writes under one cache
// mode.
type Writes struct {
	Backend Backend
	// AckedIn says where a write sits once the guest has its
	// acknowledgement; CrashLoses what a crash of this node loses.
	AckedIn, CrashLoses string
	// HeldOnNode: acknowledged writes can wait in volatile memory of this
	// node (page cache, ZFS's open transaction group, librbd's cache in
	// the QEMU process) until a flush or a writeback.
	HeldOnNode bool
	// Visible: what the node holds shows in the node page cache, so Dirty,
	// Writeback, cachestat and /proc/PID/io can prove it is there.
	Visible bool
	// Unseen names the layer that holds acknowledged writes where no node
	// counter can see it ("" when none does).
	Unseen string
	// Flush says what a guest flush does on this backend once QEMU passes
	// it down (cache.no-flush off).
	Flush string
	// FastFlushMeans is what a flush that completes at once can mean here
	// besides "nothing was waiting": "" when the layer below always writes
	// what it holds before completing a flush.
	FastFlushMeans string
}

// PageCacheFacts are the sentences of the lab's cache table for storage
// reached through the node page cache (files, LVM, kernel iSCSI): where an
// acknowledged write sits and what a host crash loses, per Proxmox mode.
var PageCacheFacts = map[string][2]string{
	"none":         {"storage's own write cache (O_DIRECT, no node page cache) until the guest flushes", "what the guest has not flushed yet, as with a physical disk with a write cache"},
	"writethrough": {"on the storage: acknowledged only once stable (node page cache serves reads only)", "nothing that was acknowledged"},
	"writeback":    {"node RAM (page cache) until the guest flushes or the node writes it back", "everything the guest has not flushed: can be GiBs held in node RAM"},
	"directsync":   {"on the storage: acknowledged only once stable (O_DIRECT)", "nothing that was acknowledged"},
	"unsafe":       {"node RAM, and guest flushes are ignored", "even data the guest believes is safe (flushed): everything still dirty in node RAM"},
	"custom":       {"node RAM or storage, flushes ignored (not a Proxmox mode)", "data the guest believes is safe"},
}

const (
	ceph        = "on the Ceph cluster"
	cephAck     = "a write is acknowledged once all replicas have it"
	nothingAckd = "nothing that was acknowledged"
	librbdCache = "librbd's cache in the QEMU process (rbd_cache; writes return at once until rbd_cache_max_dirty, 24 MiB by default, is unwritten)"
	zfsTxg      = "ZFS's open transaction group in node RAM (written out every zfs_txg_timeout, 5 s by default)"
	syncOff     = "the zvol has sync=disabled (zfs get sync): ZFS then completes flushes without writing"
	target      = "the iSCSI target"
)

// backendFacts holds the sentences where a backend differs from the page
// cache table; a mode missing there takes PageCacheFacts. (A function, not
// a variable: its sentences are built from shared phrases at run time.)
func backendFacts() map[Backend]map[string][2]string {
	return map[Backend]map[string][2]string{
		KRBD: {
			"none":       {ceph + ": krbd sends O_DIRECT writes straight to the OSDs and " + cephAck, nothingAckd},
			"directsync": {ceph + ": O_DIRECT through krbd, " + cephAck, nothingAckd},
		},
		Zvol: {
			"none":         {zfsTxg + ": O_DIRECT skips the page cache, not ZFS; a guest flush forces a ZIL commit", "what the guest has not flushed yet: a few seconds of writes held by ZFS in node RAM (everything, if " + syncOff + ")"},
			"writethrough": {"on the pool: QEMU flushes every write (a ZIL commit) before acknowledging it", nothingAckd + ", unless " + syncOff},
			"writeback":    {"node RAM twice: the zvol's page cache, then " + zfsTxg + ", until the guest flushes", "everything the guest has not flushed: can be GiBs in the page cache, plus seconds of writes in ZFS"},
			"directsync":   {"on the pool: O_DIRECT, and QEMU flushes every write (a ZIL commit) before acknowledging it", nothingAckd + ", unless " + syncOff},
			"unsafe":       {"node RAM (the zvol's page cache, then ZFS's open transaction group), and guest flushes are ignored", "even data the guest believes is safe (flushed): everything still dirty in the page cache or in ZFS"},
		},
		Librbd: {
			"none":         {ceph + ": cache=none turns librbd's cache off (rbd_cache=false), " + cephAck, nothingAckd},
			"writethrough": {ceph + ": librbd's cache is on, but QEMU flushes every write before acknowledging it", nothingAckd},
			"writeback":    {librbdCache + ", until the guest flushes; not in the node page cache", "what the guest has not flushed yet, up to rbd_cache_max_dirty (24 MiB by default) per disk; a crash of QEMU alone loses it too"},
			"directsync":   {ceph + ": librbd's cache off (rbd_cache=false), " + cephAck, nothingAckd},
			"unsafe":       {librbdCache + ", and guest flushes never reach it", "even data the guest believes is safe: what librbd has not written yet (up to rbd_cache_max_dirty, 24 MiB by default)"},
		},
		Libiscsi: {
			"none":         {target + "'s write cache until the guest flushes (QEMU's libiscsi sends writes straight to the target: no node page cache)", "nothing that was acknowledged: it is on the target (a crash of the target loses what its volatile cache holds and the guest has not flushed)"},
			"writethrough": {"on " + target + ": QEMU flushes (SYNCHRONIZE CACHE) every write before acknowledging it", nothingAckd},
			"writeback":    {target + "'s write cache until the guest flushes (libiscsi: no node page cache, whatever cache.direct says)", "nothing that was acknowledged: it is on the target (a crash of the target loses what its volatile cache holds and the guest has not flushed)"},
			"directsync":   {"on " + target + ": QEMU flushes (SYNCHRONIZE CACHE) every write before acknowledging it", nothingAckd},
			"unsafe":       {target + "'s write cache, and guest flushes never reach it", "nothing on this node; a crash of the target loses everything its volatile cache holds, even data the guest flushed"},
		},
	}
}

// WritesFor says what backend does with writes under a disk's cache
// (qemuserver.EffectiveCache: its Proxmox mode none, writethrough,
// writeback, directsync, unsafe or custom, and its flags). A custom mode
// (flags no Proxmox mode has) is judged as the worst case: buffered, with
// flushes ignored. format is the image format (qcow2 adds QEMU's metadata
// cache).
func WritesFor(b Backend, c qemuserver.Cache, format string) Writes {
	mode := c.Mode
	facts, ok := backendFacts()[b][mode]
	if !ok {
		facts = PageCacheFacts[mode]
	}
	direct, noFlush, wc := c.Direct, c.NoFlush, c.WriteCache
	if mode == "custom" {
		direct, noFlush, wc = false, true, "on"
	}
	buffered := !direct // the node page cache (or librbd's cache) takes writes
	waits := wc == "on" // QEMU acknowledges before the data is stable
	w := Writes{Backend: b, AckedIn: facts[0], CrashLoses: facts[1]}
	switch b {
	case Librbd:
		w.HeldOnNode = buffered && waits
		w.Flush = "librbd's cache is off: there is nothing to write"
		if buffered {
			w.Flush = "librbd writes its cache to the OSDs"
		}
		if w.HeldOnNode {
			w.Unseen = "librbd's cache lives in the QEMU process: Dirty, Writeback and cachestat cannot see it"
		}
	case Libiscsi:
		w.Flush = "a SCSI SYNCHRONIZE CACHE to the target"
		w.FastFlushMeans = "the target completes SYNCHRONIZE CACHE without writing its cache"
		if waits {
			w.Unseen = "the iSCSI target's write cache is on another machine: no node counter sees it"
		}
	case Zvol:
		w.Visible = buffered
		w.HeldOnNode = waits // the open transaction group, O_DIRECT or not
		w.Flush = "a ZIL commit: ZFS writes the zvol's pending writes to its intent log"
		if buffered {
			w.Flush = "the node writes the zvol's dirty pages to ZFS, then a ZIL commit"
		}
		w.FastFlushMeans = syncOff
		if waits {
			w.Unseen = "ZFS's open transaction group (ZFS's dirty data is not in Dirty, Writeback or cachestat)"
		}
	default: // File, Block, KRBD, Unknown: the node page cache
		w.Visible = buffered
		w.HeldOnNode = buffered && waits
		w.Flush = "QEMU flushes the volume: the storage writes its own cache"
		if buffered {
			w.Flush = "the node writes the volume's dirty pages to the storage and flushes the device"
		}
	}
	if b == Unknown {
		w.AckedIn += " (the storage below QEMU is not modelled: what it does with writes is unknown)"
	}
	if format == "qcow2" && waits {
		// Measured: the L2 entry of a new cluster reaches the file only at
		// a flush (TestCacheQcow2Metadata).
		w.AckedIn += "; new clusters' mapping waits in QEMU's qcow2 metadata cache until the guest flushes"
		w.HeldOnNode = true
		if w.Unseen == "" {
			w.Unseen = "QEMU's qcow2 metadata cache (new clusters' L2 entries) lives in the QEMU process: node counters cannot see it"
		}
	}
	if noFlush {
		w.Flush = "nothing: QEMU runs the disk with cache.no-flush and completes flushes at once"
	}
	return w
}

// ForDisk is WritesFor for one disk: its storage's row (nil for a path, a
// storage storage.cfg lacks, or a disk only the running QEMU has), the
// settings QEMU runs or would run it with (nil when unknown) and the cache
// it runs with.
func ForDisk(stor *qemuserver.Storage, s *qemuserver.DiskSettings, c qemuserver.Cache) Writes {
	driver, format := "", ""
	if s != nil {
		driver, format = s.Driver, s.Format
	}
	return WritesFor(BackendOf(stor, driver), c, format)
}

// Note is the sentence for the cache view about what the node cannot
// measure for this disk ("" when its counters can see every layer that
// holds acknowledged writes).
func (w Writes) Note() string {
	if w.Unseen == "" {
		return ""
	}
	return "not measurable from the node: " + w.Unseen
}
