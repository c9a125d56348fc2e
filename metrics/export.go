package metrics

import (
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/discard"
	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
	"github.com/pvediskcheck/pvediskcheck/threads"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// Namespace prefixes every metric name.
const Namespace = "pvediskcheck"

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(Namespace+"_"+name, help, labels, nil)
}

var diskLabels = []string{"vmid", "disk"}

// counter is one per-disk counter of query-blockstats.
type counter struct {
	desc  *prometheus.Desc
	value func(b *qmp.BlockStats) float64
}

func seconds(ns int64) float64 { return float64(ns) / 1e9 }

// deviceCounters are the device's counters: what the guest asked of the
// disk, as QEMU accounts it on the device (BlockBackend).
var deviceCounters = []counter{
	{desc("disk_read_bytes_total", "Bytes read by the guest from the disk (query-blockstats rd_bytes).", diskLabels...), func(b *qmp.BlockStats) float64 { return float64(b.RdBytes) }},
	{desc("disk_write_bytes_total", "Bytes written by the guest to the disk (wr_bytes).", diskLabels...), func(b *qmp.BlockStats) float64 { return float64(b.WrBytes) }},
	{desc("disk_read_operations_total", "Read requests completed (rd_operations).", diskLabels...), func(b *qmp.BlockStats) float64 { return float64(b.RdOps) }},
	{desc("disk_write_operations_total", "Write requests completed (wr_operations).", diskLabels...), func(b *qmp.BlockStats) float64 { return float64(b.WrOps) }},
	{desc("disk_flush_operations_total", "Flush requests completed (flush_operations).", diskLabels...), func(b *qmp.BlockStats) float64 { return float64(b.FlushOps) }},
	{desc("disk_read_seconds_total", "Time read requests took, summed over requests (rd_total_time_ns).", diskLabels...), func(b *qmp.BlockStats) float64 { return seconds(b.RdTotalTimeNs) }},
	{desc("disk_write_seconds_total", "Time write requests took, summed over requests (wr_total_time_ns).", diskLabels...), func(b *qmp.BlockStats) float64 { return seconds(b.WrTotalTimeNs) }},
	{desc("disk_flush_seconds_total", "Time flush requests took, summed over requests (flush_total_time_ns).", diskLabels...), func(b *qmp.BlockStats) float64 { return seconds(b.FlushTotalTimeNs) }},
	{desc("disk_discard_operations_total", "Discard (unmap) requests of the guest completed (unmap_operations).", diskLabels...), func(b *qmp.BlockStats) float64 { return float64(b.UnmapOps) }},
	{desc("disk_discard_bytes_total", "Bytes the guest discarded (unmap_bytes).", diskLabels...), func(b *qmp.BlockStats) float64 { return float64(b.UnmapBytes) }},
	{desc("disk_discard_seconds_total", "Time discard requests took, summed over requests (unmap_total_time_ns).", diskLabels...), func(b *qmp.BlockStats) float64 { return seconds(b.UnmapTotalTimeNs) }},
	{desc("disk_failed_operations_total", "Requests that ended in an error: read, write, flush and discard (failed_*_operations).", diskLabels...), func(b *qmp.BlockStats) float64 { return float64(b.FailedOps) }},
	{desc("disk_invalid_operations_total", "Requests QEMU refused before submitting them: out of range, misaligned (invalid_*_operations).", diskLabels...), func(b *qmp.BlockStats) float64 { return float64(b.InvalidOps) }},
}

// protocolCounters are the protocol node's counters: what reached the
// storage (driver-specific of the file and host_device drivers).
var protocolCounters = []counter{
	{desc("disk_storage_discard_operations_total", "Discards the storage accepted (the protocol node's discard-nb-ok).", diskLabels...), func(b *qmp.BlockStats) float64 { return float64(b.DiscardNbOK) }},
	{desc("disk_storage_discard_bytes_total", "Bytes the storage accepted to discard (the protocol node's discard-bytes-ok).", diskLabels...), func(b *qmp.BlockStats) float64 { return float64(b.DiscardBytesOK) }},
	{desc("disk_storage_discard_failed_operations_total", "Discards the storage refused (the protocol node's discard-nb-failed).", diskLabels...), func(b *qmp.BlockStats) float64 { return float64(b.DiscardNbFailed) }},
}

