package limit

import (
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

func TestParseValue(t *testing.T) {
	for _, tc := range []struct {
		key, in string
		want    float64
		err     string // "" means valid
	}{
		// Numbers as Proxmox writes them.
		{"mbps_wr", "20", 20, ""},
		{"mbps_wr", "0.5", 0.5, ""},
		{"mbps_wr", "+20", 20, ""},
		{"mbps_wr", ".5", 0.5, ""},
		{"mbps_wr", "20.", 20, ""},
		{"mbps_wr", "1e3", 1000, ""},
		{"mbps_wr", "0", 0, ""},
		{"mbps_wr", "0.000", 0, ""},
		{"mbps_wr", "0.000001", 0.000001, ""},           // 1.048576 B/s: the smallest that is a limit
		{"mbps_wr", "953674316", 953674316, ""},         // 999999999.0 B/s, under QEMU's 1e15
		{"mbps_rd_max", "953674316.4", 953674316.4, ""}, // 999999999999999.6 B/s: int() is 1e15 - 1
		{"iops_rd", "500", 500, ""},
		{"iops_rd", "+500", 500, ""},
		{"iops_rd", "0", 0, ""},
		{"iops_max", "1000000000000000", 1e15, ""},
		{"iops_wr_max_length", "1", 1, ""},
		{"bps_max_length", "60", 60, ""},
		// Hostile and wrong values (issue 15): each refused on its own.
		{"mbps_wr", "20,cache=unsafe", 0, "not a non-negative number"},
		{"mbps_wr", "mbps_wr=20", 0, "not a non-negative number"},
		{"mbps_wr", "20 ", 0, "not a non-negative number"},
		{"mbps_wr", " 20", 0, "not a non-negative number"},
		{"mbps_wr", "2 0", 0, "not a non-negative number"},
		{"mbps_wr", "20\n", 0, "not a non-negative number"},
		{"mbps_wr", "NaN", 0, "not a non-negative number"},
		{"mbps_wr", "Inf", 0, "not a non-negative number"},
		{"mbps_wr", "infinity", 0, "not a non-negative number"},
		{"mbps_wr", "0x14", 0, "not a non-negative number"},
		{"mbps_wr", "0x1p4", 0, "not a non-negative number"},
		{"mbps_wr", "1_000", 0, "not a non-negative number"},
		{"mbps_wr", "-5", 0, "not a non-negative number"},
		{"mbps_wr", "-0", 0, "not a non-negative number"},
		{"mbps_wr", "２０", 0, "not a non-negative number"},
		{"mbps_wr", "٢٠", 0, "not a non-negative number"},
		{"mbps_wr", "fast", 0, "not a non-negative number"},
		{"mbps_wr", "e5", 0, "not a non-negative number"},
		{"mbps_wr", ".", 0, "not a non-negative number"},
		{"mbps_wr", "", 0, "empty value"},
		{"mbps_wr", "1e400", 0, "above QEMU's maximum of 1e15 bytes/s"},
		{"mbps_wr", "2e9", 0, "above QEMU's maximum of 1e15 bytes/s"},
		{"mbps_wr", "953674317", 0, "above QEMU's maximum"},
		{"mbps_wr", "0.0000001", 0, "below 1 byte/s"},
		{"mbps_wr", "0.00000095", 0, "below 1 byte/s"},
		{"mbps_wr", "1e-300", 0, "below 1 byte/s"},
		{"iops_rd", "1.5", 0, "not an integer"},
		{"iops_rd", "1e3", 0, "not an integer"},
		{"iops_rd", "500,iops_wr=1", 0, "not an integer"},
		{"iops_rd", "NaN", 0, "not an integer"},
		{"iops_rd", "0x1f4", 0, "not an integer"},
		{"iops_rd", "５００", 0, "not an integer"},
		{"iops_rd", "", 0, "empty value"},
		{"iops_rd", "-1", 0, "out of range (negative)"},
		{"iops_rd", "-99999999999999999999", 0, "out of range (negative)"},
		{"iops_rd", "99999999999999999999", 0, "above QEMU's maximum of 1e15 per second"},
		{"iops_rd", "1000000000000001", 0, "above QEMU's maximum of 1e15 per second"},
		{"iops_rd_max", "1000000000000001", 0, "above QEMU's maximum of 1e15 per second"},
		{"bps_wr_max_length", "0", 0, "out of range (a burst lasts at least 1 second)"},
		{"bps_wr_max_length", "-3", 0, "out of range (negative)"},
		{"bps_wr_max_length", "1.5", 0, "not an integer"},
		{"iops_max_length", "1000000000000001", 0, "above QEMU's maximum of 1e15 seconds"},
		{"iops_max_length", "99999999999999999999", 0, "above QEMU's maximum of 1e15 seconds"},
		{"cache", "unsafe", 0, "not a limit key"},
	} {
		got, err := ParseValue(tc.key, tc.in)
		switch {
		case tc.err == "" && (err != nil || got != tc.want):
			t.Errorf("%s %q: %v, %v; want %v", tc.key, tc.in, got, err, tc.want)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s %q: %v, %v; want an error with %q", tc.key, tc.in, got, err, tc.err)
		case tc.err != "" && got != 0:
			t.Errorf("%s %q: refused, yet returned %v", tc.key, tc.in, got)
		}
	}
}

// TestEveryKeyRefusesHostileValues: no limit key lets a value through that
// is not a number of its kind.
func TestEveryKeyRefusesHostileValues(t *testing.T) {
	for _, k := range qemuserver.LimitKeys {
		for _, in := range []string{"20,cache=unsafe", "1=1", "1 ", "NaN", "Inf", "1e400", "0x10", "-1", "１", "", "2,"} {
			if v, err := ParseValue(k.Proxmox, in); err == nil {
				t.Errorf("%s %q accepted as %v", k.Proxmox, in, v)
			}
		}
		if _, err := ParseValue(k.Proxmox, "7"); err != nil {
			t.Errorf("%s 7: %v", k.Proxmox, err)
		}
	}
}

func TestConversions(t *testing.T) {
	s := Set{"mbps_wr": 20, "mbps_wr_max": 40.5, "bps_wr_max_length": 5, "iops_rd": 500, "mbps": 0.000001}
	want := qemuserver.Limits{"bps-write": 20 << 20, "bps-write-max": 42467328, "bps-write-max-length": 5, "iops-read": 500, "bps-total": 1}
	if got := s.QEMU(); !reflect.DeepEqual(got, want) {
		t.Errorf("QEMU() = %v, want %v", got, want)
	}
	// int(v * 1024 * 1024), as qemu-server: 0.3 MiB/s is 314572.8 B/s.
	if got := (Set{"mbps_rd": 0.3}).QEMU(); got["bps-read"] != 314572 {
		t.Errorf("0.3 MiB/s = %v", got)
	}
	opts := s.Options()
	if want := map[string]string{"mbps_wr": "20", "mbps_wr_max": "40.5", "bps_wr_max_length": "5", "iops_rd": "500", "mbps": "0.000001"}; !reflect.DeepEqual(opts, want) {
		t.Errorf("Options() = %v", opts)
	}
	// Large and small numbers print as plain decimals, never 1e+09.
	if o := (Set{"mbps_wr": 953674316, "iops_rd": 1e15, "mbps_rd": 0.0000015}).Options(); o["mbps_wr"] != "953674316" || o["iops_rd"] != "1000000000000000" || o["mbps_rd"] != "0.0000015" {
		t.Errorf("Options() = %v", o)
	}
	// From QEMU and back, exactly; default burst lengths and zeros dropped.
	run := qemuserver.Limits{"bps-write": 20971521, "bps-write-max-length": 1, "iops-read": 500, "iops-write": 0}
	back := FromQEMU(run)
	if !reflect.DeepEqual(back, Set{"mbps_wr": 20971521.0 / (1 << 20), "iops_rd": 500}) {
		t.Errorf("FromQEMU = %v", back)
	}
	if !back.QEMU().Equal(run) {
		t.Errorf("round trip %v -> %v", run, back.QEMU())
	}
	if len(FromQEMU(nil)) != 0 || FromQEMU(nil) == nil {
		t.Errorf("FromQEMU(nil) = %#v, want an empty set", FromQEMU(nil))
	}
}

func TestFromOptions(t *testing.T) {
	d, err := qemuserver.ParseDrive("scsi1", "local-lvm:vm-370-disk-1,iothread=1,mbps_wr=20.000,iops_rd=500,mbps_rd=0,bps_wr_max_length=5,mbps_wr_max=40,size=256M")
	if err != nil {
		t.Fatal(err)
	}
	s, err := FromOptions(d.Opts)
	if err != nil || !reflect.DeepEqual(s, Set{"mbps_wr": 20, "iops_rd": 500, "bps_wr_max_length": 5, "mbps_wr_max": 40}) {
		t.Errorf("FromOptions = %v, %v", s, err)
	}
	// What Proxmox's schema would not take is not a number here either
	// (qemuserver.ParseDrive lets NaN and hex through: strconv.ParseFloat).
	for _, opts := range []map[string]string{{"mbps_wr": "NaN"}, {"iops_rd": "1.5"}, {"mbps": "0x10"}} {
		if s, err := FromOptions(opts); err == nil || s != nil {
			t.Errorf("%v: %v, %v", opts, s, err)
		}
	}
	if _, err := FromOptions(map[string]string{"mbps_wr": "NaN"}); err == nil || !strings.Contains(err.Error(), "mbps_wr=NaN") {
		t.Errorf("the error names the option: %v", err)
	}
}

func TestMerge(t *testing.T) {
	base := Set{"mbps_wr": 20, "iops_rd": 500}
	for _, tc := range []struct {
		name string
		c    Change
		want Set
	}{
		{"a key added", Change{Values: map[string]float64{"mbps_rd": 10}}, Set{"mbps_wr": 20, "iops_rd": 500, "mbps_rd": 10}},
		{"a key changed", Change{Values: map[string]float64{"mbps_wr": 30}}, Set{"mbps_wr": 30, "iops_rd": 500}},
		{"0 removes", Change{Values: map[string]float64{"iops_rd": 0}}, Set{"mbps_wr": 20}},
		{"0 of an unset key", Change{Values: map[string]float64{"iops_wr": 0}}, Set{"mbps_wr": 20, "iops_rd": 500}},
		{"clear", Change{Clear: true}, Set{}},
		{"clear with values", Change{Clear: true, Values: map[string]float64{"iops": 100}}, Set{"iops": 100}},
		{"nothing", Change{}, Set{"mbps_wr": 20, "iops_rd": 500}},
	} {
		if got := Merge(base, tc.c); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
	if !reflect.DeepEqual(base, Set{"mbps_wr": 20, "iops_rd": 500}) {
		t.Errorf("Merge changed its base: %v", base)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		s   Set
		err string // "" means valid
	}{
		{Set{}, ""},
		{Set{"mbps_wr": 0, "iops_rd": 0}, ""}, // a set built by hand: 0 is no limit, not a limit below 1 byte/s
		{Set{"mbps_wr": 20, "iops_rd": 500}, ""},
		{Set{"mbps": 50, "iops": 100}, ""},
		{Set{"mbps_wr": 20, "mbps_wr_max": 40, "bps_wr_max_length": 5}, ""},
		{Set{"mbps_wr": 20, "mbps_wr_max": 20}, ""}, // a burst equal to its rate is allowed
		{Set{"iops_rd": 500, "iops_rd_max": 1000, "iops_rd_max_length": 60}, ""},
		{Set{"mbps": 50, "mbps_rd": 10}, "Proxmox rejects this: mbps cannot be combined with mbps_rd"},
		{Set{"mbps": 50, "mbps_wr": 10}, "mbps cannot be combined with mbps_wr"},
		{Set{"iops": 50, "iops_wr": 10}, "iops cannot be combined with iops_wr"},
		{Set{"mbps_rd_max": 40}, "mbps_rd_max requires mbps_rd"},
		// Proxmox saves iops_max without iops (Drive.pm checks miops*):
		// it is QEMU that refuses it.
		{Set{"iops_max": 40}, "QEMU rejects this (bps_max/iops_max require corresponding bps/iops values): iops_max requires iops"},
		{Set{"iops_max": 40, "mbps_max": 5}, "Proxmox rejects this: mbps_max requires mbps; iops_max requires iops"},
		{Set{"mbps_wr": 20, "mbps_wr_max": 40, "iops_wr_max_length": 5}, "iops_wr_max_length requires iops_wr_max"},
		{Set{"mbps_wr": 20, "bps_wr_max_length": 5}, "bps_wr_max_length requires mbps_wr_max"},
		// Proxmox takes an explicit length of 1 as set: it needs its burst too.
		{Set{"iops_rd": 5, "iops_rd_max_length": 1}, "iops_rd_max_length requires iops_rd_max"},
		{Set{"mbps_wr": 20, "mbps_wr_max": 10}, "QEMU rejects this: mbps_wr_max (10) is lower than its rate mbps_wr (20)"},
		{Set{"iops": 500, "iops_max": 499}, "iops_max (499) is lower than its rate iops (500)"},
		{Set{"mbps_wr": 20, "mbps_wr_max": 20.0000001}, ""}, // the same bytes/s
		{Set{"mbps_wr": 1, "mbps_wr_max": 953674316, "bps_wr_max_length": 2}, "mbps_wr_max x bps_wr_max_length is above QEMU's maximum burst of 1e15"},
		{Set{"iops": 1, "iops_max": 5e14, "iops_max_length": 2}, ""}, // exactly 1e15
		{Set{"iops": 1, "iops_max": 5e14, "iops_max_length": 3}, "iops_max x iops_max_length is above"},
		// Values a config may hold, checked like typed ones.
		{Set{"mbps_wr": 0.0000001}, "mbps_wr=0.0000001: below 1 byte/s"},
		{Set{"iops_rd": -1}, "iops_rd=-1: out of range"},
		{Set{"mbps_rd": 1e10}, "mbps_rd=10000000000: above QEMU's maximum"},
		{Set{"iops_rd": 5, "iops_rd_max": 10, "iops_rd_max_length": 0.5}, "iops_rd_max_length=0: out of range"},
	} {
		err := Validate(tc.s)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%v: %v", tc.s, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%v: %v, want %q", tc.s, err, tc.err)
		case err != nil && (exitcode.Of(err) != exitcode.Usage || !strings.HasSuffix(err.Error(), "(nothing was changed)")):
			t.Errorf("%v: %v is not a usage error saying nothing changed", tc.s, err)
		}
	}
}

