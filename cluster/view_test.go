package cluster

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
)

// tree lays out a node root with the given /etc/pve files (name -> text;
// a text starting with "->" makes a symlink).
func tree(t *testing.T, files map[string]string) node.Node {
	t.Helper()
	root := t.TempDir()
	for name, text := range files {
		p := filepath.Join(root, "etc/pve", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(text, "->"); ok {
			err = os.Symlink(target, p)
		} else {
			err = os.WriteFile(p, []byte(text), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return node.New(node.NewPaths(root, "", ""), time.Second)
}

func TestLoadCluster(t *testing.T) {
	n := tree(t, map[string]string{".members": string(fixture(t, "members-3nodes.json")), ".vmlist": string(fixture(t, "vmlist.json")), "local": "->nodes/pveX"})
	v, err := Load(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	// .members' nodename wins over the local link.
	if v.Local != "pve1" || !v.IsCluster() {
		t.Errorf("Local %q, cluster %v", v.Local, v.IsCluster())
	}
	want := []Member{{"pve1", 1, true, "192.168.1.11"}, {"pve2", 2, true, "192.168.1.12"}, {"pve3", 3, false, "fd00::13"}}
	if got := v.Nodes(); !reflect.DeepEqual(got, want) {
		t.Errorf("Nodes = %+v", got)
	}
	if m := v.Member("pve3"); m != want[2] {
		t.Errorf("Member(pve3) = %+v", m)
	}
	if m := v.Member("pve7"); m != (Member{Name: "pve7"}) {
		t.Errorf("a node .members does not list must be offline: %+v", m)
	}
	if g, ok := v.Locate(380); !ok || g.Node != "pve2" || g.Type != QEMU {
		t.Errorf("Locate(380) = %+v %v", g, ok)
	}
	if _, ok := v.Locate(999); ok {
		t.Error("Locate(999) found")
	}
	root := n.Paths.Root
	if d := v.ConfigDir("pve2"); d != root+"/etc/pve/nodes/pve2/qemu-server" {
		t.Errorf("ConfigDir = %s", d)
	}
	if d := v.KnownHosts("pve2"); d != root+"/etc/pve/nodes/pve2/ssh_known_hosts" {
		t.Errorf("KnownHosts = %s", d)
	}
}

// This node counts as online even when .members says otherwise (it is the
// one asking), and is added when .members does not list it.
func TestNodesLocal(t *testing.T) {
	v := &View{Local: "pve1", Members: &Members{Local: "pve1", Cluster: &ClusterInfo{}, Nodes: []Member{{Name: "pve1"}, {Name: "pve2", Online: true}}}}
	if got := v.Nodes(); !reflect.DeepEqual(got, []Member{{Name: "pve1", Online: true}, {Name: "pve2", Online: true}}) {
		t.Errorf("Nodes = %+v", got)
	}
	v.Local = "pve0"
	if got := v.Nodes(); !reflect.DeepEqual(got, []Member{{Name: "pve0", Online: true}, {Name: "pve1"}, {Name: "pve2", Online: true}}) {
		t.Errorf("Nodes = %+v", got)
	}
	// The input is not changed.
	if v.Members.Nodes[0].Online {
		t.Error("Nodes changed .members")
	}
}

func TestLoadStandalone(t *testing.T) {
	n := tree(t, map[string]string{".members": string(fixture(t, "members-standalone.json")), ".vmlist": string(fixture(t, "vmlist-empty.json"))})
	v, err := Load(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	if v.IsCluster() || !reflect.DeepEqual(v.Nodes(), []Member{{Name: "pve1", Online: true}}) {
		t.Errorf("standalone: cluster %v, nodes %+v", v.IsCluster(), v.Nodes())
	}
}

func TestLoadNotCluster(t *testing.T) {
	// No .members: the name comes from /etc/pve/local, and the error says
	// this is not a cluster node; .vmlist is still read.
	n := tree(t, map[string]string{"local": "->nodes/pve5", ".vmlist": string(fixture(t, "vmlist.json"))})
	v, err := Load(context.Background(), n)
	if !errors.Is(err, ErrNotCluster) || v.Local != "pve5" || v.Members != nil || len(v.VMs) != 4 {
		t.Errorf("Load = %+v, %v", v, err)
	}
	if v.IsCluster() || !reflect.DeepEqual(v.Nodes(), []Member{{Name: "pve5", Online: true}}) {
		t.Errorf("not a cluster: %+v", v.Nodes())
	}
	// Nor a local link, nor an /etc/hostname in the tree: the name is
	// unknown (the machine running the tool is not the tree's node; on
	// the node's own root it is the host name, node.Paths.NodeName).
	n = tree(t, map[string]string{"local": "->nodes/bad_name"})
	v, err = Load(context.Background(), n)
	if !errors.Is(err, ErrNotCluster) || v.Local != "" || v.VMs != nil {
		t.Errorf("Load = %+v, %v; want no name", v, err)
	}
}

func TestLoadBadFiles(t *testing.T) {
	n := tree(t, map[string]string{".members": string(fixture(t, "members-3nodes.json")), ".vmlist": "{"})
	v, err := Load(context.Background(), n)
	if !errors.Is(err, ErrVMList) || errors.Is(err, ErrMembers) || v.Members == nil || v.VMs != nil {
		t.Errorf("bad .vmlist: %+v, %v", v, err)
	}
	n = tree(t, map[string]string{".members": "[]", ".vmlist": string(fixture(t, "vmlist.json"))})
	v, err = Load(context.Background(), n)
	if !errors.Is(err, ErrMembers) || errors.Is(err, ErrNotCluster) || v.Members != nil || len(v.VMs) != 4 {
		t.Errorf("bad .members: %+v, %v", v, err)
	}
}

// A .members or .vmlist that is not a regular file (a FIFO, which used to
// be read until the timeout) is refused at once, exit 3 naming the file;
// one larger than node.MaxFileBytes too. (A read that blocks is given up
// after the node's timeout: node.ReadFile, tested there.)
func TestLoadBadFileKinds(t *testing.T) {
	for _, file := range []string{MembersFile, VMListFile} {
		n := tree(t, map[string]string{".vmlist": "{}", ".members": string(fixture(t, "members-3nodes.json"))})
		p := n.Paths.Join(file)
		os.Remove(p)
		if err := syscall.Mkfifo(p, 0o644); err != nil {
			t.Fatal(err)
		}
		n.Timeout = time.Hour
		t0 := time.Now()
		_, err := Load(context.Background(), n)
		if err == nil || !strings.Contains(err.Error(), p+": is a FIFO, not a regular file") || exitcode.Of(err) != exitcode.Unreachable {
			t.Errorf("%s: err = %v", file, err)
		}
		if d := time.Since(t0); d > 10*time.Second {
			t.Errorf("%s: took %s", file, d)
		}
		os.Remove(p)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, node.MaxFileBytes+1); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(context.Background(), n); err == nil || !strings.Contains(err.Error(), p+": is larger than 16 MiB") || exitcode.Of(err) != exitcode.Unreachable {
			t.Errorf("%s: err = %v", file, err)
		}
	}
}

// Route: VMIDs by the node that answers for them, .vmlist read only when
// one's config is not here, and this node answering for all when one is
// not a QEMU VM of another node.
func TestRoute(t *testing.T) {
	vmlist := `{"version": 1, "ids": {"370": {"node": "pve1", "type": "qemu"}, "371": {"node": "pve1", "type": "qemu"},
		"380": {"node": "pve2", "type": "qemu"}, "200": {"node": "pve2", "type": "qemu"}, "101": {"node": "pve2", "type": "lxc"},
		"390": {"node": "pve3", "type": "qemu"}}}`
	n := tree(t, map[string]string{".members": string(fixture(t, "members-3nodes.json")), ".vmlist": vmlist, "qemu-server/370.conf": "memory: 512\n"})
	ctx := context.Background()
	view, nodes, byNode, ok, err := Route(ctx, n, []string{"390", "370", "380", "200"})
	var got []string
	for _, m := range nodes {
		got = append(got, m.Name+"="+strings.Join(byNode[m.Name], ","))
	}
	if err != nil || !ok || view == nil || view.Local != "pve1" || strings.Join(got, " ") != "pve1=370 pve2=380,200 pve3=390" || len(byNode) != 3 {
		t.Errorf("three nodes: %v %q %v", ok, got, byNode)
	}
	if nodes[1] != (Member{"pve2", 2, true, "192.168.1.12"}) || nodes[2].Online {
		t.Errorf("members: %+v", nodes)
	}
	if _, nodes, byNode, ok, err := Route(ctx, n, []string{"380"}); err != nil || !ok || len(nodes) != 1 || nodes[0].Name != "pve2" || len(byNode) != 1 {
		t.Errorf("one remote VM: %v %+v %v", ok, nodes, byNode)
	}
	for _, ids := range [][]string{
		{"370"},        // here
		{"380", "abc"}, // not a VMID
		{"380", "999"}, // nowhere
		{"380", "101"}, // a container
		{"380", "371"}, // .vmlist says here, no config here
		nil,
	} {
		if view, nodes, byNode, ok, err := Route(ctx, n, ids); err != nil || ok || view != nil || nodes != nil || byNode != nil {
			t.Errorf("%q: routed %v %+v %v", ids, ok, nodes, byNode)
		}
	}
	// Every VMID here: pmxcfs is not read (an unreadable .vmlist is not
	// even noticed).
	n = tree(t, map[string]string{".vmlist": "{", "qemu-server/370.conf": "memory: 512\n", "qemu-server/371.conf": "memory: 512\n"})
	if view, _, _, ok, err := Route(ctx, n, []string{"370", "371"}); err != nil || ok || view != nil {
		t.Errorf("all here: %v %+v", ok, view)
	}
	// A VM not here, with .vmlist unreadable (one bad node name): where it
	// lives is unknown, exit 3 naming the file and the line (not "no such
	// VM on this node"). With .members unreadable (one bad IP), its node
	// cannot be reached (not "offline").
	badList := "{\n\"version\": 3,\n\"ids\": {\n\"370\": { \"node\": \"pve1\", \"type\": \"qemu\", \"version\": 1 },\n\"380\": { \"node\": \"pve2;x\", \"type\": \"qemu\", \"version\": 2 }}\n}\n"
	n = tree(t, map[string]string{".members": string(fixture(t, "members-3nodes.json")), ".vmlist": badList, "qemu-server/370.conf": "memory: 512\n"})
	_, _, _, ok, err = Route(ctx, n, []string{"380"})
	if ok || exitcode.Of(err) != exitcode.Unreachable || !strings.HasPrefix(err.Error(), "VM 380: no config on this node, and which node has it is unknown: cannot read /etc/pve/.vmlist: line 5: VM 380: ") {
		t.Errorf("bad .vmlist: %v %v", ok, err)
	}
	members := strings.Replace(string(fixture(t, "members-3nodes.json")), `"192.168.1.12"`, `"192.168.1.x"`, 1)
	n = tree(t, map[string]string{".members": members, ".vmlist": string(fixture(t, "vmlist.json"))})
	_, _, _, ok, err = Route(ctx, n, []string{"380"})
	want := "VM 380 on pve2: how to reach pve2 is unknown: cannot read /etc/pve/.members: line 6: node pve2: ip \"192.168.1.x\" is not an IP address"
	if ok || exitcode.Of(err) != exitcode.Unreachable || err.Error() != want {
		t.Errorf("bad .members: %v %v, want %s", ok, err, want)
	}
}

// A view of another node's configs: its configs from pmxcfs, and nothing
// run here in its name.
func TestForConfigsOf(t *testing.T) {
	n := tree(t, nil)
	v := ForConfigsOf(n, "pve3")
	if v.Paths.Configs != ConfigDir(n.Paths, "pve3") || v.Paths.VMConfig(390) != n.Paths.Root+"/etc/pve/nodes/pve3/qemu-server/390.conf" {
		t.Errorf("configs %s", v.Paths.Configs)
	}
	_, err := v.Runner.Run(context.Background(), "lvs")
	if err == nil || err.Error() != "lvs not run: node pve3 did not answer: its VMs are read from their configs on this node, where nothing run describes pve3" {
		t.Errorf("runner: %v", err)
	}
	if _, ok := n.Runner.(node.Exec); !ok || n.Paths.Configs == v.Paths.Configs {
		t.Error("the node itself changed")
	}
}
