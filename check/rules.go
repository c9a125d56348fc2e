package check

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/storage"
	"github.com/pvediskcheck/pvediskcheck/storage/storagetype"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// QEMUNativeMsg is QEMU's refusal of aio=native without O_DIRECT, quoted by
// aio-native-needs-direct: the VM does not start (QEMU-FACTS; the real-QEMU
// test TestCheckPredictsRefusedStart proves the text).
const QEMUNativeMsg = "aio=native was specified, but it requires cache.direct=on, which was not specified."

// restartHint is how a drive change that waits in [PENDING] is applied.
const restartHint = "(a full stop and start; a reboot inside the guest is not enough)"

// judge runs every rule over the VM's resolved disks.
func judge(ctx context.Context, set *disk.Set, here string, pools *thinpool.Cache, out *VMResult, os *guestOS, pol *policyRun) {
	v := set.VM
	j := newJudge(set)
	j.os, j.here, j.pol = os, here, pol
	j.macOS = macOSEvidence(j.next["args"])
	if os != nil && os.windows() && virtioCapable(j.ostype) {
		out.Notes = append(out.Notes, fmt.Sprintf("the config's ostype %s says Linux, but the guest agent reports %s: no move off an emulated controller is advised (Windows boots from VirtIO SCSI only with its vioscsi driver installed first)", j.ostype, os.name()))
	}
	if j.macOS != "" && emulatedDisks(v) {
		n := "the guest is macOS (" + j.macOS + ")"
		if virtioCapable(j.ostype) {
			n += ", although the config's ostype " + j.ostype + " says Linux"
		}
		out.Notes = append(out.Notes, n+": no move off an emulated controller is advised (macOS has no VirtIO SCSI driver, and a macOS guest boots from the disks its OpenCore/bootloader set-up expects)")
	}
	if f := unknownSCSIHW(j); f != nil {
		out.add(*f)
	}
	for _, d := range set.Disks {
		if k := d.Kind(); d.ParseError == nil && (k == qemuserver.KindTPMState || k == qemuserver.KindEmptyCDROM) {
			out.Notes = append(out.Notes, d.NotListed())
		}
		if d.ResolveError != nil {
			var ue *qemuserver.UnmodelledError
			if errors.As(d.ResolveError, &ue) {
				// A plugin storage `pvesm path` could not place here: said,
				// not judged.
				out.Notes = append(out.Notes, d.ResolveError.Error())
			} else {
				// Proxmox parses the line but cannot start the VM with it.
				out.add(Finding{Severity: Error, Code: CodeConfigInvalid, Disk: d.ID,
					Message: d.ResolveError.Error() + ": the VM does not start until it is fixed"})
			}
		}
		if k := d.Kind(); k != qemuserver.KindEmptyCDROM && k != qemuserver.KindTPMState {
			cd := Disk{ID: d.ID, Configured: values(d.Configured), Running: values(d.RunningNow())}
			if d.Pending != nil {
				cd.NextStart = values(d.Pending)
			}
			out.Disks = append(out.Disks, cd)
		}
		if f := j.storageUnavailable(d); f != nil {
			out.add(*f)
		}
		for _, f := range j.disk(d) {
			out.add(f)
		}
	}
	out.Notes = append(out.Notes, j.notes...)
	pol.leftover(v, out)
	for _, f := range pendingRestart(v) {
		out.add(f)
	}
	for _, f := range drift(set) {
		out.add(f)
	}
	ioErrors(ctx, set, pools, out)
	thinPools(ctx, set, pools, out)
	locked(v, out)
	fleecingLeftovers(v, out)
}

// unknownSCSIHW: parse_vm_config keeps a scsihw outside its enum (it
// checks no enumeration), and qemu-server passes it to QEMU as the SCSI
// controller's device model (`-device virtio,id=scsihw0`, the oracle's
// command line), which QEMU refuses ("'virtio' is not a valid device model
// name", QEMU 7.2 measured): with a SCSI disk the VM does not start.
func unknownSCSIHW(j *judger) *Finding {
	hw, ok := j.next["scsihw"]
	if !ok || slices.Contains(qemuserver.SCSIControllers, hw) {
		return nil
	}
	for _, k := range qemuserver.DiskKeys(j.next) {
		if bus, _, _ := qemuserver.SplitDiskKey(k); bus == "scsi" {
			return &Finding{Severity: Error, Code: CodeConfigInvalid, Disk: k,
				Message: fmt.Sprintf("scsihw %s is no SCSI controller Proxmox knows (%s): Proxmox keeps the line and passes -device %s to QEMU for the SCSI disks' controller, which QEMU refuses (%q): the VM does not start", clip(hw), strings.Join(qemuserver.SCSIControllers, ", "), clip(hw), "'"+hw+"' is not a valid device model name"),
				Fix:     fmt.Sprintf("qm set %d --scsihw lsi (Proxmox's default; or virtio-scsi-single for a guest with VirtIO drivers)", j.v.VMID)}
		}
	}
	return nil
}

