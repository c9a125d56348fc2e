package vm

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// NeedEvidence sends the capture's commands in their order, then one
// qom-get per group named (on QEMU >= 10.1 too), keeps each reply raw and
// a refused command with its refusal, the rest still asked; it is asked
// alone.
func TestAskEvidence(t *testing.T) {
	v, q := liveVM(t, 2, qmptest.Greeting111)
	withHandler(q, func(cmd string, args gjson.Result) string {
		switch cmd {
		case "query-blockstats", "query-iothreads", "query-cpus-fast":
			return qmptest.Return("[]")
		case "query-block-jobs":
			return qmptest.NotFound(cmd)
		case "qom-get":
			if args.Get("path").String() == "/objects/throttle-drive-virtio1" {
				return qmptest.NotFound(cmd)
			}
			return qmptest.Return(`{"bps-write": 5}`)
		}
		return ""
	})
	before := len(q.Seen())
	a, err := v.Ask(context.Background(), 2*time.Second, Query{Need: NeedEvidence, LimitDisks: []string{"scsi0", "virtio1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(q.Seen()[before:], " "); got != "query-block query-blockstats query-block-jobs query-iothreads query-cpus-fast qom-get qom-get" {
		t.Errorf("commands %s", got)
	}
	var got []string
	for _, r := range a.Evidence {
		s := r.Command + " " + r.Disk + ":"
		if r.Err != nil {
			s += " refused"
		} else if r.Raw == "" {
			s += " empty"
		}
		got = append(got, s)
	}
	if want := "query-block :, query-blockstats :, query-block-jobs : refused, query-iothreads :, query-cpus-fast :, qom-get scsi0:, qom-get virtio1: refused"; strings.Join(got, ", ") != want {
		t.Errorf("evidence %s, want %s", strings.Join(got, ", "), want)
	}
	if r := a.Evidence[5]; r.Raw != `{"bps-write": 5}` {
		t.Errorf("group's raw reply %q", r.Raw)
	}
	before = len(q.Seen())
	if _, err := v.Ask(context.Background(), 2*time.Second, Query{Need: NeedEvidence | NeedStats}); err == nil || len(q.Seen()) != before {
		t.Errorf("NeedEvidence with another Need: %v, %d commands", err, len(q.Seen())-before)
	}
}

// Change's commands are sent last, as qemu-server and QEMU name them;
// SetLimits is one exchange of nothing else.
func TestChange(t *testing.T) {
	v, q := liveVM(t, 1, qmptest.Greeting111)
	var args []string
	withHandler(q, func(cmd string, a gjson.Result) string {
		if cmd == "query-blockstats" {
			return qmptest.Return("[]")
		}
		if cmd == "block-latency-histogram-set" || cmd == "qom-set" {
			args = append(args, cmd+" "+a.Raw)
			return qmptest.Return("{}")
		}
		return ""
	})
	before := len(q.Seen())
	_, err := v.Ask(context.Background(), 2*time.Second, Query{Need: NeedStats, Then: func(c Change, a *Answer) error {
		if a.Stats == nil {
			t.Error("Then before the counters")
		}
		if err := c.SetHistogram("scsi0", []int64{10, 20}); err != nil {
			return err
		}
		return c.SetHistogram("scsi0", nil)
	}})
	if err != nil {
		t.Fatal(err)
	}
	full := map[string]int64{}
	for _, k := range qmp.ThrottleLimitNames {
		full[k] = 0
	}
	full["bps-write"] = 1 << 20
	err = v.SetLimits(context.Background(), 2*time.Second, "scsi0", full)
	if got := strings.Join(q.Seen()[before:], " "); got != "query-blockstats block-latency-histogram-set block-latency-histogram-set qom-set" {
		t.Errorf("commands %s (SetLimits: %v)", got, err)
	}
	if len(args) < 2 || args[0] != `block-latency-histogram-set {"boundaries-flush":[10,20],"boundaries-read":[10,20],"boundaries-write":[10,20],"id":"scsi0"}` || args[1] != `block-latency-histogram-set {"id":"scsi0"}` {
		t.Errorf("histogram arguments %q", args)
	}
	if len(args) != 3 || !strings.HasPrefix(args[2], `qom-set {"path":"throttle-drive-scsi0","property":"limits","value":{`) || !strings.Contains(args[2], `"bps-write":1048576`) {
		t.Errorf("limits %q", args)
	}
}
