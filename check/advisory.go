package check

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/advisory"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// readBinary measures what a running VM's QEMU runs (advisory.ReadBinary:
// the build its QMP greeting stated, /proc/PID/exe, the installed
// version, from the dpkg status reader the VM was loaded with: the run's
// one); nil for a VM that does not run. The rules below only read it.
func readBinary(ctx context.Context, n node.Node, v *vm.VM) *advisory.Binary {
	if !v.Running {
		return nil
	}
	b := advisory.ReadBinary(ctx, n, v.Pid, v.Alive, v.QEMUPackage, v.Packages())
	return &b
}

// runningDisks are the disks the running QEMU was started with, as its
// command line gives them: what the advisories' needs are judged on.
func runningDisks(v *vm.VM) []qemuserver.DiskSettings {
	var out []qemuserver.DiskSettings
	for _, d := range v.Disks {
		if d.Running != nil {
			out = append(out, *d.Running)
		}
	}
	return out
}

// severityOf is an advisory's severity as a finding's.
var severityOf = map[advisory.Severity]Severity{advisory.Error: Error, advisory.Warning: Warning, advisory.Info: Info}

// qemuAdvisoryRule is qemu-advisory's rule.
func qemuAdvisoryRule(in *Input, out *VMResult) {
	qemuAdvisories(in.v.VMID, in.qemu, runningDisks(in.v), in.advisories, out)
}

// qemuOutdatedRule is qemu-outdated's rule.
func qemuOutdatedRule(in *Input, out *VMResult) { qemuOutdated(in.v.VMID, in.qemu, out) }

// qemuAdvisories is qemu-advisory: each known bug (advisory.Known, the
// table) that the build the VM runs has and whose needs one of its running
// disks meets, with the table's severity, what it does, when, the disks,
// its sources, and the fix: the upgrade of the package and a full stop
// and start (qm reboot: the running process keeps its binary), or just
// the restart where the installed version has the fix; the setting that
// avoids it until then, where one does. Pure: the binary was measured
// before (readBinary), the disks are the command line's. Where QMP was not
// read the build is unknown and nothing is judged (liveUnread names the
// check).
func qemuAdvisories(vmid int, bin *advisory.Binary, disks []qemuserver.DiskSettings, table advisory.Table, out *VMResult) {
	if bin == nil || bin.Package == "" {
		return
	}
	build := bin.Build()
	if build.Version == nil {
		out.Notes = append(out.Notes, fmt.Sprintf("QEMU states the build %q, which names no package version: %s not checked", bin.Package, CodeQEMUAdvisory))
		out.NotChecked = append(out.NotChecked, CodeQEMUAdvisory)
		return
	}
	id := strconv.Itoa(vmid)
	installed := bin.InstalledVersion()
	for _, h := range table.Match(build, disks) {
		a := h.Advisory
		var srcs []string
		for _, s := range a.Sources {
			srcs = append(srcs, s.String())
		}
		fixedIn := h.Range.Fixed
		for _, l := range a.Later(h.Range) {
			fixedIn += fmt.Sprintf("; affected again from %s, fixed in %s", l.Introduced, l.Fixed)
		}
		msg := fmt.Sprintf("this VM runs %s, which has %s: %s: %s; on %s %s (%s), when %s; fixed in %s %s",
			build, a.ID, a.Title, a.Effect, needsPlural(h.Disks), strings.Join(h.Disks, ", "), a.Needs, a.Trigger, a.Package, fixedIn)
		if a.Note != "" {
			msg += "; " + a.Note
		}
		msg += " (" + strings.Join(srcs, "; ") + ")"
		var fix string
		switch {
		case installed != nil && a.Fixes(h.Range, *installed):
			fix = fmt.Sprintf("qm reboot %s: the installed %s %s has the fix, and the VM runs it only after a full stop and start (a reboot inside the guest is not enough)", id, a.Package, installed)
		case fixedIn == h.Range.Fixed:
			fix = fmt.Sprintf("apt update && apt install %s (%s or later has the fix), then qm reboot %s %s", a.Package, h.Range.Fixed, id, restartHint)
		default:
			fix = fmt.Sprintf("apt update && apt install %s (fixed in %s), then qm reboot %s %s", a.Package, fixedIn, id, restartHint)
		}
		if a.Avoid != "" {
			fix += "; until then: " + strings.ReplaceAll(a.Avoid, "VMID", id)
		}
		out.add(Finding{Severity: severityOf[a.Severity], Code: CodeQEMUAdvisory, Message: msg, Fix: fix})
	}
}

// needsPlural words the disks a bug is on.
func needsPlural(disks []string) string {
	if len(disks) == 1 {
		return "disk"
	}
	return "disks"
}

// qemuOutdated is qemu-outdated: the VM's QEMU runs a binary that is not
// the one installed now. A package upgrade replaces the file and unlinks
// the old one, which the process keeps running (/proc/PID/exe ends in "
// (deleted)"); or the running build's version is not the installed one.
// Until a full stop and start the installed version's fixes do not apply
// to this VM, and neither does what this tool knows of that version (the
// advisories are judged on the running build). Pure: bin was measured
// before.
func qemuOutdated(vmid int, bin *advisory.Binary, out *VMResult) {
	if bin == nil || !bin.Outdated() {
		return
	}
	run := "the running build " + bin.Build().String()
	inst := "the installed version is unknown (" + bin.InstalledUnknown + ")"
	switch {
	case bin.Installed != "":
		inst = "the installed " + bin.Name + " is " + bin.Installed
	case bin.Package == "":
		// QMP not read (liveUnread says why): the exe alone.
		run, inst = "the running build is unknown", "and so is the version installed"
	}
	exe := "/proc/PID/exe"
	if bin.Pid > 0 {
		exe = "/proc/" + strconv.Itoa(bin.Pid) + "/exe"
	}
	var what string
	switch d := bin.Differs(); {
	case bin.Replaced && d == 0 && bin.Installed != "":
		what = fmt.Sprintf("QEMU runs a binary that was replaced since the VM started (%s: %s (deleted)), reinstalled at the version it runs: %s, as installed", exe, bin.Exe, run)
	case bin.Replaced:
		what = fmt.Sprintf("QEMU runs a binary that was replaced since the VM started (%s: %s (deleted)): %s, %s", exe, bin.Exe, run, inst)
	case d < 0:
		what = fmt.Sprintf("%s is older than the one installed: %s", run, inst)
	default:
		what = fmt.Sprintf("%s is newer than the one installed (a downgrade the VM has not started): %s", run, inst)
	}
	out.add(Finding{Severity: Warning, Code: CodeQEMUOutdated,
		Message: what + "; the installed version's fixes, and what this tool knows of that version, apply to this VM only from its next full start",
		Fix:     "qm reboot " + strconv.Itoa(vmid) + " (a full stop and start: a reboot inside the guest keeps the running binary; a live migration starts the target node's installed binary instead)"})
}