// clip shortens what the config says for a message.
func clip(s string) string {
	if len(s) > 40 {
		return strconv.Quote(s[:40]) + "..."
	}
	return strconv.Quote(s)
}

// judger holds what the disk rules need from the VM.
type judger struct {
	v        *vm.VM
	set      *disk.Set
	next     map[string]string // the config as the next start applies it
	defaults qemuserver.VMDefaults
	ostype   string
	scsihw   string
	// taken are the SCSI slots in use or promised to an earlier disk's
	// move, so that two moves never pick the same slot.
	taken map[int]bool
	// os is what the guest agent says the guest runs (nil: not asked, or
	// no answer).
	os *guestOS
	// here is this node's name (node.Paths.NodeName), "" when unknown.
	here string
	// notes the disk rules add (what they could not decide).
	notes []string
	// pol is the VM's policy judgement (nil without --policy).
	pol *policyRun
	// macOS is the evidence that the guest is macOS ("" when none): the
	// config's args giving QEMU an Apple SMC.
	macOS string
}

func newJudge(set *disk.Set) *judger {
	v := set.VM
	next := v.Config.Next()
	j := &judger{v: v, set: set, next: next, defaults: qemuserver.VMDefaultsFor(next), ostype: next["ostype"], scsihw: qemuserver.SCSIHW(next), taken: map[int]bool{}}
	for _, conf := range []map[string]string{v.Config.Main, next} {
		for k := range conf {
			if bus, i, ok := qemuserver.SplitDiskKey(k); ok && bus == "scsi" {
				j.taken[i] = true
			}
		}
	}
	return j
}

