package cluster

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
)

func TestReplyRoundTrip(t *testing.T) {
	r := Reply{Version: "0.1.0-1", Node: "pve2", Exit: 1, Stdout: "{\"vms\": []}\n", Stderr: "pvediskcheck: VM 380: busy\n"}
	b := r.Encode()
	if strings.Count(string(b), "\n") != 1 || !strings.HasPrefix(string(b), `{"pvediskcheck_reply":1,`) {
		t.Errorf("Encode = %s", b)
	}
	got, err := ParseReply("pve2", b, nil)
	r.Format = ReplyFormat
	if err != nil || *got != r {
		t.Fatalf("ParseReply = %+v, %v", got, err)
	}
	if got.Message() != "VM 380: busy" {
		t.Errorf("Message = %q", got.Message())
	}
	// A login script that prints before the reply does not spoil it.
	got, err = ParseReply("pve2", append([]byte("Welcome\nto pve2\n"), b...), &node.CommandError{Argv: []string{"ssh"}, Status: 1})
	if err != nil || got.Exit != 1 {
		t.Errorf("with a banner: %+v, %v", got, err)
	}
	// Every exit code of the contract is an answer.
	for _, exit := range []int{0, 1, 2, 3} {
		got, err := ParseReply("pve2", Reply{Node: "pve2", Exit: exit}.Encode(), nil)
		if err != nil || got.Exit != exit {
			t.Errorf("exit %d: %+v, %v", exit, got, err)
		}
	}
}

func TestParseReplyFailures(t *testing.T) {
	ok := string(Reply{Version: "1", Node: "pve2"}.Encode())
	cmdErr := func(status int, stderr string) error {
		return &node.CommandError{Argv: []string{"/usr/bin/ssh"}, Status: status, Stderr: stderr}
	}
	cases := []struct {
		name   string
		stdout string
		err    error
		status Status
		msg    string
	}{
		{"other node", string(Reply{Version: "1", Node: "pve3", Exit: 3, Stderr: "pvediskcheck: this is node pve3, not pve2\n"}.Encode()), cmdErr(3, ""), BadReply, "answered as node \"pve3\": this is node pve3, not pve2"},
		{"exit 4", string(Reply{Version: "1", Node: "pve2", Exit: 4}.Encode()), nil, BadReply, "answered with exit code 4"},
		{"exit -1", string(Reply{Version: "1", Node: "pve2", Exit: -1}.Encode()), nil, BadReply, "answered with exit code -1"},
		{"format 0", `{"pvediskcheck_reply":0,"node":"pve2"}`, nil, BadReply, "not a pvediskcheck reply: \"{\\\"pvediskcheck_reply\\\":0"},
		{"timeout", "", fmt.Errorf("ssh: %w after 30s", node.ErrTimeout), Unreachable, "no answer: ssh: timed out after 30s"},
		{"ssh 255", "", cmdErr(255, "\nssh: connect to host 10.0.0.3 port 22: Connection refused\r\nmore\n"), Unreachable, "ssh: connect to host 10.0.0.3 port 22: Connection refused"},
		{"ssh 255 silent", "", cmdErr(255, ""), Unreachable, "ssh failed with status 255"},
		// ssh passes on what the other end printed (a login banner, a
		// ProxyCommand): escape sequences and control characters are shown
		// escaped, never sent to the admin's terminal.
		{"ssh 255 escapes", "", cmdErr(255, "\x1b]0;owned\x07\x1b[2J\x1b[31mssh: Could not resolve hostname pve3\x1b[0m\x00\n"), Unreachable, `\x1b]0;owned\a\x1b[2J\x1b[31mssh: Could not resolve hostname pve3\x1b[0m\x00`},
		{"not installed escapes", "", cmdErr(127, "bash: \x1b[1mpvediskcheck\x1b[0m: command not found\n"), NotInstalled, `(bash: \x1b[1mpvediskcheck\x1b[0m: command not found)`},
		{"not installed", "", cmdErr(127, "bash: line 1: pvediskcheck: command not found\n"), NotInstalled, "pvediskcheck is not installed there (bash: line 1: pvediskcheck: command not found)"},
		{"not installed silent", "", cmdErr(127, ""), NotInstalled, "(command not found)"},
		{"old version", "", cmdErr(2, string(fixture(t, "old-version-stderr.txt"))), OtherVersion, "too old to answer another node (pvediskcheck: flag provided but not defined: -cluster-reply)"},
		{"no ssh", "", errors.New("/usr/bin/ssh: no such file"), Unreachable, "/usr/bin/ssh: no such file"},
		{"garbage", "Segmentation fault\n", nil, BadReply, `not a pvediskcheck reply: "Segmentation fault"`},
		{"garbage on stderr", "", cmdErr(1, "oops"), BadReply, `not a pvediskcheck reply: "oops"`},
		{"long garbage", strings.Repeat("x", 500), nil, BadReply, "... (500 bytes)"},
		{"reply cut", ok[:len(ok)/2], cmdErr(1, ""), BadReply, "not a pvediskcheck reply"},
	}
	for _, c := range cases {
		r, err := ParseReply("pve2", []byte(c.stdout), c.err)
		var ne *NodeError
		if r != nil || !errors.As(err, &ne) {
			t.Errorf("%s: %+v, %v", c.name, r, err)
			continue
		}
		if ne.Node != "pve2" || ne.Status != c.status || !strings.Contains(ne.Msg, c.msg) {
			t.Errorf("%s: %+v, want %s with %q", c.name, ne, c.status, c.msg)
		}
		if strings.ContainsFunc(ne.Msg, unicode.IsControl) {
			t.Errorf("%s: a control character in %q", c.name, ne.Msg)
		}
		if err.Error() != "pve2: "+ne.Msg || exitcode.Of(err) != exitcode.Unreachable {
			t.Errorf("%s: %q exit %d", c.name, err.Error(), exitcode.Of(err))
		}
	}
}

