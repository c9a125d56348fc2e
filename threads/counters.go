package threads

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/pvediskcheck/pvediskcheck/node"
)

// Counters are one thread's scheduler counters at one moment.
type Counters struct {
	TID int
	// Comm is the thread's name, as Linux cut it (15 characters); read
	// with Ticks and Start only where Read says.
	Comm string
	// RunNs is the time the thread ran on a CPU and WaitNs the time it was
	// runnable but waited for one, nanoseconds since it started
	// (/proc/PID/task/TID/schedstat; Documentation/scheduler/sched-stats.rst).
	RunNs, WaitNs uint64
	// HasSchedstat is false on a kernel without schedstat; CPU time then
	// comes from Ticks, and the wait is unknown.
	HasSchedstat bool
	// Ticks is user + system time in clock ticks (/proc/PID/task/TID/stat).
	Ticks uint64
	// Start is the thread's start time in clock ticks since boot: a thread
	// id the kernel gave to a new thread has another.
	Start uint64
}

// Reader reads thread counters below one procfs root, every file through
// node.ProcDir's ReadSmall (regular files in their tree only, bounded;
// off a real procfs within the node's timeout: a fixture tree's FIFO cannot hang
// top or the exporter).
type Reader struct {
	n node.Node
}

// NewReader reads below n's procfs (e.g. /proc, or a fixture tree).
func NewReader(n node.Node) (Reader, error) {
	st, err := os.Stat(n.Paths.Proc)
	if err == nil && !st.IsDir() {
		err = fmt.Errorf("%s is not a directory", n.Paths.Proc)
	}
	return Reader{n: n}, err
}

// Read returns the counters of the threads tids of process pid. A thread
// that has gone (or never was) is absent from the result, not an error: a
// VM that stops between two samples simply loses its threads.
//
// Every thread's schedstat is read (run and wait: all a usage needs); stat
// (name, start time, clock ticks) only for the main thread, whose start
// time tells a new process under a reused pid, and for threads without
// schedstat. A thread id the kernel gave to a new thread shows as counters
// that went backwards. top reads ~300 threads a second on a node of 50
// VMs: stat's 52 fields are the dearer half of the work.
func (r Reader) Read(pid int, tids []int) map[int]Counters {
	out := make(map[int]Counters, len(tids))
	task := r.n.OpenProcDir(filepath.Join(r.n.Paths.ProcPid(pid), "task"))
	defer task.Close()
	var buf [maxCounterFile]byte
	for _, tid := range tids {
		dir := strconv.Itoa(tid)
		c := Counters{TID: tid}
		if m, err := task.ReadSmall(context.Background(), dir+"/schedstat", buf[:]); err == nil {
			c.RunNs, c.WaitNs, c.HasSchedstat = parseSchedstat(buf[:m])
		}
		if tid == pid || !c.HasSchedstat {
			m, err := task.ReadSmall(context.Background(), dir+"/stat", buf[:])
			var ok bool
			if err == nil {
				c.Comm, c.Ticks, c.Start, ok = parseStat(buf[:m])
			}
			if !ok {
				continue
			}
		}
		out[tid] = c
	}
	return out
}

// maxCounterFile bounds a schedstat or stat file: stat's 52 fields of at
// most 20 digits and a 16-byte name are under 1,200 bytes.
const maxCounterFile = 2048

// parseSchedstat reads /proc/PID/task/TID/schedstat: run and wait time,
// nanoseconds, and the timeslices run.
func parseSchedstat(b []byte) (run, wait uint64, ok bool) {
	f := bytes.Fields(b)
	if len(f) < 3 {
		return 0, 0, false
	}
	run, err1 := strconv.ParseUint(string(f[0]), 10, 64)
	wait, err2 := strconv.ParseUint(string(f[1]), 10, 64)
	_, err3 := strconv.ParseUint(string(f[2]), 10, 64) // timeslices: a line that is not the kernel's is no reading
	return run, wait, err1 == nil && err2 == nil && err3 == nil
}

