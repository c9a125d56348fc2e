package vm

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/threads"
)

// Need is one thing a caller wants of the running QEMU. A Query is a set of
// them; Ask builds the smallest set of commands for it, in one exchange.
// No other package builds its own query set.
type Need uint

const (
	// NeedStatus is QEMU's run state (query-status): VM.Status.
	NeedStatus Need = 1 << iota
	// NeedLive is each disk's Live view (Disk.Live): query-block, the block
	// graph (query-named-block-nodes; x-debug-query-block-graph before
	// QEMU 10.1 lists no children), each device's write-cache and each
	// throttle group's limits (one qom-list-get on QEMU >= 10.1, one
	// qom-get per object before).
	NeedLive
	// NeedStats is the devices' counters (query-blockstats): Answer.Stats,
	// timed by Answer.At.
	NeedStats
	// NeedNodeStats is the block nodes' counters too (query-blockstats
	// with query-nodes): Answer.Nodes, in the same exchange.
	NeedNodeStats
	// NeedJobs is the block jobs by disk (query-block-jobs and, only while
	// some run, the block graph that places them): Answer.Jobs.
	NeedJobs
	// NeedLimits is the disks' running I/O limits (ReadLimits' rules):
	// Answer.Limits.
	NeedLimits
	// NeedThreads is QEMU's thread ids by role (query-iothreads,
	// query-cpus-fast): Answer.Threads.
	NeedThreads
	// NeedPCI is the PCI devices (query-pci), which place the guest
	// agent's disks: Answer.PCI.
	NeedPCI
	// NeedEvidence is what a stall capture keeps (package stall), asked
	// alone: query-block, query-blockstats, query-block-jobs,
	// query-iothreads and query-cpus-fast, then the throttle group limits
	// of Query.LimitDisks as given (one qom-get each, whatever the QEMU:
	// the group's own reply), in that order. Each reply is kept raw
	// (Answer.Evidence, in the order asked); a command QEMU refuses is
	// kept with its refusal and the rest are still asked (evidence is what
	// could be read), as is a group that cannot be read. Answer.Stats and
	// Answer.Threads are set from the replies.
	NeedEvidence
)

// Query is what one exchange asks.
type Query struct {
	Need Need
	// LimitDisks, with NeedLimits, are the disks whose limits are read;
	// none: every disk with throttling (Throttled).
	LimitDisks []string
	// Turn, with NeedLimits, spreads the throttle groups' reads over a
	// caller's repeated queries where QEMU has no qom-list-get (< 10.1):
	// every group at the first query, then one per query in turn. nil:
	// every group each time.
	Turn *LimitTurn
	// QOM are integer device properties to read besides (a VirtIO disk's
	// queue count: the queues package): on QEMU >= 10.1 one qom-list-get
	// of them all, before that one qom-get each. Answer.QOM has each.
	QOM []QOMRef
	// Then, when set, runs last in the same exchange with what was read:
	// a capability's own change that rests on it and must not cost a
	// connection of its own (latency.Tracker.Hook sets histograms on the
	// disks it finds without one, once per QEMU process). It sends only
	// Change's named commands: what is read is asked through the Needs.
	Then func(c Change, a *Answer) error
}

// Change is what Query.Then may send in Ask's exchange: the few commands
// by which pvediskcheck changes QEMU's state, each named, none a query.
// QEMU's error is returned as it is (a *qmp.Error for one it refuses).
type Change struct{ s qmp.Session }

// SetHistogram sets disk's latency histograms of reads, writes and
// flushes with boundaries (ns), or with none clears them
// (qmp.HistogramCommand).
func (c Change) SetHistogram(disk string, boundaries []int64) error {
	_, err := c.s.Exec(qmp.HistogramCommand(disk, boundaries))
	return err
}

