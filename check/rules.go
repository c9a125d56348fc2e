package check

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// QEMUNativeMsg is QEMU's refusal of aio=native without O_DIRECT, quoted by
// aio-native-needs-direct: the VM does not start (QEMU-FACTS; the real-QEMU
// test TestCheckPredictsRefusedStart proves the text).
const QEMUNativeMsg = "aio=native was specified, but it requires cache.direct=on, which was not specified."

// restartHint is how a drive change that waits in [PENDING] is applied.
const restartHint = "(a full stop and start; a reboot inside the guest is not enough)"

// Scope is what one call of a rule judges.
type Scope int

const (
	// PerVM: the rule is called once for the VM.
	PerVM Scope = iota
	// PerDisk: the rule is called for each disk whose kind it declares.
	PerDisk
)

// Rule is one entry of rules: what it is called, the codes of the findings
// it can produce, and what it judges.
type Rule struct {
	Name  string
	Codes []Code
	Scope Scope
	// Kinds are the drive kinds a disk rule judges: the kind of the line
	// the next start uses where there is one, else of the disk's slot
	// (vm.Disk.Kind). The loop calls the rule for those alone.
	Kinds []qemuserver.Kind
	// ReadOnly: a disk rule also judges a read-only drive (ro=1, a
	// CD-ROM, a template's disk), which takes no guest writes.
	ReadOnly bool
	// Line: a disk rule reads the line the next start uses (Input.lines:
	// drive, settings, storage, path): it is not called for a disk without
	// one (going away, only running, a line Proxmox ignores).
	Line bool
	// Ends: a finding of this disk rule ends the disk's judgement: no later
	// rule judges the disk, and no combined fix is built (a line the start
	// refuses as a whole).
	Ends bool
	// Disk judges one disk (Scope PerDisk), VM the VM (Scope PerVM).
	Disk func(in *Input, r *diskRun)
	VM   func(in *Input, out *VMResult)
}

// Drive kinds as the rules declare them. slotKinds are every kind a VM's
// disk slot has (unusedN is no disk of the set); an EFI vars or TPM state
// volume has no cache, aio, discard or limits; an empty CD-ROM drive opens
// nothing.
var (
	slotKinds  = []qemuserver.Kind{qemuserver.KindDisk, qemuserver.KindCDROM, qemuserver.KindEmptyCDROM, qemuserver.KindEFIVars, qemuserver.KindTPMState}
	driveKinds = []qemuserver.Kind{qemuserver.KindDisk, qemuserver.KindCDROM, qemuserver.KindEmptyCDROM} // the drive options (limits)
	openKinds  = []qemuserver.Kind{qemuserver.KindDisk, qemuserver.KindCDROM}                            // QEMU opens a medium
	diskKinds  = []qemuserver.Kind{qemuserver.KindDisk}
)

