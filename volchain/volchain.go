// Package volchain reads Proxmox VE 9's volume chains: on an lvm storage
// with `snapshot-as-volume-chain 1` a disk is a qcow2 image on a thick LV,
// and each snapshot is a further LV the current one backs onto
// (pve-storage LVMPlugin.pm: volume_snapshot renames the current LV to
// snap_<volume>_<snapname>.qcow2 and creates a new current LV backed by it,
// so the chain runs current -> newest snapshot -> ... -> oldest). It puts
// the running QEMU's backing chain (its block graph, vm.Live.Backing) beside
// the one the config's snapshot sections imply, says where they disagree,
// and how much of each layer's LV its qcow2 uses: a qcow2 that reaches the
// end of its LV gets ENOSPC, which pauses the VM like a full thin pool.
package volchain

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
	"github.com/pvediskcheck/pvediskcheck/units"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// Variant is the storage.cfg flag of an lvm storage that makes volume
// chains (storagetype's row).
const Variant = "snapshot-as-volume-chain"

// Layer is one qcow2 layer of a disk's chain, newest first.
type Layer struct {
	LV   string `json:"lv"`
	Path string `json:"path"`
	// Snapshot is the config snapshot the layer holds; "" for the current
	// layer (the disk's own volume).
	Snapshot string `json:"snapshot"`
	// LVSizeBytes is the LV's size (sysfs); Qcow2EndBytes is qemu-img
	// check's image-end-offset, how far into the LV the qcow2 reaches.
	LVSizeBytes   *int64   `json:"lv_size_bytes"`
	Qcow2EndBytes *int64   `json:"qcow2_end_bytes"`
	UsedPercent   *float64 `json:"used_percent"`
	// UnallocatedBytes is what the qcow2 can still allocate (its data
	// clusters not yet allocated, times the cluster size): only the
	// current layer takes writes. nil when not read.
	UnallocatedBytes *int64 `json:"unallocated_bytes"`
	// CanFill: the qcow2 can grow past the end of its LV.
	CanFill bool   `json:"can_fill"`
	Error   string `json:"error,omitempty"`
}

// Chain is one disk's volume chain (README: check's volume-chain).
type Chain struct {
	Disk   string `json:"disk"`
	Volume string `json:"volume"`
	// Live is QEMU's chain (running VMs); Config the LVs the config's
	// snapshots imply; both newest first, the current layer included.
	Live   []Layer  `json:"live"`
	Config []string `json:"config"`
	// Depth is the number of layers QEMU runs (the config's when stopped).
	Depth         int      `json:"depth"`
	Disagreements []string `json:"disagreements"`
}

// IsChained reports a volume of an lvm storage with volume chains: a qcow2
// on a thick LV.
func IsChained(s *qemuserver.Storage, volname string) bool {
	return s != nil && s.Facts().Variant == Variant && strings.HasSuffix(volname, ".qcow2")
}

// LayerName is the LV of snapshot snap of volume volname (LVMPlugin.pm
// get_snap_name): snap_<volume without .qcow2>_<snap>.qcow2.
func LayerName(volname, snap string) string {
	return "snap_" + strings.TrimSuffix(volname, ".qcow2") + "_" + snap + ".qcow2"
}

// snapOf is the snapshot a layer LV of volname holds ("" when it is not
// one: the current layer, or a foreign image).
func snapOf(volname, lv string) string {
	pre := "snap_" + strings.TrimSuffix(volname, ".qcow2") + "_"
	if strings.HasPrefix(lv, pre) && strings.HasSuffix(lv, ".qcow2") && len(lv) > len(pre)+len(".qcow2") {
		return strings.TrimSuffix(strings.TrimPrefix(lv, pre), ".qcow2")
	}
	return ""
}

