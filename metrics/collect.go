// Package metrics exports what pvediskcheck knows about a node's VM disks as
// Prometheus metrics: per disk QEMU's counters (query-blockstats), what the
// disk really runs with (cache mode, aio, iothread, discard: package cache),
// its running I/O limits and whether they differ from the config, per VM the
// findings of `check` and the CPU time of its QEMU threads by role (package
// threads, as `top` maps them), and the node's thin pools (package thinpool,
// the same figures as `thin`).
//
// Collect reads everything once and returns a Snapshot: plain data. The
// Snapshot is a prometheus.Collector whose metrics are built from that data
// (const metrics, no state kept between collections, no timestamps); Handler
// serves it on /metrics and WriteTextfile writes it for node_exporter's
// textfile collector.
//
// Load on each running VM, per collection: vm.FetchLive's exchange (the
// block graph, write caches and limits: 4 commands on QEMU >= 10.1), then
// one more short exchange of 4 commands (query-blockstats for the devices
// and for the block nodes, query-iothreads, query-cpus-fast): constant in
// the number of disks, one exchange at a time, the socket never held
// between them. A VM whose socket stays busy (or fails) is counted in
// CollectErrors and has no live series in that collection: a missing
// sample, never a zero.
package metrics

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/pvediskcheck/pvediskcheck/advisory"
	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/cache"
	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/discard"
	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/dpkg"
	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/policy"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/stall"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
	"github.com/pvediskcheck/pvediskcheck/threads"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// Source names where a collection error happened
// (pvediskcheck_collect_errors{source}).
type Source string

// Sources: a bounded set, every one exported (0 when nothing failed).
const (
	// SourceNode: the node's VM configs could not be listed (not a
	// Proxmox VE node, /etc/pve unreadable).
	SourceNode Source = "node"
	// SourceConfig: a VM's config could not be read or parsed (the
	// config-invalid finding says which, where it parses at all).
	SourceConfig Source = "config"
	// SourceQMP: a running VM's QMP socket stayed busy beyond the
	// timeout, was gone or answered wrong: that VM has no live series.
	SourceQMP Source = "qmp"
	// SourceThreads: a running VM's thread counters could not be read
	// from procfs: that VM has no CPU series.
	SourceThreads Source = "threads"
	// SourceThinPool: lvs or zfs failed: no thin pool series.
	SourceThinPool Source = "thinpool"
	// SourceLabels: a VM's data (or a thin pool's) holds a value that
	// cannot be a label value (not UTF-8: an iothread id QEMU reports, a
	// storage name of the config): that VM has no series at all in the
	// collection, the others are exported as they are.
	SourceLabels Source = "labels"
)

// Sources lists every source, in export order.
var Sources = []Source{SourceNode, SourceConfig, SourceQMP, SourceThreads, SourceThinPool, SourceLabels}

// DefaultParallel is how many VMs Collect reads at once (as check --all
// and top: 8).
const DefaultParallel = 8

// MaxParallel bounds --parallel: each VM read at once holds a QMP
// connection and a goroutine; more than this only queues on the 2 to 64
// cores of a node.
const MaxParallel = 64

// Options say how to collect.
type Options struct {
	// Parallel is how many VMs are read at once; < 1 means DefaultParallel.
	Parallel int
	// StallAfter is --stall-after (package stall); 0 means
	// stall.DefaultAfter.
	StallAfter time.Duration
	// OnSnapshot, when set, gets every collection once it is complete
	// (--capture keeps stalls' evidence from it).
	OnSnapshot func(*Snapshot)
	// Histograms, when set (metrics --listen --histogram), sets QEMU's
	// latency histograms on every running disk the first time its process
	// is read (never replacing one found: package latency) and exports
	// them as Prometheus histograms; the caller releases it on exit.
	Histograms *latency.Tracker
	// Policy, when set (metrics --policy), judges every VM against the
	// site's policy as check does (check.Options.Policy).
	Policy *policy.Policy
	// Guest (metrics --guest) asks each live VM's guest agent (agent: 1)
	// once per collection for its disks and filesystems (guest-get-disks,
	// guest-get-fsinfo, within GuestAgentTimeout; query-pci first): the
	// filesystems per disk and what a trim would give back.
	Guest bool
}

