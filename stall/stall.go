// Package stall owns the rule that says a disk is stuck: the guest has
// requests outstanding and none of them completes for After (--stall-after,
// DefaultAfter). top, metrics and check ask it per disk; `pvediskcheck stall`
// and --capture keep the evidence (Capture).
//
// What each half of the rule rests on:
//
//   - "none completes": QEMU's own clock, query-blockstats' idle_time_ns,
//     the time since the device's last completed (or failed) request:
//     block/accounting.c stamps last_access_time_ns when a request is
//     accounted done, never when one is submitted. So one sample is enough
//     (check and metrics are one-shot), and no command is added: top and
//     metrics read query-blockstats already.
//   - "outstanding": not in QEMU's counters. idle_time_ns grows the same
//     on an idle disk (QEMU-FACTS "Stalls"), so the requests must be seen
//     where they wait, on the node: the QEMU threads that serve the disk in
//     uninterruptible sleep (state D; io_uring's workers iou-wrk-<TID of the
//     submitting thread>, the iothread or main loop itself for a blocking
//     submission, and the thread pool's "worker" threads, placed on their
//     disk by the file their system call works on: attrib.go), or the node
//     block device under the volume with requests in flight
//     (/sys/block/DEV/stat's in-flight field). A disk with no such
//     evidence is never stalled, however long it has been idle.
//
// The guest's own view (/sys/block/*/inflight through the agent) is not
// asked: it would add agent commands per sample and the agent of a guest
// whose disk hangs often hangs with it. A request queued inside QEMU alone
// (a throttle queue that never drains, QEMU issue 3144) leaves no trace on
// the node and is not detected; the capture still records the throttle
// groups' state.
package stall

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// DefaultAfter is --stall-after's default: five seconds without a
// completion while requests are outstanding. A healthy disk completes
// within milliseconds; a throttled one within a second or two of its queue
// (QEMU-FACTS "Live limits": a 20 MiB/s queue of 40 MiB stalls ~1.5 s
// before it runs at the limit), so 5 s is past every wait a working disk
// shows and well within the minutes an admin loses to a stuck one.
const DefaultAfter = 5 * time.Second

// MinAfter is the least --stall-after accepted: below a second, a queue
// waiting out its throttle bucket reads as stuck.
const MinAfter = time.Second

// MaxAfter bounds --stall-after: a disk that completes nothing for an
// hour has long been a stall.
const MaxAfter = time.Hour

// Source names where a piece of evidence comes from.
type Source string

const (
	// SourceQEMU: query-blockstats' idle_time_ns.
	SourceQEMU Source = "qemu"
	// SourceThreads: the QEMU process's threads (/proc/PID/task/TID/stat).
	SourceThreads Source = "threads"
	// SourceDevice: the node block device under the volume
	// (/sys/class/block/DEV/stat).
	SourceDevice Source = "host-device"
)

// Evidence is one thing seen, and what it says.
type Evidence struct {
	Source Source `json:"source"`
	Says   string `json:"says"`
}

// Disk is what the rule needs to know about one running disk.
type Disk struct {
	ID      string
	Storage string
	// ServingTID is the thread that submits the disk's I/O: its iothread,
	// or the main loop (the process id).
	ServingTID int
	// ThreadPool: aio=threads, every request runs in QEMU's "worker"
	// threads, whose name does not say which disk handed them work: a
	// worker whose file could not be read counts for these disks.
	ThreadPool bool
	// Path is the image or device QEMU opened for the disk, as its command
	// line names it; "" for a remote volume (rbd, iscsi, nbd).
	Path string
	// Dev is the node block device under the volume (dm-3, loop0, zd16);
	// "" when the volume is a file or remote.
	Dev string
}

// Thread is one QEMU thread in uninterruptible sleep.
type Thread struct {
	TID   int    `json:"tid"`
	Comm  string `json:"comm"`
	State string `json:"state"`
	Wchan string `json:"wchan"` // "" when unreadable
	// Syscall is the thread's /proc/PID/task/TID/syscall line as read
	// (the call's number, its six arguments, the stack and instruction
	// pointers); "" when not read, and for io_uring's workers, which are
	// placed by their name.
	Syscall string `json:"syscall,omitempty"`
	// Call names the call when it works on a descriptor (fallocate,
	// pwritev, ioctl, fdatasync...), FD is that descriptor.
	Call string `json:"call,omitempty"`
	FD   *int   `json:"fd,omitempty"`
	// File is what FD names, as QEMU sees it (/proc/PID/fd/N): a disk's
	// image or device, and so the disk the thread works for. "" when not
	// known; Unread then says why (empty when nothing was tried).
	File   string `json:"fd_target,omitempty"`
	Unread string `json:"fd_target_unread,omitempty"`
}

