package vm

import (
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// Ask's running limits: only the disks named (of those with throttling),
// every one at once on QEMU >= 10.1, and with a Turn before 10.1 every
// group at the first query, then one per query in turn.
func TestAskLimits(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		greeting string
		asked    [][]string // LimitsRead per query
		commands []string   // of the second query
	}{
		{qmptest.Greeting111, [][]string{{"scsi0", "virtio1", "scsi2"}, {"scsi0", "virtio1", "scsi2"}, {"scsi0", "virtio1", "scsi2"}}, []string{"qom-list-get"}},
		{qmptest.Greeting72, [][]string{{"scsi0", "virtio1", "scsi2"}, {"scsi0"}, {"virtio1"}}, []string{"qom-get"}},
	} {
		v, q := liveVM(t, 4, tc.greeting)
		turn := &LimitTurn{}
		var got [][]string
		var second []string
		for i := 0; i < 3; i++ {
			before := len(q.Seen())
			a, err := v.Ask(ctx, 2*time.Second, Query{Need: NeedLimits, LimitDisks: []string{"scsi0", "virtio1", "scsi2", "sata9"}, Turn: turn})
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, a.LimitsRead)
			for _, id := range a.LimitsRead {
				if a.Limits[id].String() != "bps-write=10485760" {
					t.Errorf("%s: %v", id, a.Limits[id])
				}
			}
			if i == 1 {
				second = q.Seen()[before:]
			}
		}
		if !reflect.DeepEqual(got, tc.asked) || !reflect.DeepEqual(second, tc.commands) {
			t.Errorf("%.30s: read %v, the second query's commands %v", tc.greeting, got, second)
		}
	}
	// Without a Turn every group is read each time; no disk named: every
	// disk with throttling.
	v, q := liveVM(t, 2, qmptest.Greeting72)
	a, err := v.Ask(ctx, 2*time.Second, Query{Need: NeedLimits})
	if err != nil || !reflect.DeepEqual(a.LimitsRead, []string{"scsi0", "virtio1"}) || len(a.Limits) != 2 || q.Commands() != 2 {
		t.Errorf("%v %+v, %v", err, a, q.Seen())
	}
}

// Whatever is asked, the commands go in one fixed order, each once, and
// nothing that was not asked is sent.
func TestAskOrder(t *testing.T) {
	v, q := answering(t)
	a, err := v.Ask(context.Background(), 2*time.Second, Query{Need: NeedPCI | NeedThreads | NeedLive | NeedStats | NeedStatus | NeedJobs | NeedNodeStats})
	if err != nil {
		t.Fatal(err)
	}
	want := "query-status query-blockstats query-blockstats query-block-jobs query-block query-named-block-nodes qom-list-get query-iothreads query-cpus-fast query-pci"
	if got := strings.Join(q.Seen(), " "); got != want {
		t.Errorf("commands\n%s\nwant\n%s", got, want)
	}
	if v.Disks[0].Live == nil || a.Threads.PID != v.Pid || a.Jobs == nil || a.Stats == nil || a.Nodes == nil || a.PCI == nil || v.Status != "running" {
		t.Errorf("answer %+v", a)
	}
	// Asked for the PCI devices only: one command, nothing else set.
	v, q = answering(t)
	if a, err = v.Ask(context.Background(), 2*time.Second, Query{Need: NeedPCI}); err != nil || q.Commands() != 1 || a.Stats != nil || a.Limits != nil || v.Disks[0].Live != nil || v.Status != "" {
		t.Errorf("%v %v %+v", err, q.Seen(), a)
	}
}

// answering is liveVM that also answers the run state and empty lists of
// counters, jobs, threads and PCI devices.
func answering(t *testing.T) (*VM, *qmptest.QEMU) {
	v, q := liveVM(t, 2, qmptest.Greeting111)
	disks := q.Handler
	q.Handler = func(cmd string, args gjson.Result) string {
		switch cmd {
		case "query-status":
			return qmptest.Return(`{"status": "running"}`)
		case "query-blockstats", "query-block-jobs", "query-iothreads", "query-cpus-fast", "query-pci":
			return qmptest.Return("[]")
		}
		return disks(cmd, args)
	}
	return v, q
}
