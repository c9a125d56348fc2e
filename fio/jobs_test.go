package fio

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

func TestJobFileText(t *testing.T) {
	js := JobSet{Device: "/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_drive-scsi1", Label: "local-zfs", Size: "2G", RuntimeS: 20, RampS: 3, Runs: 2}
	text := js.JobFile()
	for _, want := range []string{
		"filename=/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_drive-scsi1\n", "direct=1\n", "ioengine=libaio\n", "size=2G\n",
		"[fill]\nrw=write\nbs=1M\niodepth=16\n\n",
		"[rr4k]\nrw=randread\nbs=4k\niodepth=32\ntime_based=1\nruntime=20\nramp_time=3\n",
		"[sync]\nrw=randwrite\nbs=4k\niodepth=1\ntime_based=1\nruntime=20\nramp_time=3\nfsync=1\n",
		"--output=local-zfs-$job-$run.json", "$(seq 2)", "for job in rr4k rw4k rw4kqd1 sr1m sw1m sync;",
		"WRITES to this device",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("job file lacks %q:\n%s", want, text)
		}
	}
	if strings.Count(text, "[global]") != 1 {
		t.Error("one [global] only: fio's JSON merges them all, the fill would look timed")
	}
}

// The job file, run by fio exactly as its comments say (on an image file
// instead of the disk), gives files that fio summary reads as Lab 19's:
// every job grouped under the label with its runs, and no read without a fill.
func TestJobFileRunsWithFio(t *testing.T) {
	fio, err := exec.LookPath("fio")
	if err != nil {
		t.Skip("fio not installed")
	}
	if testing.Short() {
		t.Skip("runs fio for about 15 s")
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

func TestDefaultLabel(t *testing.T) {
	for dev, want := range map[string]string{
		"/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_drive-scsi1": "scsi1",
		"/dev/disk/by-id/virtio-drive-virtio1":                 "virtio1",
		"/dev/disk/by-id/ata-QEMU_HARDDISK_QM00005":            "ata-QEMU_HARDDISK_QM00005",
		"/dev/disk/by-id/x-drive-a-drive-b":                    "b",
	} {
		if got := DefaultLabel(dev); got != want {
			t.Errorf("%s: %q, want %q", dev, got, want)
		}
	}
}

func TestJobSetValidate(t *testing.T) {
	ok := JobSet{Device: "/dev/disk/by-id/virtio-x", Label: "local-zfs", Size: "2G", RuntimeS: 1, RampS: 0, Runs: 1}
	if err := ok.Validate(); err != nil {
		t.Fatalf("%v", err)
	}
	for _, c := range []struct {
		change func(*JobSet)
		msg    string
	}{
		{func(s *JobSet) { s.Device = "/dev/sdb" }, `"/dev/sdb" is not a /dev/disk/by-id/ path`},
		{func(s *JobSet) { s.Device = "/dev/disk/by-id/" }, "is not a /dev/disk/by-id/ path"},
		{func(s *JobSet) { s.Device = "disk/by-id/x" }, "is not a /dev/disk/by-id/ path"},
		{func(s *JobSet) { s.Label = "a/b" }, `--label "a/b": no slashes or spaces`},
		{func(s *JobSet) { s.Label = "a b" }, "no slashes or spaces"},
		{func(s *JobSet) { s.Label = "a\tb" }, "no slashes or spaces"},
		{func(s *JobSet) { s.Size = "big" }, `--size "big": expected a size`},
		{func(s *JobSet) { s.RuntimeS = 0 }, "--runtime and --runs must be at least 1, --ramp at least 0"},
		{func(s *JobSet) { s.RampS = -1 }, "--ramp at least 0"},
		{func(s *JobSet) { s.Runs = 0 }, "--runs must be at least 1"},
	} {
		s := ok
		c.change(&s)
		if err := s.Validate(); exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%+v: %v, want exit 2 and %q", s, err, c.msg)
		}
	}
}