// Look is what the node showed of one QEMU process at one moment.
type Look struct {
	// Blocked are the process's threads in state D.
	Blocked []Thread
	// ThreadsErr says why the threads could not be read; nil when read.
	ThreadsErr error
	// InFlight is each node block device's requests in flight, by name;
	// a device absent could not be read.
	InFlight map[string]int64
}

// Verdict is the rule's answer for one disk.
type Verdict struct {
	Disk    string `json:"disk"`
	Storage string `json:"storage"`
	Stalled bool   `json:"stalled"`
	// StalledSeconds is how long the disk has completed nothing while
	// requests are outstanding (QEMU's idle time); 0 when not stalled.
	StalledSeconds float64 `json:"stalled_seconds"`
	// IdleSeconds is QEMU's time since the disk's last completion; nil
	// when QEMU reports none (nothing completed since it started).
	IdleSeconds *float64 `json:"idle_seconds"`
	// InFlight is the node block device's requests in flight; nil when the
	// volume has no device on the node or it could not be read.
	InFlight *int64 `json:"inflight"`
	// Blocked are the serving threads in state D.
	Blocked []Thread `json:"blocked_threads"`
	// Evidence says what each source showed; empty for a disk not idle
	// for After (nothing to weigh).
	Evidence []Evidence `json:"evidence"`
}

// Summary is the evidence in one line (check's message, top's footer).
func (v Verdict) Summary() string {
	var s []string
	for _, e := range v.Evidence {
		s = append(s, string(e.Source)+": "+e.Says)
	}
	return strings.Join(s, "; ")
}

// Idle is QEMU's time since the disk's last completion (idle_time_ns);
// ok is false when QEMU gives none.
func Idle(b qmp.BlockStats) (time.Duration, bool) {
	return time.Duration(b.IdleTimeNs), b.HasIdleTime
}

// Candidate says whether a disk needs a look at the node at all: QEMU has
// completed nothing on it for after. Callers read the threads only for
// VMs with a candidate.
func Candidate(b qmp.BlockStats, after time.Duration) bool {
	idle, ok := Idle(b)
	return ok && idle >= after
}

// Judge applies the rule to one disk: stalled when QEMU has completed
// nothing on it for after and the node shows requests outstanding for it
// (a serving thread in D, or the node device with requests in flight).
func Judge(d Disk, b qmp.BlockStats, look Look, after time.Duration) Verdict {
	v := Verdict{Disk: d.ID, Storage: d.Storage, Blocked: []Thread{}, Evidence: []Evidence{}}
	if n, ok := look.InFlight[d.Dev]; ok && d.Dev != "" {
		v.InFlight = &n
	}
	idle, ok := Idle(b)
	if ok {
		s := units.Round(idle.Seconds(), 1)
		v.IdleSeconds = &s
	}
	if !ok || idle < after {
		return v // completing, or too recently to say
	}
	v.Evidence = append(v.Evidence, Evidence{SourceQEMU, "no request completed for " + units.Number(units.Round(idle.Seconds(), 1)) + " s (idle_time_ns)"})
	outstanding := false
	if look.ThreadsErr != nil {
		v.Evidence = append(v.Evidence, Evidence{SourceThreads, "not read: " + look.ThreadsErr.Error()})
	} else {
		v.Blocked = serving(d, look.Blocked)
		if len(v.Blocked) > 0 {
			outstanding = true
			v.Evidence = append(v.Evidence, Evidence{SourceThreads, describe(v.Blocked)})
		} else {
			says := "no thread serving the disk is blocked"
			if u := unplaced(look.Blocked); len(u) > 0 {
				// Not counted for a disk that is not aio=threads (its zero
				// writes and discards alone go to the pool): said, since
				// one of them may be this disk's.
				says += fmt.Sprintf("; %d pool worker(s) in state D whose disk could not be read (%s): this disk's zero writes and discards run there too", len(u), whyUnread(u))
			}
			v.Evidence = append(v.Evidence, Evidence{SourceThreads, says})
		}
	}
	switch {
	case d.Dev == "":
	case v.InFlight == nil:
		v.Evidence = append(v.Evidence, Evidence{SourceDevice, d.Dev + ": not read"})
	case *v.InFlight > 0:
		outstanding = true
		v.Evidence = append(v.Evidence, Evidence{SourceDevice, fmt.Sprintf("%s has %d requests in flight", d.Dev, *v.InFlight)})
	default:
		v.Evidence = append(v.Evidence, Evidence{SourceDevice, d.Dev + " has no request in flight"})
	}
	if outstanding {
		v.Stalled, v.StalledSeconds = true, units.Round(idle.Seconds(), 1)
	}
	return v
}

