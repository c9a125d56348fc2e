//go:build integration

package fio

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The job file, run by fio exactly as its comments say (on an image file
// instead of the disk), gives files that fio summary reads as Lab 19's:
// every job grouped under the label with its runs, and no read without a fill.
func TestJobFileRunsWithFio(t *testing.T) {
	fio, err := exec.LookPath("fio")
	if err != nil {
		t.Fatalf("this integration test needs fio (make deps installs it): %v", err)
	}
	dir := t.TempDir()
	img := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	js := JobSet{Device: img, Label: "test", Size: "16M", RuntimeS: 1, RampS: 0, Runs: 2}
	jobFile := filepath.Join(dir, "lab19.fio")
	if err := os.WriteFile(jobFile, []byte(js.JobFile()), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(section, out string) {
		cmd := exec.Command(fio, "--section="+section, "--output-format=json", "--output="+out, "lab19.fio")
		cmd.Dir = dir
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("fio --section=%s: %v\n%s", section, err, b)
		}
	}
	run("fill", "test-fill.json")
	for _, r := range []string{"1", "2"} {
		for _, j := range LabJobs {
			run(j[0], "test-"+j[0]+"-"+r+".json")
		}
	}
	s := summarize(t, Options{GroupBy: GroupAuto}, dir)
	if len(s.Groups) != len(LabJobs) || len(s.Preconditioning) != 1 || len(s.Unreadable) != 0 {
		t.Fatalf("%d groups, preconditioning %v, unreadable %v", len(s.Groups), s.Preconditioning, s.Unreadable)
	}
	for _, g := range s.Groups {
		if g.Label != "test" || g.Runs() != 2 {
			t.Errorf("%s: %d runs", g.Name(), g.Runs())
		}
		for _, w := range g.Warnings {
			if w.Code == WarnNoFill || w.Code == WarnBuffered {
				t.Errorf("%s: %+v", g.Name(), w)
			}
		}
		if (g.FsyncMeanNs != nil) != (g.Job == "sync") {
			t.Errorf("%s: fsync %v", g.Name(), g.FsyncMeanNs)
		}
	}
}