// parseStat reads /proc/PID/task/TID/stat (proc(5)): the name between the
// first "(" and the last ")" (a name may hold both), then from field 3
// (state) on: utime is field 14, stime 15, starttime 22.
func parseStat(b []byte) (comm string, ticks, start uint64, ok bool) {
	i, j := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if i < 0 || j < i {
		return "", 0, 0, false
	}
	f := bytes.Fields(b[j+1:])
	if len(f) < 20 {
		return "", 0, 0, false
	}
	utime, err1 := strconv.ParseUint(string(f[11]), 10, 64)
	stime, err2 := strconv.ParseUint(string(f[12]), 10, 64)
	start, err3 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil || err3 != nil {
		return "", 0, 0, false
	}
	return string(b[i+1 : j]), utime + stime, start, true
}

// CPUSeconds is the CPU time the thread has run since it started:
// schedstat's run time, or without schedstat its user and system clock
// ticks. A counter: it only grows while the thread lives.
func (c Counters) CPUSeconds() float64 {
	if c.HasSchedstat {
		return float64(c.RunNs) / 1e9
	}
	return float64(c.Ticks) / userHZ
}

// Usage is what a thread did over an interval.
type Usage struct {
	// CPUPct is the share of one core the thread ran: 100 is one core all
	// the time, which for a single-threaded event loop (main loop,
	// iothread) means it can take no more work.
	CPUPct float64
	// WaitPct is the share of the interval the thread was ready to run but
	// waited for a core (run-queue wait): a busy node, not a busy thread.
	// Nil without schedstat.
	WaitPct *float64
}

// userHZ is the clock tick of /proc/*/stat's times (USER_HZ, 100 on every
// Linux architecture Proxmox runs on).
const userHZ = 100

// UsageOf is the thread's usage between counters a and b taken seconds
// apart; ok is false when they are not the same thread (another start
// time), went backwards or seconds is not positive.
func UsageOf(a, b Counters, seconds float64) (u Usage, ok bool) {
	if seconds <= 0 || a.TID != b.TID || a.Start != b.Start || b.RunNs < a.RunNs || b.WaitNs < a.WaitNs || b.Ticks < a.Ticks {
		return Usage{}, false
	}
	if a.HasSchedstat && b.HasSchedstat {
		u.CPUPct = float64(b.RunNs-a.RunNs) / 1e9 / seconds * 100
		w := float64(b.WaitNs-a.WaitNs) / 1e9 / seconds * 100
		u.WaitPct = &w
		return u, true
	}
	u.CPUPct = float64(b.Ticks-a.Ticks) / userHZ / seconds * 100
	return u, true
}

// Held is Read for one process read at every sample (top): its task
// directory and each thread's counter files are opened once and read
// again in place (node.HeldDir), until Close; a file that cannot be held
// (a fixture tree) is read as Read reads it. The counters are the same as
// Read's. Not safe for concurrent use.
type Held struct {
	pid  int
	task *node.HeldDir
	buf  [maxCounterFile]byte
}

// Hold prepares the repeated reads of process pid's threads.
func (r Reader) Hold(pid int) *Held {
	return &Held{pid: pid, task: r.n.HoldProcDir(filepath.Join(r.n.Paths.ProcPid(pid), "task"))}
}

// Read returns the counters of threads tids, as Reader.Read does; the
// files of threads not asked for any more are closed. When the main
// thread's file held open can no longer be read, the directory is opened
// again, so a new process under the same pid is read as Reader.Read
// reads it (its start time tells it).
func (h *Held) Read(tids []int) map[int]Counters {
	held := h.task.Held() > 0
	out := h.readAll(tids)
	if _, ok := out[h.pid]; !ok && held {
		h.task.Reopen()
		out = h.readAll(tids)
	}
	h.task.Sweep()
	return out
}

func (h *Held) readAll(tids []int) map[int]Counters {
	out := make(map[int]Counters, len(tids))
	ctx := context.Background()
	for _, tid := range tids {
		dir := strconv.Itoa(tid)
		c := Counters{TID: tid}
		if m, err := h.task.ReadSmall(ctx, dir+"/schedstat", h.buf[:]); err == nil {
			c.RunNs, c.WaitNs, c.HasSchedstat = parseSchedstat(h.buf[:m])
		}
		if tid == h.pid || !c.HasSchedstat {
			m, err := h.task.ReadSmall(ctx, dir+"/stat", h.buf[:])
			var ok bool
			if err == nil {
				c.Comm, c.Ticks, c.Start, ok = parseStat(h.buf[:m])
			}
			if !ok {
				continue
			}
		}
		out[tid] = c
	}
	return out
}

// Close releases the directory and the files held.
func (h *Held) Close() { h.task.Close() }
