// Package storagetype is the one table of Proxmox storage types: for each
// type pve-storage registers (and the variants a storage.cfg flag makes of
// one), every fact pvediskcheck decides from a storage's type. No other
// package compares storage-type strings: qemuserver (volume paths, the
// O_DIRECT and io_uring defaults), storage (writes, discards), alloc,
// thinpool, discard and check read a row's typed facts.
//
// Adding a storage type is one row of Table plus its tests (and an
// allocation reader in alloc if it needs a new tool): TestTable fails for a
// type of Proxmox's list that has no row, and for a row that leaves a fact
// unset (every fact's zero value means "not set").
//
// The package imports nothing, so that qemuserver, which parses
// storage.cfg, and the capability packages above it share the table.
//
// Sources: pve-storage 9 (Storage.pm's registered plugins; each plugin's
// parse_volname, path, alloc_image and options), qemu-server 9 (Drive.pm
// drive_uses_cache_direct, storage_allows_io_uring_default; Blockdev.pm),
// QEMU (block/rbd.c, block/iscsi.c), OpenZFS; see storage/writes.go for
// what each Backend does with writes.
package storagetype

// Type is one row: a storage.cfg type, or one of its variants.
type Type struct {
	// Name is the storage.cfg type ("lvm"); "plugin" for a type pve-storage
	// does not register (a third-party plugin) or this tool does not know.
	Name string
	// Variant is the storage.cfg flag that selects this row over the plain
	// type's ("krbd", "nocow", "sparse", "snapshot-as-volume-chain"), "" for
	// the plain row.
	Variant string

	Volumes   Volumes   // how a volume is named and where it lives
	Layout    Layout    // files below a path, a block device, a QEMU protocol
	Provision Provision // thin or thick
	Alloc     Alloc     // how a volume's allocation is measured
	// Unmeasured says why a volume of AllocThick has no allocation to
	// measure ("" for every other Alloc).
	Unmeasured string
	Discard    Discard // whether a discard that reaches the volume returns space
	// Writes is where an acknowledged write sits per cache mode (the
	// sentences are storage.WritesFor's, per Backend).
	Writes     Backend
	IOUring    IOUring // qemu-server's io_uring default
	IOUringWhy string  // qemu-server's reason where it avoids io_uring ("" where it does not)
	// Direct is whether a disk without cache= opens with O_DIRECT.
	Direct Direct
	// Evidence picks the sentence for where unflushed writes sit
	// (check's cache rules); DiscardEvidence the one for what keeps the
	// space a guest frees (check's discard rule).
	Evidence        Evidence
	DiscardEvidence DiscardEvidence
	Pool            Pool // the thin pool `thin` reports for it
	// Required are the options a section of the type must set, or
	// Proxmox skips it when it reads storage.cfg (SectionConfig's
	// check_config: "missing value for required option"), and the
	// storage does not exist for it: the plugin's options() not optional,
	// less those its check_config fills in (nfs's, cifs's, cephfs's and
	// glusterfs's path: /mnt/pve/<id>). Sorted; none for rbd and for a
	// type this tool does not know (its plugin's own rules apply).
	// TestRequiredAsProxmox asks pve-storage for them.
	Required []string
}

// String names the row as storage.cfg does ("rbd", "rbd krbd 1").
func (t *Type) String() string {
	if t.Variant == "" {
		return t.Name
	}
	return t.Name + " " + t.Variant + " 1"
}

// Volumes is how a volume of the type is named and placed (each plugin's
// parse_volname and path); qemuserver resolves volumes by it.
type Volumes int

// Volume placements.
const (
	_               Volumes = iota
	VolDir                  // files below `path` (dir)
	VolMounted              // files below the mount point, /mnt/pve/<id> unless `path` says (nfs, cifs, cephfs)
	VolGluster              // files on a GlusterFS volume QEMU opens through gluster:// (PVE 8)
	VolBtrfs                // files below `path`, each raw image a subvolume (<name>/disk.raw)
	VolLVM                  // /dev/<vgname>/<name>: a thick LV (qcow2 in it with snapshot-as-volume-chain)
	VolLVMThin              // /dev/<vgname>/<name>: a thin LV
	VolZvol                 // /dev/zvol/<pool>/<name>
	VolZFSOverISCSI         // a zvol on another machine, exported as an iSCSI LUN QEMU opens itself
	VolRBD                  // <pool>/<image>, opened by QEMU's librbd
	VolKRBD                 // /dev/rbd-pve/<fsid>/<pool>/<image>, mapped by the kernel
	VolISCSI                // /dev/disk/by-id/<lun> (the node's iSCSI initiator)
	VolISCSIDirect          // iscsi://<portal>/<target>/<lun> (QEMU's libiscsi)
	VolNoDisks              // holds no VM disks (backups, import sources)
	VolPvesm                // only the node's `pvesm path` can place it
)

