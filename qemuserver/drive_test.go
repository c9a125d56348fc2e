package qemuserver

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// Each row is a drive line and what Proxmox's config parser (qemu-server
// 9.2 Drive.pm with pve-common 9.2 JSONSchema) does with it. "" accepts;
// otherwise the error names opt (the option at fault) and contains why.
type driveCase struct {
	key, line string
	opt, why  string
}

func runDriveCases(t *testing.T, cases []driveCase) {
	t.Helper()
	for _, c := range cases {
		d, err := ParseDrive(c.key, c.line)
		if c.why == "" && c.opt == "" {
			if err != nil {
				t.Errorf("%s: %s: refused: %v", c.key, c.line, err)
			} else if d.Key != c.key {
				t.Errorf("%s: %s: key %q", c.key, c.line, d.Key)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: %s: accepted (%+v), Proxmox refuses it (%s)", c.key, c.line, d.Opts, c.why)
			continue
		}
		if !errors.Is(err, ErrParse) {
			t.Errorf("%s: %s: %v is not an ErrParse", c.key, c.line, err)
		}
		var de *DriveError
		if !errors.As(err, &de) || de.Option != c.opt || de.Key != c.key {
			t.Errorf("%s: %s: %v: want option %q named", c.key, c.line, err, c.opt)
		}
		if !strings.Contains(err.Error(), c.why) || !strings.HasPrefix(err.Error(), c.key+": ") {
			t.Errorf("%s: %s: %q, want %q in it", c.key, c.line, err, c.why)
		}
	}
}

// The options every guest disk (ide, sata, scsi, virtio) shares:
// %drivedesc_base.
func TestParseDriveBase(t *testing.T) {
	var cases []driveCase
	for _, key := range []string{"ide0", "sata5", "scsi30", "virtio15"} {
		cases = append(cases,
			driveCase{key, "local-lvm:vm-100-disk-0", "", ""},
			driveCase{key, "local-lvm:vm-100-disk-0,cache=none,aio=io_uring,discard=on,detect_zeroes=0,backup=no,replicate=yes,size=32G", "", ""},
			driveCase{key, "volume=local:100/vm-100-disk-0.qcow2,format=qcow2,rerror=stop,werror=enospc,serial=ABC%20x,shared=1,snapshot=0", "", ""},
			driveCase{key, "/dev/disk/by-id/ata-ST4000_Z1,backup=0", "", ""},
			driveCase{key, "local-lvm:vm-100-disk-0,cache=writeback", "", ""},
			driveCase{key, "local-lvm:vm-100-disk-0,cache=directsync", "", ""},
			driveCase{key, "local-lvm:vm-100-disk-0,cache=unsafe", "", ""},
			driveCase{key, "local-lvm:vm-100-disk-0,cache=writethrough", "", ""},
			driveCase{key, "local-lvm:vm-100-disk-0,aio=native", "", ""},
			driveCase{key, "local-lvm:vm-100-disk-0,aio=threads", "", ""},
			driveCase{key, "local-lvm:vm-100-disk-0,discard=ignore", "", ""},
			driveCase{key, "local-lvm:vm-100-disk-0,size=528K", "", ""},
			driveCase{key, "local-lvm:vm-100-disk-0,size=1.5GiB", "", ""},
			driveCase{key, "local-lvm:vm-100-disk-0,size=4194304", "", ""},
			driveCase{key, "local-lvm:vm-100-disk-0,mbps=10,mbps_max=20,bps_max_length=5", "", ""},
			driveCase{key, "local-lvm:vm-100-disk-0,mbps_rd=1.5,mbps_wr=2,iops_rd=100,iops_wr=50,iops_rd_max=200,iops_rd_length=3", "", ""},
			driveCase{key, "local-lvm:vm-100-disk-0,cyls=100,heads=16,secs=63,trans=lba", "cyls", "no longer an option of the drive schema"},
			// Values Proxmox's types and enumerations refuse.
			driveCase{key, "local-lvm:vm-100-disk-0,cache=on", "cache", "not one of none, writethrough, writeback, unsafe, directsync"},
			driveCase{key, "local-lvm:vm-100-disk-0,cache=None", "cache", "not one of"},
			driveCase{key, "local-lvm:vm-100-disk-0,aio=io-uring", "aio", "not one of native, threads, io_uring"},
			driveCase{key, "local-lvm:vm-100-disk-0,discard=off", "discard", "not one of ignore, on"},
			driveCase{key, "local-lvm:vm-100-disk-0,format=qcow3", "format", "not one of raw, qcow, qed, qcow2, vmdk, cloop"},
			driveCase{key, "local-lvm:vm-100-disk-0,media=floppy", "media", "not one of cdrom, disk"},
			driveCase{key, "local-lvm:vm-100-disk-0,rerror=enospc", "rerror", "not one of ignore, report, stop"},
			driveCase{key, "local-lvm:vm-100-disk-0,werror=retry", "werror", "not one of"},
			driveCase{key, "local-lvm:vm-100-disk-0,backup=maybe", "backup", "not a boolean"},
			driveCase{key, "local-lvm:vm-100-disk-0,detect_zeroes=unmap", "detect_zeroes", "not a boolean"},
			driveCase{key, "local-lvm:vm-100-disk-0,size=32GB", "size", "not a disk size"},
			driveCase{key, "local-lvm:vm-100-disk-0,size=-1G", "size", "not a disk size"},
			driveCase{key, "local-lvm:vm-100-disk-0,size=1P", "size", "not a disk size"},
			driveCase{key, "local-lvm:vm-100-disk-0,serial=a b", "serial", "not url-encoded"},
			driveCase{key, "local-lvm:vm-100-disk-0,serial=" + strings.Repeat("A", 61), "serial", "longer than 60 characters"},
			driveCase{key, "local-lvm:vm-100-disk-0,mbps=fast", "mbps", "not a number"},
			driveCase{key, "local-lvm:vm-100-disk-0,iops=1.5", "iops", "not an integer"},
			driveCase{key, "local-lvm:vm-100-disk-0,bps_rd_max_length=0", "bps_rd_max_length", "below the minimum of 1"},
			driveCase{key, "local-lvm:vm-100-disk-0,iops_wr_length=-2", "iops_wr_max_length", "below the minimum of 1"},
			// Keys the format lacks, and keys given twice.
			driveCase{key, "local-lvm:vm-100-disk-0,efitype=4m", "efitype", "is not an option of"},
			driveCase{key, "local-lvm:vm-100-disk-0,version=v2.0", "version", "is not an option of"},
			driveCase{key, "local-lvm:vm-100-disk-0,import-from=local:100/x.raw", "import-from", "is not an option of"},
			driveCase{key, "local-lvm:vm-100-disk-0,Cache=none", "Cache", "is not an option of"},
			driveCase{key, "local-lvm:vm-100-disk-0, cache=none", " cache", "is not an option of"},
			driveCase{key, "local-lvm:vm-100-disk-0,cache=none,cache=none", "cache", "given twice"},
			driveCase{key, "local-lvm:vm-100-disk-0,iops_rd_max_length=2,iops_rd_length=2", "iops_rd_length", "given twice (as iops_rd_max_length)"},
			driveCase{key, "local-lvm:vm-100-disk-0,file=local-lvm:vm-100-disk-1", "file", "given twice"},
			driveCase{key, "file=local-lvm:vm-100-disk-1,volume=local-lvm:vm-100-disk-0", "volume", "given twice (as file)"},
			driveCase{key, "local-lvm:vm-100-disk-0,local-lvm:vm-100-disk-1", "file", "given twice"},
			driveCase{key, "file=local-lvm:vm-100-disk-1,local-lvm:vm-100-disk-0", "file", "given twice"},
			driveCase{key, "local-lvm:vm-100-disk-0,cache=", "", "has no key or no value"},
			driveCase{key, "local-lvm:vm-100-disk-0,=none", "", "has no key or no value"},
			// The volume.
			driveCase{key, "cache=none", "", "has no volume"},
			driveCase{key, "", "", "has no volume"},
			driveCase{key, "local-lvm", "file", "not a volume"},
			driveCase{key, "x:vm-100-disk-0", "file", "not a volume"},
			driveCase{key, "1local:vm-100-disk-0", "file", "not a volume"},
			driveCase{key, "local-:vm-100-disk-0", "file", "not a volume"},
			driveCase{key, "local-lvm:vm-100-disk-0\nscsi1: x", "", "line feed"},
			// parse_drive's own rules.
			driveCase{key, "local-lvm:vm-100-disk-0,mbps=10,mbps_rd=5", "mbps", "cannot be combined with mbps_rd"},
			driveCase{key, "local-lvm:vm-100-disk-0,mbps=10,mbps_wr=5", "mbps", "cannot be combined with mbps_wr"},
			driveCase{key, "local-lvm:vm-100-disk-0,iops=10,iops_rd=5", "iops", "cannot be combined with iops_rd"},
			driveCase{key, "local-lvm:vm-100-disk-0,iops=10,iops_wr=5", "iops", "cannot be combined with iops_wr"},
			driveCase{key, "local-lvm:vm-100-disk-0,mbps_max=20", "mbps_max", "requires mbps"},
			driveCase{key, "local-lvm:vm-100-disk-0,mbps_rd_max=20", "mbps_rd_max", "requires mbps_rd"},
			driveCase{key, "local-lvm:vm-100-disk-0,mbps_wr_max=20,mbps_wr=0", "mbps_wr_max", "requires mbps_wr"},
			driveCase{key, "local-lvm:vm-100-disk-0,mbps=1,bps_max_length=3", "bps_max_length", "requires mbps_max"},
			driveCase{key, "local-lvm:vm-100-disk-0,iops_wr_max_length=3", "iops_wr_max_length", "requires iops_wr_max"},
			driveCase{key, "local-lvm:vm-100-disk-0,bps=1048576,mbps=1", "bps", "cannot be combined with mbps"},
			// Perl truth: "0" is unset, "0.0" is set; iops_max passes
			// (the rule names miops_max, which never exists).
			driveCase{key, "local-lvm:vm-100-disk-0,mbps=0,mbps_rd=5", "", ""},
			driveCase{key, "local-lvm:vm-100-disk-0,mbps=0.0,mbps_rd=5", "mbps", "cannot be combined"},
			driveCase{key, "local-lvm:vm-100-disk-0,mbps_max=0", "", ""},
			driveCase{key, "local-lvm:vm-100-disk-0,mbps_max=0.0", "mbps_max", "requires mbps"},
			driveCase{key, "local-lvm:vm-100-disk-0,iops_max=200", "", ""},
			driveCase{key, "local-lvm:vm-100-disk-0,iops=-5,mbps=+1e3", "", ""},
			driveCase{key, "local:iso/debian.iso,media=cdrom,format=raw", "format", "not allowed on a CD-ROM"},
			driveCase{key, "none,media=cdrom,snapshot=1", "snapshot", "not allowed on a CD-ROM"},
		)
		if key != "virtio15" {
			cases = append(cases,
				driveCase{key, "none,media=cdrom", "", ""},
				driveCase{key, "cdrom,media=cdrom", "", ""},
				driveCase{key, "local:iso/debian-13.0.0-amd64-netinst.iso,media=cdrom,size=754M", "", ""},
				driveCase{key, "local-lvm:vm-100-cloudinit,media=cdrom", "", ""},
				driveCase{key, "none,media=cdrom,snapshot=0", "", ""},
			)
		}
	}
	runDriveCases(t, cases)
}

// What each bus adds to the base (Drive.pm %model_fmt, %ssd_fmt, ...).
func TestParseDriveBusOptions(t *testing.T) {
	const v = "local-lvm:vm-100-disk-0,"
	accepts := map[string][]string{
		"ide":    {"model=QEMU%20HARDDISK", "ssd=1", "wwn=0x5000c500a1b2c3d4"},
		"sata":   {"ssd=on", "wwn=0x5000C500A1B2C3D4"},
		"scsi":   {"iothread=1", "product=QEMU HARDDISK", "vendor=ATA", "queues=4", "ro=1", "scsiblock=1", "ssd=1", "wwn=0x5000c500a1b2c3d4"},
		"virtio": {"iothread=1", "ro=true"},
	}
	options := []string{"model", "ssd", "wwn", "iothread", "product", "vendor", "queues", "ro", "scsiblock"}
	var cases []driveCase
	for bus, ok := range accepts {
		key := bus + "0"
		have := map[string]bool{}
		for _, o := range ok {
			cases = append(cases, driveCase{key, v + o, "", ""})
			name, _, _ := strings.Cut(o, "=")
			have[name] = true
		}
		for _, o := range options {
			if !have[o] {
				cases = append(cases, driveCase{key, v + o + "=1", o, "is not an option of"})
			}
		}
	}
	cases = append(cases,
		driveCase{"scsi0", v + "queues=1", "queues", "below the minimum of 2"},
		driveCase{"scsi0", v + "queues=two", "queues", "not an integer"},
		driveCase{"scsi0", v + "product=" + strings.Repeat("X", 17), "product", "not up to 16"},
		driveCase{"scsi0", v + "product=" + strings.Repeat("X", 16), "", ""},
		driveCase{"scsi0", v + "vendor=ABCDEFGHI", "vendor", "not up to 8"},
		driveCase{"scsi0", v + "vendor=A.B", "vendor", "not up to 8"},
		driveCase{"scsi0", v + "wwn=0x5000c500a1b2c3d", "wwn", "not 0x and 16 hex"},
		driveCase{"scsi0", v + "wwn=0X5000c500a1b2c3d4", "wwn", "not 0x and 16 hex"},
		driveCase{"ide0", v + "model=" + strings.Repeat("%41", 41), "model", "longer than 120"},
		driveCase{"ide0", v + "model=a/b", "model", "not url-encoded"},
		driveCase{"virtio0", v + "ssd=1", "ssd", "is not an option of VirtIO Block disks"},
		driveCase{"virtio0", "local:iso/debian.iso,media=cdrom", "media", "VirtIO Block drives cannot be CD-ROMs"},
		driveCase{"virtio0", "none,media=cdrom", "media", "cannot be CD-ROMs"},
	)
	runDriveCases(t, cases)
}

// efidisk0 ($efidisk_fmt): file, format, size, efitype, pre-enrolled-keys,
// ms-cert, and nothing else.
func TestParseDriveEFIDisk(t *testing.T) {
	runDriveCases(t, []driveCase{
		{"efidisk0", "local-lvm:vm-100-disk-1,size=4M", "", ""},
		{"efidisk0", "local-lvm:vm-100-disk-1,efitype=4m,pre-enrolled-keys=1,size=4M", "", ""},
		{"efidisk0", "ssd-data:110/vm-110-disk-0.qcow2,efitype=4m,ms-cert=2023w,pre-enrolled-keys=1,size=528K", "", ""},
		{"efidisk0", "TrueNAS:203/vm-203-disk-1.raw,format=raw,size=128K", "", ""},
		{"efidisk0", "volume=local-lvm:vm-100-disk-1,efitype=2m,ms-cert=2023k", "", ""},
		{"efidisk0", "local-lvm:vm-100-disk-1,ms-cert=2011", "", ""},
		{"efidisk0", "local-lvm:vm-100-disk-1,ms-cert=2023", "", ""},
		{"efidisk0", "/dev/zvol/rpool/efi,size=1M", "", ""},
		{"efidisk0", "local-lvm:vm-100-disk-1,efitype=4m,discard=on", "discard", "is not an option of EFI disks"},
		{"efidisk0", "local-lvm:vm-100-disk-1,cache=writeback", "cache", "is not an option of EFI disks"},
		{"efidisk0", "local-lvm:vm-100-disk-1,aio=native", "aio", "is not an option of EFI disks"},
		{"efidisk0", "local-lvm:vm-100-disk-1,iothread=1", "iothread", "is not an option of EFI disks"},
		{"efidisk0", "local-lvm:vm-100-disk-1,backup=0", "backup", "is not an option of EFI disks"},
		{"efidisk0", "local-lvm:vm-100-disk-1,mbps=10", "mbps", "is not an option of EFI disks"},
		{"efidisk0", "local-lvm:vm-100-disk-1,media=cdrom", "media", "is not an option of EFI disks"},
		{"efidisk0", "local-lvm:vm-100-disk-1,bps_rd_length=2", "bps_rd_length", "is not an option of EFI disks"},
		{"efidisk0", "local-lvm:vm-100-disk-1,version=v2.0", "version", "is not an option of EFI disks"},
		{"efidisk0", "local-lvm:vm-100-disk-1,efitype=8m", "efitype", "not one of 2m, 4m"},
		{"efidisk0", "local-lvm:vm-100-disk-1,ms-cert=2024", "ms-cert", "not one of 2011, 2023, 2023w, 2023k"},
		{"efidisk0", "local-lvm:vm-100-disk-1,pre-enrolled-keys=2", "pre-enrolled-keys", "not a boolean"},
		{"efidisk0", "local-lvm:vm-100-disk-1,format=qcow3", "format", "not one of"},
		{"efidisk0", "local-lvm:vm-100-disk-1,size=4 M", "size", "not a disk size"},
		{"efidisk1", "local-lvm:vm-100-disk-1", "", "not a drive key"},
	})
	d, _ := ParseDrive("efidisk0", "local-lvm:vm-100-disk-1,efitype=4m,pre-enrolled-keys=yes")
	if d.Kind() != KindEFIVars || d.Opts["pre-enrolled-keys"] != "1" || !Accepts("efidisk", "ms-cert") || Accepts("efidisk", "discard") {
		t.Errorf("efidisk0: %+v kind %s", d, d.Kind())
	}
}

// tpmstate0 ($tpmstate_fmt): file, format (raw, qcow2, vmdk), size, version.
func TestParseDriveTPMState(t *testing.T) {
	runDriveCases(t, []driveCase{
		{"tpmstate0", "local-lvm:vm-200-disk-3,size=4M,version=v2.0", "", ""},
		{"tpmstate0", "ssd-data:110/vm-110-disk-2.qcow2,size=4M,version=v2.0", "", ""},
		{"tpmstate0", "local-lvm:vm-200-disk-3,version=v1.2,format=raw", "", ""},
		{"tpmstate0", "local:110/vm-110-disk-2.vmdk,format=vmdk", "", ""},
		{"tpmstate0", "local-lvm:vm-200-disk-3,version=v3.0", "version", "not one of v1.2, v2.0"},
		{"tpmstate0", "local-lvm:vm-200-disk-3,format=qed", "format", "not one of raw, qcow2, vmdk"},
		{"tpmstate0", "local-lvm:vm-200-disk-3,discard=on", "discard", "is not an option of TPM state volumes"},
		{"tpmstate0", "local-lvm:vm-200-disk-3,cache=none", "cache", "is not an option of TPM state"},
		{"tpmstate0", "local-lvm:vm-200-disk-3,efitype=4m", "efitype", "is not an option of TPM state"},
		{"tpmstate0", "local-lvm:vm-200-disk-3,backup=0", "backup", "is not an option of TPM state"},
		{"tpmstate1", "local-lvm:vm-200-disk-3", "", "not a drive key"},
	})
	d, _ := ParseDrive("tpmstate0", "local-lvm:vm-200-disk-3,version=v2.0")
	if d.Kind() != KindTPMState || d.Kind().GuestDisk() || d.Kind().BlockNode() {
		t.Errorf("tpmstate0 kind %s", d.Kind())
	}
}

// unusedN ($unused_fmt): a volume id and nothing else.
func TestParseDriveUnused(t *testing.T) {
	runDriveCases(t, []driveCase{
		{"unused0", "TrueNAS:213/vm-213-disk-0.qcow2", "", ""},
		{"unused255", "local-lvm:vm-100-disk-3", "", ""},
		{"unused1", "volume=local-lvm:vm-100-disk-3", "", ""},
		{"unused0", "/dev/sdb", "file", "not a volume id"},
		{"unused0", "none", "file", "not a volume id"},
		{"unused0", "local-lvm:vm-100-disk-3,size=4G", "size", "is not an option of unused volumes"},
		{"unused256", "local-lvm:vm-100-disk-3", "", "not a drive key"},
	})
	d, _ := ParseDrive("unused3", "local-lvm:vm-100-disk-3")
	if d.Kind() != KindUnused || d.Index != 3 || d.Kind().GuestDisk() {
		t.Errorf("unused3: %+v kind %s", d, d.Kind())
	}
}

// Keys qemu-server does not have are no drive keys: it drops them as
// unknown settings, the VM starts without them.
func TestDriveKeys(t *testing.T) {
	for key, want := range map[string]bool{
		"ide0": true, "ide3": true, "ide4": false, "sata5": true, "sata6": false,
		"scsi0": true, "scsi30": true, "scsi31": false, "scsi01": false, "virtio15": true,
		"virtio16": false, "efidisk0": true, "efidisk1": false, "tpmstate0": true,
		"unused0": false, "cdrom": false, "scsi": false, "net0": false, "SCSI0": false,
	} {
		if got := IsDiskKey(key); got != want {
			t.Errorf("IsDiskKey(%q) = %v", key, got)
		}
	}
	for key, want := range map[string]bool{"unused0": true, "unused255": true, "unused256": false, "unused007": false, "scsi0": false} {
		if got := IsUnusedKey(key); got != want {
			t.Errorf("IsUnusedKey(%q) = %v", key, got)
		}
	}
	keys := map[string]string{"virtio1": "", "scsi10": "", "scsi2": "", "ide2": "", "sata0": "", "tpmstate0": "", "efidisk0": "", "unused1": "", "unused0": "", "net0": ""}
	if got := DiskKeys(keys); !reflect.DeepEqual(got, []string{"ide2", "sata0", "scsi2", "scsi10", "virtio1", "efidisk0", "tpmstate0"}) {
		t.Errorf("DiskKeys = %v", got)
	}
	if got := UnusedKeys(keys); !reflect.DeepEqual(got, []string{"unused0", "unused1"}) {
		t.Errorf("UnusedKeys = %v", got)
	}
	if b, i, ok := SplitDiskKey("unused4"); ok {
		t.Errorf("SplitDiskKey(unused4) = %s %d", b, i)
	}
}

// What Proxmox stores: booleans as 1/0, bps* as mbps* — with parse_drive's
// bug, which makes every bps value mbps "0.000" (no limit at all).
func TestParseDriveStoresAsProxmox(t *testing.T) {
	d, err := ParseDrive("scsi1", "local-lvm:vm-100-disk-1,iothread=on,ssd=no,bps_wr=20971520,iops_rd=500")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"iothread": "1", "ssd": "0", "mbps_wr": "0.000", "iops_rd": "500"}
	if !reflect.DeepEqual(d.Opts, want) || d.Index != 1 || d.Bus != "scsi" {
		t.Errorf("opts %v, want %v", d.Opts, want)
	}
	if got := d.Limits(); got.String() != "iops-read=500" {
		t.Errorf("limits %s", got)
	}
	if got := d.String(); got != "local-lvm:vm-100-disk-1,iothread=1,ssd=0,mbps_wr=0.000,iops_rd=500" {
		t.Errorf("String() = %s", got)
	}
	// A volume after the options is still the volume; "file=0" is Perl-false
	// and a bare value replaces it.
	for _, line := range []string{"cache=none,local-lvm:vm-100-disk-1", "file=0,local-lvm:vm-100-disk-1,cache=none"} {
		d, err := ParseDrive("scsi1", line)
		if err != nil || d.Volume != "local-lvm:vm-100-disk-1" || d.Opts["cache"] != "none" {
			t.Errorf("%s: %+v %v", line, d, err)
		}
	}
	// A path with "=" prints back as file=...
	d, err = ParseDrive("scsi2", "file=/dev/disk/by-path/pci-0000:00:1f.2-ata-1=x,backup=0")
	if err != nil || d.String() != "file=/dev/disk/by-path/pci-0000:00:1f.2-ata-1=x,backup=0" {
		t.Errorf("%+v %v", d, err)
	}
	if _, err := ParseDrive("scsi2", d.String()); err != nil {
		t.Error(err)
	}
	// ParseDriveSchema reads a line parse_drive refuses only for its
	// combination rules.
	if d, err := ParseDriveSchema("sata1", "local-lvm:vm-1-disk-4,mbps=10,mbps_rd=5"); err != nil || len(d.LimitProblems()) != 1 {
		t.Errorf("schema: %+v %v", d, err)
	}
	if _, err := ParseDriveSchema("sata1", "local-lvm:vm-1-disk-4,iothread=1"); err == nil {
		t.Error("schema accepted iothread on sata")
	}
	if _, err := ParseDriveSchema("sata9", "local-lvm:vm-1-disk-4"); err == nil {
		t.Error("schema accepted sata9")
	}
	// Long input is quoted short.
	_, err = ParseDrive("scsi0", "local-lvm:vm-1-disk-0,cache="+strings.Repeat("x", 5000))
	if err == nil || len(err.Error()) > 200 || !strings.Contains(err.Error(), "(5000 bytes)") {
		t.Errorf("long value: %v", err)
	}
}

