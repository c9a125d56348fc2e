//go:build integration

package main

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
)

// TestStallRealQEMU: writes that block on a frozen filesystem make scsi1
// STALLED in top within --stall-after plus one interval of the freeze, a
// disk-stalled error in check, a non-zero pvediskcheck_disk_stalled_seconds
// in metrics, and `stall` keeps the blocked threads; the idle scsi0 is
// never stalled; after the thaw every one of them clears.
func TestStallRealQEMU(t *testing.T) {
	n, v, fz := fakenode.StalledVM(t)
	frozeAt := time.Now()
	const after, interval = 2 * time.Second, 500 * time.Millisecond
	capDir := t.TempDir()

	// top: the first sample that says STALLED, and the capture.
	out, errs, code := runCLI(t, "--root", n.Root, "--json", "top", "100", "--count", "8", "--interval", interval.String(),
		"--stall-after", after.String(), "--capture", capDir)
	if code != exitOK {
		t.Fatalf("top: exit %d: %s", code, errs)
	}
	var first time.Time
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		s := gjson.Parse(sc.Text())
		if s0 := s.Get(`disks.#(disk=="scsi0").stalled_seconds`); s0.Float() != 0 {
			t.Errorf("idle scsi0 stalled %v at %s", s0, s.Get("time"))
		}
		if s.Get(`disks.#(disk=="scsi1").stalled_seconds`).Float() > 0 && first.IsZero() {
			first = s.Get("time").Time()
			if !strings.Contains(s.Get(`findings.#(code=="disk-stalled").message`).String(), "iou-wrk-") {
				t.Errorf("finding: %s", s.Get("findings"))
			}
		}
	}
	// The last completion came just before the freeze.
	if first.IsZero() || first.Sub(frozeAt) > after+interval+300*time.Millisecond {
		t.Fatalf("top: first STALLED at %v, %v after the freeze (want within %v + %v)\n%s", first, first.Sub(frozeAt), after, interval, out)
	}
	t.Logf("top: STALLED %v after the freeze", first.Sub(frozeAt).Round(time.Millisecond))
	if !strings.Contains(errs, "captured VM 100's stall") || strings.Count(errs, "captured") != 1 {
		t.Errorf("top --capture: want one capture, stderr: %s", errs)
	}
	blockedInCapture(t, capDir)

	// check: disk-stalled, an error, on scsi1 only.
	out, errs, code = runCLI(t, "--root", n.Root, "--json", "check", "100", "--stall-after", after.String())
	stalled := gjson.Get(out, `vms.0.findings.#(code=="disk-stalled")#`)
	if code != exitProblem || len(stalled.Array()) != 1 || stalled.Get("0.disk").String() != "scsi1" || stalled.Get("0.severity").String() != "error" ||
		!strings.Contains(stalled.Get("0.message").String(), "storage frozen") {
		t.Errorf("check: exit %d, disk-stalled %s\n%s%s", code, stalled, out, errs)
	}

	// metrics.
	out, errs, code = runCLI(t, "--root", n.Root, "metrics", "--stall-after", after.String())
	if code != exitOK || metricValue(t, out, "scsi1") < after.Seconds() || metricValue(t, out, "scsi0") != 0 {
		t.Errorf("metrics: exit %d, stalled scsi1 %v scsi0 %v: %s", code, metricValue(t, out, "scsi1"), metricValue(t, out, "scsi0"), errs)
	}

	// stall.
	stallDir := t.TempDir()
	out, errs, code = runCLI(t, "--root", n.Root, "--json", "stall", "100", "--out", stallDir, "--stall-after", after.String())
	if code != exitOK || !gjson.Get(out, `verdicts.#(disk=="scsi1").stalled`).Bool() || gjson.Get(out, `verdicts.#(disk=="scsi0").stalled`).Bool() {
		t.Errorf("stall: exit %d\n%s%s", code, out, errs)
	}
	blockedInCapture(t, stallDir)
	t.Logf("stall: %d files, %d bytes, not read: %s", gjson.Get(out, "files").Int(), gjson.Get(out, "bytes").Int(), gjson.Get(out, "not_read"))

	fz.Thaw(t)
	for deadline := time.Now().Add(10 * time.Second); v.WriteOps(t, "scsi1") != 9 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	out, errs, _ = runCLI(t, "--root", n.Root, "--json", "top", "100", "--count", "2", "--interval", interval.String(), "--stall-after", after.String())
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if s := gjson.Get(line, `disks.#(disk=="scsi1").stalled_seconds`); !s.Exists() || s.Float() != 0 {
			t.Errorf("top after the thaw: %s %s", line, errs)
		}
	}
	out, _, _ = runCLI(t, "--root", n.Root, "--json", "check", "100", "--stall-after", after.String())
	if f := gjson.Get(out, `vms.0.findings.#(code=="disk-stalled")#`); len(f.Array()) != 0 {
		t.Errorf("check after the thaw: %s", f)
	}
	out, _, _ = runCLI(t, "--root", n.Root, "metrics", "--stall-after", after.String())
	if metricValue(t, out, "scsi1") != 0 {
		t.Errorf("metrics after the thaw: scsi1 %v", metricValue(t, out, "scsi1"))
	}
}

// blockedInCapture: the one capture under dir holds io_uring workers in
// state D with their wchan.
func blockedInCapture(t *testing.T, dir string) {
	t.Helper()
	folders, _ := filepath.Glob(filepath.Join(dir, "stall-100-*"))
	if len(folders) != 1 {
		t.Fatalf("captures under %s: %v", dir, folders)
	}
	stats, _ := filepath.Glob(filepath.Join(folders[0], "threads", "*", "stat"))
	blocked := 0
	for _, p := range stats {
		b, _ := os.ReadFile(p)
		if regexp.MustCompile(`^\d+ \(iou-wrk-\d+\) D `).Match(b) {
			blocked++
			if w, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "wchan")); strings.TrimSpace(string(w)) == "" {
				t.Errorf("%s: no wchan", filepath.Dir(p))
			}
		}
	}
	if blocked != 8 {
		t.Errorf("capture %s: %d io_uring workers in D of %d threads, want 8", folders[0], blocked, len(stats))
	}
	for _, f := range []string{"settings.json", "query-block.json", "query-blockstats.json", "query-block-jobs.json", "throttle-groups.json", "verdicts.json", "not-read.json"} {
		if _, err := os.Stat(filepath.Join(folders[0], f)); err != nil {
			t.Errorf("capture: %v", err)
		}
	}
}

// metricValue is pvediskcheck_disk_stalled_seconds of VM 100's disk.
func metricValue(t *testing.T, text, disk string) float64 {
	t.Helper()
	m := regexp.MustCompile(`(?m)^pvediskcheck_disk_stalled_seconds\{disk="` + disk + `",vmid="100"\} (\S+)$`).FindStringSubmatch(text)
	if m == nil {
		t.Fatalf("no pvediskcheck_disk_stalled_seconds for %s", disk)
	}
	f, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}