var (
	diskInfo = desc("disk_info", "A running disk, labelled with what it runs with as read from QEMU (always 1).",
		"vmid", "disk", "controller", "storage", "cache_configured", "cache_effective", "aio", "iothread", "discard")

	limitBytes       = desc("disk_limit_bytes_per_second", "Running I/O limit in bytes per second, by direction (total, read, write).", "vmid", "disk", "direction")
	limitOps         = desc("disk_limit_operations_per_second", "Running I/O limit in operations per second, by direction.", "vmid", "disk", "direction")
	limitBurstBytes  = desc("disk_limit_burst_bytes_per_second", "Running burst limit in bytes per second, by direction.", "vmid", "disk", "direction")
	limitBurstOps    = desc("disk_limit_burst_operations_per_second", "Running burst limit in operations per second, by direction.", "vmid", "disk", "direction")
	limitBurstLength = desc("disk_limit_burst_length_seconds", "How long a burst may last, by direction and limit (bytes, operations).", "vmid", "disk", "direction", "limit")
	diskStalled      = desc("disk_stalled_seconds", "How long the disk has completed no request while the node shows requests outstanding for it (QEMU's idle_time_ns; serving threads in state D or the node device's requests in flight: `pvediskcheck stall`); 0 when it is not stalled.", diskLabels...)
	diskInFlight     = desc("disk_inflight_requests", "Requests in flight on the node block device under the disk's volume (/sys/class/block/DEV/stat); absent when the volume is no block device on the node.", diskLabels...)
	layerRequests    = desc("disk_layer_requests_total", "Reads and writes the layer completed for the disk (pvediskcheck top --layers): layer qemu (rd_operations + wr_operations) or storage (the node device under the volume: its diskstats' reads and writes; for a file, the device under its filesystem, shared: pvediskcheck_disk_storage_device_info).", "vmid", "disk", "layer")
	layerSeconds     = desc("disk_layer_seconds_total", "Time those requests took at the layer, summed over requests (QEMU's rd/wr_total_time_ns; the node device's read and write ticks): rate(seconds) / rate(requests) is the layer's wait per request.", "vmid", "disk", "layer")
	storageDevice    = desc("disk_storage_device_info", "The node block device the storage layer of the disk is (always 1): shared is true when it is the device under the filesystem a file volume is on.", "vmid", "disk", "device", "shared")
	guestFSUsed      = desc("disk_guest_filesystem_used_bytes", "Bytes a mounted guest filesystem on the disk uses, as the guest agent reports it (metrics --guest: guest-get-fsinfo used-bytes); absent when the agent does not answer or report it.", "vmid", "disk", "mountpoint", "type")
	guestFSSize      = desc("disk_guest_filesystem_size_bytes", "Size of a mounted guest filesystem on the disk (metrics --guest: guest-get-fsinfo total-bytes, the blocks the filesystem counts).", "vmid", "disk", "mountpoint", "type")
	reclaimable      = desc("disk_reclaimable_bytes", "At most what a trim (fstrim in the guest, pvediskcheck discard --trim) would give back to the disk's thin volume: its allocation in the thin pool minus what the guest's filesystems on it use (metrics --guest); absent where that is unknown (pvediskcheck_disk_reclaimable_info says why).", diskLabels...)
	reclaimableInfo  = desc("disk_reclaimable_info", "Whether what a trim would give back to the disk's thin volume is known (always 1; metrics --guest): verdict known, unknown or no-agent, and the first reason's code (pvediskcheck discard).", "vmid", "disk", "verdict", "reason")
	limitsDiffer     = desc("disk_limits_differ_from_config", "1 when the running I/O limits differ from the config's (a live change not saved, or a config change not applied), else 0.", diskLabels...)

	findings = desc("check_findings", "Findings of `pvediskcheck check`, counted by code and severity.", "vmid", "code", "severity")

	qemuBuild      = desc("vm_qemu_build_info", "The QEMU build a running VM runs (always 1): the package string its QMP greeting states, the package and version read from it, and the version of that package installed now (empty when unknown).", "vmid", "build", "package", "version", "installed_version")
	qemuOutdated   = desc("vm_qemu_outdated", "1 when the VM runs a QEMU binary an upgrade replaced since it started, or another version than the installed one (check's qemu-outdated), else 0; absent where neither the binary nor the installed version could be read.", "vmid")
	guestFrozen    = desc("vm_guest_frozen", "1 when the guest agent says the guest's filesystems are frozen (guest-fsfreeze-status: its writes hang until thawed; check's guest-frozen), 0 when thawed; absent where the agent was not asked (a backup holds the VM: pvediskcheck_vm_backup_holds) or did not answer, and for a VM without an agent socket.", "vmid")
	backupHolds    = desc("vm_backup_holds", "1 when a backup holds the VM (lock: backup, or a backup block job in QEMU), so the collection left its guest agent alone (vzdump needs its one-client socket to thaw the guest), else 0; absent for a VM without an agent socket.", "vmid")
	qemuAdvisories = desc("vm_qemu_advisories", "Known disk bugs of the QEMU build the VM runs that one of its running disks is exposed to (check's qemu-advisory findings); absent where the build is unknown.", "vmid")

	policyViolations = desc("policy_violations", "Requirements of the --policy file's rule that the VM's disks break (in the config, the running VM or [PENDING]); 0 where every disk the rule selects holds them. Only rules that select a disk of the VM.", "vmid", "rule")
	policyRuleDisks  = desc("policy_rule_disks", "Disks of the node's VMs the --policy file's rule selects (0: it selects none, a selector matching nothing here).", "rule")

	vmDirty        = desc("vm_page_cache_dirty_bytes", "Page cache the VM's QEMU has written and not yet sent to storage, in node RAM (its cgroup qemu.slice/VMID.scope: memory.stat file_dirty, v1 dirty); cache=writeback keeps what the guest has not flushed there, cache=unsafe all of it. Absent where the node has no cgroup of the VM.", "vmid")
	vmWriteback    = desc("vm_page_cache_writeback_bytes", "Page cache of the VM's QEMU being written to storage now (memory.stat file_writeback, v1 writeback); with pvediskcheck_vm_page_cache_dirty_bytes what a host crash now loses.", "vmid")
	vmIOPressure   = desc("vm_io_pressure_seconds_total", "Time the VM's QEMU threads waited for I/O (its cgroup's io.pressure total): kind some (at least one waited), full (all did).", "vmid", "kind")
	vmIOBytes      = desc("vm_io_bytes_total", "Bytes the VM's QEMU read, wrote and discarded on a node device, from its cgroup's io.stat (cgroup v2 with the io controller for qemu.slice), by device (MAJ:MIN) and direction (read, write, discard).", "vmid", "device", "direction")
	vmIOOps        = desc("vm_io_operations_total", "I/O operations of the VM's QEMU on a node device, from its cgroup's io.stat, by device (MAJ:MIN) and direction (read, write, discard).", "vmid", "device", "direction")
	vmIOPressure10 = desc("vm_io_pressure_avg10_ratio", "Share of the last 10 s the VM's QEMU threads waited for I/O (io.pressure avg10, 0 to 1), by kind (some, full).", "vmid", "kind")

	vmCPU       = desc("vm_cpu_seconds_total", "CPU time of the VM's QEMU threads by role: main-loop, iothread (all iothreads), vcpu (all vCPUs).", "vmid", "role")
	iothreadCPU = desc("iothread_cpu_seconds_total", "CPU time of one iothread of the VM (its id as pvediskcheck_disk_info's iothread label).", "vmid", "iothread")

	poolInfo        = desc("thinpool_info", "A thin pool of the node (always 1): its storage, type (lvmthin, zfspool) and pool.", "storage", "type", "pool")
	poolSize        = desc("thinpool_size_bytes", "Size of the thin pool.", "storage")
	poolAllocated   = desc("thinpool_allocated_bytes", "Space of the thin pool its volumes use.", "storage")
	poolDataUsed    = desc("thinpool_data_used_ratio", "Share of the thin pool's data space in use, 0 to 1.", "storage")
	poolMetaSize    = desc("thinpool_metadata_size_bytes", "Size of the LVM thin pool's metadata.", "storage")
	poolMetaUsed    = desc("thinpool_metadata_used_ratio", "Share of the LVM thin pool's metadata in use, 0 to 1.", "storage")
	poolVirtual     = desc("thinpool_virtual_bytes", "Sum of the virtual sizes of the pool's thin volumes, snapshots included.", "storage")
	poolSnapVirtual = desc("thinpool_snapshot_virtual_bytes", "The thin snapshots' share of pvediskcheck_thinpool_virtual_bytes.", "storage")
	poolOvercommit  = desc("thinpool_overcommit_ratio", "Virtual sizes over pool size: above 1 the pool can fill before its volumes do.", "storage")

	// When an LVM thin pool stops accepting writes (thinpool.Fill).
	poolStopAfter     = desc("thinpool_writes_stop_after_bytes", "More data the LVM thin pool takes before it stops accepting writes (at 100 % data or metadata), autoextend's growth into the VG included.", "storage")
	poolMetaFirst     = desc("thinpool_metadata_fills_first", "1 when the LVM thin pool's metadata fills before its data at today's ratio (writes then fail with EIO, not ENOSPC), else 0.", "storage")
	poolErrorWhenFull = desc("thinpool_error_when_full", "1 when the LVM thin pool fails writes at once when full (lv_when_full error), 0 when it queues them (queue).", "storage")
	poolGrows         = desc("thinpool_autoextend_grows", "1 when LVM's autoextend grows the thin pool (threshold below 100, monitored, free space in the VG), else 0.", "storage")
	poolAutoThreshold = desc("thinpool_autoextend_threshold_ratio", "LVM's thin_pool_autoextend_threshold, 0 to 1 (1: off).", "storage")
	poolVGFree        = desc("thinpool_vg_free_bytes", "Free space of the thin pool's volume group, what autoextend grows into.", "storage")
	poolNoSpaceWait   = desc("thinpool_no_space_timeout_seconds", "How long dm-thin holds writes to a full pool that queues them (dm_thin_pool no_space_timeout; 0: for ever).", "storage")

	latencyHist = map[latency.Kind]*prometheus.Desc{
		latency.Read:  desc("disk_read_latency_seconds", "Latency of the guest's reads, from QEMU's latency histogram (metrics --histogram: set by pvediskcheck, or one found set, with its own boundaries), counted from when this exporter first read it.", diskLabels...),
		latency.Write: desc("disk_write_latency_seconds", "Latency of the guest's writes, from QEMU's latency histogram (metrics --histogram), counted from when this exporter first read it.", diskLabels...),
		latency.Flush: desc("disk_flush_latency_seconds", "Latency of the guest's flushes, from QEMU's latency histogram (metrics --histogram), counted from when this exporter first read it.", diskLabels...),
	}

	collectDuration = desc("collect_duration_seconds", "How long the collection took.")
	collectErrors   = desc("collect_errors", "Errors of the collection by source (node, config, qmp, threads, thinpool, labels); a VM whose socket stayed busy counts here and has no live series, as does a VM or pool whose data cannot be a label value (labels).", "source")
)

