package stall

import (
	"bytes"
	"context"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/sampler"
)

// maxStat bounds one /proc/PID/task/TID/stat or wchan read (stat's 52
// fields and a 16-byte name are under 1,200 bytes).
const maxStat = 2048

// Read looks at QEMU process pid and the node devices devs: every thread's
// state (stat), the wchan of those in state D and what they work on (their
// system call and its descriptor's file: place), and each device's
// requests in flight. No QMP: procfs and sysfs only.
func Read(ctx context.Context, n node.Node, pid int, devs []string) Look {
	look := Look{InFlight: inFlight(n, devs)}
	look.Blocked, look.ThreadsErr = blocked(ctx, n, pid)
	return look
}

// inFlight reads each device's requests in flight (its stat's ninth
// field); a device that cannot be read is left out.
func inFlight(n node.Node, devs []string) map[string]int64 {
	out := map[string]int64{}
	h := sampler.Host{Proc: n.Paths.Proc, Sys: n.Paths.Sys}
	for _, d := range devs {
		if d == "" {
			continue
		}
		if st, err := h.BlockStatOf(d); err == nil {
			out[d] = st.InFlight
		}
	}
	return out
}

// blocked lists the threads of pid in state D with their wchan and, but
// for io_uring's workers, what they work on (place).
func blocked(ctx context.Context, n node.Node, pid int) ([]Thread, error) {
	taskDir := filepath.Join(n.Paths.ProcPid(pid), "task")
	task := n.OpenProcDir(taskDir)
	defer task.Close()
	out, _, err := blockedIn(ctx, n, pid, task, task.ReadSmall)
	return out, err
}

// blockedIn is blocked with the task directory open (task) and each
// thread's stat read through stat; mainUnread says the main thread was not
// listed or its stat could not be read (a directory held open belongs to
// the process it was opened in).
func blockedIn(ctx context.Context, n node.Node, pid int, task node.ProcDir, stat func(context.Context, string, []byte) (int, error)) (out []Thread, mainUnread bool, err error) {
	names, err := task.Names()
	if err != nil {
		return nil, false, err
	}
	var buf [maxStat]byte
	out = []Thread{}
	mainUnread = true
	for _, name := range names {
		tid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		m, err := stat(ctx, name+"/stat", buf[:])
		if err != nil {
			continue // gone since the listing
		}
		mainUnread = mainUnread && tid != pid
		if !inD(buf[:m]) {
			continue
		}
		comm, state, ok := ParseStat(buf[:m])
		if !ok || state != "D" {
			continue
		}
		t := Thread{TID: tid, Comm: comm, State: state}
		if m, err := task.ReadSmall(ctx, name+"/wchan", buf[:]); err == nil {
			t.Wchan = strings.TrimSpace(string(buf[:m]))
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TID < out[j].TID })
	place(ctx, n, pid, task, out)
	return out, mainUnread, nil
}

// inD says whether a stat line's state (the field after the name's last
// ")") may be D, before ParseStat copies anything out of it: most threads
// of a look are not.
func inD(b []byte) bool {
	j := bytes.LastIndexByte(b, ')')
	if j < 0 {
		return true // ParseStat decides
	}
	f := bytes.TrimLeft(b[j+1:], " \t\n")
	return len(f) == 0 || f[0] == 'D'
}

// ParseStat reads a thread's name and state from /proc/PID/task/TID/stat
// (proc(5): the name between the first "(" and the last ")", the state the
// next field).
func ParseStat(b []byte) (comm, state string, ok bool) {
	i, j := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if i < 0 || j < i {
		return "", "", false
	}
	f := bytes.Fields(b[j+1:])
	if len(f) == 0 {
		return "", "", false
	}
	return string(b[i+1 : j]), string(f[0]), true
}

// Disks is the rule's view of the running disks of set: which thread
// serves each (its iothread where the set was placed on QEMU's threads,
// else the main loop), whether it runs on the thread pool (aio=threads),
// the image or device QEMU opened and the node device under it (the set
// read with Layers).
func Disks(set *disk.Set) []Disk {
	var out []Disk
	for _, d := range set.Disks {
		g := d.Graph
		if g == nil || g.CDROM {
			continue
		}
		sd := Disk{ID: d.ID, ServingTID: g.ServingTID, ThreadPool: g.AIO == "threads", Dev: d.Dev}
		if d.Drive != nil {
			sd.Storage = d.Drive.StorageID()
		}
		if g.Path != "" {
			sd.Path = g.Path
		}
		out = append(out, sd)
	}
	return out
}

// Layers are what the rule reads of a running VM besides QEMU's counters:
// where its disks' threads are and the node devices under them.
const Layers = disk.Threads | disk.Devices

// Devices lists the node devices of disks.
func Devices(disks []Disk) []string {
	var out []string
	for _, d := range disks {
		if d.Dev != "" {
			out = append(out, d.Dev)
		}
	}
	return out
}

