package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/internal/pveoracle"
)

// testStorage is the storages the double's tests' configs name.
const testStorage = "dir: local\n\tpath /var/lib/vz\n\tcontent iso,vztmpl,backup\n\nlvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n\tcontent rootdir,images\n"

// TestMoveLeavesNoUnused (issue 26 #8); the configs are the ones
// Proxmox's update_vm writes (the double writes what pve-qmset answers:
// keys sorted, a drive's options in schema order): `qm set VMID --delete sata0 --scsi0
// <the same volume>` on a stopped VM, as qemu-server carries it out:
// update_vm writes scsi0 to [PENDING] and sata0 to its delete list, then
// vmconfig_apply_pending applies the delete first (vmconfig_register_unused_drive
// lists the volume as unused0) and the new scsi0, and write_vm_config drops
// an unusedN whose volume a disk of the main section or [PENDING] uses.
// So the move leaves no unused0; a delete alone leaves it.
func TestMoveLeavesNoUnused(t *testing.T) {
	const base = "ostype: l26\nboot: order=sata0;net0\nsata0: local-lvm:vm-105-disk-0,size=20G\nnet0: virtio=BC:24:11:00:00:01,bridge=vmbr0\n"
	for _, c := range []struct {
		name, conf string
		args       []string
		want       string
	}{
		{"move", base, []string{"--scsihw", "virtio-scsi-single", "--delete", "sata0", "--scsi0", "local-lvm:vm-105-disk-0,size=20G,discard=on", "--boot", "order=scsi0;net0"},
			"boot: order=scsi0;net0\nnet0: virtio=BC:24:11:00:00:01,bridge=vmbr0\nostype: l26\nscsi0: local-lvm:vm-105-disk-0,discard=on,size=20G\nscsihw: virtio-scsi-single\n"},
		// The options in another order: qemu-server deletes first whatever
		// the order, and the result is the same.
		// update_vm drops a deleted disk from the boot order: without
		// --boot the moved disk no longer boots.
		{"move, delete last, no --boot", base, []string{"--scsi0", "local-lvm:vm-105-disk-0,size=20G", "--delete", "sata0"},
			"boot: order=net0\nnet0: virtio=BC:24:11:00:00:01,bridge=vmbr0\nostype: l26\nscsi0: local-lvm:vm-105-disk-0,size=20G\n"},
		{"delete alone keeps the volume as unused0", base, []string{"--delete", "sata0"},
			"boot: order=net0\nnet0: virtio=BC:24:11:00:00:01,bridge=vmbr0\nostype: l26\nunused0: local-lvm:vm-105-disk-0\n"},
		// update_vm leaves an empty order as "boot: " (the oracle's answer).
		{"the last boot device goes: an empty boot line", "boot: order=sata0\nsata0: local-lvm:vm-105-disk-0\n", []string{"--delete", "sata0"}, "boot:  \nunused0: local-lvm:vm-105-disk-0\n"},
		{"legacy boot is left alone", "boot: cdn\nbootdisk: sata0\nsata0: local-lvm:vm-105-disk-0\n", []string{"--delete", "sata0", "--scsi0", "local-lvm:vm-105-disk-0", "--bootdisk", "scsi0"},
			"boot: cdn\nbootdisk: scsi0\nscsi0: local-lvm:vm-105-disk-0,size=32G\n"}, // size= of the volume (the oracle's pin: 32G)
		{"a CD-ROM is no volume of the VM", "ide2: local:iso/debian.iso,media=cdrom\n", []string{"--delete", "ide2"}, ""},
		// A pending disk that uses the volume counts (write_vm_config
		// collects the volumes of [PENDING] too).
		{"an unused volume a pending disk takes", "unused0: local-lvm:vm-105-disk-3\n[PENDING]\nscsi1: local-lvm:vm-105-disk-3\n", []string{"--memory", "1024"},
			"memory: 1024\nscsi1: local-lvm:vm-105-disk-3\n"},
		{"an unused volume no disk uses stays", "unused0: local-lvm:vm-105-disk-3\nscsi1: local-lvm:vm-105-disk-4\n", []string{"--memory", "1024"},
			"memory: 1024\nscsi1: local-lvm:vm-105-disk-4\nunused0: local-lvm:vm-105-disk-3\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := t.TempDir()
			t.Setenv("PVEDISKCHECK_FAKENODE_ROOT", r)
			fakenode.ServeQMOracle(t, r) // Proxmox answers through the test binary's one oracle
			p := filepath.Join(r, "etc/pve/qemu-server/105.conf")
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, []byte(c.conf), 0o644)
			os.WriteFile(filepath.Join(r, "etc/pve/storage.cfg"), []byte(testStorage), 0o644)
			var out, errs bytes.Buffer
			if code := run(append([]string{"set", "105"}, c.args...), &out, &errs); code != 0 {
				t.Fatalf("exit %d: %s", code, errs.String())
			}
			got, _ := os.ReadFile(p)
			if string(got) != c.want {
				t.Errorf("config\n%s\nwant\n%s", got, c.want)
			}
			if !strings.HasPrefix(out.String(), "update VM 105: -") {
				t.Errorf("stdout %q", out.String())
			}
		})
	}
}

