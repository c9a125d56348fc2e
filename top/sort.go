package top

import (
	"sort"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// SortKey orders the rows; every key but vmid puts the largest first.
type SortKey string

const (
	// SortBusy: bytes per second read and written, then operations per
	// second: the disk that moves the most data first (the default).
	SortBusy SortKey = "busy"
	// SortIOPS: read plus write operations per second.
	SortIOPS SortKey = "iops"
	// SortLatency: the higher of the mean read and write latency.
	SortLatency SortKey = "latency"
	// SortQueue: the queue depth (time in flight per second).
	SortQueue SortKey = "queue"
	// SortLimit: the share of the I/O limit used (unthrottled disks last).
	SortLimit SortKey = "limit"
	// SortCPU: the CPU of the thread that serves the disk.
	SortCPU SortKey = "cpu"
	// SortVMID: by VMID, then disk, in Proxmox's order.
	SortVMID SortKey = "vmid"
)

// SortKeys lists the keys in the order help texts show them.
var SortKeys = []SortKey{SortBusy, SortIOPS, SortLatency, SortQueue, SortLimit, SortCPU, SortVMID}

// ParseSortKey validates a --sort value.
func ParseSortKey(s string) (SortKey, error) {
	for _, k := range SortKeys {
		if string(k) == s {
			return k, nil
		}
	}
	return "", exitcode.Usagef("--sort %s: not a sort key (one of %s)", units.Clip(s, 20), SortKeyNames())
}

// SortKeyNames lists the keys for help texts: "busy, iops, ...".
func SortKeyNames() string {
	names := make([]string, len(SortKeys))
	for i, k := range SortKeys {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}

// Sort orders rows by key, largest first; ties (and SortVMID) go by VMID
// and then by disk in Proxmox's order, so rows do not jump between
// refreshes when values are equal.
func Sort(rows []Disk, key SortKey) {
	metric := func(d Disk) (float64, float64) {
		switch key {
		case SortIOPS:
			return d.ReadIOPS + d.WriteIOPS, 0
		case SortLatency:
			return max(d.ReadLatencyMs, d.WriteLatencyMs), 0
		case SortQueue:
			return d.QueueDepth, 0
		case SortLimit:
			if d.LimitPct == nil {
				return -1, 0
			}
			return *d.LimitPct, 0
		case SortCPU:
			if d.ThreadCPUPct == nil {
				return -1, 0
			}
			return *d.ThreadCPUPct, 0
		case SortVMID:
			return 0, 0
		}
		return d.ReadBps + d.WriteBps, d.ReadIOPS + d.WriteIOPS
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a1, a2 := metric(rows[i])
		b1, b2 := metric(rows[j])
		if a1 != b1 {
			return a1 > b1
		}
		if a2 != b2 {
			return a2 > b2
		}
		if rows[i].VMID != rows[j].VMID {
			return rows[i].VMID < rows[j].VMID
		}
		return rows[i].order < rows[j].order
	})
}