// limitDescs is the metric of each burst-less QEMU limit name kind.
var limitDescs = map[[2]string]*prometheus.Desc{
	{"bps", ""}: limitBytes, {"iops", ""}: limitOps, {"bps", "max"}: limitBurstBytes, {"iops", "max"}: limitBurstOps,
}

// Describe sends every metric's description: the set is fixed.
func (s *Snapshot) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range deviceCounters {
		ch <- c.desc
	}
	for _, c := range protocolCounters {
		ch <- c.desc
	}
	for _, d := range []*prometheus.Desc{diskInfo, diskStalled, diskInFlight, layerRequests, layerSeconds, storageDevice, guestFSUsed, guestFSSize, reclaimable, reclaimableInfo, limitBytes, limitOps, limitBurstBytes, limitBurstOps, limitBurstLength, limitsDiffer,
		findings, qemuBuild, qemuOutdated, qemuAdvisories, guestFrozen, backupHolds, policyViolations, policyRuleDisks, vmCPU, iothreadCPU, vmDirty, vmWriteback, vmIOPressure, vmIOPressure10, vmIOBytes, vmIOOps, poolInfo, poolSize, poolAllocated, poolDataUsed, poolMetaSize, poolMetaUsed,
		poolVirtual, poolSnapVirtual, poolOvercommit, poolStopAfter, poolMetaFirst, poolErrorWhenFull, poolGrows,
		poolAutoThreshold, poolVGFree, poolNoSpaceWait, collectDuration, collectErrors} {
		ch <- d
	}
	for _, k := range latency.Kinds {
		ch <- latencyHist[k]
	}
}

