package cluster

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

func TestAsk(t *testing.T) {
	nodes := []Member{
		{Name: "a", Online: true}, {Name: "b", Online: true}, {Name: "c"}, {Name: "d", Online: true},
		{Name: "e", Online: true}, {Name: "f", Online: true}, {Name: "g", Online: true}, {Name: "h", Online: true}, {Name: "i", Online: true},
	}
	var asked atomic.Int32
	started := make(chan struct{}, len(nodes))
	ask := func(ctx context.Context, m Member) (*Reply, error) {
		asked.Add(1)
		started <- struct{}{}
		switch m.Name {
		case "a":
			return &Reply{Node: "a", Version: "1", Exit: 0}, nil
		case "b":
			return &Reply{Node: "b", Version: "1", Exit: 1}, nil
		case "d":
			<-ctx.Done() // never answers: its own deadline ends it
			return nil, ctx.Err()
		case "e":
			return nil, &NodeError{Node: "e", Status: NotInstalled, Msg: "not there"}
		case "f":
			return nil, errors.New("boom")
		case "g":
			return nil, nil
		case "h":
			return &Reply{Node: "h", Version: "2", Exit: 3, Stderr: "pvediskcheck: lvs timed out\n"}, nil
		}
		return &Reply{Node: "i", Version: "2", Exit: 2}, nil
	}
	t0 := time.Now()
	got := Ask(context.Background(), nodes, 300*time.Millisecond, ask)
	if d := time.Since(t0); d > 3*time.Second {
		t.Errorf("took %s: the nodes were not asked at the same time", d)
	}
	if asked.Load() != 8 {
		t.Errorf("asked %d nodes, want 8 (c is offline)", asked.Load())
	}
	want := []struct {
		st  Status
		msg string
	}{
		{Answered, ""}, {Answered, ""}, {Offline, "offline in /etc/pve/.members: not asked"},
		{Unreachable, "no answer within its deadline: context deadline exceeded"},
		{NotInstalled, "not there"}, {Unreachable, "boom"}, {Unreachable, "no answer"},
		{Failed, "lvs timed out"}, {Failed, "pvediskcheck exited with status 2"},
	}
	for i, w := range want {
		a := got[i]
		if a.Node != nodes[i] || a.Status != w.st {
			t.Errorf("%s: status %s, want %s", nodes[i].Name, a.Status, w.st)
		}
		if (a.Err == nil) != (w.msg == "") || a.Err != nil && (a.Err.Msg != w.msg || a.Err.Node != nodes[i].Name || a.Err.Status != w.st) {
			t.Errorf("%s: err %+v, want %q", nodes[i].Name, a.Err, w.msg)
		}
	}
	if got[0].Reply == nil || got[1].Reply.Exit != 1 || got[7].Reply == nil || got[7].Err.Version != "2" || got[3].Reply != nil {
		t.Errorf("replies: %+v %+v %+v", got[0], got[1], got[7])
	}
	if got[2].Elapsed != 0 || got[3].Elapsed < 300*time.Millisecond {
		t.Errorf("elapsed: offline %s, late %s", got[2].Elapsed, got[3].Elapsed)
	}
}