// SetLimits applies full (all 18 ThrottleLimits fields) to the running
// disk as qemu-server does (qmp.ThrottleCommand: the throttle group's
// qom-set under -blockdev, block_set_io_throttle under -drive).
func (c Change) SetLimits(disk string, blockdev bool, full map[string]int64) error {
	name, args, err := qmp.ThrottleCommand(disk, blockdev, full)
	if err != nil {
		return err
	}
	_, err = c.s.Exec(name, args)
	return err
}

// SetLimits applies full to the running disk in an exchange of its own
// (Change.SetLimits; a busy socket retried until timeout has passed).
func (v *VM) SetLimits(ctx context.Context, timeout time.Duration, disk string, full map[string]int64) error {
	_, err := v.Ask(ctx, timeout, Query{Then: func(c Change, _ *Answer) error {
		return c.SetLimits(disk, v.Blockdev, full)
	}})
	return err
}

// QOMRef is one property of one QOM object.
type QOMRef struct{ Object, Property string }

// QOMValue is what QEMU said of a QOMRef: its value, or why it has none
// (QEMU's words for an object or property it refuses).
type QOMValue struct {
	Int *int
	Why string
}

// LimitTurn is what a caller that reads the limits at every sample (top)
// keeps between its queries of one VM (Query.Turn).
type LimitTurn struct {
	next    int
	started bool
}

// Answer is what an exchange read; only the fields of the Needs asked are
// set.
type Answer struct {
	// At is when QEMU produced the counters: the midpoint between sending
	// query-blockstats and reading its reply (connect time excluded, so a
	// socket that was briefly busy does not shift it).
	At time.Time
	// Waited is how long the exchange waited for a busy socket.
	Waited time.Duration
	Stats  map[string]qmp.BlockStats // device counters by disk id
	Nodes  map[string]qmp.BlockStats // node counters by node name
	Jobs   map[string][]string       // disk -> the types of the jobs on it
	// JobInfo is each disk's jobs as QEMU lists them (progress, speed).
	JobInfo map[string][]qmp.BlockJob
	// AllJobs is every block job QEMU lists, placed on a disk or not
	// (BackupHolds reads it: a backup whose disk is unknown holds the VM
	// all the same).
	AllJobs []qmp.BlockJob
	// Limits are the running limits read, by disk; LimitsRead the disks
	// asked for: one of them missing from Limits has none QEMU reports (a
	// disk without its throttle group, a drive with no medium).
	Limits     map[string]qemuserver.Limits
	LimitsRead []string
	Threads    threads.Map
	PCI        map[string]string // guestdisk.PCIDevices
	QOM        map[QOMRef]QOMValue
	// QEMU is the version QEMU's greeting states (zero when it states
	// none: a replay without one).
	QEMU qmp.Version
	// Package is the build QEMU's greeting states (query-version's
	// package, without a command): "pve-qemu-kvm_11.0.0-1"; "" when it
	// states none.
	Package string
	// Evidence is NeedEvidence's replies, in the order asked (also on a
	// failed exchange: what was read until then).
	Evidence []Reply
}

// Reply is one command's raw reply of NeedEvidence, or why there is none.
type Reply struct {
	Command string
	// Disk, for a throttle group's qom-get, is the disk whose group it is.
	Disk string
	// Raw is the command's return value as QEMU sent it.
	Raw string
	// Err is QEMU's refusal (for a group: any error of its read).
	Err error
}

// FetchLive asks QEMU, in one QMP exchange, for the run state and each
// disk's block graph, configured write-cache, negotiated write cache and
// running limits (Disk.Live).
func (v *VM) FetchLive(ctx context.Context, timeout time.Duration) error {
	_, err := v.Ask(ctx, timeout, Query{Need: NeedStatus | NeedLive})
	return err
}

