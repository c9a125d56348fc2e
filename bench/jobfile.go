package bench

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/fio"
)

// MaxJobFileBytes bounds --jobs FILE: a job file is a few KiB.
const MaxJobFileBytes = 1 << 20

// MaxNumJobs bounds a job file's numjobs= (each clone is a process in the
// guest writing the same area).
const MaxNumJobs = 64

// valueRule checks an allowed option's value: "" when it is accepted,
// else why not.
type valueRule func(v string) string

// anyValue accepts what fio itself accepts (fio refuses a bad number or
// word, and such a value moves nothing).
func anyValue(string) string { return "" }

// oneOf accepts whole words of a list, each optionally followed by
// ":N" (rw=randread:8).
func oneOf(words ...string) valueRule {
	return func(v string) string {
		w, _, _ := strings.Cut(v, ":")
		if slices.Contains(words, w) {
			return ""
		}
		return "one of " + strings.Join(words, ", ")
	}
}

// Engines are the I/O engines a job file may choose: each reads and writes
// the file or device fio was given and nothing else (exec runs a program,
// external loads a library, filedelete deletes files, sg and io_uring_cmd
// send SCSI or NVMe commands, net and http send elsewhere).
var Engines = []string{"libaio", "io_uring", "psync", "sync", "vsync", "pvsync", "pvsync2", "posixaio"}

// allowed are the fio options a --jobs file may set, by fio's name (an
// alias of one is accepted too and passed on by the name): how to do I/O
// on bench's target, never where, how much, or what else to run, read or
// write. Everything else is refused (refusedWhy says why for the options
// bench is often asked for); fio's own options (output, trigger, ...) are
// not a job's.
var allowed = map[string]valueRule{
	// The pattern.
	"rw":           oneOf("read", "write", "randread", "randwrite", "rw", "readwrite", "randrw", "trim", "randtrim", "trimwrite", "randtrimwrite"),
	"rw_sequencer": anyValue, "bs": anyValue, "ba": anyValue, "bsrange": anyValue, "bssplit": anyValue,
	"bs_unaligned": anyValue, "bs_is_seq_rand": anyValue, "rwmixread": anyValue, "rwmixwrite": anyValue,
	"percentage_random": anyValue, "random_distribution": anyValue, "random_generator": anyValue,
	"randrepeat": anyValue, "allrandrepeat": anyValue, "randseed": anyValue, "norandommap": anyValue,
	// The queue and the engine.
	"ioengine": oneOf(Engines...), "iodepth": anyValue, "iodepth_batch": anyValue, "iodepth_batch_complete_min": anyValue,
	"iodepth_batch_complete_max": anyValue, "iodepth_low": anyValue, "io_submit_mode": anyValue, "serialize_overlap": anyValue,
	"direct": anyValue, "buffered": anyValue, "sync": anyValue, "fsync": anyValue, "fdatasync": anyValue,
	"end_fsync": anyValue, "fsync_on_close": anyValue, "write_barrier": anyValue, "fadvise_hint": anyValue,
	"invalidate": anyValue, "pre_read": anyValue, "fallocate": anyValue, "overwrite": anyValue,
	// Rates and time (--runtime and --ramp win for timed jobs).
	"rate": anyValue, "rate_iops": anyValue, "rate_min": anyValue, "rate_iops_min": anyValue, "rate_process": anyValue,
	"rate_cycle": anyValue, "rate_ignore_thinktime": anyValue, "thinktime": anyValue, "thinktime_blocks": anyValue,
	"thinktime_blocks_type": anyValue, "thinktime_spin": anyValue, "thinktime_iotime": anyValue,
	"runtime": anyValue, "time_based": anyValue, "ramp_time": anyValue, "loops": anyValue,
	"latency_target": anyValue, "latency_window": anyValue, "latency_percentile": anyValue, "latency_run": anyValue,
	"max_latency": anyValue, "steadystate": anyValue, "steadystate_duration": anyValue, "steadystate_ramp_time": anyValue,
	// What is written.
	"refill_buffers": anyValue, "scramble_buffers": anyValue, "zero_buffers": anyValue,
	"buffer_compress_percentage": anyValue, "buffer_compress_chunk": anyValue, "dedupe_percentage": anyValue,
	"dedupe_mode": anyValue, "dedupe_working_set_percentage": anyValue, "dedupe_global": anyValue,
	// Processes.
	"numjobs": numJobs, "thread": anyValue, "group_reporting": anyValue, "new_group": anyValue,
	"cpus_allowed": anyValue, "cpus_allowed_policy": anyValue, "cpumask": anyValue, "nice": anyValue,
	"prio": anyValue, "prioclass": anyValue,
	// What fio reports.
	"description": anyValue, "stats": anyValue, "clat_percentiles": anyValue, "lat_percentiles": anyValue,
	"slat_percentiles": anyValue, "percentile_list": anyValue, "significant_figures": anyValue,
	"disable_lat": anyValue, "disable_clat": anyValue, "disable_slat": anyValue, "disable_bw_measurement": anyValue,
	"gtod_reduce": anyValue, "clocksource": anyValue, "unified_rw_reporting": anyValue, "kb_base": anyValue,
	"unit_base": anyValue, "block_error_percentiles": anyValue, "bwavgtime": anyValue, "iopsavgtime": anyValue,
	"disk_util": anyValue, "continue_on_error": anyValue, "ignore_error": anyValue, "error_dump": anyValue,
	// Engine options (each checked against the engine in force).
	"userspace_reap": anyValue, "cmdprio_percentage": anyValue, "cmdprio_class": anyValue, "cmdprio": anyValue,
	"cmdprio_bssplit": anyValue, "nowait": anyValue, "hipri": anyValue, "hipri_percentage": anyValue,
	"fixedbufs": anyValue, "registerfiles": anyValue, "sqthread_poll": anyValue, "sqthread_poll_cpu": anyValue,
	"nonvectored": anyValue, "uncached": anyValue, "force_async": anyValue,
}