// GuestAgentTimeout bounds each VM's guest agent answer under
// Options.Guest: an agent not running in the guest must not hold the
// collection.
const GuestAgentTimeout = 500 * time.Millisecond

// Snapshot is one collection: what every metric is built from.
type Snapshot struct {
	// Duration is how long the collection took.
	Duration time.Duration
	// Errors counts what failed, by source.
	Errors map[Source]int
	// VMs are the node's VMs (every config), by VMID.
	VMs []VM
	// Pools are the node's thin pools (nil when they could not be read).
	Pools []thinpool.Pool
	// PolicyRules are each rule of Options.Policy over the node (nil
	// without one): pvediskcheck_policy_rule_disks.
	PolicyRules []policy.RuleCount
}

// VM is one VM's part of a collection.
type VM struct {
	VMID    int
	Running bool
	// Live is false for a stopped VM and for a running one whose QEMU
	// could not be read: it then has no disk and no CPU series.
	Live bool
	// Disks are the running disks (cache's list: no empty CD-ROM, no
	// TPM state), in config order.
	Disks []Disk
	// Findings are check's findings for the VM.
	Findings []check.Finding
	// QEMU is the binary a running VM's QEMU runs (check's: the build its
	// QMP greeting states, whether an upgrade replaced it, the installed
	// version); nil for a VM that does not run.
	QEMU *advisory.Binary
	// Policy are the policy's rules that select a disk of the VM, with
	// the requirements its disks break (pvediskcheck_policy_violations).
	Policy []policy.RuleCount
	// HistogramsLeft are the latency histograms of pvediskcheck's on its
	// disks that this run did not set (latency.Leftover; each is also a
	// latency-histogram-left finding).
	HistogramsLeft []latency.Leftover
	// GuestFreeze is the guest's freeze state as check asked it (once per
	// collection, never while a backup holds the VM); nil without an
	// agent socket.
	GuestFreeze *vm.Freeze
	// CPU is the CPU time of the QEMU threads; nil when not read.
	CPU *CPU
	// Cgroup is the VM's cgroup reading (its page cache dirty and under
	// writeback in node RAM, io.pressure); nil when not read, not measured
	// when the node has no scope of the VM (its series are then absent).
	Cgroup *sampler.Cgroup
	// Refused is why the VM's series were left out (SourceLabels); "" when
	// they were not.
	Refused string
}

// Disk is one running disk.
type Disk struct {
	ID         string
	Controller string
	Storage    string
	// CacheConfigured and CacheEffective are Proxmox cache mode names: the
	// config's (Proxmox's default spelled out) and the one the running
	// QEMU's flags amount to (cache.Modes).
	CacheConfigured string
	CacheEffective  string
	AIO             string // threads, native, io_uring; "" where the driver has none
	// IOThread is the iothread serving the disk, as query-iothreads names
	// it (iothread-virtioscsi1); "" when its I/O runs in the main loop.
	IOThread string
	Discard  string // unmap or ignore, as QEMU runs it
	// Stats are the device's counters; nil when query-blockstats has no
	// entry for it.
	Stats *qmp.BlockStats
	// Protocol are the counters of the disk's protocol node (discards the
	// storage accepted); nil when QEMU reports none for it.
	Protocol *qmp.BlockStats
	// Limits are the I/O limits QEMU applies now (nil when the disk has
	// no throttling to read: scsi-block, a hot-plugged disk without a
	// group); ConfigLimits those the config asks for.
	Limits       qemuserver.Limits
	ConfigLimits qemuserver.Limits
	// Stall is the stall rule's verdict, judged from Stats' idle_time_ns
	// and the node's threads and device (no QMP command of its own).
	Stall stall.Verdict
	// Latency are the disk's latency histograms by kind, counted from when
	// this run first knew them (Options.Histograms); nil without.
	Latency map[latency.Kind]latency.Bucketed
	// Node are the counters of the node block device under the volume
	// (the storage layer of top --layers: disk.Disk.Dev, or FSDev for a
	// file, NodeShared); nil when there is none or it could not be read.
	Node       *sampler.BlockStat
	NodeShared bool
	// GuestFilesystems are the guest's mounted filesystems on the disk
	// (Options.Guest: guest-get-fsinfo); nil when not asked or not
	// answered.
	GuestFilesystems []guestdisk.Filesystem
	// Reclaimable is what a trim would give back to the disk's thin
	// volume (discard.JudgeReclaim over the thin pool's figure of it);
	// nil without Options.Guest or for a volume in no thin pool read here.
	Reclaimable *discard.Reclaim
	// volume is the disk's volume name in its storage, to find it in the
	// thin pools; agentErr why the agent said nothing.
	volume     string
	agentErr   error
	partitions []string
}

