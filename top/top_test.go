package top

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/threads"
	"github.com/pvediskcheck/pvediskcheck/vm"
	"github.com/tidwall/gjson"
)

// recordedView is VM 370 of a recording as the Monitor sees it.
func recordedView(t *testing.T, r rec) vmView {
	t.Helper()
	cl, err := qemuserver.ParseCmdline(qemuserver.SplitNUL(r.read(t, "cmdline")))
	if err != nil {
		t.Fatal(err)
	}
	m := threads.New(r.pid, r.json(t, "query-iothreads.json"), r.json(t, "query-cpus-fast.json"))
	set := &disk.Set{VM: &vm.VM{Pid: r.pid, Cmdline: cl}}
	devs := r.devices(t)
	for _, id := range []string{"sata1", "scsi0", "scsi1", "virtio1"} {
		drv, err := qemuserver.ParseDrive(id, "local-lvm:vm-370-disk-"+id)
		if err != nil {
			t.Fatal(err)
		}
		set.Disks = append(set.Disks, &disk.Disk{Disk: &vm.Disk{ID: id, Drive: drv}, Dev: devs[id], Graph: &disk.Graph{}})
	}
	set.PlaceThreads(m)
	return vmView{VMID: 370, Name: "lab37", PID: r.pid, Map: m, Disks: set.Disks}
}

// The recorded second of VM 370 with qemu-io writing 256 KiB requests to
// scsi1 under a 20 MiB/s limit, on both command-line generations: scsi1's
// row shows the limit's rate and the throttle's queue, every other disk
// exact zeros, each disk its own iothread (sata1 the main loop).
func TestAssembleRecorded(t *testing.T) {
	for _, gen := range []string{"blockdev", "drive"} {
		t.Run(gen, func(t *testing.T) {
			r := recording(t, gen)
			v := recordedView(t, r)
			limits := map[string]qemuserver.Limits{"scsi1": {"bps-write": 20 << 20}}
			a, b := r.snapshot(t, "a", limits, v.Map.TIDs()), r.snapshot(t, "b", limits, v.Map.TIDs())
			row, disks := assemble(v, a, b)
			if len(disks) != 4 {
				t.Fatalf("%d rows", len(disks))
			}
			byID := map[string]Disk{}
			for _, d := range disks {
				byID[d.Disk] = d
			}
			sec := b.At.Sub(a.At).Seconds()
			s1 := byID["scsi1"]
			dw := float64(b.Stats["scsi1"].WrBytes - a.Stats["scsi1"].WrBytes)
			if dw != 20<<20 {
				t.Fatalf("recorded %v bytes in the second, want 20 MiB", dw)
			}
			if s1.WriteBps != round(dw/sec) || s1.ReadBps != 0 || s1.WriteIOPS != round(80/sec) || s1.ReadIOPS != 0 {
				t.Errorf("scsi1 rates: %+v", s1)
			}
			if math.Abs(s1.WriteBps/(20<<20)-1) > 0.01 {
				t.Errorf("scsi1 wrote %.2f MiB/s, want 20 within 1 %%", s1.WriteBps/(1<<20))
			}
			if *s1.LimitPct != math.Round(dw/sec/(20<<20)*10000)/100 || *s1.Limit != "mbps_wr=20" {
				t.Errorf("scsi1 limit: %v %v", *s1.LimitPct, *s1.Limit)
			}
			wantLat := float64(b.Stats["scsi1"].WrTotalTimeNs-a.Stats["scsi1"].WrTotalTimeNs) / 80 / 1e6
			if math.Abs(s1.WriteLatencyMs-wantLat) > 0.001 || s1.QueueDepth < 10 || s1.FailedOps != 0 {
				t.Errorf("scsi1 latency %v (want %v), queue %v", s1.WriteLatencyMs, wantLat, s1.QueueDepth)
			}
			if s1.Thread != "iothread-virtioscsi1" || *s1.IOThread != "iothread-virtioscsi1" || s1.IOThreadCPUPct == nil || *s1.IOThreadCPUPct <= 0 ||
				s1.ThreadCPUPct != s1.IOThreadCPUPct || s1.ThreadWaitPct == nil {
				t.Errorf("scsi1 thread: %s %v %v", s1.Thread, s1.IOThreadCPUPct, s1.ThreadCPUPct)
			}
			if *s1.Device != "loop1" || s1.DeviceLatencyMs == nil || *s1.DeviceLatencyMs <= 0 || *s1.DeviceLatencyMs >= s1.WriteLatencyMs/10 {
				t.Errorf("scsi1 device %v latency %v", *s1.Device, s1.DeviceLatencyMs)
			}
			for _, id := range []string{"sata1", "scsi0", "virtio1"} {
				d := byID[id]
				if d.ReadIOPS != 0 || d.WriteIOPS != 0 || d.ReadBps != 0 || d.WriteBps != 0 || d.ReadLatencyMs != 0 || d.WriteLatencyMs != 0 ||
					d.FlushLatencyMs != 0 || d.QueueDepth != 0 || d.FailedOps != 0 || d.LimitPct != nil || d.Limit != nil || d.BlockJob != nil {
					t.Errorf("idle %s moved: %+v", id, d)
				}
				if d.DeviceLatencyMs == nil || *d.DeviceLatencyMs != 0 {
					t.Errorf("idle %s device latency %v", id, d.DeviceLatencyMs)
				}
			}
			if d := byID["sata1"]; d.Thread != mainLoop || d.IOThread != nil || d.IOThreadCPUPct != nil || d.ThreadCPUPct == nil || *d.ThreadCPUPct != *row.MainLoopCPUPct {
				t.Errorf("sata1 thread: %+v", d)
			}
			for id, it := range map[string]string{"scsi0": "iothread-virtioscsi0", "virtio1": "iothread-virtio1"} {
				if d := byID[id]; d.Thread != it || *d.IOThread != it || *d.IOThreadCPUPct != 0 {
					t.Errorf("%s thread: %s %v", id, d.Thread, *d.IOThreadCPUPct)
				}
			}
			// The VM: its main loop, one vCPU, three iothreads each with its disk.
			if row.Status != OK || row.VCPUs != 1 || row.VCPUCPUPct == nil || row.MainLoopCPUPct == nil || row.MainLoopWaitPct == nil || len(row.IOThreads) != 3 {
				t.Fatalf("VM row: %+v", row)
			}
			for _, it := range row.IOThreads {
				want := map[string][]string{"iothread-virtio1": {"virtio1"}, "iothread-virtioscsi0": {"scsi0"}, "iothread-virtioscsi1": {"scsi1"}}[it.ID]
				if !reflect.DeepEqual(it.Disks, want) || it.CPUPct == nil {
					t.Errorf("iothread %s: %+v", it.ID, it)
				}
			}
		})
	}
}

