//go:build integration

package dpkg

import (
	"os/exec"
	"testing"
)

// TestDpkgAgrees asks dpkg itself: for every two versions of the tables
// (and the advisory table's kind of versions), dpkg --compare-versions
// must say what Compare says.
func TestDpkgAgrees(t *testing.T) {
	if _, err := exec.LookPath("dpkg"); err != nil {
		t.Skip("no dpkg on this machine")
	}
	seen := map[string]bool{}
	var vs []string
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			vs = append(vs, s)
		}
	}
	for _, c := range versionPairs {
		add(c.a)
		add(c.b)
	}
	for _, c := range equalPairs {
		add(c.a)
		add(c.b)
	}
	for _, s := range []string{"6.0.0-2", "7.0.0-1", "7.2.0-4", "7.2.10-1", "8.0.2-7", "8.1.2-5", "8.1.5-2", "10.1.2-7", "10.2.1-1", "11.0.0-2", "1.0~~~", "1.0-1~", "1.0-1~~", "1.0+~", "1.0.a", "1.0.~"} {
		add(s)
	}
	// One question per ordered pair: a < b. Asked both ways it also says
	// equal (neither) and greater.
	for _, a := range vs {
		for _, b := range vs {
			if a == b {
				continue
			}
			want := Compare(mustParse(t, a), mustParse(t, b)) < 0
			if got := exec.Command("dpkg", "--compare-versions", a, "lt", b).Run() == nil; got != want {
				t.Errorf("dpkg --compare-versions %s lt %s: dpkg says %v, Compare %v", a, b, got, want)
			}
		}
	}
}