func TestKinds(t *testing.T) {
	for line, want := range map[string]Kind{
		"ide2:none,media=cdrom":                          KindEmptyCDROM,
		"ide2:local:iso/x.iso,media=cdrom":               KindCDROM,
		"ide2:local-lvm:vm-100-cloudinit,media=cdrom":    KindCDROM,
		"scsi0:local-lvm:vm-100-disk-0":                  KindDisk,
		"sata0:p2b:iso/OpenCore-v21.iso,media=disk":      KindDisk,
		"efidisk0:local-lvm:vm-100-disk-1":               KindEFIVars,
		"tpmstate0:local-lvm:vm-100-disk-2,version=v2.0": KindTPMState,
		"unused0:local-lvm:vm-100-disk-9":                KindUnused,
	} {
		key, v, _ := strings.Cut(line, ":")
		d, err := ParseDrive(key, v)
		if err != nil {
			t.Fatal(err)
		}
		if d.Kind() != want {
			t.Errorf("%s: kind %s, want %s", line, d.Kind(), want)
		}
		if !strings.HasPrefix(d.Kind().NotListed(key), key+" is ") || d.Kind().Describe() == "" {
			t.Errorf("%s: note %q", line, d.Kind().NotListed(key))
		}
	}
	guest := map[Kind]bool{KindDisk: true, KindCDROM: true, KindEmptyCDROM: true}
	block := map[Kind]bool{KindDisk: true, KindCDROM: true, KindEFIVars: true}
	for k := KindDisk; k <= KindUnused; k++ {
		if k.GuestDisk() != guest[k] || k.BlockNode() != block[k] {
			t.Errorf("%s: guest %v block %v", k, k.GuestDisk(), k.BlockNode())
		}
	}
	if KindUnused.String() != "unused" || KindEFIVars.String() != "efivars" {
		t.Error(KindUnused.String(), KindEFIVars.String())
	}
	cloud, _ := ParseDrive("ide2", "local-lvm:vm-100-cloudinit,media=cdrom")
	iso, _ := ParseDrive("ide2", "local:iso/cloudinit-notes.iso,media=cdrom")
	if !cloud.IsCloudInit() || iso.IsCloudInit() {
		t.Error("cloud-init detection")
	}
}

// Accepts and Options answer from the same formats.
func TestAccepts(t *testing.T) {
	for _, c := range []struct {
		bus, opt string
		want     bool
	}{
		{"scsi", "discard", true}, {"efidisk", "discard", false}, {"tpmstate", "discard", false},
		{"virtio", "ssd", false}, {"sata", "ssd", true}, {"scsi", "volume", true},
		{"scsi", "bps_rd_length", true}, {"efidisk", "volume", true}, {"unused", "size", false},
		{"floppy", "file", false}, {"ide", "model", true}, {"sata", "model", false},
	} {
		if got := Accepts(c.bus, c.opt); got != c.want {
			t.Errorf("Accepts(%s, %s) = %v", c.bus, c.opt, got)
		}
	}
	if got := strings.Join(Options("efidisk"), ","); got != "efitype,file,format,ms-cert,pre-enrolled-keys,size" {
		t.Errorf("Options(efidisk) = %s", got)
	}
	if got := strings.Join(Options("tpmstate"), ","); got != "file,format,size,version" {
		t.Errorf("Options(tpmstate) = %s", got)
	}
}
