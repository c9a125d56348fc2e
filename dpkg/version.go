// Package dpkg is what the tool needs of Debian's package manager: the
// order of package versions as dpkg decides it (deb-version(7): epochs,
// '~' before everything, revisions such as +pve1 or ~bpo13+1), and the
// version of a package installed on the node, read from dpkg's own
// database below --root (/var/lib/dpkg/status).
package dpkg

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Version is a Debian package version: [epoch:]upstream[-revision].
type Version struct {
	// Epoch is the number before the colon, 0 when there is none.
	Epoch int
	// Upstream is the part between the epoch and the last hyphen.
	Upstream string
	// Revision is the part after the last hyphen ("" when there is no
	// hyphen, which dpkg orders as "0").
	Revision string
}

// ErrVersion is a version string dpkg would not take as one.
var ErrVersion = errors.New("not a Debian version")

// ParseVersion reads a version as dpkg's parseversion does
// (lib/dpkg/parsehelp.c), refusing what dpkg refuses and also what it only
// warns about (an upstream part that does not start with a digit, a
// character outside its set), so that an odd string is never ordered: the
// caller says the version is unknown instead.
func ParseVersion(s string) (Version, error) {
	bad := func(why string) (Version, error) {
		return Version{}, fmt.Errorf("%w: %q: %s", ErrVersion, s, why)
	}
	v := strings.TrimSpace(s)
	if v == "" {
		return bad("empty")
	}
	if strings.ContainsAny(v, " \t\n\r") {
		return bad("embedded spaces")
	}
	var out Version
	if e, rest, ok := strings.Cut(v, ":"); ok {
		if e == "" {
			return bad("the epoch is empty")
		}
		for _, c := range e {
			if c < '0' || c > '9' {
				return bad("the epoch is not a number")
			}
		}
		n, err := strconv.ParseInt(e, 10, 32)
		if err != nil {
			return bad("the epoch is too big")
		}
		if rest == "" {
			return bad("nothing after the colon")
		}
		out.Epoch, v = int(n), rest
	}
	if i := strings.LastIndexByte(v, '-'); i >= 0 {
		if i == len(v)-1 {
			return bad("the revision is empty")
		}
		out.Upstream, out.Revision = v[:i], v[i+1:]
	} else {
		out.Upstream = v
	}
	if out.Upstream == "" {
		return bad("the version is empty")
	}
	if !isDigit(out.Upstream[0]) {
		return bad("the version does not start with a digit")
	}
	for i := 0; i < len(out.Upstream); i++ {
		if c := out.Upstream[i]; !isAlnum(c) && !strings.ContainsRune(".-+~:", rune(c)) {
			return bad("invalid character in the version")
		}
	}
	for i := 0; i < len(out.Revision); i++ {
		if c := out.Revision[i]; !isAlnum(c) && !strings.ContainsRune(".+~", rune(c)) {
			return bad("invalid character in the revision")
		}
	}
	return out, nil
}

// String is the version as dpkg prints it (the epoch only when not 0).
func (v Version) String() string {
	s := v.Upstream
	if v.Epoch != 0 {
		s = strconv.Itoa(v.Epoch) + ":" + s
	}
	if v.Revision != "" {
		s += "-" + v.Revision
	}
	return s
}

// Compare orders a and b as dpkg --compare-versions does: -1, 0 or 1.
// Epochs first, then the upstream parts, then the revisions, each by
// verrevcmp.
func Compare(a, b Version) int {
	switch {
	case a.Epoch < b.Epoch:
		return -1
	case a.Epoch > b.Epoch:
		return 1
	}
	if c := verrevcmp(a.Upstream, b.Upstream); c != 0 {
		return c
	}
	return verrevcmp(a.Revision, b.Revision)
}

// Less reports a < b in dpkg's order.
func (v Version) Less(b Version) bool { return Compare(v, b) < 0 }

// order is a character's weight in a non-digit part (dpkg's order()):
// '~' before the end of the part, the end before letters, letters (by
// ASCII) before every other character.
func order(c byte, end bool) int {
	switch {
	case end || isDigit(c):
		return 0
	case isAlpha(c):
		return int(c)
	case c == '~':
		return -1
	}
	return int(c) + 256
}

// verrevcmp is dpkg's: alternately a non-digit part compared character by
// character by order, then a digit part compared as a number (leading
// zeros ignored).
func verrevcmp(a, b string) int {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		for i < len(a) && !isDigit(a[i]) || j < len(b) && !isDigit(b[j]) {
			var ca, cb byte
			if i < len(a) {
				ca = a[i]
			}
			if j < len(b) {
				cb = b[j]
			}
			oa, ob := order(ca, i >= len(a)), order(cb, j >= len(b))
			if oa != ob {
				return sign(oa - ob)
			}
			i++
			j++
		}
		for i < len(a) && a[i] == '0' {
			i++
		}
		for j < len(b) && b[j] == '0' {
			j++
		}
		first := 0
		for i < len(a) && isDigit(a[i]) && j < len(b) && isDigit(b[j]) {
			if first == 0 {
				first = int(a[i]) - int(b[j])
			}
			i++
			j++
		}
		if i < len(a) && isDigit(a[i]) {
			return 1
		}
		if j < len(b) && isDigit(b[j]) {
			return -1
		}
		if first != 0 {
			return sign(first)
		}
	}
	return 0
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isAlnum(c byte) bool { return isDigit(c) || isAlpha(c) }