// Collect sends the collection's metrics: each VM's and each pool's
// series whole, or none of them (Exportable: Collect has counted and left
// out what client_golang refuses, so a snapshot built elsewhere is never
// sent in part).
func (s *Snapshot) Collect(ch chan<- prometheus.Metric) {
	for _, v := range s.VMs {
		if ms, err := vmSeries(v); err == nil {
			sendAll(ch, ms)
		}
	}
	for _, p := range s.Pools {
		if ms, err := poolSeries(p); err == nil {
			sendAll(ch, ms)
		}
	}
	for _, r := range s.PolicyRules {
		if m, err := prometheus.NewConstMetric(policyRuleDisks, prometheus.GaugeValue, float64(r.Disks), r.Rule); err == nil {
			ch <- m
		}
	}
	ch <- prometheus.MustNewConstMetric(collectDuration, prometheus.GaugeValue, s.Duration.Seconds())
	for _, src := range Sources {
		ch <- prometheus.MustNewConstMetric(collectErrors, prometheus.GaugeValue, float64(s.Errors[src]), string(src))
	}
}

func sendAll(ch chan<- prometheus.Metric, ms []prometheus.Metric) {
	for _, m := range ms {
		ch <- m
	}
}

// builder builds one VM's or one pool's metrics: every one through
// client_golang's own constructor, whose checks (label values valid UTF-8,
// as many as the metric has labels) are the one judge of what can be
// exported; the first it refuses is the error, naming the metric.
type builder struct {
	ms  []prometheus.Metric
	err error
}

