package disk

import (
	"context"
	"fmt"
	"time"

	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/queues"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/storage/zfs"
	"github.com/pvediskcheck/pvediskcheck/threads"
	"github.com/pvediskcheck/pvediskcheck/vm"
	"github.com/pvediskcheck/pvediskcheck/volchain"
)

// Layer is one thing a command wants read for its disks beyond what the
// VM's config, storage.cfg and command line say; Fill reads each once.
type Layer uint

const (
	// Live is what the running QEMU reports now (vm.FetchLive's commands:
	// its run state, graph, write caches and limits: each disk's Live).
	Live Layer = 1 << iota
	// Counters are QEMU's counters of the devices (query-blockstats):
	// Set.Stats, at Set.At.
	Counters
	// Threads is QEMU's thread map (query-iothreads, query-cpus-fast):
	// Set.Threads, each running disk placed on it (PlaceThreads).
	//
	// Live, Counters and Threads are read in one exchange, whichever of
	// them are asked; a QEMU that does not answer it leaves Set.AskErr.
	Threads
	// Devices is each running volume's node block device (Disk.Dev, from
	// sysfs).
	Devices
	// ZFS is the zvols' properties, one `zfs get` for all (Disk.ZFS).
	ZFS
	// Queues is the disks' virtqueue counts, the running ones in one QMP
	// exchange when QEMU answered Live (Disk.Queues).
	Queues
	// Backing is each running image's backing chain, with the LV use of
	// a volume chain's layers (Disk.Backing).
	Backing
	// Chains is each volume chain beside the one the config's snapshots
	// imply, with its layers' use (Disk.Chain).
	Chains
	// Agent is what the guest agent says of the disks (Disk.Guest.Seen),
	// asked within Options.AgentTimeout.
	Agent
	// Cgroup is the VM's cgroup, found once (Set.CgroupDir), and its first
	// reading (Set.Cgroup): the page-cache bytes its QEMU dirtied and not
	// yet on storage, its io.pressure and io.stat.
	Cgroup
)

// Options say how the layers are read.
type Options struct {
	// AgentTimeout bounds the guest agent's answer (Agent); 0: the node's
	// timeout.
	AgentTimeout time.Duration
}

// Resolve resolves disks of v (all of them or a selection, in v's order)
// and fills layers: what QEMU, the node's tools and the guest say is read
// here once, and every capability reads it from the Set.
func Resolve(ctx context.Context, n node.Node, v *vm.VM, disks []*vm.Disk, layers Layer, o Options) *Set {
	asked := layers & (Live | Counters | Threads)
	var a *vm.Answer
	var err error
	if asked != 0 && v.Running {
		a, err = ask(ctx, n, v, asked)
	}
	s := Of(v, disks)
	if asked != 0 && v.Running {
		s.filled |= asked
		if s.AskErr = err; err == nil {
			s.Stats, s.At = a.Stats, a.At
			if asked&Threads != 0 {
				s.PlaceThreads(a.Threads)
			}
		}
	}
	s.Fill(ctx, n, layers&^(Live|Counters|Threads), o)
	return s
}

// Of resolves disks of v from what v has read (its config, storage.cfg,
// command line and, after FetchLive, QEMU's live view), reading nothing
// more: Resolve without layers.
func Of(v *vm.VM, disks []*vm.Disk) *Set {
	s := &Set{VM: v}
	for _, d := range disks {
		s.Disks = append(s.Disks, s.Resolved(d))
	}
	return s
}

// ask is the one exchange of the layers asked of QEMU.
func ask(ctx context.Context, n node.Node, v *vm.VM, asked Layer) (*vm.Answer, error) {
	var q vm.Query
	if asked&Live != 0 {
		q.Need |= vm.NeedStatus | vm.NeedLive
	}
	if asked&Counters != 0 {
		q.Need |= vm.NeedStats
	}
	if asked&Threads != 0 {
		q.Need |= vm.NeedThreads
	}
	return v.Ask(ctx, n.Timeout, q)
}

