// Package cache says what each disk of a VM really runs with: the cache
// mode in the config (and whether it is Proxmox's default), the mode the
// running QEMU uses (from the block nodes' flags and the device's
// write-cache), the mode the next start applies, where a write sits once
// the guest has its acknowledgement and what a host crash loses (which
// depends on the storage as much as on the mode: package storage), and
// where the running VM drifted from its config.
package cache

import (
	"fmt"

	"github.com/pvediskcheck/pvediskcheck/advisory"
	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/flush"
	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/queues"
	"github.com/pvediskcheck/pvediskcheck/storage"
	"github.com/pvediskcheck/pvediskcheck/storage/zfs"
	"github.com/pvediskcheck/pvediskcheck/vm"
	"github.com/pvediskcheck/pvediskcheck/volchain"
)

// View is the cache view of one VM (docs/json.md, cache --json).
type View struct {
	VMID     int      `json:"vmid"`
	Running  bool     `json:"running"`
	Blockdev bool     `json:"blockdev"`
	Disks    []Disk   `json:"disks"`
	Notes    []string `json:"notes,omitempty"`
	// QEMU is the binary the running VM's QEMU runs: the build its QMP
	// greeting states, whether an upgrade replaced it since the start, the
	// version installed now (advisory.ReadBinary; check's qemu-advisory and
	// qemu-outdated judge it); omitted for a VM that does not run.
	QEMU *advisory.Binary `json:"qemu,omitempty"`
	// Unflushed is what the VM's QEMU holds dirty in node RAM now, from its
	// cgroup (layer disk.Cgroup), with what a host crash would lose of it;
	// omitted for a VM that does not run.
	Unflushed *Unflushed `json:"unflushed,omitempty"`
}

// Disk is one disk's view.
type Disk struct {
	ID string `json:"id"`
	// Media is "disk" or "cdrom"; Kind is qemuserver.Kind's name (disk,
	// cdrom, efivars, tpmstate).
	Media      string `json:"media"`
	Kind       string `json:"kind"`
	Controller string `json:"controller"`
	Volume     string `json:"volume"`
	Storage    string `json:"storage"`
	// Backend is how QEMU reaches the volume (storage.Backend).
	Backend  string `json:"backend"`
	Cache    Modes  `json:"cache"`
	AIO      string `json:"aio"`
	IOThread bool   `json:"iothread"`
	// AckedDataIn and CrashLoses are the two sentences for the mode the
	// disk runs (or, stopped, is configured; or, only pending, will run).
	AckedDataIn string `json:"acked_data_in"`
	CrashLoses  string `json:"crash_loses"`
	// Unmeasured names what the node cannot measure about this disk's
	// acknowledged writes (librbd's cache, ZFS, an iSCSI target, QEMU's
	// qcow2 metadata cache); "" when its counters see everything.
	Unmeasured string           `json:"unmeasured,omitempty"`
	Drift      []string         `json:"drift"`
	Flush      *flush.Judgement `json:"flush,omitempty"`
	// The disk as the guest sees it (layer disk.Agent): its stable
	// /dev/disk/by-id name from Proxmox's layout (null when it has none,
	// e.g. VirtIO Block without serial), and, when the guest agent
	// answers, its device and mount points.
	GuestByID   *string  `json:"guest_by_id"`
	GuestDevice *string  `json:"guest_device"`
	GuestMounts []string `json:"guest_mounts"`
	// GuestFilesystems are the mounted filesystems on the disk as the
	// guest agent reports them (guest-get-fsinfo: type, used and total
	// bytes, where on the disk, the disks under each); null when the agent
	// was not asked or did not answer, [] when it answered and none is on
	// this disk.
	GuestFilesystems []guestdisk.Filesystem `json:"guest_filesystems"`
	// ZFS is what `zfs get` says of the disk's zvol (a zfspool disk only):
	// its volblocksize, sync, compression, primarycache, logbias,
	// refreservation and volsize, or why they are unknown (layer disk.ZFS).
	ZFS *zfs.Zvol `json:"zfs,omitempty"`
	// Queues are the disk's virtqueue counts (config, command line, what
	// QEMU runs), where the config sets queues= or QEMU runs more than one
	// (layer disk.Queues).
	Queues *queues.Count `json:"queues,omitempty"`
	// Backing is the image chain QEMU runs the disk with, top layer to
	// base, where its running image has a backing file (layer disk.Backing);
	// absent for every other disk.
	Backing *volchain.Backing `json:"backing_chain,omitempty"`

	// Shown is the mode the two sentences describe, Heading the line they
	// are printed under (the mode, with the storage where it changes
	// them), Lines what is particular to this disk.
	Shown   string `json:"-"`
	Heading string `json:"-"`
	Lines   []Line `json:"-"`
	// keeps: acknowledged writes can wait in volatile memory of this node
	// (what --verify measures).
	keeps bool
	// pageCache: the disk's writes go through the node page cache
	// (storage.Writes.Visible), where the VM's cgroup counts them.
	pageCache bool
}

