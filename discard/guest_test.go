package discard

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

func readFixture(t testing.TB, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", p))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestAttributeRealGuest places guest-fstrim's per-filesystem figures on
// Proxmox disks with the real guest-get-fsinfo and query-pci answers of the
// end-to-end guest (testdata/guest): VirtIO SCSI single, SATA on AHCI and
// VirtIO Block.
func TestAttributeRealGuest(t *testing.T) {
	pci := guestdisk.PCIDevices(gjson.ParseBytes(readFixture(t, "guest/real-query-pci.json")))
	want := map[string]string{"00:01.0": "ahci0", "00:02.0": "virtioscsi1", "00:03.0": "virtioscsi2", "00:04.0": "virtio1"}
	for addr, id := range want {
		if pci[addr] != id {
			t.Errorf("query-pci: %s is %q, want %s (all: %v)", addr, pci[addr], id, pci)
		}
	}
	// Through the real client, from the one fake agent, answering the
	// recorded reply.
	a := qmptest.NewAgent(t)
	a.Handle = qmptest.AgentReplies(map[string]string{"guest-get-fsinfo": strings.TrimSpace(string(readFixture(t, "guest/real-guest-get-fsinfo.json")))})
	fsinfo, err := qmp.Agent{Path: a.Sock(), Timeout: 2 * time.Second}.FsInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res := []qmp.FstrimResult{
		{Path: "/mnt/v1", Trimmed: 241067008}, {Path: "/mnt/a1", Trimmed: 241067008},
		{Path: "/mnt/s2", Trimmed: 0}, {Path: "/mnt/s1", Trimmed: 1 << 20},
		{Path: "/", Trimmed: 0, Error: "Operation not supported"},
	}
	g := Attribute(res, fsinfo, pci, "virtio-scsi-single")
	wantPer := map[string]int64{"virtio1": 241067008, "sata1": 241067008, "scsi2": 0, "scsi1": 1 << 20}
	if !maps.Equal(g.PerDisk, wantPer) || !g.Mapped || len(g.Shared) != 0 {
		t.Errorf("per disk %v mapped %v shared %v, want %v", g.PerDisk, g.Mapped, g.Shared, wantPer)
	}
	if len(g.Paths) != 5 || g.Paths[4].Error == "" || len(g.Paths[4].Disks) != 0 || !slices.Equal(g.Paths[0].Disks, []string{"virtio1"}) {
		t.Errorf("paths %+v", g.Paths)
	}
	// A filesystem the guest failed to trim gives its disk nothing.
	g = Attribute([]qmp.FstrimResult{{Path: "/mnt/s1", Trimmed: 5, Error: "Input/output error"}}, fsinfo, pci, "virtio-scsi-single")
	if g.PerDisk["scsi1"] != 0 {
		t.Errorf("failed trim counted: %v", g.PerDisk)
	}
	// Without fsinfo nothing is placed, and the report says so.
	g = Attribute(res, nil, pci, "virtio-scsi-single")
	if g.Mapped || len(g.PerDisk) != 0 || len(g.Paths) != 5 {
		t.Errorf("unmapped: %+v", g)
	}
	if g = Attribute(res, fsinfo, map[string]string{}, "virtio-scsi-single"); g.Mapped {
		t.Errorf("no query-pci, yet mapped: %+v", g)
	}
}

// TestGuestDiskIDLayouts: every controller layout Proxmox offers, from the
// recorded query-pci and command line of each (testdata/pci). What the
// guest agent reports for a disk is built from the disk's device line:
// the controller's PCI address, and for SCSI the scsi-id and lun as
// target and unit (qemu-ga reads them from the guest's host:channel:
// target:lun), for SATA the AHCI port as unit.
func TestGuestDiskIDLayouts(t *testing.T) {
	for _, hw := range []string{"virtio-scsi-single", "virtio-scsi-pci", "lsi", "lsi53c810", "megasas", "pvscsi"} {
		t.Run(hw, func(t *testing.T) {
			pci := guestdisk.PCIDevices(gjson.ParseBytes(readFixture(t, "pci/"+hw+".json")))
			addr := map[string]string{}
			for a, id := range pci {
				addr[id] = "0000:" + a
			}
			cl, err := qemuserver.ParseCmdline(qemuserver.SplitNUL(readFixture(t, "pci/"+hw+".cmdline")))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, id := range []string{"scsi0", "scsi1", "scsi2", "scsi7", "scsi8", "sata0", "sata5", "virtio0", "virtio3"} {
				dev, ok := cl.Devices[id]
				if !ok {
					t.Fatalf("%s: no -device for %s", hw, id)
				}
				var gd qmp.GuestDisk
				ctrl, port, _ := strings.Cut(dev["bus"], ".")
				switch {
				case strings.HasPrefix(id, "scsi"):
					gd.Target, _ = strconv.Atoi(dev["scsi-id"])
					gd.Unit, _ = strconv.Atoi(dev["lun"])
				case strings.HasPrefix(id, "sata"):
					gd.Unit, _ = strconv.Atoi(port)
				default:
					ctrl = id
				}
				gd.PCI = addr[ctrl]
				if gd.PCI == "" {
					t.Fatalf("%s: controller %s of %s not in query-pci %v", hw, ctrl, id, pci)
				}
				if got := guestdisk.DiskID(gd, pci, hw); got != id {
					t.Errorf("%s %+v (device %v): %q, want %s", hw, gd, dev, got, id)
				}
				n++
			}
			if n != 9 {
				t.Errorf("%d disks checked", n)
			}
		})
	}
}

func TestGuestDiskIDUnknown(t *testing.T) {
	pci := map[string]string{"00:05.0": "scsihw0", "00:1f.2": "", "00:06.0": "virtio-net0", "00:07.0": "ahci0"}
	for _, gd := range []qmp.GuestDisk{
		{PCI: "0000:00:1f.2"},            // no qdev id: not a Proxmox controller
		{PCI: "0000:00:09.0"},            // nothing there
		{PCI: "0000:00:06.0", Unit: 1},   // not a disk controller
		{PCI: ""},                        // the agent did not say
		{PCI: "0000:00:0x.0", Target: 1}, // malformed
	} {
		if got := guestdisk.DiskID(gd, pci, "lsi"); got != "" {
			t.Errorf("%+v: %q, want none", gd, got)
		}
	}
	// Without the domain prefix the address is used as it is.
	if got := guestdisk.DiskID(qmp.GuestDisk{PCI: "00:07.0", Unit: 3}, pci, ""); got != "sata3" {
		t.Errorf("no domain: %q", got)
	}
	// The second lsi controller holds scsi7..13.
	if got := guestdisk.DiskID(qmp.GuestDisk{PCI: "0000:00:05.0", Target: 2}, map[string]string{"00:05.0": "scsihw1"}, "lsi"); got != "scsi9" {
		t.Errorf("lsi second controller: %q", got)
	}
}

// TestAttributeShared: a filesystem on two disks (LVM or RAID in the guest)
// is listed with both, attributed to neither, and both are marked shared.
func TestAttributeShared(t *testing.T) {
	pci := map[string]string{"00:02.0": "virtioscsi3", "00:0a.0": "virtio2"}
	fs := []qmp.GuestFilesystem{
		{Mountpoint: "/data", Disks: []qmp.GuestDisk{{PCI: "0000:00:02.0", Unit: 3}, {PCI: "0000:00:0a.0"}, {PCI: "0000:00:02.0", Unit: 3}}},
		{Mountpoint: "/x", Disks: []qmp.GuestDisk{{PCI: "0000:00:09.0", Dev: "/dev/sdz"}}},
	}
	g := Attribute([]qmp.FstrimResult{{Path: "/data", Trimmed: 1 << 30}, {Path: "/x", Trimmed: 7}}, fs, pci, "virtio-scsi-single")
	if len(g.PerDisk) != 0 || !slices.Equal(g.Shared["scsi3"], []string{"/data"}) || !slices.Equal(g.Shared["virtio2"], []string{"/data"}) ||
		!slices.Equal(g.Paths[0].Disks, []string{"scsi3", "virtio2"}) || !slices.Equal(g.Paths[1].Disks, []string{"?/dev/sdz"}) {
		t.Errorf("shared filesystem: %+v", g)
	}
	// Its verdict says so, not "no filesystem".
	in := labBase()
	in.GuestShared = g.Shared["scsi3"]
	in.Before, in.After = i64(1<<30), i64(1<<30)
	v, rs := Judge(in)
	if v != NotTrimmed || len(rs) != 1 || !strings.Contains(rs[0].Text, "under the guest's /data") {
		t.Errorf("%s %+v", v, rs)
	}
}

func TestPCIDevicesBridges(t *testing.T) {
	ret := gjson.Parse(`[{"bus":0,"devices":[{"bus":0,"slot":30,"function":0,"qdev_id":"pci.1","pci_bridge":{"devices":[{"bus":1,"slot":2,"function":0,"qdev_id":"virtioscsi5"}]}},{"bus":0,"slot":31,"function":2,"qdev_id":""}]}]`)
	got := guestdisk.PCIDevices(ret)
	want := map[string]string{"00:1e.0": "pci.1", "01:02.0": "virtioscsi5"}
	if !maps.Equal(got, want) {
		t.Errorf("%v, want %v", got, want)
	}
	if fmt.Sprint(guestdisk.PCIDevices(gjson.Parse(`[]`))) != "map[]" {
		t.Error("empty query-pci")
	}
}