// A disk missing from one snapshot (hot-plugged, unplugged) has no row; a
// VM whose counters went backwards shows no rows; threads that vanished
// are not measured.
func TestAssembleGaps(t *testing.T) {
	r := recording(t, "blockdev")
	v := recordedView(t, r)
	a, b := r.snapshot(t, "a", nil, v.Map.TIDs()), r.snapshot(t, "b", nil, v.Map.TIDs())
	delete(a.Stats, "virtio1")
	delete(b.Stats, "sata1")
	back := b.Stats["scsi1"]
	back.WrOps = 0
	b.Stats["scsi1"] = back
	delete(b.Threads, v.Map.VCPUs[0].TID)
	delete(a.Threads, r.pid)
	delete(b.Devices, "scsi0")
	row, disks := assemble(v, a, b)
	var ids []string
	for _, d := range disks {
		ids = append(ids, d.Disk)
	}
	if !reflect.DeepEqual(ids, []string{"scsi0"}) {
		t.Errorf("rows %v, want scsi0 only", ids)
	}
	if disks[0].DeviceLatencyMs != nil || disks[0].Device == nil {
		t.Errorf("scsi0 device: %v %v", disks[0].Device, disks[0].DeviceLatencyMs)
	}
	if row.MainLoopCPUPct != nil || row.VCPUCPUPct != nil {
		t.Errorf("unmeasured threads: %+v", row)
	}
}

// The JSON line schema: the fields the issue lists, with their types and
// nulls, plus what top adds.
func TestSampleJSONSchema(t *testing.T) {
	r := recording(t, "blockdev")
	v := recordedView(t, r)
	v.Disks[2].Guest.Name.ByID = "/srv"
	v.Disks[2].Guest.Seen = nil
	a, b := r.snapshot(t, "a", map[string]qemuserver.Limits{"scsi1": {"bps-write": 20 << 20}}, v.Map.TIDs()), r.snapshot(t, "b", map[string]qemuserver.Limits{"scsi1": {"bps-write": 20 << 20}}, v.Map.TIDs())
	b.Jobs["scsi1"] = []string{"backup"}
	row, disks := assemble(v, a, b)
	s := Sample{Time: time.Unix(1764449000, 0).UTC(), IntervalS: 1, Disks: disks, VMs: []VM{row}}
	s.Findings = Judge(s)
	line, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(line), "\n") {
		t.Error("a sample is not one line")
	}
	var doc map[string]any
	if err := json.Unmarshal(line, &doc); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]any) []string {
		var out []string
		for k := range m {
			out = append(out, k)
		}
		sort.Strings(out)
		return out
	}
	if got := keys(doc); !reflect.DeepEqual(got, []string{"disks", "findings", "interval_s", "time", "vms"}) {
		t.Errorf("sample keys %v", got)
	}
	if doc["time"] != "2025-11-29T20:43:20Z" || doc["interval_s"] != 1.0 {
		t.Errorf("time %v interval %v", doc["time"], doc["interval_s"])
	}
	issue := []string{"vmid", "name", "disk", "storage", "read_iops", "write_iops", "read_bps", "write_bps", "read_latency_ms",
		"write_latency_ms", "flush_latency_ms", "queue_depth", "failed_ops", "limit_pct", "block_job", "iothread",
		"iothread_cpu_pct", "device_latency_ms"}
	added := []string{"limit", "thread", "thread_cpu_pct", "thread_wait_pct", "device", "guest_by_id", "guest_device", "guest_mounts", "queues", "stalled_seconds"}
	want := append(append([]string{}, issue...), added...)
	sort.Strings(want)
	rows := doc["disks"].([]any)
	for _, d := range rows {
		if got := keys(d.(map[string]any)); !reflect.DeepEqual(got, want) {
			t.Errorf("disk keys %v\nwant %v", got, want)
		}
	}
	byID := map[string]map[string]any{}
	for _, d := range rows {
		byID[d.(map[string]any)["disk"].(string)] = d.(map[string]any)
	}
	s1, sata := byID["scsi1"], byID["sata1"]
	if s1["block_job"] != "backup" || s1["iothread"] != "iothread-virtioscsi1" || s1["limit_pct"] == nil || s1["guest_by_id"] != "/srv" {
		t.Errorf("scsi1 %v", s1)
	}
	for _, k := range []string{"limit_pct", "block_job", "iothread", "iothread_cpu_pct", "guest_device", "limit"} {
		if v, ok := sata[k]; !ok || v != nil {
			t.Errorf("sata1 %s = %v, want null", k, v)
		}
	}
	if m, ok := sata["guest_mounts"].([]any); !ok || len(m) != 0 {
		t.Errorf("guest_mounts = %v, want []", sata["guest_mounts"])
	}
	vmKeys := keys(doc["vms"].([]any)[0].(map[string]any))
	if want := []string{"dirty_bytes", "io_pressure", "iothreads", "main_loop_cpu_pct", "main_loop_wait_pct", "name", "pid", "status", "vcpu_cpu_pct", "vcpus", "vmid", "writeback_bytes"}; !reflect.DeepEqual(vmKeys, want) {
		t.Errorf("vm keys %v", vmKeys)
	}
	f := doc["findings"].([]any)[0].(map[string]any)
	if got := keys(f); !reflect.DeepEqual(got, []string{"code", "disks", "message", "thread", "vmid"}) && !reflect.DeepEqual(got, []string{"code", "disks", "message", "vmid"}) {
		t.Errorf("finding keys %v", got)
	}
}