func TestKeyAndFormat(t *testing.T) {
	if k, ok := Key("bps_rd_max_length"); !ok || k.QEMU != "bps-read-max-length" {
		t.Errorf("Key: %+v %v", k, ok)
	}
	if _, ok := Key("bps_rd"); ok {
		t.Errorf("bps_rd is stored as mbps_rd, not a limit key")
	}
	for _, tc := range []struct {
		key  string
		v    float64
		want string
	}{
		{"mbps_wr", 20, "20 MiB/s"}, {"mbps_wr", 0.5, "0.5 MiB/s"}, {"iops_rd", 500, "500 ops/s"},
		{"iops_rd_max", 1000, "1000 ops/s"}, {"bps_wr_max_length", 5, "5 s"}, {"iops_max_length", 2, "2 s"},
	} {
		k, _ := Key(tc.key)
		if got := FormatValue(k, tc.v); got != tc.want {
			t.Errorf("FormatValue(%s, %v) = %q, want %q", tc.key, tc.v, got, tc.want)
		}
	}
	k, _ := Key("mbps_wr")
	if FormatQEMU(k, 0) != "-" || FormatQEMU(k, 20<<20) != "20 MiB/s" {
		t.Errorf("FormatQEMU: %q %q", FormatQEMU(k, 0), FormatQEMU(k, 20<<20))
	}
	if got := lengthKey(qemuserver.LimitKey{Proxmox: "mbps_rd_max"}); got != "bps_rd_max_length" {
		t.Errorf("lengthKey = %s", got)
	}
	if QEMUMax != 1e15 || math.Trunc(QEMUMax/qemuserver.MiB) != 953674316 {
		t.Errorf("QEMU's ceiling is 1e15 (953674316 MiB/s)")
	}
}