// Line is one remark about a disk; Drift marks a difference between the
// config and what runs.
type Line struct {
	Drift bool
	Text  string
}

// Modes are a disk's cache modes and the flags they rest on.
type Modes struct {
	Configured        string  `json:"configured"`
	ConfiguredDefault bool    `json:"configured_default"`
	Effective         *string `json:"effective"`
	Pending           *string `json:"pending"`
	Direct            *bool   `json:"direct"`
	NoFlush           *bool   `json:"no_flush"`
	WriteCache        *string `json:"write_cache"`
	// GuestWriteCache is the write cache in force at runtime (query-block
	// inserted.cache.writeback): what a driver negotiated, which can
	// differ from WriteCache.
	GuestWriteCache *bool `json:"guest_write_cache"`
}

// Facts for drives that are not guest disks.
var (
	cdromFacts    = [2]string{"nowhere: a CD-ROM medium is read-only", "nothing"}
	efivarsFacts  = [2]string{"OVMF's variable store (pflash, not a guest disk): only the firmware writes it, through this cache mode", "at most a firmware variable change (boot order, Secure Boot keys) not yet written to storage"}
	tpmstateFacts = [2]string{"swtpm's state: swtpm writes it, QEMU never opens it", "nothing QEMU holds"}
)

// Build is the view of the disks of set (read with Live when the VM runs;
// set.AskErr is why QEMU could not be read), with the layers it has read:
// the zvols' properties, the queue counts, the backing chains and the
// guest's names. It reads nothing itself.
func Build(set *disk.Set) View {
	v := set.VM
	out := View{VMID: v.VMID, Running: v.Running, Blockdev: v.Blockdev, Disks: []Disk{}}
	if !v.Running {
		out.Notes = append(out.Notes, fmt.Sprintf("VM %d is not running: showing the configured values", v.VMID))
	} else if set.AskErr != nil {
		out.Notes = append(out.Notes, vm.QMPNote(set.AskErr)+"; effective modes are taken from the command line")
	}
	out.Notes = append(append(out.Notes, v.Notes...), v.IgnoredNotes()...)
	for _, d := range set.Disks {
		if d.Drive == nil && d.Running == nil && d.PendingDrive == nil {
			continue
		}
		if d.Kind() == qemuserver.KindEmptyCDROM {
			out.Notes = append(out.Notes, d.NotListed()) // an empty CD-ROM drive holds nothing
			continue
		}
		if d.ResolveError != nil {
			out.Notes = append(out.Notes, d.ResolveError.Error())
		}
		if drv, _ := d.NextStart(); !d.PendingDelete {
			if why := v.Storages.ISOMediaRefusal(d.ID, drv); why != "" {
				when := "the VM does not start"
				if v.Running {
					when = "the VM was started before this line was set, and its next start fails"
				}
				out.Notes = append(out.Notes, fmt.Sprintf("%s: %s is an ISO image without media=: %s; qemu-server says %q (pvediskcheck check %d gives the fix)", d.ID, drv.Volume, when, why, v.VMID))
			}
		}
		out.Disks = append(out.Disks, build(v, d))
	}
	out.Unflushed = unflushed(set.Cgroup, out.Disks)
	return out
}

