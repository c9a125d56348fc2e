// Package headless renders a page in headless Chromium (Debian's chromium)
// for the integration tests of the HTML reports: the DOM Chromium built and
// how many pixels of each colour its screenshot has.
package headless

import (
	"context"
	"image"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Rendered is what Chromium made of a page.
type Rendered struct {
	DOM string
	// Pixels counts the screenshot's pixels by colour, "rrggbb".
	Pixels map[string]int
	// Shot is the screenshot's path (in the test's temporary directory).
	Shot string
}

// Render writes page to a file and renders it in Chromium (800x1400):
// skipped without chromium, failed without it in CI.
func Render(t *testing.T, page []byte) Rendered {
	t.Helper()
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is required in CI (apt-get install chromium)")
		}
		t.Skip("chromium not installed")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "report.html")
	if err := os.WriteFile(file, page, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) []byte {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--user-data-dir=" + filepath.Join(dir, "profile"), "--window-size=800,1400"}
		cmd := exec.CommandContext(ctx, chromium, append(append(base, args...), "file://"+file)...)
		cmd.Dir = dir
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("chromium %v: %v\n%s", args, err, out)
		}
		return out
	}
	r := Rendered{DOM: string(run("--dump-dom")), Shot: filepath.Join(dir, "shot.png"), Pixels: map[string]int{}}
	run("--screenshot=" + r.Shot)
	f, err := os.Open(r.Shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r.Pixels[rgb(img, x, y)]++
		}
	}
	if keep := os.Getenv("PVEDISKCHECK_KEEP_SHOT"); keep != "" {
		_ = exec.Command("cp", r.Shot, keep).Run()
	}
	return r
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
