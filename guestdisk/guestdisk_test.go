package guestdisk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

func drive(t *testing.T, key, line string) *qemuserver.Drive {
	t.Helper()
	d, err := qemuserver.ParseDrive(key, line)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestByID(t *testing.T) {
	for _, tc := range []struct {
		key, line, device string
		blockdev, q35     bool
		want              Name
	}{
		// SCSI: vendor, product and device_id (drive-<id>, explicit under
		// -blockdev) as udev joins them.
		{"scsi1", "local-lvm:vm-370-disk-1", "scsi-hd", true, true, Name{ByID: "/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_drive-scsi1"}},
		{"scsi1", "local-lvm:vm-370-disk-1,serial=ABC", "scsi-hd", true, true, Name{ByID: "/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_drive-scsi1"}},
		// -drive: QEMU takes the serial as device_id, else the BlockBackend's name.
		{"scsi1", "local-lvm:vm-370-disk-1,serial=ABC", "scsi-hd", false, false, Name{ByID: "/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_ABC"}},
		{"scsi1", "local-lvm:vm-370-disk-1", "scsi-hd", false, false, Name{ByID: "/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_drive-scsi1"}},
		{"scsi2", "local:iso/x.iso,media=cdrom", "scsi-cd", true, true, Name{ByID: "/dev/disk/by-id/scsi-0QEMU_QEMU_CD-ROM_drive-scsi2"}},
		// vendor= and product= are INQUIRY fields: 8 and 16 bytes, padded.
		{"scsi3", "local-lvm:vm-370-disk-3,vendor=ACME,product=Fast Disk", "scsi-hd", true, false, Name{ByID: "/dev/disk/by-id/scsi-0ACME_Fast_Disk_drive-scsi3"}},
		{"scsi3", "local-lvm:vm-370-disk-3,vendor=ABCDEFGH,product=0123456789abcdef", "scsi-hd", true, false, Name{ByID: "/dev/disk/by-id/scsi-0ABCDEFGH0123456789abcdefdrive-scsi3"}},
		{"scsi4", "local-lvm:vm-370-disk-4,wwn=0x5000C500ABCDEF01", "scsi-hd", true, false, Name{ByID: "/dev/disk/by-id/wwn-0x5000c500abcdef01"}},
		{"scsi5", "/dev/sdc,scsiblock=1", "scsi-block", true, false, Name{Note: "SCSI passthrough: the guest sees the host device's own identifiers"}},
		{"scsi5", "/dev/sg2", "scsi-generic", true, false, Name{Note: "SCSI passthrough: the guest sees the host device's own identifiers"}},
		// VirtIO Block: only with a serial (at most 20 bytes reach the guest).
		{"virtio1", "local-lvm:vm-370-disk-2", "virtio-blk-pci", true, true, Name{Note: "VirtIO Block without serial=: no /dev/disk/by-id name in the guest (set serial= for one)"}},
		{"virtio1", "local-lvm:vm-370-disk-2,serial=data01", "virtio-blk-pci", true, true, Name{ByID: "/dev/disk/by-id/virtio-data01"}},
		{"virtio1", "local-lvm:vm-370-disk-2,serial=0123456789abcdefghijKLM", "virtio-blk-pci", true, true, Name{ByID: "/dev/disk/by-id/virtio-0123456789abcdefghij"}},
		// SATA/IDE: model and serial; the default serial is QEMU's QM%05d.
		{"sata0", "local-lvm:vm-370-disk-5", "ide-hd", true, false, Name{ByID: "/dev/disk/by-id/ata-QEMU_HARDDISK_QM00005", Assigned: true,
			Note: "serial numbered by QEMU at start (set serial= for a name that survives controller changes)"}},
		{"sata1", "local-lvm:vm-370-disk-3", "ide-hd", true, true, Name{ByID: "/dev/disk/by-id/ata-QEMU_HARDDISK_QM00015", Assigned: true,
			Note: "serial numbered by QEMU at start (set serial= for a name that survives controller changes)"}},
		{"ide1", "local-lvm:vm-370-disk-3,serial=S1,model=Big%20Disk", "ide-hd", true, true, Name{ByID: "/dev/disk/by-id/ata-Big_Disk_S1"}},
		{"sata2", "local-lvm:vm-370-disk-3,wwn=0x5000c500abcdef02", "ide-hd", true, true, Name{ByID: "/dev/disk/by-id/wwn-0x5000c500abcdef02"}},
		{"ide2", "local:iso/x.iso,media=cdrom", "ide-cd", false, false, Name{ByID: "/dev/disk/by-id/ata-QEMU_DVD-ROM_QM00003", Assigned: true,
			Note: "serial numbered by QEMU at start (set serial= for a name that survives controller changes)"}},
		{"efidisk0", "local-lvm:vm-370-disk-9,efitype=4m", "", true, true, Name{Note: "no guest-visible name known for device "}},
	} {
		got := ByID(drive(t, tc.key, tc.line), tc.device, tc.blockdev, tc.q35)
		if got != tc.want {
			t.Errorf("ByID(%s: %s, %s, blockdev %v, q35 %v) =\n%+v\nwant\n%+v", tc.key, tc.line, tc.device, tc.blockdev, tc.q35, got, tc.want)
		}
	}
}

// QEMU numbers IDE units across controllers in the order it creates them.
func TestATASerialNumber(t *testing.T) {
	for _, tc := range []struct {
		key  string
		q35  bool
		want int
	}{
		// i440fx: PIIX ide.0/ide.1 with two units each, then ahci0, ahci1.
		{"ide0", false, 1}, {"ide1", false, 2}, {"ide2", false, 3}, {"ide3", false, 4},
		{"sata0", false, 5}, {"sata1", false, 7}, {"sata5", false, 15},
		// q35: ICH9's six ports first (qemu-server moves odd IDE indices
		// two ports up), then ahci0.
		{"ide0", true, 1}, {"ide1", true, 5}, {"ide2", true, 3}, {"ide3", true, 7},
		{"sata0", true, 13}, {"sata1", true, 15}, {"sata5", true, 23},
	} {
		b, i, _ := qemuserver.SplitDiskKey(tc.key)
		got, ok := ataSerialNumber(&qemuserver.Drive{Key: tc.key, Bus: b, Index: i}, tc.q35)
		if !ok || got != tc.want {
			t.Errorf("%s q35=%v: QM%05d (%v), want QM%05d", tc.key, tc.q35, got, ok, tc.want)
		}
	}
	if _, ok := ataSerialNumber(&qemuserver.Drive{Key: "scsi0", Bus: "scsi"}, true); ok {
		t.Error("a SCSI disk has an ATA serial")
	}
	// A disk ByID cannot number says so.
	n := ByID(&qemuserver.Drive{Key: "scsi0", Bus: "scsi", Opts: map[string]string{}}, "ide-hd", true, true)
	if n.ByID != "" || n.Note == "" {
		t.Errorf("%+v", n)
	}
}

func TestIsQ35(t *testing.T) {
	for m, want := range map[string]bool{"q35": true, "type=q35,viommu=virtio": true, "pc-q35-10.0+pve0": true, "pc-i440fx-9.2": false, "": false} {
		if IsQ35(m) != want {
			t.Errorf("IsQ35(%q) != %v", m, want)
		}
	}
}

func pci(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("testdata/query-pci-lab370.json")
	if err != nil {
		t.Fatal(err)
	}
	return PCIDevices(gjson.ParseBytes(b))
}

func TestPCIDevicesRecorded(t *testing.T) {
	want := map[string]string{"00:01.0": "ahci0", "00:02.0": "virtioscsi0", "00:03.0": "virtioscsi1", "00:04.0": "virtio1"}
	if got := pci(t); !reflect.DeepEqual(got, want) {
		t.Errorf("PCIDevices = %v, want %v", got, want)
	}
	// Devices behind a bridge carry the bus number the guest gave it.
	got := PCIDevices(gjson.Parse(`[{"bus": 0, "devices": [{"bus": 0, "slot": 30, "function": 0, "qdev_id": "pci.1",
		"pci_bridge": {"devices": [{"bus": 1, "slot": 1, "function": 0, "qdev_id": "virtioscsi0"}]}}]}]`))
	if !reflect.DeepEqual(got, map[string]string{"00:1e.0": "pci.1", "01:01.0": "virtioscsi0"}) {
		t.Errorf("bridge: %v", got)
	}
}

func TestDiskID(t *testing.T) {
	p := map[string]string{"00:01.0": "ahci0", "00:02.0": "virtioscsi3", "00:04.0": "virtio1", "00:05.0": "scsihw0", "00:06.0": "scsihw1", "00:07.0": "ahci1", "00:08.0": "pci.1"}
	for _, tc := range []struct {
		gd     qmp.GuestDisk
		scsihw string
		want   string
	}{
		{qmp.GuestDisk{PCI: "0000:00:04.0"}, "", "virtio1"},
		{qmp.GuestDisk{PCI: "0000:00:02.0", Unit: 3}, "virtio-scsi-single", "scsi3"},
		{qmp.GuestDisk{PCI: "0000:00:05.0", Unit: 12, Target: 0}, "virtio-scsi-pci", "scsi12"},
		{qmp.GuestDisk{PCI: "0000:00:05.0", Unit: 2}, "megasas", "scsi2"},
		{qmp.GuestDisk{PCI: "0000:00:06.0", Target: 3}, "lsi", "scsi10"},
		{qmp.GuestDisk{PCI: "0000:00:06.0", Target: 3}, "", "scsi10"},
		{qmp.GuestDisk{PCI: "0000:00:01.0", Unit: 1}, "", "sata1"},
		{qmp.GuestDisk{PCI: "0000:00:07.0", Unit: 2}, "", "sata8"},
		{qmp.GuestDisk{PCI: "00:04.0"}, "", "virtio1"}, // without the domain
		{qmp.GuestDisk{PCI: "0000:00:08.0"}, "", ""},   // a bridge
		{qmp.GuestDisk{PCI: "0000:00:09.0"}, "", ""},   // unknown
		{qmp.GuestDisk{}, "", ""},
	} {
		if got := DiskID(tc.gd, p, tc.scsihw); got != tc.want {
			t.Errorf("DiskID(%+v, %s) = %q, want %q", tc.gd, tc.scsihw, got, tc.want)
		}
	}
}

// The guest agent's view of VM 370: scsi1 (/dev/sda) with two
// filesystems, virtio1 (/dev/vda) unmounted, a disk the agent cannot place
// and one known only through guest-get-fsinfo (an agent without
// guest-get-disks).
func TestAttribute(t *testing.T) {
	scsi1 := qmp.GuestDisk{BusType: "scsi", PCI: "0000:00:03.0", Dev: "/dev/sda", Unit: 1}
	disks := []qmp.GuestBlockDevice{
		{Name: "/dev/sda", Address: &scsi1},
		{Name: "/dev/sda1", Partition: true, Dependencies: []string{"/dev/sda"}},
		{Name: "/dev/vda", Address: &qmp.GuestDisk{BusType: "virtio", PCI: "0000:00:04.0", Dev: "/dev/vda"}},
		{Name: "/dev/sdz", Address: &qmp.GuestDisk{BusType: "scsi", PCI: "0000:00:1f.0"}},
		{Name: "/dev/dm-0"},
	}
	fs := []qmp.GuestFilesystem{
		{Mountpoint: "/srv", Disks: []qmp.GuestDisk{scsi1}},
		{Mountpoint: "/data", Disks: []qmp.GuestDisk{scsi1, scsi1}},
		{Mountpoint: "/boot", Disks: []qmp.GuestDisk{{BusType: "scsi", PCI: "0000:00:02.0", Dev: "/dev/sdb"}}},
		{Mountpoint: "/x", Disks: []qmp.GuestDisk{{PCI: "0000:00:1f.0"}}},
	}
	got := Attribute(disks, fs, pci(t), "virtio-scsi-single")
	zero := i64(0)
	want := map[string]Seen{
		"scsi1": {Device: "/dev/sda", Mounts: []string{"/data", "/srv"}, Partitions: []string{"/dev/sda1"}, Filesystems: []Filesystem{
			{Mountpoint: "/data", Layout: OnVirtual, UsedBytes: zero, TotalBytes: zero, Disks: []string{"scsi1"}},
			{Mountpoint: "/srv", Layout: OnVirtual, UsedBytes: zero, TotalBytes: zero, Disks: []string{"scsi1"}},
		}},
		"virtio1": {Device: "/dev/vda", Partitions: []string{}},
		"scsi0": {Device: "/dev/sdb", Mounts: []string{"/boot"}, Filesystems: []Filesystem{
			{Mountpoint: "/boot", Layout: OnVirtual, UsedBytes: zero, TotalBytes: zero, Disks: []string{"scsi0"}}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Attribute =\n%+v\nwant\n%+v", got, want)
	}
}

func TestAsk(t *testing.T) {
	disksReply := `[{"name": "/dev/vda", "partition": false, "address": {"bus-type": "virtio", "bus": 0, "unit": 0, "target": 0,
		"pci-controller": {"domain": 0, "bus": 0, "slot": 4, "function": 0}, "dev": "/dev/vda"}}]`
	fsReply := `[{"name": "vda1", "mountpoint": "/data", "type": "ext4", "disk": [{"bus-type": "virtio", "bus": 0, "unit": 0, "target": 0,
		"pci-controller": {"domain": 0, "bus": 0, "slot": 4, "function": 0}, "dev": "/dev/vda"}]}]`
	// no used-bytes or total-bytes in the reply: qemu-ga before 3.0.
	vda1 := []Filesystem{{Mountpoint: "/data", Type: "ext4", Device: "vda1", Layout: OnPartition, Disks: []string{"virtio1"}}}
	notFound := func(cmd string) string {
		return `{"error": {"class": "CommandNotFound", "desc": "The command ` + cmd + ` has not been found"}}`
	}
	for _, tc := range []struct {
		name    string
		replies map[string]string
		want    map[string]Seen
		err     bool
	}{
		{"both", map[string]string{"guest-get-disks": disksReply, "guest-get-fsinfo": fsReply},
			map[string]Seen{"virtio1": {Device: "/dev/vda", Mounts: []string{"/data"}, Filesystems: vda1, Partitions: []string{}}}, false},
		{"old agent: fsinfo only", map[string]string{"guest-get-fsinfo": fsReply},
			map[string]Seen{"virtio1": {Device: "/dev/vda", Mounts: []string{"/data"}, Filesystems: vda1}}, false},
		{"disks only", map[string]string{"guest-get-disks": disksReply}, map[string]Seen{"virtio1": {Device: "/dev/vda", Partitions: []string{}}}, false},
		{"neither", map[string]string{}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := qmptest.NewAgent(t)
			a.Handle = func(w net.Conn, cmd string, _ gjson.Result) {
				if r, ok := tc.replies[cmd]; ok {
					var line bytes.Buffer
					if err := json.Compact(&line, []byte(r)); err != nil {
						t.Error(err)
					}
					fmt.Fprintf(w, "{\"return\": %s}\n", line.String())
					return
				}
				fmt.Fprintln(w, notFound(cmd))
			}
			got, err := Ask(context.Background(), qmp.Agent{Path: a.Sock(), Timeout: 2 * time.Second}, pci(t), "virtio-scsi-single")
			if (err != nil) != tc.err || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Ask = %+v, %v", got, err)
			}
		})
	}
}

func TestAgentEnabled(t *testing.T) {
	for opt, want := range map[string]bool{"1": true, "enabled=1": true, "enabled=1,fstrim_cloned_disks=1": true, "0": false,
		"enabled=0,type=virtio": false, "": false, "yes": true, "1,type=isa": true} {
		if AgentEnabled(opt) != want {
			t.Errorf("AgentEnabled(%q) != %v", opt, want)
		}
	}
}

func TestByIDEdges(t *testing.T) {
	for _, tc := range []struct {
		key, line, device string
		want              string
	}{
		// Exactly 20 bytes of virtio serial pass whole; exactly 8 bytes of
		// vendor leave no space before the product.
		{"virtio2", "local:x,serial=0123456789abcdefghij", "virtio-blk-pci", "/dev/disk/by-id/virtio-0123456789abcdefghij"},
		{"scsi6", "local:x,vendor=ABCDEFGH,product=P", "scsi-hd", "/dev/disk/by-id/scsi-0ABCDEFGHP_drive-scsi6"},
	} {
		if got := ByID(drive(t, tc.key, tc.line), tc.device, true, false); got.ByID != tc.want {
			t.Errorf("%s: %q, want %q", tc.key, got.ByID, tc.want)
		}
	}
	if pad("QEMU", 8) != "QEMU    " || pad("ABCDEFGHIJ", 8) != "ABCDEFGH" || pad("ABCDEFGH", 8) != "ABCDEFGH" {
		t.Errorf("pad: %q %q", pad("QEMU", 8), pad("ABCDEFGHIJ", 8))
	}
}

// The replies of a real guest agent (qemu-ga 7.2, testdata/README.md)
// placed on the VM's disks.
func TestAttributeRecorded(t *testing.T) {
	read := func(name string) gjson.Result {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return gjson.ParseBytes(b)
	}
	a := qmptest.NewAgent(t)
	a.Handle = qmptest.AgentReplies(map[string]string{
		"guest-get-disks":  strings.TrimSpace(read("guest-get-disks-7.2.json").Raw),
		"guest-get-fsinfo": strings.TrimSpace(read("guest-get-fsinfo-7.2.json").Raw),
	})
	pci := map[string]string{"00:01.0": "ahci0", "00:02.0": "virtioscsi1", "00:03.0": "virtio1"}
	got, err := Ask(context.Background(), qmp.Agent{Path: a.Sock(), Timeout: 2 * time.Second}, pci, "virtio-scsi-single")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Seen{
		"scsi1": {Device: "/dev/sda", Mounts: []string{"/mnt/s1"}, Partitions: []string{}, Filesystems: []Filesystem{
			{Mountpoint: "/mnt/s1", Type: "ext4", Device: "sda", Layout: OnDisk, UsedBytes: i64(14336), TotalBytes: i64(110621696), Disks: []string{"scsi1"}}}},
		"sata1":   {Device: "/dev/sdb", Partitions: []string{}},
		"virtio1": {Device: "/dev/vda", Partitions: []string{}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Ask = %+v\nwant %+v", got, want)
	}
}

func i64(n int64) *int64 { return &n }

// Where a filesystem sits on a disk, from the device guest-get-fsinfo
// names against the disk's node.
func TestLayoutOf(t *testing.T) {
	for _, tc := range []struct {
		name, dev string
		want      Layout
	}{
		{"sda", "/dev/sda", OnDisk},
		{"vda", "/dev/vda", OnDisk},
		{"sda1", "/dev/sda", OnPartition},
		{"vdb12", "/dev/vdb", OnPartition},
		{"nvme0n1p1", "/dev/nvme0n1", OnPartition},
		{"nvme0n11", "/dev/nvme0n1", OnVirtual}, // another namespace's name shape, not a partition
		{"sdab", "/dev/sda", OnVirtual},         // another disk
		{"dm-0", "/dev/sda", OnVirtual},
		{"md0", "/dev/vda", OnVirtual},
		{"sda", "", OnVirtual}, // the agent named no disk node
	} {
		if got := layoutOf(tc.name, tc.dev); got != tc.want {
			t.Errorf("layoutOf(%q, %q) = %s, want %s", tc.name, tc.dev, got, tc.want)
		}
	}
}

// One filesystem over two disks (LVM in the guest) is on both, each naming
// both; a filesystem the VM's controllers do not place is on none; a
// partition's filesystem is on its disk.
func TestFilesystems(t *testing.T) {
	sda := qmp.GuestDisk{BusType: "scsi", PCI: "0000:00:03.0", Dev: "/dev/sda", Unit: 1}
	vda := qmp.GuestDisk{BusType: "virtio", PCI: "0000:00:04.0", Dev: "/dev/vda"}
	fs := []qmp.GuestFilesystem{
		{Name: "dm-0", Mountpoint: "/srv", Type: "xfs", UsedBytes: 100, TotalBytes: 1000, Disks: []qmp.GuestDisk{vda, sda}},
		{Name: "sda1", Mountpoint: "/boot", Type: "ext2", UsedBytes: -1, TotalBytes: -1, Disks: []qmp.GuestDisk{sda}},
		{Name: "sdz", Mountpoint: "/x", UsedBytes: 1, TotalBytes: 2, Disks: []qmp.GuestDisk{{PCI: "0000:00:1f.0", Dev: "/dev/sdz"}}},
	}
	got := filesystems(fs, pci(t), "virtio-scsi-single")
	both := []string{"scsi1", "virtio1"}
	want := map[string][]Filesystem{
		"scsi1": {
			{Mountpoint: "/boot", Type: "ext2", Device: "sda1", Layout: OnPartition, Disks: []string{"scsi1"}},
			{Mountpoint: "/srv", Type: "xfs", Device: "dm-0", Layout: OnVirtual, UsedBytes: i64(100), TotalBytes: i64(1000), Disks: both},
		},
		"virtio1": {{Mountpoint: "/srv", Type: "xfs", Device: "dm-0", Layout: OnVirtual, UsedBytes: i64(100), TotalBytes: i64(1000), Disks: both}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("filesystems =\n%+v\nwant\n%+v", got, want)
	}
}