// Layout is what a volume is on the node.
type Layout int

// Layouts.
const (
	_                 Layout = iota
	LayoutFiles              // image files on a node filesystem (statfs tells its use)
	LayoutBlock              // a block device on the node
	LayoutProtocol           // an address QEMU's own driver opens (librbd, libiscsi)
	LayoutNoDisks            // no VM disks
	LayoutNotModelled        // not known to this tool
)

// Provision is whether the storage allocates a volume's space when it is
// created or when it is written.
type Provision int

// Provisioning.
const (
	_                    Provision = iota
	Thin                           // allocates on write, frees on discard
	Thick                          // allocates the whole volume when created
	Reserved                       // allocates on write, but reserves the whole size (zvol refreservation)
	PerImage                       // decided per image file: qcow2 and sparse raw files are thin
	ProvisionNoDisks               // no VM disks
	ProvisionNotModelled           // not known to this tool
)

// Alloc is how a volume's allocation is measured (package alloc).
type Alloc int

// Allocation readers.
const (
	_           Alloc = iota
	AllocLvs          // lvs data_percent of the thin LV
	AllocFile         // the file's st_blocks (raw), qemu-img's actual-size (qcow2)
	AllocZFS          // zfs get referenced
	AllocRBD          // rbd du
	AllocThick        // nothing to measure: allocated in full when created (Unmeasured says so)
	AllocNoTool       // no tool on the node reports it
)

// Discard is whether a discard that reaches a volume gives space back to
// the storage.
type Discard int

// Discard outcomes.
const (
	_                  Discard = iota
	DiscardReturns             // the storage frees what is discarded
	DiscardNever               // the space stays allocated (thick, or reserved)
	DiscardPerImage            // qcow2 images and sparse raw files free it, fully allocated raw files do not
	DiscardNoDisks             // no VM disks
	DiscardNotModelled         // not known: counted as not returning
)

// Backend is the way QEMU reaches a volume; it decides which layers below
// QEMU can hold an acknowledged write (storage.WritesFor). Its values are
// the `backend` of cache's and flush's JSON.
type Backend string

// Backends.
const (
	// File is an image file on a node filesystem (dir, nfs, cifs, btrfs,
	// cephfs; raw or qcow2): the node page cache unless O_DIRECT.
	File Backend = "file"
	// Block is a block device on the node (lvm, lvmthin, kernel iSCSI, a
	// passthrough device): the node page cache unless O_DIRECT, then the
	// device's own write cache.
	Block Backend = "block"
	// KRBD is a Ceph RBD image mapped by the kernel (rbd with krbd 1): a
	// block device on the node; the OSDs acknowledge a write once all
	// replicas have it.
	KRBD Backend = "krbd"
	// Zvol is a ZFS volume (zfspool): ZFS keeps writes in node RAM, in the
	// open transaction group, whether or not QEMU uses O_DIRECT.
	Zvol Backend = "zvol"
	// Librbd is a Ceph RBD image opened by QEMU's rbd driver (rbd without
	// krbd): librbd's cache lives in the QEMU process.
	Librbd Backend = "librbd"
	// Libiscsi is a LUN QEMU's iscsi driver talks to itself (iscsidirect,
	// ZFS over iSCSI): nothing on the node caches it.
	Libiscsi Backend = "libiscsi"
	// Unknown is a storage type this tool does not model (a third-party
	// plugin, NBD): what the layers below QEMU do is not known.
	Unknown Backend = "unknown"
)

// IOUring is qemu-server's default aio for the type
// (Drive.pm storage_allows_io_uring_default).
type IOUring int

