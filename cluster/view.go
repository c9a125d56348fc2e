package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"

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
	b, err := readFile(ctx, n, MembersFile, ErrMembers)
	if err == nil {
		v.Members, err = ParseMembers(b)
	} else if errors.Is(err, os.ErrNotExist) {
		err = fmt.Errorf("%w: no %s", ErrNotCluster, n.Paths.Join(MembersFile))
	}
	if err != nil {
		errs = append(errs, err)
	}
	if b, err = readFile(ctx, n, VMListFile, ErrVMList); err == nil {
		v.VMs, err = ParseVMList(b)
	}
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	v.Local = v.localName()
	return v, errors.Join(errs...)
}

// readFile reads a pmxcfs file (a read of /etc/pve can block while pmxcfs
// waits for quorum: n.ReadFile gives up after the node's timeout). A file
// that is there but cannot be read is unreadable (the file's sentinel,
// exit 3: the cluster's view is what cannot be reached), one line naming
// it.
func readFile(ctx context.Context, n node.Node, file string, unreadable error) ([]byte, error) {
	b, err := n.ReadFile(ctx, n.Paths.Join(file))
	switch {
	case errors.Is(err, node.ErrFileTimeout):
		return nil, fmt.Errorf("%w: %v (pmxcfs without quorum?)", unreadable, err)
	case err != nil && !errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("%w: %v", unreadable, err)
	}
	return b, err
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

// ForConfigsOf is n as a view of another node's configs, for judging that
// node's VMs when it did not answer: its VM configs from pmxcfs, and no
// command run, since nothing this node runs (lvs, qm) describes that node.
func ForConfigsOf(n node.Node, nodeName string) node.Node {
	n.Paths.Configs = ConfigDir(n.Paths, nodeName)
	n.Runner = node.Refuse(fmt.Errorf("node %s did not answer: its VMs are read from their configs on this node, where nothing run describes %s", nodeName, nodeName))
	return n
}

// Route groups VMIDs typed on this node, as typed, by the node that
// answers for them: those whose config is on this node by this node, the
// others by the node .vmlist places them on; nodes are sorted by name. ok
// is false when one is not a VMID, or is neither here nor a QEMU VM of
// another node, or when every one is here: this node then answers for all
// of them (and says what is wrong with one). .vmlist is read only when a
// VMID's config is not here; err says when it (or .members, for a VM of
// another node) could not be read: where that VM lives, or how to reach
// its node, is unknown (exit 3).
func Route(ctx context.Context, n node.Node, vmids []string) (view *View, nodes []Member, byNode map[string][]string, ok bool, err error) {
	byNode = map[string][]string{}
	var here []string
	for _, a := range vmids {
		id, perr := qemuserver.ParseVMID(a)
		if perr != nil {
			return nil, nil, nil, false, nil
		}
		if _, err := os.Stat(n.Paths.VMConfig(id)); !errors.Is(err, os.ErrNotExist) {
			here = append(here, a)
			continue
		}
		var lerr error
		if view == nil {
			view, lerr = Load(ctx, n)
		}
		g, ok := view.Locate(id)
		if err := view.Unknown(id, ok, lerr); err != nil {
			return nil, nil, nil, false, err
		}
		if !ok || g.Type != QEMU || g.Node == view.Local {
			return nil, nil, nil, false, nil
		}
		byNode[g.Node] = append(byNode[g.Node], a)
	}
	if len(byNode) == 0 {
		return nil, nil, nil, false, nil
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
	return view, nodes, byNode, true, nil
}

// Unknown is the error for VM vmid, whose config is not on this node,
// when the pmxcfs file that would place it (.vmlist) or reach its node
// (.members) could not be read: loadErr is what Load returned, found
// what Locate did. nil when nothing is missing (a VM .vmlist does not
// list is a VM the cluster does not have).
func (v *View) Unknown(vmid int, found bool, loadErr error) error {
	switch {
	case loadErr == nil:
		return nil
	case !found && errors.Is(loadErr, ErrVMList):
		return exitcode.Wrap(exitcode.Unreachable, fmt.Sprintf("VM %d: no config on this node, and which node has it is unknown", vmid), loadErr)
	case found && errors.Is(loadErr, ErrMembers) && v.VMs[vmid].Node != v.Local:
		return exitcode.Wrap(exitcode.Unreachable, fmt.Sprintf("%s: how to reach %s is unknown", v.VMs[vmid], v.VMs[vmid].Node), loadErr)
	}
	return nil
}
