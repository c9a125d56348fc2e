package fio

import (
	"slices"
	"strings"
	"testing"
)

// What fio 3.33's command line makes of a name, each as Debian's fio
// 3.33-3 answered it (`fio --parse-only --debug=parse --name=x
// --filename=/dev/null --KEY=1`: handle_option=NAME, or "is ambiguous;
// possibilities: ..."), 2026-12: the campaign's two and their neighbours.
func TestResolveAsFioDoes(t *testing.T) {
	for _, c := range []struct {
		key, engine string
		want        string // the option; "" for none
		exact       bool
		ambiguous   string
	}{
		{"exec_prer", "libaio", "exec_prerun", false, ""},
		{"exec_pre", "libaio", "exec_prerun", false, ""},
		{"exec_prerun", "libaio", "exec_prerun", true, ""},
		{"opendi", "libaio", "opendir", false, ""},
		{"iodep", "libaio", "", false, "iodepth iodepth_batch iodepth_batch_submit iodepth_batch_complete_max iodepth_batch_complete_min iodepth_batch_complete iodepth_low"},
		{"iodepth", "libaio", "iodepth", true, ""},
		{"iodepth_lo", "libaio", "iodepth_low", false, ""},
		{"trig", "libaio", "", false, "trigger-file trigger-timeout trigger trigger-remote"},
		{"trigger", "libaio", "trigger", true, ""},
		{"prof", "libaio", "", false, "profile profile"},
		{"bl", "libaio", "", false, "blocksize blockalign blocksize_range blocksize_unaligned block_error_percentiles block"},
		{"thread", "libaio", "thread", true, ""},
		{"threads", "libaio", "threads", true, ""},
		{"threads-", "libaio", "threads-per-queue", false, ""},
		{"siz", "libaio", "", false, "size size"},
		{"size", "libaio", "size", true, ""},
		{"readwrite", "libaio", "rw", true, ""},
		{"blocksize", "libaio", "bs", true, ""},
		{"fill_fs", "libaio", "fill_device", true, ""},
		{"user", "libaio", "userspace_reap", false, ""},
		{"user", "io_uring", "", false, ""},
		{"sqthread_po", "io_uring", "", false, "sqthread_poll sqthread_poll_cpu"},
		{"hipri", "libaio", "", false, ""},
		{"hipri", "io_uring", "hipri", true, ""},
		{"out", "libaio", "", false, "output output-format"},
		{"nosuchoption", "libaio", "", false, ""},
		{"", "libaio", "", false, ""},
	} {
		r := Resolve(c.key, c.engine)
		if r.Option.Name != c.want || r.Exact != c.exact || r.Found != (c.want != "") || !sameSet(r.Ambiguous, c.ambiguous) {
			t.Errorf("%s (%s): %+v, want %q exact %v ambiguous %q", c.key, c.engine, r, c.want, c.exact, c.ambiguous)
		}
	}
	if r := Resolve("trigger", "libaio"); !r.Option.Program {
		t.Errorf("trigger is fio's own option: %+v", r)
	}
	if r := Resolve("userspace_reap", "libaio"); r.Option.Engine != "libaio" || !r.Option.ValueOptional {
		t.Errorf("userspace_reap: %+v", r)
	}
	if r := Resolve("size", "libaio"); r.Option.Profile != "" {
		t.Errorf("size is the job's first: %+v", r)
	}
	if r := Resolve("dir", "libaio"); r.Option.Profile != "tiobench" {
		t.Errorf("dir: %+v", r)
	}
	if r := Resolve("bs", "libaio"); r.Option.ValueOptional || r.Option.Program || r.Option.Engine != "" {
		t.Errorf("bs: %+v", r)
	}
}

// sameSet: getopt lists an ambiguous name's options in its table's order;
// the table here is in the order of names.
func sameSet(got []string, want string) bool {
	w := strings.Fields(want)
	g := slices.Clone(got)
	slices.Sort(g)
	slices.Sort(w)
	return slices.Equal(g, w)
}

func TestOptionTableShape(t *testing.T) {
	names := JobOptions()
	if len(names) != 226+21 {
		t.Errorf("%d job option names and aliases, want 247 (226 options, 21 aliases)", len(names))
	}
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] {
			t.Errorf("%s twice", n)
		}
		seen[n] = true
	}
	for _, n := range []string{"gpu_dev_id", "server-internal"} {
		if slices.Contains(names, n) || Resolve(n, "libaio").Exact {
			t.Errorf("%s is not in Debian's fio 3.33", n)
		}
	}
	if EngineOptions("psync") != nil || len(EngineOptions("io_uring")) != 14 {
		t.Errorf("psync %v, io_uring %v", EngineOptions("psync"), EngineOptions("io_uring"))
	}
}
