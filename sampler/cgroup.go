package sampler

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/pvediskcheck/pvediskcheck/node"
)

// A VM's cgroup: Proxmox starts each VM's QEMU in its own systemd scope,
// qemu.slice/<vmid>.scope (qemu-server's PVE::Systemd::enter_systemd_scope),
// cgroup v2 from PVE 7, v1 on older nodes or a node booted with
// systemd.unified_cgroup_hierarchy=0. Its memory.stat holds the page-cache
// bytes its QEMU dirtied (cache=writeback or unsafe) and that are not on
// storage yet; io.pressure and io.stat say how long it waited for I/O and
// what it read and wrote per device (Documentation/admin-guide/cgroup-v2.rst;
// cgroup-v1/memory.rst for v1's dirty and writeback).

// CgroupDir is where a VM's cgroup files are, found once per command
// (FindCgroup) and read at every sample (ReadCgroup).
type CgroupDir struct {
	// Version is 2 (memory.stat in the unified tree) or 1 (the v1
	// memory controller's hierarchy); 0 when no cgroup was found.
	Version int `json:"version,omitempty"`
	// Cgroup is the VM's cgroup as the kernel names it
	// ("/qemu.slice/100.scope").
	Cgroup string `json:"cgroup,omitempty"`
	// From says how it was found: "/proc/PID/cgroup", or "assumed" when
	// that file could not be read and Proxmox's layout was taken.
	From string `json:"from,omitempty"`
	// Memory is the directory holding memory.stat; IO the one holding
	// io.pressure (and io.stat): the same directory on a v2 node, the
	// unified tree's on a v1 (hybrid) node, "" where it has none.
	Memory string `json:"-"`
	IO     string `json:"-"`
	// Unmeasured is why nothing can be read ("" once Memory is found).
	Unmeasured string `json:"-"`
}

// Cgroup is one reading of a VM's cgroup (cache --json, top --json,
// metrics).
type Cgroup struct {
	CgroupDir
	// DirtyBytes and WritebackBytes are the VM's page cache written and not
	// yet on storage, and under writeback now (v2 memory.stat file_dirty,
	// file_writeback; v1 dirty, writeback). Bytes.
	DirtyBytes     int64 `json:"dirty_bytes"`
	WritebackBytes int64 `json:"writeback_bytes"`
	// IOPressure is io.pressure; nil where the node has none (no PSI, or
	// no unified tree on a v1 node).
	IOPressure *Pressure `json:"io_pressure"`
	// IO is io.stat per device (v2 with the io controller enabled for
	// qemu.slice); nil where the node has none.
	IO []DeviceIO `json:"io,omitempty"`
	// Notes name what was not read and why (io.pressure missing, ...).
	Notes []string `json:"notes,omitempty"`
}

// Pressure is a cgroup's io.pressure (Documentation/accounting/psi.rst):
// the share of the last 10 s some (at least one) or all of its tasks
// waited for I/O, percent, and the total time they waited, microseconds.
type Pressure struct {
	SomeAvg10   float64 `json:"some_avg10"`
	FullAvg10   float64 `json:"full_avg10"`
	SomeTotalUs int64   `json:"some_total_us"`
	FullTotalUs int64   `json:"full_total_us"`
}

// DeviceIO is one line of io.stat: the cgroup's I/O to one device since
// it was made (bytes and operations).
type DeviceIO struct {
	Device       string `json:"device"` // major:minor
	ReadBytes    int64  `json:"read_bytes"`
	WriteBytes   int64  `json:"write_bytes"`
	ReadIOs      int64  `json:"read_ios"`
	WriteIOs     int64  `json:"write_ios"`
	DiscardBytes int64  `json:"discard_bytes"`
	DiscardIOs   int64  `json:"discard_ios"`
}

// Measured reports whether the reading has the VM's dirty bytes.
func (c *Cgroup) Measured() bool { return c != nil && c.Unmeasured == "" }

// UnflushedBytes is what sits in the VM's page cache and not on storage:
// dirty plus under writeback.
func (c *Cgroup) UnflushedBytes() int64 { return c.DirtyBytes + c.WritebackBytes }

// ScopeOf is Proxmox's cgroup of a VM, "/qemu.slice/<vmid>.scope".
func ScopeOf(vmid int) string { return "/qemu.slice/" + strconv.Itoa(vmid) + ".scope" }

// cgroupRoot is where the node mounts its cgroups, below --sys.
func cgroupRoot(n node.Node) string { return filepath.Join(n.Paths.Sys, "fs", "cgroup") }

