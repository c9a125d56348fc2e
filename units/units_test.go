package units

import (
	"testing"
	"time"
)

func TestDuration(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{1999999439, "2s"}, // what is left of a 2 s deadline, as QMP's timeout printed it
		{2 * time.Second, "2s"},
		{1994999999, "1.99s"},
		{1995000000, "2s"},
		{8 * time.Second, "8s"},
		{4500 * time.Millisecond, "4.5s"},
		{1234567890, "1.23s"},
		{100 * time.Millisecond, "100ms"},
		{99 * time.Millisecond, "99ms"},
		{99999999, "100ms"},
		{123456789, "123ms"},
		{999, "999ns"},
		{1001, "1µs"},
		{1500 * time.Microsecond, "1.5ms"},
		{90*time.Second + 500*time.Millisecond, "1m30.5s"},
		{2*time.Minute + 123*time.Millisecond, "2m0s"},
		{10 * time.Minute, "10m0s"},
		{-1999999439, "-2s"},
		{1<<63 - 1, "2561111h6m40s"}, // no overflow at the largest duration
	} {
		if got := Duration(c.d); got != c.want {
			t.Errorf("Duration(%d) = %q, want %q", int64(c.d), got, c.want)
		}
	}
}

func TestLine(t *testing.T) {
	for _, c := range []struct {
		msg  string
		n    int
		want string
	}{
		{"plain message", 200, "plain message"},
		{"first\nsecond", 200, "first"},
		{"exactly ten", 11, "exactly ten"},
		{"exactly ten", 10, "exactly te... (11 bytes)"},
		{"héllo wörld", 2, "h... (13 bytes)"}, // never half a rune
		{"héllo", 3, "hé... (6 bytes)"},
		// What ssh printed from a hostile login banner: the escapes are
		// shown, not acted on.
		{"\x1b[31mPermission denied\x1b[0m (publickey).", 200, `\x1b[31mPermission denied\x1b[0m (publickey).`},
		{"a\rb\tc\x00d\x7fe", 200, `a\rb\tc\x00d\x7fe`},
		{"bad \xff\xfe utf-8", 200, `bad \xff\xfe utf-8`},
		{"C1 \u0085 and \u009b[2J, bidi \u202e", 200, `C1 \u0085 and \u009b[2J, bidi \u202e`},
		{"ünïcode stays", 200, "ünïcode stays"},
		// An escape is never cut in half: it counts whole against n.
		{"ab\x1bcd", 4, "ab... (5 bytes)"},
		{"ab\x1bcd", 6, `ab\x1b... (5 bytes)`},
		{"", 10, ""},
	} {
		if got := Line(c.msg, c.n); got != c.want {
			t.Errorf("Line(%q, %d) = %q, want %q", c.msg, c.n, got, c.want)
		}
	}
	if got := Printable("two\nlines\x1b[K"); got != `two\nlines\x1b[K` {
		t.Errorf("Printable: %q", got)
	}
}

// Text keeps a page's newlines and tabs and escapes the rest as Printable
// does: escape sequences (CSI, OSC), C1 controls (U+009B is a CSI to some
// terminals), carriage returns, DEL, invalid UTF-8; printable non-ASCII
// stays.
func TestText(t *testing.T) {
	for in, want := range map[string]string{
		"VM 100\tok\n":                        "VM 100\tok\n",
		"µs ±3%\n":                            "µs ±3%\n",
		"\x1b[2J\x1b]0;pwned\x07":             `\x1b[2J\x1b]0;pwned\a`,
		"a\rb":                                `a\rb`,
		"csi\u009b31m":                        `csi\u009b31m`,
		"del\x7f bad\xff":                     `del\x7f bad\xff`,
		"":                                    "",
		"line one\nline \x1b[31mtwo\x1b[0m\n": "line one\nline \\x1b[31mtwo\\x1b[0m\n",
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
		if got := Text(Text(in)); got != Text(in) {
			t.Errorf("Text is not idempotent on %q: %q", in, got)
		}
	}
}

func TestShort(t *testing.T) {
	for d, want := range map[time.Duration]string{
		time.Hour: "1h", 10 * time.Minute: "10m", 90 * time.Minute: "1h30m", 6 * time.Hour: "6h",
		100 * time.Millisecond: "100ms", time.Second: "1s", 61 * time.Second: "1m1s", 0: "0s",
	} {
		if got := Short(d); got != want {
			t.Errorf("Short(%s) = %s, want %s", d, got, want)
		}
	}
}
