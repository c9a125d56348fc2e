package metrics

import (
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/sampler"
)

// A VM's cgroup series: the page cache dirty and under writeback, its
// io.pressure in seconds and as a ratio; none where the node has no
// cgroup of the VM or no io.pressure. The figures are the v2 fixture's
// (sampler/testdata/cgroup/v2, io.pressure recorded on this machine).
func TestExportCgroup(t *testing.T) {
	v2 := &sampler.Cgroup{CgroupDir: sampler.CgroupDir{Version: 2, Cgroup: "/qemu.slice/370.scope"}, DirtyBytes: 432013312, WritebackBytes: 8388608,
		IOPressure: &sampler.Pressure{SomeAvg10: 1.66, FullAvg10: 0.58, SomeTotalUs: 72584591, FullTotalUs: 11651833},
		IO:         []sampler.DeviceIO{{Device: "253:3", ReadBytes: 2293760, WriteBytes: 4831838208, ReadIOs: 420, WriteIOs: 9874, DiscardBytes: 1073741824, DiscardIOs: 8}}}
	for _, c := range []struct {
		name string
		cg   *sampler.Cgroup
		want string
	}{
		{"v2 with io.pressure and io.stat", v2, `pvediskcheck_vm_io_bytes_total{device="253:3",direction="discard",vmid="370"} 1.073741824e+09
pvediskcheck_vm_io_bytes_total{device="253:3",direction="read",vmid="370"} 2.29376e+06
pvediskcheck_vm_io_bytes_total{device="253:3",direction="write",vmid="370"} 4.831838208e+09
pvediskcheck_vm_io_operations_total{device="253:3",direction="discard",vmid="370"} 8
pvediskcheck_vm_io_operations_total{device="253:3",direction="read",vmid="370"} 420
pvediskcheck_vm_io_operations_total{device="253:3",direction="write",vmid="370"} 9874
pvediskcheck_vm_io_pressure_avg10_ratio{kind="full",vmid="370"} 0.0058
pvediskcheck_vm_io_pressure_avg10_ratio{kind="some",vmid="370"} 0.0166
pvediskcheck_vm_io_pressure_seconds_total{kind="full",vmid="370"} 11.651833
pvediskcheck_vm_io_pressure_seconds_total{kind="some",vmid="370"} 72.584591
pvediskcheck_vm_page_cache_dirty_bytes{vmid="370"} 4.32013312e+08
pvediskcheck_vm_page_cache_writeback_bytes{vmid="370"} 8.388608e+06`},
		{"no io.pressure", &sampler.Cgroup{CgroupDir: v2.CgroupDir, DirtyBytes: 0, WritebackBytes: 0}, `pvediskcheck_vm_page_cache_dirty_bytes{vmid="370"} 0
pvediskcheck_vm_page_cache_writeback_bytes{vmid="370"} 0`},
		{"not measured: no series, not 0", &sampler.Cgroup{CgroupDir: sampler.CgroupDir{Cgroup: "/qemu.slice/370.scope", Unmeasured: "no scope"}}, ``},
		{"not read", nil, ``},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &Snapshot{VMs: []VM{{VMID: 370, Running: true, Live: true, Cgroup: c.cg}}}
			text := exposition(t, s)
			var parts []string
			for _, p := range []string{only(text, "pvediskcheck_vm_io_"), only(text, "pvediskcheck_vm_page_cache")} {
				if p != "" {
					parts = append(parts, p)
				}
			}
			if got := strings.Join(parts, "\n"); got != c.want {
				t.Errorf("got\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}
