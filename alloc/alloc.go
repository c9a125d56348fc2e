// Package alloc measures how much of a VM volume the storage has really
// allocated, each storage type through its own tool (the storage-type
// table's Alloc says which): lvs for LVM-thin, the
// file's allocated blocks for raw images on directory storages (dir, nfs,
// cifs, btrfs), qemu-img's actual-size for qcow2, `zfs get` for zvols and
// `rbd du` for Ceph. What cannot be measured is reported as such, with the
// reason, never estimated.
package alloc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pvediskcheck/pvediskcheck/lvm"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/storage/storagetype"
)

// Volume is one disk's volume as the meter needs it.
type Volume struct {
	Storage *qemuserver.Storage // nil for a disk given as an absolute path
	VolName string              // volume name within the storage (vm-370-disk-1)
	// Path is the file or device as this process can open it (a running
	// QEMU's path mapped through /proc/<pid>/root, see vm.VM.HostPath).
	Path   string
	Format string // raw, qcow2, vmdk
}

// Result is one measurement.
type Result struct {
	// Method names the tool: "lvs", "st_blocks", "qemu-img", "zfs", "rbd".
	Method string `json:"method"`
	// VirtualBytes is the size the guest sees; nil when unknown.
	VirtualBytes *int64 `json:"virtual_bytes"`
	// AllocatedBytes is what the storage holds for the volume; nil when it
	// cannot be measured (Unmeasured says why).
	AllocatedBytes *int64 `json:"allocated_bytes"`
	// ResolutionBytes is how far AllocatedBytes can be off from the truth:
	// lvs rounds data_percent to 0.01 %, rbd counts whole objects.
	ResolutionBytes int64  `json:"resolution_bytes"`
	Unmeasured      string `json:"unmeasured,omitempty"`
	// Pool is the thin pool (LVM-thin) or ZFS dataset the volume lives in.
	Pool *Pool `json:"pool,omitempty"`
	// Snapshots still referencing the volume's blocks (a trim cannot return
	// what they hold).
	Snapshots []string `json:"snapshots"`
	// SnapshotBytes is space held only by snapshots, where the storage says
	// (zfs usedbysnapshots); nil elsewhere.
	SnapshotBytes *int64 `json:"snapshot_bytes,omitempty"`
}

// Pool is a thin pool's state.
type Pool struct {
	Name            string   `json:"name"` // vg/pool, or the ZFS dataset
	SizeBytes       int64    `json:"size_bytes"`
	AllocatedBytes  *int64   `json:"allocated_bytes"`
	ResolutionBytes int64    `json:"resolution_bytes"`
	DataPercent     *float64 `json:"data_percent"`
	MetadataPercent *float64 `json:"metadata_percent"`
	// Discards is the LVM-thin pool's mode: ignore (thin volumes refuse
	// discards, nothing is freed), nopassdown (freed in the pool, the disk
	// below is not told), passdown (freed and passed to the disk).
	Discards       string `json:"discards,omitempty"`
	ChunkSizeBytes int64  `json:"chunk_size_bytes,omitempty"`
}