// rules are every rule of check, in the order their findings are listed.
// The disk rules are one block: each disk in turn goes through all of
// them, and then its edits are folded into one qm set (diskRun.finish).
// Adding a rule is one entry here (docs/developing.md); TestRuleList
// lists them.
var rules = []Rule{
	{Name: "dropped-line", Codes: []Code{CodeConfigInvalid}, Scope: PerVM, VM: droppedLines},
	{Name: "guest-os", Scope: PerVM, VM: guestNotes},
	{Name: "unknown-scsihw", Codes: []Code{CodeConfigInvalid}, Scope: PerVM, VM: unknownSCSIHW},

	{Name: "resolve-error", Codes: []Code{CodeConfigInvalid}, Scope: PerDisk, Kinds: slotKinds, ReadOnly: true, Disk: resolveError},
	{Name: "storage-unavailable", Codes: []Code{CodeStorageUnavailable}, Scope: PerDisk, Kinds: slotKinds, ReadOnly: true, Disk: storageUnavailable},
	{Name: "line-ignored", Codes: []Code{CodeConfigInvalid}, Scope: PerDisk, Kinds: slotKinds, ReadOnly: true, Disk: lineIgnored},
	{Name: "ssd-unsupported", Codes: []Code{CodeSSDUnsupported}, Scope: PerDisk, Kinds: slotKinds, ReadOnly: true, Line: true, Disk: ssdUnsupported},
	{Name: "iso-without-media", Codes: []Code{CodeConfigInvalid}, Scope: PerDisk, Kinds: slotKinds, ReadOnly: true, Line: true, Ends: true, Disk: isoWithoutMedia},
	{Name: "limit-invalid", Codes: []Code{CodeLimitInvalid}, Scope: PerDisk, Kinds: driveKinds, ReadOnly: true, Line: true, Disk: limitInvalid},
	{Name: "queues-invalid", Codes: []Code{CodeQueuesInvalid}, Scope: PerDisk, Kinds: slotKinds, ReadOnly: true, Line: true, Disk: queuesInvalid},
	{Name: "aio", Codes: []Code{CodeAIONativeNeedsDirect, CodeAIOIOUringRisk}, Scope: PerDisk, Kinds: openKinds, ReadOnly: true, Line: true, Disk: aio},
	{Name: "iothread-ignored", Codes: []Code{CodeIOThreadIgnored}, Scope: PerDisk, Kinds: openKinds, ReadOnly: true, Line: true, Disk: iothreadIgnored},
	{Name: "cache", Codes: []Code{CodeCacheUnsafe, CodeCacheWriteback}, Scope: PerDisk, Kinds: diskKinds, Line: true, Disk: cacheMode},
	{Name: "emulated-controller", Codes: []Code{CodeEmulatedController}, Scope: PerDisk, Kinds: diskKinds, Line: true, Disk: emulatedController},
	{Name: "discard-ignored-on-thin", Codes: []Code{CodeDiscardIgnoredOnThin}, Scope: PerDisk, Kinds: diskKinds, Line: true, Disk: discardIgnored},
	{Name: "policy", Codes: []Code{CodePolicy}, Scope: PerDisk, Kinds: slotKinds, ReadOnly: true, Line: true, Disk: policyFindings},

	{Name: "policy-leftover", Codes: []Code{CodePolicy}, Scope: PerVM, VM: policyLeftover},
	{Name: "pending-restart", Codes: []Code{CodePendingRestart}, Scope: PerVM, VM: pendingRestart},
	{Name: "drift", Codes: []Code{CodeDrift}, Scope: PerVM, VM: drift},
	{Name: "io-error", Codes: []Code{CodeIOError}, Scope: PerVM, VM: ioErrors},
	{Name: "thin-pool", Codes: []Code{CodeThinOvercommit, CodeThinFull}, Scope: PerVM, VM: thinPools},
	{Name: "locked", Codes: []Code{CodeLocked}, Scope: PerVM, VM: locked},
	{Name: "fleecing-leftover", Codes: []Code{CodeFleecingLeftover}, Scope: PerVM, VM: fleecingLeftovers},
	{Name: "guest-frozen", Codes: []Code{CodeGuestFrozen}, Scope: PerVM, VM: guestFrozenRule},
	{Name: "qemu-advisory", Codes: []Code{CodeQEMUAdvisory}, Scope: PerVM, VM: qemuAdvisoryRule},
	{Name: "qemu-outdated", Codes: []Code{CodeQEMUOutdated}, Scope: PerVM, VM: qemuOutdatedRule},
	{Name: "zfs-blocksize-invalid", Codes: []Code{CodeZFSBlocksizeInvalid}, Scope: PerVM, VM: zfsBlocksize},
	{Name: "zfs-sync", Codes: []Code{CodeZFSSyncDisabled, CodeZFSSyncAlways}, Scope: PerVM, VM: zfsSync},
	{Name: "volume-chain", Codes: []Code{CodeVolumeChain}, Scope: PerVM, VM: volumeChains},
	{Name: "disk-stalled", Codes: []Code{CodeDiskStalled, CodeHistogramLeft}, Scope: PerVM, VM: stallRule},
	{Name: "fleecing-storage", Codes: []Code{CodeFleecingStorage}, Scope: PerVM, VM: fleecingStorage},
	{Name: "next-start", Codes: []Code{CodePendingRestart}, Scope: PerVM, VM: nextStart},
}

