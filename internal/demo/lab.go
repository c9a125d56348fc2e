package main

import (
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
)

const (
	labVMID     = 370
	labDiskSize = fakenode.Lab370DiskSize
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
	if err := n.CreateLab370(""); err != nil {
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