// LimitsDiffer reports running limits other than the config's.
func (d Disk) LimitsDiffer() bool { return !d.Limits.Equal(d.ConfigLimits) }

// CPU is a VM's QEMU threads' CPU time since each started, in seconds.
type CPU struct {
	MainLoop float64
	VCPUs    float64
	// IOThreads by iothread id.
	IOThreads map[string]float64
}

// Collect reads every VM of the node and its thin pools, giving up what is
// not done when ctx ends (it then counts as an error of its source).
func Collect(ctx context.Context, n node.Node, o Options) *Snapshot {
	start := time.Now()
	s := &Snapshot{Errors: map[Source]int{}, VMs: []VM{}}
	var mu sync.Mutex
	fail := func(src Source) {
		mu.Lock()
		s.Errors[src]++
		mu.Unlock()
	}
	// One lvs run serves the pool figures and check's thin-overcommit; one
	// read of dpkg's status every VM's installed QEMU version.
	pools := thinpool.NewNodeCache(n)
	pkgs := dpkg.NewPackages(n)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rep, err := pools.Measure(ctx, n, nil)
		if err != nil {
			fail(SourceThinPool)
			return
		}
		mu.Lock()
		s.Pools = rep.Pools
		mu.Unlock()
	}()
	ids, err := vm.List(n.Paths)
	if err != nil {
		fail(SourceNode)
	}
	par := o.Parallel
	if par < 1 {
		par = DefaultParallel
	}
	vms := make([]VM, len(ids))
	node.Each(len(ids), par, func(i int) {
		var errs []Source
		vms[i], errs = collectVM(ctx, n, ids[i], pools, pkgs, o)
		for _, e := range errs {
			fail(e)
		}
	})
	wg.Wait()
	if o.Guest {
		reclaim(vms, s.Pools)
	}
	s.VMs = vms
	if o.Policy != nil {
		var per [][]policy.RuleCount
		for _, v := range vms {
			per = append(per, v.Policy)
		}
		s.PolicyRules = o.Policy.Sum(per)
	}
	s.Duration = time.Since(start)
	if o.OnSnapshot != nil {
		o.OnSnapshot(s) // every VM as read: --capture keeps a stall of one whose labels are refused
	}
	s.Exportable()
	return s
}

// collectVM reads one VM: check's load (one FetchLive) and findings, then
// for a running VM its counters and thread ids in one more exchange, and
// its threads' CPU time.
func collectVM(ctx context.Context, n node.Node, vmid int, pools *thinpool.Cache, pkgs *dpkg.Packages, o Options) (VM, []Source) {
	stallAfter, hist := o.StallAfter, o.Histograms
	out := VM{VMID: vmid}
	res, set := check.VMLoaded(ctx, n, vmid, check.Options{Packages: pkgs, Policy: o.Policy}, pools)
	out.Findings, out.QEMU, out.Policy, out.GuestFreeze = res.Findings, res.QEMU, res.PolicyRules, res.GuestFreeze
	if set == nil {
		// Not loaded: a config that does not parse (config-invalid) or
		// cannot be read.
		return out, []Source{SourceConfig}
	}
	v, liveErr := set.VM, set.AskErr
	out.Running = v.Running
	if !v.Running {
		if hist != nil {
			hist.Forget(vmid)
		}
		return out, nil
	}
	if liveErr != nil {
		return out, []Source{SourceQMP}
	}
	l, err := readLive(ctx, v, n.Timeout, hist)
	if err != nil {
		return out, []Source{SourceQMP}
	}
	out.Live = true
	// A latency histogram of pvediskcheck's that this run did not set, in
	// the counters just read: check's latency-histogram-left, as check
	// says it from its own look.
	out.HistogramsLeft = hist.Leftovers(vmid, v.Pid, v.QMPSocket(), l.stats)
	out.Findings = append(out.Findings, check.HistogramsLeft(out.HistogramsLeft)...)
	set.PlaceThreads(l.threads)
	if o.Guest {
		set.Fill(ctx, n, disk.Agent, disk.Options{AgentTimeout: GuestAgentTimeout})
	}
	out.Disks = disks(set, l)
	judgeStalls(ctx, n, set, l, out.Disks, stallAfter)
	set.Fill(ctx, n, disk.Cgroup, disk.Options{})
	out.Cgroup = set.Cgroup
	var errs []Source
	if cpu, ok := cpuOf(n, v.Pid, l.threads); ok {
		out.CPU = cpu
	} else {
		errs = append(errs, SourceThreads)
	}
	return out, errs
}

