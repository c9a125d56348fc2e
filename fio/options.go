package fio

import "strings"

// The long options of fio 3.33, Debian's fio (3.33-3 in bookworm, the
// version the test guest and Debian 12 guests run), and what fio's
// command line makes of a name: bench passes a job file's options to fio
// as --key=value, and fio reads its command line with glibc's
// getopt_long_only (init.c parse_cmd_line), which takes any unambiguous
// prefix of a long option name (exec_prer= is exec_prerun=, opendi= is
// opendir=). A job file read by fio itself takes whole names only (parse.c
// find_option_c, o_match: the name or its alias, strcmp).
//
// Where the table comes from: fio-3.33's source (github.com/axboe/fio, tag
// fio-3.33): init.c l_opts (fio's own options), options.c fio_options[]
// (the job options: each .name and .alias, a value optional for
// FIO_OPT_STR_SET as options.c add_to_lopt says), engines/libaio.c,
// engines/io_uring.c and engines/sync.c (pvsync2) options (the engines
// bench lets a job file choose). Each name was then asked of Debian's fio
// 3.33-3 binary (`fio --parse-only --name=x --filename=/dev/null --NAME=1`):
// gpu_dev_id (CONFIG_CUDA) is not built there and is left out, and
// server-internal is Windows only. TestOptionTableMatchesFio (integration
// tier) asks an installed fio again.

// longOpt is one name getopt_long_only knows: a name or an alias.
type longOpt struct {
	name, alias string
	optional    bool // FIO_OPT_STR_SET: --name alone is allowed
}

// Option is what a long option name stands for.
type Option struct {
	// Name is the option's name (an alias resolves to the option).
	Name string
	// Engine is the I/O engine whose option it is, "" for the others.
	Engine string
	// Program is fio's own option (output, trigger, server ...), not a
	// job's.
	Program bool
	// Profile is the built-in workload (tiobench, act) whose option it
	// is: fio registers their options among the job options.
	Profile string
	// ValueOptional: fio takes --name without a value (a flag).
	ValueOptional bool
}

// Resolution is what fio's command line makes of --key.
type Resolution struct {
	Option Option
	// Exact: key is the option's name or alias (as a job file must say it).
	Exact bool
	// Found: key names one option, exactly or as its only prefix.
	Found bool
	// Ambiguous lists the long option names key is a prefix of when
	// there are several: getopt_long_only refuses it ("is ambiguous").
	Ambiguous []string
}

// Resolve is what fio 3.33's command line makes of --key while engine is
// the I/O engine in force (its options are fio's long options then, in
// place of the last engine's: options.c fio_options_set_ioengine_opts):
// the option key names exactly, else the one option key is a prefix of,
// else Ambiguous (two or more) or nothing ("unrecognized option").
func Resolve(key, engine string) Resolution {
	var matches []Option
	var names []string
	var exact *Option
	consider := func(o longOpt, opt Option) {
		for _, n := range []string{o.name, o.alias} {
			switch {
			case n == "":
			case n == key:
				if exact == nil {
					e := opt
					exact = &e
				}
			case strings.HasPrefix(n, key):
				matches, names = append(matches, opt), append(names, n)
			}
		}
	}
	for _, o := range programOptions33 {
		consider(o, Option{Name: o.name, Program: true, ValueOptional: o.optional})
	}
	for _, o := range jobOptions33 {
		consider(o, Option{Name: o.name, ValueOptional: o.optional})
	}
	for prof, opts := range profileOptions33 {
		for _, o := range opts {
			consider(o, Option{Name: o.name, Profile: prof, ValueOptional: o.optional})
		}
	}
	for _, o := range engineOptions33[engine] {
		consider(o, Option{Name: o.name, Engine: engine, ValueOptional: o.optional})
	}
	switch {
	case key == "":
		return Resolution{}
	case exact != nil:
		return Resolution{Option: *exact, Exact: true, Found: true}
	case len(matches) == 1:
		return Resolution{Option: matches[0], Found: true}
	case len(matches) > 1:
		return Resolution{Ambiguous: names}
	}
	return Resolution{}
}