func TestValidate(t *testing.T) {
	n := newFakeNode(t)
	n.write("etc/pve/qemu-server/370.conf", "name: x\n")
	for _, tc := range []struct {
		o    Options
		code exitcode.Code
		msg  string
	}{
		{Options{Interval: DefaultInterval}, exitcode.OK, ""},
		{Options{Interval: MinInterval, Count: 3, Sort: SortCPU, VMIDs: []int{370}}, exitcode.OK, ""},
		{Options{Interval: 99 * time.Millisecond}, exitcode.Usage, "--interval 99ms: give at least 100ms"},
		// 0 is refused, not taken for the default: it was typed.
		{Options{}, exitcode.Usage, "--interval 0s: give at least 100ms"},
		{Options{Interval: -time.Second}, exitcode.Usage, "--interval -1s: give at least 100ms"},
		{Options{Interval: DefaultInterval, Count: -1}, exitcode.Usage, "--count -1: give a positive number (0: until interrupted)"},
		// The upper bounds, at and past them (issue 31: 1h1000000h hung).
		{Options{Interval: MaxInterval, Count: MaxCount}, exitcode.OK, ""},
		{Options{Interval: MaxInterval + time.Nanosecond}, exitcode.Usage, "--interval 1h0m0.000000001s: at most 1h"},
		{Options{Interval: 1000001 * time.Hour}, exitcode.Usage, "--interval 1000001h0m0s: at most 1h"},
		{Options{Interval: DefaultInterval, Count: MaxCount + 1}, exitcode.Usage, "--count 1000001: at most 1000000"},
		{Options{Interval: DefaultInterval, Sort: "fast"}, exitcode.Usage, `--sort "fast": not a sort key`},
		{Options{Interval: DefaultInterval, VMIDs: []int{370, 371}}, exitcode.Usage, "VM 371: no such VM on this node"},
	} {
		err := Validate(n.paths, tc.o)
		if exitcode.Of(err) != tc.code || tc.msg != "" && !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("Validate(%+v) = %v", tc.o, err)
		}
	}
}

// Two samples of the recorded VM 370 through the Monitor: the first lists
// it as new, the second has its rows; steady state costs three commands in
// one exchange per sample.
func TestMonitorRecorded(t *testing.T) {
	for _, gen := range []string{"blockdev", "drive"} {
		t.Run(gen, func(t *testing.T) {
			n := newFakeNode(t)
			r := recording(t, gen)
			v := n.addRecorded(r, 370)
			m := n.monitor(Options{})
			s := m.Sample(context.Background())
			if row := vmRow(t, s, 370); row.Status != New || len(s.Disks) != 0 || row.PID != r.pid || row.Name != "lab37" {
				t.Fatalf("first sample: %+v %+v", row, s.Disks)
			}
			first := len(v.q.Seen())
			v.proc(filepath.Join(r.tdir, "proc-b"))
			s = m.Sample(context.Background())
			if row := vmRow(t, s, 370); row.Status != OK {
				t.Fatalf("second sample: %+v", row)
			}
			rows := diskRows(s, 370)
			if len(rows) != 4 {
				t.Fatalf("rows %+v", rows)
			}
			s1 := rows["scsi1"]
			if s1.WriteBps <= 0 || s1.LimitPct == nil || *s1.Limit != "mbps_wr=20" || *s1.LimitPct != math.Round(s1.WriteBps/(20<<20)*10000)/100 {
				t.Errorf("scsi1: %v B/s, limit %v %v", s1.WriteBps, s1.LimitPct, s1.Limit)
			}
			if s1.Thread != "iothread-virtioscsi1" || rows["sata1"].Thread != mainLoop || *rows["scsi1"].GuestByID != "/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_drive-scsi1" {
				t.Errorf("threads/names: %+v", s1)
			}
			if s.Disks[0].Disk != "scsi1" {
				t.Errorf("busiest first: %s", s.Disks[0].Disk)
			}
			wantSteady := []string{"query-blockstats", "query-block-jobs", "qom-get"}
			if gen == "drive" {
				wantSteady[2] = "query-block"
			}
			if got := v.q.Seen()[first:]; !reflect.DeepEqual(got, wantSteady) {
				t.Errorf("second exchange: %v, want %v", got, wantSteady)
			}
			if v.q.Conns() != 2 {
				t.Errorf("%d connections for 2 samples", v.q.Conns())
			}
		})
	}
}

// VMs that start, stop, are busy or fail mid-run: no error, the rows come
// and go, and a busy VM's line says so.
func TestMonitorComingAndGoing(t *testing.T) {
	n := newFakeNode(t)
	rb, rd := recording(t, "blockdev"), recording(t, "drive")
	a := n.addRecorded(rb, 370)
	b := n.addRecorded(rd, 371)
	b.stop()
	m := n.monitor(Options{Interval: 200 * time.Millisecond})
	ctx := context.Background()
	s := m.Sample(ctx)
	if len(s.VMs) != 1 || s.VMs[0].VMID != 370 {
		t.Fatalf("VMs %+v", s.VMs)
	}
	// 371 starts.
	b.start()
	b.proc(filepath.Join(rd.tdir, "proc-a"))
	s = m.Sample(ctx)
	if vmRow(t, s, 370).Status != OK || vmRow(t, s, 371).Status != New || len(diskRows(s, 371)) != 0 {
		t.Fatalf("after start: %+v", s.VMs)
	}
	// 370's socket is held by another client for the whole interval.
	release := a.q.Hold(t)
	b.proc(filepath.Join(rd.tdir, "proc-b"))
	s = m.Sample(ctx)
	if row := vmRow(t, s, 370); row.Status != Busy || !strings.Contains(row.Error, "QMP socket busy") || len(diskRows(s, 370)) != 0 {
		t.Errorf("busy: %+v", row)
	}
	if vmRow(t, s, 371).Status != OK || len(diskRows(s, 371)) != 4 {
		t.Errorf("371 after busy 370: %+v", vmRow(t, s, 371))
	}
	release()
	// 370 answers again: its rows span both intervals.
	time.Sleep(50 * time.Millisecond)
	s = m.Sample(ctx)
	if vmRow(t, s, 370).Status != OK || len(diskRows(s, 370)) != 4 {
		t.Errorf("after the hold: %+v", vmRow(t, s, 370))
	}
	// 371 stops: it disappears; 370 fails to answer query-blockstats.
	b.stop()
	a.set("query-blockstats", qmptest.Fail("GenericError", "something broke"))
	s = m.Sample(ctx)
	if len(s.VMs) != 1 || s.VMs[0].Status != Unreachable || !strings.Contains(s.VMs[0].Error, "something broke") || len(s.Disks) != 0 {
		t.Errorf("after stop/failure: %+v", s.VMs)
	}
}

