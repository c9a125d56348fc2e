// Package top watches the disks of the node's running VMs live. Per disk and
// interval: what the guest asks of it (IOPS, MiB/s, mean latency, queue
// depth, failed requests), how much of its running I/O limit it uses, a
// block job on it, the CPU of the QEMU thread that serves it (its iothread
// or the main loop) and, where the volume is a block device on the node,
// that device's own latency; per VM the main loop's and the vCPUs' CPU.
//
// Load on the VMs: one short QMP exchange per VM and interval, never a
// socket held between samples (pvestatd shares it), with a constant number
// of commands whatever the number of disks: query-blockstats,
// query-block-jobs and the running limits (query-block under -drive, one
// qom-list-get over the throttle groups on QEMU >= 10.1). Thread ids are
// asked when a VM is first seen and then every ThreadMapRefresh.
package top

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/layers"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/queues"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/stall"
	"github.com/pvediskcheck/pvediskcheck/threads"
	"github.com/pvediskcheck/pvediskcheck/units"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// Options say what to watch and how.
type Options struct {
	VMIDs []int // the VMs to watch; none: every running VM of the node
	// Interval is the time between samples, at least MinInterval:
	// Validate (and so Run) refuses less, 0 too (an --interval 0s typed is
	// not the default). A Monitor made without them samples at
	// DefaultInterval for 0.
	Interval time.Duration
	Count    int     // samples to deliver; 0 means until ctx ends
	Sort     SortKey // row order; "" means SortBusy
	// Guest asks each VM's guest agent (agent: 1) once for its disks and
	// mount points, in the background; the answer is kept for the run.
	Guest bool
	// OnSample gets every sample; an error ends Run with that error
	// (ErrStop ends it cleanly).
	OnSample func(Sample) error
	// StallAfter is --stall-after: a disk with requests outstanding that
	// completes nothing for this long is stalled (package stall); 0 means
	// stall.DefaultAfter.
	StallAfter time.Duration
	// Histogram sets QEMU's latency histograms on the disks watched
	// (package latency: never replacing one found) for p50/p95/p99 per
	// interval; Run clears those it set when it ends.
	Histogram bool
	// Layers splits each disk's latency over the guest, QEMU and the node
	// device (package layers) and says which adds most; it reads the
	// guest's diskstats through its agent, one exchange per VM and
	// sample, once the agent has named the disks' devices (Guest: without
	// it the guest layer is unknown). Off: the agent is asked nothing for
	// it.
	Layers bool
}

// ErrStop, returned by OnSample, ends Run without an error.
var ErrStop = errors.New("stop")

const (
	// DefaultInterval is one sample per second, as top and iostat do.
	DefaultInterval = time.Second
	// MaxInterval bounds --interval: top --interval 1h1000000h (114
	// years) was taken and hung; an hour between samples is as slow as a
	// live view gets.
	MaxInterval = time.Hour
	// MaxCount bounds --count: a million samples (11 days at 1 s).
	MaxCount = 1_000_000
	// MinInterval: each sample is one QMP exchange per VM of a few
	// commands (~1 ms each in QEMU's main loop); ten per second is the
	// most a shared socket should see from a monitoring tool.
	MinInterval = 100 * time.Millisecond
	// ThreadMapRefresh: iothreads and vCPUs only change by hot-plug, so
	// their thread ids are asked for again this often (and at the next
	// sample when a thread read before has gone).
	ThreadMapRefresh = 30 * time.Second
	// GuestRetry: a guest agent that did not answer is asked again after
	// this long (it may still be booting).
	GuestRetry = time.Minute
	// parallel bounds the VMs sampled at once (8 took the least CPU per
	// sample of 1, 2, 4, 8 and 16 on 50 VMs: fewer goroutines park and wake
	// more often on their sockets).
	parallel = 8
)

// Validate checks the options as typed: the interval, the count, the sort
// key and that every VMID named has a config on this node.
func Validate(p node.Paths, o Options) error {
	if o.Interval < MinInterval {
		return exitcode.Usagef("--interval %s: give at least %s", o.Interval, MinInterval)
	}
	if o.StallAfter != 0 {
		if err := stall.ValidateAfter(o.StallAfter); err != nil {
			return err
		}
	}
	if o.Interval > MaxInterval {
		return exitcode.Usagef("--interval %s: at most %s", o.Interval, units.Short(MaxInterval))
	}
	if o.Count < 0 {
		return exitcode.Usagef("--count %d: give a positive number (0: until interrupted)", o.Count)
	}
	if o.Count > MaxCount {
		return exitcode.Usagef("--count %d: at most %d", o.Count, MaxCount)
	}
	if o.Sort != "" {
		if _, err := ParseSortKey(string(o.Sort)); err != nil {
			return err
		}
	}
	for _, id := range o.VMIDs {
		if _, err := os.Stat(p.VMConfig(id)); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("VM %d: %w (no %s)", id, vm.ErrNoConfig, p.VMConfig(id))
		}
	}
	return nil
}

