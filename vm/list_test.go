package vm

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
)

// List: the VMIDs of the configs qemu-server names, sorted; a tree that
// is not a node is bad input naming the path, never "no VMs".
func TestList(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "etc/pve/qemu-server")
	if err := os.MkdirAll(filepath.Join(dir, "372.conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"101.conf", "100.conf", "notes.conf", "0370.conf", "99.conf", "1000000000.conf", "103.conf.tmp"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if ids, err := List(node.NewPaths(root, "", "")); err != nil || !reflect.DeepEqual(ids, []int{100, 101, 372}) {
		t.Errorf("List = %v, %v", ids, err)
	}
	// Another node's configs (cluster mode): its directory, not this one's.
	other := filepath.Join(root, "etc/pve/nodes/pve2/qemu-server")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(other, "380.conf"), nil, 0o644)
	p := node.NewPaths(root, "", "")
	p.Configs = other
	if ids, err := List(p); err != nil || !reflect.DeepEqual(ids, []int{380}) {
		t.Errorf("pve2's: %v, %v", ids, err)
	}
	empty := t.TempDir()
	os.MkdirAll(filepath.Join(empty, "etc/pve/qemu-server"), 0o755)
	if ids, err := List(node.NewPaths(empty, "", "")); err != nil || len(ids) != 0 {
		t.Errorf("no VMs: %v, %v", ids, err)
	}
	noQS := t.TempDir()
	os.MkdirAll(filepath.Join(noQS, "etc/pve"), 0o755)
	for root, msg := range map[string]string{
		"/nonexistent/pvediskcheck": "/nonexistent/pvediskcheck is not a Proxmox VE node: no /nonexistent/pvediskcheck/etc/pve",
		noQS:                        noQS + " is not a Proxmox VE node: no directory " + noQS + "/etc/pve/qemu-server",
	} {
		ids, err := List(node.NewPaths(root, "", ""))
		if exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), msg) || ids != nil {
			t.Errorf("%s: %v %v, want exit 2 with %q", root, ids, err, msg)
		}
	}
}