func (b *builder) add(m prometheus.Metric, err error) {
	if err != nil && b.err == nil {
		b.err = err
	}
	if err == nil {
		b.ms = append(b.ms, m)
	}
}

func (b *builder) gauge(d *prometheus.Desc, v float64, labels ...string) {
	b.add(prometheus.NewConstMetric(d, prometheus.GaugeValue, v, labels...))
}

func (b *builder) count(d *prometheus.Desc, v float64, labels ...string) {
	b.add(prometheus.NewConstMetric(d, prometheus.CounterValue, v, labels...))
}

func (b *builder) done() ([]prometheus.Metric, error) {
	if b.err != nil {
		return nil, b.err
	}
	return b.ms, nil
}

// vmSeries are a VM's metrics: its disks', its findings', its threads'.
// Every label value comes from the VM's data (the config's storage and
// disk keys, QEMU's iothread ids and modes), so a value that cannot be
// exported is that VM's error, never the collection's.
func vmSeries(v VM) ([]prometheus.Metric, error) {
	b := &builder{}
	vmid := strconv.Itoa(v.VMID)
	for _, d := range v.Disks {
		b.gauge(diskInfo, 1, vmid, d.ID, d.Controller, d.Storage, d.CacheConfigured, d.CacheEffective, d.AIO, d.IOThread, d.Discard)
		if d.Stats != nil {
			for _, c := range deviceCounters {
				b.count(c.desc, c.value(d.Stats), vmid, d.ID)
			}
			b.gauge(diskStalled, d.Stall.StalledSeconds, vmid, d.ID)
		}
		if d.Stall.InFlight != nil {
			b.gauge(diskInFlight, float64(*d.Stall.InFlight), vmid, d.ID)
		}
		if st := d.Stats; st != nil {
			b.count(layerRequests, float64(st.RdOps+st.WrOps), vmid, d.ID, "qemu")
			b.count(layerSeconds, seconds(st.RdTotalTimeNs+st.WrTotalTimeNs), vmid, d.ID, "qemu")
		}
		if n := d.Node; n != nil {
			b.gauge(storageDevice, 1, vmid, d.ID, n.Device, strconv.FormatBool(d.NodeShared))
			b.count(layerRequests, float64(n.ReadIOs+n.WriteIOs), vmid, d.ID, "storage")
			b.count(layerSeconds, float64(n.ReadTicksMs+n.WriteTicksMs)/1000, vmid, d.ID, "storage")
		}
		if d.Protocol != nil {
			for _, c := range protocolCounters {
				b.count(c.desc, c.value(d.Protocol), vmid, d.ID)
			}
		}
		if d.Limits != nil {
			collectLimits(b.gauge, vmid, d)
		}
		collectGuest(b.gauge, vmid, d)
		for _, k := range latency.Kinds {
			if h, ok := d.Latency[k]; ok {
				b.add(prometheus.NewConstHistogram(latencyHist[k], h.Count, h.SumS, h.Buckets, vmid, d.ID))
			}
		}
	}
	collectFindings(b.gauge, vmid, v.Findings)
	collectQEMU(b.gauge, vmid, v)
	collectFreeze(b.gauge, vmid, v.GuestFreeze)
	for _, r := range v.Policy {
		b.gauge(policyViolations, float64(r.Violations), vmid, r.Rule)
	}
	if c := v.Cgroup; c.Measured() {
		b.gauge(vmDirty, float64(c.DirtyBytes), vmid)
		b.gauge(vmWriteback, float64(c.WritebackBytes), vmid)
		if p := c.IOPressure; p != nil {
			b.count(vmIOPressure, float64(p.SomeTotalUs)/1e6, vmid, "some")
			b.count(vmIOPressure, float64(p.FullTotalUs)/1e6, vmid, "full")
			b.gauge(vmIOPressure10, p.SomeAvg10/100, vmid, "some")
			b.gauge(vmIOPressure10, p.FullAvg10/100, vmid, "full")
		}
		for _, d := range c.IO {
			for _, x := range []struct {
				dir        string
				bytes, ops int64
			}{{"read", d.ReadBytes, d.ReadIOs}, {"write", d.WriteBytes, d.WriteIOs}, {"discard", d.DiscardBytes, d.DiscardIOs}} {
				b.count(vmIOBytes, float64(x.bytes), vmid, d.Device, x.dir)
				b.count(vmIOOps, float64(x.ops), vmid, d.Device, x.dir)
			}
		}
	}
	if c := v.CPU; c != nil {
		b.count(vmCPU, c.MainLoop, vmid, string(threads.MainLoop))
		b.count(vmCPU, c.VCPUs, vmid, string(threads.VCPU))
		if len(c.IOThreads) > 0 {
			sum := 0.0
			for _, id := range c.sortedIOThreads() {
				sum += c.IOThreads[id]
				b.count(iothreadCPU, c.IOThreads[id], vmid, id)
			}
			b.count(vmCPU, sum, vmid, string(threads.IOThread))
		}
	}
	return b.done()
}

