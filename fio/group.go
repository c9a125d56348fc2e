package fio

import (
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// GroupBy says which runs are repetitions of the same test.
type GroupBy string

const (
	// GroupAuto takes label and job from Lab 19 file names
	// (<label>-<job>-<run>.json) when the job part matches the jobname inside
	// the file, and the file's directory as label otherwise.
	GroupAuto GroupBy = "auto"
	// GroupName trusts the file name alone: <label>-<job>[-<run>].json.
	GroupName GroupBy = "name"
	// GroupJob ignores file names and directories: jobname and options only.
	GroupJob GroupBy = "job"
	// GroupDir takes the directory as label and the jobname as job.
	GroupDir GroupBy = "dir"
)

// GroupBys lists the accepted values, for help text and validation.
var GroupBys = []GroupBy{GroupAuto, GroupName, GroupJob, GroupDir}

// Options tune Summarize.
type Options struct {
	GroupBy GroupBy
	// HostRAMBytes is the RAM of the host whose caches can serve reads (the
	// Proxmox node); 0 skips the "area smaller than RAM" check.
	HostRAMBytes int64
}

// Warning codes. Each names one of Lab 19's pitfalls, a run that failed or
// measured nothing, or an unreadable file.
const (
	WarnUnreadable   = "unreadable"     // the file could not be read or parsed
	WarnNoIO         = "no-io"          // a job (or a file's jobs[]) with no I/O measured and no error: nothing to summarise
	WarnInterrupted  = "interrupted"    // fio was stopped by a signal: the run is shorter than asked
	WarnBuffered     = "buffered"       // direct=0: the page cache of fio's machine is measured
	WarnAreaBelowRAM = "area-below-ram" // read area smaller than host RAM: caches can serve it
	WarnShortRuntime = "short-runtime"  // measured for less than MinRuntimeMs
	WarnNoRamp       = "no-ramp"        // ramp_time unset: start-up counted
	WarnNoFill       = "no-fill"        // read of an area no fill job was seen writing
	WarnSingleRun    = "single-run"     // one run: no spread
	WarnJobError     = "job-error"      // fio reported an error for the job (or I/O errors it went on past)
	WarnNoOptions    = "no-options"     // fio before 2.3 printed no options: the checks that need them were not made
)

// Outcome says how much of what was read a Summary stands on.
type Outcome string

const (
	// Complete: every file read, every run summarised, no run failed.
	Complete Outcome = "complete"
	// Partial: some files unreadable, or some runs failed or measured
	// nothing (each is named); the rest is summarised.
	Partial Outcome = "partial"
	// NothingUsable: no run to summarise.
	NothingUsable Outcome = "nothing-usable"
)

// MinRuntimeMs is Lab 19's runtime per job; shorter runs get a warning.
const MinRuntimeMs = 20000

// keySep separates the parts of a group key.
const keySep = "\x00"

// notWorkload are options that do not change what is measured; they are left
// out of the group key so runs that differ only there are repetitions.
var notWorkload = map[string]bool{
	"name": true, "output": true, "output-format": true, "runtime": true, "ramp_time": true,
	"time_based": true, "group_reporting": true, "stonewall": true, "new_group": true,
	"wait_for": true, "description": true, "per_job_logs": true, "log_avg_msec": true,
	"write_bw_log": true, "write_lat_log": true, "write_iops_log": true, "write_hist_log": true,
	"status-interval": true, "eta": true, "eta-newline": true, "section": true,
}

// Warning is one pitfall (or an unreadable file), naming the file it is about.
type Warning struct {
	File    string `json:"file,omitempty"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Group is the runs of one test: the same label, job, direction and options.
type Group struct {
	Label    string            `json:"label"`
	Job      string            `json:"job"`
	Dir      string            `json:"direction"` // read, write or trim
	Workload string            `json:"workload"`  // "randread 4k QD32", plus what tells it from a namesake
	Options  map[string]string `json:"options"`   // of the first run
	Files    []string          `json:"files"`

	IOPS           Stat `json:"iops"`
	BandwidthMiBps Stat `json:"bandwidth_mibps"` // fio's bw_bytes / 2^20 (bw in KiB/s / 1024 before fio 3.2)
	// The latencies are nil when the files lack them (fio always prints
	// them; files built from a lab's table may not).
	ClatMeanNs *Stat `json:"clat_mean_ns,omitempty"` // completion latency, mean
	LatMeanNs  *Stat `json:"lat_mean_ns,omitempty"`  // total latency (slat+clat), mean
	P99Ns      *Stat `json:"p99_ns,omitempty"`
	// P99Of says which latency P99Ns is the 99th percentile of: "clat" (fio's
	// default) or "lat" (lat_percentiles=1).
	P99Of       string `json:"p99_of,omitempty"`
	FsyncMeanNs *Stat  `json:"fsync_mean_ns,omitempty"` // jobs[].sync.lat_ns.mean, fsync jobs only

	Warnings []Warning `json:"warnings"`
}

// Runs is the number of runs in the group.
func (g *Group) Runs() int { return len(g.Files) }

// Name is label/job, or job alone when there is no label.
func (g *Group) Name() string {
	if g.Label == "" {
		return g.Job
	}
	return g.Label + "/" + g.Job
}

// Summary is what Summarize found.
type Summary struct {
	Groups []Group `json:"groups"`
	// Preconditioning lists the files of fill jobs: used to check that reads
	// hit written blocks, not summarised.
	Preconditioning []string `json:"preconditioning"`
	// Unreadable is for the caller (ReadFiles) to fill; Load does.
	Unreadable []Warning `json:"unreadable"`
	// Failed names the jobs that are not summarised: fio's error with no
	// I/O measured (job-error), a job or a file with no I/O at all (no-io).
	Failed  []Warning `json:"failed"`
	Outcome Outcome   `json:"outcome"`
}

// judge sets Outcome from what the summary holds.
func (s *Summary) judge() {
	s.Outcome = Complete
	for _, g := range s.Groups {
		for _, w := range g.Warnings {
			if w.Code == WarnJobError {
				s.Outcome = Partial
			}
		}
	}
	if len(s.Unreadable) > 0 || len(s.Failed) > 0 {
		s.Outcome = Partial
	}
	if len(s.Groups) == 0 {
		s.Outcome = NothingUsable
	}
}

// Load lists paths (files, and the *.json files directly in directories),
// reads them and summarises them: what `fio summary` does. A path that does
// not exist, or no *.json file at all, is a usage error (exit 2).
func Load(paths []string, opt Options) (*Summary, error) {
	files, err := ListFiles(paths)
	if err != nil {
		return nil, exitcode.Usagef("%v", err)
	}
	if len(files) == 0 {
		return nil, exitcode.Usagef("no *.json file in %s", strings.Join(paths, " "))
	}
	results, unreadable := ReadFiles(files)
	sum := Summarize(results, opt)
	sum.Unreadable = append(sum.Unreadable, unreadable...)
	sum.judge()
	return sum, nil
}

// run is one job's one direction in one file.
type run struct {
	file, label, job, dir string
	opts                  map[string]string
	ts                    int64
	io                    IOStats
	sync                  SyncStats
	src                   *Job   // the (merged) job the run is of
	interrupted           string // fio's "terminating on signal" line, "" when it ran to its end
	version               string // "fio version" of the file
}

// fill is a sequential write pass that leaves an area written.
type fill struct {
	label, filename string
	bytes, ts       int64
}

// Summarize groups runs and computes their statistics and warnings. Jobs
// that failed before measuring, or measured nothing, go to Failed.
func Summarize(results []*Result, opt Options) *Summary {
	sum := &Summary{Groups: []Group{}, Preconditioning: []string{}, Unreadable: []Warning{}, Failed: []Warning{}}
	var runs []run
	var fills []fill
	for _, r := range results {
		if len(r.Jobs) == 0 {
			sum.Failed = append(sum.Failed, Warning{r.File, WarnNoIO, r.File + `: no job in it ("jobs": [])`})
		}
		stopped := ""
		for _, n := range r.Notes {
			if strings.Contains(n, "terminating on signal") {
				stopped = n
			}
		}
		jobs := mergeClones(r.Jobs)
		for i := range jobs {
			j := &jobs[i]
			label, job := names(r.File, j.Name, len(jobs), opt.GroupBy)
			if j.Options["rw"] == "write" && j.Write.IOBytes > 0 {
				fills = append(fills, fill{label, j.Options["filename"], j.Write.IOBytes, r.Timestamp})
			}
			var measured []string
			for _, d := range Dirs {
				if j.Dir(d).HasIO() {
					measured = append(measured, d)
				}
			}
			switch {
			case isPrecondition(j.Name) && j.Error != 0:
				sum.Failed = append(sum.Failed, Warning{r.File, WarnJobError, r.File + ": " + jobError(j) +
					": reads judged against this fill may hit never-written blocks"})
			case len(measured) == 0 && j.Error != 0:
				sum.Failed = append(sum.Failed, Warning{r.File, WarnJobError, r.File + ": " + jobError(j) + ": no I/O measured"})
			case len(measured) == 0:
				sum.Failed = append(sum.Failed, Warning{r.File, WarnNoIO, fmt.Sprintf("%s: job %s: fio measured no I/O in any direction", r.File, clip(j.Name))})
			}
			if isPrecondition(j.Name) {
				sum.Preconditioning = append(sum.Preconditioning, r.File)
				continue
			}
			for _, d := range measured {
				runs = append(runs, run{file: r.File, label: label, job: job, dir: d, opts: j.Options, ts: r.Timestamp,
					io: *j.Dir(d), sync: j.Sync, src: j, interrupted: stopped, version: r.Version})
			}
		}
	}

	index := map[string]int{}
	var members [][]run
	for _, rn := range runs {
		k := groupKey(rn)
		i, ok := index[k]
		if !ok {
			i = len(members)
			index[k] = i
			members = append(members, nil)
		}
		members[i] = append(members[i], rn)
	}
	for _, m := range members {
		sum.Groups = append(sum.Groups, newGroup(m, fills, opt.HostRAMBytes))
	}
	nameCollisions(sum.Groups)
	sum.judge()
	sort.SliceStable(sum.Groups, func(i, j int) bool {
		a, b := sum.Groups[i], sum.Groups[j]
		if a.Label != b.Label {
			return a.Label < b.Label
		}
		if a.Job != b.Job {
			return a.Job < b.Job
		}
		if a.Dir != b.Dir {
			return a.Dir < b.Dir
		}
		return a.Workload < b.Workload
	})
	return sum
}

func isPrecondition(job string) bool {
	j := strings.ToLower(job)
	return j == "fill" || j == "prefill" || strings.HasPrefix(j, "precond")
}

func groupKey(r run) string {
	keys := make([]string, 0, len(r.opts))
	for k := range r.opts {
		if !notWorkload[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(r.label + keySep + r.job + keySep + r.dir)
	for _, k := range keys {
		b.WriteString(keySep + k + "=" + r.opts[k])
	}
	return b.String()
}

func newGroup(runs []run, fills []fill, hostRAM int64) Group {
	first := runs[0]
	g := Group{
		Label: first.label, Job: first.job, Dir: first.dir,
		Workload: workload(first.opts), Options: first.opts,
		Warnings: []Warning{},
	}
	var iops, bw, clat, lat, p99, fsync []float64
	for _, r := range runs {
		g.Files = append(g.Files, r.file)
		iops = append(iops, r.io.IOPS)
		bw = append(bw, r.io.BandwidthBps/units.MiB)
		if r.io.ClatMeanNs > 0 {
			clat = append(clat, r.io.ClatMeanNs)
		}
		if r.io.LatMeanNs > 0 {
			lat = append(lat, r.io.LatMeanNs)
		}
		if r.io.P99Of != "" && (g.P99Of == "" || g.P99Of == r.io.P99Of) {
			g.P99Of = r.io.P99Of
			p99 = append(p99, r.io.P99Ns)
		}
		if r.dir == "write" && r.sync.TotalIOs > 0 && r.sync.LatMeanNs > 0 {
			fsync = append(fsync, r.sync.LatMeanNs)
		}
		g.Warnings = append(g.Warnings, pitfalls(r, fills, hostRAM)...)
	}
	g.IOPS, g.BandwidthMiBps = NewStat(iops), NewStat(bw)
	g.ClatMeanNs, g.LatMeanNs, g.P99Ns, g.FsyncMeanNs = optStat(clat), optStat(lat), optStat(p99), optStat(fsync)
	if len(runs) == 1 {
		g.Warnings = append(g.Warnings, Warning{first.file, WarnSingleRun,
			"only one run: no spread between runs, so no difference can be judged against it"})
	}
	return g
}

func optStat(values []float64) *Stat {
	if len(values) == 0 {
		return nil
	}
	s := NewStat(values)
	return &s
}

// pitfalls are Lab 19's checks on one run.
func pitfalls(r run, fills []fill, hostRAM int64) []Warning {
	var w []Warning
	add := func(code, format string, a ...any) {
		w = append(w, Warning{r.file, code, fmt.Sprintf(format, a...)})
	}
	if r.src.Error != 0 || r.src.IOErrors > 0 {
		add(WarnJobError, "%s: its numbers cover only part of the run", jobError(r.src))
	}
	if r.interrupted != "" {
		add(WarnInterrupted, "fio was stopped (%s): the run is shorter than asked", units.Clip(r.interrupted, quoteLen))
	}
	if r.io.RuntimeMs < MinRuntimeMs {
		add(WarnShortRuntime, "measured for %.1f s, under %d s", float64(r.io.RuntimeMs)/1000, MinRuntimeMs/1000)
	}
	if len(r.opts) == 0 {
		v := "no version"
		if r.version != "" {
			v = clip(r.version)
		}
		add(WarnNoOptions, "fio (%s) printed no job options, as fio before 2.3 does: direct=1, ramp_time and a fill before reads not checked", v)
		return w
	}
	if !isDirect(r.opts) {
		add(WarnBuffered, "direct=0: I/O went through the page cache of the machine fio ran on, not to the disk")
	}
	if !hasRamp(r.opts) {
		add(WarnNoRamp, "no ramp_time: the start-up seconds (empty queues, cold caches) are counted")
	}
	if r.dir != "read" {
		return w
	}
	area, areaKnown := readArea(r.opts)
	if areaKnown && hostRAM > 0 && area < hostRAM {
		add(WarnAreaBelowRAM, "read area %s is smaller than host RAM %s: the page cache or ZFS ARC can serve these reads",
			units.BytesCompact(area), units.BytesCompact(hostRAM))
	}
	filled := false
	for _, f := range fills {
		if f.label == r.label && f.filename == r.opts["filename"] &&
			(!areaKnown || f.bytes >= area) &&
			(f.ts == 0 || r.ts == 0 || f.ts <= r.ts) {
			filled = true
			break
		}
	}
	if !filled {
		add(WarnNoFill, "no fill job seen writing this area first: thin storage answers never-written blocks with zeros, without reading the disk")
	}
	return w
}

func isDirect(o map[string]string) bool {
	return o["direct"] == "1" || o["direct"] == "true" || o["buffered"] == "0"
}

func hasRamp(o map[string]string) bool {
	v := strings.TrimSpace(o["ramp_time"])
	i := strings.IndexFunc(v, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if i >= 0 {
		v = v[:i]
	}
	f, err := strconv.ParseFloat(v, 64)
	return err == nil && f > 0
}

func readArea(o map[string]string) (int64, bool) {
	for _, k := range []string{"size", "filesize"} {
		if v, ok := o[k]; ok {
			return ParseSize(v)
		}
	}
	return 0, false
}

// workload is the few options that say what a job does: "randread 4k QD32".
func workload(o map[string]string) string {
	if len(o) == 0 {
		return "options unknown"
	}
	get := func(def string, keys ...string) string {
		for _, k := range keys {
			if v := o[k]; v != "" {
				return v
			}
		}
		return def
	}
	w := []string{get("read", "rw", "readwrite"), get("4k", "bs", "blocksize"),
		"QD" + get("1", "iodepth")}
	if n := o["numjobs"]; n != "" && n != "1" {
		w = append(w, "x"+n)
	}
	for _, k := range []string{"fsync", "fdatasync"} {
		if v := o[k]; v != "" && v != "0" {
			w = append(w, k+"="+v)
		}
	}
	// rwmixread=0 is a mix of writes only, not "unset" (fio's default is
	// 50); rwmixwrite alone says it as 100 minus itself.
	if v := o["rwmixread"]; v != "" {
		w = append(w, "rwmixread="+v)
	} else if n, err := strconv.Atoi(o["rwmixwrite"]); err == nil && n >= 0 && n <= 100 {
		w = append(w, "rwmixread="+strconv.Itoa(100-n))
	}
	return strings.Join(w, " ")
}

// nameCollisions appends, to groups that share label, job, direction and
// workload, the options that tell them apart (filename=..., ioengine=...).
func nameCollisions(groups []Group) {
	same := map[string][]int{}
	for i, g := range groups {
		k := g.Label + keySep + g.Job + keySep + g.Dir + keySep + g.Workload
		same[k] = append(same[k], i)
	}
	for _, idx := range same {
		if len(idx) < 2 {
			continue
		}
		differ := map[string]bool{}
		for _, i := range idx[1:] {
			a, b := groups[idx[0]].Options, groups[i].Options
			for k := range a {
				if !notWorkload[k] && a[k] != b[k] {
					differ[k] = true
				}
			}
			for k := range b {
				if !notWorkload[k] && a[k] != b[k] {
					differ[k] = true
				}
			}
		}
		keys := make([]string, 0, len(differ))
		for k := range differ {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if len(keys) > 3 {
			keys = keys[:3]
		}
		for _, i := range idx {
			for _, k := range keys {
				groups[i].Workload += " " + k + "=" + groups[i].Options[k]
			}
		}
	}
}

// names gives a job's label and job name, following mode.
func names(file, jobname string, jobsInFile int, mode GroupBy) (label, job string) {
	base := strings.TrimSuffix(filepath.Base(file), ".json")
	switch mode {
	case GroupJob:
		return "", jobname
	case GroupDir:
		return dirLabel(file), jobname
	case GroupName:
		if jobsInFile == 1 {
			if l, j := nameParts(base); l != "" {
				return l, j
			}
		}
	default:
		if jobsInFile == 1 {
			if l, ok := labelFromName(base, jobname); ok && l != "" {
				return l, jobname
			}
		}
	}
	return dirLabel(file), jobname
}

// nameParts splits <label>-<job>[-<run>]; label is "" when there is no dash.
func nameParts(base string) (label, job string) {
	rest := base
	if i := strings.LastIndexByte(rest, '-'); i > 0 && isDigits(rest[i+1:]) {
		rest = rest[:i]
	}
	if i := strings.LastIndexByte(rest, '-'); i > 0 {
		return rest[:i], rest[i+1:]
	}
	return "", rest
}

// labelFromName matches base against [<label>-]<job>[-<run>] for the job
// fio ran; ok is false when the name does not carry that job.
func labelFromName(base, job string) (label string, ok bool) {
	rest := base
	if i := strings.LastIndexByte(rest, '-'); i > 0 && isDigits(rest[i+1:]) && rest != job {
		rest = rest[:i]
	}
	switch {
	case rest == job:
		return "", true
	case strings.HasSuffix(rest, "-"+job):
		return strings.TrimSuffix(rest, "-"+job), true
	}
	return "", false
}

func dirLabel(file string) string {
	d := filepath.Dir(file)
	if d == "." {
		if abs, err := filepath.Abs(d); err == nil {
			d = abs
		}
	}
	return filepath.Base(d)
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// mergeClones folds entries with the same jobname (numjobs>1 without
// group_reporting) into one: IOPS and bandwidth add up, mean latencies are
// weighted by I/O count (ioCount), and the p99 is the highest clone's (an
// upper bound: the per-clone histograms are not in plain json output).
func mergeClones(jobs []Job) []Job {
	if len(jobs) < 2 {
		return jobs
	}
	var out []Job
	at := map[string]int{}
	for _, j := range jobs {
		i, ok := at[j.Name]
		if !ok {
			at[j.Name] = len(out)
			out = append(out, j)
			continue
		}
		m := &out[i]
		if m.Error == 0 {
			m.Error, m.ErrorText = j.Error, j.ErrorText
		}
		m.IOErrors = addCapped(m.IOErrors, j.IOErrors)
		if m.FirstIOError == 0 {
			m.FirstIOError = j.FirstIOError
		}
		for _, d := range Dirs {
			mergeIO(m.Dir(d), j.Dir(d))
		}
		s, t := &m.Sync, j.Sync
		if n := s.TotalIOs + t.TotalIOs; n > 0 {
			s.LatMeanNs = (s.LatMeanNs*float64(s.TotalIOs) + t.LatMeanNs*float64(t.TotalIOs)) / float64(n)
		}
		s.TotalIOs = addCapped(s.TotalIOs, t.TotalIOs)
		s.LatP99Ns = max(s.LatP99Ns, t.LatP99Ns)
	}
	return out
}

func mergeIO(a, b *IOStats) {
	na, nb := ioCount(a), ioCount(b)
	if n := na + nb; n > 0 {
		w := func(x, y float64) float64 {
			return (x*na + y*nb) / n
		}
		a.ClatMeanNs, a.LatMeanNs = w(a.ClatMeanNs, b.ClatMeanNs), w(a.LatMeanNs, b.LatMeanNs)
	}
	a.TotalIOs = addCapped(a.TotalIOs, b.TotalIOs)
	a.IOBytes = addCapped(a.IOBytes, b.IOBytes)
	a.BandwidthBps += b.BandwidthBps
	a.IOPS += b.IOPS
	a.RuntimeMs = max(a.RuntimeMs, b.RuntimeMs)
	a.P99Ns = max(a.P99Ns, b.P99Ns)
	if a.P99Of == "" {
		a.P99Of = b.P99Of
	}
}

// ioCount is the number of I/Os a direction's mean latencies are of, by
// which merged clones weigh them: total_ios, or IOPS x runtime when fio
// printed none (before 2.1.14; its iops is total_ios/runtime).
func ioCount(s *IOStats) float64 {
	if s.TotalIOs > 0 {
		return float64(s.TotalIOs)
	}
	return s.IOPS * float64(s.RuntimeMs) / 1000
}

// addCapped adds two counters of 0 to maxValue (what Parse gives), at most
// maxValue: a file's clones cannot add up past an int64 into a negative.
func addCapped(a, b int64) int64 {
	if a > maxValue-b {
		return maxValue
	}
	return a + b
}

// clipLen is how much of a job name a warning quotes.
const clipLen = 64

// clip quotes a name from a file, at most clipLen bytes of it.
func clip(s string) string { return units.Clip(s, clipLen) }

// jobError says what fio reported for a job: its error number with the
// errno's name, fio's own line about it when the file has it, and the I/O
// errors it went on past (continue_on_error).
func jobError(j *Job) string {
	var parts []string
	if j.Error != 0 {
		p := fmt.Sprintf("fio reported error %d (%s) for job %s", j.Error, errnoName(j.Error), clip(j.Name))
		if j.ErrorText != "" {
			p += ": " + units.Clip(j.ErrorText, quoteLen)
		}
		parts = append(parts, p)
	}
	if j.IOErrors > 0 {
		parts = append(parts, fmt.Sprintf("fio counted %d I/O errors in job %s and went on (continue_on_error), the first %d (%s)",
			j.IOErrors, clip(j.Name), j.FirstIOError, errnoName(j.FirstIOError)))
	}
	return strings.Join(parts, "; ")
}

// errnoName is the Linux name of errno n ("no space left on device"), the
// number alone when it is none: fio prints errno values of the system it ran on.
func errnoName(n int) string {
	if n > 0 && n < 4096 {
		return syscall.Errno(n).Error()
	}
	return "errno " + strconv.Itoa(n)
}