// Run samples every Interval and hands each sample to OnSample, the first
// one interval after the start (rates need two samples), until Count
// samples were delivered or ctx ends (then it returns nil).
func Run(ctx context.Context, n node.Node, o Options) (err error) {
	if err := Validate(n.Paths, o); err != nil {
		return err
	}
	m, err := NewMonitor(n, o)
	if err != nil {
		return err
	}
	defer func() {
		m.Close()
		if rerr := m.ReleaseHistograms(); err == nil {
			err = rerr
		}
	}()
	delivered := 0
	_, err = sampler.Schedule(ctx, m.interval(), 0, func(k int, _ bool) (bool, error) {
		s := m.Sample(ctx)
		if ctx.Err() != nil || k == 0 {
			return ctx.Err() != nil, nil
		}
		if o.OnSample != nil {
			if err := o.OnSample(s); errors.Is(err, ErrStop) {
				return true, nil
			} else if err != nil {
				return true, err
			}
		}
		delivered++
		return o.Count > 0 && delivered >= o.Count, nil
	})
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// Monitor keeps what one run knows about each VM between samples.
type Monitor struct {
	n       node.Node
	o       Options
	host    sampler.Host
	threads threads.Reader
	vms     map[int]*vmState
	hist    *latency.Tracker // with Options.Histogram
	// shared are the devices under file volumes' filesystems read this
	// sample (Options.Layers): one read per device and sample, however
	// many disks of however many VMs are files on it.
	shared fsDevices

	// guest agent lookups run in the background; mu guards their results.
	mu     sync.Mutex
	wg     sync.WaitGroup
	ctx    context.Context
	cancel context.CancelFunc
}

// NewMonitor prepares a run; Close ends it.
func NewMonitor(n node.Node, o Options) (*Monitor, error) {
	tr, err := threads.NewReader(n)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Unreachable, "procfs", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Monitor{n: n, o: o, host: sampler.Host{Proc: n.Paths.Proc, Sys: n.Paths.Sys}, threads: tr,
		vms: map[int]*vmState{}, ctx: ctx, cancel: cancel}
	m.hist = latency.Start(o.Histogram, n.Timeout)
	return m, nil
}

// ReleaseHistograms clears the latency histograms the run set (one
// exchange per VM, within twice the node's timeout even when the run's
// context has ended: it runs on SIGINT and SIGTERM too).
func (m *Monitor) ReleaseHistograms() error {
	return m.hist.End(context.Background())
}

// Close stops the background guest agent lookups and waits for them, and
// releases the thread counter files held open.
func (m *Monitor) Close() {
	m.cancel()
	m.wg.Wait()
	for id := range m.vms {
		m.drop(id)
	}
}

// drop forgets VM id's process (stopped, or another one under its VMID):
// its thread counter files are closed.
func (m *Monitor) drop(id int) {
	if st := m.vms[id]; st != nil {
		st.counters.Close()
		st.stall.Close()
		delete(m.vms, id)
	}
}

func (m *Monitor) interval() time.Duration {
	if m.o.Interval <= 0 {
		return DefaultInterval
	}
	return m.o.Interval
}

// patience is how long one VM's exchange may wait for a busy socket: most
// of the interval, so the next sample starts on time.
func (m *Monitor) patience() time.Duration {
	return min(m.interval()*3/4, m.n.Timeout)
}

// vmState is what the run knows about one running QEMU process.
type vmState struct {
	vmid int
	pid  int
	// pidFile is the pid file as it was when pid was read from it: read
	// again only once it changes.
	pidFile os.FileInfo
	start   uint64 // the main thread's start time: a new process under a reused pid has another
	v       *vm.VM
	name    string
	// set are the disks watched (the running ones but empty CD-ROM
	// drives), resolved once per process with their node devices; placed
	// on their threads at each thread map refresh, their queue counts read
	// in the first sample, the guest agent's view of them once it answers.
	set *disk.Set

	// counters holds the process's thread counter files open between
	// samples (threads.Held): one pread per file and sample.
	counters *threads.Held

	tmapAt time.Time
	// stall is the stall rule for the process, handed the disks as
	// placed at each thread map refresh (stall.Disks).
	stall stall.Detector

	limits map[string]qemuserver.Limits // running limits by disk, as the samples read them
	turn   vm.LimitTurn                 // whose group limits are read next (QEMU < 10.1)
	// What the exchanges with the process add, fixed when it is first
	// seen: qom, the QOM properties of the VirtIO disks' queue counts (read
	// in the first sample alone: queuesRead), and prepare, the latency
	// histograms' set-up (Options.Histogram; nothing after the first).
	qom        []vm.QOMRef
	queuesRead bool
	prepare    func(vm.Change, *vm.Answer) error

	prev *snapshot // the last answer, what the next one is compared with

	backups map[string]*latency.Watch // by disk: write latency before and during a backup job
	// fleecing is, by backup job, the fleecing images the VM's config
	// recorded for it (read once per job: vzdump writes them when the
	// backup starts, after the config was loaded).
	fleecing map[string][]string

	agent    bool              // agent: 1 in the config
	pci      map[string]string // query-pci, for placing the agent's disks
	guest    map[string]guestdisk.Seen
	guestAt  time.Time // last time the agent was asked
	guestRun bool      // a lookup is running
	// guestStats reads the guest's diskstats (Options.Layers, agent: 1).
	guestStats *layers.GuestReader
	// guestSkip is the lookup not asked because a backup held the VM.
	guestSkip *vm.AgentSkip

	// freeze is the guest's freeze state (guest-fsfreeze-status), asked
	// at most once per --stall-after (freezeAt: when last decided), in the
	// background (freezeRun), never while a backup holds the VM.
	freeze    *vm.Freeze
	freezeAt  time.Time
	freezeRun bool
}

// snapshot is one VM's counters at one moment.
type snapshot struct {
	At        time.Time // QEMU's query-blockstats (midpoint of the command)
	Stats     map[string]qmp.BlockStats
	Jobs      map[string][]string       // disk -> job types
	JobInfo   map[string][]qmp.BlockJob // disk -> its jobs (progress, for the backup impact)
	AllJobs   []qmp.BlockJob            // every job QEMU lists (the backup hold)
	Limits    map[string]qemuserver.Limits
	ThreadsAt time.Time
	Threads   map[int]threads.Counters
	DevicesAt time.Time
	Devices   map[string]sampler.BlockStat // disk -> node device counters
	Stalls    map[string]stall.Verdict     // disk -> the stall rule's verdict
	// FSDevices are, with Options.Layers, the counters of the device
	// under a file volume's filesystem (disk.Disk.FSDev), by disk.
	FSDevices map[string]sampler.BlockStat
	// Guest is, with Options.Layers, the guest's diskstats by its kernel
	// names; nil with GuestWhy saying why.
	Guest    map[string]sampler.BlockStat
	GuestWhy string
	// Left are the latency histograms of pvediskcheck's that this run
	// did not set (latency.Leftover), from Stats.
	Left []latency.Leftover
	// Cgroup is the VM's cgroup reading (dirty, writeback, io.pressure);
	// nil in snapshots made without it.
	Cgroup *sampler.Cgroup
}

// Sample takes one sample of every VM watched. Rows and rates need a
// previous sample of the same process: a VM seen for the first time is
// listed as New, without rows.
func (m *Monitor) Sample(ctx context.Context) Sample {
	now := time.Now()
	out := Sample{Time: now, IntervalS: m.interval().Seconds(), Disks: []Disk{}, VMs: []VM{}}
	m.shared.reset()
	var work []*vmState
	seen := map[int]bool{}
	for _, id := range m.targets() {
		seen[id] = true
		st, err := m.discover(id)
		switch {
		case err != nil:
			out.VMs = append(out.VMs, VM{VMID: id, Status: Unreachable, Error: err.Error(), IOThreads: []IOThread{}})
		case st == nil && len(m.o.VMIDs) > 0:
			out.VMs = append(out.VMs, VM{VMID: id, Status: Stopped, IOThreads: []IOThread{}})
		case st != nil:
			work = append(work, st)
		}
	}
	for id := range m.vms {
		if !seen[id] {
			m.drop(id) // stopped: it disappears
			if m.hist != nil {
				m.hist.Forget(id)
			}
		}
	}
	type result struct {
		snap *snapshot
		err  error
	}
	res := make([]result, len(work))
	node.Each(len(work), parallel, func(i int) { res[i].snap, res[i].err = m.sampleVM(ctx, work[i]) })
	for i, st := range work {
		snap, err := res[i].snap, res[i].err
		switch {
		case errors.Is(err, qmp.ErrNoSocket) || errors.Is(err, os.ErrNotExist):
			m.drop(st.vmid) // stopped between discovery and exchange
			if len(m.o.VMIDs) > 0 {
				out.VMs = append(out.VMs, VM{VMID: st.vmid, Name: st.name, Status: Stopped, IOThreads: []IOThread{}})
			}
			continue
		case errors.Is(err, qmp.ErrBusy):
			out.VMs = append(out.VMs, VM{VMID: st.vmid, Name: st.name, PID: st.pid, Status: Busy, IOThreads: []IOThread{},
				Error: fmt.Sprintf("QMP socket busy for %s (another client holds it)", m.patience())})
			continue
		case err != nil:
			out.VMs = append(out.VMs, VM{VMID: st.vmid, Name: st.name, PID: st.pid, Status: Unreachable, Error: err.Error(), IOThreads: []IOThread{}})
			continue
		}
		if main, ok := snap.Threads[st.pid]; ok && main.Start != st.start {
			st.prev = nil // another process under the same pid
			st.start = main.Start
		}
		m.mu.Lock()
		view := st.view()
		m.mu.Unlock()
		view.Histogram = m.hist != nil
		view.Layers = m.o.Layers
		if st.prev == nil {
			out.VMs = append(out.VMs, VM{VMID: st.vmid, Name: st.name, PID: st.pid, Status: New, IOThreads: []IOThread{}})
		} else {
			row, disks := assemble(view, st.prev, snap)
			st.attachBackups(disks, snap, func() []string { return m.fleecingImages(st) })
			out.VMs = append(out.VMs, row)
			out.Disks = append(out.Disks, disks...)
		}
		if st.prev == nil {
			st.attachBackups(nil, snap, nil) // the first sample starts the baseline
		}
		out.HistogramsLeft = append(out.HistogramsLeft, snap.Left...)
		st.prev = snap
		hold := m.holdOnce(st)
		m.askGuest(st, hold)
		m.askFreeze(st, hold)
		if len(out.VMs) > 0 && out.VMs[len(out.VMs)-1].VMID == st.vmid {
			m.mu.Lock()
			vr := &out.VMs[len(out.VMs)-1]
			vr.GuestFreeze = st.freeze
			for _, sk := range []*vm.AgentSkip{st.guestSkip, st.freeze.Skip()} {
				if sk != nil {
					vr.AgentNotAsked = append(vr.AgentNotAsked, *sk)
				}
			}
			m.mu.Unlock()
		}
	}
	sort.Slice(out.VMs, func(i, j int) bool { return out.VMs[i].VMID < out.VMs[j].VMID })
	key := m.o.Sort
	if key == "" {
		key = SortBusy
	}
	Sort(out.Disks, key)
	out.Findings = Judge(out)
	if m.hist != nil {
		out.Histograms = m.hist.Notes()
	}
	return out
}

// targets lists the VMIDs to look at: those named, or every VM with a pid
// file in /var/run/qemu-server (a tmpfs: no read of /etc/pve per sample).
func (m *Monitor) targets() []int {
	if len(m.o.VMIDs) > 0 {
		return m.o.VMIDs
	}
	ents, err := os.ReadDir(m.n.Paths.RunDir())
	if err != nil {
		return nil
	}
	var ids []int
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".pid")
		if !ok {
			continue
		}
		if id, err := qemuserver.ParseVMID(name); err == nil {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	return ids
}

// discover returns the state of VM id when it runs (nil when not),
// loading its config and command line when its QEMU process is new.
func (m *Monitor) discover(id int) (*vmState, error) {
	// The pid file is read again only when it changed since it was read
	// (RunDir is a tmpfs: its stat does not hang, as targets' listing).
	path := m.n.Paths.PidFile(id)
	fi, _ := os.Stat(path)
	st := m.vms[id]
	pid := 0
	if st != nil && fi != nil && st.pidFile != nil && os.SameFile(fi, st.pidFile) && fi.ModTime().Equal(st.pidFile.ModTime()) && fi.Size() == st.pidFile.Size() {
		pid = st.pid
	} else if pid = m.readPid(path); pid > 0 && st != nil && st.pid == pid {
		st.pidFile = fi
	}
	if pid <= 0 {
		return nil, nil
	}
	if st != nil && st.pid == pid {
		if _, err := os.Stat(m.n.Paths.ProcPid(pid)); err == nil {
			return st, nil
		}
		return nil, nil
	}
	v, err := vm.Load(m.ctx, m.n, id)
	if errors.Is(err, vm.ErrNoConfig) {
		return nil, nil // a pid file left behind by a VM that is gone
	} else if err != nil {
		return nil, err
	}
	m.drop(id) // a new process, or none
	if !v.Running {
		return nil, nil
	}
	st = &vmState{vmid: id, pid: v.Pid, v: v, name: v.Config.Main["name"], agent: guestdisk.AgentEnabled(v.Config.Main["agent"]),
		counters: m.threads.Hold(v.Pid)}
	if v.Pid == pid {
		st.pidFile = fi
	}
	if c := st.counters.Read([]int{v.Pid}); len(c) > 0 {
		st.start = c[v.Pid].Start
	}
	var watched []*vm.Disk
	for _, d := range v.Disks {
		if d.Running != nil && !(d.Drive != nil && d.Drive.IsCDROM() && d.Drive.IsNone()) {
			watched = append(watched, d)
		}
	}
	// The VM's cgroup is found once per process (Cgroup); each sample
	// reads its files (snapshot.Cgroup).
	st.set = disk.Resolve(m.ctx, m.n, v, watched, disk.Devices|disk.Cgroup, disk.Options{})
	for _, d := range st.set.Disks {
		if c := queues.Of(v, d.Disk); c != nil && c.Object != "" {
			d.Queues = c
		}
	}
	// Fixed when QEMU realized the devices: read once per process.
	st.qom = queues.Refs(st.queueCounts())
	st.prepare = m.hist.Hook(v, m.patience(), st.ids())
	m.vms[id] = st
	return st, nil
}

// readPid is the pid in a pid file; 0 when there is none to read (a pid
// file that is not a regular file, or hangs, is no running VM either).
func (m *Monitor) readPid(path string) int {
	b, err := m.n.ReadFile(m.ctx, path)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// sampleVM takes one snapshot of a VM: one QMP exchange (vm.Ask), then
// its threads' and node devices' counters.
func (m *Monitor) sampleVM(ctx context.Context, st *vmState) (*snapshot, error) {
	snap := &snapshot{Stats: map[string]qmp.BlockStats{}, Jobs: map[string][]string{}, Limits: map[string]qemuserver.Limits{}}
	needMap := st.tmapAt.IsZero() || time.Since(st.tmapAt) >= ThreadMapRefresh
	needPCI := m.o.Guest && st.agent && st.pci == nil
	q := vm.Query{Need: vm.NeedStats | vm.NeedJobs | vm.NeedLimits, LimitDisks: st.ids(), Turn: &st.turn}
	if needMap {
		q.Need |= vm.NeedThreads
	}
	if needPCI {
		q.Need |= vm.NeedPCI
	}
	if !st.queuesRead {
		q.QOM = st.qom
	}
	q.Then = st.prepare
	guestDone := m.readGuest(ctx, st, snap)
	a, err := st.v.Ask(ctx, m.patience(), q)
	<-guestDone
	if err != nil {
		return nil, err
	}
	if !st.queuesRead {
		queues.Apply(st.queueCounts(), a.QOM)
		st.queuesRead = true
	}
	snap.At, snap.Stats, snap.Jobs, snap.JobInfo, snap.AllJobs = a.At, a.Stats, a.Jobs, a.JobInfo, a.AllJobs
	snap.Left = m.hist.Leftovers(st.vmid, st.pid, st.v.QMPSocket(), a.Stats)
	if st.limits == nil {
		st.limits = map[string]qemuserver.Limits{}
	}
	for _, id := range a.LimitsRead {
		if l, ok := a.Limits[id]; ok {
			st.limits[id] = l
		} else {
			delete(st.limits, id)
		}
	}
	if needMap {
		st.set.PlaceThreads(a.Threads)
		st.tmapAt = time.Now()
		st.stall.Place(m.n, st.pid, stall.Disks(st.set))
	}
	if needPCI {
		m.mu.Lock()
		st.pci = a.PCI
		m.mu.Unlock()
	}
	for id, l := range st.limits {
		snap.Limits[id] = l
	}
	snap.Threads, snap.ThreadsAt = st.counters.Read(st.set.Threads.TIDs()), time.Now()
	if _, ok := snap.Threads[st.pid]; !ok {
		return nil, fmt.Errorf("%w: QEMU process %d has gone", os.ErrNotExist, st.pid)
	}
	if st.prev != nil {
		for tid := range st.prev.Threads {
			if _, ok := snap.Threads[tid]; !ok {
				st.tmapAt = time.Time{} // a thread has gone (unplugged): ask again next time
				break
			}
		}
	}
	snap.Devices = map[string]sampler.BlockStat{}
	for _, d := range st.set.Disks {
		if d.Dev == "" {
			continue
		}
		if bs, err := m.host.BlockStatOf(d.Dev); err == nil {
			snap.Devices[d.ID] = bs
		}
	}
	if m.o.Layers {
		snap.FSDevices = map[string]sampler.BlockStat{}
		for _, d := range st.set.Disks {
			if d.FSDev == "" {
				continue
			}
			if bs, ok := m.shared.stat(m.host, d.FSDev); ok {
				snap.FSDevices[d.ID] = bs
			}
		}
	}
	snap.DevicesAt = time.Now()
	if needMap && st.set.CgroupDir.Unmeasured != "" {
		// Looked for again with the thread map: a QEMU moved into its
		// scope after top first saw it (or a scope made late) is found.
		st.set.CgroupDir = sampler.FindCgroup(ctx, m.n, st.vmid, st.pid)
	}
	snap.Cgroup = sampler.ReadCgroup(ctx, m.n, st.set.CgroupDir, false)
	snap.Stalls = map[string]stall.Verdict{}
	for _, v := range st.stall.Detect(ctx, snap.Stats, m.stallAfter()) {
		snap.Stalls[v.Disk] = v
	}
	return snap, nil
}

// readGuest reads the guest's diskstats into snap in the background, with
// Options.Layers, while the QMP exchange runs; the channel closes when it
// is done. The agent is asked once the lookup of its disks has named
// their devices and while no lookup runs: one agent exchange per VM and
// sample at most.
func (m *Monitor) readGuest(ctx context.Context, st *vmState, snap *snapshot) <-chan struct{} {
	done := make(chan struct{})
	if !m.o.Layers {
		close(done)
		return done
	}
	m.mu.Lock()
	ready := st.guest != nil && !st.guestRun
	m.mu.Unlock()
	switch {
	case !m.o.Guest:
		snap.GuestWhy = "the guest agent is not asked (--no-agent)"
	case !st.agent:
		snap.GuestWhy = "no guest agent (agent: 0 in the VM's config)"
	case !ready:
		snap.GuestWhy = "the guest agent has not named the disks' devices yet"
	}
	if snap.GuestWhy != "" {
		close(done)
		return done
	}
	// While a backup holds the VM the agent is left alone (vm.BackupHolds:
	// the config's lock read again, the last sample's block jobs; this
	// sample's exchange runs meanwhile).
	var jobs []qmp.BlockJob
	if st.prev != nil {
		jobs = st.prev.AllJobs
	}
	if h := st.v.BackupHoldWith(ctx, m.n, jobs); h != nil {
		snap.GuestWhy = "the guest agent is not asked for the guest's diskstats (guest-file-open, guest-file-read): " + h.Why()
		close(done)
		return done
	}
	if st.guestStats == nil {
		ag, _ := st.v.AgentUnless(nil, m.patience(), "guest-file-open, guest-file-read", "the guest's diskstats")
		st.guestStats = &layers.GuestReader{Agent: *ag}
	}
	go func() {
		defer close(done)
		actx, cancel := context.WithTimeout(ctx, m.patience())
		defer cancel()
		g, _, err := st.guestStats.Read(actx)
		if err != nil {
			snap.GuestWhy = err.Error()
			return
		}
		snap.Guest = g
	}()
	return done
}

func (m *Monitor) stallAfter() time.Duration {
	if m.o.StallAfter <= 0 {
		return stall.DefaultAfter
	}
	return m.o.StallAfter
}

// fleecingImages reads the VM's config again for the fleecing images it
// records now ([special:fleecing]); nil when it cannot be read.
func (m *Monitor) fleecingImages(st *vmState) []string {
	c, err := vm.ReadConfig(m.ctx, m.n, st.v.Config.Path, st.vmid)
	if err != nil {
		return nil
	}
	return c.FleecingImages
}

// attachBackups feeds each disk's write counters and backup job of snap to
// its latency.Watch and puts the impact on the disk's row (rows may be nil);
// a backup with fleecing gets the images the config records for it
// (images, called once per job; nil: not read).
func (st *vmState) attachBackups(rows []Disk, snap *snapshot, images func() []string) {
	if st.backups == nil {
		st.backups = map[string]*latency.Watch{}
	}
	if st.fleecing == nil {
		st.fleecing = map[string][]string{}
	}
	for _, d := range st.set.Disks {
		b, ok := snap.Stats[d.ID]
		if !ok {
			continue
		}
		w := st.backups[d.ID]
		if w == nil {
			w = &latency.Watch{}
			st.backups[d.ID] = w
		}
		var job *qmp.BlockJob
		for _, j := range snap.JobInfo[d.ID] {
			if latency.IsBackup(j) {
				job = &j
				break
			}
		}
		im := w.Observe(snap.At, b, job)
		if im != nil && im.Fleecing != nil && *im.Fleecing && images != nil {
			imgs, ok := st.fleecing[job.ID]
			if !ok {
				imgs = images()
				st.fleecing[job.ID] = imgs
			}
			im.FleecingImages = imgs
		}
		for i := range rows {
			if rows[i].Disk == d.ID {
				rows[i].Backup = im
			}
		}
	}
}

// ids are the disks watched, by id: those whose running limits are read
// (vm.Ask's rules: every disk watched that has throttling) and whose
// histograms are set.
func (st *vmState) ids() []string {
	ids := make([]string, 0, len(st.set.Disks))
	for _, d := range st.set.Disks {
		ids = append(ids, d.ID)
	}
	return ids
}

// queueCounts are the watched disks' queue counts by disk id (the VirtIO
// disks' with a running count to read).
func (st *vmState) queueCounts() map[string]*queues.Count {
	out := map[string]*queues.Count{}
	for _, d := range st.set.Disks {
		if d.Queues != nil {
			out[d.ID] = d.Queues
		}
	}
	return out
}

// holdOnce decides, at most once per sample of st and only when an agent
// exchange asks for it, whether a backup holds the VM (vm.VM.BackupHold:
// the config's lock read again, the block jobs of the sample just taken).
// Called between samples, where no exchange of st runs.
func (m *Monitor) holdOnce(st *vmState) func() *vm.BackupHold {
	var h *vm.BackupHold
	done := false
	return func() *vm.BackupHold {
		if !done {
			h, done = st.v.BackupHoldWith(m.ctx, m.n, st.prev.AllJobs), true
		}
		return h
	}
}

// askFreeze starts a background guest-fsfreeze-status for st when one is
// due (once per --stall-after, never per sample), unless a backup holds the
// VM; a frozen guest's backup is looked at again at every sample, so its
// job's progress is current.
func (m *Monitor) askFreeze(st *vmState, hold func() *vm.BackupHold) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if st.freeze != nil && st.freeze.State == vm.Frozen {
		f := *st.freeze
		m.mu.Unlock()
		f.Backup = hold()
		m.mu.Lock()
		st.freeze = &f
	}
	if !st.agent || st.freezeRun || !st.freezeAt.IsZero() && time.Since(st.freezeAt) < m.stallAfter() {
		return
	}
	st.freezeAt = time.Now()
	m.mu.Unlock()
	agent, f := st.v.FreezeAgent(m.n.Timeout, hold)
	m.mu.Lock()
	if agent == nil {
		st.freeze = f
		return
	}
	st.freezeRun = true
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		f := vm.ReadFreeze(m.ctx, *agent)
		m.mu.Lock()
		defer m.mu.Unlock()
		st.freezeRun = false
		st.freeze = f
	}()
}