// Expected is the chain the config implies for disk key of volume volid:
// the volume, then the layer of each snapshot in the main section's
// lineage whose copy of the disk names the same volume.
func Expected(snaps qemuserver.Snapshots, parent, key, volid string) []string {
	_, volname, _ := strings.Cut(volid, ":")
	out := []string{volname}
	for _, sn := range snaps.Lineage(parent) {
		line := snaps[sn][key]
		if line == "" {
			continue
		}
		d, err := qemuserver.ParseDrive(key, line)
		if err != nil || d.Volume != volid {
			continue
		}
		out = append(out, LayerName(volname, sn))
	}
	return out
}

// Compare says where QEMU's chain (live LV names) and the config's differ.
func Compare(volname string, live, config []string) []string {
	out := []string{}
	in := func(ss []string, s string) bool {
		for _, x := range ss {
			if x == s {
				return true
			}
		}
		return false
	}
	for _, l := range live {
		if in(config, l) {
			continue
		}
		if sn := snapOf(volname, l); sn != "" {
			out = append(out, fmt.Sprintf("QEMU's chain has %s, the layer of snapshot %s, which the config's snapshots do not name", l, sn))
		} else {
			out = append(out, fmt.Sprintf("QEMU's chain has %s, which is no layer of this volume", l))
		}
	}
	for _, c := range config {
		if !in(live, c) {
			out = append(out, fmt.Sprintf("the config's snapshot %s has its layer %s outside QEMU's chain", snapOf(volname, c), c))
		}
	}
	if len(out) == 0 && strings.Join(live, " ") != strings.Join(config, " ") {
		out = append(out, fmt.Sprintf("QEMU's chain runs %s, the config's snapshots %s", strings.Join(live, " <- "), strings.Join(config, " <- ")))
	}
	return out
}

// OnChain reports a drive whose volume s, the drive's storage, keeps as a
// volume chain (lvm with snapshot-as-volume-chain: a qcow2 on a thick LV).
func OnChain(drv *qemuserver.Drive, s *qemuserver.Storage) bool {
	if drv == nil {
		return false
	}
	_, volname, _ := strings.Cut(drv.Volume, ":")
	return IsChained(s, volname)
}

// ReadSnapshots reads the config's snapshot sections again (vm reads the
// main section and [PENDING] only); none when it cannot be read.
func ReadSnapshots(ctx context.Context, n node.Node, v *vm.VM) qemuserver.Snapshots {
	if b, err := n.ReadFile(ctx, v.Config.Path); err == nil {
		return qemuserver.ParseSnapshots(b)
	}
	return qemuserver.Snapshots{}
}

// Measure reads the chain of disk d of v, whose main-section drive is on a
// volume chain (OnChain): QEMU's from the live graph (FetchLive), the
// config's from snaps (ReadSnapshots), each layer's use through qemu-img
// and sysfs.
func Measure(ctx context.Context, n node.Node, v *vm.VM, d *vm.Disk, snaps qemuserver.Snapshots) *Chain {
	drv := d.Drive
	_, volname, _ := strings.Cut(drv.Volume, ":")
	c := &Chain{Disk: d.ID, Volume: drv.Volume, Live: []Layer{}, Disagreements: []string{}}
	c.Config = Expected(snaps, v.Config.Main["parent"], d.ID, drv.Volume)
	if d.Live != nil && d.Live.Inserted {
		var names []string
		paths := []string{d.Live.Protocol.Filename}
		for _, b := range d.Live.Backing {
			paths = append(paths, b.Protocol.Filename)
		}
		for i, p := range paths {
			l := liveLayer(ctx, n, v, volname, p, i == 0)
			c.Live = append(c.Live, *l)
			names = append(names, l.LV)
		}
		c.Depth = len(c.Live)
		c.Disagreements = Compare(volname, names, c.Config)
	} else {
		c.Depth = len(c.Config)
	}
	return c
}

