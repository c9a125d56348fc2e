package cache

import (
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/flush"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/sampler"
)

// TestUnflushedSentence: the VM's cgroup reading said under its disks'
// modes. 432013312 + 8388608 bytes are the v2 fixture's
// (sampler/testdata/cgroup/v2), 33558528 the recorded v1 one.
func TestUnflushedSentence(t *testing.T) {
	disk := func(id, mode string, pageCache bool) Disk {
		return Disk{ID: id, Kind: qemuserver.KindDisk.String(), Shown: mode, pageCache: pageCache}
	}
	v2 := &sampler.Cgroup{CgroupDir: sampler.CgroupDir{Version: 2, Cgroup: "/qemu.slice/370.scope", From: "/proc/PID/cgroup"}, DirtyBytes: 432013312, WritebackBytes: 8388608, IOPressure: &sampler.Pressure{SomeAvg10: 1.66}}
	v1 := &sampler.Cgroup{CgroupDir: sampler.CgroupDir{Version: 1, Cgroup: "/qemu.slice/100.scope"}, DirtyBytes: 33558528}
	for _, tc := range []struct {
		name  string
		c     *sampler.Cgroup
		disks []Disk
		risk  Risk
		modes int
		want  []string
		not   []string
	}{
		{"unsafe", v2, []Disk{disk("scsi0", "unsafe", true), disk("scsi1", "writeback", true)}, RiskFlushed, 2,
			[]string{"a host crash now loses up to 420.0 MiB of writes the guest was told were done", "cache=unsafe on scsi0 ignores the guest's flushes, so all of it"}, []string{"not flushed yet"}},
		{"writeback", v1, []Disk{disk("scsi0", "writeback", true), disk("scsi1", "none", true)}, RiskUnflushed, 1,
			[]string{"up to 32.0 MiB", "the part the guest has not flushed yet (cache=writeback on scsi0: a guest flush writes it)"}, []string{"unsafe"}},
		{"none about 0", &sampler.Cgroup{CgroupDir: v1.CgroupDir, DirtyBytes: 12288}, []Disk{disk("scsi0", "none", true), disk("scsi1", "directsync", true)}, RiskNone, 0,
			[]string{"12.0 KiB dirty", "about 0, as it should be"}, []string{"crash now loses"}},
		{"none yet dirty", v1, []Disk{disk("scsi0", "none", true)}, RiskNone, 0,
			[]string{"yet the VM's cgroup has this much dirty"}, []string{"crash now loses", "about 0"}},
		// librbd's cache is in QEMU's memory, not the page cache: its
		// writeback puts nothing in the cgroup's dirty bytes.
		{"writeback not through the page cache", v1, []Disk{disk("scsi0", "writeback", false)}, RiskNone, 0,
			[]string{"no disk keeps the guest's writes in node page cache"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := unflushed(tc.c, tc.disks)
			if !u.Measured || u.Risk != tc.risk || len(u.Modes) != tc.modes || u.UnflushedBytes == nil || *u.UnflushedBytes != tc.c.UnflushedBytes() {
				t.Fatalf("%+v", u)
			}
			for _, w := range tc.want {
				if !strings.Contains(u.Says, w) {
					t.Errorf("says %q, want %q", u.Says, w)
				}
			}
			for _, w := range tc.not {
				if strings.Contains(u.Says, w) {
					t.Errorf("says %q, must not say %q", u.Says, w)
				}
			}
		})
	}
	u := unflushed(&sampler.Cgroup{CgroupDir: sampler.CgroupDir{Cgroup: "/qemu.slice/370.scope", Unmeasured: "VM 370 does not run: its cgroup /qemu.slice/370.scope holds no QEMU"}}, []Disk{disk("scsi0", "unsafe", true)})
	if u.Measured || u.DirtyBytes != nil || u.UnflushedBytes != nil || !strings.HasPrefix(u.Says, "unflushed bytes in node RAM not measured: VM 370 does not run") {
		t.Fatalf("not measured: %+v", u)
	}
	if unflushed(nil, nil) != nil {
		t.Fatal("a view without the layer has an unflushed section")
	}
}

// cache --verify puts flush's before-and-after of the VM's bytes beside
// cache's own reading; a view without the layer takes none.
func TestUnflushedVerifyAttached(t *testing.T) {
	b, a := int64(33538048), int64(0)
	r := &flush.Result{Unflushed: &flush.Unflushed{Cgroup: "/qemu.slice/934.scope", Measured: true, BeforeBytes: &b, AfterBytes: &a, Fell: true, Says: "they fell"}}
	v := View{Unflushed: &Unflushed{Measured: true}}
	v.Attach(r)
	if v.Unflushed.Verify != r.Unflushed {
		t.Fatalf("verify not attached: %+v", v.Unflushed)
	}
	w := View{}
	w.Attach(r)
	if w.Unflushed != nil {
		t.Fatal("a view without the cgroup layer got an unflushed section")
	}
}
