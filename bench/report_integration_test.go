//go:build integration

package bench

import (
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/internal/headless"
)

// TestHTMLReportInChromium renders the report in headless Chromium
// (Debian's chromium): the DOM Chromium built has the charts' bars, and
// the screenshot has each disk's bar colour where the bars are.
func TestHTMLReportInChromium(t *testing.T) {
	r := headless.Render(t, HTML(benchResult(t)))
	if n := strings.Count(r.DOM, `class="bar"`); n != 4 {
		t.Errorf("rendered DOM has %d bars, want 4:\n%.2000s", n, r.DOM)
	}
	if !strings.Contains(r.DOM, "flushes-ignored") || !strings.Contains(r.DOM, "within-noise") {
		t.Error("rendered DOM lacks the evidence or the verdicts")
	}
	// Each chart in Lab 19's own terms: rr4k in IOPS, sync by its fsync
	// latency in ms (lower is better).
	if !strings.Contains(r.DOM, `data-figure="iops"`) || !strings.Contains(r.DOM, `data-figure="fsync"`) || !strings.Contains(r.DOM, "fsync latency, ms, lower is better") {
		t.Error("rendered DOM lacks the charts' figures")
	}
	// #0072B2 (scsi1) and #E69F00 (virtio1): two bars each, 56 px wide.
	for _, c := range []string{"0072b2", "e69f00"} {
		if r.Pixels[c] < 2*56*20 {
			t.Errorf("colour %s on %d pixels: the bars were not drawn", c, r.Pixels[c])
		}
	}
}