// outsideRules are the codes a finding has without a rule of the list,
// and where.
var outsideRules = map[Code]string{
	CodeConfigInvalid: "VMLoaded: a storage.cfg Proxmox cannot parse, before any VM is judged",
	CodeHistogramLeft: "HistogramsLeft: metrics' own leftover histograms, from its samples",
}

// judge runs the rules, in their order, over the VM measured in in.
func judge(in *Input, out *VMResult) {
	for i := 0; i < len(rules); i++ {
		if rules[i].Scope == PerVM {
			judged(&rules[i], out.Findings, func() { rules[i].VM(in, out) }, func() []Finding { return out.Findings })
			continue
		}
		j := i
		for j < len(rules) && rules[j].Scope == PerDisk {
			j++
		}
		judgeDisks(in, rules[i:j], out)
		i = j - 1
	}
}

// judgeDisks runs the disk rules over each disk in turn: the rules whose
// kinds the disk's are (Rule.Kinds, ReadOnly, Line), until one that Ends
// it finds something; then the disk's edits become its one command.
// Besides, each disk is listed (VMResult.Disks) or said to be left out.
func judgeDisks(in *Input, block []Rule, out *VMResult) {
	run := &vmRun{out: out, taken: map[int]bool{}}
	for _, conf := range []map[string]string{in.v.Config.Main, in.next} {
		for k := range conf {
			if bus, i, ok := qemuserver.SplitDiskKey(k); ok && bus == "scsi" {
				run.taken[i] = true
			}
		}
	}
	for _, d := range in.set.Disks {
		if k := d.Kind(); d.ParseError == nil && (k == qemuserver.KindTPMState || k == qemuserver.KindEmptyCDROM) {
			out.Notes = append(out.Notes, d.NotListed())
		}
		if k := d.Kind(); k != qemuserver.KindEmptyCDROM && k != qemuserver.KindTPMState {
			cd := Disk{ID: d.ID, Configured: values(d.Configured), Running: values(d.RunningNow())}
			if d.Pending != nil {
				cd.NextStart = values(d.Pending)
			}
			out.Disks = append(out.Disks, cd)
		}
		r := newDiskRun(in, run, d)
		ended := false
		for i := range block {
			ru := &block[i]
			if !r.judgedBy(ru) {
				continue
			}
			n := len(r.findings)
			judged(ru, r.findings, func() { ru.Disk(in, r) }, func() []Finding { return r.findings })
			if ended = ru.Ends && len(r.findings) > n; ended {
				break
			}
		}
		if !ended && r.drv != nil {
			r.finish()
		}
		for _, f := range r.findings {
			out.add(f)
		}
	}
	out.Notes = append(out.Notes, run.notes...)
}

// judgedBy: the rule judges the disk, by its declaration.
func (r *diskRun) judgedBy(ru *Rule) bool {
	kind, ro := r.d.Kind(), false
	switch {
	case r.drv != nil:
		kind, ro = r.drv.Kind(), r.settings.ReadOnly
	case ru.Line:
		return false
	}
	return slices.Contains(ru.Kinds, kind) && (ru.ReadOnly || !ro)
}

// ruleRan, when set (the package's tests), is told what each rule call
// added: the findings before and after it.
var ruleRan func(ru *Rule, before, after []Finding)

// judged calls a rule, telling ruleRan what it added to the findings.
func judged(ru *Rule, before []Finding, call func(), after func() []Finding) {
	if ruleRan == nil {
		call()
		return
	}
	b := slices.Clone(before)
	call()
	ruleRan(ru, b, after())
}

// droppedLines: a line Proxmox drops that names a disk takes the disk
// away: the VM starts without it (its system disk, maybe), an error, not a
// note.
func droppedLines(in *Input, out *VMResult) {
	for _, d := range in.v.Config.DroppedDisks {
		out.add(Finding{Severity: Error, Code: CodeConfigInvalid, Message: d,
			Fix: "edit " + in.vmConfig + ": write the line as `KEY: VALUE` with a disk slot Proxmox knows (ide0-3, sata0-5, scsi0-30, virtio0-15, efidisk0, tpmstate0)"})
	}
}

