package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

// Answer is one node's part of a run over the cluster.
type Answer struct {
	Node    Member
	Status  Status
	Reply   *Reply     // what the node answered; nil when it did not
	Err     *NodeError // why the node did not take part (Status != Answered)
	Elapsed time.Duration
	// ConfigOnly is what this node answered for a node that did not
	// answer, from that node's configs in pmxcfs (check's config rules).
	ConfigOnly *Reply
}

// AskFunc asks one node; ctx carries that node's own deadline.
type AskFunc func(ctx context.Context, m Member) (*Reply, error)

// Ask asks every online node at once, each within its own deadline, and
// returns one answer per node in the order given. An offline node is not
// asked; a node that does not answer in time is unreachable, and the others
// are still answered.
func Ask(ctx context.Context, nodes []Member, deadline time.Duration, ask AskFunc) []Answer {
	out := make([]Answer, len(nodes))
	var wg sync.WaitGroup
	for i, m := range nodes {
		out[i].Node = m
		if !m.Online {
			out[i].fail(&NodeError{Node: m.Name, Status: Offline, Msg: "offline in " + MembersFile + ": not asked"})
			continue
		}
		wg.Add(1)
		go func(a *Answer) {
			defer wg.Done()
			nctx, cancel := context.WithTimeout(ctx, deadline)
			defer cancel()
			t0 := time.Now()
			r, err := ask(nctx, a.Node)
			a.Elapsed = time.Since(t0)
			a.settle(r, err, nctx.Err() != nil && ctx.Err() == nil)
		}(&out[i])
	}
	wg.Wait()
	return out
}

// settle files what ask returned; late says the node's own deadline passed.
func (a *Answer) settle(r *Reply, err error, late bool) {
	var ne *NodeError
	switch {
	case errors.As(err, &ne):
		a.fail(ne)
	case err != nil && late:
		a.fail(&NodeError{Node: a.Node.Name, Status: Unreachable, Msg: "no answer within its deadline: " + err.Error()})
	case err != nil:
		a.fail(&NodeError{Node: a.Node.Name, Status: Unreachable, Msg: err.Error()})
	case r == nil:
		a.fail(&NodeError{Node: a.Node.Name, Status: Unreachable, Msg: "no answer"})
	case r.Exit > int(exitcode.Problem):
		a.Reply = r
		msg := r.Message()
		if msg == "" {
			msg = "pvediskcheck exited with status " + itoa(r.Exit)
		}
		a.fail(&NodeError{Node: a.Node.Name, Status: Failed, Msg: msg, Version: r.Version})
	default:
		a.Reply, a.Status = r, Answered
	}
}

func (a *Answer) fail(e *NodeError) { a.Status, a.Err = e.Status, e }

// FromConfigs fills in, for each node that did not answer (local aside),
// what this node answers for it from that node's configs (ask, each within
// deadline): check's config rules for its VMs. An answer that did not come
// from a run that judged them (exit 2 or 3) is left out.
func FromConfigs(ctx context.Context, answers []Answer, local string, deadline time.Duration, ask AskFunc) {
	for i := range answers {
		a := &answers[i]
		if a.Status == Answered || a.Node.Name == local {
			continue
		}
		nctx, cancel := context.WithTimeout(ctx, deadline)
		r, err := ask(nctx, a.Node)
		cancel()
		if err == nil && r.Exit <= int(exitcode.Problem) {
			a.ConfigOnly = r
		}
	}
}

// Exit is the exit code of a run over the cluster: 3 when any node did not
// answer (the others are still reported), else 1 when any node found a
// problem, else 0.
func Exit(answers []Answer) exitcode.Code {
	code := exitcode.OK
	for _, a := range answers {
		switch {
		case a.Status != Answered:
			return exitcode.Unreachable
		case a.Reply.Exit == int(exitcode.Problem):
			code = exitcode.Problem
		}
	}
	return code
}

// Err is the error of a run over the cluster, as Exit decides: exit 3
// naming every node that did not answer and why, else ErrProblem when a
// node found a problem, else nil.
func Err(answers []Answer) error {
	code := Exit(answers)
	if code == exitcode.OK {
		return nil
	}
	if code == exitcode.Problem {
		return exitcode.ErrProblem
	}
	var parts []string
	for _, a := range answers {
		if a.Status != Answered {
			parts = append(parts, fmt.Sprintf("%s %s (%s)", a.Node.Name, a.Status, a.Err.Msg))
		}
	}
	return exitcode.Unreachablef("node(s) that did not answer: %s", strings.Join(parts, "; "))
}

// DeadlineTimeouts is how many --timeout a node's answer may take beyond
// the command's own measurement windows: SSH connects and authenticates,
// then the command makes its exchanges, each bounded by --timeout (check
// --all works through its VMs 8 at a time; 30 VMs whose sockets all hang
// take 4 rounds).
const DeadlineTimeouts = 6

// Deadline bounds one node's answer: DeadlineTimeouts x timeout plus the
// command's windows (--for, --wait, --trim-timeout).
func Deadline(timeout time.Duration, windows ...time.Duration) time.Duration {
	d := DeadlineTimeouts * timeout
	for _, w := range windows {
		d += w
	}
	return d
}
