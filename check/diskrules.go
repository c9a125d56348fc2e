package check

import (
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/storage"
	"github.com/pvediskcheck/pvediskcheck/storage/storagetype"
)

// The disk rules (Scope PerDisk in rules) and the run of one disk through
// them: each rule adds findings with the edit of the disk's line that
// fixes them, and finish folds the edits into one command.

// osWord says what the advice rests on: the guest agent's answer where
// the VM runs and it answers, else the config's ostype, the admin's word,
// not proof (a real VM named win10 says l26).
func (in *Input) osWord() string {
	if in.os != nil {
		return "the guest agent reports " + in.os.name() + ", which has VirtIO drivers"
	}
	return "the config's ostype " + in.ostype + " says the guest has VirtIO drivers"
}

// macOSEvidence says what shows the guest is macOS: an Apple SMC on
// QEMU's command line (`args: -device isa-applesmc,...`, which only a macOS
// guest needs, whatever ostype says); "" when nothing does.
func macOSEvidence(args string) string {
	if strings.Contains(args, "isa-applesmc") {
		return "the config's args give QEMU -device isa-applesmc"
	}
	return ""
}

// virtioGuest: the guest has VirtIO drivers out of the box, by the guest
// agent where it answered, else by the config's ostype; never macOS.
func (in *Input) virtioGuest() bool {
	if in.macOS != "" {
		return false
	}
	if in.os != nil {
		return !in.os.windows()
	}
	return virtioCapable(in.ostype)
}

// protected: the config sets protection (update_vm then refuses to remove
// a drive, so no move).
func (in *Input) protected() bool {
	b, ok := qemuserver.ParseBool(in.next["protection"])
	return ok && b
}

// defaultSCSIHW says when the controller is Proxmox's default, not a line.
func (in *Input) defaultSCSIHW() string {
	if in.next["scsihw"] == "" {
		return " (Proxmox's default when scsihw is not set)"
	}
	return ""
}

// driverNote is what a guest needs before its disks move from an emulated
// controller to VirtIO SCSI: without the driver (Windows ships none) it no
// longer finds its boot disk.
const driverNote = " (the guest needs its VirtIO SCSI driver first: virtio_scsi on Linux, vioscsi on Windows)"

// vmRun is one VM's disks under judgement: the SCSI slots in use or
// promised to an earlier disk's move, so that two moves never pick the
// same slot, and the notes the disk rules add (what they could not
// decide), said after the disks.
type vmRun struct {
	out   *VMResult
	taken map[int]bool
	notes []string
}

// freeSCSISlot is the first SCSI index no disk uses (scsi0..30), or -1.
func (run *vmRun) freeSCSISlot() int {
	for i := 0; i <= 30; i++ {
		if !run.taken[i] {
			run.taken[i] = true
			return i
		}
	}
	return -1
}

// edit is one change a rule wants on the disk's line.
type edit int

// Edits, in the order they are applied to the fixed line.
const (
	editSSD     edit = iota // the line without ssd= (ssd-unsupported)
	editLimits              // drop the limit keys Proxmox rejects
	editCache               // drop cache=unsafe/writeback (default: none)
	editDiscard             // discard=on
	editAIO                 // drop aio=io_uring where it is still a hazard, aio=native where still without O_DIRECT
	editSCSIHW              // scsihw virtio-scsi-single (a VM option)
	editMove                // move an emulated-controller disk to SCSI
	editQueues              // drop a queues= QEMU refuses
	editPolicy              // what the --policy file requires (policy.Mend)
)

// diskRun is one disk under judgement: its findings and the edits that fix
// them, combined into one command at the end.
type diskRun struct {
	in  *Input
	run *vmRun
	d   *disk.Disk
	// drv, stor, settings and path are the line the next start uses
	// (Input.lines); drv nil without one.
	drv      *qemuserver.Drive
	stor     *qemuserver.Storage
	settings qemuserver.DiskSettings
	path     string // the volume of settings as this process opens it
	line     *line
	findings []Finding
	fixed    []bool // findings[i] is fixed by the combined command
	edits    map[edit]bool
	// dropped: Proxmox drops the line, the VM starts without the disk;
	// drv is the line repaired.
	dropped bool
}

