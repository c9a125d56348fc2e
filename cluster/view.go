package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// Files of pmxcfs that describe the cluster (pve-cluster src/pmxcfs/pmxcfs.c,
// create_symlinks).
const (
	MembersFile = "/etc/pve/.members"
	VMListFile  = "/etc/pve/.vmlist"
	LocalLink   = "/etc/pve/local" // -> nodes/<this node>
	NodesDir    = "/etc/pve/nodes"
)

// maxFileBytes bounds what is read of .members and .vmlist: .vmlist holds
// about 60 bytes per guest, so 16 MiB is far beyond any cluster.
const maxFileBytes = 16 << 20

// View is the cluster as this node sees it through pmxcfs.
type View struct {
	Local   string   // this node's name
	Members *Members // nil when .members could not be read
	VMs     VMList   // nil when .vmlist could not be read
	paths   node.Paths
}

// ErrNotCluster: this node has no .members (not a Proxmox VE node, or a
// copied tree without it).
var ErrNotCluster = exitcode.New(exitcode.Unreachable, "not a Proxmox VE cluster node")

// Load reads .members and .vmlist below the node's root, each within the
// node's timeout (/etc/pve is a FUSE mount that stalls without quorum). The
// View holds what could be read; the error says what could not (wrapping
// ErrNotCluster when .members does not exist).
func Load(ctx context.Context, n node.Node) (*View, error) {
	v := &View{paths: n.Paths}
	var errs []error
	b, err := readFile(ctx, n.Paths.Join(MembersFile), n.Timeout)
	if err == nil {
		v.Members, err = ParseMembers(b)
	} else if errors.Is(err, os.ErrNotExist) {
		err = fmt.Errorf("%w: no %s", ErrNotCluster, n.Paths.Join(MembersFile))
	}
	if err != nil {
		errs = append(errs, err)
	}
	if b, err = readFile(ctx, n.Paths.Join(VMListFile), n.Timeout); err == nil {
		v.VMs, err = ParseVMList(b)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	v.Local = v.localName()
	return v, errors.Join(errs...)
}

// localName is what pmxcfs calls this node: .members' nodename, else the
// target of /etc/pve/local, else the host name up to its first dot
// (PVE::INotify::nodename).
func (v *View) localName() string {
	if v.Members != nil {
		return v.Members.Local
	}
	if name := v.paths.NodeName(); ValidateNodeName(name) == nil {
		return name
	}
	return ""
}

// IsCluster reports whether .members lists a cluster.
func (v *View) IsCluster() bool { return v.Members != nil && v.Members.Cluster != nil }

// Nodes lists the cluster's nodes by name; outside a cluster only this node.
// This node counts as online: it is the one asking.
func (v *View) Nodes() []Member {
	if !v.IsCluster() {
		return []Member{{Name: v.Local, Online: true}}
	}
	out := append([]Member(nil), v.Members.Nodes...)
	local := false
	for i := range out {
		if out[i].Name == v.Local {
			out[i].Online, local = true, true
		}
	}
	if !local {
		out = append([]Member{{Name: v.Local, Online: true}}, out...)
	}
	return out
}

// Member returns the node called name; a node .members does not list is
// returned offline (nothing says how to reach it).
func (v *View) Member(name string) Member {
	for _, m := range v.Nodes() {
		if m.Name == name {
			return m
		}
	}
	return Member{Name: name}
}

// Locate says which node a guest belongs to, from .vmlist; ok is false when
// .vmlist does not list it.
func (v *View) Locate(vmid int) (g Guest, ok bool) {
	g, ok = v.VMs[vmid]
	return g, ok
}

// ConfigDir is where pmxcfs keeps a node's VM configs.
func (v *View) ConfigDir(nodeName string) string { return ConfigDir(v.paths, nodeName) }

// ConfigDir is where pmxcfs keeps a node's VM configs, below p's root.
func ConfigDir(p node.Paths, nodeName string) string {
	return p.Join(NodesDir + "/" + nodeName + "/qemu-server")
}

// KnownHosts is the node's ssh_known_hosts that Proxmox maintains in pmxcfs.
func (v *View) KnownHosts(nodeName string) string {
	return v.paths.Join(NodesDir + "/" + nodeName + "/ssh_known_hosts")
}

// readFile reads at most maxFileBytes of p, giving up after timeout (a read
// of /etc/pve can block while pmxcfs waits for quorum).
func readFile(ctx context.Context, p string, timeout time.Duration) ([]byte, error) {
	type result struct {
		b   []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		f, err := os.Open(p)
		if err != nil {
			ch <- result{nil, err}
			return
		}
		defer f.Close()
		b, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
		if err == nil && len(b) > maxFileBytes {
			err = fmt.Errorf("%s is larger than %d bytes", p, maxFileBytes)
		}
		ch <- result{b, err}
	}()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	select {
	case r := <-ch:
		return r.b, r.err
	case <-ctx.Done():
		return nil, exitcode.Unreachablef("%s: no answer within %s (pmxcfs without quorum?)", p, timeout)
	}
}

// ForConfigsOf is n as a view of another node's configs, for judging that
// node's VMs when it did not answer: its VM configs from pmxcfs, and no
// command run, since nothing this node runs (lvs, qm) describes that node.
func ForConfigsOf(n node.Node, nodeName string) node.Node {
	n.Paths.Configs = ConfigDir(n.Paths, nodeName)
	n.Runner.Off = fmt.Errorf("node %s did not answer: its VMs are read from their configs on this node, where nothing run describes %s", nodeName, nodeName)
	return n
}

// Route groups VMIDs typed on this node, as typed, by the node that
// answers for them: those whose config is on this node by this node, the
// others by the node .vmlist places them on; nodes are sorted by name. ok
// is false when one is not a VMID, or is neither here nor a QEMU VM of
// another node, or when every one is here: this node then answers for all
// of them (and says what is wrong with one). .vmlist is read only when a
// VMID's config is not here.
func Route(ctx context.Context, n node.Node, vmids []string) (view *View, nodes []Member, byNode map[string][]string, ok bool) {
	byNode = map[string][]string{}
	var here []string
	for _, a := range vmids {
		id, err := qemuserver.ParseVMID(a)
		if err != nil {
			return nil, nil, nil, false
		}
		if _, err := os.Stat(n.Paths.VMConfig(id)); !errors.Is(err, os.ErrNotExist) {
			here = append(here, a)
			continue
		}
		if view == nil {
			view, _ = Load(ctx, n)
		}
		g, ok := view.Locate(id)
		if !ok || g.Type != QEMU || g.Node == view.Local {
			return nil, nil, nil, false
		}
		byNode[g.Node] = append(byNode[g.Node], a)
	}
	if len(byNode) == 0 {
		return nil, nil, nil, false
	}
	if len(here) > 0 {
		byNode[view.Local] = append(byNode[view.Local], here...)
	}
	names := make([]string, 0, len(byNode))
	for name := range byNode {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		nodes = append(nodes, view.Member(name))
	}
	return view, nodes, byNode, true
}
