package bench

import (
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/layers"
)

// Each job's chart holds that job's bars (the unsafe disk's
// flushes-ignored marker under sync, not rr4k), charted by the figure Lab
// 19's table reads it by (rr4k in IOPS, sync by its fsync latency), and
// its pair's verdicts on Lab 19's figures alone, the job's own first (no
// p99 or lat row, no other job's).
func TestHTMLReportPerJob(t *testing.T) {
	page := string(HTML(benchResult(t)))
	i, j := strings.Index(page, `<h2 id="job-rr4k">`), strings.Index(page, `<h2 id="job-sync">`)
	if i < 0 || j < 0 {
		t.Fatalf("job headings missing")
	}
	rr4k, sync := page[i:j], page[j:]
	if strings.Contains(rr4k, `class="marker"`) || !strings.Contains(sync, `class="marker"`) {
		t.Error("the sync job's marker is not on sync's chart alone")
	}
	for name, c := range map[string]struct {
		part, figure, first string
		rows                []string
	}{
		"rr4k": {rr4k, `data-figure="iops"`, "IOPS", []string{"IOPS", "MiB/s", "clat mean"}},
		"sync": {sync, `data-figure="fsync"`, "fsync mean", []string{"fsync mean", "IOPS", "MiB/s", "clat mean"}},
	} {
		body := strings.SplitN(c.part, "<footer>", 2)[0]
		var got []string
		for _, row := range strings.Split(body, "<tr><td>")[1:] {
			cells := strings.Split(row, "<td>")
			got = append(got, strings.TrimSuffix(cells[2], "</td>"))
		}
		if !strings.Contains(body, c.figure) || strings.Join(got, ",") != strings.Join(c.rows, ",") {
			t.Errorf("%s: chart %v, pair rows %q; want %s and rows %q", name, strings.Contains(body, c.figure), got, c.figure, c.rows)
		}
	}
}

// A job's layer verdict per run is under that job's chart alone.
func TestHTMLReportLayerVerdict(t *testing.T) {
	r := benchResult(t)
	r.Disks[0].Jobs[0].Layers = []layers.Split{{Verdict: layers.Verdict("held by QEMU: I/O limit"), Says: "guest waits 160 ms per request, of which QEMU 158 ms: held by QEMU: I/O limit"}}
	page := string(HTML(r))
	job := r.Disks[0].Jobs[0].Name
	i := strings.Index(page, `<h2 id="job-`+job+`">`)
	j := strings.Index(page[i+1:], `<h2 id="job-`)
	if i < 0 || j < 0 {
		t.Fatal("job headings missing")
	}
	want := r.Disks[0].ID + " run 1: where the time went: guest waits 160 ms per request, of which QEMU 158 ms: held by QEMU: I/O limit"
	if !strings.Contains(page[i:i+1+j], want) || strings.Count(page, "where the time went") != 1 {
		t.Errorf("layer verdict not under %s's chart alone", job)
	}
}