// Ask runs q in one short exchange with the VM's QEMU, the one way any
// command reaches it: a socket that another client (pvestatd, say) holds
// briefly is retried until timeout has passed; only a socket that stays
// busy that long is reported (qmp.ErrBusy). The commands go in one fixed
// order whatever is asked: query-status, query-blockstats (devices, then
// nodes), query-block-jobs, query-block, the block graph, the QOM
// properties, query-iothreads and query-cpus-fast, query-pci, then
// Query.Then's changes (NeedEvidence, asked alone, has its own). NeedStatus
// sets v.Status and NeedLive each disk's Live; every exchange sets
// v.QEMUPackage from the greeting, which states the build whatever is
// asked (no Need, no command).
func (v *VM) Ask(ctx context.Context, timeout time.Duration, q Query) (*Answer, error) {
	return v.AskPatient(ctx, timeout, timeout, q)
}

// AskPatient is Ask with its own patience for a busy socket (a sample of a
// window gives up a tick sooner than a command gives up).
func (v *VM) AskPatient(ctx context.Context, timeout, patience time.Duration, q Query) (*Answer, error) {
	if !v.Running {
		return nil, errors.New("not running")
	}
	if q.Need&NeedEvidence != 0 && (q.Need != NeedEvidence || q.Then != nil || len(q.QOM) > 0) {
		return nil, errors.New("vm.NeedEvidence is asked alone")
	}
	var a *Answer
	var blocks []qmp.BlockDevice
	var graph *qmp.Graph
	var wc map[string]string
	status := ""
	start := time.Now()
	err := qmp.DoRetry(ctx, v.QMPSocket(), timeout, patience, func(s qmp.Session) error {
		a = &Answer{Waited: time.Since(start)}
		a.QEMU, _ = s.Version()
		a.Package = s.Package()
		if q.Need&NeedEvidence != 0 {
			return v.askEvidence(s, q.LimitDisks, a)
		}
		var err error
		if status, err = askStatus(s, q.Need); err != nil {
			return err
		}
		if err := askStats(s, q.Need, a); err != nil {
			return err
		}
		var debug *gjson.Result
		if q.Need&NeedJobs != 0 {
			if debug, err = v.askJobs(s, a); err != nil {
				return err
			}
		}
		if q.Need&NeedLive != 0 || q.Need&NeedLimits != 0 && !v.Blockdev {
			ret, err := s.Exec("query-block", nil)
			if err != nil {
				return err
			}
			blocks = qmp.ParseQueryBlock(ret)
		}
		if q.Need&NeedLive != 0 {
			nodes, err := s.Exec("query-named-block-nodes", map[string]any{"flat": true})
			if err != nil {
				return err
			}
			graph = qmp.ParseNamedBlockNodes(nodes)
			if !graph.HasEdges() {
				// QEMU < 10.1 lists no children: take the edges from the debug graph.
				if debug == nil {
					dg, err := s.Exec("x-debug-query-block-graph", nil)
					if err != nil {
						return err
					}
					debug = &dg
				}
				graph.AddDebugGraph(*debug)
			}
		}
		if wc, err = v.askProps(s, q, blocks, a); err != nil {
			return err
		}
		if len(q.QOM) > 0 {
			if a.QOM, err = askQOM(s, q.QOM); err != nil {
				return err
			}
		}
		if q.Need&NeedThreads != 0 {
			io, err := s.Exec("query-iothreads", nil)
			if err != nil {
				return err
			}
			cpus, err := s.Exec("query-cpus-fast", nil)
			if err != nil {
				return err
			}
			a.Threads = threads.New(v.Pid, io, cpus)
		}
		if q.Need&NeedPCI != 0 {
			ret, err := s.Exec("query-pci", nil)
			if err != nil {
				return err
			}
			a.PCI = guestdisk.PCIDevices(ret)
		}
		if q.Then != nil {
			return q.Then(Change{s}, a)
		}
		return nil
	})
	if err != nil {
		return a, err
	}
	if a.Package != "" {
		v.QEMUPackage = a.Package
	}
	if q.Need&NeedStatus != 0 {
		v.Status = status
	}
	if q.Need&NeedLive != 0 {
		v.setLive(blocks, graph, wc, a.Limits)
	}
	return a, nil
}