// EngineOptions lists the options of an I/O engine of the table (none for
// an engine without options or not in the table).
func EngineOptions(engine string) []string {
	var out []string
	for _, o := range engineOptions33[engine] {
		out = append(out, o.name)
	}
	return out
}

// JobOptions lists every job option's name and alias.
func JobOptions() []string {
	var out []string
	for _, o := range jobOptions33 {
		out = append(out, o.name)
		if o.alias != "" {
			out = append(out, o.alias)
		}
	}
	return out
}

// programOptions33 are init.c's l_opts: fio's own options, the first
// long options getopt_long_only sees (inflate-log: Debian builds with
// zlib).
var programOptions33 = []longOpt{
	{"output", "", false}, {"latency-log", "", false}, {"bandwidth-log", "", true}, {"minimal", "", true},
	{"output-format", "", false}, {"append-terse", "", true}, {"version", "", true}, {"help", "", true},
	{"cmdhelp", "", true}, {"enghelp", "", true}, {"showcmd", "", true}, {"readonly", "", true},
	{"eta", "", false}, {"eta-interval", "", false}, {"eta-newline", "", false}, {"debug", "", false},
	{"parse-only", "", true}, {"section", "", false}, {"inflate-log", "", false}, {"alloc-size", "", false},
	{"profile", "", false}, {"warnings-fatal", "", true}, {"max-jobs", "", false}, {"terse-version", "", false},
	{"server", "", true}, {"daemonize", "", false}, {"client", "", false}, {"remote-config", "", false},
	{"cpuclock-test", "", true}, {"crctest", "", true}, {"memcpytest", "", true}, {"idle-prof", "", false},
	{"status-interval", "", false}, {"trigger-file", "", false}, {"trigger-timeout", "", false},
	{"trigger", "", false}, {"trigger-remote", "", false}, {"aux-path", "", false}, {"merge-blktrace-only", "", true},
}

// profileOptions33 are the options of fio's built-in workloads
// (profiles/tiobench.c, profiles/act.c), registered among the job options
// when fio starts (profile.c add_profile_options). A map ranged over in
// any order: only "size" is also another's name, and an exact name is
// looked for among the job options first, as fio's table has them.
var profileOptions33 = map[string][]longOpt{
	"tiobench": {{"size", "", false}, {"block", "", false}, {"numruns", "", false}, {"dir", "", false}, {"threads", "", false}},
	"act": {{"device-names", "", false}, {"load", "", false}, {"test-duration", "", false}, {"threads-per-queue", "", false},
		{"read-req-num-512-blocks", "", false}, {"large-block-op-kbytes", "", false}, {"prep", "", true}},
}

// engineOptions33 are the options of the engines bench lets a job file
// choose (engines/libaio.c, io_uring.c, sync.c; cmdprio.h's for the first
// two); psync, sync, vsync, pvsync and posixaio have none.
var engineOptions33 = map[string][]longOpt{
	"libaio": {{"userspace_reap", "", true}, {"cmdprio_percentage", "", false}, {"cmdprio_class", "", false},
		{"cmdprio", "", false}, {"cmdprio_bssplit", "", false}, {"nowait", "", false}},
	"io_uring": {{"hipri", "", true}, {"cmdprio_percentage", "", false}, {"cmdprio_class", "", false},
		{"cmdprio", "", false}, {"cmdprio_bssplit", "", false}, {"fixedbufs", "", true}, {"registerfiles", "", true},
		{"sqthread_poll", "", true}, {"sqthread_poll_cpu", "", false}, {"nonvectored", "", false},
		{"uncached", "", false}, {"nowait", "", false}, {"force_async", "", false}, {"cmd_type", "", false}},
	"pvsync2": {{"hipri", "", true}, {"hipri_percentage", "", false}, {"uncached", "", false}, {"nowait", "", false}},
}

