package check

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/internal/fakerun"
	"github.com/pvediskcheck/pvediskcheck/lvm"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

func TestParseSeverity(t *testing.T) {
	for in, want := range map[string]Severity{"warning": Warning, "error": Error} {
		if got, err := ParseSeverity(in); got != want || err != nil {
			t.Errorf("%s: %s %v", in, got, err)
		}
	}
	for _, bad := range []string{"info", "Warning", "", "errors"} {
		if _, err := ParseSeverity(bad); exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "--fail-on") {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

// TestTargets (issue 15 #2): a tree that is not a Proxmox VE node is bad
// input naming the path, never "0 VM(s) checked".
func TestTargets(t *testing.T) {
	tn := newNode(t)
	tn.conf(101, "memory: 512\n")
	tn.conf(100, "memory: 512\n")
	tn.write("etc/pve/qemu-server/notes.conf", "")
	tn.write("etc/pve/qemu-server/0370.conf", "")
	if err := os.Mkdir(filepath.Join(tn.root, "etc/pve/qemu-server/372.conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	ids, err := Targets(tn.n.Paths, nil, true)
	if err != nil || !reflect.DeepEqual(ids, []int{100, 101, 372}) {
		t.Errorf("--all: %v %v", ids, err)
	}
	if ids, err := Targets(tn.n.Paths, []string{"101", "100", "372"}, false); err != nil || !reflect.DeepEqual(ids, []int{101, 100, 372}) {
		t.Errorf("named: %v %v", ids, err)
	}
	empty := t.TempDir()
	if err := os.MkdirAll(filepath.Join(empty, "etc/pve/qemu-server"), 0o755); err != nil {
		t.Fatal(err)
	}
	if ids, err := Targets(node.NewPaths(empty, "", ""), nil, true); err != nil || len(ids) != 0 {
		t.Errorf("a node without VMs: %v %v", ids, err)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	noPVE := t.TempDir()
	noQS := t.TempDir()
	os.MkdirAll(filepath.Join(noQS, "etc/pve"), 0o755)
	pveFile := t.TempDir()
	os.MkdirAll(filepath.Join(pveFile, "etc"), 0o755)
	os.WriteFile(filepath.Join(pveFile, "etc/pve"), nil, 0o644)
	for _, c := range []struct {
		name string
		root string
		args []string
		all  bool
		msg  string
	}{
		{"missing root", "/nonexistent/pvediskcheck", nil, true, "/nonexistent/pvediskcheck is not a Proxmox VE node: no /nonexistent/pvediskcheck/etc/pve"},
		{"a file as root", file, nil, true, file + " is not a Proxmox VE node"},
		{"no etc/pve", noPVE, nil, true, noPVE + " is not a Proxmox VE node: no " + noPVE + "/etc/pve"},
		{"etc/pve is a file", pveFile, nil, true, pveFile + "/etc/pve is not a directory"},
		{"no qemu-server", noQS, nil, true, noQS + " is not a Proxmox VE node: no directory " + noQS + "/etc/pve/qemu-server"},
		{"missing root, one VM", "/nonexistent/pvediskcheck", []string{"100"}, false, "is not a Proxmox VE node"},
		{"unknown VM", tn.root, []string{"100", "999"}, false, "VM 999: no such VM on this node (no " + tn.root + "/etc/pve/qemu-server/999.conf)"},
		{"bad VMID", tn.root, []string{"37x"}, false, `invalid VMID "37x"`},
		{"both", tn.root, []string{"100"}, true, "give VMIDs or --all, not both"},
		{"neither", tn.root, nil, false, "missing VMID (or --all)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ids, err := Targets(node.NewPaths(c.root, "", ""), c.args, c.all)
			if exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), c.msg) || ids != nil {
				t.Errorf("%v %v (exit %d), want exit 2 with %q", ids, err, exitcode.Of(err), c.msg)
			}
		})
	}
}

func TestReport(t *testing.T) {
	f := func(s Severity) Finding { return Finding{Severity: s, Code: CodeDrift} }
	r := Summarize([]VMResult{
		{VMID: 100, Findings: []Finding{f(Error), f(Warning), f(Info), f(Info)}},
		{VMID: 101, Findings: []Finding{f(Warning)}},
	})
	if r.Summary != (Summary{VMs: 2, Errors: 1, Warnings: 2, Infos: 2}) {
		t.Errorf("%+v", r.Summary)
	}
	if !r.Fails(Warning) || !r.Fails(Error) || r.Err() != nil {
		t.Errorf("fails %v %v err %v", r.Fails(Warning), r.Fails(Error), r.Err())
	}
	w := Summarize([]VMResult{{Findings: []Finding{f(Warning), f(Info)}}})
	if !w.Fails(Warning) || w.Fails(Error) {
		t.Errorf("warnings only: %v %v", w.Fails(Warning), w.Fails(Error))
	}
	i := Summarize([]VMResult{{Findings: []Finding{f(Info)}}, {}})
	if i.Fails(Warning) || i.Fails(Error) || i.Summary.VMs != 2 {
		t.Errorf("infos only: %+v", i.Summary)
	}
	// An unreadable config (2) outranks an unread running state (3),
	// whatever the order; both are named.
	unread := exitcode.Wrap(exitcode.Unreachable, "VM 101", errors.New("busy"))
	bad := exitcode.Usagef("VM 102: not readable")
	for _, vms := range [][]VMResult{{{VMID: 101, Err: unread}, {VMID: 102, Err: bad}}, {{VMID: 102, Err: bad}, {VMID: 101, Err: unread}}} {
		err := Summarize(vms).Err()
		if exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "VM 101: busy") || !strings.Contains(err.Error(), "VM 102: not readable") {
			t.Errorf("%v (exit %d)", err, exitcode.Of(err))
		}
	}
	if err := Summarize([]VMResult{{}, {Err: unread}}).Err(); exitcode.Of(err) != exitcode.Unreachable || err.Error() != "VM 101: busy" {
		t.Errorf("%v", err)
	}
}

// TestRun: several VMs at once, one thin-pool measurement for the run, the
// results in the order asked.
func TestRun(t *testing.T) {
	tn := newNode(t)
	for _, id := range []int{100, 101, 102, 103} {
		tn.conf(id, "scsi0: local-lvm:vm-100-disk-0,cache=unsafe,discard=on\n")
	}
	tn.write("etc/pve/qemu-server/103.conf", "broken line\n")
	// Run uses the node's runner, here one without lvs: a note, the same
	// for every VM, from the one lvs run of the run.
	r := &fakerun.Runner{}
	rep := Run(context.Background(), r.Node(tn.n), []int{103, 100, 101, 102}, Options{Parallel: 2})
	if len(rep.VMs) != 4 || rep.VMs[0].VMID != 103 || rep.VMs[3].VMID != 102 || rep.Summary.Errors != 3 || rep.Err() != nil {
		t.Fatalf("%+v", rep)
	}
	if got := r.Calls(); len(got) != 1 || got[0] != strings.Join(lvm.Argv(), " ") {
		t.Errorf("ran %q, want lvs once", got)
	}
	for _, v := range rep.VMs[1:] {
		if got := summary(v); !reflect.DeepEqual(got, []string{"error cache-unsafe scsi0"}) || len(v.Notes) != 1 || !strings.Contains(v.Notes[0], "thin-overcommit not checked") || !strings.Contains(v.Notes[0], "executable file not found") {
			t.Errorf("VM %d: %q %v", v.VMID, got, v.Notes)
		}
	}
	// Proxmox skips the line and the VM has no disk: a note, no finding.
	if v := rep.VMs[0]; len(v.Findings) != 0 || len(v.Notes) != 1 || !strings.Contains(v.Notes[0], `line 1: "broken line" is not a `) {
		t.Errorf("103: %+v", v)
	}
	if rep := Run(context.Background(), tn.n, nil, Options{}); len(rep.VMs) != 0 || rep.VMs == nil && false {
		t.Errorf("%+v", rep)
	}
	// VMLoaded: the VM as loaded when its config loads (103's, its broken
	// line skipped), stopped: no live error; none for one that does not
	// (104's is a directory), with the result VM gives.
	if err := os.Mkdir(filepath.Join(tn.root, "etc/pve/qemu-server/104.conf"), 0o755); err != nil {
		t.Fatal(err)
	}
	pools := thinpool.NewCache(quietRunner())
	n := quietRunner().Node(tn.n)
	for _, id := range []int{103, 104, 100} {
		res, set := VMLoaded(context.Background(), n, id, Options{}, pools)
		if want := VM(context.Background(), n, id, Options{}, pools); !reflect.DeepEqual(res, want) {
			t.Errorf("VM %d: VMLoaded's result %+v, VM's %+v", id, res, want)
		}
		var v *vm.VM
		if set != nil {
			v = set.VM
		}
		switch {
		case set != nil && set.AskErr != nil:
			t.Errorf("VM %d: live error %v", id, set.AskErr)
		case id == 104 && (v != nil || res.Err == nil):
			t.Errorf("104: loaded %+v, err %v", v, res.Err)
		case id != 104 && (v == nil || v.VMID != id || v.Running || len(v.Disks) != 1 && id != 103):
			t.Errorf("VM %d: loaded %+v", id, v)
		}
	}
	// VM is judged with the node's runner.
	v := VM(context.Background(), quietRunner().Node(tn.n), 100, Options{}, thinpool.NewCache(quietRunner()))
	if got := summary(v); !reflect.DeepEqual(got, []string{"error cache-unsafe scsi0"}) || len(v.Notes) != 0 {
		t.Errorf("%q %v", got, v.Notes)
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"local-lvm:vm-100-disk-0,discard=on,size=32G": "local-lvm:vm-100-disk-0,discard=on,size=32G",
		"order=scsi0;net0":                            "'order=scsi0;net0'",
		"":                                            "''",
		"it's":                                        `'it'\''s'`,
		"/dev/disk/by-id/x y":                         "'/dev/disk/by-id/x y'",
		"a$b":                                         "'a$b'",
		"serial=AB%20C@x+1":                           "serial=AB%20C@x+1",
		"az-AZ_09":                                    "az-AZ_09",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
	if got := shellJoin([]string{"qm", "set", "100", "--boot", "order=a;b"}); got != "qm set 100 --boot 'order=a;b'" {
		t.Error(got)
	}
}

func TestValidateCommand(t *testing.T) {
	for _, ok := range [][]string{
		{"qm", "set", "100", "--scsi0", "local-lvm:vm-100-disk-0,discard=on"},
		{"qm", "set", "100", "--scsihw", "virtio-scsi-single"},
		{"qm", "set", "100", "--scsihw", "virtio-scsi-single", "--scsi1", "local-lvm:vm-100-disk-1,iothread=1"},
		{"qm", "set", "100", "--delete", "sata0", "--scsi1", "local-lvm:vm-100-disk-0", "--boot", "order=scsi1;net0;ide2"},
		// Proxmox's split_list drops the empty entry: qm set accepts it.
		{"qm", "set", "100", "--boot", "order=scsi0;;net0"},
	} {
		if err := ValidateCommand(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range [][]string{
		{"qm", "set", "100"},
		{"qm", "set", "100", "--scsi0"},
		{"qm", "reboot", "100", "--x", "y"},
		{"qm", "set", "37x", "--scsihw", "lsi"},
		{"qm", "set", "100", "scsi0", "x"},
		{"qm", "set", "100", "--scsi0", "local-lvm:a", "--scsi0", "local-lvm:b"},
		{"qm", "set", "100", "--virtio0", "local-lvm:a,ssd=1"},
		{"qm", "set", "100", "--scsi0", "local-lvm:a,mbps=1,mbps_rd=1"},
		{"qm", "set", "100", "--delete", "memory"},
		{"qm", "set", "100", "--scsihw", "virtio-scsi"},
		{"qm", "set", "100", "--boot", "order=floppy"},
		{"qm", "set", "100", "--boot", "order=efidisk0"},
		{"qm", "set", "100", "--boot", "order=net32"},
		{"qm", "set", "100", "--boot", "cdn"},
		{"qm", "set", "100", "--memory", "512"},
	} {
		if err := ValidateCommand(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