// Detect judges every disk of one VM from its query-blockstats answer:
// the node is read only when some disk has completed nothing for after
// (an idle disk's VM costs its thread listing; a busy one nothing). With
// confirm > 0, a disk found stalled is looked at again that much later and
// stays stalled only if the second look agrees: a request that just began
// after a long idle (a thread briefly in D) is not a stall.
func Detect(ctx context.Context, n node.Node, pid int, disks []Disk, stats map[string]qmp.BlockStats, after, confirm time.Duration) []Verdict {
	out := make([]Verdict, 0, len(disks))
	need := false
	for _, d := range disks {
		if Candidate(stats[d.ID], after) {
			need = true
		}
	}
	if !need {
		// The devices' in-flight counts only (one sysfs file each): the
		// exporter's in-flight series; no thread is read.
		look := Look{InFlight: inFlight(n, Devices(disks))}
		for _, d := range disks {
			out = append(out, Judge(d, stats[d.ID], look, after))
		}
		return out
	}
	look := Read(ctx, n, pid, Devices(disks))
	found := false
	for _, d := range disks {
		v := Judge(d, stats[d.ID], look, after)
		found = found || v.Stalled
		out = append(out, v)
	}
	if !found || confirm <= 0 {
		return out
	}
	select {
	case <-ctx.Done():
		return out
	case <-time.After(confirm):
	}
	again := Read(ctx, n, pid, Devices(disks))
	for i, d := range disks {
		if !out[i].Stalled {
			continue
		}
		b := stats[d.ID]
		b.IdleTimeNs += int64(confirm)
		// The first look's figures stand (QEMU was asked then); the
		// second only confirms that the requests are still outstanding.
		if v := Judge(d, b, again, after); !v.Stalled {
			out[i].Stalled, out[i].StalledSeconds, out[i].Blocked, out[i].InFlight = false, 0, v.Blocked, v.InFlight
			out[i].Evidence = append(out[i].Evidence, Evidence{SourceThreads, "a second look " + confirm.String() + " later found nothing outstanding"})
		} else {
			out[i].Evidence = append(out[i].Evidence, Evidence{SourceThreads, "still outstanding " + confirm.String() + " later"})
		}
	}
	return out
}

// Detector is Detect for a sampler that asks every interval (top): a VM's
// threads are read at most every After/2 while none of its disks is
// stalled (an idle disk is a candidate at every sample, and its VM's
// threads cost ~12 µs each to read), and at every sample once one is, so
// that the stall clears as soon as it ends, and at once when a disk
// newly becomes idle past After. A stall that begins on a disk already
// idle that long is seen within After/2 plus one interval. The devices'
// in-flight counts are read every time (one file each). One per QEMU
// process: Place hands it the process's disks as the sampler placed them
// on its threads, so a sample hands it QEMU's counters alone; the
// threads' stat files stay open between looks (node.HeldDir) until Close.
type Detector struct {
	n     node.Node
	pid   int
	disks []Disk
	devs  []string
	task  *node.HeldDir

	look    Look
	at      time.Time
	cands   string // the candidate disks of the last read
	stalled bool
}

// Place prepares the detector for the disks of QEMU process pid, at each
// placement of the disks on the process's threads (Disks).
func (dt *Detector) Place(n node.Node, pid int, disks []Disk) {
	if dt.task != nil && dt.pid != pid {
		dt.task.Close()
		dt.task = nil
	}
	if dt.task == nil {
		dt.task = n.HoldProcDir(filepath.Join(n.Paths.ProcPid(pid), "task"))
	}
	dt.n, dt.pid, dt.disks, dt.devs = n, pid, disks, Devices(disks)
}

// Close releases the files held open.
func (dt *Detector) Close() {
	if dt.task != nil {
		dt.task.Close()
		dt.task = nil
	}
}

// Detect judges the placed disks from the process's query-blockstats
// answer as Detect does, reusing the last thread read when it is recent
// enough. Nothing placed: no verdict.
func (dt *Detector) Detect(ctx context.Context, stats map[string]qmp.BlockStats, after time.Duration) []Verdict {
	var cands []string
	for _, d := range dt.disks {
		if Candidate(stats[d.ID], after) {
			cands = append(cands, d.ID)
		}
	}
	key := strings.Join(cands, " ")
	look := Look{InFlight: inFlight(dt.n, dt.devs)}
	if need := len(cands) > 0; need {
		// A disk newly idle past after is read at once: a busy disk that
		// stops is reported within after plus one interval.
		if dt.stalled || dt.at.IsZero() || key != dt.cands || time.Since(dt.at) >= after/2 {
			dt.look.Blocked, dt.look.ThreadsErr = dt.blocked(ctx)
			dt.at = time.Now()
		}
		look.Blocked, look.ThreadsErr = dt.look.Blocked, dt.look.ThreadsErr
		dt.cands = key
	} else {
		dt.at, dt.cands = time.Time{}, "" // every disk completing: the next candidate is read at once
	}
	out := make([]Verdict, 0, len(dt.disks))
	dt.stalled = false
	for _, d := range dt.disks {
		v := Judge(d, stats[d.ID], look, after)
		dt.stalled = dt.stalled || v.Stalled
		out = append(out, v)
	}
	return out
}

// blocked is the package's blocked through the files held open; the
// directory is opened again when it no longer reads the main thread (a
// new process under the same pid).
func (dt *Detector) blocked(ctx context.Context) ([]Thread, error) {
	out, mainUnread, err := blockedIn(ctx, dt.n, dt.pid, dt.task.Dir(), dt.task.ReadSmall)
	if err == nil && mainUnread {
		dt.task.Reopen()
		out, _, err = blockedIn(ctx, dt.n, dt.pid, dt.task.Dir(), dt.task.ReadSmall)
	}
	dt.task.Sweep()
	return out, err
}
