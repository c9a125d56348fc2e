package top

import (
	"reflect"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

func f(v float64) *float64 { return &v }
func s(v string) *string   { return &v }

func TestLimitUse(t *testing.T) {
	const mib = 1 << 20
	iv := sampler.Interval{ReadBytesPerSec: 5 * mib, WriteBytesPerSec: 15 * mib, ReadOpsPerSec: 100, WriteOpsPerSec: 300}
	for _, tc := range []struct {
		name   string
		limits qemuserver.Limits
		want   Use
		ok     bool
	}{
		{"unthrottled", qemuserver.Limits{}, Use{}, false},
		{"nil", nil, Use{}, false},
		{"only a burst length", qemuserver.Limits{"bps-write-max-length": 5, "bps-write-max": 40 * mib}, Use{}, false},
		{"zero rate", qemuserver.Limits{"bps-write": 0}, Use{}, false},
		{"bps-write", qemuserver.Limits{"bps-write": 20 * mib}, Use{75, "mbps_wr=20"}, true},
		{"bps-read", qemuserver.Limits{"bps-read": 10 * mib}, Use{50, "mbps_rd=10"}, true},
		{"bps-total", qemuserver.Limits{"bps-total": 40 * mib}, Use{50, "mbps=40"}, true},
		{"iops-total", qemuserver.Limits{"iops-total": 500}, Use{80, "iops=500"}, true},
		{"iops-read", qemuserver.Limits{"iops-read": 100}, Use{100, "iops_rd=100"}, true},
		{"iops-write", qemuserver.Limits{"iops-write": 200}, Use{150, "iops_wr=200"}, true},
		// The limit closest to being reached wins.
		{"highest share", qemuserver.Limits{"bps-write": 20 * mib, "iops-read": 1000, "iops-write": 300}, Use{100, "iops_wr=300"}, true},
		{"fractional MiB/s", qemuserver.Limits{"bps-write": 30 * mib / 2}, Use{100, "mbps_wr=15"}, true},
		{"0.5 MiB/s", qemuserver.Limits{"bps-read": mib / 2}, Use{1000, "mbps_rd=0.5"}, true},
		// A tie names the first limit in Proxmox's key order.
		{"tie", qemuserver.Limits{"iops-write": 200, "bps-write": 10 * mib}, Use{150, "mbps_wr=10"}, true},
	} {
		got, ok := LimitUse(tc.limits, iv)
		if ok != tc.ok || got != tc.want {
			t.Errorf("%s: LimitUse = %+v %v, want %+v %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

// idleRow is an idle row of VM 370 served by the main loop.
func idleRow(id string) Disk {
	return Disk{VMID: 370, Name: "lab37", Disk: id, Thread: mainLoop, GuestMounts: []string{}}
}

func TestJudge(t *testing.T) {
	type codes = []string
	for _, tc := range []struct {
		name string
		mod  func(d *Disk)
		want codes
	}{
		{"idle", func(d *Disk) {}, codes{}},
		// Saturation: run + wait of the serving thread.
		{"thread 89.9 %", func(d *Disk) { d.ThreadCPUPct, d.ThreadWaitPct = f(50), f(39.9) }, codes{}},
		{"thread 90 %", func(d *Disk) { d.ThreadCPUPct, d.ThreadWaitPct = f(50), f(40) }, codes{"thread-saturated"}},
		{"thread waiting only", func(d *Disk) { d.ThreadCPUPct, d.ThreadWaitPct = f(10), f(85) }, codes{"thread-saturated"}},
		{"no schedstat 89.9", func(d *Disk) { d.ThreadCPUPct = f(89.9) }, codes{}},
		{"no schedstat 90", func(d *Disk) { d.ThreadCPUPct = f(90) }, codes{"thread-saturated"}},
		{"thread unmeasured", func(d *Disk) { d.ThreadWaitPct = f(100) }, codes{}},
		// The limit.
		{"limit 94.9 %", func(d *Disk) { d.LimitPct, d.Limit = f(94.9), s("mbps_wr=20") }, codes{}},
		{"limit 95 %", func(d *Disk) { d.LimitPct, d.Limit = f(95), s("mbps_wr=20") }, codes{"at-limit"}},
		// Queued in QEMU: 3x and 5 ms more than the device, weighted by ops.
		{"qemu 3x but 4 ms more", func(d *Disk) {
			d.WriteIOPS, d.WriteLatencyMs, d.DeviceLatencyMs, d.Device = 10, 6, f(2), s("loop1")
		}, codes{}},
		{"qemu 5 ms more but 2.9x", func(d *Disk) {
			d.WriteIOPS, d.WriteLatencyMs, d.DeviceLatencyMs, d.Device = 10, 14.5, f(5), s("loop1")
		}, codes{}},
		{"qemu 3x and 5 ms more", func(d *Disk) {
			d.WriteIOPS, d.WriteLatencyMs, d.DeviceLatencyMs, d.Device = 10, 7.5, f(2.5), s("loop1")
		}, codes{"queued-in-qemu"}},
		{"weighted by ops", func(d *Disk) {
			// reads 1 ms x 90, writes 100 ms x 10: mean 10.9 ms vs 3 ms.
			d.ReadIOPS, d.ReadLatencyMs, d.WriteIOPS, d.WriteLatencyMs, d.DeviceLatencyMs, d.Device = 90, 1, 10, 100, f(3), s("loop1")
		}, codes{"queued-in-qemu"}},
		{"weighted: under", func(d *Disk) {
			// reads 1 ms x 990, writes 100 ms x 10: mean 1.99 ms vs 0.5 ms.
			d.ReadIOPS, d.ReadLatencyMs, d.WriteIOPS, d.WriteLatencyMs, d.DeviceLatencyMs, d.Device = 990, 1, 10, 100, f(0.5), s("loop1")
		}, codes{}},
		{"no device", func(d *Disk) { d.WriteIOPS, d.WriteLatencyMs = 10, 500 }, codes{}},
		{"no requests", func(d *Disk) { d.WriteLatencyMs, d.DeviceLatencyMs = 500, f(0) }, codes{}},
		{"failed 1", func(d *Disk) { d.FailedOps = 1 }, codes{"failed-ops"}},
		{"everything", func(d *Disk) {
			d.ThreadCPUPct, d.ThreadWaitPct = f(95), f(5)
			d.LimitPct, d.Limit = f(120), s("iops=100")
			d.WriteIOPS, d.WriteLatencyMs, d.DeviceLatencyMs, d.Device = 120, 800, f(1), s("dm-3")
			d.FailedOps = 3
		}, codes{"at-limit", "failed-ops", "queued-in-qemu", "thread-saturated"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := idleRow("scsi1")
			tc.mod(&d)
			got := codes{}
			for _, fd := range Judge(Sample{Disks: []Disk{d}}) {
				got = append(got, string(fd.Code))
				if fd.VMID != 370 || fd.Message == "" {
					t.Errorf("%+v", fd)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Judge = %v, want %v", got, tc.want)
			}
		})
	}
}

// One saturated thread is one finding, listing every disk it serves; the
// findings come by VMID, code, disks.
func TestJudgeGroupsAndOrders(t *testing.T) {
	a, b, c, d := idleRow("scsi0"), idleRow("scsi1"), idleRow("virtio1"), idleRow("sata0")
	for _, x := range []*Disk{&a, &b} {
		x.Thread, x.ThreadCPUPct, x.ThreadWaitPct = "iothread-virtioscsi0", f(99), f(1)
	}
	c.Thread, c.ThreadCPUPct, c.ThreadWaitPct = "iothread-virtio1", f(20), f(0)
	d.VMID, d.FailedOps = 100, 2
	d.Thread, d.ThreadCPUPct = mainLoop, f(97)
	got := Judge(Sample{Disks: []Disk{b, a, c, d}})
	want := []Finding{
		{Code: FailedOps, VMID: 100, Disks: []string{"sata0"}, Message: "sata0 of VM 100: 2 requests failed or were refused"},
		{Code: ThreadSaturated, VMID: 100, Disks: []string{"sata0"}, Thread: mainLoop,
			Message: "the main loop of VM 100 never idled (ran 97 % of a core, waited an unknown time for one): it cannot take more I/O"},
		{Code: ThreadSaturated, VMID: 370, Disks: []string{"scsi1", "scsi0"}, Thread: "iothread-virtioscsi0",
			Message: "iothread iothread-virtioscsi0 of VM 370 never idled (ran 99 % of a core, waited 1 % for one): it cannot take more I/O"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Judge =\n%+v\nwant\n%+v", got, want)
	}
	lim := idleRow("scsi2")
	lim.LimitPct, lim.Limit, lim.DeviceLatencyMs, lim.Device, lim.WriteIOPS, lim.WriteLatencyMs = f(101), s("mbps_wr=20"), f(1.5), s("loop1"), 20, 490.25
	got = Judge(Sample{Disks: []Disk{lim}})
	if len(got) != 2 || got[0].Message != "scsi2 of VM 370 used 101 % of its limit mbps_wr=20: its latency is the throttle's queue" ||
		got[1].Message != "scsi2 of VM 370: requests took 490.2 ms in QEMU, 1.5 ms in loop1 below it: the time is spent in QEMU, not in the storage" {
		t.Errorf("%+v", got)
	}
	if deref(nil) != "-" {
		t.Error("deref(nil)")
	}
}

// TestJudgeGuestFrozen: guest-frozen for a frozen guest, the exact set:
// without a backup, the thaw command; during one, the backup's progress;
// nothing for thawed, not asked or unknown.
func TestJudgeGuestFrozen(t *testing.T) {
	job := &vm.BackupHold{Jobs: []vm.BackupJob{{ID: "drive-scsi0", Status: "running", DoneBytes: 1 << 30, TotalBytes: 4 << 30}}}
	s := Sample{VMs: []VM{
		{VMID: 100, GuestFreeze: &vm.Freeze{State: vm.Frozen}},
		{VMID: 101, GuestFreeze: &vm.Freeze{State: vm.Frozen, Backup: job}},
		{VMID: 102, GuestFreeze: &vm.Freeze{State: vm.Thawed}},
		{VMID: 103, GuestFreeze: &vm.Freeze{State: vm.FreezeNotAsked, Backup: job}},
		{VMID: 104, GuestFreeze: &vm.Freeze{State: vm.FreezeUnknown}},
		{VMID: 105},
	}}
	fs := Judge(s)
	if len(fs) != 2 || fs[0].Code != GuestFrozen || fs[0].VMID != 100 || fs[1].VMID != 101 {
		t.Fatalf("%+v", fs)
	}
	if !strings.Contains(fs[0].Message, "qm guest cmd 100 fsfreeze-thaw") {
		t.Errorf("%q", fs[0].Message)
	}
	if !strings.Contains(fs[1].Message, "backup job drive-scsi0 running, 25% of 4.00 GiB") || strings.Contains(fs[1].Message, "fsfreeze-thaw") {
		t.Errorf("%q", fs[1].Message)
	}
}
