package qmp

import "testing"

// TestBacking walks a volume chain's graph as QEMU 10.1 lists it
// (throttle -> qcow2 -> host_device, each qcow2's backing another qcow2):
// newest first, each layer with its protocol node; a cycle ends the walk.
func TestBacking(t *testing.T) {
	g := &Graph{Nodes: map[string]BlockNode{
		"drive-scsi0": {Name: "drive-scsi0", Driver: "throttle"},
		"fmt0":        {Name: "fmt0", Driver: "qcow2"}, "file0": {Name: "file0", Driver: "host_device", Filename: "/dev/vg/vm-100-disk-0.qcow2"},
		"fmt1": {Name: "fmt1", Driver: "qcow2"}, "file1": {Name: "file1", Driver: "host_device", Filename: "/dev/vg/snap_vm-100-disk-0_s2.qcow2"},
		"fmt2": {Name: "fmt2", Driver: "qcow2"}, "file2": {Name: "file2", Driver: "host_device", Filename: "/dev/vg/snap_vm-100-disk-0_s1.qcow2"},
	}, Children: map[string]map[string]string{
		"drive-scsi0": {"file": "fmt0"},
		"fmt0":        {"file": "file0", "backing": "fmt1"},
		"fmt1":        {"file": "file1", "backing": "fmt2"},
		"fmt2":        {"file": "file2"},
	}}
	ch, _ := g.Chain("drive-scsi0")
	b := g.Backing(ch.Format.Name)
	if len(b) != 2 || b[0].Format.Name != "fmt1" || b[0].Protocol.Filename != "/dev/vg/snap_vm-100-disk-0_s2.qcow2" || b[1].Protocol.Name != "file2" {
		t.Fatalf("%+v", b)
	}
	if len(g.Backing("fmt2")) != 0 || len(g.Backing("nope")) != 0 {
		t.Error("no backing")
	}
	g.Children["fmt2"]["backing"] = "fmt1" // a cycle
	if n := len(g.Backing("fmt0")); n != 2 {
		t.Errorf("cycle: %d layers, want 2", n)
	}
}