func newDiskRun(in *Input, run *vmRun, d *disk.Disk) *diskRun {
	r := &diskRun{in: in, run: run, d: d, edits: map[edit]bool{}}
	if l := in.lines[d.ID]; l != nil {
		r.line = l
		if l.drv != nil {
			r.drv, r.stor, r.settings, r.path = l.drv, l.stor, l.settings, l.path
		}
	}
	return r
}

// say records a finding the disk's command does not fix.
func (r *diskRun) say(f Finding) {
	r.findings = append(r.findings, f)
	r.fixed = append(r.fixed, false)
}

// note is said after the VM's disks.
func (r *diskRun) note(n string) { r.run.notes = append(r.run.notes, n) }

// add records a finding and the edit to the disk's line that fixes it.
// On a line Proxmox drops it judges the line as its fix restores it, and
// says so: the VM has no such disk until then.
func (r *diskRun) add(sev Severity, code Code, msg string, e edit) {
	if r.dropped {
		msg = "once the line is fixed (today the VM starts without this disk): " + msg
	}
	r.findings = append(r.findings, Finding{Severity: sev, Code: code, Disk: r.d.ID, Message: msg})
	r.fixed = append(r.fixed, true)
	r.edits[e] = true
}

// resolveError: a disk whose volume vm could not place. A plugin storage
// `pvesm path` could not place here is said, not judged; any other line
// Proxmox parses but cannot start the VM with.
func resolveError(_ *Input, r *diskRun) {
	d := r.d
	if d.ResolveError == nil {
		return
	}
	var ue *qemuserver.UnmodelledError
	if errors.As(d.ResolveError, &ue) {
		r.run.out.Notes = append(r.run.out.Notes, d.ResolveError.Error())
		return
	}
	r.say(Finding{Severity: Error, Code: CodeConfigInvalid, Disk: d.ID,
		Message: d.ResolveError.Error() + ": the VM does not start until it is fixed"})
}

// lineIgnored: a config line that does not parse, and that no repair of
// its ssd= or limits makes one Proxmox takes (measureLine): Proxmox
// ignores the disk.
func lineIgnored(_ *Input, r *diskRun) {
	if r.line != nil && r.line.ignored {
		r.say(Finding{Severity: Error, Code: CodeConfigInvalid, Disk: r.d.ID, Message: r.d.ParseError.Error() + ": Proxmox ignores this disk"})
	}
}

// ssdUnsupported: parse_vm_config drops a VirtIO Block line with ssd=
// ("unable to parse value of 'virtio0' - format error / ssd: property is
// not defined in schema"; TestSSDOnVirtIOAsProxmox asks Proxmox): the VM
// starts without the disk, so an error. The other rules judge the line as
// the fix restores it (one command fixes all, none appears after it), each
// saying the disk is not there yet.
func ssdUnsupported(in *Input, r *diskRun) {
	if !r.line.ssd {
		return
	}
	id := r.d.ID
	msg := "ssd emulation is not available on VirtIO Block (Proxmox offers it for SCSI, SATA and IDE only): Proxmox drops this hand-edited line (\"unable to parse value of '" + id + "' - format error: ssd: property is not defined in schema\") and starts the VM without the disk"
	if in.bootsFrom(id) {
		msg += ", its boot disk: the guest does not boot"
	}
	r.findings = append(r.findings, Finding{Severity: Error, Code: CodeSSDUnsupported, Disk: id, Message: msg})
	r.fixed = append(r.fixed, true)
	r.edits[editSSD] = true
	r.dropped = true
}

