package pveoracle

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// The oracle answers as Proxmox does for lines it keeps, drops and
// refuses, and the answers come back in the order asked, split over
// processes or not.
func TestParse(t *testing.T) {
	o := For(t)
	cfgs := []Config{
		{Name: "clean", VMID: 100, Text: "scsi0: local-lvm:vm-100-disk-0,size=8G\nscsihw: virtio-scsi-single\n"},
		{Name: "unknown key", VMID: 101, Text: "foo: bar\nname: x\n"},
		{Name: "bad value", VMID: 102, Text: "scsi0: local-lvm:vm-102-disk-0,cache=bogus\n"},
		{Name: "default vmid", Text: "name: y\n"},
	}
	res, err := o.Parse(context.Background(), cfgs)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != len(cfgs) {
		t.Fatalf("%d answers for %d configs", len(res), len(cfgs))
	}
	verdicts := func(r Result) string {
		var v []string
		for _, l := range r.Parse.Lines {
			v = append(v, fmt.Sprintf("%d:%s:%s", l.Line, l.Key, l.Verdict))
		}
		return strings.Join(v, " ")
	}
	want := []string{
		"1:scsi0:ok 2:scsihw:ok",
		"1:foo:dropped 2:name:ok",
		"1:scsi0:dropped",
		"1:name:ok",
	}
	for i, r := range res {
		if got := verdicts(r); got != want[i] {
			t.Errorf("%s: lines %q, want %q", cfgs[i].Name, got, want[i])
		}
		if r.Cmd != nil {
			t.Errorf("%s: a command line from --parse-only", cfgs[i].Name)
		}
	}
	if res[0].VMID != 100 || res[3].VMID != 8006 {
		t.Errorf("vmids %d, %d; want 100 and the driver's default 8006", res[0].VMID, res[3].VMID)
	}
	if !res[0].Parse.OK || res[1].Parse.OK {
		t.Errorf("ok: clean %v, unknown key %v", res[0].Parse.OK, res[1].Parse.OK)
	}
	if m := res[1].Parse.Lines[0].Messages; len(m) != 1 || !strings.Contains(m[0], "unknown setting 'foo'") {
		t.Errorf("unknown key's message %q", m)
	}
}

func TestParseManySplitsInOrder(t *testing.T) {
	o := For(t)
	var cfgs []Config
	for i := range 2*perProcess + 7 {
		cfgs = append(cfgs, Config{Name: fmt.Sprint(i), VMID: 100 + i, Text: fmt.Sprintf("name: vm%d\n", i)})
	}
	res, err := o.Parse(context.Background(), cfgs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.VMID != 100+i || r.Config.Name != fmt.Sprint(i) || len(r.Parse.Lines) != 1 || r.Parse.Lines[0].Text != fmt.Sprintf("name: vm%d", i) {
			t.Fatalf("answer %d is for vmid %d %+v", i, r.VMID, r.Parse.Lines)
		}
	}
}

func TestCmdline(t *testing.T) {
	o := For(t)
	storage := "lvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n\tcontent images\n"
	cfg := Config{Name: "lvmthin", VMID: 370, Text: "scsihw: virtio-scsi-single\nscsi1: local-lvm:vm-370-disk-1,iothread=1,cache=writeback,size=8G\n"}
	for _, tc := range []struct {
		qemu string
		want string // an argument that only this generation has
	}{
		{"11.0.0", `"node-name":"drive-scsi1"`},
		{"9.2.0", "if=none,id=drive-scsi1"},
	} {
		res, err := o.Cmdline(context.Background(), CmdOptions{StorageCfg: storage, QEMUVersion: tc.qemu}, []Config{cfg})
		if err != nil {
			t.Fatal(err)
		}
		c := res[0].Cmd
		if c == nil || !c.OK || c.QEMUVersion != tc.qemu {
			t.Fatalf("QEMU %s: %+v", tc.qemu, c)
		}
		if !strings.Contains(strings.Join(c.Args, "\n"), tc.want) {
			t.Errorf("QEMU %s: no %s in %q", tc.qemu, tc.want, c.Args)
		}
		// -m's value, a JSON number in the driver's answer, comes back as text.
		if i := slices.Index(c.Args, "-m"); i < 0 || i+1 == len(c.Args) || c.Args[i+1] != "512" {
			t.Errorf("QEMU %s: no -m 512 in %q", tc.qemu, c.Args)
		}
	}
	res, err := o.Cmdline(context.Background(), CmdOptions{StorageCfg: storage}, []Config{{Name: "missing storage", VMID: 100, Text: "scsi0: nope:vm-100-disk-0\n"}})
	if err != nil {
		t.Fatal(err)
	}
	if c := res[0].Cmd; c == nil || c.OK || string(c.Error) != "storage 'nope' does not exist" {
		t.Errorf("missing storage: %+v", c)
	}
}