// askGuest starts a background guest agent lookup for st when one is due,
// unless a backup holds the VM (then guestSkip says so, and it is asked
// again after GuestRetry).
func (m *Monitor) askGuest(st *vmState, hold func() *vm.BackupHold) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.o.Guest || !st.agent || st.pci == nil || st.guest != nil || st.guestRun ||
		!st.guestAt.IsZero() && time.Since(st.guestAt) < GuestRetry {
		return
	}
	st.guestAt = time.Now()
	m.mu.Unlock()
	ag, skip := st.v.AgentUnless(hold(), m.n.Timeout, guestdisk.Commands, guestdisk.For)
	m.mu.Lock()
	if st.guestSkip = skip; skip != nil {
		return
	}
	st.guestRun = true
	pci, scsihw := st.pci, qemuserver.SCSIHW(st.v.Config.Main)
	agent := *ag
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		ctx, cancel := context.WithTimeout(m.ctx, 2*m.n.Timeout)
		defer cancel()
		seen, err := guestdisk.Ask(ctx, agent, pci, scsihw)
		m.mu.Lock()
		defer m.mu.Unlock()
		st.guestRun = false
		if err == nil {
			st.guest = seen
		}
	}()
}

// view is what assemble needs of a VM (call with m.mu held): the guest
// agent's answer, once it came, goes onto the resolved disks here, where
// no sample reads them.
func (st *vmState) view() vmView {
	for _, d := range st.set.Disks {
		if g, ok := st.guest[d.ID]; ok && d.Guest.Seen == nil {
			d.Guest.Seen = &g
		}
	}
	return vmView{VMID: st.vmid, Name: st.name, PID: st.pid, Disks: st.set.Disks, Map: st.set.Threads, Agent: st.agent}
}