// Resolved resolves one disk of the set's VM from what the VM read, the
// set's own or one it does not hold (check judges a line Proxmox refuses
// as the line repaired); it reads nothing and adds nothing to the set.
func (s *Set) Resolved(vd *vm.Disk) *Disk {
	v := s.VM
	d := &Disk{Disk: vd}
	if vd.Drive != nil {
		d.Storage = v.Storages.Of(vd.Drive)
	}
	if vd.PendingDrive != nil {
		d.PendingStorage = v.Storages.Of(vd.PendingDrive)
	}
	set := vd.Configured
	if vd.Running != nil {
		set = vd.Running
	}
	if set != nil && set.Path != "" {
		d.Path = v.HostPath(set.Path)
	}
	next := vd.Configured
	if vd.PendingDrive != nil && vd.Pending != nil {
		next = vd.Pending
	}
	if next != nil && next.Path != "" {
		d.NextPath = v.HostPath(next.Path)
	}
	if vd.Drive != nil && set != nil {
		d.Alloc = alloc.Volume{Storage: d.Storage, VolName: vd.Drive.VolName(), Path: d.Path, Format: set.Format}
	}
	if drv, st := d.Now(); drv != nil {
		d.Dataset = zfs.Dataset(st, drv)
	}
	if now := vd.RunningNow(); now != nil {
		d.Graph = &Graph{DiskSettings: *now, Effective: now.Cache(), ThrottleGroup: v.HasThrottleGroup(vd), Throttled: v.Throttled(vd), ServingTID: v.Pid}
	}
	d.Guest.Name = guestName(v, vd)
	return d
}

// guestName is the disk's by-id name from the settings the guest sees it
// with (the running ones, else the configured ones) and the machine type.
func guestName(v *vm.VM, d *vm.Disk) guestdisk.Name {
	set := d.Running
	if set == nil {
		set = d.Configured
	}
	if d.Drive == nil || set == nil {
		return guestdisk.Name{}
	}
	machine := v.Config.Main["machine"]
	if v.Cmdline != nil {
		machine = v.Cmdline.Machine
	}
	return guestdisk.ByID(d.Drive, set.Device, v.Blockdev, guestdisk.IsQ35(machine))
}

// PlaceThreads places each running disk on the thread of m that serves it
// (threads.Map.DiskIOThreads: its iothread where QEMU reports one, else
// the main loop).
func (s *Set) PlaceThreads(m threads.Map) {
	s.Threads = m
	v := s.VM
	var ids []string
	for _, d := range s.Disks {
		if d.Graph != nil {
			ids = append(ids, d.ID)
		}
	}
	its := m.DiskIOThreads(v.Cmdline, ids)
	for _, d := range s.Disks {
		if d.Graph == nil {
			continue
		}
		d.Graph.IOThread, d.Graph.ServingTID = "", v.Pid
		if id, ok := its[d.ID]; ok {
			if t, ok := m.IOThread(id); ok {
				d.Graph.IOThread, d.Graph.ServingTID = id, t.TID
			}
		}
	}
}

// Fill reads the layers of layers not read yet, each by its filler, in
// the order of fillers (Live, Counters and Threads are Resolve's own).
func (s *Set) Fill(ctx context.Context, n node.Node, layers Layer, o Options) {
	for _, f := range fillers {
		if layers&f.layer != 0 && s.filled&f.layer == 0 {
			s.filled |= f.layer
			f.fill(ctx, n, s, o)
		}
	}
}

// fillers read the layers after QEMU's: a new layer is a field of Disk,
// its Layer and its filler here.
var fillers = []struct {
	layer Layer
	fill  func(ctx context.Context, n node.Node, s *Set, o Options)
}{
	{Devices, readDevices},
	{ZFS, readZFS},
	{Queues, readQueues},
	{Backing, readBacking},
	{Chains, readChains},
	{Agent, readAgent},
	{Cgroup, readCgroup},
}

// readCgroup finds a running VM's cgroup from its QEMU's /proc/PID/cgroup
// and reads it once; a VM that runs outside its scope has a reading that
// says why it is not measured. A VM that does not run has none (Cgroup
// nil: nothing of it can be in node RAM), its CgroupDir saying so.
func readCgroup(ctx context.Context, n node.Node, s *Set, _ Options) {
	if !s.VM.Running {
		s.CgroupDir = sampler.FindCgroup(ctx, n, s.VM.VMID, 0)
		return
	}
	s.CgroupDir = sampler.FindCgroup(ctx, n, s.VM.VMID, s.VM.Pid)
	s.Cgroup = sampler.ReadCgroup(ctx, n, s.CgroupDir, true)
}

// readDevices finds the node block device under each running volume: a
// path the running QEMU opens that is a block device with counters in
// sysfs; for a file, the block device under its filesystem (FSDev).
func readDevices(_ context.Context, n node.Node, s *Set, _ Options) {
	h := sampler.Host{Proc: n.Paths.Proc, Sys: n.Paths.Sys}
	for _, d := range s.Disks {
		if d.Running != nil && d.Running.Path != "" && s.VM.IsBlockDevice(d.Running.Path) {
			d.Dev, _ = h.BlockDeviceName(d.Path)
		} else if d.Running != nil && d.Path != "" {
			d.FSDev, _ = h.FilesystemDeviceName(d.Path)
		}
	}
}