// io_uring defaults.
const (
	_                      IOUring = iota
	IOUringDefault                 // io_uring unless the disk says aio=
	IOUringAvoided                 // never io_uring by default (IOUringWhy says why)
	IOUringAvoidedBuffered         // no io_uring by default without O_DIRECT (IOUringWhy says why)
)

// Direct is whether qemu-server opens a disk without cache= with O_DIRECT
// (Drive.pm drive_uses_cache_direct).
type Direct int

// O_DIRECT defaults.
const (
	_                Direct = iota
	DirectDefault           // cache.direct on, as cache=none
	DirectOffDefault        // cache.direct off (btrfs without nocow: O_DIRECT writes of pages that change in flight fail btrfs's data checksums)
)

// Evidence picks the sentence for where writes the guest has not had
// flushed sit.
type Evidence int

// Write evidence.
const (
	_                 Evidence = iota
	EvidencePageCache          // the node page cache (measured in the lab)
	EvidenceLibrbd             // librbd's cache inside the QEMU process
	EvidenceRemote             // the storage's own volatile write cache (an iSCSI target, NBD)
	EvidenceByDriver           // decided by the protocol driver the node reports (plugins)
)

// DiscardEvidence picks the sentence for what keeps the space a guest frees
// while discards are dropped.
type DiscardEvidence int

// Discard evidence.
const (
	_                     DiscardEvidence = iota
	DiscardEvidenceThinLV                 // the thin pool (lab: lvs unchanged after fstrim)
	DiscardEvidenceZvol                   // the pool (the zvol's referenced bytes)
	DiscardEvidenceRBD                    // the pool (rbd du)
	DiscardEvidenceImage                  // the storage (measured on a sparse image)
)

// Pool is the thin pool `thin` reports for a storage of the type.
type Pool int

// Pools.
const (
	_           Pool = iota
	PoolLVMThin      // the LVM thin pool (vgname/thinpool)
	PoolZFS          // the ZFS dataset (pool)
	PoolNone         // none
)

// The reasons qemu-server gives for avoiding io_uring (Drive.pm comments).
const (
	ioUringKRBD = "io_uring with cache mode writeback or writethrough on krbd will hang"
	ioUringLVM  = "io_uring with cache mode writeback or writethrough on LVM will hang, without cache only sometimes"
	ioUringCIFS = "io_uring causes problems when used with CIFS since kernel 5.15"
)

// Names of the storage.cfg types other packages name in their output or
// JSON (thinpool's pools).
const (
	NameLVMThin = "lvmthin"
	NameZFSPool = "zfspool"
)

// files is the row of a storage keeping images as files on a node
// filesystem; rows differ from it in where the files are (and the
// options a section must set).
func files(name string, v Volumes, required ...string) Type {
	return Type{Name: name, Volumes: v, Layout: LayoutFiles, Provision: PerImage, Alloc: AllocFile, Discard: DiscardPerImage,
		Writes: File, IOUring: IOUringDefault, Direct: DirectDefault, Evidence: EvidencePageCache, DiscardEvidence: DiscardEvidenceImage, Pool: PoolNone,
		Required: required}
}

// thickLVM is what every thick LV says about its allocation.
const thickLVM = "thick LVM: the volume is fully allocated when created, and a trim returns nothing to the volume group (it may still reach the disk below)"

