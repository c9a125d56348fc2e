// Package units formats numbers and units the one way pvediskcheck prints
// them: binary byte units (KiB, MiB, GiB), MiB/s for rates as Proxmox writes
// its limits, milliseconds for latency, percentages.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Binary byte units.
const (
	KiB = 1 << 10
	MiB = 1 << 20
	GiB = 1 << 30
)

// Bytes prints b in binary units: "512 B", "1.5 KiB", "20.0 MiB", "1.25 GiB".
func Bytes(b int64) string {
	neg := ""
	if b < 0 {
		neg, b = "-", -b
	}
	switch {
	case b >= GiB:
		return fmt.Sprintf("%s%.2f GiB", neg, float64(b)/GiB)
	case b >= MiB:
		return fmt.Sprintf("%s%.1f MiB", neg, float64(b)/MiB)
	case b >= KiB:
		return fmt.Sprintf("%s%.1f KiB", neg, float64(b)/KiB)
	}
	return fmt.Sprintf("%s%d B", neg, b)
}

// BytesPtr is Bytes, or "-" for an unknown value.
func BytesPtr(b *int64) string {
	if b == nil {
		return "-"
	}
	return Bytes(*b)
}

// BytesCompact prints n in the largest binary unit, whole numbers without a
// decimal: "256 MiB", "23.5 GiB" (fio job sizes).
func BytesCompact(n int64) string {
	names := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB"}
	f, u := float64(n), 0
	for f >= 1024 && u < len(names)-1 {
		f /= 1024
		u++
	}
	if f == float64(int64(f)) {
		return fmt.Sprintf("%d %s", int64(f), names[u])
	}
	return fmt.Sprintf("%.1f %s", f, names[u])
}

// MiBf prints a byte count as MiB with one decimal: "128.0 MiB".
func MiBf(b float64) string { return fmt.Sprintf("%.1f MiB", b/MiB) }

// GiBf is b in GiB as a float.
func GiBf(b int64) float64 { return float64(b) / GiB }

// PercentPtr prints "12.34 %", or "-" for an unknown value.
func PercentPtr(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f %%", *p)
}

// Number prints f with at most three decimals and no trailing zeros:
// 20 -> "20", 0.5 -> "0.5", 1/3 -> "0.333" (Proxmox limit values).
func Number(f float64) string {
	s := strconv.FormatFloat(f, 'f', 3, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// Grouped prints a mean the way the labs' tables do: thousands separated
// from 100 on, one decimal from 10, two below.
func Grouped(v float64) string {
	switch a := math.Abs(v); {
	case a >= 100:
		s := strconv.FormatInt(int64(math.Round(v)), 10)
		for i := len(s) - 3; i > 0 && s[i-1] != '-'; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		return s
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// PercentWhole prints a percentage whole, with one decimal under 1 % (but 0).
func PercentWhole(p float64) string {
	if r := math.Round(p*10) / 10; r != 0 && r < 1 {
		return strconv.FormatFloat(r, 'f', 1, 64) + "%"
	}
	return strconv.FormatFloat(p, 'f', 0, 64) + "%"
}

// Round rounds f to digits decimals (for stable JSON).
func Round(f float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(f*p) / p
}

// Duration prints d to three significant digits, in Go's notation: a
// duration computed from the clock (what is left of a deadline) reads "2s",
// not "1.999999439s"; one typed as a round value prints as typed.
func Duration(d time.Duration) string {
	a := d
	if a < 0 {
		a = -a
	}
	unit := time.Duration(1)
	for a/unit >= 1000 {
		unit *= 10
	}
	return d.Round(unit).String()
}

// Short is a round duration without Go's trailing zero units, as a
// bound is written in help and errors: 1h, 10m, 1h30m, 100ms.
func Short(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Ms is d in milliseconds.
func Ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// OnOff prints a boolean as on/off.
func OnOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// OrDash is s, or "-" when empty.
func OrDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Clip quotes at most n bytes of s for an error line, saying how much was
// left out: input echoed back must stay one short line.
func Clip(s string, n int) string {
	if len(s) <= n {
		return strconv.Quote(s)
	}
	return fmt.Sprintf("%q... (%d bytes)", s[:n], len(s))
}

// Line cuts a message to at most n bytes and one line, saying how much was
// left out: errors that echo what was typed, or what another program printed
// (ssh, lvs, a remote node), stay short. What a terminal would act on is
// written escaped, as Clip quotes it: Printable.
func Line(msg string, n int) string {
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	s, whole := printable(msg, n, false)
	if !whole {
		return fmt.Sprintf("%s... (%d bytes)", s, len(msg))
	}
	return s
}

// Printable is s with every character a terminal would act on or could not
// show (control characters, so escape sequences; invalid UTF-8; any rune
// strconv.IsPrint refuses) written as Go escapes it: "\x1b[31m" prints as
// `\x1b[31m`, a newline as `\n`.
func Printable(s string) string {
	out, _ := printable(s, math.MaxInt, false)
	return out
}

// Text is Printable for text of several lines (another node's output, a
// page of text): newlines and tabs stay as they are, every other character
// Printable escapes is escaped.
func Text(s string) string {
	if plain(s) {
		return s
	}
	out, _ := printable(s, math.MaxInt, true)
	return out
}

// plain reports whether s is printable ASCII, newlines and tabs: what
// Text leaves as it is, found without building anything.
func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < 0x20 || c >= 0x7f) && c != '\n' && c != '\t' {
			return false
		}
	}
	return true
}

// printable is Printable of s cut before the first character that would take
// it past n bytes (never inside an escape); whole is false when it was cut.
// lines keeps newlines and tabs.
func printable(s string, n int, lines bool) (out string, whole bool) {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		piece := s[i : i+w]
		switch {
		case lines && (r == '\n' || r == '\t'):
		case r == utf8.RuneError && w == 1:
			piece = fmt.Sprintf(`\x%02x`, s[i])
		case !strconv.IsPrint(r):
			q := strconv.QuoteRune(r)
			piece = q[1 : len(q)-1]
		}
		if b.Len()+len(piece) > n {
			return b.String(), false
		}
		b.WriteString(piece)
		i += w
	}
	return b.String(), true
}
