package qemuserver

import (
	"reflect"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

// pve-vmid is ^[1-9][0-9]{2,8}$ (PVE::JSONSchema).
func TestParseVMID(t *testing.T) {
	for in, want := range map[string]int{"100": 100, "370": 370, "999999999": 999999999, "8006": 8006} {
		if got, err := ParseVMID(in); err != nil || got != want {
			t.Errorf("ParseVMID(%q) = %d, %v", in, got, err)
		}
	}
	for in, why := range map[string]string{
		"0370": "leading zero", "00370": "leading zero", "+370": "leading zero", "370 ": "not a number",
		" 370": "not a number", "3.7e2": "not a number", "abc": "not a number", "": "not a number",
		"99": "out of range", "1000000000": "out of range", "-370": "out of range", "0": "leading zero",
		"３７０": "not a number",
	} {
		_, err := ParseVMID(in)
		if err == nil || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), "invalid VMID") {
			t.Errorf("ParseVMID(%q): %v, want %q", in, err, why)
		}
		if c := exitcode.Of(err); c != exitcode.Usage {
			t.Errorf("ParseVMID(%q): exit %d, want 2 (bad input)", in, c)
		}
	}
	if _, err := ParseVMID(strings.Repeat("9", 5000)); err == nil || len(err.Error()) > 200 {
		t.Errorf("long VMID: %v", err)
	}
}

func TestParseConfigShapes(t *testing.T) {
	const conf = `#first line of the description
#second
agent: 1
description: more%20text
boot: order=scsi0;ide2
cdrom: local:iso/old.iso
scsi0: local-lvm:vm-100-disk-0,size=32G
scsi0: local-lvm:vm-100-disk-0,cache=writeback,size=32G
efidisk0: local-lvm:vm-100-disk-1,efitype=4m,size=4M
tpmstate0: local-lvm:vm-100-disk-2,size=4M,version=v2.0
unused0: local-lvm:vm-100-disk-9
delete: scsi0
snapstate: prepare
args: -cpu host,+kvm_pv_eoi
scsi01: local-lvm:vm-100-disk-7

[pending]
scsi1: local-lvm:vm-100-disk-3,size=8G
delete: ide2,!scsi0
# a pending comment

[special:cloudinit]
ipconfig0: ip=dhcp

[Working_Snapshot-1]
scsi0: local-lvm:vm-100-disk-0,size=16G
snaptime: 1700000000

[]
junk that is skipped with its unknown section
`
	c, err := ParseConfig(strings.NewReader(conf), "/etc/pve/qemu-server/100.conf")
	if err != nil {
		t.Fatal(err)
	}
	if c.Main["scsi0"] != "local-lvm:vm-100-disk-0,cache=writeback,size=32G" || c.Lines["scsi0"] != 8 {
		t.Errorf("a key given twice keeps its last value: %q line %d", c.Main["scsi0"], c.Lines["scsi0"])
	}
	if c.Main["ide2"] != "local:iso/old.iso" {
		t.Errorf("cdrom is ide2: %q", c.Main["ide2"])
	}
	for _, k := range []string{"delete", "snapstate", "cdrom", "description", "snaptime", "ipconfig0"} {
		if _, ok := c.Main[k]; ok {
			t.Errorf("main section has %s", k)
		}
	}
	// scsi01 is no disk slot: Proxmox drops the line ("unknown setting"),
	// and the disk with it, an error for check.
	if _, ok := c.Main["scsi01"]; c.Main["args"] != "-cpu host,+kvm_pv_eoi" || ok || len(c.DroppedDisks) != 1 || !strings.Contains(c.DroppedDisks[0], "scsi01 is no disk slot") {
		t.Errorf("args %q scsi01 %v dropped %q", c.Main["args"], ok, c.DroppedDisks)
	}
	if c.Description != "first line of the description\nsecond\nmore%20text" {
		t.Errorf("description %q", c.Description)
	}
	if !reflect.DeepEqual(c.Pending, map[string]string{"scsi1": "local-lvm:vm-100-disk-3,size=8G"}) || !reflect.DeepEqual(c.PendingDelete, []string{"ide2", "scsi0"}) {
		t.Errorf("pending %v delete %v", c.Pending, c.PendingDelete)
	}
	if got := DiskKeys(c.Main); !reflect.DeepEqual(got, []string{"ide2", "scsi0", "efidisk0", "tpmstate0"}) {
		t.Errorf("disks %v", got)
	}
	if got := DiskKeys(c.Next()); !reflect.DeepEqual(got, []string{"scsi1", "efidisk0", "tpmstate0"}) {
		t.Errorf("next-start disks %v", got)
	}
	if v, ok := c.Get("agent"); !ok || v != "1" {
		t.Errorf("Get(agent) = %q %v", v, ok)
	}

	if len(c.Skipped) != 1 || !strings.Contains(c.Skipped[0], "100.conf line 12: delete: outside [PENDING]") {
		t.Errorf("skipped %q", c.Skipped)
	}
	// The pending delete: is no warning.
	if p, _ := ParseConfig(strings.NewReader("[PENDING]\ndelete: scsi0\n"), "p.conf"); len(p.Skipped) != 0 || !reflect.DeepEqual(p.PendingDelete, []string{"scsi0"}) {
		t.Errorf("pending delete: %q %v", p.Skipped, p.PendingDelete)
	}
}