func build(v *vm.VM, d *disk.Disk) Disk {
	kind := d.Kind()
	j := Disk{ID: d.ID, Media: "disk", Kind: kind.String(), Drift: []string{}, GuestMounts: []string{}}
	if kind == qemuserver.KindCDROM {
		j.Media = "cdrom"
	}
	switch {
	case d.Configured != nil:
		j.Controller = d.Configured.Controller
	case d.Running != nil:
		j.Controller = d.Running.Controller
	}
	if d.Drive != nil {
		j.Volume = d.Drive.Volume
		j.Storage = d.Drive.StorageID()
		j.Cache.Configured = d.Drive.Opts["cache"]
		if j.Cache.Configured == "" {
			j.Cache.ConfiguredDefault = true
			j.Cache.Configured = "none"
			if d.Configured != nil {
				j.Cache.Configured = d.Configured.Mode()
			}
		}
	}
	if d.Pending != nil {
		m := d.Pending.Mode()
		if d.Drive == nil || m != j.Cache.Configured || d.PendingDrive.Opts["cache"] != d.Drive.Opts["cache"] {
			j.Cache.Pending = &m // a disk only in [PENDING] is added at the next start
		}
		if d.Drive == nil {
			j.Volume, j.Storage = d.PendingDrive.Volume, d.PendingDrive.StorageID()
			j.Controller = d.Pending.Controller
		}
	}
	mode, from, settings := j.Cache.Configured, "", d.Configured
	if mode == "" && j.Cache.Pending != nil {
		mode, from, settings = *j.Cache.Pending, "at the next start", d.Pending
	}
	eff := qemuserver.CacheOf(mode)
	if g := d.Graph; g != nil {
		j.AIO, j.IOThread, j.Controller = d.Running.AIO, d.Running.IOThread, d.Running.Controller
		if d.Live != nil && d.Live.Inserted {
			gw := d.Live.GuestWriteCache
			j.Cache.GuestWriteCache = &gw
		}
		eff = g.Effective
		mode, from, settings = eff.Mode, "", d.Running
		j.Cache.Effective, j.Cache.Direct, j.Cache.NoFlush, j.Cache.WriteCache = &eff.Mode, &eff.Direct, &eff.NoFlush, &eff.WriteCache
		if d.Configured != nil {
			j.Drift = append(j.Drift, qemuserver.Diff(*d.Configured, g.DiskSettings)...)
		} else if d.Drive == nil {
			j.Drift = append(j.Drift, "disk is attached to the running VM but not in the config")
		}
	} else if d.Configured != nil {
		j.AIO, j.IOThread = d.Configured.AIO, d.Configured.IOThread
	}
	// An empty CD-ROM has nothing to attach, swtpm opens the TPM state, and
	// the legacy generation attaches EFI vars as firmware (pflash), which
	// the command line does not list as a disk.
	attached := kind != qemuserver.KindEmptyCDROM && kind != qemuserver.KindTPMState && (kind != qemuserver.KindEFIVars || v.Blockdev)
	if v.Running && d.Running == nil && d.Drive != nil && attached {
		j.Drift = append(j.Drift, "disk is in the config but not attached to the running VM")
	}
	j.Shown = mode
	stor := d.Storage
	if d.Drive == nil && d.Pending != nil {
		stor = d.PendingStorage
	}
	format := ""
	if settings != nil {
		format = settings.Format
	}
	w := storage.ForDisk(stor, settings, eff)
	j.Backend = string(w.Backend)
	facts := [2]string{w.AckedIn, w.CrashLoses}
	heading := mode
	if l := backendLabel(w, stor, format); l != "" && facts != storage.PageCacheFacts[mode] {
		heading += ", " + l
	}
	switch kind {
	case qemuserver.KindCDROM:
		facts, heading = cdromFacts, "cd-rom"
	case qemuserver.KindEFIVars:
		facts, heading = efivarsFacts, "EFI vars ("+mode+")"
	case qemuserver.KindTPMState:
		facts, heading = tpmstateFacts, "TPM state"
	default:
		j.Unmeasured = w.Note()
		j.keeps = w.HeldOnNode || j.Cache.NoFlush != nil && *j.Cache.NoFlush
		j.pageCache = w.Visible
	}
	if from != "" {
		heading += ", " + from
	}
	j.AckedDataIn, j.CrashLoses, j.Heading = facts[0], facts[1], heading
	j.Lines = lines(j)
	if z := d.ZFS; z != nil {
		j.ZFS = z
		j.Lines = append(j.Lines, zfsLines(z)...)
	}
	if c := d.Queues; c.Shown() {
		j.Queues = c
		j.Lines = append(j.Lines, Line{Text: c.Line()})
	}
	if b := d.Backing; b != nil {
		j.Backing = b
		for _, l := range b.Lines() {
			j.Lines = append(j.Lines, Line{Text: l})
		}
	}
	guest(&j, d)
	return j
}

// backendLabel names the storage in a heading where its sentences differ
// from the page-cache table.
func backendLabel(w storage.Writes, stor *qemuserver.Storage, format string) string {
	switch w.Backend {
	case storage.Zvol:
		return "ZFS zvol"
	case storage.Librbd:
		return "Ceph through librbd"
	case storage.KRBD:
		return "Ceph through krbd"
	case storage.Libiscsi:
		return "iSCSI through libiscsi"
	case storage.Unknown:
		typ := "this storage type"
		if stor != nil {
			typ = "storage type " + stor.Type
		}
		return typ + ", not modelled"
	}
	if format == "qcow2" {
		return "qcow2"
	}
	return ""
}

