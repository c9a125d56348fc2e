package cluster

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
)

// DefaultSSH is the program Proxmox runs to reach another node
// (PVE::SSHInfo::ssh_info_to_command_base).
const DefaultSSH = "/usr/bin/ssh"

// RemoteProgram runs on the other node: pvediskcheck on root's PATH (the
// package installs /usr/sbin/pvediskcheck).
const RemoteProgram = "pvediskcheck"

// SSH reaches the other nodes the way Proxmox's own tools do: root SSH with
// the keys and known hosts set up at cluster join.
type SSH struct {
	// Program is DefaultSSH or a program taking the same arguments (a
	// wrapper that adds -F CONFIG, for tests or unusual setups).
	Program string
	View    *View
	Runner  node.Runner // stdin is closed, every call has a deadline
}

// Argv is the command line that runs pvediskcheck with args on m: what
// PVE::SSHInfo::ssh_info_to_command builds for the node (-e none,
// BatchMode, HostKeyAlias=<node>, the node's known hosts file from pmxcfs
// when there is one, root@<ip from .members>), then the remote command with
// every argument validated as printable text and quoted for the remote shell.
func (s SSH) Argv(m Member, args []string) ([]string, error) {
	if err := ValidateNodeName(m.Name); err != nil {
		return nil, err
	}
	remote, err := QuoteArgs(append([]string{RemoteProgram}, args...))
	if err != nil {
		return nil, err
	}
	prog := s.Program
	if prog == "" {
		prog = DefaultSSH
	}
	argv := []string{prog, "-e", "none", "-o", "BatchMode=yes", "-o", "HostKeyAlias=" + m.Name}
	if kh := s.View.KnownHosts(m.Name); isFile(kh) {
		argv = append(argv, "-o", "UserKnownHostsFile="+kh, "-o", "GlobalKnownHostsFile=none")
	}
	argv = append(argv, "root@"+m.Address())
	return append(argv, remote...), nil
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// Call runs pvediskcheck with args on m and reads its reply; deadline
// bounds the whole call. A node whose pvediskcheck is too old to answer is
// asked for its version, so the error can name it.
func (s SSH) Call(ctx context.Context, m Member, args []string, deadline time.Duration) (*Reply, error) {
	argv, err := s.Argv(m, args)
	if err != nil {
		return nil, exitcode.Wrap(exitcode.Usage, "", err)
	}
	out, runErr := s.Runner.RunTimeout(ctx, deadline, argv...)
	r, err := ParseReply(m.Name, out, runErr)
	var ne *NodeError
	if errors.As(err, &ne) && ne.Status == OtherVersion {
		argv, _ = s.Argv(m, []string{"--version"})
		if out, verr := s.Runner.RunTimeout(ctx, deadline, argv...); verr == nil {
			if v, ok := ParseVersion(out); ok {
				ne.Version = v
				ne.Msg = "runs pvediskcheck " + v + ", too old to answer another node: install the same version on every node"
			}
		}
	}
	return r, err
}
