// Package cluster is the Proxmox VE cluster as every node sees it through
// pmxcfs: the nodes with their IPs and whether they are online
// (/etc/pve/.members), which node runs which guest (/etc/pve/.vmlist), each
// node's VM configs (/etc/pve/nodes/<node>/qemu-server), and the remote call
// Proxmox's own tools make to another node: root SSH set up at cluster join.
// It validates and quotes everything that goes to a remote shell, asks nodes
// in parallel each with its own deadline, and merges the JSON documents the
// nodes answer with. It knows nothing of the commands it carries: it works on
// their JSON output.
package cluster

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// Member is one node of the cluster as /etc/pve/.members lists it.
type Member struct {
	Name   string `json:"node"`
	ID     int    `json:"id"`           // corosync node id
	Online bool   `json:"online"`       // pmxcfs sees the node in the corosync membership
	IP     string `json:"ip,omitempty"` // the node's address; "" when pmxcfs has none
}

// Address is where SSH reaches the node: its IP from .members, else its
// name, which Proxmox resolves the same way (PVE::Cluster::remote_node_ip
// falls back to the host name).
func (m Member) Address() string {
	if m.IP != "" {
		return m.IP
	}
	return m.Name
}

// Members is /etc/pve/.members.
type Members struct {
	Local   string // "nodename": the node whose pmxcfs wrote the file
	Version uint64 // "version": pmxcfs's cluster-info version
	// Cluster is nil on a node that is not part of a cluster; Nodes is then
	// empty.
	Cluster *ClusterInfo
	Nodes   []Member // sorted by name
}

// ClusterInfo is the "cluster" object of .members.
type ClusterInfo struct {
	Name    string
	Version int  // corosync config version
	Nodes   int  // node count
	Quorate bool // the local node is part of the quorate partition
}

// ErrMembers is a .members file this tool cannot read.
var ErrMembers = exitcode.New(exitcode.Unreachable, "cannot read /etc/pve/.members")

// rawMembers is the JSON pmxcfs writes (pve-cluster src/pmxcfs/status.c,
// cfs_create_memberlist_msg): online and quorate are 0/1 numbers, ip is
// missing for a node that has not broadcast one.
type rawMembers struct {
	Nodename *string `json:"nodename"`
	Version  *uint64 `json:"version"`
	Cluster  *struct {
		Name    string `json:"name"`
		Version int    `json:"version"`
		Nodes   int    `json:"nodes"`
		Quorate int    `json:"quorate"`
	} `json:"cluster"`
	Nodelist map[string]struct {
		ID     int     `json:"id"`
		Online int     `json:"online"`
		IP     *string `json:"ip"`
	} `json:"nodelist"`
}

// ParseMembers reads the contents of /etc/pve/.members. Every node name must
// be a valid Proxmox node name and every IP an IP address: they end up in an
// ssh command line.
func ParseMembers(b []byte) (*Members, error) {
	var raw rawMembers
	if err := json.Unmarshal(b, &raw); err != nil {
		return nil, fmt.Errorf("%w: line %d: %v", ErrMembers, jsonErrLine(b, err), err)
	}
	if raw.Nodename == nil || raw.Version == nil {
		return nil, fmt.Errorf("%w: no nodename or version", ErrMembers)
	}
	if err := ValidateNodeName(*raw.Nodename); err != nil {
		return nil, fmt.Errorf("%w: line %d: nodename: %v", ErrMembers, lineOf(b, 0, `"nodename"`), err)
	}
	m := &Members{Local: *raw.Nodename, Version: *raw.Version, Nodes: []Member{}}
	if raw.Cluster == nil {
		return m, nil
	}
	m.Cluster = &ClusterInfo{Name: raw.Cluster.Name, Version: raw.Cluster.Version, Nodes: raw.Cluster.Nodes, Quorate: raw.Cluster.Quorate != 0}
	for name, n := range raw.Nodelist {
		if err := ValidateNodeName(name); err != nil {
			return nil, fmt.Errorf("%w: line %d: nodelist: %v", ErrMembers, lineOf(b, bytes.Index(b, []byte(`"nodelist"`)), strconv.Quote(name)), err)
		}
		mem := Member{Name: name, ID: n.ID, Online: n.Online != 0}
		if n.IP != nil {
			if net.ParseIP(*n.IP) == nil {
				at := lineOf(b, bytes.Index(b, []byte(`"nodelist"`)), strconv.Quote(name))
				return nil, fmt.Errorf("%w: line %d: node %s: ip %s is not an IP address", ErrMembers, lineOf(b, offsetOfLine(b, at), `"ip"`), name, units.Clip(*n.IP, 40))
			}
			mem.IP = *n.IP
		}
		m.Nodes = append(m.Nodes, mem)
	}
	sort.Slice(m.Nodes, func(i, j int) bool { return m.Nodes[i].Name < m.Nodes[j].Name })
	return m, nil
}

// lineOf is the line of b where s first occurs at or after byte from (the
// line of from when it does not: the best place known).
func lineOf(b []byte, from int, s string) int {
	from = max(from, 0)
	if i := bytes.Index(b[from:], []byte(s)); i >= 0 {
		from += i
	}
	return bytes.Count(b[:from], []byte("\n")) + 1
}

// offsetOfLine is where line n (from 1) of b starts.
func offsetOfLine(b []byte, n int) int {
	off := 0
	for ; n > 1; n-- {
		i := bytes.IndexByte(b[off:], '\n')
		if i < 0 {
			return len(b)
		}
		off += i + 1
	}
	return off
}

// jsonErrLine is the line of a JSON decoding error in b.
func jsonErrLine(b []byte, err error) int {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	off := int64(0)
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	return 1 + bytes.Count(b[:min(max(int(off)-1, 0), len(b))], []byte("\n"))
}

// Node returns the member called name.
func (m *Members) Node(name string) (Member, bool) {
	for _, n := range m.Nodes {
		if n.Name == name {
			return n, true
		}
	}
	return Member{}, false
}