// vmView is a VM as assemble sees it: what does not change between two
// snapshots.
type vmView struct {
	VMID      int
	Name      string
	PID       int
	Disks     []*disk.Disk // in config order
	Map       threads.Map
	Histogram bool // rows get latency percentiles (--histogram)
	Layers    bool // rows get the latency split (--layers)
	Agent     bool // agent: 1 in the config
}

const mainLoop = "main-loop"

// assemble compares two snapshots of one VM: its row and its disks' rows.
// A disk missing from either snapshot (hot-plugged or unplugged in between)
// or whose counters went backwards has no row this time.
func assemble(v vmView, prev, cur *snapshot) (VM, []Disk) {
	row := VM{VMID: v.VMID, Name: v.Name, PID: v.PID, Status: OK, VCPUs: len(v.Map.VCPUs), IOThreads: []IOThread{}}
	tsec := cur.ThreadsAt.Sub(prev.ThreadsAt).Seconds()
	usage := func(tid int) (threads.Usage, bool) {
		a, ok1 := prev.Threads[tid]
		b, ok2 := cur.Threads[tid]
		if !ok1 || !ok2 {
			return threads.Usage{}, false
		}
		return threads.UsageOf(a, b, tsec)
	}
	if u, ok := usage(v.PID); ok {
		row.MainLoopCPUPct, row.MainLoopWaitPct = pct(u.CPUPct), pctPtr(u.WaitPct)
	}
	if c := cur.Cgroup; c.Measured() {
		dirty, wb := c.DirtyBytes, c.WritebackBytes
		row.DirtyBytes, row.WritebackBytes, row.IOPressure = &dirty, &wb, c.IOPressure
	} else if c != nil {
		row.CgroupNotMeasured = c.Unmeasured
	}
	var vcpu float64
	measured := 0
	for _, t := range v.Map.VCPUs {
		if u, ok := usage(t.TID); ok {
			vcpu += u.CPUPct
			measured++
		}
	}
	if measured > 0 {
		row.VCPUCPUPct = pct(vcpu)
	}
	for _, t := range v.Map.IOThreads {
		it := IOThread{ID: t.ID, TID: t.TID, Disks: []string{}}
		if u, ok := usage(t.TID); ok {
			it.CPUPct, it.WaitPct = pct(u.CPUPct), pctPtr(u.WaitPct)
		}
		for _, d := range v.Disks {
			if d.Graph != nil && d.Graph.IOThread == t.ID {
				it.Disks = append(it.Disks, d.ID)
			}
		}
		row.IOThreads = append(row.IOThreads, it)
	}
	sec := cur.At.Sub(prev.At).Seconds()
	dsec := cur.DevicesAt.Sub(prev.DevicesAt).Seconds()
	var disks []Disk
	for i, d := range v.Disks {
		a, ok1 := prev.Stats[d.ID]
		b, ok2 := cur.Stats[d.ID]
		if !ok1 || !ok2 {
			continue
		}
		iv, err := sampler.IntervalOf(a, b, sec)
		if err != nil {
			continue
		}
		r := Disk{VMID: v.VMID, Name: v.Name, Disk: d.ID, Storage: storageID(d), order: i,
			ReadIOPS: round(iv.ReadOpsPerSec), WriteIOPS: round(iv.WriteOpsPerSec),
			ReadBps: round(iv.ReadBytesPerSec), WriteBps: round(iv.WriteBytesPerSec),
			ReadLatencyMs: round(units.Ms(iv.ReadLatency)), WriteLatencyMs: round(units.Ms(iv.WriteLatency)),
			FlushLatencyMs: round(units.Ms(iv.FlushLatency)), QueueDepth: round(iv.QueueDepth), FailedOps: iv.FailedOps,
			GuestByID: byID(d), GuestMounts: []string{}, Thread: mainLoop, Queues: queueCount(d)}
		if v.Histogram {
			r.Percentiles = latency.IntervalOf(a, b)
		}
		if u, ok := LimitUse(cur.Limits[d.ID], iv); ok {
			r.LimitPct, r.Limit = pct(u.Pct), &u.Limit
		}
		if jobs := cur.Jobs[d.ID]; len(jobs) > 0 {
			j := strings.Join(jobs, ",")
			r.BlockJob = &j
		}
		tid := v.PID
		if g := d.Graph; g != nil && g.IOThread != "" {
			id := g.IOThread
			tid, r.Thread = g.ServingTID, id
			r.IOThread = &id
		}
		if u, ok := usage(tid); ok {
			r.ThreadCPUPct, r.ThreadWaitPct = pct(u.CPUPct), pctPtr(u.WaitPct)
			if r.IOThread != nil {
				r.IOThreadCPUPct = r.ThreadCPUPct
			}
		}
		if d.Dev != "" {
			dev := d.Dev
			r.Device = &dev
			da, ok1 := prev.Devices[d.ID]
			db, ok2 := cur.Devices[d.ID]
			if ok1 && ok2 {
				if di, ok := sampler.DeviceIntervalOf(da, db, dsec); ok {
					r.DeviceLatencyMs = pct(units.Ms(di.Latency))
				}
			}
		}
		if sv, ok := cur.Stalls[d.ID]; ok && sv.Stalled {
			r.StalledSeconds, r.stallSays = sv.StalledSeconds, sv.Summary()
		}
		if g := d.Guest.Seen; g != nil {
			dev := g.Device
			r.GuestDevice = &dev
			r.GuestMounts = append(r.GuestMounts, g.Mounts...)
		}
		if v.Layers {
			sp := layers.Of(layerCounters(d, prev), layerCounters(d, cur), layerContext(d, r))
			r.Layers = &sp
		}
		disks = append(disks, r)
	}
	return row, disks
}

