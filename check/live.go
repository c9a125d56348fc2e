package check

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
	"github.com/pvediskcheck/pvediskcheck/units"
	"github.com/pvediskcheck/pvediskcheck/vm"
	"github.com/pvediskcheck/pvediskcheck/volchain"
)

// QEMU's run state and io-status values io-error reads (QAPI RunState,
// BlockDeviceIoStatus).
const (
	statusIOError   = "io-error" // query-status: stopped by a disk's werror/rerror
	ioStatusFailed  = "failed"   // the storage failed a request (EIO, ...)
	ioStatusNoSpace = "nospace"  // ENOSPC
)

// ioErrors reports a VM that an I/O error has paused: QEMU stops a VM when a
// disk's write fails with werror=enospc (QEMU's default: no space left) or
// werror/rerror=stop, and keeps it paused until `qm resume`. Each disk whose
// io-status is failed or nospace is named with its storage and that
// storage's use.
//
// QEMU resets io-status on resume only for BlockBackends the monitor owns
// (-drive); a -blockdev device keeps its failed/nospace after `qm resume`
// (measured with QEMU 7.2: nospace stayed after cont, with 111 MiB free).
// So a running VM's flagged disk is an earlier pause (info), and a paused
// VM with several flagged disks may show an earlier one too (a note says so).
//
// On a volume-chain storage (the disk's Chain, package disk) a disk is a qcow2
// on a thick LV, and ENOSPC there means its current layer's qcow2 reached
// the end of its LV (a block device refuses a write past its end with
// ENOSPC): the cause and the fix name that LV, not the storage.
func ioErrors(in *Input, out *VMResult) {
	v := in.v
	if !v.Running || v.Status == "" {
		return
	}
	vmid := strconv.Itoa(v.VMID)
	paused := v.Status == statusIOError
	flagged := flagged(in.set)
	for _, d := range flagged {
		cause, fix := "the storage failed a request (io-status failed)", "find and repair what fails below the disk (dmesg, the storage), then qm resume "+vmid
		if d.Live.IOStatus == ioStatusNoSpace {
			cause, fix = "no space left on the storage (io-status nospace)", "free space on the storage or extend it, then qm resume "+vmid
		}
		use := storageUse(in, d)
		if c := d.Chain; c != nil && d.Live.IOStatus == ioStatusNoSpace && len(c.Live) > 0 {
			cause, use, fix = layerFull(c.Live[0], vmid)
		}
		if !paused {
			out.add(Finding{Severity: Info, Code: CodeIOError, Disk: d.ID,
				Message: "an I/O error on this disk paused the VM since it started and it was resumed (QEMU keeps the io-status): " + cause + "; " + use})
			continue
		}
		out.add(Finding{Severity: Error, Code: CodeIOError, Disk: d.ID,
			Message: "the VM is paused by an I/O error on this disk: " + cause + "; " + use, Fix: fix})
	}
	switch {
	case paused && len(flagged) == 0:
		out.add(Finding{Severity: Error, Code: CodeIOError,
			Message: "the VM is paused by an I/O error (query-status io-error), and no disk's io-status names it",
			Fix:     "find what fails below the VM's disks (dmesg, the storages), free or repair it, then qm resume " + vmid})
	case paused && len(flagged) > 1 && v.Blockdev:
		out.Notes = append(out.Notes, "io-error: QEMU keeps a -blockdev disk's io-status after a resume, so one of the disks named may be from an earlier pause; its storage's use tells")
	}
}

// layerFull is io-error's cause, use and fix for ENOSPC on a volume chain's
// current layer: its LV is full.
func layerFull(top volchain.Layer, vmid string) (cause, use, fix string) {
	cause = "no space left in the LV of the current layer " + top.LV + " (io-status nospace): a volume chain's qcow2 sits on a thick LV, and the write past the LV's end failed"
	use = "LV " + top.Path
	switch {
	case top.LVSizeBytes != nil && top.Qcow2EndBytes != nil:
		use += fmt.Sprintf(" of %s; qemu-img check sees its qcow2 reach %s (allocations QEMU has not flushed are not counted)", units.Bytes(*top.LVSizeBytes), units.Bytes(*top.Qcow2EndBytes))
	case top.Error != "":
		use += ": use unknown (" + top.Error + ")"
	}
	grow := "SIZE"
	if top.LVSizeBytes != nil && top.Qcow2EndBytes != nil && top.UnallocatedBytes != nil {
		if need := *top.Qcow2EndBytes + *top.UnallocatedBytes - *top.LVSizeBytes; need > 0 {
			grow = units.Bytes(need)
		}
	}
	fix = fmt.Sprintf("lvextend -L +%s %s (the current layer's LV", grow, top.Path)
	if grow != "SIZE" {
		fix += ": what its qcow2 can still allocate"
	}
	return cause, use, fix + "), then qm resume " + vmid
}

// storageUse names a disk's storage and how full it is, as far as the node
// can tell (measure read it: useSource).
func storageUse(in *Input, d *disk.Disk) string {
	_, s := d.Now()
	name := "a path"
	if d.Running != nil {
		name = "path " + d.Running.Path
	}
	if s != nil {
		name = "storage " + s.ID + " (" + s.Type + ")"
	}
	switch pool, path := useSource(d, in.pools != nil); {
	case pool != nil:
		pr := in.pools[pool.ID]
		if pr.err != nil {
			return name + ": use unknown (" + pr.err.Error() + ")"
		}
		p := pr.p
		use := fmt.Sprintf("%s: pool %s data %s of %s", name, p.Pool, units.PercentPtr(p.DataPercent), units.Bytes(p.SizeBytes))
		if p.MetadataPercent != nil {
			use += ", metadata " + units.PercentPtr(p.MetadataPercent)
		}
		return use
	case path != "":
		fs := in.fs[d.ID]
		if fs.err != nil {
			return name + ": use unknown (statfs: " + fs.err.Error() + ")"
		}
		return name + ": " + fsUse(fs.total, fs.free)
	}
	return name + ": use not known to this tool"
}