// poolSeries are one thin pool's metrics (labels from storage.cfg and lvs
// or zfs).
func poolSeries(p thinpool.Pool) ([]prometheus.Metric, error) {
	b := &builder{}
	collectPool(b.gauge, p)
	return b.done()
}

// Exportable leaves out of s each VM, each pool and each policy rule
// whose series client_golang refuses (vmSeries, poolSeries): a VM keeps its VMID and
// nothing else, and each one left out counts in SourceLabels. The rest of
// the collection is exported as it is.
func (s *Snapshot) Exportable() {
	for i, v := range s.VMs {
		if _, err := vmSeries(v); err != nil {
			s.VMs[i] = VM{VMID: v.VMID, Running: v.Running, Refused: err.Error()}
			s.Errors[SourceLabels]++
		}
	}
	pools := s.Pools[:0]
	for _, p := range s.Pools {
		if _, err := poolSeries(p); err != nil {
			s.Errors[SourceLabels]++
			continue
		}
		pools = append(pools, p)
	}
	if s.Pools != nil {
		s.Pools = pools
	}
	rules := s.PolicyRules[:0]
	for _, r := range s.PolicyRules {
		if _, err := prometheus.NewConstMetric(policyRuleDisks, prometheus.GaugeValue, float64(r.Disks), r.Rule); err != nil {
			s.Errors[SourceLabels]++
			continue
		}
		rules = append(rules, r)
	}
	if s.PolicyRules != nil {
		s.PolicyRules = rules
	}
}

