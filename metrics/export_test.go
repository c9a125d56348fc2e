package metrics

import (
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/advisory"
	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/policy"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/stall"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
)

// only is the series of text whose name starts with prefix.
func only(text, prefix string) string {
	var out []string
	for _, l := range series(text) {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// Every kind of series of a small snapshot, exactly; the names and help
// texts are the README's.
func TestExportSample(t *testing.T) {
	golden(t, "sample.prom", exposition(t, sample(7)))
}

// Running limits in base units, by direction; a burst length only where a
// burst is set; 0 and QEMU's default length of 1 are no limit.
func TestExportLimits(t *testing.T) {
	for _, c := range []struct {
		name        string
		run, config qemuserver.Limits
		want        string
	}{
		{"none", qemuserver.Limits{}, nil, `pvediskcheck_disk_limits_differ_from_config{disk="scsi0",vmid="100"} 0`},
		{"unset fields as QEMU reports them", qemuserver.Limits{"bps-total": 0, "iops-read-max-length": 1, "bps-write-max-length": 1}, qemuserver.Limits{},
			`pvediskcheck_disk_limits_differ_from_config{disk="scsi0",vmid="100"} 0`},
		{"every kind", qemuserver.Limits{"bps-total": 1 << 20, "bps-read-max": 2 << 20, "bps-read": 1 << 20, "bps-read-max-length": 5, "iops-write": 100, "iops-write-max": 200, "iops-write-max-length": 3, "iops-total": 0},
			qemuserver.Limits{"bps-total": 1 << 20, "bps-read-max": 2 << 20, "bps-read": 1 << 20, "bps-read-max-length": 5, "iops-write": 100, "iops-write-max": 200, "iops-write-max-length": 3}, `pvediskcheck_disk_limit_burst_bytes_per_second{direction="read",disk="scsi0",vmid="100"} 2.097152e+06
pvediskcheck_disk_limit_burst_length_seconds{direction="read",disk="scsi0",limit="bytes",vmid="100"} 5
pvediskcheck_disk_limit_burst_length_seconds{direction="write",disk="scsi0",limit="operations",vmid="100"} 3
pvediskcheck_disk_limit_burst_operations_per_second{direction="write",disk="scsi0",vmid="100"} 200
pvediskcheck_disk_limit_bytes_per_second{direction="read",disk="scsi0",vmid="100"} 1.048576e+06
pvediskcheck_disk_limit_bytes_per_second{direction="total",disk="scsi0",vmid="100"} 1.048576e+06
pvediskcheck_disk_limit_operations_per_second{direction="write",disk="scsi0",vmid="100"} 100
pvediskcheck_disk_limits_differ_from_config{disk="scsi0",vmid="100"} 0`},
		{"set live, not in the config", qemuserver.Limits{"iops-total": 500}, qemuserver.Limits{},
			`pvediskcheck_disk_limit_operations_per_second{direction="total",disk="scsi0",vmid="100"} 500
pvediskcheck_disk_limits_differ_from_config{disk="scsi0",vmid="100"} 1`},
		{"configured, not in effect", qemuserver.Limits{}, qemuserver.Limits{"bps-write": 1 << 20},
			`pvediskcheck_disk_limits_differ_from_config{disk="scsi0",vmid="100"} 1`},
		{"other value", qemuserver.Limits{"bps-write": 2 << 20}, qemuserver.Limits{"bps-write": 1 << 20},
			`pvediskcheck_disk_limit_bytes_per_second{direction="write",disk="scsi0",vmid="100"} 2.097152e+06
pvediskcheck_disk_limits_differ_from_config{disk="scsi0",vmid="100"} 1`},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &Snapshot{VMs: []VM{{VMID: 100, Live: true, Disks: []Disk{{ID: "scsi0", Limits: c.run, ConfigLimits: c.config}}}}}
			if got := only(exposition(t, s), "pvediskcheck_disk_limit"); got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
	// No limits read (scsi-block, a disk without a group): no series at all.
	s := &Snapshot{VMs: []VM{{VMID: 100, Live: true, Disks: []Disk{{ID: "scsi0", ConfigLimits: qemuserver.Limits{"bps-write": 1}}}}}}
	if got := only(exposition(t, s), "pvediskcheck_disk_limit"); got != "" {
		t.Errorf("limits of a disk whose limits were not read:\n%s", got)
	}
}

// Findings are counted per code and severity, in the order they came;
// none is no series.
func TestExportFindings(t *testing.T) {
	s := &Snapshot{VMs: []VM{{VMID: 100, Findings: []check.Finding{
		{Code: check.CodeDrift, Severity: check.Warning, Disk: "scsi0"}, {Code: check.CodeIOError, Severity: check.Info},
		{Code: check.CodeDrift, Severity: check.Warning, Disk: "scsi1"}, {Code: check.CodeIOError, Severity: check.Error},
	}}, {VMID: 101}}}
	want := `pvediskcheck_check_findings{code="drift",severity="warning",vmid="100"} 2
pvediskcheck_check_findings{code="io-error",severity="error",vmid="100"} 1
pvediskcheck_check_findings{code="io-error",severity="info",vmid="100"} 1`
	if got := only(exposition(t, s), "pvediskcheck_check"); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// The QEMU build per running VM, whether it is outdated and its advisory
// count, each only where it is known.
func TestExportQEMU(t *testing.T) {
	adv := func(sev check.Severity) check.Finding {
		return check.Finding{Code: check.CodeQEMUAdvisory, Severity: sev}
	}
	for _, c := range []struct {
		name string
		vm   VM
		want string
	}{
		{"an upgraded node: replaced, two advisories", VM{VMID: 100, Running: true, Findings: []check.Finding{adv(check.Error), adv(check.Info), {Code: check.CodeQEMUOutdated, Severity: check.Warning}},
			QEMU: &advisory.Binary{Package: "pve-qemu-kvm_10.2.1-1", Name: "pve-qemu-kvm", Version: "10.2.1-1", Exe: "/usr/bin/qemu-system-x86_64", Replaced: true, Installed: "11.0.0-2"}},
			`pvediskcheck_vm_qemu_advisories{vmid="100"} 2
pvediskcheck_vm_qemu_build_info{build="pve-qemu-kvm_10.2.1-1",installed_version="11.0.0-2",package="pve-qemu-kvm",version="10.2.1-1",vmid="100"} 1
pvediskcheck_vm_qemu_outdated{vmid="100"} 1`},
		{"current", VM{VMID: 100, Running: true, QEMU: &advisory.Binary{Package: "pve-qemu-kvm_11.0.0-2", Name: "pve-qemu-kvm", Version: "11.0.0-2", Exe: "/usr/bin/qemu-system-x86_64", Installed: "11.0.0-2"}},
			`pvediskcheck_vm_qemu_advisories{vmid="100"} 0
pvediskcheck_vm_qemu_build_info{build="pve-qemu-kvm_11.0.0-2",installed_version="11.0.0-2",package="pve-qemu-kvm",version="11.0.0-2",vmid="100"} 1
pvediskcheck_vm_qemu_outdated{vmid="100"} 0`},
		{"a copied tree: neither binary nor installed version read", VM{VMID: 100, Running: true, QEMU: &advisory.Binary{Package: "pve-qemu-kvm_11.0.0-2", Name: "pve-qemu-kvm", Version: "11.0.0-2", InstalledUnknown: "no /var/lib/dpkg/status"}},
			`pvediskcheck_vm_qemu_advisories{vmid="100"} 0
pvediskcheck_vm_qemu_build_info{build="pve-qemu-kvm_11.0.0-2",installed_version="",package="pve-qemu-kvm",version="11.0.0-2",vmid="100"} 1`},
		{"a build that names no version: no advisory count", VM{VMID: 100, Running: true, QEMU: &advisory.Binary{Package: "qemu-git", Exe: "/opt/qemu/bin/qemu-system-x86_64"}},
			`pvediskcheck_vm_qemu_build_info{build="qemu-git",installed_version="",package="",version="",vmid="100"} 1
pvediskcheck_vm_qemu_outdated{vmid="100"} 0`},
		{"QMP not read: no build, the binary replaced all the same", VM{VMID: 100, Running: true, QEMU: &advisory.Binary{Exe: "/usr/bin/qemu-system-x86_64", Replaced: true}},
			`pvediskcheck_vm_qemu_outdated{vmid="100"} 1`},
		{"QMP not read, nothing else either", VM{VMID: 100, Running: true, QEMU: &advisory.Binary{InstalledUnknown: "the running build names no package"}}, ``},
		{"not running", VM{VMID: 100}, ``},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &Snapshot{VMs: []VM{c.vm}}
			if got := only(exposition(t, s), "pvediskcheck_vm_qemu"); got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

// A VM without iothreads has no iothread series (not a zero sum); a disk
// without counters or protocol counters has its info alone.
func TestExportPartial(t *testing.T) {
	s := &Snapshot{VMs: []VM{{VMID: 100, Live: true, Disks: []Disk{{ID: "ide0", Controller: "ide"}}, CPU: &CPU{MainLoop: 2, VCPUs: 1, IOThreads: map[string]float64{}}}}}
	want := `pvediskcheck_collect_duration_seconds 0
pvediskcheck_collect_errors{source="config"} 0
pvediskcheck_collect_errors{source="labels"} 0
pvediskcheck_collect_errors{source="node"} 0
pvediskcheck_collect_errors{source="qmp"} 0
pvediskcheck_collect_errors{source="thinpool"} 0
pvediskcheck_collect_errors{source="threads"} 0
pvediskcheck_disk_info{aio="",cache_configured="",cache_effective="",controller="ide",discard="",disk="ide0",iothread="",storage="",vmid="100"} 1
pvediskcheck_vm_cpu_seconds_total{role="main-loop",vmid="100"} 2
pvediskcheck_vm_cpu_seconds_total{role="vcpu",vmid="100"} 1`
	if got := strings.Join(series(exposition(t, s)), "\n"); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// A ZFS pool: no metadata, allocation unknown; an LVM pool with every
// figure is in sample.prom.
func TestExportPools(t *testing.T) {
	s := &Snapshot{Pools: []thinpool.Pool{{Storage: "local-zfs", Type: thinpool.TypeZFSPool, Pool: "rpool/data", SizeBytes: 100, VirtualSumBytes: 250, OvercommitRatio: 2.5}}}
	want := `pvediskcheck_thinpool_info{pool="rpool/data",storage="local-zfs",type="zfspool"} 1
pvediskcheck_thinpool_overcommit_ratio{storage="local-zfs"} 2.5
pvediskcheck_thinpool_size_bytes{storage="local-zfs"} 100
pvediskcheck_thinpool_snapshot_virtual_bytes{storage="local-zfs"} 0
pvediskcheck_thinpool_virtual_bytes{storage="local-zfs"} 250`
	if got := only(exposition(t, s), "pvediskcheck_thinpool"); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// An LVM pool that fills: every Fill series, and none for what is unknown.
func TestExportFill(t *testing.T) {
	after, t0 := int64(1<<30), 0
	f := &thinpool.Fill{WhenFull: thinpool.WhenFullError, Autoextend: &thinpool.Autoextend{ThresholdPercent: 80, Percent: 20}, Grows: true,
		VGFreeBytes: 4 << 30, WritesStopAfterBytes: &after, FirstFull: thinpool.LimitMetadata, NoSpaceTimeoutSeconds: &t0}
	s := &Snapshot{Pools: []thinpool.Pool{{Storage: "local-lvm", Type: thinpool.TypeLVMThin, Pool: "pve/data", Fill: f}}}
	want := `pvediskcheck_thinpool_autoextend_grows{storage="local-lvm"} 1
pvediskcheck_thinpool_autoextend_threshold_ratio{storage="local-lvm"} 0.8
pvediskcheck_thinpool_error_when_full{storage="local-lvm"} 1
pvediskcheck_thinpool_metadata_fills_first{storage="local-lvm"} 1
pvediskcheck_thinpool_no_space_timeout_seconds{storage="local-lvm"} 0
pvediskcheck_thinpool_vg_free_bytes{storage="local-lvm"} 4.294967296e+09
pvediskcheck_thinpool_writes_stop_after_bytes{storage="local-lvm"} 1.073741824e+09`
	got := only(exposition(t, s), "pvediskcheck_thinpool_")
	var lines []string
	for _, l := range strings.Split(got, "\n") {
		if !strings.Contains(l, "_info{") && !strings.Contains(l, "overcommit") && !strings.Contains(l, "size_bytes") && !strings.Contains(l, "virtual_bytes") {
			lines = append(lines, l)
		}
	}
	if g := strings.Join(lines, "\n"); g != want {
		t.Errorf("got\n%s\nwant\n%s", g, want)
	}
	// Unknown: queue pool, lvmconfig failed, inactive: only when_full and VG free.
	s.Pools[0].Fill = &thinpool.Fill{WhenFull: thinpool.WhenFullQueue}
	got = only(exposition(t, s), "pvediskcheck_thinpool_")
	for _, absent := range []string{"grows", "threshold", "metadata_fills_first", "writes_stop", "no_space"} {
		if strings.Contains(got, absent) {
			t.Errorf("%s exported for an unknown figure:\n%s", absent, got)
		}
	}
	if !strings.Contains(got, `pvediskcheck_thinpool_error_when_full{storage="local-lvm"} 0`) {
		t.Errorf("queue:\n%s", got)
	}
}

// A stalled disk's seconds, 0 for one that is not, and the in-flight
// count only where the node device was read; no stalled series for a disk
// without counters.
func TestExportStall(t *testing.T) {
	four := int64(4)
	s := &Snapshot{VMs: []VM{{VMID: 100, Live: true, Disks: []Disk{
		{ID: "scsi0", Stats: &qmp.BlockStats{}, Stall: stall.Verdict{Disk: "scsi0"}},
		{ID: "scsi1", Stats: &qmp.BlockStats{}, Stall: stall.Verdict{Disk: "scsi1", Stalled: true, StalledSeconds: 87.5, InFlight: &four}},
		{ID: "scsi2", Stall: stall.Verdict{Disk: "scsi2"}},
	}}}}
	want := `pvediskcheck_disk_inflight_requests{disk="scsi1",vmid="100"} 4
pvediskcheck_disk_stalled_seconds{disk="scsi0",vmid="100"} 0
pvediskcheck_disk_stalled_seconds{disk="scsi1",vmid="100"} 87.5`
	text := exposition(t, s)
	if got := only(text, "pvediskcheck_disk_inflight") + "\n" + only(text, "pvediskcheck_disk_stalled"); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// A policy's series: its violations per VM and rule (0 where the rule's
// disks hold it; a rule selecting none of the VM's disks has no series
// for it), and per rule the disks it selects, 0 included; none without a
// policy.
func TestExportPolicy(t *testing.T) {
	s := &Snapshot{Errors: map[Source]int{}, VMs: []VM{
		{VMID: 100, Policy: []policy.RuleCount{{Rule: "ceph", Line: 2, Disks: 2, Violations: 3}, {Rule: "lvm", Line: 8, Disks: 1}}},
		{VMID: 101},
	}, PolicyRules: []policy.RuleCount{{Rule: "ceph", Line: 2, Disks: 2, Violations: 3}, {Rule: "lvm", Line: 8, Disks: 1}, {Rule: "none", Line: 12}}}
	text := exposition(t, s)
	if got := only(text, "pvediskcheck_policy_"); got != `pvediskcheck_policy_rule_disks{rule="ceph"} 2
pvediskcheck_policy_rule_disks{rule="lvm"} 1
pvediskcheck_policy_rule_disks{rule="none"} 0
pvediskcheck_policy_violations{rule="ceph",vmid="100"} 3
pvediskcheck_policy_violations{rule="lvm",vmid="100"} 0` {
		t.Errorf("series:\n%s", got)
	}
	if got := only(exposition(t, sample(7)), "pvediskcheck_policy_"); got != "" {
		t.Errorf("without a policy: %s", got)
	}
}
