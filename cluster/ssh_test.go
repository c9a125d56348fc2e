package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
)

// envFake makes the test binary stand in for ssh (SSH.Program): it plays
// the remote side in the mode the variable names.
const envFake = "CLUSTER_TEST_FAKE_SSH"

func TestMain(m *testing.M) {
	if mode := os.Getenv(envFake); mode != "" {
		os.Exit(fakeSSH(mode, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// fakeSSH answers like a node would: the remote command is what follows
// root@ADDRESS, as ssh hands it to the remote shell (joined by spaces).
func fakeSSH(mode string, args []string) int {
	alias, remote := "", ""
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "HostKeyAlias="); ok {
			alias = v
		}
		if strings.HasPrefix(a, "root@") {
			remote = strings.Join(args[i+1:], " ")
			break
		}
	}
	switch mode {
	case "reply":
		os.Stdout.Write(Reply{Version: "9.9", Node: alias, Exit: 1, Stdout: remote}.Encode())
		return 1
	case "old":
		if strings.HasSuffix(remote, "'--version'") {
			fmt.Println("pvediskcheck version 0.0.9")
			return 0
		}
		fmt.Fprintln(os.Stderr, "pvediskcheck: flag provided but not defined: -cluster-reply")
		return 2
	case "old-silent":
		if strings.HasSuffix(remote, "'--version'") {
			return 1
		}
		fmt.Fprintln(os.Stderr, "pvediskcheck: flag provided but not defined: -cluster-reply")
		return 2
	case "refused":
		fmt.Fprintln(os.Stderr, "ssh: connect to host "+strings.TrimPrefix(args[len(args)-3], "root@")+" port 22: Connection refused")
		return 255
	case "hang":
		time.Sleep(time.Minute)
	}
	return 0
}

func sshFor(t *testing.T, mode string, files map[string]string) SSH {
	t.Helper()
	n := tree(t, files)
	t.Setenv(envFake, mode)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return SSH{Program: exe, View: &View{Local: "pve1", paths: n.Paths}, Runner: node.Exec{Timeout: 5 * time.Second}}
}

func TestSSHArgv(t *testing.T) {
	s := SSH{View: &View{paths: node.NewPaths(t.TempDir(), "", "")}}
	argv, err := s.Argv(Member{Name: "pve2", IP: "10.0.0.2"}, []string{"--json", "cache", "370", "it's"})
	want := []string{"/usr/bin/ssh", "-e", "none", "-o", "BatchMode=yes", "-o", "HostKeyAlias=pve2", "root@10.0.0.2",
		"'pvediskcheck'", "'--json'", "'cache'", "'370'", `'it'\''s'`}
	if err != nil || !reflect.DeepEqual(argv, want) {
		t.Errorf("Argv = %q, %v", argv, err)
	}
	// With the node's known hosts in pmxcfs, as Proxmox passes them; no IP:
	// the node's name.
	kh := s.View.KnownHosts("pve3")
	if err := os.MkdirAll(filepath.Dir(kh), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kh, []byte("pve3 ssh-ed25519 AAAA\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s.Program = "/opt/wrap"
	argv, err = s.Argv(Member{Name: "pve3"}, nil)
	want = []string{"/opt/wrap", "-e", "none", "-o", "BatchMode=yes", "-o", "HostKeyAlias=pve3",
		"-o", "UserKnownHostsFile=" + kh, "-o", "GlobalKnownHostsFile=none", "root@pve3", "'pvediskcheck'"}
	if err != nil || !reflect.DeepEqual(argv, want) {
		t.Errorf("Argv = %q, %v", argv, err)
	}
	// A directory where the file should be is not a known hosts file.
	if err := os.MkdirAll(s.View.KnownHosts("pve4"), 0o755); err != nil {
		t.Fatal(err)
	}
	if argv, _ := s.Argv(Member{Name: "pve4"}, nil); len(argv) != 9 {
		t.Errorf("Argv = %q", argv)
	}
	for _, bad := range []struct {
		m    Member
		args []string
	}{{Member{Name: "-oProxyCommand=x"}, nil}, {Member{Name: "pve2"}, []string{"a\nreboot"}}} {
		if argv, err := s.Argv(bad.m, bad.args); err == nil {
			t.Errorf("Argv(%+v, %q) = %q", bad.m, bad.args, argv)
		}
	}
}

func TestSSHCall(t *testing.T) {
	s := sshFor(t, "reply", nil)
	r, err := s.Call(context.Background(), Member{Name: "pve2", IP: "10.0.0.2", Online: true}, []string{"--json", "check", "$(reboot)"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// What the remote shell receives: every argument one quoted word.
	if r.Exit != 1 || r.Version != "9.9" || r.Stdout != `'pvediskcheck' '--json' 'check' '$(reboot)'` {
		t.Errorf("reply %+v", r)
	}
	if _, err := s.Call(context.Background(), Member{Name: "pve 2"}, nil, time.Second); exitcode.Of(err) != exitcode.Usage {
		t.Errorf("bad node name: %v", err)
	}
}

func TestSSHCallFailures(t *testing.T) {
	cases := []struct {
		mode, version string
		status        Status
		msg           string
	}{
		{"old", "0.0.9", OtherVersion, "runs pvediskcheck 0.0.9, too old to answer another node: install the same version on every node"},
		{"old-silent", "", OtherVersion, "too old to answer another node (pvediskcheck: flag provided but not defined: -cluster-reply)"},
		{"refused", "", Unreachable, "ssh: connect to host 10.0.0.2 port 22: Connection refused"},
		{"hang", "", Unreachable, "timed out after 200ms"},
	}
	for _, c := range cases {
		s := sshFor(t, c.mode, nil)
		t0 := time.Now()
		r, err := s.Call(context.Background(), Member{Name: "pve2", IP: "10.0.0.2", Online: true}, []string{"check"}, 200*time.Millisecond)
		var ne *NodeError
		if r != nil || !errors.As(err, &ne) || ne.Status != c.status || ne.Version != c.version || !strings.Contains(ne.Msg, c.msg) {
			t.Errorf("%s: %+v %v", c.mode, r, err)
		}
		if d := time.Since(t0); d > 10*time.Second {
			t.Errorf("%s: took %s", c.mode, d)
		}
	}
}
