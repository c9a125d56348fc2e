package thinpool

import (
	"context"
	"errors"
	"github.com/pvediskcheck/pvediskcheck/internal/fakerun"
	"slices"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/lvm"
	"github.com/pvediskcheck/pvediskcheck/node"
)

// TestParseLVMConfig reads what lvmconfig printed (lvm/testdata/make.sh):
// Debian's defaults (autoextend off) and a node that set a threshold; lvm2's
// own bounds (100 is off, below 50 means 50) apply to what a node sets.
func TestParseLVMConfig(t *testing.T) {
	for _, c := range []struct {
		in        string
		threshold int
		percent   int
		on        bool
	}{
		{fixture(t, "../lvm/testdata/real-lvmconfig-default.txt"), 100, 20, false},
		{fixture(t, "../lvm/testdata/real-lvmconfig-autoextend.txt"), 80, 10, true},
		{"thin_pool_autoextend_threshold=30\nthin_pool_autoextend_percent=20\n", 50, 20, true},
		{"thin_pool_autoextend_threshold=150\nthin_pool_autoextend_percent=20\n", 100, 20, false},
		{"thin_pool_autoextend_threshold=99\nthin_pool_autoextend_percent=0\n", 99, 0, false},
	} {
		a, err := ParseLVMConfig([]byte(c.in))
		if err != nil || a.ThresholdPercent != c.threshold || a.Percent != c.percent || a.On() != c.on {
			t.Errorf("%q: %+v on=%v %v", c.in, a, a.On(), err)
		}
	}
	for _, bad := range []string{"", "thin_pool_autoextend_threshold=80\n", "thin_pool_autoextend_threshold=x\nthin_pool_autoextend_percent=1\n", "Configuration node activation/x not found\n"} {
		if _, err := ParseLVMConfig([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	var none *Autoextend
	if none.On() {
		t.Error("an unknown policy is on")
	}
}

func f64(v float64) *float64 { return &v }

// poolRow is an active pool's lvs row (the fields of real-vg-fill.json).
func poolRow(size, metaSize int64, data, meta float64, whenFull, monitor string, vgFree int64) *lvm.Report {
	return &lvm.Report{LVs: []lvm.LV{
		{VG: "pve", Name: "data", Attr: "twi-aotz--", SizeBytes: size, DataPercent: f64(data), MetadataPercent: f64(meta),
			MetadataSizeBytes: metaSize, ChunkSizeBytes: 64 << 10, Discards: "passdown", WhenFull: whenFull, VGFreeBytes: vgFree,
			Monitor: monitor, Devices: "data_tdata(0)"},
		{VG: "pve", Name: "[data_tdata]", Attr: "Twi-ao----", SizeBytes: size, Devices: "/dev/sda3(8000)"},
	}}
}

const gib = int64(1) << 30

// TestFill: when a pool stops accepting writes (data or metadata first,
// autoextend into the VG's free space or not) and what happens to the VMs.
func TestFill(t *testing.T) {
	on := &Autoextend{80, 20}
	off := &Autoextend{100, 20}
	t60, t0 := 60, 0
	for _, c := range []struct {
		name   string
		rep    *lvm.Report
		f      Facts
		first  string
		after  int64
		grows  bool
		stops  []string
		then   []string
		absent []string
	}{
		{"data first, autoextend off", poolRow(100*gib, gib, 60, 10, "queue", "monitored", 50*gib), Facts{Autoextend: off, NoSpaceTimeout: &t60},
			LimitData, 40 * gib, false, []string{"after 40.00 GiB more data, at 100 % data", "autoextend off (thin_pool_autoextend_threshold 100)"},
			[]string{"the guests hang for up to 60 s (no_space_timeout)", "fail with ENOSPC", "QEMU pauses each VM"}, []string{"dm-thin's default", "read-only"}},
		{"metadata first", poolRow(100*gib, gib, 60, 80, "queue", "monitored", 0), Facts{Autoextend: off},
			LimitMetadata, 15 * gib, false, []string{"after 15.00 GiB more data, at 100 % metadata"},
			[]string{"read-only", "EIO", "lvextend --poolmetadatasize"}, []string{"QEMU pauses"}},
		{"grows into the VG", poolRow(100*gib, gib, 60, 10, "queue", "monitored", 50*gib), Facts{Autoextend: on},
			LimitData, 90 * gib, true, []string{"after 90.00 GiB more data", "once the VG's free space is used up", "autoextend grows it at 80 % by 20 % while VG pve has free space (50.00 GiB)"},
			[]string{"up to 60 s (no_space_timeout unread, dm-thin's default)"}, nil},
		{"not monitored", poolRow(100*gib, gib, 60, 10, "error", "not monitored", 50*gib), Facts{Autoextend: on},
			LimitData, 40 * gib, false, []string{"dmeventd does not monitor the pool"},
			[]string{"fail at once with ENOSPC (lv_when_full error)", "qm resume"}, []string{"hang"}},
		{"VG full", poolRow(100*gib, gib, 60, 10, "queue", "", 0), Facts{Autoextend: on, NoSpaceTimeout: &t0},
			LimitData, 40 * gib, false, []string{"VG pve has no free space to grow into"},
			[]string{"no time limit", "QEMU does not pause them"}, []string{"ENOSPC"}},
		{"lvmconfig failed", poolRow(100*gib, gib, 100, 10, "", "", 0), Facts{},
			LimitData, 0, false, []string{"after 0 B more data", "autoextend unknown"}, []string{"lv_when_full unknown"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := lvmthin()
			p, err := FromLVSFacts(s, c.rep, nil, c.f)
			if err != nil {
				t.Fatal(err)
			}
			fl := p.Fill
			if fl == nil || fl.FirstFull != c.first || fl.WritesStopAfterBytes == nil || fl.Grows != c.grows {
				t.Fatalf("%+v", fl)
			}
			// lvs rounds to 512-byte sectors: within a MiB.
			if d := *fl.WritesStopAfterBytes - c.after; d > 1<<20 || d < -(1<<20) {
				t.Errorf("writes stop after %d, want %d", *fl.WritesStopAfterBytes, c.after)
			}
			for _, w := range c.stops {
				if !strings.Contains(fl.Stops, w) {
					t.Errorf("stops %q lacks %q", fl.Stops, w)
				}
			}
			for _, w := range c.then {
				if !strings.Contains(fl.Then, w) {
					t.Errorf("then %q lacks %q", fl.Then, w)
				}
			}
			for _, w := range c.absent {
				if strings.Contains(fl.Then+fl.Stops, w) {
					t.Errorf("%q in %q / %q", w, fl.Stops, fl.Then)
				}
			}
			if len(fl.PVs) != 1 || fl.PVs[0].Device != "/dev/sda3" || fl.PVs[0].DiscardMaxBytes != nil {
				t.Errorf("PVs %+v", fl.PVs)
			}
		})
	}
	// Inactive (real lvs output): nothing to count from, the rest known.
	rep, err := lvm.Parse([]byte(fixture(t, "../lvm/testdata/real-vg-fill.json")))
	if err != nil {
		t.Fatal(err)
	}
	p, err := FromLVSFacts(lvmthin("vgname", "pdclab", "thinpool", "data2"), rep, nil, Facts{Autoextend: off, Discard: map[string]int64{"/dev/loop23": 0}})
	if err != nil {
		t.Fatal(err)
	}
	if fl := p.Fill; fl.WhenFull != "error" || fl.WritesStopAfterBytes != nil || fl.FirstFull != "" || fl.VGFreeBytes != 780140544 ||
		!strings.Contains(fl.Stops, "use unknown") || len(fl.PVs) != 1 || *fl.PVs[0].DiscardMaxBytes != 0 {
		t.Errorf("%+v", fl)
	}
	if codes := thinCodes(p.Warnings); !slices.Equal(codes, []string{"overcommit", "pool-discards-not-passed-down"}) {
		t.Errorf("nopassdown pool: %v", codes)
	}
}

func thinCodes(ws []Warning) []string {
	out := []string{}
	for _, w := range ws {
		out = append(out, string(w.Code))
	}
	return out
}

// TestJudgeFill: metadata first from MetadataFirstPercent (not below, and
// not once pool-metadata-full says it), and discards that stop at the pool.
func TestJudgeFill(t *testing.T) {
	z, big := int64(0), int64(4<<30)
	for _, c := range []struct {
		name     string
		data     float64
		meta     float64
		discards string
		pvs      []*int64
		want     []string
	}{
		{"metadata first at 50", 30, 50, "passdown", []*int64{&big}, []string{"pool-metadata-first"}},
		{"metadata first below 50", 30, 49.99, "passdown", []*int64{&big}, []string{}},
		{"metadata first at 80: metadata-full says it", 30, 80, "passdown", []*int64{&big}, []string{"pool-metadata-full"}},
		{"data first", 60, 55, "passdown", []*int64{&big}, []string{}},
		{"nopassdown", 10, 5, "nopassdown", []*int64{&big}, []string{"pool-discards-not-passed-down"}},
		{"passdown, PV takes none", 10, 5, "passdown", []*int64{&z}, []string{"pool-discards-not-passed-down"}},
		{"passdown, one of two takes none", 10, 5, "passdown", []*int64{&z, &big}, []string{}},
		{"passdown, one unread", 10, 5, "passdown", []*int64{&z, nil}, []string{}},
		{"ignore: pool-ignores-discards alone", 10, 5, "ignore", []*int64{&z}, []string{"pool-ignores-discards"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &Pool{Pool: "pve/data", SizeBytes: 100 * gib, DataPercent: &c.data, MetadataPercent: &c.meta, MetadataSizeBytes: gib, Discards: c.discards}
			a := int64(c.data / 100 * float64(p.SizeBytes))
			p.AllocatedBytes = &a
			p.Fill = &Fill{}
			p.Fill.limits(p)
			for i, v := range c.pvs {
				p.Fill.PVs = append(p.Fill.PVs, PV{Device: "/dev/sd" + string(rune('a'+i)), DiscardMaxBytes: v})
			}
			if got := thinCodes(Judge(p)); !slices.Equal(got, c.want) {
				t.Errorf("%v, want %v", got, c.want)
			}
		})
	}
}

// TestReadFacts: lvmconfig once, no_space_timeout and the PVs'
// discard_max_bytes from sysfs (a partition's from its disk, a /dev/mapper
// name's from its dm-N; one sysfs does not name stays unread); what fails is
// a note; no pool, no lvmconfig.
func TestReadFacts(t *testing.T) {
	ctx := context.Background()
	p := tree(t, map[string]string{
		"sys/module/dm_thin_pool/parameters/no_space_timeout": "60\n",
		"sys/class/block/sda/queue/discard_max_bytes":         "2147450880\n",
		"sys/class/block/nvme0n1/queue/discard_max_bytes":     "0\n",
		// Device-mapper devices as sysfs shows them (dm/name): a LUKS
		// mapping opened without allow-discards, a multipath map that
		// takes them; dm-9's name is not among the PVs.
		"sys/class/block/dm-2/dm/name":                 "crypt\n",
		"sys/class/block/dm-2/queue/discard_max_bytes": "0\n",
		"sys/class/block/dm-5/dm/name":                 "mpatha\n",
		"sys/class/block/dm-5/queue/discard_max_bytes": "4294966784\n",
		"sys/class/block/dm-9/dm/name":                 "other\n",
		"sys/class/block/dm-9/queue/discard_max_bytes": "1\n",
	})
	rep := &lvm.Report{LVs: []lvm.LV{{VG: "pve", Name: "data", Attr: "twi-aotz--", Devices: "data_tdata(0)"},
		{VG: "pve", Name: "[data_tdata]", Attr: "Twi-ao----", Devices: "/dev/sda3(0),/dev/nvme0n1p2(0),/dev/mapper/crypt(0),/dev/mapper/mpatha(0),/dev/mapper/gone(0),/dev/sdz(0)"}}}
	r := &fakerun.Runner{Out: map[string]string{"lvmconfig": fixture(t, "../lvm/testdata/real-lvmconfig-autoextend.txt")}}
	f := ReadFacts(ctx, node.New(p, 0), r, rep)
	if f.NoSpaceTimeout == nil || *f.NoSpaceTimeout != 60 || f.Autoextend == nil || f.Autoextend.ThresholdPercent != 80 || len(f.Notes) != 0 {
		t.Errorf("%+v", f)
	}
	if len(f.Discard) != 4 || f.Discard["/dev/sda3"] != 2147450880 || f.Discard["/dev/nvme0n1p2"] != 0 ||
		f.Discard["/dev/mapper/crypt"] != 0 || f.Discard["/dev/mapper/mpatha"] != 4294966784 {
		t.Errorf("discard %v", f.Discard)
	}
	if len(r.Calls()) != 1 || r.Calls()[0] != strings.Join(LVMConfigArgv, " ") {
		t.Errorf("%v", r.Calls())
	}
	r = &fakerun.Runner{Err: map[string]error{"lvmconfig": errors.New("no lvm")}}
	f = ReadFacts(ctx, node.New(tree(t, map[string]string{"x": ""}), 0), r, rep)
	if f.Autoextend != nil || f.NoSpaceTimeout != nil || len(f.Notes) != 1 || !strings.Contains(f.Notes[0], "no lvm") {
		t.Errorf("%+v", f)
	}
	r = &fakerun.Runner{Out: map[string]string{"lvmconfig": "garbage"}}
	if f = ReadFacts(ctx, node.New(p, 0), r, rep); f.Autoextend != nil || len(f.Notes) != 1 {
		t.Errorf("garbage: %+v", f)
	}
	r = &fakerun.Runner{}
	if f = ReadFacts(ctx, node.New(p, 0), r, &lvm.Report{LVs: []lvm.LV{{VG: "pve", Name: "root", Attr: "-wi-ao----"}}}); len(r.Calls()) != 0 || len(f.Notes) != 0 {
		t.Errorf("no pool: %d calls, %+v", len(r.Calls()), f)
	}
}
