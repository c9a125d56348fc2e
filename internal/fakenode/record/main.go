// Command record starts Lab 37's VM 370 on a scratch node (real QEMU, both
// command-line generations, Proxmox's exact disk layout), sends it the QMP
// commands pvediskcheck uses and writes each reply, as QEMU sent it, to
// OUT/<generation>/<command>.json. The replies are the fixtures of the
// parser and table tests (qmp/testdata); README.md there says how they were
// made. Needs root (loop devices) and QEMU ($PVEDISKCHECK_QEMU or the host's).
//
//	go run ./internal/fakenode/record -out qmp/testdata/qemu-7.2.22
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// extra makes the fixtures cover more than the lab's four disks: an ISO
// CD-ROM, an empty CD-ROM, an EFI vars disk and a writeback disk with
// discard; scsi1 also gets limits (with a burst).
const extra = `bios: ovmf
ide2: none,media=cdrom
sata2: local:iso/boot.iso,media=cdrom
scsi2: local-lvm:vm-370-disk-4,cache=writeback,discard=on,size=64M
efidisk0: local-lvm:vm-370-disk-5,efitype=4m,size=4M
`

type query struct {
	file string
	cmd  string
	args any
}

func queries() []query {
	q := []query{
		{"query-version", "query-version", nil},
		{"query-status", "query-status", nil},
		{"query-block", "query-block", nil},
		{"query-named-block-nodes", "query-named-block-nodes", map[string]any{"flat": true}},
		{"x-debug-query-block-graph", "x-debug-query-block-graph", nil},
		{"query-blockstats", "query-blockstats", nil},
		{"query-blockstats-nodes", "query-blockstats", map[string]any{"query-nodes": true}},
		{"query-iothreads", "query-iothreads", nil},
		{"query-cpus-fast", "query-cpus-fast", nil},
		{"query-pci", "query-pci", nil},
		{"query-block-jobs", "query-block-jobs", nil},
		{"qom-get-machine-type", "qom-get", map[string]any{"path": "/machine", "property": "type"}},
	}
	for _, id := range []string{"scsi0", "scsi1", "scsi2", "virtio1", "sata1", "sata2"} {
		q = append(q, query{"qom-get-write-cache-" + id, "qom-get", map[string]any{"path": "/machine/peripheral/" + id, "property": "write-cache"}})
	}
	q = append(q, query{"qom-get-limits-scsi1", "qom-get", map[string]any{"path": "throttle-drive-scsi1", "property": "limits"}})
	// QEMU >= 10.1: every device's and throttle group's properties in one
	// command (an error on older QEMU, recorded as such).
	q = append(q, query{"qom-list-get", "qom-list-get", map[string]any{"paths": []string{
		"/machine/peripheral/scsi0", "/machine/peripheral/scsi1", "/machine/peripheral/virtio1", "/machine/peripheral/sata1",
		"throttle-drive-scsi0", "throttle-drive-scsi1"}}})
	return q
}

func main() {
	out := flag.String("out", "", "directory to write OUT/<generation>/*.json to")
	flag.Parse()
	if *out == "" {
		fmt.Fprintln(os.Stderr, "record: -out DIR is required")
		os.Exit(2)
	}
	if err := record(*out); err != nil {
		fmt.Fprintln(os.Stderr, "record:", err)
		os.Exit(1)
	}
}

func record(out string) error {
	tmp, err := os.MkdirTemp("", "record")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	n, err := fakenode.New(tmp)
	if err != nil {
		return err
	}
	defer n.Close()
	for i := 0; i < 6; i++ {
		if _, err := n.CreateVolume("local-lvm", fmt.Sprintf("vm-370-disk-%d", i), 64<<20); err != nil {
			return err
		}
	}
	limited := "scsi1: local-lvm:vm-370-disk-1,iothread=1,size=256M,mbps_wr=20,mbps_wr_max=40,iops_rd=500\n"
	cfg := strings.Replace(fakenode.Lab370Config, "scsi1: local-lvm:vm-370-disk-1,iothread=1,size=256M\n", limited, 1)
	if err := n.WriteConfig(370, cfg+extra); err != nil {
		return err
	}
	iso := filepath.Join(n.Root, "var/lib/vz/template/iso/boot.iso")
	if err := os.MkdirAll(filepath.Dir(iso), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(iso, make([]byte, 1<<20), 0o644); err != nil {
		return err
	}
	version, err := fakenode.QEMUVersion(n.QEMU)
	if err != nil {
		return err
	}
	for _, gen := range []string{"blockdev", "drive"} {
		vm, err := n.Start(370, fakenode.ArgvOptions{Legacy: gen == "drive", Blockdev: gen == "blockdev"})
		if err != nil {
			return err
		}
		dir := filepath.Join(out, gen)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		argv, _ := json.MarshalIndent(vm.Argv, "", "  ")
		if err := os.WriteFile(filepath.Join(dir, "argv.json"), append(argv, '\n'), 0o644); err != nil {
			return err
		}
		err = qmp.Do(context.Background(), n.Paths.QMPSocket(370), 10*time.Second, func(s qmp.Session) error {
			for _, q := range queries() {
				req := map[string]any{"execute": q.cmd}
				if q.args != nil {
					req["arguments"] = q.args
				}
				b, _ := json.Marshal(req)
				reply, err := s.M.Run(b)
				if err != nil {
					reply = []byte(fmt.Sprintf(`{"error": %q}`, err.Error()))
				}
				if err := os.WriteFile(filepath.Join(dir, q.file+".json"), reply, 0o644); err != nil {
					return err
				}
			}
			return nil
		})
		vm.Stop()
		if err != nil {
			return err
		}
		fmt.Printf("recorded %d replies of QEMU %s (-%s) in %s\n", len(queries()), version, gen, dir)
	}
	return nil
}
