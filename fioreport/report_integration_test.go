//go:build integration

package fioreport

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/internal/headless"
)

// TestComparePageInChromium renders fio compare's page of Lab 37's scsi
// against sata in headless Chromium: the DOM has the three charts' six
// bars and the verdicts, the screenshot A's and B's colours where the
// bars are.
func TestComparePageInChromium(t *testing.T) {
	p, _ := page(t, filepath.Join("..", "fio", "testdata", "lab", "lab37"), "scsi", "sata", nil)
	r := headless.Render(t, []byte(p))
	if n := strings.Count(r.DOM, `class="bar"`); n != 6 {
		t.Errorf("rendered DOM has %d bars, want 6:\n%.2000s", n, r.DOM)
	}
	if n := strings.Count(r.DOM, "<svg "); n != 3 || !strings.Contains(r.DOM, "different, A better") || !strings.Contains(r.DOM, "within-noise") {
		t.Errorf("rendered DOM: %d charts, or the verdicts missing", n)
	}
	// #0072B2 (A) and #E69F00 (B): a bar each on the three charts, 56 px
	// wide, each at least 20 px high (every chart scales to its tallest
	// bar; the lowest, rr4k's B, is 28 % of it).
	// A "different" verdict is coloured as a difference (#0b4f8a), not in
	// the red of a warning: the better side is no fault.
	if r.Pixels["0b4f8a"] == 0 {
		t.Errorf("no pixel in the colour of a different verdict")
	}
	for _, c := range []string{"0072b2", "e69f00"} {
		if r.Pixels[c] < 3*56*20 {
			t.Errorf("colour %s on %d pixels: the bars were not drawn", c, r.Pixels[c])
		}
	}
}