// live is what the second exchange reads.
type live struct {
	stats   map[string]qmp.BlockStats // by disk id
	nodes   map[string]qmp.BlockStats // by node name
	threads threads.Map
	hist    *latency.Tracker
}

// readLive is the second exchange, one sample (sampler.Window.Take): the
// devices' and the block nodes' counters and the thread ids, four commands
// whatever the number of disks; with hist, the running disks' latency
// histograms are set in the same exchange the first time (Ensure).
func readLive(ctx context.Context, v *vm.VM, timeout time.Duration, hist *latency.Tracker) (*live, error) {
	w := &sampler.Window{VM: v, Timeout: timeout, Patience: timeout, Query: vm.Query{Need: vm.NeedNodeStats | vm.NeedThreads}}
	if hist != nil {
		var ids []string
		for _, d := range v.Disks {
			if d.Running != nil {
				ids = append(ids, d.ID)
			}
		}
		w.Query.Then = hist.Hook(v, timeout, ids)
	}
	s, err := w.Take(ctx)
	if err != nil {
		return nil, err
	}
	return &live{stats: s.Stats, nodes: s.Nodes, threads: s.Live.Threads, hist: hist}, nil
}

// disks builds the running disks from cache's view of the VM (the
// effective modes), the running settings (aio, discard, the iothread
// serving each disk) and the counters.
func disks(set *disk.Set, l *live) []Disk {
	v := set.VM
	view := cache.Build(set)
	out := []Disk{}
	for _, c := range view.Disks {
		d := set.Disk(c.ID)
		if c.Cache.Effective == nil || d == nil || d.Graph == nil {
			continue // not attached to the running VM
		}
		row := Disk{ID: c.ID, Controller: c.Controller, Storage: c.Storage, CacheConfigured: c.Cache.Configured,
			CacheEffective: *c.Cache.Effective, AIO: c.AIO, IOThread: d.Graph.IOThread, Discard: d.Graph.Discard}
		if st, ok := l.stats[c.ID]; ok {
			row.Stats = &st
			if l.hist != nil {
				for _, k := range latency.Kinds {
					if h, ok := l.hist.Cumulative(v.VMID, v.Pid, c.ID, k, &st); ok {
						if row.Latency == nil {
							row.Latency = map[latency.Kind]latency.Bucketed{}
						}
						row.Latency[k] = h
					}
				}
			}
		}
		if d.Live != nil {
			if st, ok := l.nodes[d.Live.Protocol.Name]; ok && d.Live.Protocol.Name != "" && st.HasDriverSpecific {
				row.Protocol = &st
			}
			if d.Live.Limits != nil {
				row.Limits = d.Live.Limits
				row.ConfigLimits = qemuserver.Limits{}
				if d.Drive != nil {
					row.ConfigLimits = d.Drive.Limits()
				}
			}
		}
		if d.Drive != nil {
			row.volume = d.Drive.VolName()
		}
		row.agentErr = set.AgentErr
		if g := d.Guest.Seen; g != nil {
			row.GuestFilesystems = append([]guestdisk.Filesystem{}, g.Filesystems...)
			row.partitions = g.Partitions
		} else if set.AgentErr == nil && set.Filled(disk.Agent) {
			row.GuestFilesystems = []guestdisk.Filesystem{}
		}
		out = append(out, row)
	}
	return out
}