// osWord says what the advice rests on: the guest agent's answer where
// the VM runs and it answers, else the config's ostype, the admin's word,
// not proof (a real VM named win10 says l26).
func (j *judger) osWord() string {
	if j.os != nil {
		return "the guest agent reports " + j.os.name() + ", which has VirtIO drivers"
	}
	return "the config's ostype " + j.ostype + " says the guest has VirtIO drivers"
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
func (j *judger) virtioGuest() bool {
	if j.macOS != "" {
		return false
	}
	if j.os != nil {
		return !j.os.windows()
	}
	return virtioCapable(j.ostype)
}

// protected: the config sets protection (update_vm then refuses to remove
// a drive, so no move).
func (j *judger) protected() bool {
	b, ok := qemuserver.ParseBool(j.next["protection"])
	return ok && b
}

// defaultSCSIHW says when the controller is Proxmox's default, not a line.
func (j *judger) defaultSCSIHW() string {
	if j.next["scsihw"] == "" {
		return " (Proxmox's default when scsihw is not set)"
	}
	return ""
}

// driverNote is what a guest needs before its disks move from an emulated
// controller to VirtIO SCSI: without the driver (Windows ships none) it no
// longer finds its boot disk.
const driverNote = " (the guest needs its VirtIO SCSI driver first: virtio_scsi on Linux, vioscsi on Windows)"

// freeSCSISlot is the first SCSI index no disk uses (scsi0..30), or -1.
func (j *judger) freeSCSISlot() int {
	for i := 0; i <= 30; i++ {
		if !j.taken[i] {
			j.taken[i] = true
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
	j        *judger
	d        *disk.Disk
	drv      *qemuserver.Drive // the drive the next start uses
	stor     *qemuserver.Storage
	settings qemuserver.DiskSettings
	path     string // the volume of settings as this process opens it
	findings []Finding
	fixed    []bool // findings[i] is fixed by the combined command
	edits    map[edit]bool
	// dropped: Proxmox drops the line, the VM starts without the disk;
	// drv is the line repaired.
	dropped bool
}

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

// disk runs the disk rules. Every rule applies only where its property
// exists for the drive's kind and does something there: an EFI vars or TPM
// state volume has no cache, aio, discard or limits; an empty CD-ROM drive
// opens nothing; a read-only drive (ro=1, a CD-ROM, a template) takes no
// guest writes, so no cache mode can lose any and no discard frees any.
func (j *judger) disk(d *disk.Disk) []Finding {
	r := &diskRun{j: j, d: d, edits: map[edit]bool{}}
	if !r.prepare() {
		return r.findings
	}
	if r.iso() && r.drv.Opts["media"] == "" {
		return r.isoWithoutMedia()
	}
	kind := r.drv.Kind()
	hasDriveOpts := kind == qemuserver.KindDisk || kind == qemuserver.KindCDROM || kind == qemuserver.KindEmptyCDROM
	if p := r.drv.LimitProblems(); hasDriveOpts && len(p) > 0 {
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
	// qemu-server passes queues= to the disk's own controller only under
	// scsihw virtio-scsi-single (QemuServer.pm config_to_command), where
	// QEMU refuses what is over its maximum and the VM does not start.
	if q, ok := r.drv.Opts["queues"]; ok && r.drv.Bus == "scsi" && j.scsihw == "virtio-scsi-single" {
		if why := qemuserver.QueuesRefusal(q); why != "" {
			r.add(Error, CodeQueuesInvalid, fmt.Sprintf("queues=%s: qm set accepts it (Proxmox checks only the minimum of 2), but QEMU refuses to start the VM: %q (at most %d queues; without queues= QEMU picks its default, one per vCPU from machine type 5.2)", q, why, qemuserver.MaxSCSIQueues), editQueues)
		}
	}
	if kind != qemuserver.KindDisk && kind != qemuserver.KindCDROM {
		return r.finish()
	}
	r.aio()
	if r.drv.Bus == "scsi" && r.drv.Bool("iothread") && j.scsihw != "virtio-scsi-single" {
		r.add(Warning, CodeIOThreadIgnored,
			fmt.Sprintf("iothread=1 is ignored with scsihw %s: only VirtIO SCSI single gives each disk its own controller and IO thread", j.scsihw),
			editSCSIHW)
	}
	if kind != qemuserver.KindDisk || r.settings.ReadOnly {
		return r.finish()
	}
	switch r.drv.Opts["cache"] {
	case "unsafe":
		r.add(Error, CodeCacheUnsafe, "cache=unsafe ignores the guest's flushes: data the guest believes safe stays in "+r.where()+" and a host crash loses it", editCache)
	case "writeback":
		r.add(Warning, CodeCacheWriteback, "cache=writeback keeps what the guest has not flushed in "+r.where()+": the guest's flushes are honoured, so a host crash loses only what the guest had not flushed, as with a disk's own write cache, but that can be as much as the node lets stay dirty", editCache)
	}
	if (r.drv.Bus == "sata" || r.drv.Bus == "ide") && j.virtioGuest() {
		msg := fmt.Sprintf("%s is an emulated controller; the lab measured SATA at 25-30%% of VirtIO random reads at 3-4 times the latency, and %s", strings.ToUpper(r.drv.Bus), j.osWord())
		if why, where := r.unsettable(); why != "" {
			// qm set refuses the moved line too: no command moves it.
			r.findings = append(r.findings, Finding{Severity: Warning, Code: CodeEmulatedController, Disk: r.d.ID,
				Message: msg + "; " + why + " (" + where + "), so only an edit of the config file moves it"})
			r.fixed = append(r.fixed, false)
		} else if j.protected() {
			// update_vm refuses the --delete of a move: "can't remove
			// drive 'sata0' - protection mode enabled" (asked of the
			// oracle: TestCheckFixesAcceptedByProxmox).
			r.findings = append(r.findings, Finding{Severity: Warning, Code: CodeEmulatedController, Disk: r.d.ID,
				Message: msg + fmt.Sprintf("; the VM has protection: 1, and qm set refuses the move (%q): no move is printed; clear it first (qm set %d --protection 0) to move the disk, and set it again after", "can't remove drive '"+r.d.ID+"' - protection mode enabled", j.v.VMID)})
			r.fixed = append(r.fixed, false)
		} else {
			r.add(Warning, CodeEmulatedController, msg, editMove)
		}
	}
	// The emulated SCSI controllers cost what SATA and IDE cost: QEMU
	// emulates every request in its main loop and no disk gets an IO
	// thread. Proxmox's default without a scsihw line is lsi (QemuServer.pm
	// $confdesc scsihw), one of them.
	if r.drv.Bus == "scsi" && !qemuserver.VirtIOSCSI(j.scsihw) && slices.Contains(qemuserver.SCSIControllers, j.scsihw) && j.virtioGuest() {
		r.add(Warning, CodeEmulatedController,
			fmt.Sprintf("scsihw %s%s is an emulated SCSI controller: QEMU emulates every request in its main loop, without an IO thread, as it does for SATA (which the lab measured at 25-30%% of VirtIO random reads at 3-4 times the latency), and %s", j.scsihw, j.defaultSCSIHW(), j.osWord()),
			editSCSIHW)
	}
	if r.drv.Opts["discard"] != "on" {
		if storage.ReturnsSpace(r.stor, r.settings.Format, r.path) {
			r.add(Warning, CodeDiscardIgnoredOnThin,
				"discard is off on "+r.storageName()+": space the guest frees (fstrim) never returns to the "+r.evidenceDiscard(),
				editDiscard)
		} else if n := r.rawImageNote(); n != "" {
			j.notes = append(j.notes, n)
		}
	}
	return r.finish()
}

// prepare picks the drive the next start uses and its predicted settings;
// false when no rule applies (a line that does not parse is config-invalid,
// a disk going away or only running has nothing to judge).
func (r *diskRun) prepare() bool {
	d, v := r.d, r.j.v
	if d.ParseError != nil {
		line := v.Config.Main[d.ID]
		bus, _, _ := qemuserver.SplitDiskKey(d.ID)
		if bus == "virtio" && strings.Contains(","+line, ",ssd=") {
			base := removeOpt(line, "ssd")
			if drv, err := qemuserver.ParseDrive(d.ID, base); err == nil {
				if s, err := qemuserver.Predict(drv, v.Storages, r.j.defaults, v.IsBlockDevice); err == nil {
					// parse_vm_config drops the line ("unable to parse
					// value of 'virtio0' - format error / ssd: property is
					// not defined in schema"; TestSSDOnVirtIOAsProxmox
					// asks Proxmox): the VM starts without the disk, so
					// an error. The other rules judge the line as the fix
					// restores it (one command fixes all, none appears
					// after it), each saying the disk is not there yet.
					r.repaired(drv, s)
					msg := "ssd emulation is not available on VirtIO Block (Proxmox offers it for SCSI, SATA and IDE only): Proxmox drops this hand-edited line (\"unable to parse value of '" + d.ID + "' - format error: ssd: property is not defined in schema\") and starts the VM without the disk"
					if r.j.bootsFrom(d.ID) {
						msg += ", its boot disk: the guest does not boot"
					}
					r.findings = append(r.findings, Finding{Severity: Error, Code: CodeSSDUnsupported, Disk: d.ID, Message: msg})
					r.fixed = append(r.fixed, true)
					r.edits[editSSD] = true
					r.dropped = true
					return true
				}
			}
		}
		// Refused only for its limit combination: limit-invalid (below)
		// fixes it, and the other rules still apply to the line.
		drv, err := qemuserver.ParseDriveSchema(d.ID, line)
		if err != nil || len(drv.LimitProblems()) == 0 || d.PendingDrive != nil {
			r.findings = append(r.findings, Finding{Severity: Error, Code: CodeConfigInvalid, Disk: d.ID, Message: d.ParseError.Error() + ": Proxmox ignores this disk"})
			r.fixed = append(r.fixed, false)
			return false
		}
		s, err := qemuserver.Predict(drv, v.Storages, r.j.defaults, v.IsBlockDevice)
		if err != nil {
			r.findings = append(r.findings, Finding{Severity: Error, Code: CodeConfigInvalid, Disk: d.ID, Message: d.ParseError.Error() + ": Proxmox ignores this disk"})
			r.fixed = append(r.fixed, false)
			return false
		}
		r.repaired(drv, s)
		return true
	}
	switch {
	case d.PendingDelete:
		return false
	case d.PendingDrive != nil && d.Pending != nil:
		r.drv, r.settings, r.stor = d.PendingDrive, *d.Pending, d.PendingStorage
	case d.Drive != nil && d.Configured != nil:
		r.drv, r.settings, r.stor = d.Drive, *d.Configured, d.Storage
	default:
		return false
	}
	r.path = d.NextPath
	return true
}

// repaired judges a line Proxmox refuses as drv, the line repaired, with
// the settings predicted for it, resolved as the VM's disks are.
func (r *diskRun) repaired(drv *qemuserver.Drive, s qemuserver.DiskSettings) {
	rd := r.j.set.Resolved(&vm.Disk{ID: r.d.ID, Drive: drv, Configured: &s})
	r.drv, r.settings, r.stor, r.path = drv, s, rd.Storage, rd.NextPath
}

// storageUnavailable: vm_start activates every volume of the config
// (pve-storage activate_volumes -> storage_check_enabled), so a volume on
// a storage disabled or not available on this node stops the start with
// pve-storage's message. Any drive kind with a volume (disk, EFI, TPM, an
// ISO): each is activated. No qm set fixes it; the fix is the storage's or
// a move of the volume.
func (j *judger) storageUnavailable(d *disk.Disk) *Finding {
	drv, st := d.NextStart()
	if d.ParseError != nil || d.PendingDelete || drv == nil {
		return nil
	}
	if st == nil {
		return nil
	}
	why := st.Unavailable(j.here)
	if why == "" {
		if j.here == "" && st.Props["nodes"] != "" {
			j.notes = append(j.notes, fmt.Sprintf("%s: storage %s is available on nodes %s only; this node's name is unknown (no /etc/pve/local or /etc/hostname below the root), so whether the next start finds it is not checked", d.ID, st.ID, st.Props["nodes"]))
		}
		return nil
	}
	// No qm disk move: it activates the source volume on this node first
	// (API2/Qemu.pm move_disk's $move_updatefn: activate_volumes of the
	// drive's volume), which fails as the start does.
	fix := "pvesm set " + st.ID + " --disable 0"
	if !st.Bool("disable") {
		fix = "pvesm set " + st.ID + " --nodes " + st.Props["nodes"] + "," + j.here + " (when this node reaches the storage), or run the VM on a node of " + st.Props["nodes"] + " (qm disk move cannot help: it activates the volume on this node first and fails as the start does)"
	} else {
		fix += " (qm disk move cannot help: it activates the volume first and fails as the start does)"
	}
	return &Finding{Severity: Error, Code: CodeStorageUnavailable, Disk: d.ID,
		Message: fmt.Sprintf("storage %s is %s: the next start fails with %q (vm_start activates every volume)", st.ID, why, st.ProxmoxRefusal(j.here)),
		Fix:     fix}
}

// iso: the drive's volume is ISO content (pve-storage vtype iso) and not
// a CD-ROM: qm set refuses any line for it (API2/Qemu.pm
// check_drive_param: "explicit 'media=cdrom' is required for iso images"),
// so its fixes are edits of the config file, never a qm set.
func (r *diskRun) iso() bool {
	return r.j.v.Storages.IsISO(r.drv.Volume) && r.drv.Opts["media"] != "cdrom"
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
func (r *diskRun) isoWithoutMedia() []Finding {
	vmid := strconv.Itoa(r.j.v.VMID)
	disk := r.drv.Clone()
	disk.Opts["media"] = "disk"
	fix := "edit " + configFile(vmid) + ": the line '" + r.d.ID + ": " + r.drv.String() + "' becomes '" + r.d.ID + ": " + disk.String() + "' (the image as the raw disk it is, as a macOS OpenCore or recovery image is: qm set refuses media=disk for an ISO image)"
	if _, ok := r.drv.Opts["format"]; !ok {
		cd := r.drv.Clone()
		cd.Opts["media"] = "cdrom"
		fix += "; for an installer the guest only reads, " + shellJoin([]string{"qm", "set", vmid, "--" + r.d.ID, cd.String()}) + " instead"
	}
	when := "the VM will not start"
	if r.j.v.Running {
		when = "the running VM was started before this line was set, and its next start fails"
		fix += ", then qm reboot " + vmid + " " + restartHint
	}
	return append(r.findings, Finding{Severity: Error, Code: CodeConfigInvalid, Disk: r.d.ID,
		Message: fmt.Sprintf("%s: %s is an ISO image without media=: %s; qemu-server says %q", r.d.ID, r.drv.Volume, when, r.j.v.Storages.ISOMediaRefusal(r.d.ID, r.drv)),
		Fix:     fix})
}

// configFile is the VM's config as the admin edits it on the node.
func configFile(vmid string) string { return "/etc/pve/qemu-server/" + vmid + ".conf" }

// aio judges an explicit aio mode where QEMU applies it (the protocol
// drivers that open a file or device: with -blockdev qemu-server emits aio
// for those only, and only file-posix refuses native without O_DIRECT).
func (r *diskRun) aio() {
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
	if r.stor == nil || r.stor.Facts().Discard != storagetype.DiscardPerImage || r.settings.Format == "qcow2" || r.j.v.Storages.IsISO(r.drv.Volume) {
		return ""
	}
	why := "the image is fully allocated (preallocated or copied in full): it gives no space back until it is sparse again, so discard=off costs nothing today"
	if st, err := os.Stat(r.path); errors.Is(err, fs.ErrNotExist) {
		why = "the image is not there on this node (" + r.path + "), so whether it is sparse is not known"
	} else if err != nil {
		why = "the image cannot be read here (" + err.Error() + "), so whether it is sparse is not known"
	} else if !st.Mode().IsRegular() {
		why = r.path + " is not a regular file"
	}
	return fmt.Sprintf("%s: discard is off on raw image %s on %s; discard-ignored-on-thin not judged: %s", r.d.ID, r.drv.Volume, r.storageName(), why)
}

// finish applies the edits to one copy of the line and gives every finding
// they fix the same command, so no two fixes undo each other.
func (r *diskRun) finish() []Finding {
	r.policyFindings()
	if len(r.edits) == 0 {
		return r.findings
	}
	argv, text := r.fix()
	for i := range r.findings {
		if r.fixed[i] {
			r.findings[i].Fix, r.findings[i].Command = text, argv
		}
	}
	return r.findings
}

// fix builds the disk's one command and its text.
func (r *diskRun) fix() ([]string, string) {
	j, vmid := r.j, strconv.Itoa(r.j.v.VMID)
	f := r.drv.Clone()
	if r.edits[editLimits] {
		fixLimits(f)
	}
	if r.edits[editCache] {
		delete(f.Opts, "cache")
	}
	if r.edits[editDiscard] {
		f.Opts["discard"] = "on"
	}
	if r.edits[editQueues] {
		delete(f.Opts, "queues")
	}
	if r.edits[editAIO] {
		direct := qemuserver.UsesCacheDirect(f, r.stor)
		if a := f.Opts["aio"]; a == "native" && !direct || a == "io_uring" && storage.IOUringHazard(r.stor, direct) != "" {
			delete(f.Opts, "aio")
		}
	}
	// The VM's scsihw as the edits leave it: VirtIO SCSI single for a
	// disk's IO thread or off an emulated controller (off one emulated
	// controller onto another is no move: the VM's SCSI controller becomes
	// VirtIO SCSI too).
	stay := j.scsihw // without a move
	if r.edits[editSCSIHW] {
		stay = "virtio-scsi-single"
	}
	move, hw := r.edits[editMove], stay
	if move && !qemuserver.VirtIOSCSI(j.scsihw) {
		hw = "virtio-scsi-single"
	}
	moveHW := hw
	f, move, hw = r.mendPolicy(f, move, hw)
	slot := -1
	if move {
		if slot = j.freeSCSISlot(); slot < 0 {
			move = false // every SCSI slot is taken
			if hw == moveHW {
				hw = stay
			}
		}
	}
	argv := []string{"qm", "set", vmid}
	lineChanged := f.String() != r.drv.String() || r.edits[editSSD]
	note := ""
	if hw != j.scsihw {
		argv = append(argv, "--scsihw", hw)
		if qemuserver.VirtIOSCSI(hw) && !qemuserver.VirtIOSCSI(j.scsihw) {
			note = driverNote
		}
	}
	if move {
		key := "scsi" + strconv.Itoa(slot)
		delete(f.Opts, "model") // IDE/SATA only
		// One command is a clean move on a stopped VM: qemu-server
		// applies the delete first (vmconfig_apply_pending registers
		// the volume as unusedN) and write_vm_config then drops an
		// unusedN whose volume a disk uses again.
		argv = append(argv, "--delete", r.d.ID, "--"+key, f.String())
		argv = append(argv, j.bootOrder(r.d.ID, key)...)
		return argv, "with the VM stopped: " + shellJoin(argv) + note + " (adjust the guest's fstab/boot device)"
	}
	if why, _ := r.unsettable(); lineChanged && why != "" {
		// qm set refuses the line (an ISO image without media=cdrom, a
		// path no storage holds): the fix is an edit of the file, and the
		// VM option a qm set.
		text := ""
		if len(argv) > 3 {
			text = shellJoin(argv) + note + ", and "
		}
		text += "edit " + configFile(vmid) + ": the line '" + r.d.ID + ": " + r.drv.String() + "' becomes '" + r.d.ID + ": " + f.String() + "' (" + why + ")"
		if j.v.Running {
			text += ", then qm reboot " + vmid + " " + restartHint
		}
		return nil, text
	}
	if lineChanged {
		argv = append(argv, "--"+r.d.ID, f.String())
	}
	if len(argv) == 3 {
		return nil, "" // nothing to set after all
	}
	text := shellJoin(argv) + note
	limitsOnly := hw == j.scsihw && onlyLimitsDiffer(r.drv, f)
	if j.v.Running && !limitsOnly {
		text += ", then qm reboot " + vmid + " " + restartHint
	}
	return argv, text
}

// bootsFrom: the boot order (order=, or the legacy bootdisk) names the disk.
func (j *judger) bootsFrom(id string) bool {
	opts, _ := qemuserver.SplitQemuOpts(j.next["boot"], "legacy")
	if order := opts["order"]; order != "" {
		return slices.Contains(strings.Split(order, ";"), id)
	}
	return j.next["bootdisk"] == id
}

// bootOrder keeps a moved disk bootable: the order with the disk's new key
// where boot: order= names it (qm set drops a deleted disk from the order,
// API2/Qemu.pm update_vm), or --bootdisk with the new key where the legacy
// boot (no order=) boots it as bootdisk (bootorder_from_legacy); nothing
// when neither names it.
func (j *judger) bootOrder(from, to string) []string {
	opts, _ := qemuserver.SplitQemuOpts(j.next["boot"], "legacy")
	order := opts["order"]
	if order == "" {
		if j.next["bootdisk"] == from {
			return []string{"--bootdisk", to}
		}
		return nil
	}
	// update_vm refuses an order naming a device the config lacks
	// ("invalid bootorder: device 'net0' does not exist'", API2/Qemu.pm):
	// a stale entry, which the start skips, is left out.
	var parts []string
	found := false
	for _, p := range strings.Split(order, ";") {
		switch {
		case p == from:
			parts, found = append(parts, to), true
		case j.next[p] != "" || j.v.Config.Main[p] != "":
			parts = append(parts, p)
		}
	}
	if !found {
		return nil
	}
	return []string{"--boot", "order=" + strings.Join(parts, ";")}
}

// onlyLimitsDiffer: a running VM applies a changed line live only when
// nothing but I/O limits differ (qemu-server vmconfig_update_disk).
func onlyLimitsDiffer(a, b *qemuserver.Drive) bool {
	if a.Volume != b.Volume {
		return false
	}
	limit := map[string]bool{}
	for _, k := range qemuserver.LimitKeys {
		limit[k.Proxmox] = true
	}
	for _, m := range [][2]map[string]string{{a.Opts, b.Opts}, {b.Opts, a.Opts}} {
		for k, v := range m[0] {
			if !limit[k] && m[1][k] != v {
				return false
			}
		}
	}
	return true
}

// removeOpt drops key=... from a raw drive line.
func removeOpt(line, key string) string {
	var keep []string
	for _, p := range strings.Split(line, ",") {
		if k, _, _ := strings.Cut(p, "="); strings.TrimSpace(k) != key {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, ",")
}

// fixLimits drops the limit keys Proxmox rejects: "X requires Y" drops X;
// "mbps cannot be combined with mbps_rd" drops the total and keeps the
// per-direction limit.
//
// Each round deletes a key that is set (every problem starts with one), so
// it ends.
func fixLimits(f *qemuserver.Drive) {
	for p := f.LimitProblems(); len(p) > 0; p = f.LimitProblems() {
		for _, x := range p {
			k, _, _ := strings.Cut(x, " ")
			delete(f.Opts, k)
		}
	}
}

// virtioCapable: guest OS types that ship VirtIO drivers out of the box.
func virtioCapable(ostype string) bool { return ostype == "l26" || ostype == "l24" }

// shellJoin prints argv as a shell command line, quoting what the shell
// would split or expand.
func shellJoin(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = shellQuote(a)
	}
	return strings.Join(out, " ")
}

func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_=:,./@%+", c)) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}

// pendingRestart lists what [PENDING] changes for a running VM.
func pendingRestart(v *vm.VM) []Finding {
	if !v.Running {
		return nil
	}
	var out []Finding
	vmid := strconv.Itoa(v.VMID)
	keys := qemuserver.SortedKeys(v.Config.Pending)
	for _, k := range keys {
		out = append(out, Finding{Severity: Info, Code: CodePendingRestart, Disk: diskKey(k),
			Message: k + " is changed in [PENDING]: it applies at the next restart", Fix: "qm reboot " + vmid})
	}
	del := append([]string(nil), v.Config.PendingDelete...)
	sort.Strings(del)
	for _, k := range del {
		out = append(out, Finding{Severity: Info, Code: CodePendingRestart, Disk: diskKey(k),
			Message: k + " is deleted in [PENDING]: it goes at the next restart", Fix: "qm reboot " + vmid})
	}
	return out
}

func diskKey(k string) string {
	if qemuserver.IsDiskKey(k) {
		return k
	}
	return ""
}

// drift lists the running disks whose settings differ from the config.
func drift(set *disk.Set) []Finding {
	v := set.VM
	if !v.Running {
		return nil
	}
	var out []Finding
	for _, d := range set.Disks {
		if d.Configured == nil || d.Graph == nil {
			continue
		}
		if diffs := qemuserver.Diff(*d.Configured, d.Graph.DiskSettings); len(diffs) > 0 {
			out = append(out, Finding{Severity: Warning, Code: CodeDrift, Disk: d.ID,
				Message: "the running VM differs from its config: " + strings.Join(diffs, "; "),
				Fix:     "qm reboot " + strconv.Itoa(v.VMID) + " (applies the config) " + restartHint})
		}
	}
	return out
}

// ValidateCommand checks a fix command (`qm set VMID --key value ...`) the
// way qm set checks its parameters, as far as check's fixes use them: a
// valid VMID, each disk key's value a drive line Proxmox's parser accepts for
// that key (and its limit rules), --delete naming disk keys, --scsihw a
// controller Proxmox knows, --boot an order of devices.
func ValidateCommand(argv []string) error {
	if len(argv) < 5 || argv[0] != "qm" || argv[1] != "set" || len(argv)%2 != 1 {
		return fmt.Errorf("not a 'qm set VMID --key value...' command: %q", argv)
	}
	if _, err := qemuserver.ParseVMID(argv[2]); err != nil {
		return err
	}
	seen := map[string]bool{}
	for i := 3; i < len(argv); i += 2 { // len(argv) is odd: argv[i+1] exists
		k, v := strings.TrimPrefix(argv[i], "--"), argv[i+1]
		if k == argv[i] || seen[k] {
			return fmt.Errorf("%q: not an option, or given twice", argv[i])
		}
		seen[k] = true
		switch {
		case qemuserver.IsDiskKey(k):
			d, err := qemuserver.ParseDrive(k, v)
			if err != nil {
				return err
			}
			if p := d.LimitProblems(); len(p) > 0 {
				return fmt.Errorf("%s: %s", k, strings.Join(p, "; "))
			}
		case k == "delete":
			for _, x := range strings.Split(v, ",") {
				if !qemuserver.IsDiskKey(x) {
					return fmt.Errorf("--delete %q: not a disk", x)
				}
			}
		case k == "scsihw":
			if !slices.Contains(qemuserver.SCSIControllers, v) {
				return fmt.Errorf("--scsihw %q: not a SCSI controller", v)
			}
		case k == "bootdisk":
			// pve-qm-bootdisk (QemuServer.pm verify_bootdisk): a disk
			// key, not efidisk0 or tpmstate0.
			if !qemuserver.IsBootDevice(v) || !qemuserver.IsDiskKey(v) {
				return fmt.Errorf("--bootdisk %q: not a boot disk", v)
			}
		case k == "boot":
			if err := qemuserver.CheckBoot(v); err != nil {
				return err
			}
			if !strings.HasPrefix(v, "order=") || strings.Contains(v, ",") {
				return fmt.Errorf("--boot %q: check's fixes set order= only", v)
			}
		default:
			return fmt.Errorf("--%s: not an option check's fixes use", k)
		}
	}
	return nil
}
