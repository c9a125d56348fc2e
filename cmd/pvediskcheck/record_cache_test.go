//go:build record

package main

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/tidwall/gjson"
)

// TestRecordCacheFixtures records the running VMs package cache's unit
// tests replay (cache/testdata/README.md): the config, storage.cfg, the
// QEMU command line and QEMU's replies to every QMP command FetchLive sends.
// Built only with -tags record: go test -tags record -run TestRecordCacheFixtures ./cmd/pvediskcheck/
func TestRecordCacheFixtures(t *testing.T) {
	for _, c := range []struct {
		name, conf, edit string
		o                fakenode.ArgvOptions
		settle           time.Duration
	}{
		// Every mode on VirtIO SCSI (loop devices), VirtIO Block (files)
		// and SATA, a CD-ROM with and without a medium, an EFI vars disk;
		// then, after the start, a cache change in the main section (drift)
		// and in [PENDING], and a disk only [PENDING] adds. SeaBIOS sets
		// the VirtIO Block disks up within the 3 s settle time.
		{"real-blockdev-modes", func() string {
			var b strings.Builder
			b.WriteString("scsihw: virtio-scsi-single\nbios: seabios\n")
			for i, m := range fiveModes {
				b.WriteString(sf("scsi%d: local-lvm:vm-380-disk-%d,cache=%s,size=64M\n", i+1, i+1, m))
				b.WriteString(sf("virtio%d: local:380/vm-380-disk-%d.raw,cache=%s,size=64M\n", i+1, i+11, m))
			}
			b.WriteString("sata1: local:380/vm-380-disk-21.qcow2,size=64M\nide2: local:iso/test.iso,media=cdrom\nide0: none,media=cdrom\n")
			return b.String()
		}(), "sata1: local:380/vm-380-disk-21.qcow2,cache=writeback,size=64M\nefidisk0: local-lvm:vm-380-disk-30,efitype=4m,size=4M\n\n[PENDING]\nscsi1: local-lvm:vm-380-disk-1,cache=writeback,size=64M\nscsi7: local-lvm:vm-380-disk-7,cache=unsafe,size=64M\n", fakenode.ArgvOptions{Blockdev: true}, 3 * time.Second},
		// The same disks in the legacy -drive generation.
		{"real-drive-modes", func() string {
			var b strings.Builder
			b.WriteString("scsihw: virtio-scsi-pci\n")
			for i, m := range fiveModes {
				b.WriteString(sf("scsi%d: local-lvm:vm-380-disk-%d,cache=%s,size=64M\n", i+1, i+1, m))
			}
			return b.String()
		}(), "", fakenode.ArgvOptions{Legacy: true}, 0},
		// A VirtIO Block disk no driver has touched (-S: firmware never ran).
		{"real-virtio-held", "virtio1: local-lvm:vm-380-disk-1,size=64M\n", "", fakenode.ArgvOptions{Extra: []string{"-S"}}, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := fakenode.NewT(t)
			n.MustVolume(t, "local", "iso/test.iso", 1<<20)
			for i := 1; i <= 5; i++ {
				n.MustVolume(t, "local-lvm", sf("vm-380-disk-%d", i), 64<<20)
				n.MustVolume(t, "local", sf("380/vm-380-disk-%d.raw", i+10), 64<<20)
			}
			n.MustVolume(t, "local", "380/vm-380-disk-21.qcow2", 64<<20)
			n.WriteConfig(380, c.conf)
			vm := n.MustStart(t, 380, c.o)
			time.Sleep(c.settle)
			if c.edit != "" {
				conf := c.conf
				if strings.HasPrefix(c.edit, "sata1:") {
					first, _, _ := strings.Cut(c.edit, "\n")
					conf = strings.Replace(conf, "sata1: local:380/vm-380-disk-21.qcow2,size=64M\n", first+"\n", 1)
					c.edit = strings.TrimPrefix(c.edit, first+"\n")
				}
				n.WriteConfig(380, conf+c.edit)
			}
			f := recordFetchLive(t, n, vm)
			out, _ := json.MarshalIndent(f, "", " ")
			record(t, "cache", c.name+".json", string(out)+"\n")
		})
	}
}

// TestRecordCacheChainFixture records real-blockdev-chain.json: chainCacheVM
// (a volume chain of three layers, a linked clone, a raw disk).
func TestRecordCacheChainFixture(t *testing.T) {
	n, vm := chainCacheVM(t)
	f := recordFetchLive(t, n, vm)
	out, _ := json.MarshalIndent(f, "", " ")
	record(t, "cache", "real-blockdev-chain.json", string(out)+"\n")
}

// recordFetchLive is VM 380's fixture: config, storage.cfg, command line
// and QEMU's replies to every command FetchLive sends.
func recordFetchLive(t *testing.T, n *fakenode.Node, vm *fakenode.VM) vmtest.Fixture {
	t.Helper()
	f := vmtest.Fixture{VMID: 380, QEMU: qemuName(t), Argv: vm.Argv, Replies: map[string]json.RawMessage{}}
	b, _ := os.ReadFile(n.Paths.VMConfig(380))
	f.Conf = string(b)
	b, _ = os.ReadFile(n.Paths.StorageCfg())
	f.StorageCfg = string(b)
	err := qmp.Do(context.Background(), n.Paths.QMPSocket(380), 5*time.Second, func(s qmp.Session) error {
		ask := func(cmd string, args map[string]any) gjson.Result {
			var a any // a nil map would be sent as "arguments": null
			if args != nil {
				a = args
			}
			r, err := s.Exec(cmd, a)
			if err != nil {
				return gjson.Result{}
			}
			f.Replies[vmtest.Key(cmd, args)] = json.RawMessage(r.Raw)
			return r
		}
		blocks := ask("query-block", nil)
		ask("query-named-block-nodes", map[string]any{"flat": true})
		ask("x-debug-query-block-graph", nil)
		for _, b := range blocks.Array() {
			q := b.Get("qdev").String()
			id := qmp.QdevToDiskID(q)
			ask("qom-get", map[string]any{"path": "/machine/peripheral/" + id, "property": "write-cache"})
			ask("qom-get", map[string]any{"path": "throttle-drive-" + id, "property": "limits"})
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return f
}
