package main

import (
	"context"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/sampler"
)

// Lab 37 section 6: mbps_wr=20 (20971520 B/s) and iops_rd=500.
const (
	labWriteLimit = 20 << 20
	labReadIOPS   = 500
)

var generations = []string{"blockdev", "drive"}

func startLab370(t *testing.T, gen string) (*fakenode.Node, *fakenode.VM) {
	t.Helper()
	n := fakenode.NewT(t)
	lab370(t, n, "")
	vm := n.MustStart(t, 370, fakenode.ArgvOptions{Legacy: gen == "drive", Blockdev: gen == "blockdev"})
	return n, vm
}

// qemuLimits reads a disk's limits straight from QEMU, without the code under
// test: qom-get of the throttle group under -blockdev, query-block's
// inserted.* under -drive. Zero values and default burst lengths are dropped.
func qemuLimits(t *testing.T, n *fakenode.Node, disk, gen string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := qmp.Do(context.Background(), n.Paths.QMPSocket(370), 5*time.Second, func(s qmp.Session) error {
		if gen == "blockdev" {
			r, err := s.Exec("qom-get", map[string]any{"path": "throttle-drive-" + disk, "property": "limits"})
			if err != nil {
				return err
			}
			for k, v := range r.Map() {
				if v.Int() != 0 && !(strings.HasSuffix(k, "-length") && v.Int() == 1) {
					out[k] = v.Int()
				}
			}
			return nil
		}
		r, err := s.Exec("query-block", nil)
		if err != nil {
			return err
		}
		for _, b := range r.Array() {
			if b.Get("device").String() != "drive-"+disk {
				continue
			}
			for k, v := range b.Get("inserted").Map() {
				if (strings.HasPrefix(k, "bps") || strings.HasPrefix(k, "iops")) && k != "iops_size" && v.Int() != 0 && !(strings.HasSuffix(k, "_length") && v.Int() == 1) {
					out[qmp.BackendToQEMULimitName(k)] = v.Int()
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("reading limits from QEMU: %v", err)
	}
	return out
}

// setBehindBack changes a running limit the way a second admin's qm set
// would, without the code under test.
func setBehindBack(t *testing.T, n *fakenode.Node, disk, gen string, bpsWrite int64) {
	t.Helper()
	err := qmp.DoRetry(context.Background(), n.Paths.QMPSocket(370), 5*time.Second, 10*time.Second, func(s qmp.Session) error {
		if gen == "blockdev" {
			_, err := s.Exec("qom-set", map[string]any{"path": "throttle-drive-" + disk, "property": "limits", "value": map[string]int64{"bps-write": bpsWrite}})
			return err
		}
		_, err := s.Exec("block_set_io_throttle", map[string]any{"device": "drive-" + disk, "bps": 0, "bps_rd": 0, "bps_wr": bpsWrite, "iops": 0, "iops_rd": labReadIOPS, "iops_wr": 0})
		return err
	})
	if err != nil {
		t.Errorf("changing the limit behind the tool's back: %v", err)
	}
}

// labLoads starts the lab's fio jobs as qemu-io queues in one generator: 1 MiB
// writes at queue depth 8 and 4 KiB random reads at queue depth 32.
func labLoads(vm *fakenode.VM, disk string) *fakenode.Load {
	return vm.StartLoad(
		fakenode.LoadSpec{Disk: disk, Write: true, Size: 1 << 20, Depth: 8},
		fakenode.LoadSpec{Disk: disk, Size: 4096, Depth: 32, Random: true, Every: 5 * time.Millisecond})
}

func stopLoads(t *testing.T, loads ...*fakenode.Load) {
	t.Helper()
	for _, l := range loads {
		st := l.Stop()
		if st.Err != nil {
			t.Errorf("load generator: %v", st.Err)
		}
		t.Logf("load generator: %d requests in %d exchanges, %s waiting for the socket", st.Submitted, st.Exchanges, st.Waited.Round(time.Millisecond))
	}
}

func verdictOf(t *testing.T, v *limitVerifyJSON, key string) limitVerdictJSON {
	t.Helper()
	if v == nil {
		t.Fatalf("no verify object")
	}
	for _, vd := range v.Verdicts {
		if vd.Limit == key {
			return vd
		}
	}
	t.Fatalf("no verdict for %s in %+v", key, v.Verdicts)
	return limitVerdictJSON{}
}

// TestLimitLiveHolds is Lab 37 section 6 from the node: the lab's load runs
// unthrottled, mbps_wr=20 and iops_rd=500 are applied live, and --verify
// must measure both within 3 % of the limit and say holds.
func TestLimitLiveHolds(t *testing.T) {
	for _, gen := range generations {
		t.Run(qemuName(t)+"/"+gen, func(t *testing.T) {
			n, vm := startLab370(t, gen)
			load := labLoads(vm, "scsi1")
			defer stopLoads(t, load)

			// What the load generator sustains without a limit: it must
			// push well past both limits, or "holds" would prove nothing.
			b := &sampler.Blockstats{Socket: n.Paths.QMPSocket(370), Disks: []string{"scsi1"}}
			ser, err := b.Run(context.Background(), 3*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			free, err := ser.Rates("scsi1", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("unthrottled load: write %.1f MiB/s, read %.0f IOPS", free.WriteBytesPerSec/(1<<20), free.ReadOpsPerSec)
			if free.WriteBytesPerSec < 1.5*labWriteLimit || free.ReadOpsPerSec < 1.3*labReadIOPS {
				t.Fatalf("the load generator cannot exceed the limits (write %.1f MiB/s, read %.0f IOPS)", free.WriteBytesPerSec/(1<<20), free.ReadOpsPerSec)
			}

			var out limitJSON
			errs, code := runJSON(t, n, &out, "limit", "370", "scsi1", "--mbps-wr", "20", "--iops-rd", "500")
			if code != 0 {
				t.Fatalf("apply: exit %d: %s", code, errs)
			}
			want := map[string]int64{"bps-write": labWriteLimit, "iops-read": labReadIOPS}
			if got := qemuLimits(t, n, "scsi1", gen); !reflect.DeepEqual(got, want) {
				t.Fatalf("QEMU runs %v, want %v", got, want)
			}
			method := map[string]string{"blockdev": "qom-set", "drive": "block_set_io_throttle"}[gen]
			a := out.Apply
			if a == nil || a.Method != method || !a.Confirmed || a.Persisted || len(a.Before) != 0 ||
				!reflect.DeepEqual(a.After, map[string]float64{"mbps_wr": 20, "iops_rd": 500}) {
				t.Fatalf("apply: %+v", a)
			}
			if !reflect.DeepEqual(out.Limits.Running, map[string]float64{"mbps_wr": 20, "iops_rd": 500}) || len(out.Limits.Configured) != 0 || len(out.Limits.Differs) != 2 {
				t.Errorf("limits after apply: %+v", out.Limits)
			}
			if !strings.Contains(strings.Join(out.Notes, " "), "disappear at the next restart") {
				t.Errorf("no restart warning: %v", out.Notes)
			}

			start := time.Now()
			var ver limitJSON
			errs, code = runJSON(t, n, &ver, "limit", "370", "scsi1", "--verify")
			took := time.Since(start)
			if code != 0 {
				t.Fatalf("verify: exit %d: %s", code, errs)
			}
			if errs != "" {
				t.Errorf("--json wrote to stderr: %q", errs)
			}
			for _, c := range []struct {
				key   string
				limit float64
			}{{"mbps_wr", 20}, {"iops_rd", 500}} {
				vd := verdictOf(t, ver.Verify, c.key)
				dev := (vd.Measured - c.limit) / c.limit * 100
				t.Logf("%s: measured %.3f against %.0f (%+.2f %%), queue %.1f, latency %.0f ms, predicted %.0f ms", c.key, vd.Measured, c.limit, dev, vd.QueueDepth, vd.LatencyMs, *vd.PredictedLatencyMs)
				if vd.Verdict != "holds" || math.Abs(dev) > 3 {
					t.Errorf("%s: verdict %s, measured %.3f (%+.2f %% from %.0f), want holds within 3 %%", c.key, vd.Verdict, vd.Measured, dev, c.limit)
				}
				// Latency is queue depth / rate (the lab: 8 / 20 per second = 0.40 s).
				if vd.PredictedLatencyMs == nil || math.Abs(vd.LatencyMs-*vd.PredictedLatencyMs) > 0.15*vd.LatencyMs {
					t.Errorf("%s: latency %.0f ms, predicted %v", c.key, vd.LatencyMs, vd.PredictedLatencyMs)
				}
			}
			m := ver.Verify.Measured
			if math.Abs(m.WriteBps-labWriteLimit)/labWriteLimit > 0.03 || math.Abs(m.ReadIOPS-labReadIOPS)/labReadIOPS > 0.03 {
				t.Errorf("measured %+v", m)
			}
			t.Logf("%d samples, %d missed, steady part %.2f s", ver.Verify.Samples, ver.Verify.Missed, ver.Verify.SteadyS)
			if ver.Verify.WindowS != 10 || ver.Verify.SteadyS < 6.5 || took > 13*time.Second {
				t.Errorf("window %v s, steady %v s, took %s", ver.Verify.WindowS, ver.Verify.SteadyS, took)
			}
		})
	}
}
