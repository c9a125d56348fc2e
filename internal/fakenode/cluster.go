package fakenode

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Cluster is a Proxmox VE cluster in miniature on one machine: node roots
// that share one /etc/pve tree shaped like pmxcfs (pve-cluster
// src/pmxcfs/pmxcfs.c, create_symlinks): nodes/<node>/qemu-server,
// storage.cfg and .vmlist are one copy for all; each node's
// /etc/pve/qemu-server and /etc/pve/local point at its own directory under
// nodes/, and each has its own .members (pmxcfs writes "nodename" as the
// node that reads it). The shared tree (Pmxcfs) is hard-linked file by
// file into every node's /etc/pve, as pmxcfs's mount shows one tree inside
// each root: the tool refuses a symlink that leaves --root. A write in
// place shows on every node; Sync links new files (a config written on a
// node, or replaced by rename as qm does) everywhere.
type Cluster struct {
	Dir   string // holds pmxcfs/ (the shared tree), vz/ (storage "local") and one root per node
	Nodes []*ClusterNode
}

// ClusterNode is one node of a Cluster.
type ClusterNode struct {
	*Node
	Name   string
	IP     string // what .members says
	Online bool   // what .members says
}

// Pmxcfs is the shared /etc/pve tree.
func (c *Cluster) Pmxcfs() string { return filepath.Join(c.Dir, "pmxcfs") }

// NewCluster lays out nodes named names (with IPs ips) under dir, every node
// online. Storage "local" is one shared directory (like a shared mount) and
// "local-lvm" each node's own pool under the same VG name, as on real nodes.
func NewCluster(dir string, names, ips []string) (*Cluster, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir}
	vz := filepath.Join(dir, "vz")
	for _, d := range []string{filepath.Join(c.Pmxcfs(), "nodes"), filepath.Join(vz, "images")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	for i, name := range names {
		root := filepath.Join(dir, name)
		etc := filepath.Join(root, "etc/pve")
		if err := os.MkdirAll(filepath.Join(c.Pmxcfs(), "nodes", name, "qemu-server"), 0o755); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(etc, 0o755); err != nil {
			return nil, err
		}
		if err := os.MkdirAll(filepath.Join(etc, "nodes", name, "qemu-server"), 0o755); err != nil {
			return nil, err
		}
		links := map[string]string{
			"qemu-server": "nodes/" + name + "/qemu-server", // relative, as pmxcfs's
			"local":       "nodes/" + name,
		}
		for l, target := range links {
			if err := os.Symlink(target, filepath.Join(etc, l)); err != nil {
				return nil, err
			}
		}
		n, err := New(root)
		if err != nil {
			return nil, err
		}
		// The shared storage path, seen below this root as well.
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, vz)), 0o755); err != nil {
			return nil, err
		}
		if err := os.Symlink(vz, filepath.Join(root, vz)); err != nil {
			return nil, err
		}
		c.Nodes = append(c.Nodes, &ClusterNode{Node: n, Name: name, IP: ips[i], Online: true})
	}
	for _, n := range c.Nodes {
		n.VG = c.Nodes[0].VG
	}
	cfg := fmt.Sprintf("dir: local\n\tpath %s\n\tcontent iso,vztmpl,backup,images\n\nlvmthin: local-lvm\n\tthinpool data\n\tvgname %s\n\tcontent rootdir,images\n", vz, c.Nodes[0].VG)
	if err := os.WriteFile(filepath.Join(c.Pmxcfs(), "storage.cfg"), []byte(cfg), 0o644); err != nil {
		return nil, err
	}
	return c, c.Sync()
}

// Node returns the node called name.
func (c *Cluster) Node(name string) *ClusterNode {
	for _, n := range c.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// Sync writes what pmxcfs would show now: every node's .members (from the
// nodes' IP and Online) and .vmlist (from the configs under nodes/).
func (c *Cluster) Sync() error {
	for _, self := range c.Nodes {
		// What the node wrote itself (its configs) is the shared copy.
		if err := link(filepath.Join(self.Root, "etc/pve/nodes", self.Name), filepath.Join(c.Pmxcfs(), "nodes", self.Name)); err != nil {
			return err
		}
		if err := os.WriteFile(self.Paths.Join("/etc/pve/.members"), []byte(c.members(self.Name)), 0o644); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join(c.Pmxcfs(), ".vmlist"), []byte(c.vmlist()), 0o644); err != nil {
		return err
	}
	for _, n := range c.Nodes {
		if err := link(c.Pmxcfs(), filepath.Join(n.Root, "etc/pve")); err != nil {
			return err
		}
	}
	return nil
}

// link hard-links every file below dir from to the same place below to,
// replacing what is there unless it is that file already.
func link(from, to string) error {
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if a, err := os.Stat(p); err == nil {
			if b, err := os.Stat(dst); err == nil && os.SameFile(a, b) {
				return nil
			}
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		if err := os.Remove(dst); err != nil && !os.IsNotExist(err) {
			return err
		}
		return os.Link(p, dst)
	})
}

// members is .members as pmxcfs prints it (status.c,
// cfs_create_memberlist_msg), seen from node self.
func (c *Cluster) members(self string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{\n\"nodename\": \"%s\",\n\"version\": %d,\n", self, len(c.Nodes)+3)
	fmt.Fprintf(&b, "\"cluster\": { \"name\": \"%s\", \"version\": %d, \"nodes\": %d, \"quorate\": %d },\n", "fake", 2, len(c.Nodes), 1)
	b.WriteString("\"nodelist\": {\n")
	for i, n := range c.Nodes {
		if i > 0 {
			b.WriteString(",\n")
		}
		online := 0
		if n.Online {
			online = 1
		}
		fmt.Fprintf(&b, "  \"%s\": { \"id\": %d, \"online\": %d", n.Name, i+1, online)
		if n.IP != "" {
			fmt.Fprintf(&b, ", \"ip\": \"%s\"", n.IP)
		}
		b.WriteString("}")
	}
	b.WriteString("\n  }\n}\n")
	return b.String()
}

// vmlist is .vmlist as pmxcfs prints it (cfs_create_vmlist_msg).
func (c *Cluster) vmlist() string {
	type entry struct {
		id   int
		node string
	}
	var ids []entry
	for _, n := range c.Nodes {
		files, _ := filepath.Glob(filepath.Join(c.Pmxcfs(), "nodes", n.Name, "qemu-server", "*.conf"))
		for _, f := range files {
			if id, err := strconv.Atoi(strings.TrimSuffix(filepath.Base(f), ".conf")); err == nil {
				ids = append(ids, entry{id, n.Name})
			}
		}
	}
	if len(ids) == 0 {
		return "{\n\"version\": 1\n\n}\n"
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i].id < ids[j].id })
	var b strings.Builder
	fmt.Fprintf(&b, "{\n\"version\": %d,\n\"ids\": {\n", len(ids)+1)
	for i, e := range ids {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, "\"%d\": { \"node\": \"%s\", \"type\": \"qemu\", \"version\": %d }", e.id, e.node, i+1)
	}
	b.WriteString("}\n\n}\n")
	return b.String()
}

// WriteConfig writes a VM config on the node and updates .vmlist.
func (c *Cluster) WriteConfig(node string, vmid int, text string) error {
	n := c.Node(node)
	if n == nil {
		return fmt.Errorf("no node %s", node)
	}
	if err := n.WriteConfig(vmid, text); err != nil {
		return err
	}
	return c.Sync()
}

// Close stops every node's VMs and releases their volumes.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.Close()
	}
}
