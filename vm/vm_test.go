package vm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

const testStorageCfg = `dir: local
	path /var/lib/vz
	content iso,images

lvmthin: local-lvm
	thinpool data
	vgname pve
	content images

drbd: linstor
	resourcegroup drbdgrp
	content images
`

// writeNode lays out a stopped VM's config and storage.cfg below a root.
func writeNode(t *testing.T, vmid int, conf string) node.Paths {
	t.Helper()
	p := node.NewPaths(t.TempDir(), "", "")
	if err := os.MkdirAll(p.QemuServerDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.StorageCfg(), []byte(testStorageCfg), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.VMConfig(vmid), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// tpmstate0 is a disk slot of the VM with its own kind: its volume is
// placed, but QEMU never opens it, so it has no QEMU settings.
func TestTPMStateIsListedWithItsKind(t *testing.T) {
	p := writeNode(t, 205, `efidisk0: local-lvm:vm-205-disk-0,efitype=4m,pre-enrolled-keys=1,size=4M
machine: pc-q35-7.0
ostype: win11
sata0: none,media=cdrom
sata1: local:iso/virtio-win-0.1.240.iso,media=cdrom,size=612812K
tpmstate0: local-lvm:vm-205-disk-1,size=4M,version=v2.0
virtio0: local-lvm:vm-205-disk-2,cache=writeback,discard=on,size=50G
unused0: local-lvm:vm-205-disk-3
unused1: /dev/sdb
`)
	v, err := Load(context.Background(), node.New(p, 0), 205)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]qemuserver.Kind{}
	for _, d := range v.Disks {
		kinds[d.ID] = d.Kind()
		if d.ParseError != nil || d.ResolveError != nil {
			t.Errorf("%s: %v %v", d.ID, d.ParseError, d.ResolveError)
		}
	}
	want := map[string]qemuserver.Kind{
		"sata0": qemuserver.KindEmptyCDROM, "sata1": qemuserver.KindCDROM, "virtio0": qemuserver.KindDisk,
		"efidisk0": qemuserver.KindEFIVars, "tpmstate0": qemuserver.KindTPMState,
	}
	if len(kinds) != len(want) {
		t.Errorf("disks %v, want %v", kinds, want)
	}
	for id, k := range want {
		if kinds[id] != k {
			t.Errorf("%s: kind %s, want %s", id, kinds[id], k)
		}
	}
	tpm := v.Disk("tpmstate0")
	if tpm.Configured != nil || tpm.Volume == nil || tpm.Volume.Path != "/dev/pve/vm-205-disk-1" || tpm.Drive.Opts["version"] != "v2.0" {
		t.Errorf("tpmstate0: configured %+v volume %+v", tpm.Configured, tpm.Volume)
	}
	if efi := v.Disk("efidisk0"); efi.Configured == nil || efi.Volume.Path != "/dev/pve/vm-205-disk-0" {
		t.Errorf("efidisk0: %+v", efi)
	}
	if v.Disk("sata0").Volume != nil || v.Disk("sata0").Configured == nil {
		t.Errorf("empty CD-ROM: %+v", v.Disk("sata0"))
	}
	// unusedN: known to the VM, not disks; a line Proxmox refuses says so.
	if len(v.Unused) != 2 || v.Unused[0].Key != "unused0" || v.Unused[0].Volume != "local-lvm:vm-205-disk-3" || v.Unused[0].ParseError != nil {
		t.Errorf("unused %+v", v.Unused)
	}
	if v.Unused[1].ParseError == nil || !strings.Contains(v.Unused[1].ParseError.Error(), "line 9") {
		t.Errorf("unused1: %v", v.Unused[1].ParseError)
	}
	if v.Disk("unused0") != nil {
		t.Error("unused0 is listed as a disk")
	}
	// Select of everything includes tpmstate0 (commands decide by kind).
	sel, err := v.Select(nil)
	if err != nil || len(sel) != 5 {
		t.Errorf("Select: %d disks, %v", len(sel), err)
	}
	if sel, err := v.Select([]string{"tpmstate0"}); err != nil || sel[0].Kind() != qemuserver.KindTPMState {
		t.Errorf("Select(tpmstate0): %v", err)
	}
}

// A line Proxmox refuses is a ParseError naming the option; a storage
// storage.cfg lacks is a ResolveError (Proxmox reads the config and fails
// only when it starts the VM), and the disk is still listed.
func TestParseAndResolveErrors(t *testing.T) {
	p := writeNode(t, 100, `efidisk0: local-lvm:vm-100-disk-1,efitype=4m,discard=on,size=4M
virtio2: QuadRAID-lvm:vm-100-disk-0,backup=0,cache=writeback,discard=on,iothread=1,size=600G
virtio3: linstor:vm-100-disk-3,size=10G
tpmstate0: local-lvm:vm-100-disk-2,version=v2.0,cache=none
`)
	v, err := Load(context.Background(), node.New(p, 0), 100)
	if err != nil {
		t.Fatal(err)
	}
	efi := v.Disk("efidisk0")
	var de *qemuserver.DriveError
	if !errors.As(efi.ParseError, &de) || de.Option != "discard" || !strings.Contains(efi.ParseError.Error(), "100.conf line 1") {
		t.Errorf("efidisk0: %v", efi.ParseError)
	}
	if efi.Kind() != qemuserver.KindEFIVars {
		t.Errorf("efidisk0 kind %s", efi.Kind())
	}
	if tpm := v.Disk("tpmstate0"); tpm.ParseError == nil || tpm.Kind() != qemuserver.KindTPMState {
		t.Errorf("tpmstate0: %+v", tpm)
	}
	quad := v.Disk("virtio2")
	if quad.ParseError != nil || quad.Drive == nil || quad.ResolveError == nil || !strings.Contains(quad.ResolveError.Error(), `storage "QuadRAID-lvm" is not defined`) {
		t.Errorf("virtio2: parse %v resolve %v", quad.ParseError, quad.ResolveError)
	}
	// Without the node's tools, a plugin storage's volume stays unresolved.
	lin := v.Disk("virtio3")
	var ue *qemuserver.UnmodelledError
	if lin.ResolveError == nil || !errors.As(lin.ResolveError, &ue) || lin.Configured != nil {
		t.Errorf("virtio3: %+v", lin)
	}
	// Everything: the lines Proxmox refuses are left out (qemu-server
	// drops them), and the notes say so; named, such a line is an error.
	sel, err := v.Select(nil)
	var ids []string
	for _, d := range sel {
		ids = append(ids, d.ID)
	}
	if err != nil || strings.Join(ids, " ") != "virtio2 virtio3" {
		t.Errorf("Select(nil) = %v, %v; want virtio2 virtio3", ids, err)
	}
	notes := v.IgnoredNotes()
	if len(notes) != 2 || !strings.Contains(notes[0], "efidisk0: discard is not an option") || !strings.HasSuffix(notes[0], "Proxmox refuses this line and starts the VM without the disk: not listed") ||
		!strings.Contains(notes[1], "tpmstate0") {
		t.Errorf("notes %q", notes)
	}
	if _, err := v.Select([]string{"efidisk0"}); exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "discard") {
		t.Errorf("Select(efidisk0) = %v, want the parse error, exit 2", err)
	}
	if _, err := v.Select([]string{"virtio2"}); err != nil {
		t.Errorf("Select(virtio2): %v (an unresolved volume is no parse error)", err)
	}
}

