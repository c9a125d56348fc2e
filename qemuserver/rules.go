package qemuserver

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/storage/storagetype"
)

// DiskSettings is what QEMU runs a disk with: predicted from a config by
// Predict, or read from a command line by ParseCmdline. Both sides use the
// same fields so drift is a field-by-field comparison.
type DiskSettings struct {
	ID         string `json:"id"`
	Blockdev   bool   `json:"blockdev"`   // -blockdev generation (machine >= 10.0)
	Controller string `json:"controller"` // virtio-scsi-single, virtio-scsi-pci, lsi, megasas, pvscsi, virtio-blk, sata, ide, efi
	Device     string `json:"device"`     // scsi-hd, virtio-blk-pci, ide-hd, ide-cd, ...
	CDROM      bool   `json:"cdrom"`
	Path       string `json:"path"`
	Driver     string `json:"driver"` // protocol driver: file, host_device, rbd, iscsi, nbd
	Format     string `json:"format"`
	// CacheDirect and CacheNoFlush are the format/protocol nodes' cache options.
	CacheDirect  bool `json:"cache_direct"`
	CacheNoFlush bool `json:"cache_no_flush"`
	// WriteCache is the effective device write cache, "on" or "off": the
	// device's write-cache under -blockdev, the cache= mode under -drive.
	WriteCache   string `json:"write_cache"`
	AIO          string `json:"aio"`           // threads, native, io_uring; "" where the driver has none
	Discard      string `json:"discard"`       // unmap or ignore
	DetectZeroes string `json:"detect_zeroes"` // on, off, unmap
	IOThread     bool   `json:"iothread"`
	ReadOnly     bool   `json:"read_only"`
	Limits       Limits `json:"limits"`
	NodeTop      string `json:"-"` // drive-<id>
	NodeFormat   string `json:"-"`
	NodeFile     string `json:"-"`
	// Queues is the queue count the command line sets for the disk's
	// virtqueues: the VirtIO SCSI controller's num_queues (qemu-server
	// sets it from the drive's queues= under scsihw virtio-scsi-single
	// only, QemuServer.pm), a VirtIO Block device's num-queues (qemu-server
	// sets none); 0 where none is set (QEMU's default: one per vCPU).
	Queues int `json:"queues,omitempty"`
}

// CacheMode names the Proxmox cache mode for a flag triple, following the
// table in qemu-server (cache.direct, cache.no-flush, device write-cache).
func CacheMode(direct, noFlush bool, writeCache string) string {
	wce := writeCache != "off"
	switch {
	case noFlush && !direct && wce:
		return "unsafe"
	case noFlush:
		return "custom"
	case direct && wce:
		return "none"
	case direct && !wce:
		return "directsync"
	case !direct && wce:
		return "writeback"
	default:
		return "writethrough"
	}
}

// Mode returns the Proxmox cache mode these settings amount to.
func (s DiskSettings) Mode() string { return CacheMode(s.CacheDirect, s.CacheNoFlush, s.WriteCache) }

// Cache is how QEMU runs (or would run) a disk's cache: the three flags
// and the Proxmox mode they amount to, decided together by EffectiveCache
// so that no reader turns one into the other again.
type Cache struct {
	Mode       string // none, writethrough, writeback, directsync, unsafe, custom (CacheMode)
	Direct     bool   // cache.direct: O_DIRECT, no node page cache
	NoFlush    bool   // cache.no-flush: guest flushes complete at once
	WriteCache string // the device's write cache: on, off
}

// EffectiveCache is the one function that decides a disk's effective cache
// from the flags QEMU runs it with.
func EffectiveCache(direct, noFlush bool, writeCache string) Cache {
	return Cache{Mode: CacheMode(direct, noFlush, writeCache), Direct: direct, NoFlush: noFlush, WriteCache: writeCache}
}

// Cache is the cache these settings run with.
func (s DiskSettings) Cache() Cache {
	return EffectiveCache(s.CacheDirect, s.CacheNoFlush, s.WriteCache)
}

// CacheOf is the cache of a Proxmox mode named in a config (cache=), with
// the flags qemu-server gives it; "custom" is no Proxmox mode: it keeps
// writeback's flags (CacheFlags), and readers judge it by its name.
func CacheOf(mode string) Cache {
	c := EffectiveCache(CacheFlags(mode))
	c.Mode = mode
	return c
}

// CacheFlags returns cache.direct, cache.no-flush and the device write cache
// for a Proxmox cache mode name.
func CacheFlags(mode string) (direct, noFlush bool, writeCache string) {
	switch mode {
	case "none":
		return true, false, "on"
	case "writethrough":
		return false, false, "off"
	case "directsync":
		return true, false, "off"
	case "unsafe":
		return false, true, "on"
	}
	return false, false, "on" // writeback
}

// MaxSCSIQueues is the most request queues QEMU gives a virtio-scsi
// controller (hw/scsi/virtio-scsi.c: VIRTIO_QUEUE_MAX minus the control
// and event queues); measured: num_queues=1022 starts, 1023 is refused, on
// QEMU 7.2 and 11.1.3.
const MaxSCSIQueues = 1022

