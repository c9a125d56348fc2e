package dpkg

import (
	"errors"
	"testing"
)

// versionPairs are ordered pairs a < b by deb-version(7)'s rules, each
// named for the rule it holds; TestDpkgAgrees (integration) asks dpkg
// --compare-versions about every pair of the list too.
var versionPairs = []struct{ rule, a, b string }{
	{"the epoch decides first", "9.2.0-7", "1:0.1"},
	{"an explicit epoch 0 is no epoch: compare the rest", "0:1.0-1", "1.0-2"},
	{"epochs compare as numbers", "2:1.0", "10:0.1"},
	{"digit parts compare as numbers, not as text", "9.2.0-7", "10.0.2-1"},
	{"digit parts compare as numbers in the revision", "10.2.1-2", "10.2.1-10"},
	{"upstream before revision", "10.2.1-9", "11.0.0-1"},
	{"the revision decides where upstream is equal", "10.2.1-1", "10.2.1-2"},
	{"'~' sorts before the end of a part", "1.0~rc1", "1.0"},
	{"'~~' before '~'", "1.0~~", "1.0~"},
	{"'~~a' before '~'", "1.0~~a", "1.0~"},
	{"'~' before a letter", "1.0~", "1.0a"},
	{"the end of a part before a letter", "1.0", "1.0a"},
	{"letters before other characters", "1.0a", "1.0+"},
	{"letters by ASCII", "1.0A", "1.0a"},
	{"'z' is a letter: before other characters", "1.0z", "1.0+"},
	{"'Z' is a letter: before other characters", "1.0Z", "1.0+"},
	{"epoch 9 is a number", "8:2.0", "9:1.0"},
	{"'+' after the end: a rebuild is newer", "7.2+dfsg-7+deb12u18", "7.2+dfsg-7+deb12u18+b3"},
	{"a backport (~bpo) is older than the release it backports", "1:11.1.3+ds-1~bpo13+1", "1:11.1.3+ds-1"},
	{"a security update is newer", "1:7.2+dfsg-7+deb12u7", "1:7.2+dfsg-7+deb12u18+b3"},
	{"+pveN orders after the plain version", "2.9.1-9", "2.9.1-9+pve1"},
	{"~pveN orders before the plain version", "2.9.1-9~pve4", "2.9.1-9"},
	{"hyphens in upstream: the last one starts the revision", "1.0-2-3", "1.0-2-4"},
	{"a longer digit part is larger", "1.9", "1.10"},
	{"more parts after an equal prefix are newer", "1.0", "1.0.1"},
	{"a dot is a non-letter: after the end", "1", "1.0"},
	{"a revision of 1 is newer than none (none is 0)", "1.0", "1.0-1"},
	{"Debian's QEMU: dfsg repack", "1:7.2+dfsg-7", "1:7.2+dfsg-7+deb12u1"},
}

// equalPairs are versions dpkg orders equal.
var equalPairs = []struct{ rule, a, b string }{
	{"no epoch is epoch 0", "1.0-1", "0:1.0-1"},
	{"leading zeros of a digit part are ignored", "1.001", "1.1"},
	{"no revision is revision 0", "1.0", "1.0-0"},
	{"a zero revision with leading zeros", "1.0-00", "1.0"},
	{"the same build", "10.2.1-1", "10.2.1-1"},
}

func mustParse(t *testing.T, s string) Version {
	t.Helper()
	v, err := ParseVersion(s)
	if err != nil {
		t.Fatalf("ParseVersion(%q): %v", s, err)
	}
	return v
}

func TestCompare(t *testing.T) {
	for _, c := range versionPairs {
		a, b := mustParse(t, c.a), mustParse(t, c.b)
		if Compare(a, b) != -1 || Compare(b, a) != 1 || !a.Less(b) || b.Less(a) {
			t.Errorf("%s: %s < %s: Compare %d, reverse %d", c.rule, c.a, c.b, Compare(a, b), Compare(b, a))
		}
		if Compare(a, a) != 0 || Compare(b, b) != 0 {
			t.Errorf("%s: a version is not equal to itself", c.rule)
		}
	}
	for _, c := range equalPairs {
		a, b := mustParse(t, c.a), mustParse(t, c.b)
		if Compare(a, b) != 0 || Compare(b, a) != 0 || a.Less(b) || b.Less(a) {
			t.Errorf("%s: %s == %s: Compare %d", c.rule, c.a, c.b, Compare(a, b))
		}
	}
}

func TestParseVersion(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Version
		str  string
	}{
		{"11.0.0-1", Version{0, "11.0.0", "1"}, "11.0.0-1"},
		{"1:7.2+dfsg-7+deb12u18+b3", Version{1, "7.2+dfsg", "7+deb12u18+b3"}, "1:7.2+dfsg-7+deb12u18+b3"},
		{"0:1.0", Version{0, "1.0", ""}, "1.0"},
		{"1.0-2-3", Version{0, "1.0-2", "3"}, "1.0-2-3"},
		{" 2.9.1-9~pve4\n", Version{0, "2.9.1", "9~pve4"}, "2.9.1-9~pve4"},
		{"1:2:3-4", Version{1, "2:3", "4"}, "1:2:3-4"},
		{"5", Version{0, "5", ""}, "5"},
	} {
		got, err := ParseVersion(c.in)
		if err != nil || got != c.want || got.String() != c.str {
			t.Errorf("ParseVersion(%q) = %+v %q, %v; want %+v %q", c.in, got, got.String(), err, c.want, c.str)
		}
	}
	for _, bad := range []string{
		"", "   ", ":1.0", "a:1.0", "-1:1.0", "99999999999:1.0", "1:", "1.0-", "a1.0", "1.0 1", "1.0_1", "1.0-1_2", "1:~1", "-1",
		"1.0-1:2", // a colon in the revision
	} {
		if v, err := ParseVersion(bad); !errors.Is(err, ErrVersion) {
			t.Errorf("ParseVersion(%q) = %+v, %v; want ErrVersion", bad, v, err)
		}
	}
}
