package check

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/storage"
)

// finish applies the edits to one copy of the line and gives every finding
// they fix the same command, so no two fixes undo each other.
func (r *diskRun) finish() {
	if len(r.edits) == 0 {
		return
	}
	argv, text := r.fix()
	for i := range r.findings {
		if r.fixed[i] {
			r.findings[i].Fix, r.findings[i].Command = text, argv
		}
	}
}

// editedLine is a copy of the disk's line with the edits to it applied.
func (r *diskRun) editedLine() *qemuserver.Drive {
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
	return f
}

// fix builds the disk's one command and its text.
func (r *diskRun) fix() ([]string, string) {
	in, vmid := r.in, strconv.Itoa(r.in.v.VMID)
	f := r.editedLine()
	// The VM's scsihw as the edits leave it: VirtIO SCSI single for a
	// disk's IO thread or off an emulated controller (off one emulated
	// controller onto another is no move: the VM's SCSI controller becomes
	// VirtIO SCSI too).
	stay := in.scsihw // without a move
	if r.edits[editSCSIHW] {
		stay = "virtio-scsi-single"
	}
	move, hw := r.edits[editMove], stay
	if move && !qemuserver.VirtIOSCSI(in.scsihw) {
		hw = "virtio-scsi-single"
	}
	moveHW := hw
	f, move, hw = r.mendPolicy(f, move, hw)
	slot := -1
	if move {
		if slot = r.run.freeSCSISlot(); slot < 0 {
			move = false // every SCSI slot is taken
			if hw == moveHW {
				hw = stay
			}
		}
	}
	argv := []string{"qm", "set", vmid}
	lineChanged := f.String() != r.drv.String() || r.edits[editSSD]
	note := ""
	if hw != in.scsihw {
		argv = append(argv, "--scsihw", hw)
		if qemuserver.VirtIOSCSI(hw) && !qemuserver.VirtIOSCSI(in.scsihw) {
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
		argv = append(argv, in.bootOrder(r.d.ID, key)...)
		return argv, "with the VM stopped: " + shellJoin(argv) + note + " (adjust the guest's fstab/boot device)"
	}
	if why, _ := r.unsettable(); lineChanged && why != "" {
		return nil, r.fileFix(argv, note, f, why)
	}
	if lineChanged {
		argv = append(argv, "--"+r.d.ID, f.String())
	}
	if len(argv) == 3 {
		return nil, "" // nothing to set after all
	}
	text := shellJoin(argv) + note
	limitsOnly := hw == in.scsihw && onlyLimitsDiffer(r.drv, f)
	if in.v.Running && !limitsOnly {
		text += ", then qm reboot " + vmid + " " + restartHint
	}
	return argv, text
}

// fileFix is the fix where qm set refuses the line (an ISO image without
// media=cdrom, a path no storage holds, why): an edit of the file to f,
// and the VM option in argv a qm set.
func (r *diskRun) fileFix(argv []string, note string, f *qemuserver.Drive, why string) string {
	vmid := strconv.Itoa(r.in.v.VMID)
	text := ""
	if len(argv) > 3 {
		text = shellJoin(argv) + note + ", and "
	}
	text += "edit " + configFile(vmid) + ": the line '" + r.d.ID + ": " + r.drv.String() + "' becomes '" + r.d.ID + ": " + f.String() + "' (" + why + ")"
	if r.in.v.Running {
		text += ", then qm reboot " + vmid + " " + restartHint
	}
	return text
}

// bootsFrom: the boot order (order=, or the legacy bootdisk) names the disk.
func (in *Input) bootsFrom(id string) bool {
	opts, _ := qemuserver.SplitQemuOpts(in.next["boot"], "legacy")
	if order := opts["order"]; order != "" {
		return slices.Contains(strings.Split(order, ";"), id)
	}
	return in.next["bootdisk"] == id
}

// bootOrder keeps a moved disk bootable: the order with the disk's new key
// where boot: order= names it (qm set drops a deleted disk from the order,
// API2/Qemu.pm update_vm), or --bootdisk with the new key where the legacy
// boot (no order=) boots it as bootdisk (bootorder_from_legacy); nothing
// when neither names it.
func (in *Input) bootOrder(from, to string) []string {
	opts, _ := qemuserver.SplitQemuOpts(in.next["boot"], "legacy")
	order := opts["order"]
	if order == "" {
		if in.next["bootdisk"] == from {
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
		case in.next[p] != "" || in.v.Config.Main[p] != "":
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
