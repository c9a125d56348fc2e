package qemuserver

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Limits are I/O limits in QEMU's ThrottleLimits names ("bps-write", ...):
// bytes/s for bps-*, ops/s for iops-*, seconds for *-max-length. Only non-zero
// values are kept, so two Limits compare equal when QEMU throttles the same.
type Limits map[string]int64

// LimitKey maps a Proxmox drive key to QEMU's name and scale.
type LimitKey struct {
	Proxmox string // mbps_wr
	QEMU    string // bps-write
	Scale   float64
}

// MiB is Proxmox's "MB" for limits: mbps_wr=20 is 20*1024*1024 B/s.
const MiB = 1024 * 1024

// LimitKeys lists every Proxmox limit key in qemu-server's order.
var LimitKeys = func() []LimitKey {
	var out []LimitKey
	for _, t := range [][2]string{{"", "-total"}, {"_rd", "-read"}, {"_wr", "-write"}} {
		dir, q := t[0], t[1]
		out = append(out,
			LimitKey{"mbps" + dir, "bps" + q, MiB},
			LimitKey{"mbps" + dir + "_max", "bps" + q + "-max", MiB},
			LimitKey{"bps" + dir + "_max_length", "bps" + q + "-max-length", 1},
			LimitKey{"iops" + dir, "iops" + q, 1},
			LimitKey{"iops" + dir + "_max", "iops" + q + "-max", 1},
			LimitKey{"iops" + dir + "_max_length", "iops" + q + "-max-length", 1},
		)
	}
	return out
}()

// QEMULimitNames lists the 18 ThrottleLimits fields qemu-server sets.
func QEMULimitNames() []string {
	out := make([]string, len(LimitKeys))
	for i, k := range LimitKeys {
		out[i] = k.QEMU
	}
	return out
}

// Limits converts the drive's limit options into QEMU values, as
// generate_throttle_group does (int(v*1024*1024) for MiB/s).
func (d *Drive) Limits() Limits {
	l := Limits{}
	for _, k := range LimitKeys {
		v, ok := d.Opts[k.Proxmox]
		if !ok {
			continue
		}
		f, ok := limitNumber(v)
		if !ok || f == 0 {
			continue
		}
		// Beyond int64 (QEMU refuses far less: LimitProblems) it stays
		// the largest value, not a wrapped negative one.
		l[k.QEMU] = math.MaxInt64
		if q := math.Trunc(f * k.Scale); q < math.MaxInt64 {
			l[k.QEMU] = int64(q)
		}
	}
	return l
}

// limitNumber reads a limit option's number; one too large for a float64
// ("1e400", which Proxmox's schema takes) is +Inf, not unreadable.
func limitNumber(v string) (float64, bool) {
	f, err := strconv.ParseFloat(v, 64)
	if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange && math.IsInf(f, 0) {
		return f, true
	}
	return f, err == nil
}

// ThrottleValueMax is QEMU's THROTTLE_VALUE_MAX: no rate or burst of a
// throttle above it (bytes/s or ops/s), QEMUThrottleRangeMsg its refusal
// (throttle_is_valid, QEMU 7.2 to 11.1).
const (
	ThrottleValueMax     = 1_000_000_000_000_000
	QEMUThrottleRangeMsg = "bps/iops/max values must be within [0, 1000000000000000]"
)

// ValidateLimit checks one limit value a user typed as what it is: mbps*
// a non-negative number, iops* a non-negative integer, *_max_length an
// integer of at least 1. That is stricter than Proxmox's schema, which
// lets "-5" through as an integer or number, and QEMU then refuses to
// start; a limit is set here only if QEMU takes it.
func ValidateLimit(key, val string) error {
	var lk *LimitKey
	for i := range LimitKeys {
		if LimitKeys[i].Proxmox == key {
			lk = &LimitKeys[i]
		}
	}
	if lk == nil {
		return fmt.Errorf("%s is not a limit option", clip(key))
	}
	if strings.HasPrefix(key, "mbps") {
		if f, err := strconv.ParseFloat(val, 64); err != nil || f < 0 || !numberRe.MatchString(val) {
			return fmt.Errorf("option %q: %s is not a non-negative number", key, clip(val))
		}
		return nil
	}
	n, err := strconv.ParseInt(val, 10, 64)
	if err != nil || !integerRe.MatchString(val) {
		return fmt.Errorf("option %q: %s is not an integer", key, clip(val))
	}
	if n < 0 || strings.HasSuffix(key, "_length") && n < 1 {
		return fmt.Errorf("option %q: %d is out of range", key, n)
	}
	return nil
}

// LimitProblems returns what Proxmox and QEMU refuse about a set of limit
// options: mbps with mbps_rd/mbps_wr (and iops alike), a *_max without its
// rate, a *_max_length without its *_max. parse_drive refuses all but
// iops*_max without its rate (its check names miops*, keys that do not
// exist): Proxmox saves that line, and QEMU refuses to start with it.
func (d *Drive) LimitProblems() []string {
	return LimitProblems(d.Opts)
}

