// Package node describes the Proxmox VE node the tool runs on: where its files
// are and how external commands are run. Every host path the tool reads comes
// from one Paths value, so the same binary runs against a copied tree (a support
// bundle) or a test fixture with --root.
package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

// Paths roots every host path. Root is "/" on a real node.
type Paths struct {
	Root string // the node's filesystem root
	Proc string // procfs mount; defaults to Root/proc
	Sys  string // sysfs mount; defaults to Root/sys
	// Configs, when set, replaces /etc/pve/qemu-server as the directory of
	// VM configs: another node's /etc/pve/nodes/<node>/qemu-server, read
	// when that node cannot answer for itself.
	Configs string
}

// NewPaths returns Paths for root with optional proc/sys overrides ("" keeps the
// default below root).
func NewPaths(root, proc, sys string) Paths {
	if root == "" {
		root = "/"
	}
	p := Paths{Root: root, Proc: proc, Sys: sys}
	if p.Proc == "" {
		p.Proc = filepath.Join(root, "proc")
	}
	if p.Sys == "" {
		p.Sys = filepath.Join(root, "sys")
	}
	return p
}

// Join returns a path below Root for an absolute node path such as "/etc/pve".
func (p Paths) Join(nodePath string) string { return filepath.Join(p.Root, nodePath) }

// QemuServerDir holds the VM configs of this node.
func (p Paths) QemuServerDir() string {
	if p.Configs != "" {
		return p.Configs
	}
	return p.Join("/etc/pve/qemu-server")
}

// VMConfig is /etc/pve/qemu-server/<vmid>.conf.
func (p Paths) VMConfig(vmid int) string {
	return filepath.Join(p.QemuServerDir(), strconv.Itoa(vmid)+".conf")
}

// CheckNode tells a tree that is not a Proxmox VE node (a wrong --root: a
// missing path, a file, a directory without etc/pve) from a node with nothing
// on it, so that a command never reports "all clear" on the wrong tree. It is
// bad input (exit 2) naming the path.
func (p Paths) CheckNode() error {
	pve := p.Join("/etc/pve")
	st, err := os.Stat(pve)
	switch {
	case errors.Is(err, os.ErrPermission):
		return exitcode.Wrap(exitcode.Unreachable, "", err)
	case err != nil:
		return exitcode.Usagef("%s is not a Proxmox VE node: no %s (give the node's root with --root)", p.Root, pve)
	case !st.IsDir():
		return exitcode.Usagef("%s is not a Proxmox VE node: %s is not a directory", p.Root, pve)
	}
	return nil
}

// StorageCfg is /etc/pve/storage.cfg.
func (p Paths) StorageCfg() string { return p.Join("/etc/pve/storage.cfg") }

// VzdumpConf is vzdump's node-wide defaults (fleecing among them).
func (p Paths) VzdumpConf() string { return p.Join("/etc/vzdump.conf") }

// JobsCfg is the cluster's scheduled jobs (backup jobs: vzdump sections).
func (p Paths) JobsCfg() string { return p.Join("/etc/pve/jobs.cfg") }

// RunDir is /var/run/qemu-server, where Proxmox keeps pid files and sockets.
func (p Paths) RunDir() string { return p.Join("/var/run/qemu-server") }

// PidFile is the pid file qemu-server passes to QEMU with -pidfile.
func (p Paths) PidFile(vmid int) string { return filepath.Join(p.RunDir(), strconv.Itoa(vmid)+".pid") }

// QMPSocket is the VM's QMP socket (one client at a time).
func (p Paths) QMPSocket(vmid int) string {
	return filepath.Join(p.RunDir(), strconv.Itoa(vmid)+".qmp")
}

// QGASocket is the VM's guest agent socket (agent: 1).
func (p Paths) QGASocket(vmid int) string {
	return filepath.Join(p.RunDir(), strconv.Itoa(vmid)+".qga")
}

// ProcPid is /proc/<pid>.
func (p Paths) ProcPid(pid int) string { return filepath.Join(p.Proc, strconv.Itoa(pid)) }

// Node is the handle every capability gets instead of flags: where the
// node's files are, how external commands run, and the deadline of every
// socket exchange and command.
type Node struct {
	Paths   Paths
	Runner  Runner // Exec on a real node
	Timeout time.Duration
}

// New returns a Node; a timeout <= 0 means the default of 5 s.
func New(p Paths, timeout time.Duration) Node {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return Node{Paths: p, Runner: Exec{Timeout: timeout}, Timeout: timeout}
}

// DefaultTimeout bounds every socket exchange and external command unless
// --timeout says otherwise.
const DefaultTimeout = 5 * time.Second

// MaxTimeout bounds --timeout: cluster mode's deadline is 6 of it plus the
// windows, and a deadline of hours is no deadline (issue 31: unbounded
// durations hung and overflowed).
const MaxTimeout = 10 * time.Minute

// nodeNameRe is a host name label, as Proxmox's node names are.
var nodeNameRe = regexp.MustCompile(`^[a-zA-Z0-9]([a-zA-Z0-9-]*[a-zA-Z0-9])?$`)

// NodeName is what Proxmox calls this node (PVE::INotify::nodename): the
// target of /etc/pve/local (pmxcfs links it to nodes/<name>), else the host
// name below the root (/etc/hostname), up to its first dot; else, on the
// machine's own root (/) only, this machine's host name. Below another
// root (a copied tree) the machine running the tool is not that node:
// the name is then "" (unknown), as it is for a name that is no host name.
func (p Paths) NodeName() string {
	if t, err := os.Readlink(p.Join("/etc/pve/local")); err == nil && nodeNameRe.MatchString(filepath.Base(t)) {
		return filepath.Base(t)
	}
	h := ""
	if b, err := (Node{Paths: p}).ReadFile(context.Background(), p.Join("/etc/hostname")); err == nil {
		h = strings.TrimSpace(string(b))
	} else if filepath.Clean(p.Root) == "/" {
		h, _ = os.Hostname()
	}
	h, _, _ = strings.Cut(h, ".")
	if !nodeNameRe.MatchString(h) {
		return ""
	}
	return h
}
