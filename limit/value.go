package limit

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// QEMUMax is QEMU's THROTTLE_VALUE_MAX: no rate, burst, or burst x length
// may exceed it (throttle_is_valid), in bytes/s or ops/s.
const QEMUMax = 1e15

// Set is a disk's limits by Proxmox key (mbps_wr, iops_rd_max,
// bps_wr_max_length) in Proxmox units: MiB/s for mbps*, ops/s for iops*,
// seconds for *_max_length. A key that is absent is not limited; a Set never
// holds 0.
type Set map[string]float64

// Change is what to do to a disk's limits: drop every limit first when
// Clear, then set each key of Values (0 removes the key).
type Change struct {
	Values map[string]float64
	Clear  bool
}

// Key returns the limit key named by its Proxmox name.
func Key(proxmox string) (qemuserver.LimitKey, bool) {
	for _, k := range qemuserver.LimitKeys {
		if k.Proxmox == proxmox {
			return k, true
		}
	}
	return qemuserver.LimitKey{}, false
}

// Kind of value a key takes (Proxmox's drive schema, qemu-server Drive.pm).
func isMiB(k qemuserver.LimitKey) bool    { return k.Scale == qemuserver.MiB }
func isLength(k qemuserver.LimitKey) bool { return strings.HasSuffix(k.Proxmox, "_length") }

// Describe says what a key takes, as its flag's help says it: the unit,
// the key it needs, and how it is removed (0; a burst length cannot be
// removed, it is at least 1, the default).
func Describe(k qemuserver.LimitKey) string {
	if isMiB(k) {
		return "MiB/s (1 MiB = 1048576 bytes), fractions allowed; 0 removes it"
	}
	if isLength(k) {
		return "seconds the burst may last (needs its _max); at least 1 (the default)"
	}
	if strings.HasSuffix(k.Proxmox, "_max") {
		return "ops/s burst (needs its rate); 0 removes it"
	}
	return "ops/s; 0 removes it"
}

// Proxmox's grammar for a number and an integer (PVE::JSONSchema), ASCII
// digits only. A value is parsed as what it is; nothing else a user types
// gets near a qm argument or a QMP command.
var (
	numberRe  = regexp.MustCompile(`^\+?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?$`)
	integerRe = regexp.MustCompile(`^[+-]?[0-9]+$`)
)

// ParseValue parses what a user typed for a limit key as the number it is
// and checks it on its own: mbps* a finite non-negative decimal (MiB/s),
// iops* and their *_max a non-negative integer, *_max_length an integer of
// at least 1, nothing above QEMU's ceiling, and nothing that is not 0 but
// becomes 0 bytes/s in QEMU (which would be no limit at all). 0 means
// "remove the limit".
func ParseValue(key, s string) (float64, error) {
	k, ok := Key(key)
	if !ok {
		return 0, fmt.Errorf("%s is not a limit key", key)
	}
	v, err := parse(k, s)
	if err != nil {
		return 0, err
	}
	if v == 0 && !isLength(k) {
		return 0, nil
	}
	if err := checkValue(k, v); err != nil {
		return 0, err
	}
	return v, nil
}

