package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// TestAttributeTrimReal places guest-fstrim's per-filesystem figures on
// Proxmox disks with the real guest-get-fsinfo and query-pci answers of the
// end-to-end guest (testdata/discard/README.md): VirtIO SCSI single, SATA on
// AHCI and VirtIO Block.
func TestAttributeTrimReal(t *testing.T) {
	pciRaw, err := os.ReadFile("testdata/discard/real-query-pci.json")
	if err != nil {
		t.Fatal(err)
	}
	fsRaw, err := os.ReadFile("testdata/discard/real-guest-get-fsinfo.json")
	if err != nil {
		t.Fatal(err)
	}
	pci := pciDevices(gjson.ParseBytes(pciRaw))
	for _, want := range []string{"virtioscsi1", "virtioscsi2", "ahci0", "virtio1"} {
		found := false
		for _, id := range pci {
			found = found || id == want
		}
		if !found {
			t.Errorf("query-pci: no %s in %v", want, pci)
		}
	}
	// Through the real client, from an agent socket that answers with the
	// recorded reply.
	sock := fakeAgent(t, map[string]string{"guest-get-fsinfo": strings.TrimSpace(string(fsRaw))})
	fsinfo, err := qmp.Agent{Path: sock, Timeout: 2 * time.Second}.FsInfo(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	res := []qmp.FstrimResult{
		{Path: "/mnt/v1", Trimmed: 241067008}, {Path: "/mnt/a1", Trimmed: 241067008},
		{Path: "/mnt/s2", Trimmed: 0}, {Path: "/mnt/s1", Trimmed: 1 << 20},
		{Path: "/", Trimmed: 0, Error: "Operation not supported"},
	}
	g := attributeTrim(res, fsinfo, pci, "virtio-scsi-single")
	want := map[string]int64{"virtio1": 241067008, "sata1": 241067008, "scsi2": 0, "scsi1": 1 << 20}
	if len(g.PerDisk) != len(want) || !g.Mapped {
		t.Errorf("per disk %v mapped %v", g.PerDisk, g.Mapped)
	}
	for id, b := range want {
		if got, ok := g.PerDisk[id]; !ok || got != b {
			t.Errorf("%s: %d (%v), want %d", id, got, ok, b)
		}
	}
	if len(g.Paths) != 5 || g.Paths[4].Error == "" || len(g.Paths[4].Disks) != 0 {
		t.Errorf("paths %+v", g.Paths)
	}
}

func TestGuestDiskID(t *testing.T) {
	pci := map[string]string{"00:02.0": "virtioscsi3", "00:05.0": "scsihw0", "00:06.0": "scsihw1", "00:07.0": "ahci0", "00:0a.0": "virtio2", "01:01.0": "ahci1"}
	cases := []struct {
		gd     qmp.GuestDisk
		scsihw string
		want   string
	}{
		{qmp.GuestDisk{PCI: "0000:00:02.0", Unit: 3}, "virtio-scsi-single", "scsi3"},
		{qmp.GuestDisk{PCI: "0000:00:05.0", Unit: 4}, "virtio-scsi-pci", "scsi4"},
		{qmp.GuestDisk{PCI: "0000:00:06.0", Target: 2}, "lsi", "scsi9"},
		{qmp.GuestDisk{PCI: "0000:00:07.0", Unit: 5}, "", "sata5"},
		{qmp.GuestDisk{PCI: "0000:01:01.0", Unit: 0}, "", "sata6"},
		{qmp.GuestDisk{PCI: "0000:00:0a.0"}, "", "virtio2"},
		{qmp.GuestDisk{PCI: "0000:00:1f.2"}, "", ""},
	}
	for _, c := range cases {
		if got := guestDiskID(c.gd, pci, c.scsihw); got != c.want {
			t.Errorf("%+v on %s: %q, want %q", c.gd, c.scsihw, got, c.want)
		}
	}
	// A filesystem on two disks (LVM in the guest) is not split between them.
	fs := []qmp.GuestFilesystem{{Mountpoint: "/data", Disks: []qmp.GuestDisk{{PCI: "0000:00:02.0"}, {PCI: "0000:00:0a.0"}}}}
	g := attributeTrim([]qmp.FstrimResult{{Path: "/data", Trimmed: 1 << 30}}, fs, pci, "virtio-scsi-single")
	if len(g.PerDisk) != 0 || !g.Shared["scsi3"] || !g.Shared["virtio2"] || strings.Join(g.Paths[0].Disks, ",") != "scsi3,virtio2" {
		t.Errorf("shared filesystem: %+v", g)
	}
}

// fakeAgent serves a guest agent socket: it answers guest-sync-delimited as
// qemu-ga does (0xFF, then the id) and each command with replies[command]
// as its "return" value; a command without a reply gets no answer at all.
func fakeAgent(t *testing.T, replies map[string]string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "100.qga")
	l, err := net.Listen("unix", p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				rd := bufio.NewReader(c)
				for {
					line, err := rd.ReadBytes('\n')
					if err != nil {
						return
					}
					req := gjson.ParseBytes([]byte(strings.TrimLeft(string(line), "\xff")))
					cmd := req.Get("execute").String()
					if cmd == "guest-sync-delimited" {
						fmt.Fprintf(c, "\xff{\"return\": %d}\n", req.Get("arguments.id").Int())
						continue
					}
					if r, ok := replies[cmd]; ok {
						fmt.Fprintf(c, "{\"return\": %s}\n", r)
					}
				}
			}(c)
		}
	}()
	return p
}