// With the node's `pvesm path`, a plugin storage's volume is placed from
// its answer and the note says so, once per volume.
func TestPluginStorageThroughPvesm(t *testing.T) {
	p := writeNode(t, 101, `scsi0: linstor:vm-101-disk-1,cache=none,size=10G
scsi1: linstor:vm-101-disk-1,size=10G
scsi2: linstor:vm-101-disk-9,size=10G
scsihw: virtio-scsi-single
`)
	dev := filepath.Join(p.Root, "dev/drbd/by-res/vm-101-disk-1/0")
	if err := os.MkdirAll(filepath.Dir(dev), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dev, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	calls := 0
	// Answers as LINSTOR's plugin does, from the files below the root.
	pvesmPath := func(volid string) (string, error) {
		calls++
		_, name, _ := strings.Cut(volid, ":")
		path := "/dev/drbd/by-res/" + name + "/0"
		if _, err := os.Stat(filepath.Join(p.Root, path)); err != nil {
			return "", errors.New("pvesm exited with status 255: resource " + name + " not found")
		}
		return path, nil
	}
	v, err := load(context.Background(), node.New(p, 0), 101, nil, pvesmPath)
	if err != nil {
		t.Fatal(err)
	}
	s0 := v.Disk("scsi0")
	if s0.ResolveError != nil || s0.Volume == nil || s0.Volume.ResolvedBy != qemuserver.ResolvedByPvesm || s0.Configured == nil {
		t.Fatalf("scsi0: %+v", s0)
	}
	// A regular file below the test root is "file"; a real node's DRBD
	// device is a block device, "host_device".
	if c := s0.Configured; c.Path != "/dev/drbd/by-res/vm-101-disk-1/0" || c.Driver != "file" || c.Mode() != "none" || c.Format != "raw" {
		t.Errorf("scsi0 settings %+v", c)
	}
	if v.Disk("scsi1").Configured == nil || calls != 2 {
		t.Errorf("scsi1 resolved: %+v, pvesm path ran %d times (want once per volume, 2)", v.Disk("scsi1").Configured, calls)
	}
	if s2 := v.Disk("scsi2"); s2.ResolveError == nil || !strings.Contains(s2.ResolveError.Error(), "`pvesm path` could not resolve it") || s2.Configured != nil {
		t.Errorf("scsi2: %v", s2.ResolveError)
	}
	if len(v.Notes) != 1 || !strings.Contains(v.Notes[0], "type drbd, which pvediskcheck does not model") || !strings.Contains(v.Notes[0], "resolved through `pvesm path` to /dev/drbd/by-res/vm-101-disk-1/0") {
		t.Errorf("notes %q", v.Notes)
	}
}

// writeRunning makes VM vmid of p run as pid 4242 with argv.
func writeRunning(t *testing.T, p node.Paths, vmid int, argv []string) {
	t.Helper()
	for f, b := range map[string]string{
		fmt.Sprintf("var/run/qemu-server/%d.pid", vmid): "4242\n",
		"proc/4242/cmdline":                             strings.Join(argv, "\x00") + "\x00",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(p.Root, f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p.Root, f), []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// A line Proxmox refuses for a disk the running VM has (the line was
// edited after the start): left out of Select, and the note says the
// disk runs now and the next start drops it.
func TestIgnoredNotesRunning(t *testing.T) {
	p := writeNode(t, 301, `scsi0: local-lvm:vm-301-disk-0,size=8G
scsi1: local-lvm:vm-301-disk-1,cache=sometimes,size=8G
`)
	writeRunning(t, p, 301, []string{"/usr/bin/kvm", "-id", "301", "-pidfile", "/var/run/qemu-server/301.pid",
		"-drive", "file=/dev/pve/vm-301-disk-0,if=none,id=drive-scsi0,format=raw,cache=none,aio=io_uring",
		"-device", "scsi-hd,drive=drive-scsi0,id=scsi0",
		"-drive", "file=/dev/pve/vm-301-disk-1,if=none,id=drive-scsi1,format=raw,cache=none,aio=io_uring",
		"-device", "scsi-hd,drive=drive-scsi1,id=scsi1"})
	v, err := Load(context.Background(), node.New(p, 0), 301)
	if err != nil || !v.Running {
		t.Fatalf("running %v: %v", v != nil && v.Running, err)
	}
	sel, err := v.Select(nil)
	if err != nil || len(sel) != 1 || sel[0].ID != "scsi0" {
		t.Errorf("Select(nil) = %v, %v", sel, err)
	}
	notes := v.IgnoredNotes()
	if len(notes) != 1 || !strings.Contains(notes[0], "301.conf line 2: scsi1") ||
		!strings.HasSuffix(notes[0], ": attached to the running VM, but Proxmox refuses this line and the next start drops the disk: not listed") {
		t.Errorf("notes %q", notes)
	}
}

// NotListed says why a command leaves a disk out: its kind, or where it
// is (only in [PENDING], only in the running VM).
func TestNotListed(t *testing.T) {
	p := writeNode(t, 300, `scsi0: local-lvm:vm-300-disk-0,size=8G
ide2: none,media=cdrom
tpmstate0: local-lvm:vm-300-disk-2,version=v2.0

[PENDING]
scsi2: local-lvm:vm-300-disk-3,size=8G
efidisk0: local-lvm:vm-300-disk-1,efitype=4m
`)
	// A running QEMU with scsi5 hot-plugged (not in the config).
	argv := []string{"/usr/bin/kvm", "-id", "300", "-pidfile", "/var/run/qemu-server/300.pid",
		"-drive", "file=/dev/pve/vm-300-disk-0,if=none,id=drive-scsi0,format=raw,cache=none,aio=io_uring",
		"-device", "scsi-hd,drive=drive-scsi0,id=scsi0",
		"-drive", "file=/dev/pve/vm-300-disk-9,if=none,id=drive-scsi5,format=raw,cache=none,aio=io_uring",
		"-device", "scsi-hd,drive=drive-scsi5,id=scsi5"}
	writeRunning(t, p, 300, argv)
	v, err := Load(context.Background(), node.New(p, 0), 300)
	if err != nil || !v.Running {
		t.Fatalf("running %v: %v", v != nil && v.Running, err)
	}
	for id, want := range map[string]string{
		"ide2":      "ide2 is an empty CD-ROM drive",
		"tpmstate0": "tpmstate0 is the TPM state volume (swtpm keeps the vTPM's state there; QEMU never opens it), not a guest disk: not listed, on purpose",
		"scsi2":     "scsi2 is only in [PENDING] (the next start adds it)",
		"efidisk0":  "efidisk0 is only in [PENDING]",
		"scsi5":     "scsi5 is attached to the running VM but not in its config",
		"scsi0":     "scsi0 is a disk",
	} {
		d := v.Disk(id)
		if d == nil {
			t.Errorf("%s is not listed", id)
			continue
		}
		if got := d.NotListed(); !strings.HasPrefix(got, want) {
			t.Errorf("%s: %q, want %q", id, got, want)
		}
	}
	if pd := v.Disk("efidisk0"); pd.PendingDrive == nil || pd.Pending == nil || pd.Kind() != qemuserver.KindEFIVars {
		t.Errorf("pending efidisk0: %+v", pd)
	}
	if tpm := v.Disk("tpmstate0"); tpm.PendingDrive != nil {
		t.Errorf("tpmstate0 unchanged in [PENDING] has a pending drive: %+v", tpm.PendingDrive)
	}
}

// TestLegacyEFIVars (issue 26 #9): under -drive the EFI vars are
// `-drive if=pflash,unit=1,id=drive-efidisk0` with no cache= or aio=
// (OVMF.pm print_ovmf_drive_commandlines), so QEMU's defaults run:
// writeback and threads, predicted and read alike (no drift). A VM without
// efidisk0 runs on a temporary vars copy, which is no disk of the VM.
func TestLegacyEFIVars(t *testing.T) {
	argv := func(vars string) []string {
		return []string{"/usr/bin/kvm", "-id", "302", "-pidfile", "/var/run/qemu-server/302.pid",
			"-drive", "if=pflash,unit=0,format=raw,readonly=on,file=/usr/share/pve-edk2-firmware//OVMF_CODE_4M.secboot.fd",
			"-drive", "if=pflash,unit=1,id=drive-efidisk0,format=raw,file=" + vars + ",size=540672",
			"-drive", "file=/dev/pve/vm-302-disk-1,if=none,id=drive-scsi0,format=raw,cache=none,aio=io_uring,detect-zeroes=on",
			"-device", "scsi-hd,drive=drive-scsi0,id=scsi0",
			"-machine", "type=pc-q35-8.1+pve0"}
	}
	p := writeNode(t, 302, "bios: ovmf\nmachine: pc-q35-8.1\nefidisk0: local-lvm:vm-302-disk-0,efitype=4m,pre-enrolled-keys=1,size=4M\nscsi0: local-lvm:vm-302-disk-1\n")
	writeRunning(t, p, 302, argv("/dev/pve/vm-302-disk-0"))
	v, err := Load(context.Background(), node.New(p, 0), 302)
	if err != nil {
		t.Fatal(err)
	}
	e := v.Disk("efidisk0")
	if e == nil || e.Configured == nil || e.Running == nil || e.Configured.Mode() != "writeback" || e.Configured.AIO != "threads" || e.Running.Mode() != "writeback" || e.Running.AIO != "threads" {
		t.Fatalf("efidisk0 %+v", e)
	}
	if d := qemuserver.Diff(*e.Configured, *e.Running); len(d) != 0 {
		t.Errorf("drift %v", d)
	}
	// No efidisk0 in the config: OVMF.pm's temporary copy is not listed.
	p = writeNode(t, 302, "bios: ovmf\nmachine: pc-q35-8.1\nscsi0: local-lvm:vm-302-disk-1\n")
	writeRunning(t, p, 302, argv("/run/qemu-server/efidisk/302-ovmf.fd"))
	if v, err = Load(context.Background(), node.New(p, 0), 302); err != nil || v.Disk("efidisk0") != nil || len(v.Disks) != 1 {
		t.Errorf("%v %+v", err, v.Disks)
	}
}

// A stopped VM whose machine is unpinned starts with the installed QEMU's
// machine: -drive before QEMU 10 (PVE 8's pve-qemu-kvm), -blockdev from 10;
// a pinned machine decides alone; without dpkg's status PVE 9 is assumed.
// (Proxmox's own command lines at each version: qemuserver's
// TestPredictAgainstProxmox.)
func TestGenerationFollowsInstalledQEMU(t *testing.T) {
	for _, c := range []struct {
		machine, installed string
		blockdev           bool
	}{
		{"", "9.2.0-7", false},
		{"", "10.0.2-4", true},
		{"", "", true},
		{"pc-q35-10.0", "9.2.0-7", true},
		{"pc-q35-9.2", "10.1.2-1", false},
	} {
		conf := "scsi0: local-lvm:vm-300-disk-0,size=8G\n"
		if c.machine != "" {
			conf += "machine: " + c.machine + "\n"
		}
		p := writeNode(t, 300, conf)
		if c.installed != "" {
			status := "Package: pve-qemu-kvm\nStatus: install ok installed\nVersion: " + c.installed + "\n\n"
			if err := os.MkdirAll(p.Join("/var/lib/dpkg"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p.Join("/var/lib/dpkg/status"), []byte(status), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		v, err := Load(context.Background(), node.New(p, 0), 300)
		if err != nil {
			t.Fatal(err)
		}
		if v.Blockdev != c.blockdev || v.Disks[0].Configured == nil || v.Disks[0].Configured.Blockdev != c.blockdev {
			t.Errorf("machine %q, pve-qemu-kvm %q: blockdev %v, want %v", c.machine, c.installed, v.Blockdev, c.blockdev)
		}
	}
}