// limitInvalid: limits Proxmox rejects (the whole line) or QEMU refuses
// (the start).
func limitInvalid(_ *Input, r *diskRun) {
	p := r.drv.LimitProblems()
	if len(p) == 0 {
		return
	}
	why := ": Proxmox rejects the whole disk line (Drive.pm parse_drive) and starts the VM without the disk"
	if qemuserver.LimitRefuser(p) == "QEMU" {
		msgs := qemuserver.LimitQEMUMessages(p)
		why = ": qm set accepts the line, but QEMU refuses to start the VM: "
		if slices.Contains(msgs, qemuserver.QEMUMaxMsg) {
			why = ": qm set accepts the line (Drive.pm checks that pairing for mbps only), but QEMU refuses to start the VM: "
		}
		for i, m := range msgs {
			if i > 0 {
				why += "; "
			}
			why += strconv.Quote(m)
		}
	}
	r.add(Error, CodeLimitInvalid, strings.Join(p, "; ")+why, editLimits)
}

// queuesInvalid: qemu-server passes queues= to the disk's own controller
// only under scsihw virtio-scsi-single (QemuServer.pm config_to_command),
// where QEMU refuses what is over its maximum and the VM does not start.
func queuesInvalid(in *Input, r *diskRun) {
	q, ok := r.drv.Opts["queues"]
	if !ok || r.drv.Bus != "scsi" || in.scsihw != "virtio-scsi-single" {
		return
	}
	if why := qemuserver.QueuesRefusal(q); why != "" {
		r.add(Error, CodeQueuesInvalid, fmt.Sprintf("queues=%s: qm set accepts it (Proxmox checks only the minimum of 2), but QEMU refuses to start the VM: %q (at most %d queues; without queues= QEMU picks its default, one per vCPU from machine type 5.2)", q, why, qemuserver.MaxSCSIQueues), editQueues)
	}
}

// iothreadIgnored: only VirtIO SCSI single gives a SCSI disk its own
// controller and IO thread.
func iothreadIgnored(in *Input, r *diskRun) {
	if r.drv.Bus == "scsi" && r.drv.Bool("iothread") && in.scsihw != "virtio-scsi-single" {
		r.add(Warning, CodeIOThreadIgnored,
			fmt.Sprintf("iothread=1 is ignored with scsihw %s: only VirtIO SCSI single gives each disk its own controller and IO thread", in.scsihw),
			editSCSIHW)
	}
}

// cacheMode: a cache mode that keeps what the guest wrote in RAM; a
// read-only drive takes no guest writes, so no cache mode can lose any.
func cacheMode(_ *Input, r *diskRun) {
	switch r.drv.Opts["cache"] {
	case "unsafe":
		r.add(Error, CodeCacheUnsafe, "cache=unsafe ignores the guest's flushes: data the guest believes safe stays in "+r.where()+" and a host crash loses it", editCache)
	case "writeback":
		r.add(Warning, CodeCacheWriteback, "cache=writeback keeps what the guest has not flushed in "+r.where()+": the guest's flushes are honoured, so a host crash loses only what the guest had not flushed, as with a disk's own write cache, but that can be as much as the node lets stay dirty", editCache)
	}
}

