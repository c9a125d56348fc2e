//go:build integration

package main

import (
	"os/exec"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
)

// TestMetricsPrometheusStall: real Prometheus, with the package's rule
// file, scrapes `metrics --listen` on a node where VM 100's scsi1 sits on
// a frozen filesystem with writes outstanding, beside VM 100's idle scsi0
// and VM 101's idle scsi0. PveDiskCheckDiskStalled (>= 30 s, no `for:`, so
// it goes straight to firing) stays silent while Prometheus sees the disk
// stalled for less than 30 s, then fires for 100/scsi1 and nothing else;
// after the thaw the stalled seconds go back to 0 and the alert resolves.
func TestMetricsPrometheusStall(t *testing.T) {
	prom := requireTool(t, "prometheus")
	n, v, fz := fakenode.StallVM(t)
	// VM 101's disk on the thin pool of the harness' lvs double: the
	// node's collection fails nowhere.
	n.UseDoubles(t)
	n.MustVolume(t, "local-lvm", "vm-101-disk-0", 16<<20)
	if err := n.WriteConfig(101, "name: idle\nscsihw: virtio-scsi-single\nscsi0: local-lvm:vm-101-disk-0,iothread=1,size=16M\n"); err != nil {
		t.Fatal(err)
	}
	n.MustStart(t, 101, fakenode.ArgvOptions{}).MustQemuIO(t, "scsi0", "aio_write -P 0x5a 0 64k")
	addr := startPrometheus(t, prom, serveMetrics(t, n.Root))
	// Thawed first at cleanup (before metrics --listen and Prometheus
	// stop), on every path; the storage's own cleanup thaws again.
	t.Cleanup(func() { _ = exec.Command("fsfreeze", "-u", fz.Mount).Run() })

	frozeAt := v.FreezeWithWrites(t, fz)
	var alert gjson.Result
	silentUpTo := 0.0 // the most stalled seconds Prometheus held with no alert
	for deadline := frozeAt.Add(60 * time.Second); ; {
		// Alerts first, then the gauge: while the writes block the gauge only
		// grows, so an alert seen here was evaluated on a value the gauge
		// read next is at least.
		active := stallAlerts(t, addr)
		s := stalledSeconds(t, addr)
		if len(active) > 0 {
			if s["100/scsi1"] < 30 {
				t.Errorf("alert active with 100/scsi1 stalled %v s in Prometheus: %v", s["100/scsi1"], active)
			}
			if len(active) != 1 {
				t.Errorf("active stall alerts: %v", active)
			}
			alert = active[0]
			t.Logf("%v after the freeze: stalled seconds %v, alert %s", time.Since(frozeAt).Round(100*time.Millisecond), s, alert.Raw)
			if s["100/scsi0"] != 0 || s["101/scsi0"] != 0 || len(s) != 3 {
				t.Errorf("stalled seconds of the idle disks: %v", s)
			}
			break
		}
		silentUpTo = max(silentUpTo, s["100/scsi1"])
		if time.Now().After(deadline) {
			t.Fatalf("no stall alert %v after the freeze; stalled seconds %v", time.Since(frozeAt), s)
		}
		time.Sleep(500 * time.Millisecond)
	}
	if silentUpTo < 28 {
		t.Errorf("silent up to %v stalled seconds only: the edge under 30 s was not seen", silentUpTo)
	}
	if l := alert.Get("labels"); alert.Get("state").String() != "firing" || l.Get("vmid").String() != "100" || l.Get("disk").String() != "scsi1" || l.Get("severity").String() != "critical" {
		t.Errorf("stall alert: %s", alert.Raw)
	}
	t.Logf("silent up to %v stalled seconds, then %s %s", silentUpTo, alert.Get("labels.alertname"), alert.Get("state"))
	checkRules(t, addr)
	var others []string
	for _, a := range gjson.Get(promAlerts(t, addr), "data.alerts").Array() {
		if a.Get("labels.alertname").String() != "PveDiskCheckDiskStalled" {
			others = append(others, a.Get("labels.alertname").String()+"/"+a.Get("labels.vmid").String()+"/"+a.Get("state").String())
		}
	}
	if len(others) != 0 {
		t.Errorf("other alerts active: %v; collection errors %v", others, promQuery(t, addr, `pvediskcheck_collect_errors > 0`))
	}

	fz.Thaw(t)
	for deadline := time.Now().Add(20 * time.Second); ; {
		active := stallAlerts(t, addr)
		s := stalledSeconds(t, addr)
		if len(active) == 0 && s["100/scsi1"] == 0 && len(s) == 3 {
			t.Logf("after the thaw: stalled seconds %v, no stall alert", s)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 s after the thaw: stalled seconds %v, stall alerts %v", s, active)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// stalledSeconds is pvediskcheck_disk_stalled_seconds in Prometheus, by
// vmid/disk.
func stalledSeconds(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	s := map[string]float64{}
	for _, r := range promQuery(t, addr, `pvediskcheck_disk_stalled_seconds`) {
		s[r.Metric["vmid"]+"/"+r.Metric["disk"]] = value(t, r.Value)
	}
	return s
}

// stallAlerts are the active PveDiskCheckDiskStalled alerts.
func stallAlerts(t *testing.T, addr string) []gjson.Result {
	t.Helper()
	return gjson.Get(promAlerts(t, addr), `data.alerts.#(labels.alertname=="PveDiskCheckDiskStalled")#`).Array()
}