// Every key's help: its unit, what it needs, how it is removed.
func TestDescribe(t *testing.T) {
	want := map[string]string{
		"mbps":               "MiB/s (1 MiB = 1048576 bytes), fractions allowed; 0 removes it",
		"mbps_wr_max":        "MiB/s (1 MiB = 1048576 bytes), fractions allowed; 0 removes it",
		"iops_rd":            "ops/s; 0 removes it",
		"iops_max":           "ops/s burst (needs its rate); 0 removes it",
		"iops_wr_max_length": "seconds the burst may last (needs its _max); at least 1 (the default)",
		"bps_rd_max_length":  "seconds the burst may last (needs its _max); at least 1 (the default)",
	}
	seen := 0
	for _, k := range qemuserver.LimitKeys {
		got := Describe(k)
		if w, ok := want[k.Proxmox]; ok {
			seen++
			if got != w {
				t.Errorf("%s: %q, want %q", k.Proxmox, got, w)
			}
		}
		if !strings.HasSuffix(got, "; 0 removes it") && !strings.HasSuffix(k.Proxmox, "_length") {
			t.Errorf("%s: %q says no way to remove it", k.Proxmox, got)
		}
	}
	if seen != len(want) {
		t.Errorf("%d of the %d keys checked are limit keys", seen, len(want))
	}
}