// Table is every row: the types pve-storage 9 registers (Storage.pm), PVE
// 8's glusterfs, the variants storage.cfg flags make, and Plugin.
var Table = []Type{
	files("dir", VolDir, "path"),
	files("nfs", VolMounted, "export", "server"),
	with(files("cifs", VolMounted, "server", "share"), func(t *Type) { t.IOUring, t.IOUringWhy = IOUringAvoided, ioUringCIFS }),
	files("cephfs", VolMounted),
	// PVE 8's GlusterfsPlugin: volume fixed, server optional, path filled in.
	files("glusterfs", VolGluster, "volume"),
	// BTRFSPlugin: `nocow` "disables data checksumming ... while allowing
	// direct I/O"; qemu-server opens btrfs disks without O_DIRECT unless
	// the storage has nocow (drive_uses_cache_direct).
	with(files("btrfs", VolBtrfs, "path"), func(t *Type) { t.Direct = DirectOffDefault }),
	with(files("btrfs", VolBtrfs, "path"), func(t *Type) { t.Variant = "nocow" }),
	{Name: "lvm", Volumes: VolLVM, Layout: LayoutBlock, Provision: Thick, Alloc: AllocThick, Unmeasured: thickLVM, Discard: DiscardNever,
		Writes: Block, IOUring: IOUringAvoided, IOUringWhy: ioUringLVM, Direct: DirectDefault, Evidence: EvidencePageCache, DiscardEvidence: DiscardEvidenceImage, Pool: PoolNone,
		Required: []string{"vgname"}},
	// Proxmox 9's qcow2 volume chains on thick LVM (LVMPlugin.pm): a new
	// volume defaults to qcow2, formatted with qemu-img on an LV sized by
	// `qemu-img measure`'s fully-allocated figure (preallocation=metadata by
	// default); each snapshot is a further LV (snap_<volume>_<snap>.qcow2)
	// the current qcow2 backs onto. QEMU reaches the LV as a block device,
	// so writes sit as on thick LVM plus QEMU's qcow2 metadata cache (the
	// volume's format); qemu-server opens the qcow2 with discard-no-unref
	// (Blockdev.pm, bug #6543), so a discard frees neither qcow2 clusters
	// nor volume group space.
	{Name: "lvm", Variant: "snapshot-as-volume-chain", Volumes: VolLVM, Layout: LayoutBlock, Provision: Thick, Alloc: AllocThick,
		Unmeasured: "thick LVM with qcow2 volume chains: each volume and each snapshot is an LV allocated in full when created (sized by qemu-img measure), and a trim returns nothing to the volume group (qemu-server opens the qcow2 with discard-no-unref, so it keeps its clusters too; the trim may still reach the disk below)",
		Discard:    DiscardNever, Writes: Block, IOUring: IOUringAvoided, IOUringWhy: ioUringLVM, Direct: DirectDefault, Evidence: EvidencePageCache, DiscardEvidence: DiscardEvidenceImage, Pool: PoolNone,
		Required: []string{"vgname"}},
	{Name: NameLVMThin, Volumes: VolLVMThin, Layout: LayoutBlock, Provision: Thin, Alloc: AllocLvs, Discard: DiscardReturns,
		Writes: Block, IOUring: IOUringDefault, Direct: DirectDefault, Evidence: EvidencePageCache, DiscardEvidence: DiscardEvidenceThinLV, Pool: PoolLVMThin,
		Required: []string{"thinpool", "vgname"}},
	// ZFSPoolPlugin.pm zfs_create_zvol: without `sparse 1` a zvol is created
	// without -s and carries a refreservation of its full size.
	{Name: NameZFSPool, Volumes: VolZvol, Layout: LayoutBlock, Provision: Reserved, Alloc: AllocZFS, Discard: DiscardNever,
		Writes: Zvol, IOUring: IOUringDefault, Direct: DirectDefault, Evidence: EvidencePageCache, DiscardEvidence: DiscardEvidenceZvol, Pool: PoolZFS,
		Required: []string{"pool"}},
	{Name: NameZFSPool, Variant: "sparse", Volumes: VolZvol, Layout: LayoutBlock, Provision: Thin, Alloc: AllocZFS, Discard: DiscardReturns,
		Writes: Zvol, IOUring: IOUringDefault, Direct: DirectDefault, Evidence: EvidencePageCache, DiscardEvidence: DiscardEvidenceZvol, Pool: PoolZFS,
		Required: []string{"pool"}},
	// ZFS over iSCSI: the zvol lives on the target; no tool on the node
	// reads its allocation.
	{Name: "zfs", Volumes: VolZFSOverISCSI, Layout: LayoutProtocol, Provision: Thin, Alloc: AllocNoTool, Discard: DiscardReturns,
		Writes: Libiscsi, IOUring: IOUringDefault, Direct: DirectDefault, Evidence: EvidenceRemote, DiscardEvidence: DiscardEvidenceImage, Pool: PoolNone,
		Required: []string{"blocksize", "iscsiprovider", "pool", "portal", "target"}},
	{Name: "rbd", Volumes: VolRBD, Layout: LayoutProtocol, Provision: Thin, Alloc: AllocRBD, Discard: DiscardReturns,
		Writes: Librbd, IOUring: IOUringDefault, Direct: DirectDefault, Evidence: EvidenceLibrbd, DiscardEvidence: DiscardEvidenceRBD, Pool: PoolNone},
	{Name: "rbd", Variant: "krbd", Volumes: VolKRBD, Layout: LayoutBlock, Provision: Thin, Alloc: AllocRBD, Discard: DiscardReturns,
		Writes: KRBD, IOUring: IOUringAvoidedBuffered, IOUringWhy: ioUringKRBD, Direct: DirectDefault, Evidence: EvidencePageCache, DiscardEvidence: DiscardEvidenceRBD, Pool: PoolNone},
	{Name: "iscsi", Volumes: VolISCSI, Layout: LayoutBlock, Provision: Thick, Alloc: AllocNoTool, Discard: DiscardNever,
		Writes: Block, IOUring: IOUringDefault, Direct: DirectDefault, Evidence: EvidencePageCache, DiscardEvidence: DiscardEvidenceImage, Pool: PoolNone,
		Required: []string{"portal", "target"}},
	{Name: "iscsidirect", Volumes: VolISCSIDirect, Layout: LayoutProtocol, Provision: Thick, Alloc: AllocNoTool, Discard: DiscardNever,
		Writes: Libiscsi, IOUring: IOUringDefault, Direct: DirectDefault, Evidence: EvidenceRemote, DiscardEvidence: DiscardEvidenceImage, Pool: PoolNone,
		Required: []string{"portal", "target"}},
	with(noDisks("pbs"), func(t *Type) { t.Required = []string{"datastore", "server"} }),
	// ESXi: an import source (`import` content), read through a FUSE
	// mount only pvesm knows: placed by `pvesm path`, as a plugin's.
	with(Plugin, func(t *Type) { t.Name, t.Required = "esxi", []string{"server", "username"} }),
	Plugin,
}