// FindCgroup finds the cgroup of the VM's QEMU process pid (0: none runs)
// from /proc/PID/cgroup, and where its files lie below --sys: the unified
// tree at /sys/fs/cgroup (a v2 node) or /sys/fs/cgroup/unified (a hybrid
// one), the memory controller's at /sys/fs/cgroup/memory (v1). What it
// cannot find comes back in Unmeasured, never as a reading of 0.
func FindCgroup(ctx context.Context, n node.Node, vmid, pid int) CgroupDir {
	scope := ScopeOf(vmid)
	if pid <= 0 {
		return CgroupDir{Cgroup: scope, Unmeasured: fmt.Sprintf("VM %d does not run: its cgroup %s holds no QEMU", vmid, scope)}
	}
	d := CgroupDir{From: "/proc/PID/cgroup"}
	v2, v1 := scope, scope
	b, err := n.ReadFile(ctx, filepath.Join(n.Paths.ProcPid(pid), "cgroup"))
	if err != nil {
		d.From = "assumed"
	} else {
		v2, v1 = parseProcCgroup(string(b))
	}
	// Only the VM's own scope counts: a QEMU started in a login session or
	// a service's cgroup shares it, and its dirty bytes are not the VM's.
	named2, named1 := v2, v1
	if !ownScope(v2, vmid) {
		v2 = ""
	}
	if !ownScope(v1, vmid) {
		v1 = ""
	}
	root := cgroupRoot(n)
	// The unified tree: the whole of /sys/fs/cgroup on a v2 node, its
	// unified/ mount on a hybrid one.
	// A process in the tree's root ("0::/" on a hybrid node whose
	// systemd keeps the unified tree for itself) has no cgroup of its own
	// there: the root's io.pressure is the node's, never the VM's.
	for _, dir := range []string{root, filepath.Join(root, "unified")} {
		if v2 == "" || v2 == "/" {
			break
		}
		p := filepath.Join(dir, v2)
		if exists(filepath.Join(p, "memory.stat")) {
			d.Version, d.Cgroup, d.Memory, d.IO = 2, v2, p, p
			return d
		}
		if d.IO == "" && exists(filepath.Join(p, "io.pressure")) {
			d.IO = p
		}
	}
	if v1 != "" {
		p := filepath.Join(root, "memory", v1)
		if exists(filepath.Join(p, "memory.stat")) {
			d.Version, d.Cgroup, d.Memory = 1, v1, p
			return d
		}
	}
	d.Cgroup = named2
	if d.Cgroup == "" || d.Cgroup == "/" {
		d.Cgroup = named1
	}
	switch {
	case d.Cgroup == "":
		d.Unmeasured = fmt.Sprintf("QEMU (pid %d) of VM %d is in no cgroup /proc/%d/cgroup names", pid, vmid, pid)
	case !ownScope(d.Cgroup, vmid):
		d.Unmeasured = fmt.Sprintf("QEMU (pid %d) of VM %d runs in cgroup %s, not in its own scope %s (started otherwise than qm start does): that cgroup's page cache is not this VM's alone", pid, vmid, d.Cgroup, scope)
	case d.From == "assumed":
		d.Unmeasured = fmt.Sprintf("/proc/%d/cgroup cannot be read (%v), and the node has no %s with a memory.stat below %s", pid, err, scope, root)
	default:
		d.Unmeasured = fmt.Sprintf("QEMU (pid %d) of VM %d runs in cgroup %s, which has no memory.stat below %s (no memory controller there: not started as Proxmox starts it)", pid, vmid, d.Cgroup, root)
	}
	return d
}

// parseProcCgroup reads /proc/PID/cgroup: the unified tree's cgroup (the
// "0::" line) and the v1 memory controller's ("N:...memory...:" line).
func parseProcCgroup(s string) (v2, v1mem string) {
	for _, line := range strings.Split(s, "\n") {
		id, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		ctrls, path, ok := strings.Cut(rest, ":")
		if !ok || !strings.HasPrefix(path, "/") {
			continue
		}
		if id == "0" && ctrls == "" {
			v2 = path
			continue
		}
		for _, c := range strings.Split(ctrls, ",") {
			if c == "memory" {
				v1mem = path
			}
		}
	}
	return v2, v1mem
}