func TestParseVersion(t *testing.T) {
	for in, want := range map[string]string{"pvediskcheck version 0.1.0-1\n": "0.1.0-1", "pvediskcheck version dev": "dev"} {
		if v, ok := ParseVersion([]byte(in)); !ok || v != want {
			t.Errorf("%q: %q %v", in, v, ok)
		}
	}
	for _, in := range []string{"", "pvediskcheck version", "other version 1", "pvediskcheck release 1", "pvediskcheck version 1 2"} {
		if v, ok := ParseVersion([]byte(in)); ok {
			t.Errorf("%q read as %q", in, v)
		}
	}
}

// A forwarded command's reply: its exit code kept, its message named for
// the VM where it runs.
func TestReplyErr(t *testing.T) {
	g := Guest{VMID: 380, Node: "pve2", Type: QEMU}
	cases := []struct {
		r    Reply
		code exitcode.Code
		msg  string
	}{
		{Reply{Exit: 0, Stderr: "pvediskcheck: ignored\n"}, exitcode.OK, ""},
		{Reply{Exit: 1}, exitcode.Problem, ""},
		{Reply{Exit: 1, Stderr: "pvediskcheck: VM 380: flushes ignored\n"}, exitcode.Problem, "VM 380 on pve2: flushes ignored"},
		{Reply{Exit: 2, Stderr: "pvediskcheck: VM 380: no such disk scsi9\n"}, exitcode.Usage, "VM 380 on pve2: no such disk scsi9"},
		{Reply{Exit: 3, Stderr: "pvediskcheck: VM 381: not running\n"}, exitcode.Unreachable, "VM 380 on pve2: VM 381: not running"},
		{Reply{Exit: 3, Stderr: "  \n"}, exitcode.Unreachable, "VM 380 on pve2: exited with status 3"},
		{Reply{Exit: 2}, exitcode.Usage, "VM 380 on pve2: exited with status 2"},
	}
	for _, c := range cases {
		err := c.r.Err(g)
		if exitcode.Of(err) != c.code || exitcode.Message(err) != c.msg {
			t.Errorf("%+v: %v (exit %d, %q), want exit %d %q", c.r, err, exitcode.Of(err), exitcode.Message(err), c.code, c.msg)
		}
		if c.code == exitcode.OK && err != nil {
			t.Errorf("%+v: %v, want nil", c.r, err)
		}
	}
	if err := (Reply{Exit: 1}).Err(g); err != exitcode.ErrProblem {
		t.Errorf("a bare exit 1 is ErrProblem: %v", err)
	}
}
