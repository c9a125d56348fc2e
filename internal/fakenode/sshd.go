package fakenode

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// SSH is the root SSH of a Cluster, as cluster join sets it up, built only
// from files below one directory: never the machine's /etc/ssh or root's
// ~/.ssh. One real OpenSSH sshd per node listens on the node's IP (port 22
// when it is free there), with its own config and host key, and gives every
// session the node's environment with SetEnv; each node's host key is in
// pmxcfs's nodes/<node>/ssh_known_hosts, where Proxmox keeps it. Wrapper is
// a program taking ssh's arguments (PVEDISKCHECK_SSH) that adds -F (the
// client config: port, strict host key checking) and -i (the client key).
type SSH struct {
	Dir     string
	Wrapper string
	sshd    map[string]*sshd
	c       *Cluster
}

type sshd struct {
	cmd    *exec.Cmd
	config string
	addr   string
	log    *lockedBuffer
}

// lockedBuffer is sshd's log, written by exec's copier while tests read it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// SSHDBinary is OpenSSH's server (make test's dependency script installs it).
const SSHDBinary = "/usr/sbin/sshd"

// ErrNoSSHD: OpenSSH's server is not installed.
var ErrNoSSHD = errors.New(SSHDBinary + " not found (apt-get install openssh-server openssh-client)")

// StartSSH starts an sshd for every node of the cluster; env(node) is the
// environment of that node's sessions (its root, PATH, ...). Stop stops them.
func (c *Cluster) StartSSH(dir string, env func(n *ClusterNode) map[string]string) (*SSH, error) {
	if _, err := os.Stat(SSHDBinary); err != nil {
		return nil, ErrNoSSHD
	}
	// sshd refuses to start without its privilege separation directory
	// (Debian's unit creates it at boot).
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return nil, err
	}
	s := &SSH{Dir: dir, sshd: map[string]*sshd{}, c: c}
	key := filepath.Join(dir, "id_ed25519")
	if err := keygen(key); err != nil {
		return nil, err
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600); err != nil {
		return nil, err
	}
	var client strings.Builder
	for _, n := range c.Nodes {
		if err := s.start(n, env(n)); err != nil {
			s.Stop()
			return nil, err
		}
		host, port, _ := net.SplitHostPort(s.sshd[n.Name].addr)
		fmt.Fprintf(&client, "Host %s\n  Port %s\n", host, port)
	}
	client.WriteString("Host *\n  StrictHostKeyChecking yes\n  IdentitiesOnly yes\n  PasswordAuthentication no\n  KbdInteractiveAuthentication no\n  LogLevel ERROR\n" +
		"  UserKnownHostsFile " + filepath.Join(dir, "known_hosts") + "\n")
	cfg := filepath.Join(dir, "ssh_config")
	if err := os.WriteFile(cfg, []byte(client.String()), 0o600); err != nil {
		return nil, err
	}
	s.Wrapper = filepath.Join(dir, "ssh")
	script := fmt.Sprintf("#!/bin/sh\nexec /usr/bin/ssh -F %s -i %s \"$@\"\n", cfg, key)
	if err := os.WriteFile(s.Wrapper, []byte(script), 0o755); err != nil {
		return nil, err
	}
	return s, nil
}

func keygen(path string) error {
	out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", filepath.Base(path), "-f", path).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ssh-keygen: %v: %s", err, out)
	}
	return nil
}

// start runs the node's sshd on its IP, port 22 when free there.
func (s *SSH) start(n *ClusterNode, env map[string]string) error {
	d := filepath.Join(s.Dir, n.Name)
	if err := os.MkdirAll(d, 0o700); err != nil {
		return err
	}
	hostKey := filepath.Join(d, "ssh_host_ed25519_key")
	if err := keygen(hostKey); err != nil {
		return err
	}
	pub, err := os.ReadFile(hostKey + ".pub")
	if err != nil {
		return err
	}
	// Proxmox's per-node known hosts: "<node> <key>", used with
	// HostKeyAlias=<node>.
	kh := filepath.Join(s.c.Pmxcfs(), "nodes", n.Name, "ssh_known_hosts")
	if err := os.WriteFile(kh, []byte(n.Name+" "+string(pub)), 0o644); err != nil {
		return err
	}
	if err := s.c.Sync(); err != nil {
		return err
	}
	addr := net.JoinHostPort(n.IP, "22")
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
	} else if l, err = net.Listen("tcp", net.JoinHostPort(n.IP, "0")); err == nil {
		addr = l.Addr().String() // 22 is taken here (the machine's own sshd)
		l.Close()
	} else {
		return err
	}
	var setenv []string
	for _, k := range sortedEnv(env) {
		setenv = append(setenv, strconv.Quote(k+"="+env[k]))
	}
	cfg := filepath.Join(d, "sshd_config")
	text := strings.Join([]string{
		"ListenAddress " + addr,
		"HostKey " + hostKey,
		"PidFile " + filepath.Join(d, "sshd.pid"),
		"AuthorizedKeysFile " + filepath.Join(s.Dir, "authorized_keys"),
		"PermitRootLogin prohibit-password",
		"PubkeyAuthentication yes",
		"PasswordAuthentication no",
		"KbdInteractiveAuthentication no",
		"UsePAM no",
		"StrictModes no", // the temp dir is below world-writable /tmp
		"PrintMotd no",
		"AcceptEnv none",
		"SetEnv " + strings.Join(setenv, " "),
	}, "\n") + "\n"
	if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
		return err
	}
	sd := &sshd{config: cfg, addr: addr, log: &lockedBuffer{}}
	s.sshd[n.Name] = sd
	return sd.run()
}

func sortedEnv(env map[string]string) []string {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// run starts sshd in the foreground (-D, logging to a buffer) and waits
// until it accepts connections.
func (d *sshd) run() error {
	d.cmd = exec.Command(SSHDBinary, "-D", "-e", "-f", d.config)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		return err
	}
	for i := 0; i < 250; i++ {
		if c, err := net.DialTimeout("tcp", d.addr, 100*time.Millisecond); err == nil {
			c.Close()
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	d.stop()
	return fmt.Errorf("sshd on %s did not start: %s", d.addr, d.log.String())
}

func (d *sshd) stop() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	// sshd's session processes are in its process group.
	_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGTERM)
	_ = d.cmd.Wait()
	d.cmd = nil
}

// StopNode stops one node's sshd (the node then no longer answers).
func (s *SSH) StopNode(name string) {
	if d := s.sshd[name]; d != nil {
		d.stop()
	}
}

// StartNode starts a stopped node's sshd again.
func (s *SSH) StartNode(name string) error {
	d := s.sshd[name]
	if d == nil {
		return fmt.Errorf("no sshd for %s", name)
	}
	if d.cmd != nil {
		return nil
	}
	return d.run()
}

// Addr is where the node's sshd listens.
func (s *SSH) Addr(name string) string { return s.sshd[name].addr }

// Log is what the node's sshd wrote.
func (s *SSH) Log(name string) string { return s.sshd[name].log.String() }

// Stop stops every sshd.
func (s *SSH) Stop() {
	for _, d := range s.sshd {
		d.stop()
	}
}