// emulatedController: a disk on SATA or IDE, or on an emulated SCSI
// controller, of a guest with VirtIO drivers.
func emulatedController(in *Input, r *diskRun) {
	if (r.drv.Bus == "sata" || r.drv.Bus == "ide") && in.virtioGuest() {
		msg := fmt.Sprintf("%s is an emulated controller; the lab measured SATA at 25-30%% of VirtIO random reads at 3-4 times the latency, and %s", strings.ToUpper(r.drv.Bus), in.osWord())
		if why, where := r.unsettable(); why != "" {
			// qm set refuses the moved line too: no command moves it.
			r.say(Finding{Severity: Warning, Code: CodeEmulatedController, Disk: r.d.ID,
				Message: msg + "; " + why + " (" + where + "), so only an edit of the config file moves it"})
		} else if in.protected() {
			// update_vm refuses the --delete of a move: "can't remove
			// drive 'sata0' - protection mode enabled" (asked of the
			// oracle: TestCheckFixesAcceptedByProxmox).
			r.say(Finding{Severity: Warning, Code: CodeEmulatedController, Disk: r.d.ID,
				Message: msg + fmt.Sprintf("; the VM has protection: 1, and qm set refuses the move (%q): no move is printed; clear it first (qm set %d --protection 0) to move the disk, and set it again after", "can't remove drive '"+r.d.ID+"' - protection mode enabled", in.v.VMID)})
		} else {
			r.add(Warning, CodeEmulatedController, msg, editMove)
		}
	}
	// The emulated SCSI controllers cost what SATA and IDE cost: QEMU
	// emulates every request in its main loop and no disk gets an IO
	// thread. Proxmox's default without a scsihw line is lsi (QemuServer.pm
	// $confdesc scsihw), one of them.
	if r.drv.Bus == "scsi" && !qemuserver.VirtIOSCSI(in.scsihw) && slices.Contains(qemuserver.SCSIControllers, in.scsihw) && in.virtioGuest() {
		r.add(Warning, CodeEmulatedController,
			fmt.Sprintf("scsihw %s%s is an emulated SCSI controller: QEMU emulates every request in its main loop, without an IO thread, as it does for SATA (which the lab measured at 25-30%% of VirtIO random reads at 3-4 times the latency), and %s", in.scsihw, in.defaultSCSIHW(), in.osWord()),
			editSCSIHW)
	}
}

// discardIgnored: discard off where the guest's trims could give space
// back (a raw image's sparse test was measured: Input.lines); a read-only
// drive frees nothing.
func discardIgnored(_ *Input, r *diskRun) {
	if r.drv.Opts["discard"] == "on" {
		return
	}
	if storage.ReturnsSpaceOf(r.stor, r.settings.Format, func() bool { return r.line.image != nil && r.line.image.sparse }) {
		r.add(Warning, CodeDiscardIgnoredOnThin,
			"discard is off on "+r.storageName()+": space the guest frees (fstrim) never returns to the "+r.evidenceDiscard(),
			editDiscard)
	} else if n := r.rawImageNote(); n != "" {
		r.note(n)
	}
}

// storageUnavailable: vm_start activates every volume of the config
// (pve-storage activate_volumes -> storage_check_enabled), so a volume on
// a storage disabled or not available on this node stops the start with
// pve-storage's message. Any drive kind with a volume (disk, EFI, TPM, an
// ISO): each is activated. No qm set fixes it; the fix is the storage's or
// a move of the volume.
func storageUnavailable(in *Input, r *diskRun) {
	d := r.d
	drv, st := d.NextStart()
	if d.ParseError != nil || d.PendingDelete || drv == nil {
		return
	}
	if st == nil {
		return
	}
	why := st.Unavailable(in.here)
	if why == "" {
		if in.here == "" && st.Props["nodes"] != "" {
			r.note(fmt.Sprintf("%s: storage %s is available on nodes %s only; this node's name is unknown (no /etc/pve/local or /etc/hostname below the root), so whether the next start finds it is not checked", d.ID, st.ID, st.Props["nodes"]))
		}
		return
	}
	// No qm disk move: it activates the source volume on this node first
	// (API2/Qemu.pm move_disk's $move_updatefn: activate_volumes of the
	// drive's volume), which fails as the start does.
	fix := "pvesm set " + st.ID + " --disable 0"
	if !st.Bool("disable") {
		fix = "pvesm set " + st.ID + " --nodes " + st.Props["nodes"] + "," + in.here + " (when this node reaches the storage), or run the VM on a node of " + st.Props["nodes"] + " (qm disk move cannot help: it activates the volume on this node first and fails as the start does)"
	} else {
		fix += " (qm disk move cannot help: it activates the volume first and fails as the start does)"
	}
	r.say(Finding{Severity: Error, Code: CodeStorageUnavailable, Disk: d.ID,
		Message: fmt.Sprintf("storage %s is %s: the next start fails with %q (vm_start activates every volume)", st.ID, why, st.ProxmoxRefusal(in.here)),
		Fix:     fix})
}

