package bench

import (
	"strings"
	"testing"
)

// Each job's chart holds that job's bars (the unsafe disk's
// flushes-ignored marker under sync, not rr4k) and its pair's IOPS
// verdict alone (no other metric, no other job's).
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
	for name, part := range map[string]string{"rr4k": rr4k, "sync": sync} {
		if n := strings.Count(strings.SplitN(part, "<footer>", 2)[0], "<tr><td>"); n != 1 || !strings.Contains(part, "<td>IOPS</td>") {
			t.Errorf("%s: %d pair rows, want its one IOPS row", name, n)
		}
	}
}
