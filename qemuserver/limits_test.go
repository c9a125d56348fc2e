package qemuserver

import (
	"math"
	"reflect"
	"strings"
	"testing"
)

// ValidateLimit takes what QEMU takes: the messages are the ones limit
// prints for a refused flag value.
func TestValidateLimit(t *testing.T) {
	for _, ok := range [][2]string{
		{"mbps_wr", "20"}, {"mbps", "0.5"}, {"mbps_rd_max", "1e3"}, {"mbps", "0"},
		{"iops_rd", "500"}, {"iops", "+5"}, {"iops_wr_max", "0"},
		{"bps_wr_max_length", "1"}, {"iops_max_length", "60"},
	} {
		if err := ValidateLimit(ok[0], ok[1]); err != nil {
			t.Errorf("%s=%s: %v", ok[0], ok[1], err)
		}
	}
	for _, c := range [][3]string{
		{"mbps_wr", "-5", "not a non-negative number"},
		{"mbps_wr", "fast", "not a non-negative number"},
		{"mbps_wr", "Inf", "not a non-negative number"},
		{"mbps_wr", "NaN", "not a non-negative number"},
		{"mbps_wr", "0x10", "not a non-negative number"},
		{"iops_rd", "1.5", "not an integer"},
		{"iops_rd", "1e3", "not an integer"},
		{"iops_rd", "-1", "out of range"},
		{"bps_wr_max_length", "0", "out of range"},
		{"iops_rd_max_length", "-3", "out of range"},
		{"bps", "1", "not a limit option"},
		{"cache", "none", "not a limit option"},
	} {
		err := ValidateLimit(c[0], c[1])
		if err == nil || !strings.Contains(err.Error(), c[2]) {
			t.Errorf("%s=%s: %v, want %q", c[0], c[1], err, c[2])
		}
	}
	if err := ValidateLimit("mbps_wr", strings.Repeat("9", 3000)+"x"); err == nil || len(err.Error()) > 120 {
		t.Errorf("long value: %v", err)
	}
}

func TestLimitProblems(t *testing.T) {
	for opts, want := range map[string]string{
		"mbps=10,mbps_rd=5":        "mbps cannot be combined with mbps_rd",
		"mbps=10,mbps_wr=5":        "mbps cannot be combined with mbps_wr",
		"iops=10,iops_rd=5":        "iops cannot be combined with iops_rd",
		"iops=10,iops_wr=5":        "iops cannot be combined with iops_wr",
		"iops_max=10":              "iops_max requires iops",
		"iops_rd_max=10":           "iops_rd_max requires iops_rd",
		"iops_wr_max=10,iops_wr=0": "iops_wr_max requires iops_wr",
		"mbps_max=10":              "mbps_max requires mbps",
		"mbps_rd_max=1,mbps_rd=1,bps_rd_max_length=2":  "",
		"mbps_wr=1,bps_wr_max_length=2":                "bps_wr_max_length requires mbps_wr_max",
		"iops_max_length=2,iops_max=0":                 "iops_max_length requires iops_max",
		"iops_rd=1,iops_rd_max=5,iops_rd_max_length=2": "",
		"mbps=0,mbps_rd=5":                             "",
		"":                                             "",
	} {
		m := map[string]string{}
		for _, kv := range strings.Split(opts, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				m[k] = v
			}
		}
		got := strings.Join(LimitProblems(m), "; ")
		if got != want {
			t.Errorf("%s: %q, want %q", opts, got, want)
		}
	}
}

func TestLimitsConversion(t *testing.T) {
	d, err := ParseDrive("scsi1", "local-lvm:vm-1-disk-1,mbps_wr=20,mbps_rd=0.5,iops_rd=500,iops_rd_max=1000,iops_rd_max_length=3,mbps=0")
	if err != nil {
		t.Fatal(err)
	}
	l := d.Limits()
	want := Limits{"bps-write": 20 * MiB, "bps-read": MiB / 2, "iops-read": 500, "iops-read-max": 1000, "iops-read-max-length": 3}
	if !reflect.DeepEqual(l, want) {
		t.Errorf("Limits %v, want %v", l, want)
	}
	if l.String() != "bps-read=524288 bps-write=20971520 iops-read=500 iops-read-max=1000 iops-read-max-length=3" {
		t.Errorf("String %s", l)
	}
	full := l.Full()
	if len(full) != 18 || full["bps-write"] != 20*MiB || full["iops-write-max-length"] != 1 || full["bps-total"] != 0 || full["iops-read-max-length"] != 3 {
		t.Errorf("Full %v", full)
	}
	if !(Limits{"bps-write": 5, "iops-read-max-length": 1, "iops-total": 0}).Equal(Limits{"bps-write": 5}) {
		t.Error("a burst length of 1 and a zero rate equal unset")
	}
	if (Limits{"bps-write": 5}).Equal(Limits{"bps-write": 6}) || (Limits{"bps-read-max-length": 2}).Equal(Limits{}) {
		t.Error("different limits compare equal")
	}
	if n := (Limits{"bps-write": 0, "iops-read-max-length": 1, "iops-read-max-length-x": 1}).Normal(); len(n) != 1 {
		t.Errorf("Normal %v", n)
	}
	names := QEMULimitNames()
	if len(names) != 18 || names[0] != "bps-total" || names[17] != "iops-write-max-length" {
		t.Errorf("names %v", names)
	}
	if isLength("bps-max-length") != true || isLength("max-length") || isLength("bps-write") {
		t.Error("isLength")
	}
}

