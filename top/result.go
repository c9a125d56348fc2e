package top

import (
	"strings"
	"time"

	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/layers"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// Sample is one refresh: every disk's activity over the last interval and
// what the QEMU threads did meanwhile (docs/json.md, top --json).
type Sample struct {
	Time      time.Time `json:"time"`
	IntervalS float64   `json:"interval_s"` // the refresh interval asked for
	Disks     []Disk    `json:"disks"`
	VMs       []VM      `json:"vms"`
	Findings  []Finding `json:"findings"`
	// Histograms says, with --histogram, what was done about each disk's
	// latency histogram: set by this run (cleared when it ends), found set
	// (used as it is, left in place) or refused by QEMU.
	Histograms []latency.Note `json:"histograms,omitempty"`
	// HistogramsLeft are the latency histograms of pvediskcheck's that
	// this run did not set (a run killed before it could clear them), by
	// VMID and disk, each with the command that clears it; with or
	// without --histogram. Each is also a latency-histogram-left finding.
	HistogramsLeft []latency.Leftover `json:"histograms_left,omitempty"`
}

// Disk is one row: one disk of a running VM over one interval, as QEMU
// counted it for the guest's device (throttle queue included).
type Disk struct {
	VMID    int    `json:"vmid"`
	Name    string `json:"name"` // the VM's name
	Disk    string `json:"disk"` // config key: scsi1
	Storage string `json:"storage"`

	ReadIOPS  float64 `json:"read_iops"`
	WriteIOPS float64 `json:"write_iops"`
	ReadBps   float64 `json:"read_bps"` // bytes/s
	WriteBps  float64 `json:"write_bps"`
	// Mean latency of the requests completed in the interval; 0 when none.
	ReadLatencyMs  float64 `json:"read_latency_ms"`
	WriteLatencyMs float64 `json:"write_latency_ms"`
	FlushLatencyMs float64 `json:"flush_latency_ms"`
	// QueueDepth is the time requests spent in flight per second: the mean
	// number QEMU had outstanding.
	QueueDepth float64 `json:"queue_depth"`
	FailedOps  int64   `json:"failed_ops"` // failed or refused requests in the interval
	// StalledSeconds is how long the disk has completed nothing while the
	// node shows requests outstanding for it (package stall); 0 when it is
	// not stalled.
	StalledSeconds float64 `json:"stalled_seconds"`
	stallSays      string  // the stall rule's evidence, for the finding
	// Percentiles of the interval's requests (read_p50_ms ... flush_p99_ms)
	// from the disk's latency histogram; omitted without one (top
	// --histogram sets them).
	latency.Percentiles

	// LimitPct is the share of the running I/O limit used, for the limit
	// closest to being reached; nil when the disk runs unthrottled.
	LimitPct *float64 `json:"limit_pct"`
	// Limit names that limit in Proxmox's terms (mbps_wr=20).
	Limit *string `json:"limit"`

	BlockJob *string `json:"block_job"` // backup, mirror, stream, commit; nil when none
	// Backup is, while a backup job runs on the disk, its progress and
	// speed and the guest's write latency during it against the minute
	// before it started (package latency); omitted otherwise.
	Backup *latency.Impact `json:"backup,omitempty"`

	// IOThread is the iothread serving the disk; nil when its I/O runs in
	// the main loop (vms[].main_loop_cpu_pct).
	IOThread       *string  `json:"iothread"`
	IOThreadCPUPct *float64 `json:"iothread_cpu_pct"`
	// Thread is the thread that serves the disk: the iothread's id or
	// "main-loop"; ThreadCPUPct and ThreadWaitPct are its CPU and
	// run-queue wait, % of one core (wait nil without schedstat).
	Thread        string   `json:"thread"`
	ThreadCPUPct  *float64 `json:"thread_cpu_pct"`
	ThreadWaitPct *float64 `json:"thread_wait_pct"`

	// Device is the node block device below the volume (dm-3, loop0,
	// zd16, rbd0) and DeviceLatencyMs its own mean read/write latency;
	// both nil when the volume is no block device on the node (a file,
	// librbd, iSCSI).
	Device          *string  `json:"device"`
	DeviceLatencyMs *float64 `json:"device_latency_ms"`

	// GuestByID is the guest's /dev/disk/by-id name from Proxmox's layout
	// (nil when it gives none); GuestDevice and GuestMounts are what the
	// guest agent reports, nil and empty without an answering agent.
	GuestByID   *string  `json:"guest_by_id"`
	GuestDevice *string  `json:"guest_device"`
	GuestMounts []string `json:"guest_mounts"`

	// Queues is how many virtqueues QEMU runs the disk with (qom-get of
	// the VirtIO Block device's num-queues or the VirtIO SCSI controller's
	// num_queues, read with the thread map); nil for a disk without
	// virtqueues or when QEMU did not say.
	Queues *int `json:"queues"`

	// Layers is, with --layers, the disk's latency split over the guest,
	// QEMU and the node device and the layer that adds most (package
	// layers); omitted without it.
	Layers *layers.Split `json:"layers,omitempty"`

	order int // the disk's place in its VM's config order (Proxmox's)
}

// Guest names the disk as the guest sees it: the agent's device and mount
// points, else its /dev/disk/by-id name, else "-".
func (d Disk) Guest() string {
	if d.GuestDevice != nil {
		return strings.TrimSpace(*d.GuestDevice + " " + strings.Join(d.GuestMounts, ","))
	}
	if d.GuestByID != nil {
		return strings.TrimPrefix(*d.GuestByID, "/dev/disk/by-id/")
	}
	return "-"
}

// Status says whether a VM could be sampled.
type Status string

const (
	// OK: sampled; its disks are in the sample.
	OK Status = "ok"
	// New: first seen this interval (just started, or the run began):
	// its rows come with the next sample, which has a span to compare.
	New Status = "new"
	// Busy: another client held the QMP socket for the whole interval;
	// the next sample spans both intervals.
	Busy Status = "busy"
	// Unreachable: QEMU did not answer for another reason (Error says).
	Unreachable Status = "unreachable"
	// Stopped: a VM named on the command line that is not running; it
	// appears when it starts.
	Stopped Status = "stopped"
)

// VM is one VM of the sample: its status and the CPU of its QEMU threads.
type VM struct {
	VMID   int    `json:"vmid"`
	Name   string `json:"name"`
	Status Status `json:"status"`
	Error  string `json:"error,omitempty"`
	PID    int    `json:"pid,omitempty"`
	// The main loop (QMP, timers, disks without an iothread), % of one
	// core; its run-queue wait; nil when not measured this interval.
	MainLoopCPUPct  *float64 `json:"main_loop_cpu_pct"`
	MainLoopWaitPct *float64 `json:"main_loop_wait_pct"`
	// VCPUCPUPct is the vCPU threads' CPU together, % of one core (two
	// busy vCPUs: 200); VCPUs how many there are.
	VCPUCPUPct *float64   `json:"vcpu_cpu_pct"`
	VCPUs      int        `json:"vcpus"`
	IOThreads  []IOThread `json:"iothreads"`
	// DirtyBytes and WritebackBytes are the page cache the VM's QEMU holds
	// in node RAM, not yet on storage, from its cgroup's memory.stat
	// (package sampler); IOPressure its io.pressure. Nil when not measured
	// (CgroupNotMeasured says why: no scope of the VM on the node, ...).
	DirtyBytes        *int64            `json:"dirty_bytes"`
	WritebackBytes    *int64            `json:"writeback_bytes"`
	IOPressure        *sampler.Pressure `json:"io_pressure"`
	CgroupNotMeasured string            `json:"cgroup_not_measured,omitempty"`
	// GuestFreeze is the guest's freeze state (guest-fsfreeze-status,
	// asked at most once per --stall-after, never while a backup holds the
	// VM); omitted for a VM without an agent socket.
	GuestFreeze *vm.Freeze `json:"guest_freeze,omitempty"`
	// AgentNotAsked are the guest agent answers top did not ask for
	// because a backup holds the VM, and why.
	AgentNotAsked []vm.AgentSkip `json:"agent_not_asked,omitempty"`
}

// IOThread is one iothread of a VM and the disks it serves.
type IOThread struct {
	ID      string   `json:"id"`
	TID     int      `json:"tid"`
	CPUPct  *float64 `json:"cpu_pct"`
	WaitPct *float64 `json:"wait_pct"`
	Disks   []string `json:"disks"`
}