// LimitRefuser names who refuses a set of limit problems: "Proxmox" when
// parse_drive does (Drive.pm: it drops the disk line), "QEMU" when only
// iops*_max without its rate is wrong (Proxmox saves that line; QEMU's
// throttle_is_valid refuses it at start, or live). "" without problems.
func LimitRefuser(problems []string) string {
	if len(problems) == 0 {
		return ""
	}
	for _, p := range problems {
		if !qemuOnlyLimitRe.MatchString(p) && !qemuRangeLimitRe.MatchString(p) {
			return "Proxmox"
		}
	}
	return "QEMU"
}

// QEMUMaxMsg is QEMU's refusal of a burst without its rate
// (throttle_is_valid), as QEMU 7.2 prints it for
// throttling.iops-write-max=100 alone.
const QEMUMaxMsg = "bps_max/iops_max require corresponding bps/iops values"

var (
	qemuOnlyLimitRe  = regexp.MustCompile(`^iops(_rd|_wr)?_max requires iops(_rd|_wr)?$`)
	qemuRangeLimitRe = regexp.MustCompile(`^\S+ is beyond what QEMU takes`)
)

// LimitQEMUMessages are QEMU's refusals of the limit problems Proxmox
// lets through (LimitRefuser "QEMU"), each once.
func LimitQEMUMessages(problems []string) []string {
	var out []string
	for _, p := range problems {
		m := QEMUMaxMsg
		if qemuRangeLimitRe.MatchString(p) {
			m = QEMUThrottleRangeMsg
		}
		if !qemuOnlyLimitRe.MatchString(p) && m == QEMUMaxMsg || slices.Contains(out, m) {
			continue
		}
		out = append(out, m)
	}
	return out
}

// LimitProblems checks a set of Proxmox limit options.
func LimitProblems(opts map[string]string) []string {
	set := func(k string) bool {
		v, ok := opts[k]
		if !ok {
			return false
		}
		f, ok := limitNumber(v)
		return ok && f != 0
	}
	var out []string
	// A rate or burst above THROTTLE_VALUE_MAX: Proxmox's schema takes
	// any number, qemu-server passes it on, QEMU refuses to start.
	for _, k := range LimitKeys {
		if f, ok := limitNumber(opts[k.Proxmox]); ok && !isLength(k.QEMU) && f*k.Scale > ThrottleValueMax {
			out = append(out, fmt.Sprintf("%s is beyond what QEMU takes: %s (at most %d %s)", k.Proxmox, clip(opts[k.Proxmox]), ThrottleValueMax/int64(k.Scale), limitUnit(k)))
		}
	}
	for _, r := range [][2]string{
		{"mbps_max", "mbps"}, {"mbps_rd_max", "mbps_rd"}, {"mbps_wr_max", "mbps_wr"},
		{"iops_max", "iops"}, {"iops_rd_max", "iops_rd"}, {"iops_wr_max", "iops_wr"},
		{"bps_max_length", "mbps_max"}, {"bps_rd_max_length", "mbps_rd_max"}, {"bps_wr_max_length", "mbps_wr_max"},
		{"iops_max_length", "iops_max"}, {"iops_rd_max_length", "iops_rd_max"}, {"iops_wr_max_length", "iops_wr_max"},
	} {
		if set(r[0]) && !set(r[1]) {
			out = append(out, fmt.Sprintf("%s requires %s", r[0], r[1]))
		}
	}
	for _, p := range [][2]string{{"mbps", "mbps_rd"}, {"mbps", "mbps_wr"}, {"iops", "iops_rd"}, {"iops", "iops_wr"}} {
		if set(p[0]) && set(p[1]) {
			out = append(out, fmt.Sprintf("%s cannot be combined with %s", p[0], p[1]))
		}
	}
	return out
}

// Equal compares two limit sets; *-max-length of 1 equals unset (qemu-server
// sends 1 for unset lengths and QEMU reports 1 as its default).
func (l Limits) Equal(o Limits) bool {
	return l.normal().String() == o.normal().String()
}

func (l Limits) normal() Limits {
	n := Limits{}
	for k, v := range l {
		if v == 0 || (isLength(k) && v == 1) {
			continue
		}
		n[k] = v
	}
	return n
}

// Normal drops zero values and default burst lengths.
func (l Limits) Normal() Limits { return l.normal() }

func limitUnit(k LimitKey) string {
	if k.Scale == MiB {
		return "MiB/s"
	}
	return "ops/s"
}

func isLength(k string) bool { return len(k) > 11 && k[len(k)-11:] == "-max-length" }

// String prints limits sorted by name: "bps-write=20971520 iops-read=500".
func (l Limits) String() string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	s := ""
	for i, k := range keys {
		if i > 0 {
			s += " "
		}
		s += k + "=" + strconv.FormatInt(l[k], 10)
	}
	return s
}

// Full returns all 18 fields the way qemu-server sends them live: unset rates
// as 0, unset burst lengths as 1.
func (l Limits) Full() map[string]int64 {
	out := map[string]int64{}
	for _, k := range LimitKeys {
		v := l[k.QEMU]
		if v == 0 && isLength(k.QEMU) {
			v = 1
		}
		out[k.QEMU] = v
	}
	return out
}