// iso: the drive's volume is ISO content (pve-storage vtype iso) and not
// a CD-ROM: qm set refuses any line for it (API2/Qemu.pm
// check_drive_param: "explicit 'media=cdrom' is required for iso images"),
// so its fixes are edits of the config file, never a qm set.
func (r *diskRun) iso() bool {
	return r.in.v.Storages.IsISO(r.drv.Volume) && r.drv.Opts["media"] != "cdrom"
}

// unsettable says why qm set refuses any line for the disk's volume, and
// where Proxmox says so; "" when it takes one. An ISO image that is not a
// CD-ROM: check_drive_param wants media=cdrom for it. A path outside /dev:
// cleanup_drive_path turns it into a storage's volume or refuses it
// ("unable to associate path ... to any storage"); which storage's
// volume a path is, is not modelled, so every such path counts as
// refused, and its fix is the edit of the config file, which always works.
func (r *diskRun) unsettable() (why, where string) {
	if r.iso() {
		return "qm set refuses an ISO image without media=cdrom", "API2/Qemu.pm"
	}
	if v := r.drv.Volume; strings.HasPrefix(v, "/") && !strings.HasPrefix(v, "/dev/") {
		return "qm set takes a path outside /dev only as a storage's volume", "QemuServer.pm cleanup_drive_path"
	}
	return "", ""
}

// isoWithoutMedia: qemu-server refuses to start a VM with an ISO volume
// that sets no media (QemuServer.pm print_drive_commandline_full and
// Blockdev.pm generate_file_blockdev, commit 2e2f8cb7 "print drive
// commandline: die if drive with ISO sets no explicit media"). An ISO
// volume used as a disk is, on real nodes, a macOS OpenCore or recovery
// image: a raw disk, which the guest boots from as a disk only. So the fix
// is media=disk, an edit of the file (qm set refuses any media but cdrom
// for an ISO image: API2/Qemu.pm check_drive_param); media=cdrom by qm set
// is offered after it for an installer, but not where the line sets
// format=, which Proxmox refuses beside media=cdrom ("unable to parse
// drive options").
func isoWithoutMedia(in *Input, r *diskRun) {
	if !r.iso() || r.drv.Opts["media"] != "" {
		return
	}
	vmid := strconv.Itoa(r.in.v.VMID)
	disk := r.drv.Clone()
	disk.Opts["media"] = "disk"
	fix := "edit " + configFile(vmid) + ": the line '" + r.d.ID + ": " + r.drv.String() + "' becomes '" + r.d.ID + ": " + disk.String() + "' (the image as the raw disk it is, as a macOS OpenCore or recovery image is: qm set refuses media=disk for an ISO image)"
	if _, ok := r.drv.Opts["format"]; !ok {
		cd := r.drv.Clone()
		cd.Opts["media"] = "cdrom"
		fix += "; for an installer the guest only reads, " + shellJoin([]string{"qm", "set", vmid, "--" + r.d.ID, cd.String()}) + " instead"
	}
	when := "the VM will not start"
	if r.in.v.Running {
		when = "the running VM was started before this line was set, and its next start fails"
		fix += ", then qm reboot " + vmid + " " + restartHint
	}
	r.say(Finding{Severity: Error, Code: CodeConfigInvalid, Disk: r.d.ID,
		Message: fmt.Sprintf("%s: %s is an ISO image without media=: %s; qemu-server says %q", r.d.ID, r.drv.Volume, when, r.in.v.Storages.ISOMediaRefusal(r.d.ID, r.drv)),
		Fix:     fix})
}

// configFile is the VM's config as the admin edits it on the node.
func configFile(vmid string) string { return "/etc/pve/qemu-server/" + vmid + ".conf" }

