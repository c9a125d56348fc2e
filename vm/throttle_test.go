package vm

import (
	"testing"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// TestHasThrottleGroup: under -blockdev every running drive has a throttle
// group but a scsi-block passthrough; under -drive none has one, and a
// disk that does not run has none.
func TestHasThrottleGroup(t *testing.T) {
	drive := func(line string) *qemuserver.Drive {
		d, err := qemuserver.ParseDrive("scsi0", line)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	run := &qemuserver.DiskSettings{}
	for _, c := range []struct {
		name     string
		blockdev bool
		d        Disk
		want     bool
	}{
		{"blockdev disk", true, Disk{Drive: drive("local-lvm:vm-100-disk-0"), Running: run}, true},
		{"blockdev scsi-block", true, Disk{Drive: drive("/dev/disk/by-id/wwn-0x5000c500a1b2c3d4,scsiblock=1"), Running: run}, false},
		{"blockdev CD-ROM", true, Disk{Drive: drive("local:iso/x.iso,media=cdrom"), Running: run}, true},
		{"blockdev, only on the command line (hot-plugged)", true, Disk{Running: run}, true},
		{"blockdev, not running", true, Disk{Drive: drive("local-lvm:vm-100-disk-0")}, false},
		{"-drive disk", false, Disk{Drive: drive("local-lvm:vm-100-disk-0"), Running: run}, false},
	} {
		if got := (&VM{Blockdev: c.blockdev}).HasThrottleGroup(&c.d); got != c.want {
			t.Errorf("%s: %v", c.name, got)
		}
	}
}

// TestDriveLimits: query-block's legacy names become ThrottleLimits names;
// zeroes (no limit) are dropped.
func TestDriveLimits(t *testing.T) {
	b := qmp.BlockDevice{ID: "scsi0", BackendLimits: map[string]int64{"bps_wr": 10 << 20, "iops_rd": 0, "iops_max": 500}}
	if got := DriveLimits(b); !got.Equal(qemuserver.Limits{"bps-write": 10 << 20, "iops-total-max": 500}) {
		t.Errorf("%v", got)
	}
	if got := DriveLimits(qmp.BlockDevice{}); len(got) != 0 {
		t.Errorf("no limits: %v", got)
	}
}
