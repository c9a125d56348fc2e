package fakenode

import "fmt"

// Lab370Config is Lab 37's VM 370 as Proxmox stores it: a system disk plus
// one test disk per controller, scsi1 (VirtIO SCSI single, iothread), virtio1
// (VirtIO Block, iothread) and sata1 (SATA), all on local-lvm with the
// default options (cache=none, aio=io_uring, discard=ignore). The disks are
// Lab370DiskSize here (4 GiB in the lab): sparse, so only what is written is
// used. Tests and the demo share it.
const Lab370Config = `boot: order=scsi0
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

// Lab370DiskSize is the size of each of VM 370's volumes.
const Lab370DiskSize = 256 << 20

// CreateLab370 creates VM 370's four local-lvm volumes and writes its config,
// with extra config lines appended.
func (n *Node) CreateLab370(extra string) error {
	for i := 0; i < 4; i++ {
		if _, err := n.CreateVolume("local-lvm", fmt.Sprintf("vm-370-disk-%d", i), Lab370DiskSize); err != nil {
			return err
		}
	}
	return n.WriteConfig(370, Lab370Config+extra)
}