func TestQmSet(t *testing.T) {
	o := For(t)
	storage := "lvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n\tcontent images\n"
	conf := "scsihw: virtio-scsi-single\nscsi1: local-lvm:vm-100-disk-1,size=8G\n"
	ok, err := o.QmSet(context.Background(), QmSetRequest{VMID: 100, Args: []string{"--scsi1", "local-lvm:vm-100-disk-1,iothread=1,size=8G"}, Config: conf, StorageCfg: storage})
	if err != nil {
		t.Fatal(err)
	}
	if !ok.Accepted || ok.Refusal() != "" || !strings.Contains(ok.NewConfig, "scsi1: local-lvm:vm-100-disk-1,iothread=1,size=8G\n") {
		t.Errorf("accepted change: %+v", ok)
	}
	bad, err := o.QmSet(context.Background(), QmSetRequest{VMID: 100, Args: []string{"--scsi1", "local-lvm:vm-100-disk-1,cache=bogus"}, Config: conf, StorageCfg: storage})
	if err != nil {
		t.Fatal(err)
	}
	if bad.Accepted || bad.NewConfig != "" || !strings.Contains(bad.Refusal(), "value 'bogus' does not have a value in the enumeration") {
		t.Errorf("refused change: %+v (%s)", bad, bad.Refusal())
	}
	race, err := o.QmSet(context.Background(), QmSetRequest{VMID: 100, Args: []string{"--digest", "0000000000000000000000000000000000000000", "--name", "x"}, Config: conf, StorageCfg: storage})
	if err != nil {
		t.Fatal(err)
	}
	if race.Accepted || string(race.Error) != "checksum mismatch (file change by other user?)" {
		t.Errorf("stale digest: %+v", race)
	}
}

// Proxmox drops a section that lacks an option its type requires, keeps
// one whose path it fills in itself, and says which options those are.
func TestStorages(t *testing.T) {
	o := For(t)
	res, err := o.Storages(context.Background(), []string{
		"dir: local\n\tpath /var/lib/vz\n\nzfs: zz\n\tpool tank\n\tportal 192.0.2.1\n\ttarget iqn.x\n\tiscsiprovider LIO\n\tlio_tpg tpg1\n\nnfs: nn\n\tserver 192.0.2.2\n\texport /v\n",
		"lvmthin: tt\n\tvgname pve\n",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Files[0].Kept; !slices.Equal(got, []string{"local", "nn"}) {
		t.Errorf("kept %q, want local and nn (zz lacks blocksize)", got)
	}
	if w := strings.Join(res.Files[0].Warnings, "\n"); !strings.Contains(w, "skip section 'zz'") || !strings.Contains(w, "blocksize") {
		t.Errorf("warnings %q", w)
	}
	if got := res.Files[1].Kept; !slices.Equal(got, []string{"local"}) {
		t.Errorf("kept %q, want only the local Proxmox adds (tt lacks thinpool)", got)
	}
	if got := res.Required["zfs"]; !slices.Equal(got, []string{"blocksize", "iscsiprovider", "pool", "portal", "target"}) {
		t.Errorf("zfs requires %q", got)
	}
	if got := res.Required["nfs"]; !slices.Equal(got, []string{"export", "server"}) {
		t.Errorf("nfs requires %q (its path defaults to /mnt/pve/<id>)", got)
	}
}