// serving picks the blocked threads that serve d: its serving thread
// itself (a submission that blocks) and io_uring's workers of that thread
// (iou-wrk-<TID>), whatever they work on: disks that share a serving
// thread (several on the main loop) share it and its workers, and which
// of them a request is for, the node cannot tell. Any other thread counts
// where the file its system call works on is d's image or device (a pool
// worker in fallocate for a zero write or a discard, whatever d's aio);
// a pool worker whose file could not be read counts for an aio=threads
// disk, as every pool worker did before they could be placed.
func serving(d Disk, blocked []Thread) []Thread {
	out := []Thread{}
	iou := "iou-wrk-" + strconv.Itoa(d.ServingTID)
	for _, t := range blocked {
		switch {
		case t.TID == d.ServingTID || t.Comm == iou:
			out = append(out, t)
		case t.File != "":
			if d.names(t.File) {
				out = append(out, t)
			}
		case d.ThreadPool && t.Comm == poolComm:
			out = append(out, t)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TID < out[j].TID })
	return out
}

// unplaced are the pool workers in D whose file could not be read.
func unplaced(blocked []Thread) []Thread {
	var out []Thread
	for _, t := range blocked {
		if t.Comm == poolComm && t.File == "" {
			out = append(out, t)
		}
	}
	return out
}

// describe says which threads are blocked and where (wchan), what each
// placed on a file works on, and which pool workers were counted without
// knowing their disk.
func describe(ts []Thread) string {
	wchans := map[string]int{}
	for _, t := range ts {
		w := t.Wchan
		if w == "" || w == "0" {
			w = "unknown"
		}
		wchans[w]++
	}
	names := ts[0].Comm
	if len(ts) > 1 {
		names += fmt.Sprintf(" and %d more", len(ts)-1)
	}
	s := fmt.Sprintf("%d thread(s) serving the disk in state D (%s; wchan %s)", len(ts), names, counted(wchans))
	on := map[string]int{}
	var blind []Thread
	for _, t := range ts {
		switch {
		case t.File != "":
			on[fmt.Sprintf("%s(fd %d -> %s)", t.Call, *t.FD, t.File)]++
		case t.Comm == poolComm:
			blind = append(blind, t)
		}
	}
	if len(on) > 0 {
		s += "; " + counted(on)
	}
	if len(blind) > 0 {
		s += fmt.Sprintf("; %d pool worker(s) counted for the aio=threads disks, their own disk not read (%s)", len(blind), whyUnread(blind))
	}
	return s
}

// counted is "N in K" for each key, in key order.
func counted(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var at []string
	for _, k := range keys {
		at = append(at, fmt.Sprintf("%d in %s", m[k], k))
	}
	return strings.Join(at, ", ")
}

// whyUnread is why the threads' files are not known, each reason once,
// with how many threads it holds for when more than one.
func whyUnread(ts []Thread) string {
	why := map[string]int{}
	for _, t := range ts {
		w := t.Unread
		if w == "" {
			w = "not read"
		}
		why[w]++
	}
	keys := make([]string, 0, len(why))
	for k := range why {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for i, k := range keys {
		if why[k] > 1 {
			keys[i] = fmt.Sprintf("%s (%d threads)", k, why[k])
		}
	}
	return strings.Join(keys, "; ")
}

// ValidateAfter checks --stall-after as typed: at least MinAfter (0s is
// not taken for the default).
func ValidateAfter(d time.Duration) error {
	if d < MinAfter {
		return exitcode.Usagef("--stall-after %s: give at least %s", d, MinAfter)
	}
	if d > MaxAfter {
		return exitcode.Usagef("--stall-after %s: at most %s", d, units.Short(MaxAfter))
	}
	return nil
}