// jobOptions33 are options.c fio_options[] (name, alias, a value optional),
// in the order of their names.
var jobOptions33 = []longOpt{
	{"allow_file_create", "", false},
	{"allow_mounted_write", "", false},
	{"allrandrepeat", "", false},
	{"atomic", "", false},
	{"ba", "blockalign", false},
	{"block_error_percentiles", "", false},
	{"bs", "blocksize", false},
	{"bs_is_seq_rand", "", false},
	{"bs_unaligned", "blocksize_unaligned", true},
	{"bsrange", "blocksize_range", false},
	{"bssplit", "", false},
	{"buffer_compress_chunk", "", false},
	{"buffer_compress_percentage", "", false},
	{"buffer_pattern", "", false},
	{"buffered", "", false},
	{"bwavgtime", "", false},
	{"cgroup", "", false},
	{"cgroup_nodelete", "", false},
	{"cgroup_weight", "", false},
	{"clat_percentiles", "", false},
	{"clocksource", "", false},
	{"continue_on_error", "", false},
	{"cpumask", "", false},
	{"cpus_allowed", "", false},
	{"cpus_allowed_policy", "", false},
	{"create_fsync", "", false},
	{"create_on_open", "", false},
	{"create_only", "", false},
	{"create_serialize", "", false},
	{"dedupe_global", "", false},
	{"dedupe_mode", "", false},
	{"dedupe_percentage", "", false},
	{"dedupe_working_set_percentage", "", false},
	{"description", "", false},
	{"direct", "", false},
	{"directory", "", false},
	{"disable_bw_measurement", "disable_bw", false},
	{"disable_clat", "", false},
	{"disable_lat", "", false},
	{"disable_slat", "", false},
	{"disk_util", "", false},
	{"do_verify", "", false},
	{"end_fsync", "", false},
	{"error_dump", "", false},
	{"exec_postrun", "", false},
	{"exec_prerun", "", false},
	{"exit_what", "", false},
	{"exitall", "", true},
	{"exitall_on_error", "", true},
	{"experimental_verify", "", false},
	{"fadvise_hint", "", false},
	{"fallocate", "", false},
	{"fdatasync", "", false},
	{"file_append", "", false},
	{"file_service_type", "", false},
	{"filename", "", false},
	{"filename_format", "", false},
	{"filesize", "", false},
	{"fill_device", "fill_fs", false},
	{"flow", "", false},
	{"flow_id", "", false},
	{"flow_sleep", "", false},
	{"flow_watermark", "", false},
	{"fsync", "", false},
	{"fsync_on_close", "", false},
	{"gid", "", false},
	{"group_reporting", "", true},
	{"gtod_cpu", "", false},
	{"gtod_reduce", "", false},
	{"hugepage-size", "", false},
	{"ignore_error", "", false},
	{"ignore_zone_limits", "", false},
	{"invalidate", "", false},
	{"io_size", "io_limit", false},
	{"io_submit_mode", "", false},
	{"iodepth", "", false},
	{"iodepth_batch", "iodepth_batch_submit", false},
	{"iodepth_batch_complete_max", "", false},
	{"iodepth_batch_complete_min", "iodepth_batch_complete", false},
	{"iodepth_low", "", false},
	{"ioengine", "", false},
	{"iomem_align", "mem_align", false},
	{"iopsavgtime", "", false},
	{"ioscheduler", "", false},
	{"job_max_open_zones", "", false},
	{"kb_base", "", false},
	{"lat_percentiles", "", false},
	{"latency_percentile", "", false},
	{"latency_run", "", false},
	{"latency_target", "", false},
	{"latency_window", "", false},
	{"lockfile", "", false},
	{"lockmem", "", false},
	{"log_alternate_epoch", "", false},
	{"log_alternate_epoch_clock_id", "", false},
	{"log_avg_msec", "", false},
	{"log_compression", "", false},
	{"log_compression_cpus", "", false},
	{"log_entries", "", false},
	{"log_hist_coarseness", "", false},
	{"log_hist_msec", "", false},
	{"log_max_value", "", false},
	{"log_offset", "", false},
	{"log_prio", "", false},
	{"log_store_compressed", "", false},
	{"log_unix_epoch", "", false},
	{"loops", "", false},
	{"max_latency", "", false},
	{"max_open_zones", "", false},
	{"mem", "iomem", false},
	{"merge_blktrace_file", "", false},
	{"merge_blktrace_iters", "", false},
	{"merge_blktrace_scalars", "", false},
	{"name", "", false},
	{"new_group", "", true},
	{"nice", "", false},
	{"norandommap", "", true},
	{"nrfiles", "nr_files", false},
	{"numa_cpu_nodes", "", false},
	{"numa_mem_policy", "", false},
	{"number_ios", "", false},
	{"numjobs", "", false},
	{"offset", "fileoffset", false},
	{"offset_align", "", false},
	{"offset_increment", "", false},
	{"opendir", "", false},
	{"openfiles", "", false},
	{"overwrite", "", false},
	{"per_job_logs", "", false},
	{"percentage_random", "", false},
	{"percentage_sequential", "", false},
	{"percentile_list", "", false},
	{"pre_read", "", false},
	{"prio", "", false},
	{"prioclass", "", false},
	{"profile", "", false},
	{"ramp_time", "", false},
	{"random_distribution", "", false},
	{"random_generator", "", false},
	{"randrepeat", "", false},
	{"randseed", "", false},
	{"rate", "", false},
	{"rate_cycle", "ratecycle", false},
	{"rate_ignore_thinktime", "", false},
	{"rate_iops", "", false},
	{"rate_iops_min", "", false},
	{"rate_min", "ratemin", false},
	{"rate_process", "", false},
	{"read_beyond_wp", "", false},
	{"read_iolog", "", false},
	{"read_iolog_chunked", "", false},
	{"refill_buffers", "", true},
	{"replay_align", "", false},
	{"replay_no_stall", "", false},
	{"replay_redirect", "", false},
	{"replay_scale", "", false},
	{"replay_skip", "", false},
	{"replay_time_scale", "", false},
	{"runtime", "timeout", false},
	{"rw", "readwrite", false},
	{"rw_sequencer", "", false},
	{"rwmixcycle", "", false},
	{"rwmixread", "", false},
	{"rwmixwrite", "", false},
	{"scramble_buffers", "", false},
	{"serialize_overlap", "", false},
	{"significant_figures", "", false},
	{"size", "", false},
	{"slat_percentiles", "", false},
	{"softrandommap", "", false},
	{"startdelay", "", false},
	{"stats", "", false},
	{"steadystate", "ss", false},
	{"steadystate_duration", "ss_dur", false},
	{"steadystate_ramp_time", "ss_ramp", false},
	{"stonewall", "wait_for_previous", true},
	{"sync", "", false},
	{"sync_file_range", "", false},
	{"thinktime", "", false},
	{"thinktime_blocks", "", false},
	{"thinktime_blocks_type", "", false},
	{"thinktime_iotime", "", false},
	{"thinktime_spin", "", false},
	{"thread", "", true},
	{"time_based", "", true},
	{"trim_backlog", "", false},
	{"trim_backlog_batch", "", false},
	{"trim_percentage", "", false},
	{"trim_verify_zero", "", false},
	{"uid", "", false},
	{"unified_rw_reporting", "", false},
	{"unique_filename", "", false},
	{"unit_base", "", false},
	{"unlink", "", false},
	{"unlink_each_loop", "", false},
	{"verify", "", false},
	{"verify_async", "", false},
	{"verify_async_cpus", "", false},
	{"verify_backlog", "", false},
	{"verify_backlog_batch", "", false},
	{"verify_dump", "", false},
	{"verify_fatal", "", false},
	{"verify_interval", "", false},
	{"verify_offset", "", false},
	{"verify_only", "", true},
	{"verify_pattern", "", false},
	{"verify_state_load", "", false},
	{"verify_state_save", "", false},
	{"verifysort", "", false},
	{"verifysort_nr", "", false},
	{"wait_for", "", false},
	{"write_barrier", "", false},
	{"write_bw_log", "", false},
	{"write_hint", "", false},
	{"write_hist_log", "", false},
	{"write_iolog", "", false},
	{"write_iops_log", "", false},
	{"write_lat_log", "", false},
	{"zero_buffers", "", true},
	{"zone_reset_frequency", "", false},
	{"zone_reset_threshold", "", false},
	{"zonecapacity", "", false},
	{"zonemode", "", false},
	{"zonerange", "", false},
	{"zonesize", "", false},
	{"zoneskip", "", false},
}