// TestRefusesISOWithoutCDROM (issue 26 #6): qm set refuses an ISO-content
// volume unless media=cdrom (API2/Qemu.pm check_drive_param), and changes
// nothing; a path or a disk image is no ISO volume.
func TestRefusesISOWithoutCDROM(t *testing.T) {
	const conf = "sata0: p2b:iso/OpenCore-v21.iso,cache=unsafe,media=disk,size=150M\n"
	for _, c := range []struct {
		line string
		ok   bool
	}{
		{"p2b:iso/OpenCore-v21.iso,media=disk,size=150M", false},
		{"p2b:iso/OpenCore-v21.iso,size=150M", false},
		{"p2b:iso/OpenCore-v21.iso,media=cdrom", true},
		{"p2b:105/vm-105-disk-0.raw,size=150M", true},
		{"local-lvm:vm-105-disk-0,size=150M", true},
	} {
		r := t.TempDir()
		t.Setenv("PVEDISKCHECK_FAKENODE_ROOT", r)
		fakenode.ServeQMOracle(t, r) // Proxmox answers through the test binary's one oracle
		p := filepath.Join(r, "etc/pve/qemu-server/105.conf")
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte(conf), 0o644)
		os.WriteFile(filepath.Join(r, "etc/pve/storage.cfg"), []byte("dir: p2b\n\tpath /mnt/p2b\n\tcontent iso,images\n\nlvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n"), 0o644)
		var out, errs bytes.Buffer
		code := run([]string{"set", "105", "--sata0", c.line}, &out, &errs)
		got, _ := os.ReadFile(p)
		if c.ok != (code == 0) || !c.ok && (string(got) != conf || errs.String() != "400 Parameter verification failed.\nsata0: explicit 'media=cdrom' is required for iso images\n") {
			t.Errorf("%s: exit %d %q, config %q", c.line, code, errs.String(), got)
		}
	}
}

// TestRefusesLocked (issue 26 #7): qm set on a locked config fails with
// check_lock's message and changes nothing; --skiplock 1 writes the change
// (and is no config key).
func TestRefusesLocked(t *testing.T) {
	const conf = "lock: snapshot-delete\nmemory: 512\n"
	r := t.TempDir()
	t.Setenv("PVEDISKCHECK_FAKENODE_ROOT", r)
	fakenode.ServeQMOracle(t, r) // Proxmox answers through the test binary's one oracle
	p := filepath.Join(r, "etc/pve/qemu-server/105.conf")
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.WriteFile(p, []byte(conf), 0o644)
	var out, errs bytes.Buffer
	if code := run([]string{"set", "105", "--memory", "1024"}, &out, &errs); code != 255 || errs.String() != "VM is locked (snapshot-delete)\n" {
		t.Errorf("exit %d %q", code, errs.String())
	}
	if got, _ := os.ReadFile(p); string(got) != conf {
		t.Errorf("changed: %q", got)
	}
	errs.Reset()
	if code := run([]string{"set", "105", "--skiplock", "1", "--memory", "1024"}, &out, &errs); code != 0 {
		t.Fatalf("--skiplock: exit %d %q", code, errs.String())
	}
	if got, _ := os.ReadFile(p); string(got) != "lock: snapshot-delete\nmemory: 1024\n" {
		t.Errorf("--skiplock: %q", got)
	}
}

// TestProxmoxJudges (issue 32 item 5): the double puts every call to
// Proxmox's own update_vm (here starting the oracle itself: no test serves
// it), so a change only Proxmox's schema refuses (the
// double's own reading sets a VM option as given) is refused with
// Proxmox's message, and the config stays as it was.
func TestProxmoxJudges(t *testing.T) {
	pveoracle.For(t) // skips where Proxmox's code is not beside the checkout
	const conf = "memory: 512\nscsi0: local-lvm:vm-105-disk-0,size=8G\n"
	r := t.TempDir()
	t.Setenv("PVEDISKCHECK_FAKENODE_ROOT", r)
	p := filepath.Join(r, "etc/pve/qemu-server/105.conf")
	os.MkdirAll(filepath.Dir(p), 0o755)
	os.WriteFile(p, []byte(conf), 0o644)
	os.WriteFile(filepath.Join(r, "etc/pve/storage.cfg"), []byte(testStorage), 0o644)
	var out, errs bytes.Buffer
	code := run([]string{"set", "105", "--memory", "12"}, &out, &errs)
	if code != 255 || !strings.HasPrefix(errs.String(), "400 Parameter verification failed.\nmemory: ") {
		t.Errorf("exit %d %q", code, errs.String())
	}
	if got, _ := os.ReadFile(p); string(got) != conf {
		t.Errorf("changed: %q", got)
	}
}
