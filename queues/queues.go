// Package queues says how many virtqueues each VirtIO disk runs with: the
// config's queues= (a SCSI drive's, which qemu-server turns into its
// controller's num_queues under scsihw virtio-scsi-single only,
// QemuServer.pm), the running command line's num_queues (VirtIO SCSI
// controller) or num-queues (VirtIO Block device), and the count QEMU
// really runs, read with qom-get of that property (QEMU resolves its
// default, one queue per vCPU, when the device is realized: measured with
// QEMU 7.2 and -smp 2, virtio-blk-pci and virtio-scsi-pci without a count
// both report 2, num_queues=3 reports 3).
//
// A config count that differs from the command line's is drift
// (qemuserver.Diff: the VM runs what it was started with until a restart).
package queues

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// Count is one disk's queue counts (docs/json.md, cache and top
// `queues`).
type Count struct {
	// Configured is the drive line's queues=; nil when it sets none.
	Configured *int `json:"configured"`
	// Applied says whether qemu-server applies Configured: only for a
	// SCSI drive under scsihw virtio-scsi-single.
	Applied bool `json:"applied"`
	// CommandLine is what the running QEMU was started with; nil when it
	// sets none (QEMU's default: one per vCPU).
	CommandLine *int `json:"command_line"`
	// Running is what QEMU runs, from qom-get of Object's Property; nil
	// when not read (Unread says why).
	Running  *int   `json:"running"`
	Object   string `json:"object"`
	Property string `json:"property"`
	Unread   string `json:"unread,omitempty"`
}

// Target is the QOM object and property holding a running disk's count: a
// VirtIO Block device's own num-queues, a SCSI disk's VirtIO SCSI
// controller's num_queues (shared by the disks on it). ok is false for a
// disk without virtqueues (SATA, IDE, an emulated SCSI controller).
func Target(v *vm.VM, d *vm.Disk) (object, property string, ok bool) {
	if d.Running == nil || v.Cmdline == nil {
		return "", "", false
	}
	switch {
	case strings.HasPrefix(d.Running.Device, "virtio-blk"):
		return qmp.DevicePath(d.ID), "num-queues", true
	case strings.HasPrefix(d.Running.Device, "scsi-") && qemuserver.VirtIOSCSI(d.Running.Controller):
		ctrl, _, _ := strings.Cut(v.Cmdline.Devices[d.ID]["bus"], ".")
		if ctrl == "" {
			return "", "", false
		}
		return qmp.DevicePath(ctrl), "num_queues", true
	}
	return "", "", false
}

// Of is a disk's counts from the config and the command line, without
// QMP; nil for a disk that has none to show (no queues= and no running
// virtqueue device).
func Of(v *vm.VM, d *vm.Disk) *Count {
	c := &Count{}
	if d.Drive != nil {
		if n, err := strconv.Atoi(d.Drive.Opts["queues"]); err == nil {
			c.Configured = &n
			c.Applied = d.Configured != nil && d.Configured.Queues == n
		}
	}
	obj, prop, ok := Target(v, d)
	if ok {
		c.Object, c.Property = obj, prop
		if n := d.Running.Queues; n > 0 {
			c.CommandLine = &n
		}
	}
	if !ok && c.Configured == nil {
		return nil
	}
	return c
}

// Refs are the QOM properties holding counts' running values (by disk
// id, from Of), each object once, for vm.Query.QOM.
func Refs(counts map[string]*Count) []vm.QOMRef {
	var refs []vm.QOMRef
	seen := map[vm.QOMRef]bool{}
	for _, id := range sortedIDs(counts) {
		c := counts[id]
		k := vm.QOMRef{Object: c.Object, Property: c.Property}
		if c.Object != "" && !seen[k] {
			seen[k] = true
			refs = append(refs, k)
		}
	}
	return refs
}

// Apply sets each count's running value from what vm.Ask read of Refs:
// an object QEMU refused leaves its disks unread with QEMU's words.
func Apply(counts map[string]*Count, got map[vm.QOMRef]vm.QOMValue) {
	for _, c := range counts {
		if c.Object == "" {
			continue
		}
		v := got[vm.QOMRef{Object: c.Object, Property: c.Property}]
		c.Running, c.Unread = v.Int, v.Why
	}
}

func sortedIDs(m map[string]*Count) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// ForVM is each disk's counts (Of), with the running ones read in one QMP
// exchange when ask (the VM runs and its QMP answered the caller). When
// QMP cannot be read, every count says so in Unread and keeps the
// config's and command line's.
func ForVM(ctx context.Context, v *vm.VM, disks []*vm.Disk, timeout time.Duration, ask bool) map[string]*Count {
	out := map[string]*Count{}
	asked := false
	for _, d := range disks {
		if c := Of(v, d); c != nil {
			out[d.ID] = c
			asked = asked || c.Object != ""
		}
	}
	if !asked || !v.Running || !ask {
		for _, c := range out {
			if c.Object != "" && v.Running {
				c.Unread = "QMP not read"
			}
		}
		return out
	}
	a, err := v.Ask(ctx, timeout, vm.Query{QOM: Refs(out)})
	if err == nil {
		Apply(out, a.QOM)
	} else {
		for _, c := range out {
			if c.Object != "" {
				c.Running, c.Unread = nil, "QMP: "+err.Error()
			}
		}
	}
	return out
}

// Shown reports a count worth a line: the config sets queues, the command
// line does, or QEMU runs more than one queue.
func (c *Count) Shown() bool {
	return c != nil && (c.Configured != nil || c.CommandLine != nil || c.Running != nil && *c.Running > 1)
}

// Line is the cache view's sentence.
func (c *Count) Line() string {
	part := func(p *int, none string) string {
		if p == nil {
			return none
		}
		return strconv.Itoa(*p)
	}
	run := part(c.Running, "unknown")
	if c.Unread != "" {
		run += " (" + c.Unread + ")"
	} else if c.Running != nil {
		run += " (qom-get " + strings.TrimPrefix(c.Object, "/machine/peripheral/") + " " + c.Property + ")"
	}
	s := "queues: running " + run + ", command line " + part(c.CommandLine, "default (one per vCPU)") + ", config " + part(c.Configured, "not set")
	if c.Configured != nil && !c.Applied {
		s += "; qemu-server ignores queues= here: it sets num_queues only for SCSI disks under scsihw virtio-scsi-single"
	}
	return s
}
