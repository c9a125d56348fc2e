package fio

import (
	"errors"
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

func TestJobSetValidate(t *testing.T) {
	ok := JobSet{Device: "/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_drive-scsi1", Label: "local-zfs", Size: "2G", RuntimeS: 1, RampS: 0, Runs: 1}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		change func(*JobSet)
		field  string
	}{
		{"sdX", func(s *JobSet) { s.Device = "/dev/sdb" }, "device"},
		{"by-id itself", func(s *JobSet) { s.Device = ByID }, "device"},
		{"newline in device", func(s *JobSet) { s.Device = ByID + "x\nrw=write" }, "device"},
		{"slash in device", func(s *JobSet) { s.Device = ByID + "../sda" }, "device"},
		{"dot dot", func(s *JobSet) { s.Device = ByID + ".." }, "device"},
		{"dot", func(s *JobSet) { s.Device = ByID + "." }, "device"},
		{"space in device", func(s *JobSet) { s.Device = ByID + "a b" }, "device"},
		{"empty label", func(s *JobSet) { s.Label = "" }, "label"},
		{"label with a slash", func(s *JobSet) { s.Label = "a/b" }, "label"},
		{"label with @", func(s *JobSet) { s.Label = "a@b" }, "label"},
		{"label with a newline", func(s *JobSet) { s.Label = "a\n[x]" }, "label"},
		{"label with $", func(s *JobSet) { s.Label = "$(reboot)" }, "label"},
		{"label with a backtick", func(s *JobSet) { s.Label = "`" }, "label"},
		{"label with {", func(s *JobSet) { s.Label = "{" }, "label"},
		{"label with [", func(s *JobSet) { s.Label = "[" }, "label"},
		{"label with /", func(s *JobSet) { s.Label = "/" }, "label"},
		{"label with ;", func(s *JobSet) { s.Label = ";" }, "label"},
		{"size", func(s *JobSet) { s.Size = "big" }, "size"},
		{"size 0", func(s *JobSet) { s.Size = "0" }, "size"},
		{"size with a space", func(s *JobSet) { s.Size = "2 G" }, "size"},
		{"size with a newline", func(s *JobSet) { s.Size = "2G\n" }, "size"},
		{"runtime", func(s *JobSet) { s.RuntimeS = 0 }, "runtime"},
		{"ramp", func(s *JobSet) { s.RampS = -1 }, "ramp"},
		{"runs", func(s *JobSet) { s.Runs = 0 }, "runs"},
		{"runtime past its bound", func(s *JobSet) { s.RuntimeS = MaxRuntimeS + 1 }, "runtime"},
		{"ramp past its bound", func(s *JobSet) { s.RampS = MaxRampS + 1 }, "ramp"},
		{"runs past their bound", func(s *JobSet) { s.Runs = MaxRuns + 1 }, "runs"},
	}
	for _, c := range cases {
		s := ok
		c.change(&s)
		err := s.Validate()
		var inv *InvalidError
		if !errors.As(err, &inv) || inv.Field != c.field || exitcode.Of(err) != exitcode.Usage || !strings.HasPrefix(err.Error(), c.field+" ") {
			t.Errorf("%s: %v, want a %s error", c.name, err, c.field)
		}
	}
	for _, good := range []func(*JobSet){
		func(s *JobSet) { s.Device = ByID + "usb-SanDisk_Cruzer_Blade_4C53-0:0" },
		func(s *JobSet) { s.Device = ByID + "nvme-eui.0025388b91b2c3d4-part1" },
		func(s *JobSet) { s.Device = ByID + "a@b,c+d" },
		func(s *JobSet) { s.Label = "io_uring.v2+x:1" },
		func(s *JobSet) { s.Label = "AZaz09" },
		func(s *JobSet) { s.Label = "Z" },
		func(s *JobSet) { s.Label = "z" },
		func(s *JobSet) { s.Label = "9" },
		func(s *JobSet) { s.Size = "512M" },
		func(s *JobSet) { s.RampS = 0 },
		func(s *JobSet) { s.RuntimeS, s.RampS, s.Runs = MaxRuntimeS, MaxRampS, MaxRuns },
	} {
		s := ok
		good(&s)
		if err := s.Validate(); err != nil {
			t.Errorf("%+v: %v", s, err)
		}
	}
	e := &InvalidError{"size", "big", "expected a size"}
	if e.Error() != `size "big": expected a size` {
		t.Error(e.Error())
	}
}

func TestDefaultLabel(t *testing.T) {
	for dev, want := range map[string]string{
		"/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_drive-scsi1": "scsi1",
		"/dev/disk/by-id/virtio-drive-virtio1":                 "virtio1",
		"/dev/disk/by-id/nvme-Samsung_SSD_970":                 "nvme-Samsung_SSD_970",
		"/dev/disk/by-id/drive-scsi2":                          "scsi2",
	} {
		if got := DefaultLabel(dev); got != want {
			t.Errorf("%s: %q, want %q", dev, got, want)
		}
	}
}

// A colon in a device name is escaped: fio reads "a:b" as two files.
func TestJobFileColon(t *testing.T) {
	js := JobSet{Device: ByID + "usb-x-0:0", Label: "usb", Size: " 1G", RuntimeS: 1, Runs: 1}
	text := js.JobFile()
	if !strings.Contains(text, "\nfilename="+ByID+"usb-x-0\\:0\n") || !strings.Contains(text, "# Lab 19 job set for "+ByID+"usb-x-0:0\n") ||
		!strings.Contains(text, "\nsize=1G\n") {
		t.Errorf("%s", text)
	}
}
