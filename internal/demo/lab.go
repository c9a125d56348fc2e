package main

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/e2e"
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
	// guest boots the end-to-end tier's Linux guest (fio, qemu-ga;
	// internal/e2e) with agent: 1, and start waits for its agent.
	guest bool
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
	extra := ""
	var o fakenode.ArgvOptions
	if l.guest {
		kernel, initrd, err := e2e.Image()
		if err != nil {
			return err
		}
		extra = "agent: 1\n"
		o.Extra = e2e.GuestArgs(kernel, initrd, n.Paths.QGASocket(labVMID), filepath.Join(dir, "serial.log"))
	}
	if err := n.CreateLab370(extra); err != nil {
		return err
	}
	vm, err := n.Start(labVMID, o)
	if err != nil {
		return err
	}
	l.vm = vm
	if l.guest {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		if err := e2e.WaitAgent(ctx, n.Paths.QGASocket(labVMID)); err != nil {
			return fmt.Errorf("%w\nserial:\n%s", err, e2e.SerialTail(filepath.Join(dir, "serial.log")))
		}
	}
	return nil
}

// close stops QEMU, detaches the loop devices and removes /dev/<vg>.
func (l *lab) close() {
	if l.node != nil {
		l.node.Close()
	}
}