// reclaim judges what a trim would give back to each disk whose volume a
// thin pool of the node lists (its allocation and chunk size from the
// same lvs or zfs run as the pool's series).
func reclaim(vms []VM, pools []thinpool.Pool) {
	type key struct{ storage, volume string }
	byVolume := map[key]alloc.Result{}
	for _, p := range pools {
		for _, v := range p.Volumes {
			if v.Guest != "vm" {
				continue
			}
			size := v.VirtualBytes
			a := alloc.Result{Method: p.Type, VirtualBytes: &size, AllocatedBytes: v.AllocatedBytes,
				Pool: &alloc.Pool{Name: p.Pool, ChunkSizeBytes: p.ChunkSizeBytes}, Snapshots: v.Snapshots}
			if v.DataPercent != nil {
				a.ResolutionBytes = size / 10000 // lvs: data_percent to 0.01 %
			}
			byVolume[key{p.Storage, v.Name}] = a
		}
	}
	for i := range vms {
		for j := range vms[i].Disks {
			d := &vms[i].Disks[j]
			a, ok := byVolume[key{d.Storage, d.volume}]
			if !ok {
				continue
			}
			in := discard.ReclaimInput{VMID: vms[i].VMID, Agent: d.agentErr != disk.ErrNoAgent, AgentErr: d.agentErr, Alloc: a, Discard: "on"}
			if d.Discard == "ignore" {
				in.Discard = "ignore"
			}
			if d.GuestFilesystems != nil {
				in.Seen = &guestdisk.Seen{Filesystems: d.GuestFilesystems, Partitions: d.partitions}
			}
			d.Reclaimable = discard.JudgeReclaim(in)
		}
	}
}

// judgeStalls applies the stall rule to the disks, from the counters read
// (idle_time_ns) and, for a VM with a disk idle for after, its threads.
func judgeStalls(ctx context.Context, n node.Node, set *disk.Set, l *live, ds []Disk, after time.Duration) {
	if after <= 0 {
		after = stall.DefaultAfter
	}
	byID := map[string]stall.Verdict{}
	set.Fill(ctx, n, disk.Devices, disk.Options{})
	for _, sv := range stall.Detect(ctx, n, set.VM.Pid, stall.Disks(set), l.stats, after, 0) {
		byID[sv.Disk] = sv
	}
	h := sampler.Host{Proc: n.Paths.Proc, Sys: n.Paths.Sys}
	for i := range ds {
		ds[i].Stall = byID[ds[i].ID]
		d := set.Disk(ds[i].ID)
		if d == nil {
			continue
		}
		dev, shared := d.Dev, false
		if dev == "" {
			dev, shared = d.FSDev, true
		}
		if dev == "" {
			continue
		}
		if bs, err := h.BlockStatOf(dev); err == nil {
			ds[i].Node, ds[i].NodeShared = &bs, shared
		}
	}
}

// cpuOf reads the CPU time of the mapped threads; false when the main
// thread's counters cannot be read (the process has gone, or procfs
// refuses).
func cpuOf(n node.Node, pid int, m threads.Map) (*CPU, bool) {
	r, err := threads.NewReader(n)
	if err != nil {
		return nil, false
	}
	c := r.Read(pid, m.TIDs())
	main, ok := c[pid]
	if !ok {
		return nil, false
	}
	cpu := &CPU{MainLoop: main.CPUSeconds(), IOThreads: map[string]float64{}}
	for _, t := range m.VCPUs {
		cpu.VCPUs += c[t.TID].CPUSeconds() // a vCPU gone since the query adds nothing
	}
	for _, t := range m.IOThreads {
		if tc, ok := c[t.TID]; ok {
			cpu.IOThreads[t.ID] = tc.CPUSeconds()
		}
	}
	return cpu, true
}

// sortedIOThreads lists the iothread ids of c in order.
func (c *CPU) sortedIOThreads() []string {
	ids := make([]string, 0, len(c.IOThreads))
	for id := range c.IOThreads {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