// Named VMs: one that is not running is listed as stopped and shows up
// when it starts; one whose socket is gone is stopped.
func TestMonitorNamedVMs(t *testing.T) {
	n := newFakeNode(t)
	rb := recording(t, "blockdev")
	a := n.addRecorded(rb, 370)
	a.stop()
	m := n.monitor(Options{VMIDs: []int{370}})
	ctx := context.Background()
	if s := m.Sample(ctx); len(s.VMs) != 1 || s.VMs[0].Status != Stopped {
		t.Fatalf("%+v", s.VMs)
	}
	a.start()
	a.proc(filepath.Join(rb.tdir, "proc-a"))
	if s := m.Sample(ctx); s.VMs[0].Status != New {
		t.Fatalf("%+v", s.VMs)
	}
	os.Remove(n.paths.QMPSocket(370))
	if s := m.Sample(ctx); len(s.VMs) != 1 || s.VMs[0].Status != Stopped || len(s.Disks) != 0 {
		t.Errorf("socket gone: %+v", s.VMs)
	}
	// A pid file without a config: not a VM.
	n.write("var/run/qemu-server/380.pid", "4242\n")
	m2 := n.monitor(Options{})
	for _, v := range m2.Sample(ctx).VMs {
		if v.VMID == 380 {
			t.Errorf("VM 380 without config listed: %+v", v)
		}
	}
}

