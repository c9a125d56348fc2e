package flush

import (
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/sampler"
)

func i64(v int64) *int64 { return &v }

// TestUnflushedFallsOrStays: the VM's cgroup bytes over a window, said for
// the modes measured. The figures are those of the real QEMU recording in
// sampler/testdata/cgroup/qemu-v1 (TestCgroupUnflushedReal: a 32 MiB
// qemu-io write, then a flush: 33538048 -> 0 on writeback, kept on unsafe)
// and of the shell's v1 recording there (33558528 -> 12288 at sync).
func TestUnflushedFallsOrStays(t *testing.T) {
	dir := sampler.CgroupDir{Version: 1, Cgroup: "/qemu.slice/100.scope", Memory: "/x"}
	series := func(vs ...*int64) []Sample {
		var s []Sample
		for _, v := range vs {
			s = append(s, Sample{CgroupUnflushedBytes: v})
		}
		return s
	}
	for _, tc := range []struct {
		name     string
		samples  []Sample
		modes    []string
		measured bool
		fell     bool
		want     string
	}{
		{"writeback falls", series(i64(33558528), nil, i64(12288)), []string{"writeback"}, true, true, "they fell, as cache=writeback's flushes write"},
		{"writeback stays", series(i64(33558528), i64(33558528)), []string{"writeback", "none"}, true, false, "they did not fall"},
		{"writeback nothing waiting", series(i64(12288), i64(0)), []string{"writeback"}, true, false, "nothing much was waiting"},
		{"unsafe stays", series(i64(33558528), i64(33554432)), []string{"unsafe"}, true, false, "they stay, as cache=unsafe keeps them"},
		{"unsafe falls", series(i64(33558528), i64(0)), []string{"writeback", "unsafe"}, true, true, "the node wrote them back on its own"},
		{"none", series(i64(0), i64(0)), []string{"none"}, true, false, "no disk measured keeps writes"},
		{"one reading", series(nil, i64(5), nil), []string{"writeback"}, false, false, "could not be read at two samples"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := unflushedOf(dir, tc.samples, tc.modes)
			if u.Measured != tc.measured || u.Fell != tc.fell || !strings.Contains(u.Says, tc.want) {
				t.Fatalf("%+v, want measured=%v fell=%v says %q", u, tc.measured, tc.fell, tc.want)
			}
			if !u.Measured && (u.BeforeBytes != nil || u.AfterBytes != nil || u.NotMeasured == "") {
				t.Fatalf("unmeasured with figures: %+v", u)
			}
		})
	}
	u := unflushedOf(sampler.CgroupDir{Cgroup: "/qemu.slice/100.scope", Unmeasured: "VM 100 does not run"}, series(i64(1), i64(2)), []string{"writeback"})
	if u.Measured || u.BeforeBytes != nil || u.NotMeasured != "VM 100 does not run" || !strings.Contains(u.Says, "not measured") {
		t.Fatalf("no cgroup: %+v", u)
	}
}