// ownScope reports whether cgroup is a VM's own scope, "<vmid>.scope" (in
// qemu.slice on Proxmox; the slice is not checked, a node may nest it).
func ownScope(cgroup string, vmid int) bool {
	return cgroup != "" && path.Base(cgroup) == strconv.Itoa(vmid)+".scope"
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// ReadCgroup reads the VM's cgroup files at d: memory.stat always (its
// absence makes the reading unmeasured, with the reason), io.pressure and,
// with ioStat, io.stat where the node has them (their absence is a note).
// The files are read through node.OpenCgroupDir (ReadFile's refusals, on a
// real cgroupfs without its goroutine and timer): a sample of top or
// metrics pays this per VM.
func ReadCgroup(ctx context.Context, n node.Node, d CgroupDir, ioStat bool) *Cgroup {
	c := &Cgroup{CgroupDir: d}
	if d.Unmeasured != "" {
		return c
	}
	bp := cgroupBufs.Get().(*[]byte)
	defer cgroupBufs.Put(bp)
	buf := *bp
	mem := n.OpenCgroupDir(d.Memory)
	defer mem.Close()
	m, err := mem.ReadSmall(ctx, "memory.stat", buf)
	if err == nil {
		c.DirtyBytes, c.WritebackBytes, err = parseMemoryStat(string(buf[:m]), d.Version)
	}
	if err != nil {
		c.Unmeasured = fmt.Sprintf("cgroup %s: %v", d.Cgroup, err)
		return c
	}
	if d.IO == "" {
		c.Notes = append(c.Notes, "no io.pressure: the node has no unified cgroup tree holding "+d.Cgroup)
		return c
	}
	io := mem
	if d.IO != d.Memory {
		io = n.OpenCgroupDir(d.IO)
		defer io.Close()
	}
	if m, err = io.ReadSmall(ctx, "io.pressure", buf); err == nil {
		var p Pressure
		if p, err = parsePressure(string(buf[:m])); err == nil {
			c.IOPressure = &p
		}
	}
	if err != nil {
		c.Notes = append(c.Notes, "no io.pressure: "+notFound(err))
	}
	if ioStat && d.Version == 2 {
		if m, err = io.ReadSmall(ctx, "io.stat", buf); err == nil {
			c.IO, err = parseIOStat(string(buf[:m]))
		}
		if err != nil {
			c.Notes = append(c.Notes, "no io.stat: "+notFound(err))
		}
	}
	return c
}

// cgroupFileMax bounds one cgroup file: memory.stat is some 1.5 KiB (kernel
// 6.x, about 60 keys), io.stat a line per device the VM touched.
const cgroupFileMax = 64 << 10

// cgroupBufs holds the read buffers: zeroing 64 KiB at every sample and
// VM cost a fifth of the read.
var cgroupBufs = sync.Pool{New: func() any { b := make([]byte, cgroupFileMax); return &b }}

func notFound(err error) string {
	if errors.Is(err, os.ErrNotExist) {
		return "the node does not have it (kernel without PSI, or the io controller not enabled for qemu.slice)"
	}
	return err.Error()
}

// parseMemoryStat reads the dirty and writeback bytes of memory.stat: v2
// file_dirty and file_writeback, v1 dirty and writeback (the cgroup's own,
// a VM's scope being a leaf).
func parseMemoryStat(s string, version int) (dirty, writeback int64, err error) {
	dk, wk := "file_dirty", "file_writeback"
	if version == 1 {
		dk, wk = "dirty", "writeback"
	}
	found := 0
	for rest := s; rest != "" && found < 2; {
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		k, v, ok := strings.Cut(line, " ")
		if !ok || (k != dk && k != wk) {
			continue
		}
		x, perr := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if perr != nil || x < 0 {
			return 0, 0, fmt.Errorf("memory.stat: %s %q is not a byte count", k, v)
		}
		if k == dk {
			dirty = x
		} else {
			writeback = x
		}
		found++
	}
	if found < 2 {
		return 0, 0, fmt.Errorf("memory.stat has no %s and %s", dk, wk)
	}
	return dirty, writeback, nil
}

// parsePressure reads a PSI file's some and full lines.
func parsePressure(s string) (Pressure, error) {
	var p Pressure
	seen := 0
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || (f[0] != "some" && f[0] != "full") {
			continue
		}
		var avg float64
		var total int64
		got := 0
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			var err error
			switch k {
			case "avg10":
				avg, err = strconv.ParseFloat(v, 64)
				got++
			case "total":
				total, err = strconv.ParseInt(v, 10, 64)
				got++
			}
			if err != nil {
				return Pressure{}, fmt.Errorf("io.pressure: %s %s: %q is not a number", f[0], k, v)
			}
		}
		if got != 2 {
			return Pressure{}, fmt.Errorf("io.pressure: %q has no avg10 and total", line)
		}
		if f[0] == "some" {
			p.SomeAvg10, p.SomeTotalUs = avg, total
		} else {
			p.FullAvg10, p.FullTotalUs = avg, total
		}
		seen++
	}
	if seen == 0 {
		return Pressure{}, fmt.Errorf("io.pressure has no some or full line")
	}
	return p, nil
}

// parseIOStat reads io.stat: "MAJ:MIN rbytes=.. wbytes=.. rios=.. wios=..
// dbytes=.. dios=..", a line per device.
func parseIOStat(s string) ([]DeviceIO, error) {
	out := []DeviceIO{}
	for _, line := range strings.Split(s, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		d := DeviceIO{Device: f[0]}
		for _, kv := range f[1:] {
			k, v, _ := strings.Cut(kv, "=")
			x, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("io.stat: %s %s: %q is not a number", f[0], k, v)
			}
			switch k {
			case "rbytes":
				d.ReadBytes = x
			case "wbytes":
				d.WriteBytes = x
			case "rios":
				d.ReadIOs = x
			case "wios":
				d.WriteIOs = x
			case "dbytes":
				d.DiscardBytes = x
			case "dios":
				d.DiscardIOs = x
			}
		}
		out = append(out, d)
	}
	return out, nil
}
