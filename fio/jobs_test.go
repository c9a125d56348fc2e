package fio

import (
	"strings"
	"testing"
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