// evidenceCommands are NeedEvidence's queries, in their order.
var evidenceCommands = []string{"query-block", "query-blockstats", "query-block-jobs", "query-iothreads", "query-cpus-fast"}

// askEvidence asks NeedEvidence: each reply kept raw in a.Evidence, a
// command QEMU refuses kept with its refusal; then one qom-get per
// throttle group of groups, any error of one kept and the next asked.
// A failing exchange stops it, with what was read until then.
func (v *VM) askEvidence(s qmp.Session, groups []string, a *Answer) error {
	rets := map[string]gjson.Result{}
	for _, c := range evidenceCommands {
		ret, err := s.Exec(c, nil)
		var qe *qmp.Error
		switch {
		case errors.As(err, &qe):
			a.Evidence = append(a.Evidence, Reply{Command: c, Err: err})
			continue
		case err != nil:
			return err
		}
		a.Evidence = append(a.Evidence, Reply{Command: c, Raw: ret.Raw})
		rets[c] = ret
	}
	a.Stats = map[string]qmp.BlockStats{}
	for _, b := range qmp.ParseBlockstats(rets["query-blockstats"]) {
		a.Stats[b.ID] = b
	}
	a.Threads = threads.New(v.Pid, rets["query-iothreads"], rets["query-cpus-fast"])
	for _, id := range groups {
		ret, err := s.Exec("qom-get", map[string]any{"path": qmp.ThrottleGroupPath(id), "property": "limits"})
		a.Evidence = append(a.Evidence, Reply{Command: "qom-get", Disk: id, Raw: ret.Raw, Err: err})
	}
	return nil
}

// askQOM reads refs (Query.QOM): one qom-list-get of every object where
// QEMU has it, else (or when one object missing fails the list) one
// qom-get each. An object or property QEMU refuses gets its words in Why;
// a failing exchange is returned.
func askQOM(s qmp.Session, refs []QOMRef) (map[QOMRef]QOMValue, error) {
	var keys []QOMRef
	out := map[QOMRef]QOMValue{}
	for _, k := range refs {
		if _, dup := out[k]; !dup {
			out[k] = QOMValue{}
			keys = append(keys, k)
		}
	}
	if s.HasQOMListGet() {
		paths := make([]string, len(keys))
		for i, k := range keys {
			paths[i] = k.Object
		}
		ret, err := s.Exec("qom-list-get", map[string]any{"paths": paths})
		var qe *qmp.Error
		var se *qmp.ShapeError
		switch {
		case err == nil:
			if objs, perr := qmp.ParseQOMListGet(ret, len(paths)); perr == nil {
				for i, k := range keys {
					if v, ok := objs[i][k.Property]; ok {
						n := int(v.Int())
						out[k] = QOMValue{Int: &n}
					} else {
						out[k] = QOMValue{Why: "qom-list-get " + k.Object + ": no " + k.Property}
					}
				}
				return out, nil
			}
		case errors.As(err, &qe), errors.As(err, &se):
			// One object missing fails the list: ask one by one.
		default:
			return nil, err
		}
	}
	for _, k := range keys {
		r, err := s.Exec("qom-get", map[string]any{"path": k.Object, "property": k.Property})
		var qe *qmp.Error
		switch {
		case errors.As(err, &qe):
			out[k] = QOMValue{Why: "qom-get " + k.Object + " " + k.Property + ": " + qe.Error()}
			continue
		case err != nil:
			return nil, err
		}
		n := int(r.Int())
		out[k] = QOMValue{Int: &n}
	}
	return out, nil
}