// QueuesRefusal is QEMU's own refusal of a drive's queues= as qemu-server
// passes it (num_queues on the disk's virtio-scsi-single controller: the
// schema checks only its minimum of 2), "" when QEMU takes it. Measured
// on QEMU 7.2 and 11.1.3.
func QueuesRefusal(v string) string {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return "Parameter 'num_queues' expects integer" // past uint64
	}
	if n > math.MaxUint32 {
		return "Parameter 'num_queues' expects uint32_t"
	}
	// UINT32_MAX is QEMU's "auto" (VIRTIO_SCSI_AUTO_NUM_QUEUES): one per
	// vCPU, taken (measured on both versions).
	if n > MaxSCSIQueues && n != math.MaxUint32 {
		return fmt.Sprintf("Invalid number of queues (= %d), must be a positive integer less than %d.", n, MaxSCSIQueues)
	}
	return ""
}

// QueuesName prints a command line's queue count: "default" (QEMU's: one
// per vCPU) where none is set.
func QueuesName(n int) string {
	if n == 0 {
		return "default"
	}
	return strconv.Itoa(n)
}

// VMDefaults are the VM-level settings disk prediction needs.
type VMDefaults struct {
	SCSIHW   string // "" means Proxmox's default lsi
	Blockdev bool
	Template bool
}

// SCSIHW returns the SCSI controller model with Proxmox's default.
func SCSIHW(conf map[string]string) string {
	if v := conf["scsihw"]; v != "" {
		return v
	}
	return "lsi"
}

// Controller names the controller a drive sits on.
func Controller(bus, scsihw string) string {
	switch bus {
	case "scsi":
		if scsihw == "" {
			return "lsi"
		}
		return scsihw
	case "virtio":
		return "virtio-blk"
	case "efidisk":
		return "efi"
	}
	return bus
}

// UsesCacheDirect is drive_uses_cache_direct: an explicit cache mode decides;
// otherwise everything but CD-ROMs and the storages whose row says
// DirectOffDefault (btrfs without nocow) opens O_DIRECT.
func UsesCacheDirect(d *Drive, s *Storage) bool {
	if c := d.Opts["cache"]; c != "" {
		return c == "none" || c == "directsync" || c == "off"
	}
	if d.IsCDROM() {
		return false
	}
	if s != nil && s.Facts().Direct == storagetype.DirectOffDefault {
		return false
	}
	return true
}

// AIO is aio_cmdline_option: an explicit aio wins; else io_uring unless the
// storage forbids it, then native with O_DIRECT and threads without.
func AIO(d *Drive, s *Storage, direct bool) string {
	if a := d.Opts["aio"]; a != "" {
		return a
	}
	if storageAllowsIOUring(s, direct) {
		return "io_uring"
	}
	if direct {
		return "native"
	}
	return "threads"
}

// storageAllowsIOUring is storage_allows_io_uring_default: the hazards are
// the storage-type table's, shared with the rule that warns about an
// explicit io_uring.
func storageAllowsIOUring(s *Storage, direct bool) bool {
	return s == nil || s.Facts().IOUringHazard(direct) == ""
}

// DetectZeroes is detect_zeroes_cmdline_option.
func DetectZeroes(d *Drive) string {
	if v, ok := d.Opts["detect_zeroes"]; ok && v == "0" {
		return "off"
	}
	if v, ok := d.Opts["discard"]; ok {
		if v == "on" {
			return "unmap"
		}
		return "on"
	}
	return "on"
}

// NodeName is qemu-server's get_node_name for the file ("e") and format
// ("f") nodes: a hash of drive id and volume id.
func NodeName(prefix, driveID, volid string) string {
	sum := sha256.Sum256([]byte("drive=" + driveID + ",volid=" + volid))
	return prefix + hex.EncodeToString(sum[:])[:30]
}

// Predict computes what qemu-server would start a drive with. isBlock tells
// whether an absolute path is a block device. CD-ROMs get CDROM set and no
// discard/detect-zeroes; a "none" CD-ROM has no path. A volume that
// ResolveVolume cannot place is its error (an *UnmodelledError when the
// node's `pvesm path` can: then PredictVolume takes its answer).
func Predict(d *Drive, st Storages, vm VMDefaults, isBlock func(string) bool) (DiskSettings, error) {
	var vol Volume
	if d.Volume != "cdrom" && !d.IsNone() {
		v, err := ResolveVolume(st, d, isBlock)
		if err != nil {
			return DiskSettings{ID: d.Key}, err
		}
		vol = v
	}
	var stor *Storage
	if sid := d.StorageID(); sid != "" {
		stor = st[sid]
	}
	return PredictVolume(d, vol, stor, vm), nil
}

