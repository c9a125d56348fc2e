package qemuserver

import (
	"errors"
	"strings"
	"testing"
)

func TestCacheModes(t *testing.T) {
	for _, mode := range []string{"none", "writethrough", "writeback", "directsync", "unsafe"} {
		direct, noFlush, wc := CacheFlags(mode)
		if got := CacheMode(direct, noFlush, wc); got != mode {
			t.Errorf("%s -> (%v %v %s) -> %s", mode, direct, noFlush, wc, got)
		}
		if got := (DiskSettings{CacheDirect: direct, CacheNoFlush: noFlush, WriteCache: wc}).Mode(); got != mode {
			t.Errorf("Mode() = %s, want %s", got, mode)
		}
	}
	if CacheMode(true, true, "on") != "custom" || CacheMode(false, true, "off") != "custom" {
		t.Error("no-flush with O_DIRECT or without write cache is no Proxmox mode")
	}
}

func drive(t *testing.T, key, line string) *Drive {
	t.Helper()
	d, err := ParseDrive(key, line)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// qemu-server's drive_uses_cache_direct and aio_cmdline_option.
func TestCacheDirectAndAIO(t *testing.T) {
	st, _ := ParseStorages(strings.NewReader(storageCfg+"\nbtrfs: nocow\n\tpath /b\n\tnocow 1\n"), "storage.cfg")
	for _, c := range []struct {
		key, line string
		direct    bool
		aio       string
	}{
		{"scsi0", "local-lvm:vm-1-disk-0", true, "io_uring"},
		{"scsi0", "local-lvm:vm-1-disk-0,cache=writeback", false, "io_uring"},
		{"scsi0", "local-lvm:vm-1-disk-0,cache=directsync", true, "io_uring"},
		{"scsi0", "local-lvm:vm-1-disk-0,aio=native,cache=unsafe", false, "native"},
		{"scsi0", "vg-lvm:vm-1-disk-0", true, "native"},
		{"scsi0", "vg-lvm:vm-1-disk-0,cache=writeback", false, "threads"},
		{"scsi0", "smb:1/vm-1-disk-0.raw", true, "native"},
		{"scsi0", "ceph-krbd-fsid:vm-1-disk-0", true, "io_uring"},
		{"scsi0", "ceph-krbd-fsid:vm-1-disk-0,cache=writeback", false, "threads"},
		{"scsi0", "ceph:vm-1-disk-0,cache=writeback", false, "io_uring"},
		{"scsi0", "butter:1/vm-1-disk-0.raw", false, "io_uring"},
		{"scsi0", "nocow:1/vm-1-disk-0.raw", true, "io_uring"},
		{"ide2", "local:iso/x.iso,media=cdrom", false, "io_uring"},
		{"scsi0", "/dev/sdb", true, "io_uring"},
	} {
		d := drive(t, c.key, c.line)
		s := st[d.StorageID()]
		if got := UsesCacheDirect(d, s); got != c.direct {
			t.Errorf("%s: direct %v", c.line, got)
		}
		if got := AIO(d, s, c.direct); got != c.aio {
			t.Errorf("%s: aio %s, want %s", c.line, got, c.aio)
		}
	}
	for line, want := range map[string]string{
		"x:1/a.raw": "on", "x:1/a.raw,discard=on": "unmap", "x:1/a.raw,discard=ignore": "on",
		"x:1/a.raw,detect_zeroes=0,discard=on": "off", "x:1/a.raw,detect_zeroes=1,discard=on": "unmap",
	} {
		if got := DetectZeroes(drive(t, "scsi0", strings.Replace(line, "x:", "xx:", 1))); got != want {
			t.Errorf("%s: detect-zeroes %s, want %s", line, got, want)
		}
	}
	for _, c := range [][3]string{{"scsi", "", "lsi"}, {"scsi", "virtio-scsi-single", "virtio-scsi-single"}, {"virtio", "lsi", "virtio-blk"}, {"efidisk", "", "efi"}, {"sata", "", "sata"}, {"ide", "", "ide"}} {
		if got := Controller(c[0], c[1]); got != c[2] {
			t.Errorf("Controller(%s, %s) = %s", c[0], c[1], got)
		}
	}
}

func TestPredictShapes(t *testing.T) {
	st, _ := ParseStorages(strings.NewReader(storageCfg), "storage.cfg")
	bd := VMDefaults{SCSIHW: "virtio-scsi-single", Blockdev: true}
	legacy := VMDefaults{SCSIHW: "lsi"}
	for _, c := range []struct {
		key, line string
		vm        VMDefaults
		check     func(DiskSettings) bool
	}{
		{"ide2", "cdrom,media=cdrom", bd, func(s DiskSettings) bool {
			return s.Path == "/dev/cdrom" && s.Driver == "host_cdrom" && s.CDROM && s.Discard == "" && s.ReadOnly
		}},
		{"ide2", "none,media=cdrom", bd, func(s DiskSettings) bool { return s.Path == "" && s.NodeFile == "" && s.Device == "ide-cd" }},
		{"efidisk0", "local-lvm:vm-1-disk-1,efitype=4m", bd, func(s DiskSettings) bool {
			return s.Mode() == "writeback" && s.Controller == "efi" && s.AIO == "io_uring"
		}},
		// -drive if=pflash without cache= or aio= (OVMF.pm): QEMU's
		// defaults, not Proxmox's none and io_uring.
		{"efidisk0", "local-lvm:vm-1-disk-1,efitype=4m", legacy, func(s DiskSettings) bool {
			return s.Mode() == "writeback" && s.AIO == "threads" && s.DetectZeroes == "off" && s.Discard == "ignore"
		}},
		{"efidisk0", "ceph:vm-1-disk-1", legacy, func(s DiskSettings) bool { return s.Mode() == "writeback" && s.Driver == "rbd" }},
		{"efidisk0", "ceph:vm-1-disk-1", bd, func(s DiskSettings) bool { return !s.CacheDirect && s.AIO == "" && s.Driver == "rbd" }},
		{"scsi0", "san:0.0.1.scsi-3600", bd, func(s DiskSettings) bool { return s.Driver == "host_device" && s.Device == "scsi-hd" }},
		{"scsi3", "/dev/sdc,scsiblock=1,mbps_wr=5", bd, func(s DiskSettings) bool { return len(s.Limits) == 0 }},
		{"scsi3", "/dev/sdc,scsiblock=1,mbps_wr=5", legacy, func(s DiskSettings) bool { return len(s.Limits) == 1 && s.Controller == "lsi" }},
		{"scsi1", "local-lvm:vm-1-disk-1,iothread=1,ro=1", bd, func(s DiskSettings) bool { return s.IOThread && s.ReadOnly }},
		{"scsi1", "local-lvm:vm-1-disk-1,iothread=1", legacy, func(s DiskSettings) bool { return !s.IOThread }},
		{"virtio1", "local-lvm:vm-1-disk-1,iothread=1", legacy, func(s DiskSettings) bool { return s.IOThread && s.Device == "virtio-blk-pci" }},
		{"sata1", "local-lvm:vm-1-disk-1", VMDefaults{Template: true}, func(s DiskSettings) bool { return s.Device == "ide-cd" && s.ReadOnly }},
		{"scsi2", "local:iso/x.iso,media=cdrom", bd, func(s DiskSettings) bool { return s.Device == "scsi-cd" && s.Format == "raw" }},
		{"scsi2", "/srv/disk.qcow2,format=qcow2", bd, func(s DiskSettings) bool { return s.Format == "qcow2" && s.Driver == "file" }},
	} {
		s, err := Predict(drive(t, c.key, c.line), st, c.vm, nil)
		if err != nil || !c.check(s) {
			t.Errorf("%s: %s: %+v %v", c.key, c.line, s, err)
		}
	}
	if _, err := Predict(drive(t, "scsi0", "nosuch:vm-1-disk-0"), st, bd, nil); err == nil {
		t.Error("a storage storage.cfg lacks predicted")
	}
	a, _ := Predict(drive(t, "scsi0", "local-lvm:vm-1-disk-0,cache=writeback,mbps_wr=5"), st, bd, nil)
	b, _ := Predict(drive(t, "scsi0", "local-lvm:vm-1-disk-0,aio=threads,discard=on,iothread=1,detect_zeroes=0"), st, bd, nil)
	diff := strings.Join(Diff(a, b), "; ")
	for _, f := range []string{"cache_direct: config false, running true", "aio: config io_uring, running threads", "discard: config ignore, running unmap", "detect_zeroes: config on, running off", "iothread: config false, running true", "limits: config {bps-write=5242880}, running {}"} {
		if !strings.Contains(diff, f) {
			t.Errorf("diff %q lacks %q", diff, f)
		}
	}
	if d := Diff(a, a); len(d) != 0 {
		t.Errorf("no difference: %v", d)
	}
}

func TestUsesBlockdev(t *testing.T) {
	for conf, want := range map[string]bool{
		"":                                       true,
		"machine: q35":                           true,
		"machine: pc-q35-10.0+pve1":              true,
		"machine: pc-i440fx-9.2":                 false,
		"machine: type=pc-q35-8.1,viommu=virtio": false,
		"ostype: win11":                          false,
		"ostype: win11\nmeta: creation-qemu=10.0.2,ctime=1": true,
		"ostype: win10\nmeta: creation-qemu=9.2.0,ctime=1":  false,
		"ostype: win10\nmeta: creation-qemu=x,ctime=1":      false,
		"ostype: l26\nmeta: creation-qemu=9.2.0,ctime=1":    true,
		"machine: pc-q35-10.1\nostype: win11":               true,
	} {
		m := map[string]string{}
		for _, l := range strings.Split(conf, "\n") {
			if k, v, ok := strings.Cut(l, ": "); ok {
				m[k] = v
			}
		}
		if got := UsesBlockdev(m); got != want {
			t.Errorf("%q: blockdev %v", conf, got)
		}
	}
	if maj, min, ok := MachineVersion("pc-i440fx-9.2.pxe"); !ok || maj != 9 || min != 2 {
		t.Errorf("MachineVersion %d.%d %v", maj, min, ok)
	}
	if _, _, ok := MachineVersion("q35"); ok {
		t.Error("q35 has no version")
	}
	vm := VMDefaultsFor(map[string]string{"template": "1", "scsihw": "virtio-scsi-single"})
	if !vm.Template || vm.SCSIHW != "virtio-scsi-single" || !vm.Blockdev {
		t.Errorf("%+v", vm)
	}
	if SCSIHW(nil) != "lsi" {
		t.Error("SCSIHW default")
	}
}

// Edges the mutation tests found unguarded.
func TestModelEdges(t *testing.T) {
	st, err := ParseStorages(strings.NewReader("nfs: nn\n\tpath /srv/nfs\n\tserver x\n\texport /e\n\nnfs: mm\n\tserver x\n\texport /e\n\ndir: local\n\tpath /var/lib/vz\n"), "s.cfg")
	if err != nil {
		t.Fatal(err)
	}
	for vol, want := range map[string]string{
		"nn:1/vm-1-disk-0.raw": "/srv/nfs/images/1/vm-1-disk-0.raw",
		"mm:1/vm-1-disk-0.raw": "/mnt/pve/mm/images/1/vm-1-disk-0.raw",
	} {
		if v, err := ResolveVolume(st, &Drive{Key: "scsi0", Volume: vol, Opts: map[string]string{}}, nil); err != nil || v.Path != want {
			t.Errorf("%s: %+v %v", vol, v, err)
		}
	}
	// A section without thinpool is one Proxmox skips (it requires it);
	// a Storage made by hand still gets LvmThinPlugin's default.
	if vg, lv := (&Storage{ID: "tt", Type: "lvmthin", Props: map[string]string{"vgname": "vg"}}).ThinPool(); vg != "vg" || lv != "data" {
		t.Errorf("ThinPool default %s/%s", vg, lv)
	}
	if v, err := VolumeFromPath("/dev/x", &Drive{Opts: map[string]string{}}, nil); err != nil || v.Driver != "host_device" {
		t.Errorf("nil isBlock: %+v %v", v, err)
	}
	if v, _ := ResolveVolume(st, &Drive{Key: "scsi0", Volume: "/dev/sdb", Opts: map[string]string{}}, nil); v.Driver != "host_device" {
		t.Errorf("nil isBlock: %+v", v)
	}
	if _, err := ParseStorages(strings.NewReader("bad header\n\ndir: a\n\tpath /x\n"), "s.cfg"); err == nil || !strings.Contains(err.Error(), "s.cfg line 1") {
		t.Errorf("line number: %v", err)
	}
	// format= counts for a path only: a storage's volume has its plugin's.
	s, _ := Predict(drive(t, "scsi0", "local:100/vm-100-disk-0.qcow2,format=raw"), st, VMDefaults{}, nil)
	if s.Format != "qcow2" {
		t.Errorf("storage volume format %s", s.Format)
	}
	// A host CD-ROM drive passed through by path is host_cdrom.
	s, _ = Predict(drive(t, "ide2", "/dev/sr0,media=cdrom"), st, VMDefaults{Blockdev: true}, func(string) bool { return true })
	if s.Driver != "host_cdrom" {
		t.Errorf("host CD-ROM driver %s", s.Driver)
	}
	if isLength("-max-length") || !isLength("x-max-length") {
		t.Error("isLength edge")
	}
	for _, c := range [][2]string{
		{"local-lvm:vm-1-disk-0,serial=" + strings.Repeat("A", 60), ""},
		{"local-lvm:vm-1-disk-0,queues=2", ""},
		{"local-lvm:vm-1-disk-0,mbps_max=1,mbps=1,bps_max_length=1", ""},
		{"local-lvm:vm-1-disk-0,queues=1", "queues=\"1\": below the minimum of 2"},
		{"local-lvm:vm-1-disk-0,mbps_rd=1,mbps_rd_max=2,bps_rd_max_length=0", "bps_rd_max_length=\"0\": below the minimum of 1"},
	} {
		_, err := ParseDrive("scsi0", c[0])
		if c[1] == "" && err != nil || c[1] != "" && (err == nil || !strings.HasSuffix(err.Error(), c[1])) {
			t.Errorf("%s: %v, want %q", c[0], err, c[1])
		}
	}
	if clip(strings.Repeat("x", 40)) != `"`+strings.Repeat("x", 40)+`"` || clip(strings.Repeat("x", 41)) != `"`+strings.Repeat("x", 40)+`"... (41 bytes)` {
		t.Error("clip at 40 bytes")
	}
	if _, err := SplitShell(`"a\`); !errors.Is(err, ErrParse) {
		t.Errorf("backslash at the end of a double quote: %v", err)
	}
	if m, _ := SplitQemuOpts("a=1,", ""); m["a"] != "1" {
		t.Errorf("trailing comma: %v", m)
	}
	long := "args: " + strings.Repeat("x", 1<<20) + "\n"
	if c, err := ParseConfig(strings.NewReader(long), "long.conf"); err != nil || len(c.Main["args"]) != 1<<20 {
		t.Errorf("a 1 MiB line: %v", err)
	}
}