// storageID is the storage the disk's line names ("" for a path or a disk
// only the running QEMU has).
func storageID(d *disk.Disk) string {
	if d.Drive == nil {
		return ""
	}
	return d.Drive.StorageID()
}

// byID is the disk's /dev/disk/by-id name in the guest, nil when it has
// none.
func byID(d *disk.Disk) *string {
	if n := d.Guest.Name.ByID; n != "" {
		return &n
	}
	return nil
}

// queueCount is the virtqueue count QEMU runs the disk with, nil when not
// read.
func queueCount(d *disk.Disk) *int {
	if c := d.Queues; c != nil && c.Running != nil {
		n := *c.Running
		return &n
	}
	return nil
}

// round keeps rates and latencies to three decimals: stable JSON, and an
// idle disk shows exact zeros.
func round(f float64) float64 { return units.Round(f, 3) }

func pct(f float64) *float64 {
	r := units.Round(f, 2)
	return &r
}

func pctPtr(f *float64) *float64 {
	if f == nil {
		return nil
	}
	return pct(*f)
}

// layerCounters are one disk's counters of a snapshot per layer (package
// layers), each layer not read with why.
func layerCounters(d *disk.Disk, s *snapshot) layers.Counters {
	c := layers.Counters{At: s.At}
	if b, ok := s.Stats[d.ID]; ok {
		c.QEMU = &b
	}
	switch {
	case s.Guest == nil:
		c.GuestWhy = s.GuestWhy
	case d.Guest.Seen == nil:
		c.GuestWhy = "the guest agent did not place the disk on a device of the guest"
	default:
		name := layers.GuestDev(d.Guest.Seen.Device)
		if g, ok := s.Guest[name]; ok {
			c.Guest = &g
		} else {
			c.GuestWhy = "the guest's " + layers.GuestStatsPath + " has no " + name
		}
	}
	switch {
	case d.Dev != "":
		if n, ok := s.Devices[d.ID]; ok {
			c.Node = &n
		} else {
			c.NodeWhy = "node device " + d.Dev + " not read"
		}
	case d.FSDev != "":
		if n, ok := s.FSDevices[d.ID]; ok {
			c.Node, c.NodeShared = &n, true
		} else {
			c.NodeWhy = "node device " + d.FSDev + " not read"
		}
	default:
		c.NodeWhy = "the volume is on no block device of the node (librbd, iSCSI, NFS or tmpfs)"
	}
	return c
}