// QemuImgCheckArgv reads a layer's qcow2 allocation; --force-share reads it
// while QEMU holds it.
func QemuImgCheckArgv(path string) []string {
	return []string{"qemu-img", "check", "--force-share", "--output=json", path}
}

// QemuImgInfoArgv reads the current layer's cluster size.
func QemuImgInfoArgv(path string) []string {
	return []string{"qemu-img", "info", "--force-share", "--output=json", path}
}

// measureLayer fills in the LV's size and the qcow2's end (and for the
// current layer what it can still allocate).
func measureLayer(ctx context.Context, n node.Node, r node.Runner, v *vm.VM, l *Layer, current bool) {
	if sz, err := lvSize(ctx, n, v, l.Path); err == nil {
		l.LVSizeBytes = &sz
	} else {
		l.Error = err.Error()
	}
	out, err := r.Run(ctx, QemuImgCheckArgv(l.Path)...)
	if err != nil && len(out) == 0 {
		l.Error = joinErr(l.Error, fmt.Sprintf("`%s`: %v", strings.Join(QemuImgCheckArgv(l.Path), " "), err))
		return
	}
	chk := gjson.ParseBytes(out)
	end := chk.Get("image-end-offset")
	if !end.Exists() {
		l.Error = joinErr(l.Error, "qemu-img check printed no image-end-offset")
		return
	}
	e := end.Int()
	l.Qcow2EndBytes = &e
	if l.LVSizeBytes != nil && *l.LVSizeBytes > 0 {
		p := float64(e) * 100 / float64(*l.LVSizeBytes)
		l.UsedPercent = &p
	}
	if !current {
		return
	}
	info, err := r.Run(ctx, QemuImgInfoArgv(l.Path)...)
	if err != nil {
		l.Error = joinErr(l.Error, fmt.Sprintf("`%s`: %v", strings.Join(QemuImgInfoArgv(l.Path), " "), err))
		return
	}
	cluster := gjson.GetBytes(info, "cluster-size").Int()
	total, alloc := chk.Get("total-clusters").Int(), chk.Get("allocated-clusters").Int()
	if cluster <= 0 || total <= 0 {
		return
	}
	un := max(total-alloc, 0) * cluster
	l.UnallocatedBytes = &un
	l.CanFill = l.LVSizeBytes != nil && e+un > *l.LVSizeBytes
}

func joinErr(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}

// lvSize is a block device's size from sysfs (<dev>/size, 512-byte
// sectors), the device found through the path's links (/dev/VG/LV ->
// /dev/dm-N) as the running QEMU sees them.
func lvSize(ctx context.Context, n node.Node, v *vm.VM, path string) (int64, error) {
	real, err := filepath.EvalSymlinks(v.HostPath(path))
	if err != nil {
		return 0, err
	}
	b, err := n.ReadFile(ctx, filepath.Join(n.Paths.Sys, "class/block", filepath.Base(real), "size"))
	if err != nil {
		return 0, err
	}
	sec, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %v", path, err)
	}
	return sec * 512, nil
}

// Level judges the current layer: one that can grow past its LV is a
// warning, from thinpool.FailPercent of the LV used an error.
func (c *Chain) Level() thinpool.Level {
	if len(c.Live) == 0 || !c.Live[0].CanFill {
		return thinpool.LevelOK
	}
	if p := c.Live[0].UsedPercent; p != nil && *p >= thinpool.FailPercent {
		return thinpool.LevelFailure
	}
	return thinpool.LevelWarning
}

// Describe is the chain in one line: each layer with its use, newest
// first, and its depth.
func (c *Chain) Describe() string {
	var parts []string
	if len(c.Live) == 0 {
		return fmt.Sprintf("volume chain (config, VM not running): %d layers: %s", len(c.Config), strings.Join(c.Config, " <- "))
	}
	for _, l := range c.Live {
		s := l.LV
		switch {
		case l.UsedPercent != nil:
			s += fmt.Sprintf(" (qcow2 %s of LV %s, %.1f %%)", units.Bytes(*l.Qcow2EndBytes), units.Bytes(*l.LVSizeBytes), *l.UsedPercent)
		case l.Error != "":
			s += " (use unknown: " + l.Error + ")"
		}
		parts = append(parts, s)
	}
	return fmt.Sprintf("volume chain, %d layers in QEMU: %s", c.Depth, strings.Join(parts, " <- "))
}

