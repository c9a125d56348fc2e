package sampler

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// runningVM is VM 100 with one disk, "running" with a generated command
// line, its QMP socket served by handler.
func runningVM(t *testing.T, handler func(string, gjson.Result) string) (*vm.VM, *qmptest.QEMU) {
	t.Helper()
	const conf = "scsihw: virtio-scsi-single\nscsi1: local-lvm:vm-100-disk-1,size=1G\n"
	const storageCfg = "lvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n"
	cfg, err := qemuserver.ParseConfig(strings.NewReader(conf), "100.conf")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := qemuserver.ParseStorages(strings.NewReader(storageCfg), "storage.cfg")
	argv, err := fakenode.Argv("qemu-system-x86_64", cfg, st, fakenode.ArgvOptions{VMID: 100, RunDir: "/var/run/qemu-server"})
	if err != nil {
		t.Fatal(err)
	}
	tree := vmtest.New(t, 100, conf, storageCfg, argv)
	q := qmptest.NewQEMU(t, handler)
	tree.Serve(t, q)
	v := tree.Load(t)
	if !v.Running {
		t.Fatal("fake VM not running")
	}
	return v, q
}

// TestTakeNodes: the named nodes' counters come in the same exchange as
// the devices' (query-blockstats with query-nodes), others are left out.
func TestTakeNodes(t *testing.T) {
	v, q := runningVM(t, func(cmd string, args gjson.Result) string {
		if args.Get("query-nodes").Bool() {
			return qmptest.Return(`[{"node-name":"e1","stats":{"unmap_operations":0},"driver-specific":{"discard-nb-ok":3,"discard-bytes-ok":12288,"discard-nb-failed":1}},{"node-name":"f1","stats":{}}]`)
		}
		return qmptest.Return(`[{"device":"","qdev":"scsi1","node-name":"drive-scsi1","stats":{"unmap_operations":3,"unmap_bytes":12288}}]`)
	})
	b := &Window{VM: v, Disks: []string{"scsi1"}, Nodes: []string{"e1"}, Timeout: time.Second}
	s, err := b.Take(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Nodes["e1"]; len(s.Nodes) != 1 || n.DiscardNbOK != 3 || n.DiscardBytesOK != 12288 || n.DiscardNbFailed != 1 || s.Stats["scsi1"].UnmapOps != 3 {
		t.Errorf("sample %+v", s)
	}
	if q.Conns() != 1 || q.Commands() != 2 {
		t.Errorf("%d connections, %d commands: want one exchange of two", q.Conns(), q.Commands())
	}
	// Without Nodes, one command and no node map.
	b.Nodes = nil
	if s, err = b.Take(context.Background()); err != nil || s.Nodes != nil || q.Commands() != 3 {
		t.Errorf("%v %+v, %d commands", err, s, q.Commands())
	}
}

// TestWindowSteps steps through a window with the hook: every sample is
// one exchange of what the Query asks, each tick numbered and timed from
// the start of the window, and a device not in Disks is left out.
func TestWindowSteps(t *testing.T) {
	v, q := runningVM(t, func(cmd string, args gjson.Result) string {
		switch cmd {
		case "query-blockstats":
			return qmptest.Return(`[{"device":"","qdev":"scsi1","node-name":"drive-scsi1","stats":{"wr_bytes":1}},{"device":"","qdev":"scsi2","node-name":"drive-scsi2","stats":{}}]`)
		case "query-block-jobs":
			return qmptest.Return(`[]`)
		}
		return qmptest.NotFound(cmd)
	})
	var ticks []Tick
	w := &Window{VM: v, Disks: []string{"scsi1"}, Interval: 100 * time.Millisecond, Query: vm.Query{Need: vm.NeedJobs},
		OnSample: func(tk Tick) { ticks = append(ticks, tk) }}
	ser, err := w.Run(context.Background(), 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(ser.Samples) != 4 || len(ticks) != 4 || q.Conns() != 4 {
		t.Fatalf("%d samples, %d ticks, %d connections: want 4 of each", len(ser.Samples), len(ticks), q.Conns())
	}
	for i, tk := range ticks {
		if tk.N != i+1 || tk.Window != 300*time.Millisecond || tk.Detail != "" || len(tk.Sample.Stats) != 1 || tk.Sample.Stats["scsi1"].WrBytes != 1 ||
			tk.Sample.Live == nil || tk.Sample.Live.Jobs == nil || tk.Sample.Nodes != nil {
			t.Errorf("tick %d: %+v", i, tk)
		}
		if i > 0 && tk.Elapsed <= ticks[i-1].Elapsed {
			t.Errorf("tick %d at %s, not after %s", i, tk.Elapsed, ticks[i-1].Elapsed)
		}
	}
	if ticks[3].Elapsed < 300*time.Millisecond {
		t.Errorf("the last sample at %s, before the end of the window", ticks[3].Elapsed)
	}
	if got, want := strings.Join(q.Seen(), " "), strings.TrimSpace(strings.Repeat("query-blockstats query-block-jobs ", 4)); got != want {
		t.Errorf("commands %s, want %s", got, want)
	}
}

// TestSchedule: the one clock. A take that overruns by more than half an
// interval skips the tick it ran into (counted), not the ones after; with
// a window the last take is at its end; without one it runs until done;
// a cancelled context ends the wait with its error.
func TestSchedule(t *testing.T) {
	const iv = 200 * time.Millisecond
	start := time.Now()
	var ks []int
	var lastAt time.Duration
	missed, err := Schedule(context.Background(), iv, 5*iv+iv/4, func(k int, last bool) (bool, error) {
		ks = append(ks, k)
		if k == 1 {
			time.Sleep(iv + iv*3/4) // into tick 2 by 3/4 of an interval: tick 2 is skipped
		}
		if last {
			lastAt = time.Since(start)
		}
		return false, nil
	})
	if err != nil || missed != 1 || !reflect.DeepEqual(ks, []int{0, 1, 3, 4, 5}) || lastAt < 5*iv+iv/4 {
		t.Errorf("ticks %v, %d missed, last at %s, %v", ks, missed, lastAt, err)
	}
	n, lastK := 0, 0
	if missed, err := Schedule(context.Background(), 20*time.Millisecond, 0, func(k int, last bool) (bool, error) {
		n, lastK = n+1, k
		return k >= 9 || last, nil
	}); err != nil || n+missed != 10 || lastK != 9 {
		t.Errorf("until done: %d takes, %d missed, the last tick %d, %v", n, missed, lastK, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stop := errors.New("stop")
	if _, err := Schedule(ctx, time.Hour, 0, func(k int, _ bool) (bool, error) { cancel(); return false, nil }); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if _, err := Schedule(context.Background(), time.Millisecond, 0, func(int, bool) (bool, error) { return false, stop }); err != stop {
		t.Errorf("take's error: %v", err)
	}
}