// Run delivers Count samples, the first one interval after the start, and
// stops cleanly on ErrStop or when the context ends.
func TestRun(t *testing.T) {
	n := newFakeNode(t)
	var got []Sample
	start := time.Now()
	err := Run(context.Background(), n.node(), Options{Interval: 100 * time.Millisecond, Count: 3, OnSample: func(s Sample) error {
		got = append(got, s)
		return nil
	}})
	if err != nil || len(got) != 3 {
		t.Fatalf("Run: %v, %d samples", err, len(got))
	}
	if el := time.Since(start); el < 300*time.Millisecond {
		t.Errorf("3 samples at 100 ms in %s: the first came at once", el)
	}
	if got[0].IntervalS != 0.1 || got[0].Disks == nil || got[0].VMs == nil || got[0].Findings == nil {
		t.Errorf("empty node sample: %+v", got[0])
	}
	calls := 0
	err = Run(context.Background(), n.node(), Options{Interval: 100 * time.Millisecond, OnSample: func(Sample) error {
		calls++
		return ErrStop
	}})
	if err != nil || calls != 1 {
		t.Errorf("ErrStop: %v after %d", err, calls)
	}
	boom := errors.New("write failed")
	if err := Run(context.Background(), n.node(), Options{Interval: 100 * time.Millisecond, OnSample: func(Sample) error { return boom }}); !errors.Is(err, boom) {
		t.Errorf("OnSample error: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	if err := Run(ctx, n.node(), Options{Interval: 100 * time.Millisecond}); err != nil {
		t.Errorf("cancelled: %v", err)
	}
	if err := Run(context.Background(), n.node(), Options{Interval: time.Millisecond}); exitcode.Of(err) != exitcode.Usage {
		t.Errorf("bad interval: %v", err)
	}
}

// syntheticVM adds a VM with disks SCSI disks (VirtIO SCSI single with
// iothreads) on the given generation, answering like QEMU 7.2 or 11.1.
func (n *fakeNode) syntheticVM(t testing.TB, vmid, pid, disks int, blockdev bool, greeting string) *fakeVM {
	t.Helper()
	var cfg strings.Builder
	cfg.WriteString("name: synth\nscsihw: virtio-scsi-single\n")
	var stats, iots, block, groups []string
	for i := 0; i < disks; i++ {
		fmt.Fprintf(&cfg, "scsi%d: local:%d/vm-%d-disk-%d.raw,iothread=1,mbps_wr=10,size=16M\n", i, vmid, vmid, i)
		stats = append(stats, fmt.Sprintf(`{"device": "", "node-name": "drive-scsi%d", "qdev": "scsi%d", "stats": {"wr_bytes": 0, "wr_operations": 0}}`, i, i))
		iots = append(iots, fmt.Sprintf(`{"id": "iothread-virtioscsi%d", "thread-id": %d}`, i, pid+1+i))
		block = append(block, fmt.Sprintf(`{"device": "drive-scsi%d", "qdev": "scsi%d", "inserted": {"node-name": "x", "bps_wr": 10485760}}`, i, i))
		groups = append(groups, `{"properties": [{"name": "limits", "type": "ThrottleLimits", "value": {"bps-write": 10485760}}]}`)
	}
	conf, err := qemuserver.ParseConfig(strings.NewReader(cfg.String()), fmt.Sprint(vmid))
	if err != nil {
		t.Fatal(err)
	}
	st, err := qemuserver.LoadStorages(n.paths.StorageCfg())
	if err != nil {
		t.Fatal(err)
	}
	argv, err := fakenode.Argv("qemu-system-x86_64", conf, st, fakenode.ArgvOptions{VMID: vmid, RunDir: "/var/run/qemu-server", Legacy: !blockdev, Blockdev: blockdev, QEMUVersion: "7.2.22"})
	if err != nil {
		t.Fatal(err)
	}
	v := n.addVM(vmid, pid, cfg.String(), []byte(strings.Join(argv, "\x00")+"\x00"), greeting)
	v.set("query-blockstats", "["+strings.Join(stats, ",")+"]")
	v.set("query-block-jobs", "[]")
	v.set("query-iothreads", "["+strings.Join(iots, ",")+"]")
	v.set("query-cpus-fast", `[{"cpu-index": 0, "thread-id": 1}]`)
	v.set("query-block", "["+strings.Join(block, ",")+"]")
	v.set("qom-list-get", "["+strings.Join(groups, ",")+"]")
	v.set("qom-get", `{"bps-write": 10485760}`)
	v.start()
	// A procfs tree with just the main thread.
	tree := t.TempDir()
	main := filepath.Join(tree, fmt.Sprint(pid), "task", fmt.Sprint(pid))
	if err := os.MkdirAll(main, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(main, "stat"), []byte(fmt.Sprintf("%d (kvm) S 1 1 1 0 -1 0 0 0 0 0 10 8 0 0 20 0 9 0 4242 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n", pid)), 0o644)
	os.WriteFile(filepath.Join(main, "schedstat"), []byte("1000 2000 3\n"), 0o644)
	v.proc(tree)
	return v
}

// Commands per VM and sample stay constant in the number of disks, on
// both generations and QEMU 7.2 and 11.1 (issue 16, "Load and cost"): the
// first exchange adds the thread ids and the VirtIO queue counts (one
// qom-list-get from 10.1, one qom-get per VirtIO controller or device
// before: each synthetic disk has its own virtio-scsi-single controller),
// and before 10.1 under -blockdev every throttle group once; every later
// one is query-blockstats, query-block-jobs and one command for the limits.
func TestCommandsConstantInDisks(t *testing.T) {
	for _, tc := range []struct {
		name     string
		blockdev bool
		greeting string
		first    func(disks int) int
	}{
		{"7.2 -drive", false, qmptest.Greeting72, func(d int) int { return 5 + d }},
		{"7.2 -blockdev", true, qmptest.Greeting72, func(d int) int { return 4 + 2*d }},
		{"11.1 -drive", false, qmptest.Greeting111, func(int) int { return 6 }},
		{"11.1 -blockdev", true, qmptest.Greeting111, func(int) int { return 6 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, disks := range []int{1, 4, 15} {
				n := newFakeNode(t)
				v := n.syntheticVM(t, 500, 9000, disks, tc.blockdev, tc.greeting)
				m := n.monitor(Options{})
				var per []int
				for i := 0; i < 4; i++ {
					before := len(v.q.Seen())
					s := m.Sample(context.Background())
					if row := vmRow(t, s, 500); row.Status != New && row.Status != OK {
						t.Fatalf("%+v", row)
					}
					per = append(per, len(v.q.Seen())-before)
				}
				want := []int{tc.first(disks), 3, 3, 3}
				if !reflect.DeepEqual(per, want) {
					t.Errorf("%d disks: commands per sample %v, want %v (%v)", disks, per, want, v.q.Seen())
				}
				if v.q.Conns() != 4 {
					t.Errorf("%d disks: %d connections for 4 samples", disks, v.q.Conns())
				}
			}
		})
	}
}

// Before QEMU 10.1 under -blockdev, one throttle group is read per sample in
// turn: a live limit change shows within as many samples as the VM has
// disks; from 10.1 on at the next sample.
func TestLimitsFollowLiveChanges(t *testing.T) {
	for _, greeting := range []string{qmptest.Greeting72, qmptest.Greeting111} {
		n := newFakeNode(t)
		v := n.syntheticVM(t, 500, 9000, 3, true, greeting)
		m := n.monitor(Options{})
		ctx := context.Background()
		m.Sample(ctx)
		v.set("qom-get", `{"bps-write": 0}`)
		v.set("qom-list-get", strings.Repeat(`{"properties": [{"name": "limits", "type": "ThrottleLimits", "value": {"bps-write": 0}}]},`, 2)+
			`{"properties": [{"name": "limits", "type": "ThrottleLimits", "value": {"bps-write": 0}}]}`)
		limited := func(s Sample) int {
			c := 0
			for _, d := range s.Disks {
				if d.LimitPct != nil {
					c++
				}
			}
			return c
		}
		var got []int
		for i := 0; i < 3; i++ {
			got = append(got, limited(m.Sample(ctx)))
		}
		want := []int{2, 1, 0}
		if greeting == qmptest.Greeting111 {
			want = []int{0, 0, 0}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%.40s: limited disks per sample %v, want %v", greeting, got, want)
		}
	}
}

// A block job shows on the disk it works on: through the block graph, or
// by the job's name when QEMU has no x-debug-query-block-graph.
func TestMonitorBlockJob(t *testing.T) {
	n := newFakeNode(t)
	r := recording(t, "blockdev")
	v := n.addRecorded(r, 370)
	m := n.monitor(Options{})
	ctx := context.Background()
	m.Sample(ctx)
	v.set("query-block-jobs", string(r.read(t, "query-block-jobs-backup.json")))
	v.set("x-debug-query-block-graph", string(r.read(t, "x-debug-query-block-graph-backup.json")))
	before := len(v.q.Seen())
	s := m.Sample(ctx)
	jobs := map[string]string{}
	for _, d := range s.Disks {
		if d.BlockJob != nil {
			jobs[d.Disk] = *d.BlockJob
		}
	}
	if !reflect.DeepEqual(jobs, map[string]string{"scsi1": "backup"}) {
		t.Errorf("jobs %v", jobs)
	}
	// The backup's impact on scsi1: progress from the recorded job (1 MiB
	// of 256 MiB), no speed on its first sample, the writes since the last
	// sample without the job against the baseline before it (one sample:
	// no span, so none).
	for _, d := range s.Disks {
		switch {
		case d.Disk == "scsi1" && (d.Backup == nil || d.Backup.Job != "backup-scsi1-test" || d.Backup.ProgressPct == nil || *d.Backup.ProgressPct != 0.4 ||
			d.Backup.SpeedBps != nil || d.Backup.BaselineWriteLatencyMs != nil || d.Backup.WriteLatencyMs == nil):
			t.Errorf("scsi1's backup impact %+v", d.Backup)
		case d.Disk != "scsi1" && d.Backup != nil:
			t.Errorf("%s has a backup impact %+v", d.Disk, d.Backup)
		}
	}
	if got := v.q.Seen()[before:]; !reflect.DeepEqual(got, []string{"query-blockstats", "query-block-jobs", "x-debug-query-block-graph", "qom-get"}) {
		t.Errorf("commands with a job: %v", got)
	}
	if b := diskRows(s, 370)["scsi1"].Backup; b.Fleecing == nil || *b.Fleecing || b.FleecingNode != nil {
		t.Errorf("blockdev-backup without fleecing: %+v", b)
	}
	// A backup with fleecing (recorded on QEMU 11.1.3, qmp/testdata): on
	// scsi1 through the fleecing image's node, with the same commands.
	for _, f := range []struct{ cmd, file string }{{"query-block-jobs", "query-block-jobs-fleecing-11.1.json"}, {"x-debug-query-block-graph", "x-debug-query-block-graph-fleecing-11.1.json"}} {
		b, err := os.ReadFile("../qmp/testdata/" + f.file)
		if err != nil {
			t.Fatal(err)
		}
		v.set(f.cmd, string(b))
	}
	// vzdump records the fleecing images in the config when the backup
	// starts, after top loaded it: read again once for the job.
	conf := filepath.Join(n.paths.QemuServerDir(), "370.conf")
	lab, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	n.write("etc/pve/qemu-server/370.conf", string(lab)+"\n[special:fleecing]\nfleecing-images: local-lvm:vm-370-fleece-0\n")
	rows := diskRows(m.Sample(ctx), 370)
	if b := rows["scsi1"].Backup; b == nil || b.Job != "backup-scsi1-fleece" || b.Fleecing == nil || !*b.Fleecing || b.FleecingNode == nil || *b.FleecingNode != "fleece" ||
		!reflect.DeepEqual(b.FleecingImages, []string{"local-lvm:vm-370-fleece-0"}) {
		t.Errorf("backup with fleecing: %+v", b)
	}
	n.write("etc/pve/qemu-server/370.conf", string(lab))
	if b := diskRows(m.Sample(ctx), 370)["scsi1"].Backup; b == nil || !reflect.DeepEqual(b.FleecingImages, []string{"local-lvm:vm-370-fleece-0"}) {
		t.Errorf("the same job's images, read once: %+v", b)
	}
	before = len(v.q.Seen())
	rows = diskRows(m.Sample(ctx), 370)
	for id, d := range rows {
		if id != "scsi1" && d.Backup != nil {
			t.Errorf("%s has a backup impact %+v", id, d.Backup)
		}
	}
	if got := v.q.Seen()[before:]; !reflect.DeepEqual(got, []string{"query-blockstats", "query-block-jobs", "x-debug-query-block-graph", "qom-get"}) {
		t.Errorf("commands with a fleecing job: %v", got)
	}
	// Without the graph command: a job named after the disk's node.
	v.set("x-debug-query-block-graph", qmptest.NotFound("x-debug-query-block-graph"))
	v.set("query-block-jobs", `[{"device": "drive-virtio1", "type": "mirror", "status": "running"}, {"device": "stream-x", "type": "stream"}]`)
	s = m.Sample(ctx)
	jobs = map[string]string{}
	for _, d := range s.Disks {
		if d.BlockJob != nil {
			jobs[d.Disk] = *d.BlockJob
		}
	}
	if !reflect.DeepEqual(jobs, map[string]string{"virtio1": "mirror"}) {
		t.Errorf("jobs by name %v", jobs)
	}
	// A backup placed by its name: no graph, so fleecing is unknown.
	v.set("query-block-jobs", `[{"device": "drive-scsi1", "type": "backup", "status": "running", "len": 10, "offset": 1}]`)
	if b := diskRows(m.Sample(ctx), 370)["scsi1"].Backup; b == nil || b.Fleecing != nil || b.FleecingNode != nil {
		t.Errorf("a backup placed by name: %+v", b)
	}
}

// With Options.Guest, a VM with agent: 1 gets query-pci once and its guest
// agent asked in the background; the rows then carry the guest's device
// and mount points. Without agent: 1 nothing is asked.
func TestMonitorGuestAgent(t *testing.T) {
	n := newFakeNode(t)
	r := recording(t, "blockdev")
	v := n.addRecorded(r, 370)
	n.write("etc/pve/qemu-server/370.conf", fakenode.Lab370Config+"agent: enabled=1,fstrim_cloned_disks=1\n")
	pci, err := os.ReadFile("../guestdisk/testdata/query-pci-lab370.json")
	if err != nil {
		t.Fatal(err)
	}
	v.set("query-pci", string(pci))
	a := qmptest.NewAgent(t)
	a.Handle = qmptest.AgentReplies(map[string]string{
		"guest-get-disks":       `[{"name": "/dev/sdb", "partition": false, "address": {"bus-type": "scsi", "bus": 0, "target": 0, "unit": 1, "pci-controller": {"domain": 0, "bus": 0, "slot": 3, "function": 0}, "dev": "/dev/sdb"}}]`,
		"guest-get-fsinfo":      `[{"name": "sdb1", "mountpoint": "/srv", "type": "ext4", "disk": [{"bus-type": "scsi", "bus": 0, "target": 0, "unit": 1, "pci-controller": {"domain": 0, "bus": 0, "slot": 3, "function": 0}, "dev": "/dev/sdb"}]}]`,
		"guest-fsfreeze-status": `"thawed"`,
	})
	if err := os.Symlink(a.Sock(), n.paths.QGASocket(370)); err != nil {
		t.Fatal(err)
	}
	m := n.monitor(Options{Guest: true})
	ctx := context.Background()
	m.Sample(ctx)
	var s1 Disk
	for i := 0; i < 150; i++ {
		s1 = diskRows(m.Sample(ctx), 370)["scsi1"]
		if s1.GuestDevice != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s1.GuestDevice == nil || *s1.GuestDevice != "/dev/sdb" || !reflect.DeepEqual(s1.GuestMounts, []string{"/srv"}) {
		t.Fatalf("scsi1 guest: %v %v", s1.GuestDevice, s1.GuestMounts)
	}
	pciAsked := 0
	for _, c := range v.q.Seen() {
		if c == "query-pci" {
			pciAsked++
		}
	}
	// Two for the lookup, one for the freeze state (once per
	// --stall-after, not per sample).
	if pciAsked != 1 || a.Conns() != 3 {
		t.Errorf("query-pci asked %d times, agent connections %d (want 1 and 3: once for the run)", pciAsked, a.Conns())
	}
	// Without agent: 1 in the config: no query-pci, no agent.
	n2 := newFakeNode(t)
	v2 := n2.addRecorded(r, 370)
	m2 := n2.monitor(Options{Guest: true})
	m2.Sample(ctx)
	m2.Sample(ctx)
	for _, c := range v2.q.Seen() {
		if c == "query-pci" {
			t.Error("query-pci asked for a VM without agent")
		}
	}
}

// A thread that has gone since the last sample (a vCPU unplugged) makes
// the next sample ask for the thread ids again.
func TestThreadMapAskedAgainWhenAThreadGoes(t *testing.T) {
	n := newFakeNode(t)
	r := recording(t, "blockdev")
	v := n.addRecorded(r, 370)
	m := n.monitor(Options{})
	ctx := context.Background()
	m.Sample(ctx)
	// The same counters without the vCPU's thread.
	v.proc(copyTasks(t, r, func(tid, file string, b []byte) []byte {
		if tid == "3613" {
			return nil
		}
		return b
	}))
	m.Sample(ctx)
	before := len(v.q.Seen())
	m.Sample(ctx)
	if got := v.q.Seen()[before:]; len(got) != 5 || got[3] != "query-iothreads" {
		t.Errorf("after a thread went: %v", got)
	}
}

// Another QEMU under the same pid (the VM restarted and the pid came back)
// has another start time: its counters are not compared with the old ones.
func TestMonitorSamePidNewProcess(t *testing.T) {
	n := newFakeNode(t)
	r := recording(t, "blockdev")
	v := n.addRecorded(r, 370)
	m := n.monitor(Options{})
	ctx := context.Background()
	m.Sample(ctx)
	v.proc(copyTasks(t, r, func(tid, file string, b []byte) []byte {
		if file == "stat" {
			return []byte(strings.Replace(string(b), " 133653 ", " 999999 ", 1))
		}
		return b
	}))
	if s := m.Sample(ctx); vmRow(t, s, 370).Status != New || len(s.Disks) != 0 {
		t.Errorf("restarted process compared: %+v", vmRow(t, s, 370))
	}
	if s := m.Sample(ctx); vmRow(t, s, 370).Status != OK {
		t.Errorf("then: %+v", vmRow(t, s, 370))
	}
}

// BenchmarkCommandsPerVM counts the QMP commands one VM gets per sample
// (steady state, after the first) and the Monitor's own time per VM and
// sample, for QEMU 7.2 and 11.1 replies, both generations, 4 and 15 disks.
func BenchmarkCommandsPerVM(b *testing.B) {
	for _, g := range []struct {
		name     string
		greeting string
	}{{"qemu-7.2", qmptest.Greeting72}, {"qemu-11.1", qmptest.Greeting111}} {
		for _, blockdev := range []bool{true, false} {
			for _, disks := range []int{4, 15} {
				gen := "drive"
				if blockdev {
					gen = "blockdev"
				}
				b.Run(fmt.Sprintf("%s/%s/%d-disks", g.name, gen, disks), func(b *testing.B) {
					n := newFakeNode(b)
					v := n.syntheticVM(b, 500, 9000, disks, blockdev, g.greeting)
					m := n.monitor(Options{})
					m.Sample(context.Background())
					before := len(v.q.Seen())
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						m.Sample(context.Background())
					}
					b.StopTimer()
					b.ReportMetric(float64(len(v.q.Seen())-before)/float64(b.N), "cmds/sample")
				})
			}
		}
	}
}

// copyTasks copies the recording's side-b thread files into a new procfs
// tree through edit (nil leaves a thread's file out) and returns the tree.
func copyTasks(t *testing.T, r rec, edit func(tid, file string, b []byte) []byte) string {
	t.Helper()
	tree := t.TempDir()
	src := filepath.Join(r.tdir, "proc-b", fmt.Sprint(r.pid), "task")
	ents, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		for _, f := range []string{"stat", "schedstat", "comm"} {
			b, _ := os.ReadFile(filepath.Join(src, e.Name(), f))
			if b = edit(e.Name(), f, b); b == nil {
				continue
			}
			dst := filepath.Join(tree, fmt.Sprint(r.pid), "task", e.Name())
			os.MkdirAll(dst, 0o755)
			os.WriteFile(filepath.Join(dst, f), b, 0o644)
		}
	}
	return tree
}

