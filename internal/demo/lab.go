package main

import (
	"fmt"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
)

// lab370Config is Lab 37's VM 370 as Proxmox stores it: a system disk plus
// one test disk per controller, scsi1 (VirtIO SCSI single, iothread), virtio1
// (VirtIO Block, iothread) and sata1 (SATA), all on local-lvm with the
// default options (cache=none, aio=io_uring, discard=ignore). The disks are
// 256 MiB here (4 GiB in the lab): sparse, so only what is written is used.
// The same VM as cmd/pvediskcheck's tests (helpers_test.go lab370).
const lab370Config = `boot: order=scsi0
cores: 2
memory: 2048
name: lab37
ostype: l26
scsihw: virtio-scsi-single
scsi0: local-lvm:vm-370-disk-0,iothread=1,size=256M
scsi1: local-lvm:vm-370-disk-1,iothread=1,size=256M
virtio1: local-lvm:vm-370-disk-2,iothread=1,size=256M
sata1: local-lvm:vm-370-disk-3,size=256M
`

const (
	labVMID     = 370
	labDiskSize = 256 << 20
)

// lab is a fake Proxmox VE node running Lab 37's VM 370.
type lab struct {
	node    *fakenode.Node
	vm      *fakenode.VM
	startup time.Duration // from an empty directory to QMP answering
}

// start lays out a fake Proxmox VE node under dir (storage.cfg with local
// and local-lvm, the VM's config, its four volumes on loop devices) and
// starts QEMU for VM 370 with the disk layout qemu-server generates, its pid
// file and QMP socket where Proxmox keeps them. Call close even on error.
func (l *lab) start(dir string) error {
	t0 := time.Now()
	defer func() { l.startup = time.Since(t0) }()
	n, err := fakenode.New(dir)
	if err != nil {
		return err
	}
	l.node = n
	for i := 0; i < 4; i++ {
		if _, err := n.CreateVolume("local-lvm", fmt.Sprintf("vm-%d-disk-%d", labVMID, i), labDiskSize); err != nil {
			return err
		}
	}
	if err := n.WriteConfig(labVMID, lab370Config); err != nil {
		return err
	}
	vm, err := n.Start(labVMID, fakenode.ArgvOptions{})
	if err != nil {
		return err
	}
	l.vm = vm
	return nil
}

// close stops QEMU, detaches the loop devices and removes /dev/<vg>.
func (l *lab) close() {
	if l.node != nil {
		l.node.Close()
	}
}