// TestParseConfigLenient (issue 26 #3): parse_vm_config (QemuServer.pm,
// non-strict, as every start and qm command reads) skips a line that is not
// `key: value` and drops a key whose value fails its schema; the VM starts.
// So the rest of the file is read, and each skipped line is said once.
func TestParseConfigLenient(t *testing.T) {
	for _, c := range []struct {
		name, conf string
		skipped    []string          // substrings, one per Skipped entry, in order
		want       map[string]string // main-section keys kept
		gone       []string          // keys dropped
	}{
		// 5 of 46 real configs: Proxmox's pattern needs a value.
		{"empty boot", "boot:\nscsi0: local-lvm:vm-105-disk-0,size=20G\n",
			[]string{`x.conf line 1: "boot:" is not a ` + "`key: value`" + ` line: Proxmox skips it ("unable to parse config")`},
			map[string]string{"scsi0": "local-lvm:vm-105-disk-0,size=20G"}, []string{"boot"}},
		// "boot: " has a value, a blank: Proxmox keeps it (the cfg2cmd test
		// bootorder-empty), and its blank part is skipped by the format.
		{"blank boot", "boot: \nostype: l26\n", nil, map[string]string{"boot": " ", "ostype": "l26"}, nil},
		// A `qm config` paste that begins with Proxmox's own warning.
		{"pasted warning", "vm 105 - unable to parse config: boot:\nostype: l26\n",
			[]string{`x.conf line 1: "vm 105 - unable to parse config: boot:" is not`}, map[string]string{"ostype": "l26"}, nil},
		{"no colon", "scsi0 local-lvm:vm-1-disk-0\nmemory: 512\n", []string{"line 1: \"scsi0 local-lvm:vm-1-disk-0\""}, map[string]string{"memory": "512"}, []string{"scsi0"}},
		{"capital key", "Name: x\n", []string{`line 1: "Name: x"`}, map[string]string{}, []string{"Name", "name"}},
		{"digit inside key", "a1b: x\n", []string{`line 1: "a1b: x"`}, map[string]string{}, []string{"a1b"}},
		{"empty name", "name:\n", []string{`line 1: "name:"`}, map[string]string{}, []string{"name"}},
		{"text", "just text\nname: ok\n", []string{`line 1: "just text"`}, map[string]string{"name": "ok"}, nil},
		// A value that fails its schema drops that key only.
		// parse_vm_config's check_type checks no enumeration: an unknown
		// scsihw or ostype is kept (asked of Proxmox: TestParseAsProxmox).
		{"scsihw unknown", "scsihw: virtio-scsi\nscsi0: local-lvm:vm-1-disk-0\n", nil,
			map[string]string{"scsihw": "virtio-scsi", "scsi0": "local-lvm:vm-1-disk-0"}, nil},
		{"ostype unknown", "ostype: linux\n", nil, map[string]string{"ostype": "linux"}, nil},
		{"template not a boolean", "template: maybe\n", []string{`template: value "maybe" is not a boolean`}, map[string]string{}, []string{"template"}},
		{"boot with efidisk0", "boot: order=efidisk0;scsi0\n", []string{`boot: boot "order=efidisk0;scsi0": invalid boot device "efidisk0"`}, map[string]string{}, []string{"boot"}},
		{"boot legacy bad", "boot: cdx\n", []string{`legacy "cdx" does not match [acdn]{1,4}`}, map[string]string{}, []string{"boot"}},
		{"boot unknown key", "boot: first=scsi0\n", []string{`invalid key "first"`}, map[string]string{}, []string{"boot"}},
		{"boot order empty", "boot: order=\n", []string{`"order=" is not key=value`}, map[string]string{}, []string{"boot"}},
		{"boot twice", "boot: cd,dc\n", []string{`duplicate key legacy`}, map[string]string{}, []string{"boot"}},
		// A pending value is checked as a main one.
		{"pending template", "template: 0\n[PENDING]\ntemplate: fast\n", []string{"line 3: template"}, map[string]string{"template": "0"}, nil},
		// Accepted: nothing skipped.
		{"valid", "boot: order=scsi0;ide2;net0;usb13;hostpci15\nscsihw: megasas\nostype: win11\ntemplate: 1\n", nil,
			map[string]string{"boot": "order=scsi0;ide2;net0;usb13;hostpci15", "scsihw": "megasas", "ostype": "win11", "template": "1"}, nil},
		{"legacy boot and order", "boot: legacy=cdn,order=virtio0 sata5\n", nil, map[string]string{"boot": "legacy=cdn,order=virtio0 sata5"}, nil},
		{"usb14 is none", "boot: order=usb14\n", []string{`invalid boot device "usb14"`}, map[string]string{}, []string{"boot"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseConfig(strings.NewReader(c.conf), "x.conf")
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Skipped) != len(c.skipped) {
				t.Fatalf("skipped %q, want %d", cfg.Skipped, len(c.skipped))
			}
			for i, want := range c.skipped {
				if !strings.Contains(cfg.Skipped[i], want) {
					t.Errorf("skipped[%d] = %q, want %q", i, cfg.Skipped[i], want)
				}
			}
			if !reflect.DeepEqual(cfg.Main, c.want) {
				t.Errorf("main %q, want %q", cfg.Main, c.want)
			}
			for _, k := range c.gone {
				if _, ok := cfg.Main[k]; ok {
					t.Errorf("%s kept", k)
				}
			}
		})
	}
	_, err := ParseConfig(strings.NewReader("name: "+strings.Repeat("x", 5<<20)+"\n"), "big.conf")
	if err == nil || !strings.Contains(err.Error(), "big.conf") {
		t.Errorf("5 MB line: %v", err)
	}
}

