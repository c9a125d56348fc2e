package fakenode

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/pveoracle"
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

// QMOracleSocket names the file below the node's root that holds the path
// of the unix socket where the qm double puts each call to Proxmox's
// update_vm, served by the test process from its one pveoracle batch
// process (a request costs tens of ms, where a double starting the oracle
// itself pays about a second). The socket lives in a short temporary
// folder: a test's root can be longer than a socket's 107 bytes.
const QMOracleSocket = "var/lib/qm-double/oracle"

// QMOracleAnswer is one answer on QMOracleSocket (QmSetResult's own JSON
// is Perl's, where accepted is 1 or "").
type QMOracleAnswer struct {
	Accepted bool                  `json:"accepted_bool"`
	Result   pveoracle.QmSetResult `json:"result"`
}

// serveQMOracle answers the qm double's requests (one JSON QmSetRequest
// line in, one JSON QmSetResult line out, a connection each) from the test
// binary's oracle, until the test ends. Without the oracle beside the
// checkout nothing is served and the double judges by its own reading.
func (n *Node) serveQMOracle(t testing.TB) { ServeQMOracle(t, n.Root) }

// ServeQMOracle serves the qm double's requests to Proxmox's update_vm below
// root (a tree laid out without a Node) until the test ends.
func ServeQMOracle(t testing.TB, root string) {
	dir := pveoracle.Find()
	if dir == "" {
		return
	}
	o := pveoracle.For(t)
	p := filepath.Join(root, QMOracleSocket)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp("", "qmo")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(tmp, "s")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); os.RemoveAll(tmp) })
	if err := os.WriteFile(p, []byte(sock), 0o644); err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
				line, err := bufio.NewReader(c).ReadBytes('\n')
				if err != nil {
					return
				}
				var req pveoracle.QmSetRequest
				if json.Unmarshal(line, &req) != nil {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				res, err := o.QmSet(ctx, req)
				if err != nil {
					res = pveoracle.QmSetResult{Error: pveoracle.Text("oracle: " + err.Error()), StubCalls: []string{"(the oracle failed)"}}
				}
				b, _ := json.Marshal(QMOracleAnswer{Accepted: res.Accepted, Result: res})
				_, _ = c.Write(append(b, '\n'))
			}()
		}
	}()
}
