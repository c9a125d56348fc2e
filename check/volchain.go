package check

import (
	"fmt"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/thinpool"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// volumeChains reports each disk on a volume-chain storage (lvm with
// snapshot-as-volume-chain; its Chain, package disk): its chain and
// depth (info, from two layers), where QEMU's chain and the config's
// snapshots disagree (warning), and a current layer whose
// qcow2 can grow past its LV (a warning, an error from thinpool.FailPercent
// of the LV): the write that reaches the LV's end fails with ENOSPC and
// QEMU pauses the VM, as on a full thin pool.
func volumeChains(in *Input, out *VMResult) {
	v := in.v
	for _, d := range in.set.Disks {
		c := d.Chain
		if c == nil {
			continue
		}
		// A chain of one layer (no snapshot) that agrees is said by nothing.
		if c.Depth > 1 || len(c.Config) > 1 || len(c.Disagreements) > 0 {
			msg := c.Describe()
			if len(c.Disagreements) == 0 && len(c.Live) > 0 {
				msg += fmt.Sprintf("; matches the config's snapshots (%d)", len(c.Config)-1)
			}
			out.add(Finding{Severity: Info, Code: CodeVolumeChain, Disk: c.Disk, Message: msg})
		}
		if len(c.Disagreements) > 0 {
			out.add(Finding{Severity: Warning, Code: CodeVolumeChain, Disk: c.Disk,
				Message: "QEMU's backing chain and the config's snapshots disagree: " + strings.Join(c.Disagreements, "; "),
				Fix:     fmt.Sprintf("compare qm listsnapshot %d with the chain before deleting or rolling back a snapshot; a VM started before the change runs the old chain until it is stopped and started", v.VMID)})
		}
		lvl := c.Level()
		if lvl == thinpool.LevelOK {
			continue
		}
		top := c.Live[0]
		sev := Warning
		if lvl == thinpool.LevelFailure {
			sev = Error
		}
		out.add(Finding{Severity: sev, Code: CodeVolumeChain, Disk: c.Disk,
			Message: fmt.Sprintf("the current layer %s can outgrow its LV: its qcow2 reaches %s of %s (%.1f %%) and can still allocate %s; the write that reaches the LV's end fails with ENOSPC and QEMU pauses the VM (werror=enospc, its default)",
				top.LV, units.Bytes(*top.Qcow2EndBytes), units.Bytes(*top.LVSizeBytes), *top.UsedPercent, units.Bytes(*top.UnallocatedBytes)),
			Fix: fmt.Sprintf("lvextend -L +%s %s (the LV of the current layer)", units.Bytes(*top.Qcow2EndBytes+*top.UnallocatedBytes-*top.LVSizeBytes), top.Path)})
	}
}
