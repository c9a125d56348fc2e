// Package threads tells a QEMU process's threads apart by role (main loop,
// iothread, vCPU) and measures each one's CPU time and run-queue wait.
//
// Roles come from QEMU itself, by thread id: query-iothreads and
// query-cpus-fast name each thread's id. Thread names cannot be used: Linux
// cuts them to 15 characters, so every iothread of a Proxmox VM reads "IO
// iothread-vir", and QEMU 7.2 does not name iothreads at all even with
// debug-threads=on (they show as the binary's name; testdata/README.md).
// The main loop is the process's first thread (tid = pid).
package threads

import (
	"sort"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// Role is what a QEMU thread does.
type Role string

const (
	// MainLoop runs QMP, timers and the I/O of every disk without an
	// iothread.
	MainLoop Role = "main-loop"
	// IOThread runs the I/O of the disks attached to it.
	IOThread Role = "iothread"
	// VCPU runs one of the guest's virtual CPUs.
	VCPU Role = "vcpu"
)

// Thread is one QEMU thread with its role.
type Thread struct {
	TID  int
	Role Role
	// ID is the iothread's object id (iothread-virtioscsi1) or the vCPU's
	// index ("0"); empty for the main loop.
	ID string
}

// Map is a QEMU process's threads by role.
type Map struct {
	PID       int
	IOThreads []Thread // sorted by id
	VCPUs     []Thread // sorted by index
}

// New maps the threads of QEMU process pid from query-iothreads' and
// query-cpus-fast's return values.
func New(pid int, iothreads, cpus gjson.Result) Map {
	return Map{PID: pid, IOThreads: ParseIOThreads(iothreads), VCPUs: ParseCPUs(cpus)}
}

// ParseIOThreads reads query-iothreads: each iothread's id and thread id.
func ParseIOThreads(ret gjson.Result) []Thread {
	var out []Thread
	for _, t := range ret.Array() {
		tid := int(t.Get("thread-id").Int())
		if tid <= 0 {
			continue
		}
		out = append(out, Thread{TID: tid, Role: IOThread, ID: t.Get("id").String()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// ParseCPUs reads query-cpus-fast: each vCPU's index and thread id.
func ParseCPUs(ret gjson.Result) []Thread {
	type cpu struct {
		idx int64
		t   Thread
	}
	var cs []cpu
	for _, c := range ret.Array() {
		tid := int(c.Get("thread-id").Int())
		if tid <= 0 {
			continue
		}
		idx := c.Get("cpu-index").Int()
		cs = append(cs, cpu{idx, Thread{TID: tid, Role: VCPU, ID: strconv.FormatInt(idx, 10)}})
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].idx < cs[j].idx })
	out := make([]Thread, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.t)
	}
	return out
}

// MainLoop is the process's main thread.
func (m Map) MainLoop() Thread { return Thread{TID: m.PID, Role: MainLoop} }

// IOThread returns the iothread with object id id.
func (m Map) IOThread(id string) (Thread, bool) {
	for _, t := range m.IOThreads {
		if t.ID == id {
			return t, true
		}
	}
	return Thread{}, false
}

// TIDs lists every thread id of the map: main loop, iothreads, vCPUs.
func (m Map) TIDs() []int {
	out := []int{m.PID}
	for _, t := range m.IOThreads {
		out = append(out, t.TID)
	}
	for _, t := range m.VCPUs {
		out = append(out, t.TID)
	}
	return out
}

// DiskIOThreads says which iothread serves each disk of ids; a disk not in
// the result runs its I/O in the main loop.
//
// The running command line says it: virtio-blk names its iothread on the
// device (iothread=iothread-virtio1), a SCSI disk on its controller
// (bus=virtioscsi1.0, whose -device has iothread=iothread-virtioscsi1). A
// disk hot-plugged after the start is on no command line; qemu-server adds
// it with the same ids, so iothread-<disk> (virtio-blk) and
// iothread-virtioscsi<N> (scsiN on VirtIO SCSI single) are taken when the
// map has them. Only iothreads QEMU reports count.
func (m Map) DiskIOThreads(cl *qemuserver.Cmdline, ids []string) map[string]string {
	out := map[string]string{}
	for _, id := range ids {
		iot := ""
		if cl != nil {
			dev := cl.Devices[id]
			iot = dev["iothread"]
			if ctrl, _, ok := strings.Cut(dev["bus"], "."); iot == "" && ok {
				iot = cl.Devices[ctrl]["iothread"]
			}
		}
		if iot == "" {
			switch {
			case strings.HasPrefix(id, "virtio"):
				iot = "iothread-" + id
			case strings.HasPrefix(id, "scsi"):
				iot = "iothread-virtioscsi" + strings.TrimPrefix(id, "scsi")
			}
		}
		if _, ok := m.IOThread(iot); ok {
			out[id] = iot
		}
	}
	return out
}
