package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// ReplyFlag is the global flag that makes pvediskcheck answer another node:
// `pvediskcheck --cluster-reply=NODE ...` runs the command here, never
// forwards it, and prints one Reply. NODE is the node the caller meant to
// reach; any other node refuses before it does anything.
const ReplyFlag = "cluster-reply"

// ReplyFormat is the version of the Reply document; fields are only added.
const ReplyFormat = 1

// Reply is what a node prints when another node asks it: the command's own
// output and exit code, and who answered.
type Reply struct {
	Format  int    `json:"pvediskcheck_reply"` // ReplyFormat
	Version string `json:"version"`            // the answering pvediskcheck's version
	Node    string `json:"node"`               // the node that answered
	Exit    int    `json:"exit"`               // the command's exit code, 0-3
	Stdout  string `json:"stdout"`             // what the command printed (a JSON document with --json)
	Stderr  string `json:"stderr"`             // its error line, if any
}

// Encode writes the reply as one JSON line.
func (r Reply) Encode() []byte {
	r.Format = ReplyFormat
	b, _ := json.Marshal(r)
	return append(b, '\n')
}

// Message is the reply's error line without the program's prefix.
func (r Reply) Message() string {
	return strings.TrimPrefix(strings.TrimSpace(r.Stderr), "pvediskcheck: ")
}

// Err is what the reply of a forwarded command stands for, with its exit
// code: nil for 0; the node's error line (its own "VM 370: " prefix
// replaced by g's "VM 370 on pve2: "), or what its exit status says
// (ErrProblem for a problem it did not explain).
func (r Reply) Err(g Guest) error {
	if r.Exit == 0 {
		return nil
	}
	msg := strings.TrimPrefix(r.Message(), fmt.Sprintf("VM %d: ", g.VMID))
	if msg == "" && r.Exit == int(exitcode.Problem) {
		return exitcode.ErrProblem
	}
	if msg == "" {
		msg = "exited with status " + strconv.Itoa(r.Exit)
	}
	return &exitcode.Error{Code: exitcode.Code(r.Exit), Msg: g.String() + ": " + msg}
}

// Status is how a node took part in a cluster run.
type Status string

// Node statuses (README "JSON schemas": check --cluster, thin --cluster).
const (
	Answered     Status = "ok"            // it answered (whatever its findings)
	Offline      Status = "offline"       // offline in .members: not asked
	Unreachable  Status = "unreachable"   // SSH did not reach it, or no answer within its deadline
	Failed       Status = "failed"        // pvediskcheck ran there and could not do what was asked
	BadReply     Status = "bad-reply"     // it printed something that is not a pvediskcheck reply
	OtherVersion Status = "other-version" // its pvediskcheck is too old to answer another node
	NotInstalled Status = "not-installed" // no pvediskcheck on root's PATH there
)

// NodeError is why a node did not answer; it carries exit code 3.
type NodeError struct {
	Node   string
	Status Status
	Msg    string
	// Version is the node's pvediskcheck version when known.
	Version string
}

func (e *NodeError) Error() string { return e.Node + ": " + e.Msg }

// ExitCode: a node that did not answer is something the tool could not reach.
func (e *NodeError) ExitCode() exitcode.Code { return exitcode.Unreachable }

// maxEcho bounds what is quoted of a node's unreadable output.
const maxEcho = 80

// ParseReply reads what running pvediskcheck on a node produced: stdout
// and the runner's error (a *node.CommandError for a non-zero exit status,
// which is how ssh passes the remote exit status on, 255 for its own
// failures). want is the node that was asked.
func ParseReply(want string, stdout []byte, runErr error) (*Reply, error) {
	fail := func(st Status, format string, a ...any) (*Reply, error) {
		return nil, &NodeError{Node: want, Status: st, Msg: fmt.Sprintf(format, a...)}
	}
	var r Reply
	// The reply is the last line; a login script on the node may have
	// printed something before it.
	lines := bytes.Split(bytes.TrimSpace(stdout), []byte("\n"))
	if err := json.Unmarshal(lines[len(lines)-1], &r); err == nil && r.Format >= 1 {
		if r.Node != want {
			return fail(BadReply, "answered as node %s: %s", units.Clip(r.Node, 40), r.Message())
		}
		if r.Exit < 0 || r.Exit > 3 {
			return fail(BadReply, "answered with exit code %d", r.Exit)
		}
		return &r, nil
	}
	var ce *node.CommandError
	switch {
	case errors.Is(runErr, node.ErrTimeout):
		return fail(Unreachable, "no answer: %v", runErr)
	case errors.As(runErr, &ce) && ce.Status == 255:
		return fail(Unreachable, "%s", firstLine(ce.Stderr, "ssh failed with status 255"))
	case errors.As(runErr, &ce) && ce.Status == 127:
		return fail(NotInstalled, "pvediskcheck is not installed there (%s)", firstLine(ce.Stderr, "command not found"))
	case errors.As(runErr, &ce) && strings.Contains(ce.Stderr, ReplyFlag):
		return fail(OtherVersion, "its pvediskcheck is too old to answer another node (%s)", firstLine(ce.Stderr, ""))
	case runErr != nil && !errors.As(runErr, &ce):
		return fail(Unreachable, "%v", runErr)
	}
	echo := stdout
	if len(bytes.TrimSpace(echo)) == 0 && ce != nil {
		echo = []byte(ce.Stderr)
	}
	return fail(BadReply, "printed something that is not a pvediskcheck reply: %s", units.Clip(strings.TrimSpace(string(echo)), maxEcho))
}

func firstLine(s, otherwise string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if s = strings.TrimSpace(s); s == "" {
		return otherwise
	}
	return units.Line(s, 200)
}

// ParseVersion reads `pvediskcheck --version` ("pvediskcheck version X").
func ParseVersion(out []byte) (string, bool) {
	f := strings.Fields(string(out))
	if len(f) == 3 && f[0] == "pvediskcheck" && f[1] == "version" {
		return f[2], true
	}
	return "", false
}