// TestDigest: the digest is sha1_hex of the raw file, as qemu-server's
// parse_vm_config computes it (the values are sha1sum(1)'s), so one byte of
// another admin's edit changes it; and qm's refusals of a stale --digest
// are told from its other errors.
func TestDigest(t *testing.T) {
	c, err := LoadConfig("testdata/shapes/pending-604.conf", 604)
	if err != nil {
		t.Fatal(err)
	}
	if c.Digest != "2f0e474206e67c9980d0540033eb4538ac20eb59" {
		t.Errorf("digest %s", c.Digest)
	}
	if d := Digest(nil); d != "da39a3ee5e6b4b0d3255bfef95601890afd80709" {
		t.Errorf("empty file: %s", d)
	}
	if Digest([]byte("scsi0: local-lvm:vm-1-disk-0\n")) == Digest([]byte("scsi0: local-lvm:vm-1-disk-0 \n")) {
		t.Error("a changed byte keeps the digest")
	}
	for msg, want := range map[string]bool{
		"checksum mismatch (file change by other user?)":                                   true, // update_vm_api (qm set)
		"detected modified configuration - file changed by other user? Try again.":         true, // PVE::Tools::assert_if_modified
		"VM 370 is locked (backup)":                                                        false,
		"400 Parameter verification failed.\ndigest: value may only be 40 characters long": false,
		"": false,
	} {
		if DigestMismatch(msg) != want {
			t.Errorf("DigestMismatch(%q) = %v", msg, !want)
		}
	}
}

// [special:fleecing]'s fleecing-images (qemu-server's own test input
// parse-config-input/fleecing-section.conf has this shape): kept as a
// list split as PVE::Tools::split_list splits, the section name in any
// case as parse_vm_config matches it; its keys never reach the main
// section, and the same key elsewhere is not it.
func TestFleecingImages(t *testing.T) {
	for _, c := range []struct {
		conf string
		want []string
	}{
		{"scsi0: nfs:120/vm-120-disk-0.qcow2,iothread=1,size=4G\n\n[special:fleecing]\nfleecing-images: zfs:vm-120-fleece-0\n", []string{"zfs:vm-120-fleece-0"}},
		{"scsi0: a:b\n[SPECIAL:Fleecing]\nfleecing-images: zfs:vm-120-fleece-0,local-lvm:vm-120-fleece-1; nfs:120/vm-120-fleece-2.qcow2\n", []string{"zfs:vm-120-fleece-0", "local-lvm:vm-120-fleece-1", "nfs:120/vm-120-fleece-2.qcow2"}},
		{"scsi0: a:b\n[special:fleecing]\n", nil},
		{"scsi0: a:b\n[snap1]\nfleecing-images: zfs:vm-120-fleece-0\n", nil},
		{"scsi0: a:b\n", nil},
	} {
		cfg, err := ParseConfig(strings.NewReader(c.conf), "120.conf")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(cfg.FleecingImages, c.want) || len(cfg.Main) != 1 || len(cfg.Skipped) != 0 {
			t.Errorf("%q: images %q, main %v, skipped %v", c.conf, cfg.FleecingImages, cfg.Main, cfg.Skipped)
		}
	}
}
