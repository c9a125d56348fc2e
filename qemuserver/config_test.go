package qemuserver

import (
	"errors"
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
	if c.Main["args"] != "-cpu host,+kvm_pv_eoi" || c.Main["scsi01"] == "" {
		t.Errorf("args %q scsi01 %q", c.Main["args"], c.Main["scsi01"])
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

	for _, bad := range []string{"name:\n", "Name: x\n", "a1b: x\n", "just text\n", "scsi0 local-lvm:vm-1-disk-0\n"} {
		_, err := ParseConfig(strings.NewReader(bad), "x.conf")
		if !errors.Is(err, ErrParse) || !strings.Contains(err.Error(), "x.conf line 1") {
			t.Errorf("%q: %v", bad, err)
		}
	}
	_, err = ParseConfig(strings.NewReader("name: "+strings.Repeat("x", 5<<20)+"\n"), "big.conf")
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