// readBacking is each running image's backing chain.
func readBacking(ctx context.Context, n node.Node, s *Set, _ Options) {
	for _, d := range s.Disks {
		d.Backing = volchain.Running(ctx, n, s.VM, d.Disk, d.Storage)
	}
}

// readChains measures each volume chain, with the config's snapshot
// sections read once for all of them.
func readChains(ctx context.Context, n node.Node, s *Set, _ Options) {
	var snaps qemuserver.Snapshots
	for _, d := range s.Disks {
		if !volchain.OnChain(d.Drive, d.Storage) {
			continue
		}
		if snaps == nil {
			snaps = volchain.ReadSnapshots(ctx, n, s.VM)
		}
		d.Chain = volchain.Measure(ctx, n, s.VM, d.Disk, snaps)
	}
}

// readZFS reads every zvol of the set in one `zfs get`.
func readZFS(ctx context.Context, n node.Node, s *Set, _ Options) {
	var datasets []string
	seen := map[string]bool{}
	for _, d := range s.Disks {
		if d.Dataset != "" && !seen[d.Dataset] {
			seen[d.Dataset] = true
			datasets = append(datasets, d.Dataset)
		}
	}
	if len(datasets) == 0 {
		return
	}
	byDS := map[string]*zfs.Zvol{}
	for _, z := range zfs.Read(ctx, n.Runner, datasets) {
		byDS[z.Dataset] = z
	}
	for _, d := range s.Disks {
		if d.Dataset != "" {
			d.ZFS = byDS[d.Dataset]
		}
	}
}

// readQueues is each disk's counts (queues.ForVM), the running ones read
// in one QMP exchange where QEMU answered Live.
func readQueues(ctx context.Context, n node.Node, s *Set, _ Options) {
	vds := make([]*vm.Disk, len(s.Disks))
	for i, d := range s.Disks {
		vds[i] = d.Disk
	}
	counts := queues.ForVM(ctx, s.VM, vds, n.Timeout, s.filled&Live != 0 && s.AskErr == nil)
	for _, d := range s.Disks {
		d.Queues = counts[d.ID]
	}
}

// readAgent asks a running VM's guest agent (agent: 1) for its disks,
// partitions and mounted filesystems (guest-get-disks, guest-get-fsinfo)
// within o.AgentTimeout (the node's timeout when 0), the PCI devices that
// place them read in one QMP exchange first: an agent that does not answer
// leaves them unknown, never guessed, and says why in Set.AgentErr.
// While a backup holds the VM the agent is left alone (vm.VM.Agent) and
// Set.AgentSkip says so.
func readAgent(ctx context.Context, n node.Node, s *Set, o Options) {
	v := s.VM
	timeout, agentTimeout := n.Timeout, o.AgentTimeout
	if agentTimeout <= 0 {
		agentTimeout = n.Timeout
	}
	switch {
	case !guestdisk.AgentEnabled(v.Config.Main["agent"]):
		s.AgentErr = ErrNoAgent
		return
	case !v.Running:
		s.AgentErr = ErrNotRunning
		return
	}
	a, err := v.Ask(ctx, timeout, vm.Query{Need: vm.NeedPCI})
	if err != nil {
		s.AgentErr = fmt.Errorf("query-pci, which places the guest's disks, failed: %w", err)
		return
	}
	agent, skip := v.Agent(ctx, n, agentTimeout, guestdisk.Commands, guestdisk.For)
	if skip != nil {
		s.AgentSkip = skip
		s.AgentErr = fmt.Errorf("%w: %s", ErrAgentHeld, skip.Why)
		return
	}
	actx, cancel := context.WithTimeout(ctx, 2*agentTimeout)
	defer cancel()
	seen, err := guestdisk.Ask(actx, *agent, a.PCI, qemuserver.SCSIHW(v.Config.Main))
	if err != nil {
		s.AgentErr = err
		return
	}
	for _, d := range s.Disks {
		if g, ok := seen[d.ID]; ok {
			d.Guest.Seen = &g
		}
	}
}

// Why the guest agent was not asked (Set.AgentErr).
var (
	ErrNoAgent    = exitcode.New(exitcode.Unreachable, "no guest agent configured (agent: 1)")
	ErrNotRunning = exitcode.New(exitcode.Unreachable, "the VM is not running")
	// ErrAgentHeld: a backup holds the VM, so the agent was left alone
	// (Set.AgentSkip says which answer and why).
	ErrAgentHeld = exitcode.New(exitcode.Unreachable, "the guest agent was not asked")
)