// PredictVolume is Predict for a volume already resolved (vol is ignored
// for "none" and "cdrom"); stor is the drive's storage (nil for a path).
func PredictVolume(d *Drive, vol Volume, stor *Storage, vm VMDefaults) DiskSettings {
	s := DiskSettings{
		ID:         d.Key,
		Blockdev:   vm.Blockdev,
		Controller: Controller(d.Bus, vm.SCSIHW),
		CDROM:      d.IsCDROM(),
		NodeTop:    "drive-" + d.Key,
		// A template starts only for a backup: read-only (its IDE and SATA
		// disks under -drive as ide-cd devices, the rest readonly=on).
		ReadOnly: d.Bool("ro") || d.IsCDROM() || vm.Template,
	}
	if d.Volume == "cdrom" {
		s.Path, s.Driver, s.Format = "/dev/cdrom", "host_cdrom", "raw"
	} else if !d.IsNone() {
		s.Path, s.Driver, s.Format = vol.Path, vol.Driver, vol.Format
		if f := d.Opts["format"]; f != "" && d.StorageID() == "" {
			s.Format = f
		}
		// host_cdrom for a device path with media=cdrom (Blockdev.pm's
		// generate_file_blockdev); a storage's volume keeps its plugin's
		// driver (a cloud-init drive on LVM is host_device).
		if s.CDROM && s.Driver == "host_device" && strings.HasPrefix(d.Volume, "/") {
			s.Driver = "host_cdrom"
		}
	}
	drv := d
	// EFI vars run with writeback in both generations (OVMF.pm): since
	// -blockdev explicitly (generate_ovmf_blockdev); before it
	// print_ovmf_drive_commandlines gives -drive if=pflash,unit=1 no cache=
	// (writeback only for RBD), so QEMU's default, writeback, applies.
	efiDrive := d.Bus == "efidisk" && !vm.Blockdev
	if d.Bus == "efidisk" && d.Opts["cache"] == "" {
		drv = d.Clone()
		drv.Opts["cache"] = "writeback"
	}
	s.CacheDirect = UsesCacheDirect(drv, stor)
	s.CacheNoFlush = drv.Opts["cache"] == "unsafe"
	if s.Driver == "rbd" && d.Bus == "efidisk" {
		s.CacheDirect, s.CacheNoFlush = false, false
	}
	s.WriteCache = "on"
	if c := drv.Opts["cache"]; c == "writethrough" || c == "directsync" {
		s.WriteCache = "off"
	}
	if !vm.Blockdev || s.Driver == "file" || s.Driver == "host_device" || s.Driver == "host_cdrom" || s.Driver == "" {
		s.AIO = AIO(d, stor, s.CacheDirect)
	}
	if !s.CDROM {
		s.Discard = "ignore"
		if d.Opts["discard"] == "on" {
			s.Discard = "unmap"
		}
		s.DetectZeroes = DetectZeroes(d)
	}
	if efiDrive {
		// The pflash -drive has no aio= or detect-zeroes=: QEMU's
		// defaults, threads and off.
		s.AIO, s.DetectZeroes = "threads", "off"
	}
	switch d.Bus {
	case "virtio":
		s.IOThread = d.Bool("iothread")
		s.Device = "virtio-blk-pci"
	case "scsi":
		s.IOThread = d.Bool("iothread") && vm.SCSIHW == "virtio-scsi-single"
		if vm.SCSIHW == "virtio-scsi-single" {
			s.Queues, _ = strconv.Atoi(d.Opts["queues"])
		}
		s.Device = "scsi-hd"
		if s.CDROM {
			s.Device = "scsi-cd"
		}
		// scsiblock=1 gives scsi-block only when the kernel says the path is
		// a SCSI disk (an ioctl qemu-server makes at start); we predict
		// scsi-hd and do not compare the device type.
	case "sata", "ide":
		s.Device = "ide-hd"
		if s.CDROM || vm.Template {
			s.Device = "ide-cd"
		}
	}
	if !d.IsNone() {
		s.NodeFormat = NodeName("f", d.Key, d.Volume)
		s.NodeFile = NodeName("e", d.Key, d.Volume)
	}
	if !(vm.Blockdev && d.Bool("scsiblock")) {
		s.Limits = d.Limits()
	}
	return s
}

// Diff lists the fields in which running differs from predicted, as
// "field: predicted -> running". Paths are not compared (storage layers may
// present the same volume under another name).
func Diff(pred, run DiskSettings) []string {
	var out []string
	add := func(field string, a, b any) {
		if fmt.Sprint(a) != fmt.Sprint(b) {
			out = append(out, fmt.Sprintf("%s: config %v, running %v", field, a, b))
		}
	}
	add("cache_direct", pred.CacheDirect, run.CacheDirect)
	add("cache_no_flush", pred.CacheNoFlush, run.CacheNoFlush)
	add("write_cache", pred.WriteCache, run.WriteCache)
	if !(pred.Blockdev && run.Blockdev && pred.Driver != run.Driver) {
		add("aio", pred.AIO, run.AIO)
	}
	add("discard", pred.Discard, run.Discard)
	add("detect_zeroes", pred.DetectZeroes, run.DetectZeroes)
	add("iothread", pred.IOThread, run.IOThread)
	add("queues", QueuesName(pred.Queues), QueuesName(run.Queues))
	if !pred.Limits.Equal(run.Limits) {
		out = append(out, fmt.Sprintf("limits: config {%s}, running {%s}", pred.Limits.Normal(), run.Limits.Normal()))
	}
	return out
}