// Backing is the image chain QEMU runs a disk with when its image has a
// backing file (a volume chain's snapshot layers, a linked clone's base
// image, any qcow2 overlay), top layer to base (cache's backing_chain).
// It comes from the block graph vm.FetchLive already read: no QMP command
// of its own.
type Backing struct {
	Depth  int            `json:"depth"`
	Layers []BackingLayer `json:"layers"`
}

// BackingLayer is one layer: its format node, the file (or device) under
// it, and on a volume-chain storage its LV's use, as check's volume-chain
// reads it (Measure: sysfs and qemu-img check); LV is null for a layer on
// any other storage.
type BackingLayer struct {
	Node     string `json:"node"`
	File     string `json:"file"`
	Format   string `json:"format"`
	Protocol string `json:"protocol"`
	LV       *Layer `json:"lv"`
}

// Running is the backing chain of disk d of v when its running image has
// one (nil when not), with the LV use of each layer where s, the disk's
// storage, keeps it as a volume chain.
func Running(ctx context.Context, n node.Node, v *vm.VM, d *vm.Disk, s *qemuserver.Storage) *Backing {
	if d.Live == nil || !d.Live.Inserted || len(d.Live.Backing) == 0 {
		return nil
	}
	volname, chained := "", false
	if drv := d.Drive; drv != nil {
		_, volname, _ = strings.Cut(drv.Volume, ":")
		chained = IsChained(s, volname)
	}
	layers := append([]qmp.DriveChain{{Format: d.Live.Format, Protocol: d.Live.Protocol}}, d.Live.Backing...)
	b := &Backing{Depth: len(layers), Layers: []BackingLayer{}}
	for i, c := range layers {
		l := BackingLayer{Node: c.Format.Name, File: c.Protocol.Filename, Format: c.Format.Driver, Protocol: c.Protocol.Driver}
		if chained {
			l.LV = liveLayer(ctx, n, v, volname, c.Protocol.Filename, i == 0)
		}
		b.Layers = append(b.Layers, l)
	}
	return b
}

// liveLayer is the layer of volume volname QEMU runs from path, with its
// LV's use (the current layer's with what it can still allocate).
func liveLayer(ctx context.Context, n node.Node, v *vm.VM, volname, path string, current bool) *Layer {
	l := &Layer{Path: path, LV: filepath.Base(path), Snapshot: snapOf(volname, filepath.Base(path))}
	measureLayer(ctx, n, n.Runner, v, l, current)
	return l
}

// Lines are the chain as cache prints it: a heading, then a line per
// layer, top to base.
func (b *Backing) Lines() []string {
	out := []string{fmt.Sprintf("backing chain, %d layers, top to base:", b.Depth)}
	for i, l := range b.Layers {
		s := fmt.Sprintf("  %d. %s %s on %s (node %s)", i+1, l.Format, l.File, l.Protocol, l.Node)
		if u := l.LV; u != nil {
			if u.Snapshot != "" {
				s += ", snapshot " + u.Snapshot
			} else if i == 0 {
				s += ", current layer"
			}
			switch {
			case u.UsedPercent != nil:
				s += fmt.Sprintf(": qcow2 reaches %s of its LV's %s (%.1f %%)", units.Bytes(*u.Qcow2EndBytes), units.Bytes(*u.LVSizeBytes), *u.UsedPercent)
			case u.Error != "":
				s += ": LV use unknown: " + u.Error
			}
		}
		out = append(out, s)
	}
	return out
}
