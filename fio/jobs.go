package fio

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
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

// ByIDPrefix is where a disk's stable names are: sdX names change order
// between boots (Lab 19 saw scsi1 as sda and the system disk as sdb).
const ByIDPrefix = "/dev/disk/by-id/"

// DefaultLabel is the label of a device's results when none is given: the
// drive name Proxmox's by-id names end with (scsi1), else the by-id name.
func DefaultLabel(device string) string {
	label := filepath.Base(device)
	if i := strings.LastIndex(label, "drive-"); i >= 0 {
		label = label[i+len("drive-"):]
	}
	return label
}

// Validate refuses a set that is not safe to print: a device that is not a
// by-id path (the job file overwrites it), a label that cannot be part of
// a file name, a size fio does not read, or no time to measure.
func (s JobSet) Validate() error {
	if !strings.HasPrefix(s.Device, ByIDPrefix) || len(s.Device) == len(ByIDPrefix) {
		return exitcode.Usagef("fio jobs: %q is not a /dev/disk/by-id/ path: sdX names change order between boots, and the job file overwrites the disk", s.Device)
	}
	if strings.ContainsAny(s.Label, "/ \t") {
		return exitcode.Usagef("fio jobs: --label %q: no slashes or spaces (it goes into file names)", s.Label)
	}
	if _, ok := ParseSize(s.Size); !ok {
		return exitcode.Usagef("fio jobs: --size %q: expected a size such as 2G or 512M", s.Size)
	}
	if s.RuntimeS < 1 || s.RampS < 0 || s.Runs < 1 {
		return exitcode.Usagef("fio jobs: --runtime and --runs must be at least 1, --ramp at least 0")
	}
	return nil
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
filename=%[1]s
direct=1
ioengine=libaio
size=%[5]s

# Precondition: write the whole test area once, so reads hit written blocks.
[fill]
rw=write
bs=1M
iodepth=16
`, s.Device, s.Label, s.Runs, strings.Join(names, " "), s.Size)
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
