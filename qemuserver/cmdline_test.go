package qemuserver

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestSplitShellAndNUL(t *testing.T) {
	for in, want := range map[string][]string{
		`a 'b c' "d\"e" f\ g`:         {"a", "b c", `d"e`, "f g"},
		"kvm \\\n  -id 8006\t-name x": {"kvm", "-id", "8006", "-name", "x"},
		`'' x`:                        {"", "x"},
		`a\`:                          {`a\`},
		"":                            nil,
		"  ":                          nil,
	} {
		got, err := SplitShell(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("SplitShell(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{`a 'b`, `a "b`, `"a\"`} {
		if _, err := SplitShell(in); !errors.Is(err, ErrParse) {
			t.Errorf("SplitShell(%q): %v", in, err)
		}
	}
	if got := SplitNUL([]byte("kvm\x00-id\x00370\x00\x00")); !reflect.DeepEqual(got, []string{"kvm", "-id", "370"}) {
		t.Errorf("SplitNUL %q", got)
	}
	if got := SplitNUL([]byte("\x00")); got != nil {
		t.Errorf("SplitNUL of nothing: %q", got)
	}
	m, order := SplitQemuOpts("file=/a,,b,if=none,readonly", "file")
	if m["file"] != "/a,b" || m["readonly"] != "on" || !reflect.DeepEqual(order, []string{"file", "if", "readonly"}) {
		t.Errorf("SplitQemuOpts %v %v", m, order)
	}
	m, _ = SplitQemuOpts("pc-q35-9.2", "type")
	if m["type"] != "pc-q35-9.2" {
		t.Errorf("implied key: %v", m)
	}
}

// The legacy -drive generation as older machines run it.
func TestParseCmdlineLegacyDrive(t *testing.T) {
	argv := []string{"/usr/bin/kvm", "-id", "370", "-pidfile", "/var/run/qemu-server/370.pid",
		"-chardev", "socket,id=qmp,path=/var/run/qemu-server/370.qmp,server=on,wait=off",
		"-mon", "chardev=qmp,mode=control",
		"-machine", "type=pc-i440fx-8.1+pve0",
		"-device", "virtio-scsi-pci,id=scsihw0,bus=pci.0,addr=0x5",
		"-device", "ahci,id=ahci0,multifunction=on,bus=pci.0,addr=0x7",
		"-drive", "file=/dev/pve/vm-370-disk-0,if=none,id=drive-scsi0,cache=none,aio=native,discard=on,detect-zeroes=unmap,format=raw,throttling.bps-write=20971520,throttling.iops-read=0",
		"-device", "scsi-hd,bus=scsihw0.0,channel=0,scsi-id=0,lun=0,drive=drive-scsi0,id=scsi0",
		"-drive", "file=rbd:vms/vm-370-disk-1:conf=/etc/pve/ceph.conf,if=none,id=drive-virtio0,cache=writeback,format=raw",
		"-device", "virtio-blk-pci,drive=drive-virtio0,id=virtio0,iothread=iothread-virtio0",
		"-drive", "file=iscsi://10.0.0.9/iqn.x/1,if=none,id=drive-sata0,cache.direct=on,cache.no-flush=on,cache.writeback=off",
		"-device", "ide-hd,bus=ahci0.0,drive=drive-sata0,id=sata0",
		"-drive", "file=nbd:unix:/run/x.sock:exportname=drive-ide0,if=none,id=drive-ide0,cache=unsafe",
		"-device", "ide-hd,bus=ide.0,unit=0,drive=drive-ide0,id=ide0",
		"-drive", "file=/var/lib/vz/template/iso/x.iso,if=none,id=drive-ide2,media=cdrom,readonly=on,aio=io_uring",
		"-device", "ide-cd,bus=ide.1,unit=0,drive=drive-ide2,id=ide2",
		"-drive", "if=pflash,unit=1,id=drive-efidisk0,format=raw,file=/dev/pve/vm-370-disk-9",
		"-drive", "file=/var/lib/vz/images/370/vm-370-disk-2.qcow2,if=none,id=drive-scsi1,cache=off,format=qcow2,discard=unmap,throttling.iops-total=0,throttling.bps-read=x",
		"-device", "scsi-hd,bus=scsihw0.0,drive=drive-scsi1,id=scsi1",
		"-device", "usb-tablet,bus=uhci.0",
		"-chardev", "socket,id=monitor,path=/var/run/qemu-server/370.mon",
		"-mon", "chardev=monitor,mode=readline",
	}
	c, err := ParseCmdline(argv)
	if err != nil {
		t.Fatal(err)
	}
	if c.Machine != "pc-i440fx-8.1+pve0" || c.Pidfile != "/var/run/qemu-server/370.pid" || c.QMPSocket != "/var/run/qemu-server/370.qmp" || c.Blockdev {
		t.Errorf("%+v", c)
	}
	if ids := c.DiskIDs(); !reflect.DeepEqual(ids, []string{"ide0", "ide2", "sata0", "scsi0", "scsi1", "virtio0", "efidisk0"}) {
		t.Errorf("disks %v (the OVMF code on pflash is firmware, the vars are efidisk0)", ids)
	}
	// Issue 26 #9: OVMF.pm gives the vars' -drive no cache= or aio=:
	// QEMU's defaults run, writeback and threads.
	if e := c.Disks["efidisk0"]; e.Mode() != "writeback" || e.AIO != "threads" || e.Path != "/dev/pve/vm-370-disk-9" || e.Driver != "host_device" || e.DetectZeroes != "off" {
		t.Errorf("efidisk0 %+v", e)
	}
	s0 := c.Disks["scsi0"]
	if s0.Mode() != "none" || s0.AIO != "native" || s0.Discard != "unmap" || s0.DetectZeroes != "unmap" || s0.Driver != "host_device" || s0.Controller != "virtio-scsi-pci" || !s0.Limits.Equal(Limits{"bps-write": 20 * MiB}) {
		t.Errorf("scsi0 %+v", s0)
	}
	if v := c.Disks["virtio0"]; v.Driver != "rbd" || v.Mode() != "writeback" || v.AIO != "threads" || !v.IOThread || v.Controller != "virtio-blk" {
		t.Errorf("virtio0 %+v", v)
	}
	if s := c.Disks["sata0"]; s.Driver != "iscsi" || !s.CacheDirect || !s.CacheNoFlush || s.WriteCache != "off" || s.Controller != "sata" {
		t.Errorf("sata0 %+v", s)
	}
	if i := c.Disks["ide0"]; i.Driver != "nbd" || i.Mode() != "unsafe" || i.Controller != "ide" {
		t.Errorf("ide0 %+v", i)
	}
	if i := c.Disks["ide2"]; !i.CDROM || !i.ReadOnly || i.Discard != "" || i.AIO != "io_uring" {
		t.Errorf("ide2 %+v", i)
	}
	if s := c.Disks["scsi1"]; !s.CacheDirect || s.WriteCache != "on" || s.Driver != "file" || s.Format != "qcow2" || s.Discard != "unmap" || len(s.Limits) != 0 {
		t.Errorf("scsi1 cache=off %+v", s)
	}
	if !reflect.DeepEqual(s0.Limits, Limits{"bps-write": 20 * MiB}) {
		t.Errorf("scsi0 limits %v (zeros are unset)", s0.Limits)
	}
	if c.Devices["scsi0"]["bus"] != "scsihw0.0" || len(c.Devices) != 8 {
		t.Errorf("devices %d: %v", len(c.Devices), c.Devices["scsi0"])
	}
}