// collectGuest sends the guest's filesystems on a disk (a mount point once:
// one mounted over another keeps the first the agent lists) and what a trim
// would give back to its volume.
func collectGuest(gauge func(*prometheus.Desc, float64, ...string), vmid string, d Disk) {
	seen := map[string]bool{}
	for _, f := range d.GuestFilesystems {
		if seen[f.Mountpoint] {
			continue
		}
		seen[f.Mountpoint] = true
		if f.UsedBytes != nil {
			gauge(guestFSUsed, float64(*f.UsedBytes), vmid, d.ID, f.Mountpoint, f.Type)
		}
		if f.TotalBytes != nil {
			gauge(guestFSSize, float64(*f.TotalBytes), vmid, d.ID, f.Mountpoint, f.Type)
		}
	}
	if r := d.Reclaimable; r != nil {
		// Known: discard-ignore when QEMU drops the discards now, else
		// none; unknown and no-agent: why (the last reason, after any
		// discard-ignore).
		reason := ""
		for _, rs := range r.Reasons {
			if r.Verdict != discard.ReclaimKnown || rs.Code == discard.CodeDiscardIgnore {
				reason = string(rs.Code)
			}
			if r.Verdict == discard.ReclaimKnown && rs.Code == discard.CodeDiscardIgnore {
				break
			}
		}
		gauge(reclaimableInfo, 1, vmid, d.ID, string(r.Verdict), reason)
		if r.UpToBytes != nil {
			gauge(reclaimable, float64(*r.UpToBytes), vmid, d.ID)
		}
	}
}

// collectLimits sends a disk's running limits: a limit that is not set has
// no series (QEMU's 0), a burst length only where a burst is set.
func collectLimits(gauge func(*prometheus.Desc, float64, ...string), vmid string, d Disk) {
	run := d.Limits.Normal()
	for _, k := range qemuserver.LimitKeys {
		v, ok := run[k.QEMU]
		if !ok {
			continue
		}
		kind, rest, _ := strings.Cut(k.QEMU, "-") // bps, iops
		dir, suffix, _ := strings.Cut(rest, "-")  // total, read, write; "", max, max-length
		if suffix == "max-length" {
			what := "bytes"
			if kind == "iops" {
				what = "operations"
			}
			gauge(limitBurstLength, float64(v), vmid, d.ID, dir, what)
			continue
		}
		gauge(limitDescs[[2]string{kind, suffix}], float64(v), vmid, d.ID, dir)
	}
	differ := 0.0
	if d.LimitsDiffer() {
		differ = 1
	}
	gauge(limitsDiffer, differ, vmid, d.ID)
}

// collectFindings counts a VM's findings by code and severity.
func collectFindings(gauge func(*prometheus.Desc, float64, ...string), vmid string, fs []check.Finding) {
	type key struct {
		code check.Code
		sev  check.Severity
	}
	counts := map[key]int{}
	var order []key
	for _, f := range fs {
		k := key{f.Code, f.Severity}
		if counts[k] == 0 {
			order = append(order, k)
		}
		counts[k]++
	}
	for _, k := range order {
		gauge(findings, float64(counts[k]), vmid, string(k.code), string(k.sev))
	}
}