// aio judges an explicit aio mode where QEMU applies it (the protocol
// drivers that open a file or device: with -blockdev qemu-server emits aio
// for those only, and only file-posix refuses native without O_DIRECT).
func aio(_ *Input, r *diskRun) {
	switch r.settings.Driver {
	case "file", "host_device", "host_cdrom":
	default:
		return
	}
	direct := r.settings.Cache().Direct // as the next start runs it (qemuserver.PredictVolume)
	switch r.drv.Opts["aio"] {
	case "native":
		if !direct {
			r.add(Error, CodeAIONativeNeedsDirect,
				fmt.Sprintf("aio=native with cache=%s: the VM will not start; QEMU says: %q (or keep aio=native with cache=none)", r.cacheName(), QEMUNativeMsg),
				editAIO)
		}
	case "io_uring":
		if h := storage.IOUringHazard(r.stor, direct); h != "" {
			r.add(Warning, CodeAIOIOUringRisk,
				fmt.Sprintf("aio=io_uring on %s with cache=%s: qemu-server avoids io_uring there unless asked, because %q (Drive.pm storage_allows_io_uring_default)", r.storageName(), r.cacheName(), h),
				editAIO)
		}
	}
}

func (r *diskRun) cacheName() string {
	if c := r.drv.Opts["cache"]; c != "" {
		return c
	}
	if r.stor != nil && r.stor.Facts().Direct == storagetype.DirectOffDefault {
		return "default (" + r.stor.Type + " storage: no O_DIRECT)"
	}
	return "default"
}

func (r *diskRun) storageName() string {
	if r.stor == nil {
		return "thin storage"
	}
	return r.stor.Type + " storage " + r.stor.ID
}

// where says where writes the guest has not had flushed sit, as the
// storage's row (or a path's protocol driver) says: the node's page cache
// for what the kernel opens (the lab measured it there), librbd's own cache
// inside QEMU for Ceph without krbd, the target's cache for iSCSI.
func (r *diskRun) where() string {
	switch storage.EvidenceOf(r.stor, r.settings.Driver) {
	case storagetype.EvidenceLibrbd:
		return "librbd's cache inside the QEMU process (rbd_cache; not measured here, no Ceph)"
	case storagetype.EvidenceRemote:
		return "the storage's volatile write cache (not measured here)"
	}
	return "node RAM (page cache; lab: 1,050,036 kB still dirty after fsync)"
}

// evidenceDiscard names what keeps the space and the measurement that shows
// it, for this storage.
func (r *diskRun) evidenceDiscard() string {
	e := storagetype.DiscardEvidenceImage
	if r.stor != nil {
		e = r.stor.Facts().DiscardEvidence
	}
	switch e {
	case storagetype.DiscardEvidenceThinLV:
		return "pool (lab: fstrim reported 2.9 GiB, lvs unchanged at 50.79 %)"
	case storagetype.DiscardEvidenceZvol:
		return "pool (the zvol's referenced bytes stay; not measured here, no ZFS)"
	case storagetype.DiscardEvidenceRBD:
		return "pool (rbd du's used size stays; not measured here, no Ceph)"
	}
	return "storage (measured with QEMU on a sparse image: a guest trim of 128 MiB left its allocated blocks unchanged with discard=ignore; with discard=on 128 MiB went back)"
}

// rawImageNote says why discard was not judged on a raw image of a file
// storage (dir, nfs, cifs ...), whose space comes back only when the file
// is sparse: a fully allocated image (preallocated, or copied in full) or
// one this process cannot read. "" for any other disk.
func (r *diskRun) rawImageNote() string {
	if r.stor == nil || r.stor.Facts().Discard != storagetype.DiscardPerImage || r.settings.Format == "qcow2" || r.in.v.Storages.IsISO(r.drv.Volume) {
		return ""
	}
	why := "the image is fully allocated (preallocated or copied in full): it gives no space back until it is sparse again, so discard=off costs nothing today"
	switch st := r.line.image; {
	case errors.Is(st.err, fs.ErrNotExist):
		why = "the image is not there on this node (" + r.path + "), so whether it is sparse is not known"
	case st.err != nil:
		why = "the image cannot be read here (" + st.err.Error() + "), so whether it is sparse is not known"
	case !st.regular:
		why = r.path + " is not a regular file"
	}
	return fmt.Sprintf("%s: discard is off on raw image %s on %s; discard-ignored-on-thin not judged: %s", r.d.ID, r.drv.Volume, r.storageName(), why)
}
