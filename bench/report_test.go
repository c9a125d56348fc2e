package bench

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/fio"
)

// benchResult is a two-disk run on the fake agent (recorded fio runs),
// virtio1 unsafe with its flushes counted: sync carries flushes-ignored.
func benchResult(t *testing.T) *Result {
	t.Helper()
	g := &guest{status: fioStatus(t)}
	m := method(t, "rr4k", "sync")
	dir := filepath.Join(t.TempDir(), "out")
	out := Run(context.Background(), newGuest(t, g), m, twoDisks(), Options{VMID: 370, Out: newFolder(t, dir), Clock: &stepClock{},
		Observer: fixedObserver{Observation{FlushOps: p(300), DirtyGrowthBytes: p(0), CachedBytes: p(0)}}})
	if out.Err != nil {
		t.Fatal(out.Err)
	}
	r := Summarise(m, twoDisks(), out, 0)
	r.VMID, r.Out, r.Fio = 370, dir, "fio-3.33"
	return r
}

func TestHTMLReport(t *testing.T) {
	r := benchResult(t)
	page := string(HTML(r))
	for _, bad := range []string{"<script", "http://", "https://", "<link", "src="} {
		if bad == "http://" {
			page2 := strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, "")
			if strings.Contains(page2, bad) {
				t.Errorf("page refers outside itself: %s", bad)
			}
			continue
		}
		if strings.Contains(page, bad) {
			t.Errorf("page holds %s", bad)
		}
	}
	if n := strings.Count(page, "<svg "); n != 2 {
		t.Errorf("%d charts, want one per job (2)", n)
	}
	bars := regexp.MustCompile(`<rect class="bar" data-disk="(\w+)"`).FindAllStringSubmatch(page, -1)
	if len(bars) != 4 || bars[0][1] != "scsi1" || bars[1][1] != "virtio1" {
		t.Errorf("bars %v", bars)
	}
	// Two runs each: a whisker per bar (identical runs: min = max).
	if strings.Count(page, `class="whisker"`) != 4 {
		t.Errorf("whiskers: %d", strings.Count(page, `class="whisker"`))
	}
	if strings.Count(page, `class="marker"`) != 1 || !strings.Contains(page, "<title>flushes-ignored</title>") {
		t.Error("the unsafe disk's sync bar lacks its evidence marker")
	}
	if strings.Count(page, `class="p99"`) != 4 || !strings.Contains(page, "within-noise") || !strings.Contains(page, "Settings as they ran") {
		t.Error("p99, verdicts or settings missing")
	}
}

// With --histogram each job's page section has a line per disk and kind
// with QEMU's percentiles, reads before writes before flushes; without,
// none.
func TestHTMLReportQEMULatency(t *testing.T) {
	r := benchResult(t)
	if page := string(HTML(r)); strings.Contains(page, "QEMU's latency") {
		t.Error("QEMU's latency without --histogram")
	}
	st := func(v ...float64) fio.Stat { return fio.NewStat(v) }
	r.Disks[0].Jobs[1].QEMULatencyMs = map[string]fio.Stat{"flush_p50": st(0.3), "flush_p95": st(0.6), "flush_p99": st(1),
		"write_p50": st(327.7, 327.8), "write_p95": st(342.7, 342.7), "write_p99": st(344, 344)}
	want := []string{"write p50 328ms (±0%), p95 343ms (±0%), p99 344ms (±0%)", "flush p50 300µs, p95 600µs, p99 1ms"}
	if got := r.Disks[0].Jobs[1].QEMULatencyLines(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("lines %q", got)
	}
	page := string(HTML(r))
	notes := regexp.MustCompile(`<p class="note">([^<]*)</p>`).FindAllStringSubmatch(page, -1)
	if len(notes) != 2 || notes[0][1] != "scsi1: QEMU&#39;s latency (histogram, at the node): "+want[0] {
		t.Errorf("notes %q", notes)
	}
}