func numJobs(v string) string {
	if n, err := strconv.Atoi(v); err != nil || n < 1 || n > MaxNumJobs {
		return fmt.Sprintf("a number from 1 to %d", MaxNumJobs)
	}
	return ""
}

// refusedWhy says why an option bench refuses is refused, for the ones
// that move the target, the area or run something; the others are
// "not one bench lets a job file set".
var refusedWhy = map[string]string{
	"filename": "bench sets the target", "directory": "bench sets the target", "filename_format": "bench sets the target",
	"opendir": "bench sets the target", "unique_filename": "bench sets the target", "nrfiles": "bench writes one target",
	"openfiles": "bench writes one target", "file_service_type": "bench writes one target", "lockfile": "bench writes one target",
	"allow_mounted_write": "fio's own refusal to write a mounted device stays on", "allow_file_create": "bench creates the test file",
	"create_on_open": "bench creates the test file", "create_only": "bench creates the test file",
	"create_serialize": "bench creates the test file", "create_fsync": "bench creates the test file",
	"unlink": "bench removes the test file", "unlink_each_loop": "bench removes the test file", "file_append": "bench sets the area",
	"size": "bench sets the area: use --size", "filesize": "bench sets the area: use --size", "io_size": "bench sets the area: use --size",
	"offset": "bench sets the area: use --size", "offset_align": "bench sets the area", "offset_increment": "bench sets the area",
	"fill_device": "bench sets the area: use --size", "number_ios": "bench sets the area",
	"zonemode": "bench sets the area", "zonesize": "bench sets the area", "zonerange": "bench sets the area",
	"zoneskip": "bench sets the area", "zonecapacity": "bench sets the area",
	"exec_prerun": "runs a command in the guest", "exec_postrun": "runs a command in the guest",
	"profile": "runs one of fio's built-in workloads instead", "name": "bench names each job (a name= starts another job on fio's command line)",
	"wait_for": "bench runs one job at a time", "startdelay": "bench plans the time (--runtime, --ramp)",
	"cgroup": "creates a cgroup in the guest", "cgroup_nodelete": "creates a cgroup in the guest", "cgroup_weight": "creates a cgroup in the guest",
	"uid": "bench runs fio as the agent does", "gid": "bench runs fio as the agent does",
	"ioscheduler": "changes the guest device's I/O scheduler", "write_hint": "sets a lifetime hint on the guest's inode",
	"mem": "maps memory from a guest file", "hugepage-size": "maps memory from a guest file", "lockmem": "locks guest memory",
	"buffer_pattern": "can read a guest file into what is written", "verify_pattern": "can read a guest file into what is written",
	"write_bw_log": "writes log files in the guest", "write_lat_log": "writes log files in the guest",
	"write_iops_log": "writes log files in the guest", "write_hist_log": "writes log files in the guest",
	"write_iolog": "writes a file in the guest", "read_iolog": "reads a file of the guest",
	"merge_blktrace_file": "writes a file in the guest", "replay_redirect": "replays onto another device",
	"verify_state_save": "writes a file in the guest", "verify_state_load": "reads a file of the guest",
	"verify": "bench measures, it does not verify", "do_verify": "bench measures, it does not verify",
}