// A VM whose config cannot be read is listed as unreachable with the
// reason, and the others go on.
func TestMonitorBadConfig(t *testing.T) {
	n := newFakeNode(t)
	n.addRecorded(recording(t, "blockdev"), 370)
	os.MkdirAll(n.paths.VMConfig(371), 0o755) // a directory, not a config
	n.write("var/run/qemu-server/371.pid", "4242\n")
	n.write("proc/4242/cmdline", "x")
	s := n.monitor(Options{}).Sample(context.Background())
	if v := vmRow(t, s, 371); v.Status != Unreachable || v.Error == "" {
		t.Errorf("bad config: %+v", v)
	}
	if v := vmRow(t, s, 370); v.Status != New {
		t.Errorf("370: %+v", v)
	}
}

// Issue 21 #1: a QMP reply of 12 MB of nesting crashed top (gjson's
// validator overflowed Go's stack). Now that VM's row is unreachable with
// the refusal, the other VM is sampled as before, and top goes on: once
// the VM answers normally again its rows span the interval across.
func TestMonitorHostileReply(t *testing.T) {
	n := newFakeNode(t)
	rb, rd := recording(t, "blockdev"), recording(t, "drive")
	a := n.addRecorded(rb, 370)
	b := n.addRecorded(rd, 371)
	m := n.monitor(Options{})
	ctx := context.Background()
	m.Sample(ctx)
	a.proc(filepath.Join(rb.tdir, "proc-b"))
	b.proc(filepath.Join(rd.tdir, "proc-b"))
	normal := a.reply["query-blockstats"]
	a.set("query-blockstats", "["+strings.Repeat("[", 12<<20)+"]")
	start := time.Now()
	s := m.Sample(ctx)
	if row := vmRow(t, s, 370); row.Status != Unreachable || !strings.Contains(row.Error, "query-blockstats: reply refused: nested deeper than 1024 levels") || len(diskRows(s, 370)) != 0 {
		t.Errorf("hostile: %+v", row)
	}
	if row := vmRow(t, s, 371); row.Status != OK || len(diskRows(s, 371)) != 4 {
		t.Errorf("the other VM: %+v", row)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the sample took %s", took)
	}
	a.set("query-blockstats", normal...)
	if s := m.Sample(ctx); vmRow(t, s, 370).Status != OK || len(diskRows(s, 370)) != 4 {
		t.Errorf("after: %+v", vmRow(t, s, 370))
	}
}