// fsUse prints a filesystem's free space and use.
func fsUse(total, free int64) string {
	used := 0.0
	if total > 0 {
		used = 100 * float64(total-free) / float64(total)
	}
	return fmt.Sprintf("%s free of %s (%.1f %% used)", units.Bytes(free), units.Bytes(total), used)
}

// thinPools reports the thin pools the VM's disks live on when they are
// overcommitted or their data or metadata is full (thinpool's figures and
// thresholds, the same `thin` reports).
func thinPools(in *Input, out *VMResult) {
	v := in.v
	used := poolStorages(in.set)
	if len(used) == 0 || in.pools == nil {
		return
	}
	for _, id := range qemuserver.SortedKeys(used) {
		s := used[id]
		p, err := in.pools[id].p, in.pools[id].err
		if err != nil {
			out.Notes = append(out.Notes, "thin-overcommit not checked for storage "+s.ID+": "+err.Error())
			if !hasCode(out.NotChecked, CodeThinOvercommit) {
				out.NotChecked = append(out.NotChecked, CodeThinOvercommit)
			}
			continue
		}
		for _, w := range p.Warnings {
			switch w.Code {
			case thinpool.CodeOvercommit, thinpool.CodeDataFull, thinpool.CodeMetadataFull:
			default:
				continue // discards: the disk rules say it per disk
			}
			sev := Warning
			if w.Level == thinpool.LevelFailure {
				sev = Error
			}
			out.add(Finding{Severity: sev, Code: CodeThinOvercommit,
				Message: fmt.Sprintf("thin pool %s (storage %s): %s", p.Pool, s.ID, w.Text), Fix: w.Fix})
		}
		thinFull(v, s, p, out)
	}
}

// thinFull says, for a pool whose filling is worth it (thinpool's
// FillLevel), when it stops accepting writes and what that does to each of
// this VM's disks on it (by the drive's werror).
func thinFull(v *vm.VM, s *qemuserver.Storage, p *thinpool.Pool, out *VMResult) {
	lvl := p.FillLevel()
	if lvl == thinpool.LevelOK {
		return
	}
	var disks []string
	for _, d := range v.Disks {
		if d.Drive != nil && d.Drive.StorageID() == s.ID {
			disks = append(disks, d.ID+" ("+p.Fill.DiskThen(d.Drive.Opts["werror"])+")")
		}
	}
	sev := Warning
	if lvl == thinpool.LevelFailure {
		sev = Error
	}
	msg := fmt.Sprintf("thin pool %s (storage %s) stops accepting writes %s; then %s", p.Pool, s.ID, p.Fill.Stops, p.Fill.Then)
	if len(disks) > 0 {
		msg += "; this VM's disks there: " + strings.Join(disks, ", ")
	}
	out.add(Finding{Severity: sev, Code: CodeThinFull, Message: msg, Fix: p.Fill.Fix(p)})
}

func hasCode(cs []Code, c Code) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}

// nextStart compares with `qm showcmd VMID --pretty` (measure ran it with
// --next-start): what the next start runs, with [PENDING] applied.
func nextStart(in *Input, out *VMResult) {
	if in.showcmd == nil {
		return
	}
	v := in.v
	raw, err := in.showcmd.raw, in.showcmd.err
	if err != nil {
		out.Notes = append(out.Notes, "--next-start: qm showcmd failed: "+err.Error())
		return
	}
	argv, err := qemuserver.SplitShell(string(raw))
	if err != nil {
		out.Notes = append(out.Notes, "--next-start: cannot split qm showcmd output: "+err.Error())
		return
	}
	cl, err := qemuserver.ParseCmdline(argv)
	if err != nil {
		out.Notes = append(out.Notes, "--next-start: "+err.Error())
		return
	}
	for i := range out.Disks {
		d := &out.Disks[i]
		if n, ok := cl.Disks[d.ID]; ok {
			d.NextStart = values(n)
		}
	}
	if !v.Running || v.Cmdline == nil {
		return
	}
	vmid := strconv.Itoa(v.VMID)
	for _, id := range cl.DiskIDs() {
		run, ok := v.Cmdline.Disks[id]
		if !ok {
			out.add(Finding{Severity: Info, Code: CodePendingRestart, Disk: id, Message: "the next start attaches this disk", Fix: "qm reboot " + vmid})
			continue
		}
		if diffs := qemuserver.Diff(*run, *cl.Disks[id]); len(diffs) > 0 {
			msg := strings.NewReplacer("config ", "now ", "running ", "next start ").Replace(strings.Join(diffs, "; "))
			out.add(Finding{Severity: Info, Code: CodePendingRestart, Disk: id, Message: "changes at the next start: " + msg, Fix: "qm reboot " + vmid})
		}
	}
	for _, id := range v.Cmdline.DiskIDs() {
		if _, ok := cl.Disks[id]; !ok {
			out.add(Finding{Severity: Info, Code: CodePendingRestart, Disk: id, Message: "the next start no longer attaches this disk", Fix: "qm reboot " + vmid})
		}
	}
}