// parse applies the grammar of the key's kind.
func parse(k qemuserver.LimitKey, s string) (float64, error) {
	if s == "" {
		return 0, errors.New("empty value")
	}
	if isMiB(k) {
		if !numberRe.MatchString(s) {
			return 0, errors.New("not a non-negative number (MiB/s: digits with an optional fraction, e.g. 20 or 0.5)")
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil { // only a range error is left: 1e400
			return 0, tooBig(k)
		}
		return v, nil
	}
	if !integerRe.MatchString(s) {
		return 0, errors.New("not an integer")
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil { // only a range error is left
		if strings.HasPrefix(s, "-") {
			return 0, errors.New("out of range (negative)")
		}
		return 0, tooBig(k)
	}
	return float64(v), nil
}

func tooBig(k qemuserver.LimitKey) error {
	switch {
	case isMiB(k):
		return errors.New("above QEMU's maximum of 1e15 bytes/s (953674316 MiB/s)")
	case isLength(k):
		return errors.New("above QEMU's maximum of 1e15 seconds")
	}
	return errors.New("above QEMU's maximum of 1e15 per second")
}

// checkValue is the rule for one value of the key.
func checkValue(k qemuserver.LimitKey, v float64) error {
	if v < 0 {
		return errors.New("out of range (negative)")
	}
	if isLength(k) && v < 1 {
		return errors.New("out of range (a burst lasts at least 1 second)")
	}
	if v*k.Scale > QEMUMax {
		return tooBig(k)
	}
	if isMiB(k) && v > 0 && toQEMU(k, v) == 0 {
		return errors.New("below 1 byte/s, which QEMU would run as no limit at all: the smallest limit is 0.000001 MiB/s, and 0 removes the limit")
	}
	return nil
}

// toQEMU converts a value to QEMU's unit as qemu-server does: int(v * 1024 * 1024).
func toQEMU(k qemuserver.LimitKey, v float64) int64 { return int64(math.Trunc(v * k.Scale)) }

// FromOptions reads the limit keys of a drive's options (a config line),
// each parsed as the number it is. Values of 0 are not limits and are
// dropped.
func FromOptions(opts map[string]string) (Set, error) {
	s := Set{}
	for _, k := range qemuserver.LimitKeys {
		raw, ok := opts[k.Proxmox]
		if !ok {
			continue
		}
		v, err := parse(k, raw)
		if err != nil {
			return nil, fmt.Errorf("%s=%s: %w", k.Proxmox, raw, err)
		}
		if v != 0 {
			s[k.Proxmox] = v
		}
	}
	return s, nil
}

// FromQEMU converts limits QEMU reports to Proxmox keys and units, dropping
// unset values and default burst lengths. MiB/s values are exact (bytes/s
// divided by a power of two), so QEMU() gives the same bytes/s back.
func FromQEMU(l qemuserver.Limits) Set {
	s := Set{}
	n := l.Normal()
	for _, k := range qemuserver.LimitKeys {
		if v := n[k.QEMU]; v != 0 {
			s[k.Proxmox] = float64(v) / k.Scale
		}
	}
	return s
}

// QEMU converts the set to QEMU's ThrottleLimits names and units, as
// qemu-server's generate_throttle_group does.
func (s Set) QEMU() qemuserver.Limits {
	l := qemuserver.Limits{}
	for _, k := range qemuserver.LimitKeys {
		if v, ok := s[k.Proxmox]; ok {
			if q := toQEMU(k, v); q != 0 {
				l[k.QEMU] = q
			}
		}
	}
	return l
}

// Options prints the set as drive options, from the numbers: MiB/s as the
// shortest decimal that reads back as the same number, the rest as
// integers.
func (s Set) Options() map[string]string {
	out := map[string]string{}
	for _, k := range qemuserver.LimitKeys {
		if v, ok := s[k.Proxmox]; ok {
			out[k.Proxmox] = option(k, v)
		}
	}
	return out
}

// Merge returns base with the change applied.
func Merge(base Set, c Change) Set {
	out := Set{}
	if !c.Clear {
		for k, v := range base {
			out[k] = v
		}
	}
	for k, v := range c.Values {
		if v == 0 {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out
}

// Validate checks a whole set before anything is touched: each value
// (checkValue), Proxmox's combination rules (parse_drive: mbps with
// mbps_rd/mbps_wr, a *_max without its rate, a *_max_length without its
// *_max) and QEMU's (throttle_is_valid: a burst below its rate, a burst
// times its length above 1e15). Errors are usage errors (exit 2).
func Validate(s Set) error {
	for _, k := range qemuserver.LimitKeys {
		if v, ok := s[k.Proxmox]; ok {
			if err := checkValue(k, v); err != nil {
				return exitcode.Usagef("limit: %s=%s: %v (nothing was changed)", k.Proxmox, option(k, v), err)
			}
		}
	}
	if p := qemuserver.LimitProblems(s.Options()); len(p) > 0 {
		who := "Proxmox rejects this"
		if qemuserver.LimitRefuser(p) == "QEMU" {
			who = "QEMU rejects this (" + strings.Join(qemuserver.LimitQEMUMessages(p), "; ") + ")"
		}
		return exitcode.Usagef("limit: %s: %s (nothing was changed)", who, strings.Join(p, "; "))
	}
	l := s.QEMU()
	for _, k := range qemuserver.LimitKeys {
		if !strings.HasSuffix(k.Proxmox, "_max") {
			continue
		}
		rateKey := strings.TrimSuffix(k.Proxmox, "_max")
		burst, rate, length := l[k.QEMU], l[strings.TrimSuffix(k.QEMU, "-max")], l[k.QEMU+"-length"]
		if burst != 0 && burst < rate {
			rk, _ := Key(rateKey)
			return exitcode.Usagef("limit: QEMU rejects this: %s (%s) is lower than its rate %s (%s) (nothing was changed)",
				k.Proxmox, option(k, s[k.Proxmox]), rateKey, option(rk, s[rateKey]))
		}
		if float64(burst)*float64(length) > QEMUMax {
			return exitcode.Usagef("limit: QEMU rejects this: %s x %s is above QEMU's maximum burst of 1e15 (nothing was changed)", k.Proxmox, lengthKey(k))
		}
	}
	return nil
}

// lengthKey is the burst length key of a *_max key: mbps_wr_max ->
// bps_wr_max_length, iops_max -> iops_max_length.
func lengthKey(k qemuserver.LimitKey) string {
	return strings.TrimPrefix(k.Proxmox, "m") + "_length"
}

// option prints one value as it goes into a drive option (see Options).
func option(k qemuserver.LimitKey, v float64) string {
	if isMiB(k) {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(math.Trunc(v), 'f', -1, 64)
}