// Error is a tool that failed while measuring: exit 3 material.
type Error struct {
	What string // "lvs", "qemu-img", ...
	Err  error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ErrNotInReport means the storage's tool does not list the volume.
var ErrNotInReport = errors.New("volume not listed")

// Meter measures volumes; one Meter is one snapshot in time: lvs runs once
// per volume group however many disks live there.
type Meter struct {
	Runner  node.Runner
	Timeout time.Duration // for stat() on network storages; 0 means 5 s
	lvs     map[string]*lvm.Report
}

// NewMeter returns a meter that runs tools through r.
func NewMeter(r node.Runner, timeout time.Duration) *Meter {
	return &Meter{Runner: r, Timeout: timeout, lvs: map[string]*lvm.Report{}}
}

// Measure measures one volume.
func (m *Meter) Measure(ctx context.Context, v Volume) (Result, error) {
	res := Result{Snapshots: []string{}}
	if v.Storage == nil {
		if v.Path == "" {
			res.Unmeasured = "the disk has no volume"
			return res, nil
		}
		return m.file(ctx, v, res)
	}
	switch f := v.Storage.Facts(); f.Alloc {
	case storagetype.AllocLvs:
		return m.lvmthin(ctx, v, res)
	case storagetype.AllocFile:
		return m.file(ctx, v, res)
	case storagetype.AllocZFS:
		return m.zfs(ctx, v, res)
	case storagetype.AllocRBD:
		return m.rbd(ctx, v, res)
	case storagetype.AllocThick:
		res.Method = "none"
		res.Unmeasured = f.Unmeasured
		return res, nil
	}
	res.Method = "none"
	res.Unmeasured = fmt.Sprintf("storage type %s: no tool on this node reports a volume's allocation", v.Storage.Type)
	return res, nil
}

func (m *Meter) lvmthin(ctx context.Context, v Volume, res Result) (Result, error) {
	res.Method = "lvs"
	vg, poolName := v.Storage.ThinPool()
	rep, ok := m.lvs[vg]
	if !ok {
		var err error
		rep, err = lvm.List(ctx, m.Runner, vg)
		if err != nil {
			return res, &Error{What: "lvs", Err: err}
		}
		m.lvs[vg] = rep
	}
	lv := rep.Find(vg, v.VolName)
	if lv == nil {
		return res, &Error{What: "lvs", Err: fmt.Errorf("%w: %s/%s (storage %s) is not in lvs's report of volume group %s", ErrNotInReport, vg, v.VolName, v.Storage.ID, vg)}
	}
	size := lv.SizeBytes
	res.VirtualBytes = &size
	res.ResolutionBytes = lv.ResolutionBytes()
	if a, ok := lv.AllocatedBytes(); ok {
		res.AllocatedBytes = &a
	} else {
		res.Unmeasured = fmt.Sprintf("lvs prints no data_percent for %s/%s (lv_attr %s: not active)", vg, v.VolName, lv.Attr)
	}
	for _, s := range rep.Snapshots(vg, v.VolName) {
		res.Snapshots = append(res.Snapshots, s.Name)
	}
	if p := rep.Find(vg, poolName); p != nil {
		pool := &Pool{Name: vg + "/" + poolName, SizeBytes: p.SizeBytes, ResolutionBytes: p.ResolutionBytes(),
			DataPercent: p.DataPercent, MetadataPercent: p.MetadataPercent, Discards: p.Discards, ChunkSizeBytes: p.ChunkSizeBytes}
		if a, ok := p.AllocatedBytes(); ok {
			pool.AllocatedBytes = &a
		}
		res.Pool = pool
	}
	return res, nil
}

// file measures an image file: st_blocks for raw, qemu-img for qcow2/vmdk
// (their own metadata and clusters make the file's blocks the only truth,
// and qemu-img reads that with --force-share while QEMU holds the lock).
func (m *Meter) file(ctx context.Context, v Volume, res Result) (Result, error) {
	if v.Format == "qcow2" || v.Format == "vmdk" || v.Format == "qed" {
		return m.qemuImg(ctx, v, res)
	}
	res.Method = "st_blocks"
	st, err := m.stat(v.Path)
	if err != nil {
		return res, &Error{What: "stat", Err: fmt.Errorf("stat %s: %w", v.Path, err)}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFBLK {
		res.Method = "none"
		res.Unmeasured = "the volume is a block device, not a file: its allocation is the storage's business (no tool for it here)"
		return res, nil
	}
	size, alloc := st.Size, st.Blocks*512
	res.VirtualBytes, res.AllocatedBytes = &size, &alloc
	return res, nil
}

// stat bounds stat(2): on a hung NFS or CIFS mount it never returns.
func (m *Meter) stat(p string) (unix.Stat_t, error) {
	t := m.Timeout
	if t <= 0 {
		t = 5 * time.Second
	}
	st, err := node.Within(context.Background(), t, func() (st unix.Stat_t, err error) {
		err = unix.Stat(p, &st)
		return st, err
	})
	switch {
	case node.GaveUp(err):
		return unix.Stat_t{}, fmt.Errorf("stat %s: no answer within %s (hung network mount?)", p, t)
	case err != nil:
		return st, &os.PathError{Op: "stat", Path: p, Err: err}
	}
	return st, nil
}

// trimSpace is strings.TrimSpace for tool output.
func trimSpace(b []byte) string { return strings.TrimSpace(string(b)) }