// askStatus is query-status's run state when asked ("" when not, or from a
// replay recorded without it: every QEMU has it).
func askStatus(s qmp.Session, need Need) (string, error) {
	if need&NeedStatus == 0 {
		return "", nil
	}
	st, err := s.Exec("query-status", nil)
	var qe *qmp.Error
	switch {
	case errors.As(err, &qe) && qe.Class == "CommandNotFound":
		return "", nil
	case err != nil:
		return "", err
	}
	return st.Get("status").String(), nil
}

// askStats reads the devices' (and asked, the nodes') counters, timed by
// the midpoint of the devices' command.
func askStats(s qmp.Session, need Need, a *Answer) error {
	if need&(NeedStats|NeedNodeStats) == 0 {
		return nil
	}
	t0 := time.Now()
	ret, err := s.Exec("query-blockstats", nil)
	if err != nil {
		return err
	}
	t1 := time.Now()
	a.At = t0.Add(t1.Sub(t0) / 2)
	a.Stats = map[string]qmp.BlockStats{}
	for _, b := range qmp.ParseBlockstats(ret) {
		a.Stats[b.ID] = b
	}
	if need&NeedNodeStats == 0 {
		return nil
	}
	if ret, err = s.Exec("query-blockstats", map[string]any{"query-nodes": true}); err != nil {
		return err
	}
	a.Nodes = map[string]qmp.BlockStats{}
	for _, b := range qmp.ParseBlockstats(ret) {
		a.Nodes[b.NodeName] = b
	}
	return nil
}

// askJobs asks for block jobs and, only while there are some, for the
// block graph that tells which disks they work on (returned, for NeedLive
// to reuse). Without the graph command a job is placed by its name.
func (v *VM) askJobs(s qmp.Session, a *Answer) (*gjson.Result, error) {
	a.Jobs, a.JobInfo = map[string][]string{}, map[string][]qmp.BlockJob{}
	ret, err := s.Exec("query-block-jobs", nil)
	if err != nil {
		return nil, err
	}
	jobs := qmp.ParseBlockJobs(ret)
	a.AllJobs = jobs
	v.sawJobs(jobs)
	if len(jobs) == 0 {
		return nil, nil
	}
	var disksOf map[string][]string
	var fleecing map[string]string
	var debug *gjson.Result
	g, err := s.Exec("x-debug-query-block-graph", nil)
	var qe *qmp.Error
	if err == nil {
		disksOf, fleecing, debug = qmp.JobDisks(g), qmp.JobFleecing(g), &g
	} else if !errors.As(err, &qe) {
		return nil, err
	}
	for _, j := range jobs {
		j.Fleecing, j.Graphed = fleecing[j.ID] // a job the bounded walk left out is not graphed
		ds, ok := disksOf[j.ID]
		if !ok {
			ds = v.jobDisksByName(j.ID)
		}
		for _, d := range ds {
			a.Jobs[d] = append(a.Jobs[d], j.Type)
			a.JobInfo[d] = append(a.JobInfo[d], j)
		}
	}
	return debug, nil
}

// jobDisksByName is the fallback without the graph: a job named after the
// disk's node or device (drive-backup's default id drive-scsi1,
// qemu-server's mirror-scsi1).
func (v *VM) jobDisksByName(job string) []string {
	for _, d := range v.Disks {
		if d.Running == nil {
			continue
		}
		for _, name := range []string{d.ID, "drive-" + d.ID, "mirror-" + d.ID} {
			if job == name {
				return []string{d.ID}
			}
		}
	}
	return nil
}