func TestParseCmdlineBlockdevAndObjects(t *testing.T) {
	argv := []string{"kvm", "-qmp", "unix:/run/q.qmp,server,nowait",
		"-object", `{"id":"throttle-drive-scsi0","limits":{"bps-write":1048576,"iops-total":0},"qom-type":"throttle-group"}`,
		"-object", "throttle-group,id=throttle-drive-scsi1,x-iops-read=300,limits.bps-read=2048",
		"-object", "iothread,id=iothread-virtioscsi0",
		"-object", `{"id":"throttle-drive-scsi2","limits":{"bps-read":7},"qom-type":"secret"}`,
		"-object", "secret,id=throttle-drive-scsi2,limits.bps-read=9",
		"-device", "virtio-scsi-pci,id=virtioscsi0,bus=pci.3,addr=0x1,iothread=iothread-virtioscsi0",
		"-blockdev", `{"detect-zeroes":"on","discard":"ignore","driver":"throttle","file":{"cache":{"direct":true,"no-flush":false},"driver":"raw","file":{"aio":"io_uring","cache":{"direct":true,"no-flush":false},"driver":"host_device","filename":"/dev/pve/vm-1-disk-0","node-name":"e1"},"node-name":"f1"},"node-name":"drive-scsi0","read-only":false,"throttle-group":"throttle-drive-scsi0"}`,
		"-device", "scsi-hd,bus=virtioscsi0.0,drive=drive-scsi0,id=scsi0,write-cache=on",
		"-blockdev", `{"driver":"throttle","discard":"on","file":{"driver":"raw","file":{"driver":"file","filename":"/x.raw","node-name":"e2"},"node-name":"f2"},"node-name":"drive-scsi1"}`,
		"-device", "scsi-hd,drive=drive-scsi1,id=scsi1,write-cache=off",
		"-blockdev", `{"driver":"throttle","file":{"driver":"nbd","server":{"type":"unix","path":"/run/n.sock"},"export":"x","node-name":"e3"},"node-name":"drive-scsi2","discard":"ignore"}`,
		"-blockdev", `{"driver":"throttle","discard":"ignore","file":{"driver":"qcow2","file":{"driver":"file","filename":"/q.qcow2","node-name":"e4"},"node-name":"f4"},"node-name":"drive-virtio1"}`,
		"-blockdev", `{"driver":"raw","node-name":"pflash0","file":{"driver":"file","filename":"/usr/share/OVMF_CODE.fd"}}`,
		"-blockdev", "driver=file,node-name=x,filename=/y",
		"-device", "scsi-hd,drive=drive-missing,id=scsi9",
	}
	c, err := ParseCmdline(argv)
	if err != nil {
		t.Fatal(err)
	}
	if c.QMPSocket != "/run/q.qmp" || !c.Blockdev {
		t.Errorf("%+v", c)
	}
	s0 := c.Disks["scsi0"]
	if s0.Controller != "virtio-scsi-single" || !s0.IOThread || s0.Mode() != "none" || s0.AIO != "io_uring" || s0.NodeFormat != "f1" || s0.NodeFile != "e1" || !s0.Limits.Equal(Limits{"bps-write": MiB}) {
		t.Errorf("scsi0 %+v", s0)
	}
	s1 := c.Disks["scsi1"]
	if s1.WriteCache != "off" || s1.Discard != "unmap" || s1.AIO != "threads" || s1.Controller != "lsi" || !s1.Limits.Equal(Limits{"iops-read": 300, "bps-read": 2048}) {
		t.Errorf("scsi1 %+v", s1)
	}
	if s2 := c.Disks["scsi2"]; s2.Driver != "nbd" || s2.Path != "/run/n.sock" || s2.Format != "raw" || s2.AIO != "" || len(s2.Limits) != 0 {
		t.Errorf("scsi2 %+v", s2)
	}
	if v1 := c.Disks["virtio1"]; v1.Format != "qcow2" || v1.NodeFormat != "f4" {
		t.Errorf("virtio1 %+v", v1)
	}
	if !reflect.DeepEqual(s0.Limits, Limits{"bps-write": MiB}) {
		t.Errorf("scsi0 limits %v (zeros are unset)", s0.Limits)
	}
	if len(c.Disks) != 4 {
		t.Errorf("disks %v", c.DiskIDs())
	}
	for _, bad := range [][]string{{"-blockdev", `{"driver":`}, {"-object", `{"qom-type":`}} {
		if _, err := ParseCmdline(bad); !errors.Is(err, ErrParse) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestDriveHelpers(t *testing.T) {
	d, _ := ParseDrive("scsi0", "local-lvm:vm-1-disk-0,cache=none")
	if d.StorageID() != "local-lvm" || d.VolName() != "vm-1-disk-0" || d.Bool("cache") || d.IsCDROM() {
		t.Errorf("%+v", d)
	}
	for vol, sid := range map[string]string{"/dev/sdb": "", "none": "", "cdrom": ""} {
		d := &Drive{Volume: vol}
		if d.StorageID() != sid {
			t.Errorf("%s: storage %q", vol, d.StorageID())
		}
	}
	c := d.Clone()
	c.Opts["cache"] = "unsafe"
	c.Order = append(c.Order, "x")
	if d.Opts["cache"] != "none" || len(d.Order) != 1 {
		t.Error("Clone shares state")
	}
	c.Opts["discard"] = "on"
	c.Opts["aio"] = "threads"
	if got := c.String(); got != "local-lvm:vm-1-disk-0,cache=unsafe,aio=threads,discard=on" {
		t.Errorf("String %s (added options sorted after the original ones)", got)
	}
	if got := SortedKeys(map[string]int{"b": 1, "a": 2}); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Error(got)
	}
	var de *DriveError
	_, err := ParseDrive("scsi\x01", "x")
	if !errors.As(err, &de) || err.Error() != `"scsi\x01": not a drive key (ide0-3, sata0-5, scsi0-30, virtio0-15, efidisk0, tpmstate0, unused0-255)` {
		t.Errorf("%v", err)
	}
}

// Error lines quote a key or option only when it needs it.
func TestDriveErrorQuoting(t *testing.T) {
	for _, c := range []struct {
		e    DriveError
		want string
	}{
		{DriveError{Key: strings.Repeat("k", 20), Reason: "r"}, strings.Repeat("k", 20) + ": r"},
		{DriveError{Key: strings.Repeat("k", 21), Reason: "r"}, `"` + strings.Repeat("k", 21) + `": r`},
		{DriveError{Key: "scsi0", Option: strings.Repeat("o", 40), Reason: "r"}, "scsi0: " + strings.Repeat("o", 40) + " r"},
		{DriveError{Key: "scsi0", Option: strings.Repeat("o", 41), Reason: "r"}, `scsi0: "` + strings.Repeat("o", 40) + `"... (41 bytes) r`},
		{DriveError{Key: "scsi0", Option: "a\x1fb", Reason: "r"}, `scsi0: "a\x1fb" r`},
		{DriveError{Key: "scsi0", Option: "a\x7fb", Reason: "r"}, `scsi0: "a\x7fb" r`},
		{DriveError{Key: "scsi0", Option: "a\xffb", Reason: "r"}, `scsi0: "a\xffb" r`},
		{DriveError{Key: "scsi0", Option: "a b", Reason: "r"}, "scsi0: a b r"},
		{DriveError{Key: "scsi0", Option: "cache", Value: "x", Reason: "r"}, `scsi0: cache="x": r`},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("%q, want %q", got, c.want)
		}
	}
}