// collectQEMU sends the build a running VM runs, whether it is outdated
// and how many known bugs of it apply, each where it is known: the build
// where QEMU stated one (QMP was read), outdated where the binary or the
// installed version was read, the advisories where the build names a
// package version (check judged them).
func collectQEMU(gauge func(*prometheus.Desc, float64, ...string), vmid string, v VM) {
	q := v.QEMU
	if q == nil {
		return
	}
	if q.Package != "" {
		gauge(qemuBuild, 1, vmid, q.Package, q.Name, q.Version, q.Installed)
	}
	if q.Exe != "" || q.Installed != "" {
		out := 0.0
		if q.Outdated() {
			out = 1
		}
		gauge(qemuOutdated, out, vmid)
	}
	if q.Version != "" {
		n := 0
		for _, f := range v.Findings {
			if f.Code == check.CodeQEMUAdvisory {
				n++
			}
		}
		gauge(qemuAdvisories, float64(n), vmid)
	}
}

// collectFreeze sends the guest's freeze state where the agent said it,
// and whether a backup held the VM where there was an agent to ask.
func collectFreeze(gauge func(*prometheus.Desc, float64, ...string), vmid string, f *vm.Freeze) {
	if f == nil {
		return
	}
	switch f.State {
	case vm.Frozen:
		gauge(guestFrozen, 1, vmid)
	case vm.Thawed:
		gauge(guestFrozen, 0, vmid)
	}
	held := 0.0
	if f.Skip() != nil || f.State == vm.Frozen && f.Backup != nil && (f.Backup.Lock || len(f.Backup.Jobs) > 0) {
		held = 1
	}
	gauge(backupHolds, held, vmid)
}

// collectPool sends one thin pool's figures; a figure the pool's tool does
// not report (ZFS has no metadata percentage) has no series.
func collectPool(gauge func(*prometheus.Desc, float64, ...string), p thinpool.Pool) {
	gauge(poolInfo, 1, p.Storage, p.Type, p.Pool)
	gauge(poolSize, float64(p.SizeBytes), p.Storage)
	if p.AllocatedBytes != nil {
		gauge(poolAllocated, float64(*p.AllocatedBytes), p.Storage)
	}
	if p.DataPercent != nil {
		gauge(poolDataUsed, *p.DataPercent/100, p.Storage)
	}
	if p.MetadataSizeBytes > 0 {
		gauge(poolMetaSize, float64(p.MetadataSizeBytes), p.Storage)
	}
	if p.MetadataPercent != nil {
		gauge(poolMetaUsed, *p.MetadataPercent/100, p.Storage)
	}
	gauge(poolVirtual, float64(p.VirtualSumBytes), p.Storage)
	gauge(poolSnapVirtual, float64(p.SnapshotVirtualBytes), p.Storage)
	gauge(poolOvercommit, p.OvercommitRatio, p.Storage)
	if f := p.Fill; f != nil {
		collectFill(gauge, p.Storage, f)
	}
}

// collectFill sends when an LVM thin pool stops accepting writes; what is
// unknown has no series.
func collectFill(gauge func(*prometheus.Desc, float64, ...string), storage string, f *thinpool.Fill) {
	b := func(v bool) float64 {
		if v {
			return 1
		}
		return 0
	}
	if f.WritesStopAfterBytes != nil {
		gauge(poolStopAfter, float64(*f.WritesStopAfterBytes), storage)
		gauge(poolMetaFirst, b(f.FirstFull == thinpool.LimitMetadata), storage)
	}
	if f.WhenFull == thinpool.WhenFullError || f.WhenFull == thinpool.WhenFullQueue {
		gauge(poolErrorWhenFull, b(f.WhenFull == thinpool.WhenFullError), storage)
	}
	if f.Autoextend != nil {
		gauge(poolGrows, b(f.Grows), storage)
		gauge(poolAutoThreshold, float64(f.Autoextend.ThresholdPercent)/100, storage)
	}
	gauge(poolVGFree, float64(f.VGFreeBytes), storage)
	if f.NoSpaceTimeoutSeconds != nil {
		gauge(poolNoSpaceWait, float64(*f.NoSpaceTimeoutSeconds), storage)
	}
}
