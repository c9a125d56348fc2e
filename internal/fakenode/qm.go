package fakenode

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// QMCalls returns the argv (without "qm") of every call of the qm double
// (internal/fakenode/doubles/qm) on this node, oldest first.
func (n *Node) QMCalls(t testing.TB) [][]string {
	t.Helper()
	return ArgvLog(t, filepath.Join(n.Root, "var/log/qm-double.log"))
}

// ArgvLog reads a log of command lines, one JSON array of strings a line
// (what the doubles write); a missing log is no call.
func ArgvLog(t testing.TB, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var argv []string
		if err := json.Unmarshal(sc.Bytes(), &argv); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, argv)
	}
	return out
}

// SetQMFault makes every later call of the qm double print message on stderr
// and exit with code, changing nothing (code 0 removes the fault).
func (n *Node) SetQMFault(t testing.TB, code int, message string) {
	t.Helper()
	p := filepath.Join(n.Root, "var/lib/qm-double/fault")
	if code == 0 {
		_ = os.Remove(p)
		return
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("exit "+itoa(code)+" "+message+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// RaceQM makes the qm double run each argv (another admin's qm call), one
// before each of its next calls: the other admin's change lands between the
// caller's read of the config and its own qm call.
func (n *Node) RaceQM(t testing.TB, argvs ...[]string) {
	t.Helper()
	p := filepath.Join(n.Root, "var/lib/qm-double/race")
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	var b []byte
	for _, a := range argvs {
		line, _ := json.Marshal(a)
		b = append(append(b, line...), '\n')
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
