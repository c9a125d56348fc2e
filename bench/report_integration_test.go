//go:build integration

package bench

import (
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestHTMLReportInChromium renders the report in headless Chromium
// (Debian's chromium): the DOM Chromium built has the charts' bars, and
// the screenshot has each disk's bar colour where the bars are.
func TestHTMLReportInChromium(t *testing.T) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is required in CI (apt-get install chromium)")
		}
		t.Skip("chromium not installed")
	}
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	if err := os.WriteFile(page, HTML(benchResult(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) []byte {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + filepath.Join(dir, "profile"), "--window-size=800,1400"}
		cmd := exec.CommandContext(ctx, chromium, append(append(base, args...), "file://"+page)...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium %v: %v\n%s", args, err, out)
		}
		return out
	}
	dom := string(run("--dump-dom"))
	if n := strings.Count(dom, `class="bar"`); n != 4 {
		t.Errorf("rendered DOM has %d bars, want 4:\n%.2000s", n, dom)
	}
	if !strings.Contains(dom, "flushes-ignored") || !strings.Contains(dom, "within-noise") {
		t.Error("rendered DOM lacks the evidence or the verdicts")
	}
	shot := filepath.Join(dir, "shot.png")
	run("--screenshot=" + shot)
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			count[rgb(img, x, y)]++
		}
	}
	// #0072B2 (scsi1) and #E69F00 (virtio1): two bars each, 56 px wide.
	for _, c := range []string{"0072b2", "e69f00"} {
		if count[c] < 2*56*20 {
			t.Errorf("colour %s on %d pixels: the bars were not drawn", c, count[c])
		}
	}
	if os.Getenv("PVEDISKCHECK_KEEP_SHOT") != "" {
		_ = exec.Command("cp", shot, os.Getenv("PVEDISKCHECK_KEEP_SHOT")).Run()
	}
}

func rgb(img image.Image, x, y int) string {
	r, g, b, _ := img.At(x, y).RGBA()
	const hex = "0123456789abcdef"
	out := make([]byte, 0, 6)
	for _, v := range []uint32{r >> 8, g >> 8, b >> 8} {
		out = append(out, hex[v>>4], hex[v&15])
	}
	return string(out)
}