// lines are the remarks particular to one disk.
func lines(j Disk) []Line {
	var out []Line
	c := j.Cache
	if c.GuestWriteCache != nil && c.WriteCache != nil && (*c.WriteCache == "on") != *c.GuestWriteCache {
		out = append(out, Line{Text: runtimeWriteCache(c, j.Controller == "virtio-blk")})
	}
	for _, dr := range j.Drift {
		out = append(out, Line{Drift: true, Text: dr})
	}
	if len(j.Drift) > 0 && c.Effective != nil && *c.Effective != c.Configured && c.Configured != "" {
		out = append(out, Line{Text: fmt.Sprintf("config says %s, VM still runs %s: restart the VM to apply", c.Configured, *c.Effective)})
	}
	if c.Pending != nil {
		out = append(out, Line{Text: "pending: the next start runs " + *c.Pending})
	}
	if j.Unmeasured != "" {
		out = append(out, Line{Text: j.Unmeasured})
	}
	return out
}

// runtimeWriteCache says why the write cache in force differs from the
// configured one, and what that means for flushes.
func runtimeWriteCache(c Modes, virtioBlk bool) string {
	on := *c.GuestWriteCache
	if on {
		return fmt.Sprintf("the guest has turned the write cache on at runtime (configured %s)", *c.WriteCache)
	}
	s := fmt.Sprintf("the guest has turned the write cache off at runtime (configured %s): QEMU completes each write only once it is flushed", *c.WriteCache)
	if virtioBlk {
		// Firmware such as SeaBIOS sets a VirtIO Block device up without
		// negotiating flushes, which leaves its write cache off until the
		// guest OS loads its own driver. QEMU's x-query-virtio-status would
		// tell the two apart, but it made QEMU 11.1.3 abort (the VM died)
		// in our tests: a read-only tool never sends it.
		s = fmt.Sprintf("the write cache is off at runtime (configured %s): either no guest OS driver has negotiated it yet (firmware such as SeaBIOS leaves it off until the guest loads its own driver) or the guest turned it off; the node cannot tell which; either way QEMU completes each write only once it is flushed, so nothing acknowledged waits", *c.WriteCache)
	}
	if c.NoFlush != nil && *c.NoFlush {
		s += "; but cache.no-flush drops those flushes, so writes still wait in node RAM"
	}
	return s
}

// ToVerify lists the disks whose acknowledged writes can wait in volatile
// memory of this node (node page cache, ZFS, librbd's cache, QEMU's qcow2
// metadata cache) or whose flushes QEMU drops: the ones a flush
// measurement can say something about.
func ToVerify(view View) []string {
	var ids []string
	for _, d := range view.Disks {
		if d.keeps && d.Cache.Effective != nil {
			ids = append(ids, d.ID)
		}
	}
	return ids
}

// Attach puts each disk's flush verdict into the view, and how the VM's
// unflushed bytes moved over the window.
func (view *View) Attach(r *flush.Result) {
	if view.Unflushed != nil {
		view.Unflushed.Verify = r.Unflushed
	}
	for i := range view.Disks {
		for k := range r.Verdicts {
			if r.Verdicts[k].Disk == view.Disks[i].ID {
				j := r.Verdicts[k]
				view.Disks[i].Flush = &j
			}
		}
	}
}

// zfsLines are a zvol's line and one for each sync rule that applies:
// sync=disabled loses what the guest flushed, sync=always makes every
// write a ZIL commit.
func zfsLines(z *zfs.Zvol) []Line {
	out := []Line{{Text: z.Summary()}}
	switch {
	case z.FlushesDropped():
		out = append(out, Line{Text: "sync=disabled: " + zfs.SyncDisabledLoss + " (fix: " + zfs.SyncFix(z.Dataset) + ")"})
	case z.CommitsEveryWrite():
		out = append(out, Line{Text: "sync=always: " + zfs.SyncAlwaysCost})
	}
	return out
}

// Ignored reports a disk whose flushes were measured and found ignored.
func (view View) Ignored() bool {
	for _, d := range view.Disks {
		if d.Flush != nil && d.Flush.Verdict == flush.Ignored {
			return true
		}
	}
	return false
}
