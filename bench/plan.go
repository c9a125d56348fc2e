// Package bench runs Lab 19's fio method on a running VM's disks from the
// node, through the guest agent: it decides which guest devices may be
// written (nothing is lost), plans the runs (interleaved repetitions, one
// disk at a time), runs fio in the guest one exchange at a time, keeps every
// run's raw JSON, and judges the numbers with fio's statistics and the
// node's own evidence of what produced them.
package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/fio"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// Lab 19's defaults.
const (
	DefaultRuns    = 2
	DefaultRuntime = 20 * time.Second
	DefaultRamp    = 3 * time.Second
	// MaxRuntime and MaxRamp bound --runtime and --ramp: an hour measured
	// per run, ten minutes of ramp.
	MaxRuntime  = time.Hour
	MaxRamp     = 10 * time.Minute
	DefaultSize = "2G"
)

// MaxRuns bounds --runs: Lab 19 takes 2 to 5; 100 runs of its 6 jobs on
// one disk are some 4 hours.
const MaxRuns = 100

// FillJob is the preconditioning pass (fio's own isPrecondition name): one
// sequential write over the whole area, so reads hit written blocks.
const FillJob = "fill"

// Opt is one fio option, key=value (Value "" for a bare flag).
type Opt struct{ Key, Value string }

// Job is one fio job of the method.
type Job struct {
	Name  string `json:"name"`
	Timed bool   `json:"timed"` // runs for the runtime (time_based); the fill is not
	Opts  []Opt  `json:"-"`
}

// Write reports whether the job writes (rw= holds "write" or "rw", or trim).
func (j Job) Write() bool {
	rw := j.opt("rw")
	return strings.Contains(rw, "write") || strings.Contains(rw, "rw") || strings.Contains(rw, "trim")
}

// Read reports whether the job reads.
func (j Job) Read() bool {
	rw := j.opt("rw")
	return rw == "" || strings.Contains(rw, "read") || strings.Contains(rw, "rw")
}

// Fsync reports a job that flushes (fsync= or fdatasync=).
func (j Job) Fsync() bool { return j.opt("fsync") != "" || j.opt("fdatasync") != "" }

func (j Job) opt(k string) string {
	for _, o := range j.Opts {
		if o.Key == k {
			return o.Value
		}
	}
	return ""
}

// LabJobSet is Lab 19's job set, the one `fio jobs` prints: the fill, then
// fio.LabJobs.
func LabJobSet() []Job {
	jobs := []Job{{Name: FillJob, Opts: []Opt{{"rw", "write"}, {"bs", "1M"}, {"iodepth", "16"}}}}
	for _, j := range fio.LabJobs {
		job := Job{Name: j[0], Timed: true, Opts: []Opt{{"rw", j[1]}, {"bs", j[2]}, {"iodepth", j[3]}}}
		if j[4] != "" {
			k, v, _ := strings.Cut(j[4], "=")
			job.Opts = append(job.Opts, Opt{k, v})
		}
		jobs = append(jobs, job)
	}
	return jobs
}

// jobName: what a job name may hold; it goes into file names
// (<disk>-<job>-<run>.json), so no '-'.
func jobName(s string) bool {
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("_.+", c)) {
			return false
		}
	}
	return s != ""
}

// Pick keeps the jobs named (--job), in the set's order; the fill stays
// unless noFill. An unknown name is exit 2.
func Pick(jobs []Job, names []string, noFill bool) ([]Job, error) {
	for _, n := range names {
		if !slices.ContainsFunc(jobs, func(j Job) bool { return j.Name == n }) {
			var all []string
			for _, j := range jobs {
				all = append(all, j.Name)
			}
			return nil, exitcode.Usagef("--job %q: no such job (jobs: %s)", n, strings.Join(all, ", "))
		}
	}
	var out []Job
	for _, j := range jobs {
		if j.Name == FillJob {
			if !noFill {
				out = append(out, j)
			}
			continue
		}
		if len(names) == 0 || slices.Contains(names, j.Name) {
			out = append(out, j)
		}
	}
	if !slices.ContainsFunc(out, func(j Job) bool { return j.Name != FillJob }) {
		return nil, exitcode.Usagef("bench: no job to run")
	}
	return out, nil
}