// stallConfig is stall's recorded VM (stall/testdata/README.md).
const stallConfig = fakenode.StallConfig

// TestMonitorStall replays stall's recording of a frozen filesystem: the
// disk whose io_uring workers are in D is STALLED with QEMU's idle time,
// the idle disk beside it is not, and the QMP commands are those of any
// sample.
func TestMonitorStall(t *testing.T) {
	rec := filepath.Join("..", "stall", "testdata", "frozen-7.2")
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(rec, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	for _, c := range []struct {
		after   time.Duration
		stalled float64
	}{{2 * time.Second, 2.3}, {2288 * time.Millisecond, 2.3}, {2289 * time.Millisecond, 0}} {
		n := newFakeNode(t)
		n.write("etc/pve/storage.cfg", "dir: local\n\tpath /var/lib/vz\n\tcontent images\n\ndir: frozen\n\tpath /mnt/frozen\n\tcontent images\n")
		v := n.addVM(100, 2452, stallConfig, []byte(read("cmdline")), qmptest.Greeting72)
		v.set("query-blockstats", read("query-blockstats.json"))
		v.set("query-block-jobs", "[]")
		v.set("query-iothreads", read("query-iothreads.json"))
		v.set("query-cpus-fast", read("query-cpus-fast.json"))
		v.set("qom-list-get", "[]")
		v.set("qom-get", "{}")
		v.start()
		v.proc(filepath.Join(rec, "proc"))
		m := n.monitor(Options{StallAfter: c.after})
		m.Sample(context.Background())
		first := len(v.q.Seen())
		s := m.Sample(context.Background())
		rows := diskRows(s, 100)
		if len(rows) != 2 || rows["scsi0"].StalledSeconds != 0 || rows["scsi1"].StalledSeconds != c.stalled {
			t.Fatalf("after %s: rows %+v", c.after, rows)
		}
		var codes []Code
		for _, f := range s.Findings {
			codes = append(codes, f.Code)
		}
		if c.stalled == 0 {
			if len(codes) != 0 {
				t.Errorf("after %s: findings %v", c.after, s.Findings)
			}
			continue
		}
		want := "scsi1 of VM 100 STALLED for 2.3 s: qemu: no request completed for 2.3 s (idle_time_ns); threads: 8 thread(s) serving the disk in state D (iou-wrk-2455 and 7 more; wchan 8 in percpu_rwsem_wait)"
		if len(s.Findings) != 1 || s.Findings[0].Code != DiskStalled || s.Findings[0].Message != want || !reflect.DeepEqual(s.Findings[0].Disks, []string{"scsi1"}) {
			t.Errorf("after %s: findings %+v", c.after, s.Findings)
		}
		if got := v.q.Seen()[first:]; !reflect.DeepEqual(got, []string{"query-blockstats", "query-block-jobs", "qom-get"}) {
			t.Errorf("commands of a sample with a stall: %v", got)
		}
	}
}

// TestMonitorGuestFreeze: top asks guest-fsfreeze-status at most once per
// --stall-after, never per sample; a guest frozen without a backup is a
// guest-frozen finding with the thaw command, thawed is none; while a
// backup job runs (the recorded blockdev-backup of scsi1) the agent is not
// opened at all and the VM's row says which answer it did not ask for.
func TestMonitorGuestFreeze(t *testing.T) {
	n := newFakeNode(t)
	r := recording(t, "blockdev")
	v := n.addRecorded(r, 370)
	n.write("etc/pve/qemu-server/370.conf", fakenode.Lab370Config+"agent: 1\n")
	var mu sync.Mutex
	state := "frozen"
	a := qmptest.NewAgent(t)
	a.Handle = func(w net.Conn, cmd string, _ gjson.Result) {
		mu.Lock()
		defer mu.Unlock()
		if cmd == "guest-fsfreeze-status" {
			fmt.Fprintf(w, "{\"return\": %q}\n", state)
		}
	}
	if err := os.Symlink(a.Sock(), n.paths.QGASocket(370)); err != nil {
		t.Fatal(err)
	}
	const after = 2 * time.Second
	m := n.monitor(Options{StallAfter: after, Interval: 100 * time.Millisecond})
	ctx := context.Background()
	frozen := func(s Sample) []Finding {
		var out []Finding
		for _, f := range s.Findings {
			if f.Code == GuestFrozen {
				out = append(out, f)
			}
		}
		return out
	}
	var s Sample
	start := time.Now()
	for i := 0; i < 100; i++ {
		s = m.Sample(ctx)
		if len(frozen(s)) > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if fs := frozen(s); len(fs) != 1 || !strings.Contains(fs[0].Message, "FROZEN and no backup holds the VM") || !strings.Contains(fs[0].Message, "qm guest cmd 370 fsfreeze-thaw") {
		t.Fatalf("findings %+v", s.Findings)
	}
	// More samples within --stall-after: no more agent exchanges, and no
	// more QMP commands than a sample's own (the hold read the sample's
	// query-block-jobs: one per sample).
	seen := len(v.q.Seen())
	for i := 0; i < 5; i++ {
		s = m.Sample(ctx)
	}
	jobsAsked := 0
	for _, c := range v.q.Seen()[seen:] {
		if c == "query-block-jobs" {
			jobsAsked++
		}
	}
	if jobsAsked != 5 {
		t.Errorf("query-block-jobs %d times in 5 samples of a frozen guest, want 5", jobsAsked)
	}
	if time.Since(start) < after && a.Conns() != 1 {
		t.Errorf("agent connections %d within --stall-after, want 1", a.Conns())
	}
	if vr := vmRow(t, s, 370); vr.GuestFreeze == nil || vr.GuestFreeze.State != vm.Frozen || len(vr.AgentNotAsked) != 0 {
		t.Errorf("VM row %+v", vr)
	}
	// Thawed, seen at the next --stall-after: no finding.
	mu.Lock()
	state = "thawed"
	mu.Unlock()
	time.Sleep(after)
	for i := 0; i < 100 && vmRow(t, s, 370).GuestFreeze.State != vm.Thawed; i++ {
		s = m.Sample(ctx)
		time.Sleep(20 * time.Millisecond)
	}
	if fs := frozen(s); len(fs) != 0 || vmRow(t, s, 370).GuestFreeze.State != vm.Thawed {
		t.Errorf("thawed: findings %+v, freeze %+v", fs, vmRow(t, s, 370).GuestFreeze)
	}
	// A backup job runs: the agent is left alone past --stall-after.
	v.set("query-block-jobs", string(r.read(t, "query-block-jobs-backup.json")))
	conns := a.Conns()
	time.Sleep(after)
	for i := 0; i < 3; i++ {
		s = m.Sample(ctx)
	}
	if a.Conns() != conns {
		t.Errorf("agent opened %d times during a backup", a.Conns()-conns)
	}
	vr := vmRow(t, s, 370)
	if vr.GuestFreeze == nil || vr.GuestFreeze.State != vm.FreezeNotAsked || len(vr.AgentNotAsked) != 1 ||
		vr.AgentNotAsked[0].Command != vm.FreezeCommand || !strings.Contains(vr.AgentNotAsked[0].Why, "backup job backup-scsi1-test running") {
		t.Errorf("VM row during a backup: %+v %+v", vr.GuestFreeze, vr.AgentNotAsked)
	}
	if fs := frozen(s); len(fs) != 0 {
		t.Errorf("findings %+v", fs)
	}
}