// layerContext is what a row already says that the verdict reads: the
// limit used and the serving thread's CPU; and the cache mode when it puts
// the node's page cache below QEMU.
func layerContext(d *disk.Disk, r Disk) layers.Context {
	c := layers.Context{LimitPct: r.LimitPct, Thread: r.Thread, ThreadCPUPct: r.ThreadCPUPct}
	if g := d.Graph; g != nil && !g.Effective.Direct {
		c.PageCache = g.Effective.Mode
	}
	if r.Limit != nil {
		c.Limit = *r.Limit
	}
	return c
}

// fsDevices are the counters of the devices under file volumes'
// filesystems, read once per sample (the VMs are sampled in parallel).
type fsDevices struct {
	mu   sync.Mutex
	read map[string]*sampler.BlockStat // nil: could not be read
}

func (f *fsDevices) reset() {
	f.mu.Lock()
	f.read = map[string]*sampler.BlockStat{}
	f.mu.Unlock()
}

func (f *fsDevices) stat(h sampler.Host, dev string) (sampler.BlockStat, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.read == nil {
		f.read = map[string]*sampler.BlockStat{}
	}
	bs, ok := f.read[dev]
	if !ok {
		if b, err := h.BlockStatOf(dev); err == nil {
			bs = &b
		}
		f.read[dev] = bs
	}
	if bs == nil {
		return sampler.BlockStat{}, false
	}
	return *bs, true
}