// askProps reads, in one ReadDiskProps, the write-cache of every device
// (NeedLive) and the running limits asked (NeedLive: every disk; NeedLimits:
// q.LimitDisks in q.Turn's turn).
func (v *VM) askProps(s qmp.Session, q Query, blocks []qmp.BlockDevice, a *Answer) (map[string]string, error) {
	if q.Need&(NeedLive|NeedLimits) == 0 {
		return nil, nil
	}
	var wcIDs []string
	if q.Need&NeedLive != 0 {
		// A device without write-cache (scsi-block, cd) or a hot-plugged
		// disk without a group is left out.
		for _, b := range blocks {
			if b.Inserted && strings.HasPrefix(b.QdevPath, "/machine/peripheral/") {
				wcIDs = append(wcIDs, b.ID)
			}
		}
	}
	ask := v.limitDisks(q, blocks)
	a.Limits, a.LimitsRead = map[string]qemuserver.Limits{}, ask
	var groups []string
	if !v.Blockdev {
		// -drive: query-block has them all, in legacy names.
		want := map[string]bool{}
		for _, id := range ask {
			want[id] = true
		}
		for _, b := range blocks {
			if b.Inserted && want[b.ID] {
				a.Limits[b.ID] = DriveLimits(b)
			}
		}
	} else {
		groups = ask
		if t := q.Turn; t != nil && q.Need&NeedLive == 0 && len(ask) > 0 {
			if t.started && !s.HasQOMListGet() {
				groups = []string{ask[t.next%len(ask)]}
				t.next++
			}
			t.started = true
			a.LimitsRead = groups
		}
	}
	props, err := s.ReadDiskProps(wcIDs, groups)
	if err != nil {
		return nil, err
	}
	for id, l := range props.Limits {
		a.Limits[id] = qemuserver.Limits(l).Normal()
	}
	return props.WriteCache, nil
}

// limitDisks are the disks whose running limits q reads. NeedLive: every
// disk with throttling that query-block lists with a medium, in its order.
// Else those of q.LimitDisks with throttling, or with none named every disk
// with throttling.
func (v *VM) limitDisks(q Query, blocks []qmp.BlockDevice) []string {
	var out []string
	switch {
	case q.Need&NeedLive != 0:
		for _, b := range blocks {
			if d := v.Disk(b.ID); b.Inserted && d != nil && v.Throttled(d) {
				out = append(out, b.ID)
			}
		}
	case q.LimitDisks != nil:
		for _, id := range q.LimitDisks {
			if d := v.Disk(id); d != nil && v.Throttled(d) {
				out = append(out, id)
			}
		}
	default:
		for _, d := range v.Disks {
			if v.Throttled(d) {
				out = append(out, d.ID)
			}
		}
	}
	return out
}

// Throttled reports a running disk whose running limits QEMU reports (the
// one decision, read by Ask for every caller): under -drive every attached
// drive (query-block lists them), under -blockdev one with a throttle
// group (HasThrottleGroup); never an empty CD-ROM drive.
func (v *VM) Throttled(d *Disk) bool {
	if d.Running == nil || d.Drive != nil && d.Drive.IsCDROM() && d.Drive.IsNone() {
		return false
	}
	return !v.Blockdev || v.HasThrottleGroup(d)
}

// setLive sets each disk's Live view from what NeedLive read.
func (v *VM) setLive(blocks []qmp.BlockDevice, graph *qmp.Graph, wc map[string]string, limits map[string]qemuserver.Limits) {
	for _, b := range blocks {
		d := v.Disk(b.ID)
		if d == nil {
			continue
		}
		l := &Live{Inserted: b.Inserted, TopNode: b.NodeName, GuestWriteCache: b.GuestWriteCache, WriteCacheProp: wc[b.ID], Limits: limits[b.ID], IOStatus: b.IOStatus}
		if b.Inserted {
			if ch, ok := graph.Chain(b.NodeName); ok {
				l.Format, l.Protocol = ch.Format, ch.Protocol
				l.Backing = graph.Backing(ch.Format.Name)
			}
			l.WriteCache = l.WriteCacheProp
			if l.WriteCache != "on" && l.WriteCache != "off" {
				// -drive: the device follows the BlockBackend's cache mode
				// from the command line.
				l.WriteCache = "on"
				if d.Running != nil {
					l.WriteCache = d.Running.WriteCache
				}
			}
		}
		d.Live = l
	}
}