// Method is how every disk is measured.
type Method struct {
	Jobs      []Job
	Runs      int
	Runtime   time.Duration
	Ramp      time.Duration
	Size      string // fio size=, e.g. "2G"
	SizeBytes int64
}

// NewMethod validates the numbers (exit 2 when out of range).
func NewMethod(jobs []Job, runs int, runtime, ramp time.Duration, size string) (Method, error) {
	m := Method{Jobs: jobs, Runs: runs, Runtime: runtime, Ramp: ramp, Size: strings.TrimSpace(size)}
	n, ok := fio.ParseSize(m.Size)
	switch {
	case runs < 1 || runs > MaxRuns:
		return m, exitcode.Usagef("--runs %d: from 1 to %d (2 for a spread)", runs, MaxRuns)
	case runtime < time.Second || runtime%time.Second != 0:
		return m, exitcode.Usagef("--runtime %s: whole seconds, at least 1s", runtime)
	case runtime > MaxRuntime:
		return m, exitcode.Usagef("--runtime %s: at most %s", runtime, units.Short(MaxRuntime))
	case ramp < 0 || ramp%time.Second != 0:
		return m, exitcode.Usagef("--ramp %s: whole seconds, 0 or more", ramp)
	case ramp > MaxRamp:
		return m, exitcode.Usagef("--ramp %s: at most %s", ramp, units.Short(MaxRamp))
	case !ok || n < 1<<20 || strings.ContainsAny(m.Size, " \t"):
		return m, exitcode.Usagef("--size %q: a size of at least 1M, such as 2G or 512M", size)
	}
	m.SizeBytes = n
	return m, nil
}

// Step is one fio run of the plan.
type Step struct {
	Disk string `json:"disk"`
	Job  Job    `json:"job"`
	Run  int    `json:"run"` // 1..Runs; 0 for the fill
}

// File is the step's result file, Lab 19's <label>-<job>-<run>.json.
func (s Step) File() string {
	if s.Run == 0 {
		return s.Disk + "-" + s.Job.Name + ".json"
	}
	return fmt.Sprintf("%s-%s-%d.json", s.Disk, s.Job.Name, s.Run)
}

// Schedule orders the steps: every disk's fill first, then the repetitions
// interleaved across disks (run 1 of A, B, C, then run 2 of A, B, C), so
// that drift over time is not taken for a difference between disks. One
// step at a time: never two disks at once.
func (m Method) Schedule(disks []string) []Step {
	var steps []Step
	for _, d := range disks {
		for _, j := range m.Jobs {
			if !j.Timed {
				steps = append(steps, Step{Disk: d, Job: j})
			}
		}
	}
	for r := 1; r <= m.Runs; r++ {
		for _, d := range disks {
			for _, j := range m.Jobs {
				if j.Timed {
					steps = append(steps, Step{Disk: d, Job: j, Run: r})
				}
			}
		}
	}
	return steps
}

// Estimate is the time a timed step takes (ramp + runtime); an untimed one
// (the fill) is not known in advance and counts 0.
func (m Method) Estimate(s Step) time.Duration {
	if !s.Job.Timed {
		return 0
	}
	return m.Ramp + m.Runtime
}

// Argv is the exact fio command line of a step on target (a guest device or
// test file): fio's own options, the job's after the common ones so that a
// job file's choice wins.
func (m Method) Argv(s Step, target string) []string {
	argv := []string{"fio", "--name=" + s.Job.Name,
		// fio splits filename at ':' (several files): a colon is "\:".
		"--filename=" + strings.ReplaceAll(target, ":", `\:`),
		"--direct=1", "--ioengine=libaio", "--size=" + m.Size}
	for _, o := range s.Job.Opts {
		if o.Value == "" {
			argv = append(argv, "--"+o.Key)
		} else {
			argv = append(argv, "--"+o.Key+"="+o.Value)
		}
	}
	if s.Job.Timed {
		argv = append(argv, "--time_based=1", "--runtime="+strconv.Itoa(int(m.Runtime/time.Second)),
			"--ramp_time="+strconv.Itoa(int(m.Ramp/time.Second)))
	}
	return append(argv, "--output-format=json")
}

// Shell is argv quoted for a POSIX shell, for --dry-run to print.
func Shell(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=./:+,@%") == "" {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}