// TestLimitRefuser (issue 26 #4): parse_drive refuses every pairing but a
// burst of iops without its rate (it checks miops*, keys that do not
// exist), which QEMU refuses.
func TestLimitRefuser(t *testing.T) {
	for opts, want := range map[string]string{
		"":                          "",
		"iops_wr_max=100":           "QEMU",
		"iops_max=1,iops_rd_max=2":  "QEMU",
		"mbps_max=1":                "Proxmox",
		"iops_max=1,mbps_rd_max=2":  "Proxmox",
		"iops_max_length=3":         "Proxmox",
		"iops=1,iops_rd=2":          "Proxmox",
		"iops_wr=5,iops_wr_max=100": "",
	} {
		m, _ := SplitQemuOpts(opts, "")
		if opts == "" {
			m = map[string]string{}
		}
		if got := LimitRefuser(LimitProblems(m)); got != want {
			t.Errorf("%q: %q, want %q (%v)", opts, got, want, LimitProblems(m))
		}
	}
}

// TestLimitsHostile: limit values Proxmox's schema takes (any number for
// mbps*, any integer for iops*) and QEMU does not. Before, mbps=1e400 was
// "no limits in the config", mbps=99999999999999999999999 showed as
// -8796093022208 MiB/s and iops_rd=99999999999999999999 as
// -9223372036854775808 (wrapped), and neither was a problem.
func TestLimitsHostile(t *testing.T) {
	for _, c := range []struct {
		opts     map[string]string
		limits   Limits
		problems []string
		refuser  string
		qemu     []string
	}{
		{map[string]string{"mbps": "1e400"}, Limits{"bps-total": math.MaxInt64},
			[]string{`mbps is beyond what QEMU takes: "1e400" (at most 953674316 MiB/s)`}, "QEMU", []string{QEMUThrottleRangeMsg}},
		{map[string]string{"mbps": "99999999999999999999999"}, Limits{"bps-total": math.MaxInt64},
			[]string{`mbps is beyond what QEMU takes: "99999999999999999999999" (at most 953674316 MiB/s)`}, "QEMU", []string{QEMUThrottleRangeMsg}},
		{map[string]string{"iops_rd": "99999999999999999999"}, Limits{"iops-read": math.MaxInt64},
			[]string{`iops_rd is beyond what QEMU takes: "99999999999999999999" (at most 1000000000000000 ops/s)`}, "QEMU", []string{QEMUThrottleRangeMsg}},
		// The edge: QEMU takes THROTTLE_VALUE_MAX itself, not one more.
		{map[string]string{"iops_wr": "1000000000000000"}, Limits{"iops-write": 1000000000000000}, nil, "", nil},
		{map[string]string{"iops_wr": "1000000000000001"}, Limits{"iops-write": 1000000000000001},
			[]string{`iops_wr is beyond what QEMU takes: "1000000000000001" (at most 1000000000000000 ops/s)`}, "QEMU", []string{QEMUThrottleRangeMsg}},
		{map[string]string{"mbps_wr": "953674316"}, Limits{"bps-write": 953674316 * MiB}, nil, "", nil},
		{map[string]string{"mbps_wr": "953674317"}, Limits{"bps-write": 953674317 * MiB},
			[]string{`mbps_wr is beyond what QEMU takes: "953674317" (at most 953674316 MiB/s)`}, "QEMU", []string{QEMUThrottleRangeMsg}},
		// A burst length is seconds, not a rate: no range problem here.
		{map[string]string{"iops": "10", "iops_max": "20", "iops_max_length": "99999999999999999999"}, Limits{"iops-total": 10, "iops-total-max": 20, "iops-total-max-length": math.MaxInt64}, nil, "", nil},
		// Both kinds of QEMU refusal, each said once; a Proxmox refusal wins.
		{map[string]string{"iops_max": "5", "iops_rd": "1e300", "iops_wr": "1e300"}, Limits{"iops-total-max": 5, "iops-read": math.MaxInt64, "iops-write": math.MaxInt64},
			[]string{`iops_rd is beyond what QEMU takes: "1e300" (at most 1000000000000000 ops/s)`, `iops_wr is beyond what QEMU takes: "1e300" (at most 1000000000000000 ops/s)`, "iops_max requires iops"}, "QEMU", []string{QEMUThrottleRangeMsg, QEMUMaxMsg}},
		{map[string]string{"mbps_max": "5", "mbps_rd": "1e400"}, Limits{"bps-total-max": 5 * MiB, "bps-read": math.MaxInt64},
			[]string{`mbps_rd is beyond what QEMU takes: "1e400" (at most 953674316 MiB/s)`, "mbps_max requires mbps"}, "Proxmox", []string{QEMUThrottleRangeMsg}},
		{map[string]string{"mbps": "abc", "iops": "-0"}, Limits{}, nil, "", nil},
	} {
		d := &Drive{Opts: c.opts}
		if got := d.Limits(); !reflect.DeepEqual(got, c.limits) {
			t.Errorf("%v: limits %v, want %v", c.opts, got, c.limits)
		}
		p := d.LimitProblems()
		if !reflect.DeepEqual(p, c.problems) || LimitRefuser(p) != c.refuser || !reflect.DeepEqual(LimitQEMUMessages(p), c.qemu) {
			t.Errorf("%v: problems %q (%q, %q), want %q (%q, %q)", c.opts, p, LimitRefuser(p), LimitQEMUMessages(p), c.problems, c.refuser, c.qemu)
		}
	}
}