// jobFileLine is one line of a job file that parsed as one: a section or
// an option.
type jobFileLine struct {
	n       int // 1-based
	section string
	key     string
	value   string
	bare    bool // key without '='
}

// shapeOf reads text as a fio job file's lines, without judging any
// option: blank lines and comments (';' or '#' first), [section] lines,
// and key or key=value lines whose key is an option's shape (letters,
// digits, '_' and '-'), the first of them a section; valid UTF-8 without
// control characters. ok false when text is not a job file: then nothing
// of it may be quoted (it may be any file, a secret one too).
func shapeOf(text string) (lines []jobFileLine, bad int, ok bool) {
	if !utf8.ValidString(text) {
		return nil, 0, false
	}
	for i, line := range strings.Split(text, "\n") {
		n := i + 1
		line = strings.TrimSpace(line)
		if strings.ContainsFunc(line, func(r rune) bool { return r < ' ' && r != '\t' || r == 0x7f }) {
			return nil, n, false
		}
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if strings.HasPrefix(line, "[") {
			sec, ok := strings.CutSuffix(line[1:], "]")
			if !ok || sec == "" {
				return nil, n, false
			}
			lines = append(lines, jobFileLine{n: n, section: sec})
			continue
		}
		if len(lines) == 0 {
			return nil, n, false
		}
		if inc, ok := strings.CutPrefix(line, "include "); ok && !strings.Contains(inc, "=") {
			lines = append(lines, jobFileLine{n: n, key: "include", value: strings.TrimSpace(inc)})
			continue
		}
		k, v, eq := strings.Cut(line, "=")
		k = strings.TrimSpace(k)
		if k == "" || strings.Trim(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "" {
			return nil, n, false
		}
		lines = append(lines, jobFileLine{n: n, key: k, value: strings.TrimSpace(v), bare: !eq})
	}
	return lines, 0, true
}

// ParseJobFile reads a fio job file (--jobs FILE): [global] options apply
// to every job, each other section is a job; a section named fill is the
// preconditioning pass; every other job is timed with --runtime and --ramp,
// which come after the file's options on fio's command line and so win.
//
// Each option must be one bench lets a job file set (allowed), named as
// fio's own job file parser takes it: its whole name or alias in fio's
// option table (fio.Resolve). bench passes options on fio's command line,
// where fio takes any unambiguous prefix of a name, so a prefix is refused
// with what fio would have made of it (exec_prer is exec_prerun there),
// as is an ambiguous one, and every option outside the list. Refusals are
// exit 2 naming the line; a file that is not a job file at all is refused
// quoting nothing of it.
func ParseJobFile(name, text string) ([]Job, error) {
	lines, bad, ok := shapeOf(text)
	if !ok {
		where := ""
		if bad > 0 {
			where = fmt.Sprintf(" (line %d is neither a [section], a comment nor an option)", bad)
		}
		return nil, exitcode.Usagef("--jobs %s: not a fio job file%s; nothing of it is shown", name, where)
	}
	var global []Opt
	var jobs []Job
	cur := -1 // -1: in [global]
	// The engine in force for each option, as fio's command line has it:
	// bench's --ioengine=libaio, then the file's ioengine= (global first).
	engine := func(opts []Opt) string {
		e := "libaio"
		for _, o := range opts {
			if o.Key == "ioengine" {
				e = o.Value
			}
		}
		return e
	}
	for _, l := range lines {
		where := fmt.Sprintf("%s:%d", name, l.n)
		if l.section != "" {
			if !jobName(l.section) {
				return nil, exitcode.Usagef("--jobs %s: section [%s]: a job name holds letters, digits and _.+ only", where, l.section)
			}
			if l.section == "global" {
				if len(jobs) > 0 {
					return nil, exitcode.Usagef("--jobs %s: [global] after a job: bench applies [global] to every job, so it comes first", where)
				}
				cur = -1
				continue
			}
			if slices.ContainsFunc(jobs, func(j Job) bool { return j.Name == l.section }) {
				return nil, exitcode.Usagef("--jobs %s: job %s twice", where, l.section)
			}
			jobs = append(jobs, Job{Name: l.section, Timed: l.section != FillJob})
			cur = len(jobs) - 1
			continue
		}
		opts := global
		if cur >= 0 {
			opts = append(slices.Clone(global), jobs[cur].Opts...)
		}
		o, err := checkOption(where, l, engine(opts))
		if err != nil {
			return nil, err
		}
		if cur == -1 {
			global = append(global, o)
		} else {
			jobs[cur].Opts = append(jobs[cur].Opts, o)
		}
	}
	if len(jobs) == 0 {
		return nil, exitcode.Usagef("--jobs %s: no job section", name)
	}
	for i := range jobs {
		jobs[i].Opts = append(slices.Clone(global), jobs[i].Opts...)
	}
	return jobs, nil
}

// checkOption decides one option line of a job file (engine: the I/O
// engine in force there) and gives it as bench passes it: by fio's name.
func checkOption(where string, l jobFileLine, engine string) (Opt, error) {
	if l.key == "include" {
		return Opt{}, exitcode.Usagef("--jobs %s: include is not followed: bench reads one file (put its jobs in it)", where)
	}
	r := fio.Resolve(l.key, engine)
	switch {
	case len(r.Ambiguous) > 0:
		return Opt{}, exitcode.Usagef("--jobs %s: %s is not a fio option; on fio's command line it is a prefix of %s (ambiguous): write an option's whole name",
			where, l.key, strings.Join(r.Ambiguous, ", "))
	case !r.Found:
		return Opt{}, exitcode.Usagef("--jobs %s: %s is not an option of fio 3.33%s", where, l.key, engineNote(l.key, engine))
	case !r.Exact:
		why := refusal(r.Option)
		if _, ok := allowed[r.Option.Name]; ok && !r.Option.Program {
			why = "write it whole"
		}
		return Opt{}, exitcode.Usagef("--jobs %s: %s is not a whole option name: fio's command line would take it for %s (%s)",
			where, l.key, r.Option.Name, why)
	}
	rule, ok := allowed[r.Option.Name]
	if !ok || r.Option.Program {
		return Opt{}, exitcode.Usagef("--jobs %s: %s is not accepted (%s)", where, l.key, refusal(r.Option))
	}
	if l.bare && !r.Option.ValueOptional {
		return Opt{}, exitcode.Usagef("--jobs %s: %s needs a value (%s=...)", where, l.key, l.key)
	}
	if why := rule(l.value); why != "" && !(l.bare && r.Option.ValueOptional) {
		return Opt{}, exitcode.Usagef("--jobs %s: %s=%s is not accepted: %s", where, l.key, l.value, why)
	}
	return Opt{Key: r.Option.Name, Value: l.value}, nil
}

// refusal says why bench refuses an option fio has.
func refusal(o fio.Option) string {
	switch {
	case o.Program:
		return "fio's own option, not a job's: bench runs fio"
	case refusedWhy[o.Name] != "":
		return refusedWhy[o.Name]
	}
	return "not one bench lets a job file set: bench accepts options of how to do I/O on its target, not where, how much, or what else to do"
}

// engineNote says, for a name that is another engine's option, that the
// engine in force has no such option.
func engineNote(key, engine string) string {
	for _, e := range Engines {
		if e != engine && slices.Contains(fio.EngineOptions(e), key) {
			return fmt.Sprintf(" with ioengine=%s (it is %s's: set ioengine=%s before it)", engine, e, e)
		}
	}
	return ""
}
