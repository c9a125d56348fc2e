package fio

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

// Bounds of a job set's numbers (fio jobs --runtime, --ramp, --runs): an
// hour measured per job, ten minutes of ramp, 100 repetitions.
const (
	MaxRuntimeS = 3600
	MaxRampS    = 600
	MaxRuns     = 100
)

// JobSet is Lab 19's method for one disk of a VM.
type JobSet struct {
	Device   string // /dev/disk/by-id/... inside the VM
	Label    string // names the storage under test in the result files
	Size     string // test area, fio size ("2G")
	RuntimeS int    // per timed job
	RampS    int    // ramp_time per timed job
	Runs     int    // repetitions the printed loop makes
}

// ByID is where the device of a JobSet must be: sdX names change order
// between boots (Lab 19 saw scsi1 as sda and the system disk as sdb), and the
// job file overwrites the device.
const ByID = "/dev/disk/by-id/"

// InvalidError is a JobSet value that cannot go into a job file; Field is
// the JobSet's name for it (device, label, size, runtime, ramp, runs).
type InvalidError struct {
	Field, Value, Reason string
}

func (e *InvalidError) Error() string { return fmt.Sprintf("%s %q: %s", e.Field, e.Value, e.Reason) }

// ExitCode: a value the user typed (exit 2).
func (e *InvalidError) ExitCode() exitcode.Code { return exitcode.Usage }

// nameChars are what a device name under ByID and a label may hold: udev's
// by-id names (letters, digits, "-_.:+@,": "usb-SanDisk_Cruzer-0:0",
// "nvme-eui.0025388b91b2c3d4") and Lab 19's labels. Anything else (a newline,
// a space, '#', ';', '=', '$', a quote) could start a line, a comment or a
// shell word in the job file and the commands its comments give.
func nameChars(s, extra string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("-_.:+"+extra, c)) {
			return false
		}
	}
	return s != "" && s != "." && s != ".."
}

// Validate checks every value before it goes into the job file.
func (s JobSet) Validate() error {
	name, ok := strings.CutPrefix(s.Device, ByID)
	switch {
	case !ok || name == "":
		return &InvalidError{"device", s.Device, "not a " + ByID + " path: sdX names change order between boots, and the job file overwrites the disk"}
	case !nameChars(name, "@,"):
		return &InvalidError{"device", s.Device, "a " + ByID + " name holds letters, digits and -_.:+@, only"}
	case !nameChars(s.Label, ""):
		return &InvalidError{"label", s.Label, "letters, digits and -_.:+ only (it goes into file names and shell commands)"}
	}
	if n, ok := ParseSize(s.Size); !ok || n <= 0 || strings.ContainsAny(s.Size, " \t\r\n") {
		return &InvalidError{"size", s.Size, "expected a size such as 2G or 512M"}
	}
	for _, f := range []struct {
		name           string
		v, least, most int
	}{{"runtime", s.RuntimeS, 1, MaxRuntimeS}, {"ramp", s.RampS, 0, MaxRampS}, {"runs", s.Runs, 1, MaxRuns}} {
		if f.v < f.least {
			return &InvalidError{f.name, strconv.Itoa(f.v), fmt.Sprintf("must be at least %d", f.least)}
		}
		if f.v > f.most {
			return &InvalidError{f.name, strconv.Itoa(f.v), fmt.Sprintf("must be at most %d", f.most)}
		}
	}
	return nil
}

// DefaultLabel names the storage under test after the drive when the
// device is QEMU's ("...drive-scsi1" gives "scsi1"), else after the device.
func DefaultLabel(device string) string {
	label := filepath.Base(device)
	if i := strings.LastIndex(label, "drive-"); i >= 0 {
		label = label[i+len("drive-"):]
	}
	return label
}

// LabJobs are Lab 19's timed jobs, in the order its bench.sh runs them:
// name, rw, bs, iodepth, extra options.
var LabJobs = [][5]string{
	{"rr4k", "randread", "4k", "32", ""},
	{"rw4k", "randwrite", "4k", "32", ""},
	{"rw4kqd1", "randwrite", "4k", "1", ""},
	{"sr1m", "read", "1M", "16", ""},
	{"sw1m", "write", "1M", "16", ""},
	{"sync", "randwrite", "4k", "1", "fsync=1"},
}

// JobFile prints the set as a fio job file, with the commands that run it
// so that the result files follow Lab 19's <label>-<job>-<run>.json names.
// The set must be valid (Validate).
func (s JobSet) JobFile() string {
	var b strings.Builder
	names := make([]string, len(LabJobs))
	for i, j := range LabJobs {
		names[i] = j[0]
	}
	fmt.Fprintf(&b, `# Lab 19 job set for %[1]s
# fio WRITES to this device: everything on it is lost. Use a disk added for the test.
#
# Save this as lab19.fio in the VM and run, from the directory that will hold the results:
#   fio --section=fill --output-format=json --output=%[2]s-fill.json lab19.fio
#   for run in $(seq %[3]d); do for job in %[4]s; do
#     fio --section=$job --output-format=json --output=%[2]s-$job-$run.json lab19.fio
#   done; done
# Then, on the node: pvediskcheck fio summary DIR   (and fio compare DIR-A DIR-B)

[global]
filename=%[6]s
direct=1
ioengine=libaio
size=%[5]s

# Precondition: write the whole test area once, so reads hit written blocks.
[fill]
rw=write
bs=1M
iodepth=16
`, s.Device, s.Label, s.Runs, strings.Join(names, " "), strings.TrimSpace(s.Size),
		// fio splits filename at ':' (several files): a colon in the name is "\\:".
		strings.ReplaceAll(s.Device, ":", `\:`))
	// time_based, runtime and ramp_time go in each timed job, not in a second
	// [global]: fio's JSON prints all [global] sections as one, so the fill
	// would look timed.
	for _, j := range LabJobs {
		fmt.Fprintf(&b, "\n[%s]\nrw=%s\nbs=%s\niodepth=%s\ntime_based=1\nruntime=%d\nramp_time=%d\n",
			j[0], j[1], j[2], j[3], s.RuntimeS, s.RampS)
		if j[4] != "" {
			b.WriteString(j[4] + "\n")
		}
	}
	return b.String()
}