// When the whole run is cancelled, a node's error is not blamed on its
// own deadline.
func TestAskCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	got := Ask(ctx, []Member{{Name: "a", Online: true}}, time.Minute, func(ctx context.Context, m Member) (*Reply, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	if got[0].Status != Unreachable || got[0].Err.Msg != "context canceled" {
		t.Errorf("%+v", got[0].Err)
	}
}

func TestExit(t *testing.T) {
	ok := func(exit int) Answer { return Answer{Status: Answered, Reply: &Reply{Exit: exit}} }
	cases := []struct {
		answers []Answer
		want    exitcode.Code
	}{
		{nil, exitcode.OK},
		{[]Answer{ok(0), ok(0)}, exitcode.OK},
		{[]Answer{ok(0), ok(1)}, exitcode.Problem},
		{[]Answer{ok(1), {Status: Offline}}, exitcode.Unreachable},
		{[]Answer{{Status: BadReply}, ok(1)}, exitcode.Unreachable},
		{[]Answer{{Status: Failed, Reply: &Reply{Exit: 3}}}, exitcode.Unreachable},
	}
	for i, c := range cases {
		if got := Exit(c.answers); got != c.want {
			t.Errorf("case %d: %d, want %d", i, got, c.want)
		}
	}
}

func TestDeadline(t *testing.T) {
	if d := Deadline(5 * time.Second); d != 30*time.Second {
		t.Errorf("Deadline(5s) = %s", d)
	}
	if d := Deadline(time.Second, 10*time.Second, 2*time.Minute); d != 136*time.Second {
		t.Errorf("Deadline(1s, 10s, 2m) = %s", d)
	}
}

// Err: nil, ErrProblem, or exit 3 naming every node that did not answer
// with its status and why, in order, and none that did.
func TestErr(t *testing.T) {
	ok := func(name string, exit int) Answer {
		return Answer{Node: Member{Name: name}, Status: Answered, Reply: &Reply{Exit: exit}}
	}
	failed := func(name string, st Status, msg string) Answer {
		return Answer{Node: Member{Name: name}, Status: st, Err: &NodeError{Node: name, Status: st, Msg: msg}}
	}
	if err := Err([]Answer{ok("pve1", 0), ok("pve2", 0)}); err != nil {
		t.Errorf("all answered, nothing found: %v", err)
	}
	if err := Err(nil); err != nil {
		t.Errorf("no nodes: %v", err)
	}
	if err := Err([]Answer{ok("pve1", 0), ok("pve2", 1)}); err != exitcode.ErrProblem {
		t.Errorf("a problem: %v", err)
	}
	err := Err([]Answer{ok("pve1", 1), failed("pve2", Offline, "offline in .members: not asked"), ok("pve3", 0), failed("pve4", BadReply, "printed garbage")})
	want := "node(s) that did not answer: pve2 offline (offline in .members: not asked); pve4 bad-reply (printed garbage)"
	if exitcode.Of(err) != exitcode.Unreachable || exitcode.Message(err) != want {
		t.Errorf("%v (exit %d), want %q", err, exitcode.Of(err), want)
	}
}

// FromConfigs asks this node for every node that did not answer (not for
// itself), each within the deadline, and keeps what a run that judged the
// configs answered (exit 0 or 1).
func TestFromConfigs(t *testing.T) {
	down := func(name string, st Status) Answer {
		return Answer{Node: Member{Name: name}, Status: st, Err: &NodeError{Node: name, Status: st}}
	}
	answers := []Answer{down("pve1", Unreachable), {Node: Member{Name: "pve2"}, Status: Answered, Reply: &Reply{}},
		down("pve3", Unreachable), down("pve4", Offline), down("pve5", BadReply), down("pve6", Failed), down("pve7", OtherVersion)}
	replies := map[string]*Reply{"pve3": {Exit: 1, Stdout: "3"}, "pve4": {Exit: 3}, "pve6": {Exit: 2}, "pve7": {Exit: 0, Stdout: "7"}}
	var asked []string
	FromConfigs(context.Background(), answers, "pve1", time.Minute, func(ctx context.Context, m Member) (*Reply, error) {
		asked = append(asked, m.Name)
		if d, ok := ctx.Deadline(); !ok || time.Until(d) > time.Minute {
			t.Errorf("%s: deadline %v %v", m.Name, d, ok)
		}
		if m.Name == "pve5" {
			return nil, errors.New("boom")
		}
		return replies[m.Name], nil
	})
	if strings.Join(asked, " ") != "pve3 pve4 pve5 pve6 pve7" {
		t.Errorf("asked %v", asked)
	}
	var kept []string
	for _, a := range answers {
		if a.ConfigOnly != nil {
			kept = append(kept, a.Node.Name+":"+a.ConfigOnly.Stdout)
		}
	}
	if strings.Join(kept, " ") != "pve3:3 pve7:7" {
		t.Errorf("kept %v", kept)
	}
}