// Plugin is the row of a type this tool does not model: pve-storage's
// `pvesm path` places its volumes (pvesm), the protocol driver QEMU opens
// them with decides what little is known, and qemu-server's defaults are
// its defaults for any type.
var Plugin = Type{Name: "plugin", Volumes: VolPvesm, Layout: LayoutNotModelled, Provision: ProvisionNotModelled, Alloc: AllocNoTool, Discard: DiscardNotModelled,
	Writes: Unknown, IOUring: IOUringDefault, Direct: DirectDefault, Evidence: EvidenceByDriver, DiscardEvidence: DiscardEvidenceImage, Pool: PoolNone}

// noDisks is the row of a storage that holds no VM disks.
func noDisks(name string) Type {
	return Type{Name: name, Volumes: VolNoDisks, Layout: LayoutNoDisks, Provision: ProvisionNoDisks, Alloc: AllocNoTool, Discard: DiscardNoDisks,
		Writes: Unknown, IOUring: IOUringDefault, Direct: DirectDefault, Evidence: EvidenceByDriver, DiscardEvidence: DiscardEvidenceImage, Pool: PoolNone}
}

func with(t Type, f func(*Type)) Type {
	f(&t)
	return t
}

// Of is the row of a storage.cfg section: its type, and the variant whose
// flag the section sets (flag reports a boolean property, bare flags true).
// A type without a row is Plugin.
func Of(name string, flag func(string) bool) *Type {
	var plain *Type
	for i := range Table {
		t := &Table[i]
		if t.Name != name {
			continue
		}
		if t.Variant == "" {
			plain = t
		} else if flag != nil && flag(t.Variant) {
			return t
		}
	}
	if plain == nil {
		return &Plugin
	}
	return plain
}

// ReturnsSpace reports a discard that reaches the volume giving space
// back; perImage answers for DiscardPerImage (is this image qcow2 or a
// sparse file).
func (t *Type) ReturnsSpace(perImage func() bool) bool {
	switch t.Discard {
	case DiscardReturns:
		return true
	case DiscardPerImage:
		return perImage()
	}
	return false
}

// IOUringHazard is qemu-server's reason for not picking io_uring by default
// for a disk opened with (cacheDirect) or without O_DIRECT; "" where
// io_uring is its default.
func (t *Type) IOUringHazard(cacheDirect bool) string {
	switch t.IOUring {
	case IOUringAvoided:
		return t.IOUringWhy
	case IOUringAvoidedBuffered:
		if !cacheDirect {
			return t.IOUringWhy
		}
	}
	return ""
}