// guestNotes says where the guest agent or the config's args overrule the
// config's ostype for emulated-controller's advice: no move is advised.
func guestNotes(in *Input, out *VMResult) {
	if in.os != nil && in.os.windows() && virtioCapable(in.ostype) {
		out.Notes = append(out.Notes, fmt.Sprintf("the config's ostype %s says Linux, but the guest agent reports %s: no move off an emulated controller is advised (Windows boots from VirtIO SCSI only with its vioscsi driver installed first)", in.ostype, in.os.name()))
	}
	if in.macOS != "" && emulatedDisks(in.v) {
		n := "the guest is macOS (" + in.macOS + ")"
		if virtioCapable(in.ostype) {
			n += ", although the config's ostype " + in.ostype + " says Linux"
		}
		out.Notes = append(out.Notes, n+": no move off an emulated controller is advised (macOS has no VirtIO SCSI driver, and a macOS guest boots from the disks its OpenCore/bootloader set-up expects)")
	}
}

// unknownSCSIHW: parse_vm_config keeps a scsihw outside its enum (it
// checks no enumeration), and qemu-server passes it to QEMU as the SCSI
// controller's device model (`-device virtio,id=scsihw0`, the oracle's
// command line), which QEMU refuses ("'virtio' is not a valid device model
// name", QEMU 7.2 measured): with a SCSI disk the VM does not start.
func unknownSCSIHW(in *Input, out *VMResult) {
	hw, ok := in.next["scsihw"]
	if !ok || slices.Contains(qemuserver.SCSIControllers, hw) {
		return
	}
	for _, k := range qemuserver.DiskKeys(in.next) {
		if bus, _, _ := qemuserver.SplitDiskKey(k); bus == "scsi" {
			out.add(Finding{Severity: Error, Code: CodeConfigInvalid, Disk: k,
				Message: fmt.Sprintf("scsihw %s is no SCSI controller Proxmox knows (%s): Proxmox keeps the line and passes -device %s to QEMU for the SCSI disks' controller, which QEMU refuses (%q): the VM does not start", clip(hw), strings.Join(qemuserver.SCSIControllers, ", "), clip(hw), "'"+hw+"' is not a valid device model name"),
				Fix:     fmt.Sprintf("qm set %d --scsihw lsi (Proxmox's default; or virtio-scsi-single for a guest with VirtIO drivers)", in.v.VMID)})
			return
		}
	}
}

// clip shortens what the config says for a message.
func clip(s string) string {
	if len(s) > 40 {
		return strconv.Quote(s[:40]) + "..."
	}
	return strconv.Quote(s)
}

// pendingRestart lists what [PENDING] changes for a running VM.
func pendingRestart(in *Input, out *VMResult) {
	v := in.v
	if !v.Running {
		return
	}
	vmid := strconv.Itoa(v.VMID)
	for _, k := range qemuserver.SortedKeys(v.Config.Pending) {
		out.add(Finding{Severity: Info, Code: CodePendingRestart, Disk: diskKey(k),
			Message: k + " is changed in [PENDING]: it applies at the next restart", Fix: "qm reboot " + vmid})
	}
	del := append([]string(nil), v.Config.PendingDelete...)
	sort.Strings(del)
	for _, k := range del {
		out.add(Finding{Severity: Info, Code: CodePendingRestart, Disk: diskKey(k),
			Message: k + " is deleted in [PENDING]: it goes at the next restart", Fix: "qm reboot " + vmid})
	}
}

func diskKey(k string) string {
	if qemuserver.IsDiskKey(k) {
		return k
	}
	return ""
}

// drift lists the running disks whose settings differ from the config.
func drift(in *Input, out *VMResult) {
	if !in.v.Running {
		return
	}
	for _, d := range in.set.Disks {
		if d.Configured == nil || d.Graph == nil {
			continue
		}
		if diffs := qemuserver.Diff(*d.Configured, d.Graph.DiskSettings); len(diffs) > 0 {
			out.add(Finding{Severity: Warning, Code: CodeDrift, Disk: d.ID,
				Message: "the running VM differs from its config: " + strings.Join(diffs, "; "),
				Fix:     "qm reboot " + strconv.Itoa(in.v.VMID) + " (applies the config) " + restartHint})
		}
	}
}
