package discard

import (
	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/latency"
)

// Report is the --json schema of `discard` (docs/json.md).
type Report struct {
	VMID    int  `json:"vmid"`
	Running bool `json:"running"`
	Mode    Mode `json:"mode"`
	// WindowSeconds is how long guest-fstrim took (trim) or the watch
	// window (wait).
	WindowSeconds *float64 `json:"window_seconds,omitempty"`
	// Sampling is how the --wait window was sampled: its gaps, and where
	// it ended when QEMU stopped answering.
	Sampling    *Sampling   `json:"sampling,omitempty"`
	GuestFstrim []GuestPath `json:"guest_fstrim,omitempty"`
	Disks       []Disk      `json:"disks"`
	Notes       []string    `json:"notes,omitempty"`
	// HistogramsLeft are the latency histograms of pvediskcheck's on the
	// disks that no run cleared (latency.Leftover: one killed before it
	// could), each with the command that clears it; omitted when none.
	HistogramsLeft []latency.Leftover `json:"histograms_left,omitempty"`
}

// Disk is one disk of the report.
type Disk struct {
	ID          string `json:"id"`
	Controller  string `json:"controller"`
	Volume      string `json:"volume"`
	Storage     string `json:"storage"`
	StorageType string `json:"storage_type"`
	// Thin: a discard that reaches this volume can give space back to the
	// storage (storage.ReturnsSpace).
	Thin bool `json:"thin"`
	// Discard is on/ignore in Proxmox's words for each view.
	Discard Setting  `json:"discard"`
	SSD     SSDViews `json:"ssd"`
	// ControllerDiscard: "yes", "guest kernel 5.0 or newer" (VirtIO Block),
	// or "no".
	ControllerDiscard string `json:"controller_discard"`
	// Allocation now (status) or after (trim/wait).
	Allocation alloc.Result `json:"allocation"`
	// SinceStart are the counters since QEMU started; nil when not running.
	SinceStart *Counters `json:"since_start"`
	// GuestFilesystems are the guest's mounted filesystems on the disk
	// (guest-get-fsinfo; status, or before the trim); null when the agent
	// was not asked (--wait) or said nothing, [] when none is on this disk.
	GuestFilesystems []guestdisk.Filesystem `json:"guest_filesystems"`
	// Reclaimable is what a trim would give back (JudgeReclaim), as the
	// run found the disk before it trimmed; null for a volume that is not
	// thin (a trim gives nothing back there) and under --wait, which does
	// not ask the guest agent.
	Reclaimable *Reclaim `json:"reclaimable"`
	Warnings    []Reason `json:"warnings"`
	Result      *Result  `json:"result,omitempty"`
}

// Setting is the discard option as configured, as QEMU runs it and as the
// next start will have it (when [PENDING] changes it).
type Setting struct {
	Configured string  `json:"configured"`
	Running    *string `json:"running"`
	Pending    *string `json:"pending"`
}

// Effective is what runs now, or the configuration when not running.
func (s Setting) Effective() string {
	if s.Running != nil {
		return *s.Running
	}
	return s.Configured
}

// SSDViews is ssd emulation as configured and as running.
type SSDViews struct {
	Configured bool  `json:"configured"`
	Running    *bool `json:"running"`
}

// Counters are a disk's discard counters since QEMU started.
type Counters struct {
	ProtocolNode string `json:"protocol_node"`
	// GuestSent* are the device's unmap_operations/unmap_bytes: counted
	// even when QEMU drops the discards; DeviceCounts is false on VirtIO
	// Block, where QEMU does not count them.
	GuestSentOps         int64 `json:"guest_sent_ops"`
	GuestSentBytes       int64 `json:"guest_sent_bytes"`
	DeviceCounts         bool  `json:"device_counts_discards"`
	StorageAcceptedOps   int64 `json:"storage_accepted_ops"`
	StorageAcceptedBytes int64 `json:"storage_accepted_bytes"`
	StorageFailedOps     int64 `json:"storage_failed_ops"`
}

// Result is what one --trim or --wait did for a disk, with its verdict.
type Result struct {
	GuestTrimmedBytes    *int64 `json:"guest_trimmed_bytes"`
	QEMUReceivedOps      int64  `json:"qemu_received_ops"`
	QEMUReceivedBytes    int64  `json:"qemu_received_bytes"`
	StorageAcceptedOps   int64  `json:"storage_accepted_ops"`
	StorageAcceptedBytes int64  `json:"storage_accepted_bytes"`
	StorageFailedOps     int64  `json:"storage_failed_ops"`
	AllocatedBeforeBytes *int64 `json:"allocated_before_bytes"`
	AllocatedAfterBytes  *int64 `json:"allocated_after_bytes"`
	ReturnedBytes        *int64 `json:"returned_bytes"`
	ResolutionBytes      int64  `json:"resolution_bytes"`
	PoolBeforeBytes      *int64 `json:"pool_before_bytes"`
	PoolAfterBytes       *int64 `json:"pool_after_bytes"`
	PoolReturnedBytes    *int64 `json:"pool_returned_bytes"`
	// StandsOnSeconds is the part of a --wait window the counters cover
	// (set only when the window had gaps or was cut short).
	StandsOnSeconds *float64 `json:"stands_on_seconds,omitempty"`
	Verdict         Verdict  `json:"verdict"`
	Reasons         []Reason `json:"reasons"`
}

// Sampling is how a --wait window was sampled (one query-blockstats
// exchange per interval on the shared sampler).
type Sampling struct {
	IntervalSeconds float64 `json:"interval_seconds"`
	Samples         int     `json:"samples"`
	// Missed counts ticks given up: the QMP socket stayed busy or silent
	// (QEMU stopped, another client holding it).
	Missed int   `json:"missed"`
	Gaps   []Gap `json:"gaps"`
	// CoveredSeconds is the span from the measurement before the window
	// to the last counters read (the window itself when complete).
	CoveredSeconds float64 `json:"covered_seconds"`
	// Cut is set when QEMU stopped answering before the window ended:
	// what went wrong; the counters end at the last sample.
	Cut string `json:"cut,omitempty"`
}

// Gap is a stretch of the window without a sample, in seconds from the
// window's start.
type Gap struct {
	FromSeconds float64 `json:"from_seconds"`
	ToSeconds   float64 `json:"to_seconds"`
}

// GuestPath is one filesystem guest-fstrim reported.
type GuestPath struct {
	Path         string   `json:"path"`
	TrimmedBytes int64    `json:"trimmed_bytes"`
	Disks        []string `json:"disks"`           // Proxmox disk ids below it, when known
	Error        string   `json:"error,omitempty"` // the guest's error for this filesystem
}

// Failed reports a disk whose verdict is not-returned (exit 1).
func (r *Report) Failed() bool {
	for _, d := range r.Disks {
		if d.Result != nil && d.Result.Verdict == NotReturned {
			return true
		}
	}
	return false
}
