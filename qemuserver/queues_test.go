package qemuserver

import (
	"strings"
	"testing"
)

// TestQueues: qemu-server gives a SCSI disk's controller num_queues from
// the drive's queues= only under scsihw virtio-scsi-single (QemuServer.pm:
// ",num_queues=$drive->{queues}"), never a VirtIO Block device; the command
// line's count is read from the controller (SCSI) or the device (VirtIO
// Block), and a difference is drift.
func TestQueues(t *testing.T) {
	st, _ := ParseStorages(strings.NewReader(storageCfg), "storage.cfg")
	single := VMDefaults{SCSIHW: "virtio-scsi-single", Blockdev: true}
	for _, c := range []struct {
		key, line string
		vm        VMDefaults
		want      int
	}{
		{"scsi0", "local-lvm:vm-1-disk-0,queues=4", single, 4},
		{"scsi0", "local-lvm:vm-1-disk-0,queues=4", VMDefaults{SCSIHW: "virtio-scsi-pci", Blockdev: true}, 0},
		{"scsi0", "local-lvm:vm-1-disk-0,queues=4", VMDefaults{}, 0},
		{"scsi0", "local-lvm:vm-1-disk-0", single, 0},
		{"virtio0", "local-lvm:vm-1-disk-0", single, 0},
	} {
		s, err := Predict(drive(t, c.key, c.line), st, c.vm, nil)
		if err != nil || s.Queues != c.want {
			t.Errorf("%s %s scsihw %q: queues %d, want %d (%v)", c.key, c.line, c.vm.SCSIHW, s.Queues, c.want, err)
		}
	}
	argv := []string{"kvm",
		"-device", "virtio-scsi-pci,id=virtioscsi0,bus=pci.3,addr=0x1,iothread=iothread-virtioscsi0,num_queues=4",
		"-drive", "file=/dev/pve/vm-1-disk-0,if=none,id=drive-scsi0,format=raw,cache=none,aio=io_uring,detect-zeroes=on",
		"-device", "scsi-hd,bus=virtioscsi0.0,channel=0,scsi-id=0,lun=0,drive=drive-scsi0,id=scsi0",
		"-device", "virtio-scsi-pci,id=scsihw0,bus=pci.0,addr=0x5",
		"-drive", "file=/dev/pve/vm-1-disk-1,if=none,id=drive-scsi1,format=raw,cache=none,aio=io_uring,detect-zeroes=on",
		"-device", "scsi-hd,bus=scsihw0.0,channel=0,scsi-id=0,lun=1,drive=drive-scsi1,id=scsi1",
		"-drive", "file=/dev/pve/vm-1-disk-2,if=none,id=drive-virtio0,format=raw,cache=none,aio=io_uring,detect-zeroes=on",
		"-device", "virtio-blk-pci,drive=drive-virtio0,id=virtio0,bus=pci.0,addr=0xa,num-queues=2",
		"-drive", "file=/dev/pve/vm-1-disk-3,if=none,id=drive-virtio1,format=raw,cache=none,aio=io_uring,detect-zeroes=on",
		"-device", "virtio-blk-pci,drive=drive-virtio1,id=virtio1,bus=pci.0,addr=0xb",
	}
	cl, err := ParseCmdline(argv)
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]int{"scsi0": 4, "scsi1": 0, "virtio0": 2, "virtio1": 0} {
		if got := cl.Disks[id].Queues; got != want {
			t.Errorf("%s: queues %d, want %d", id, got, want)
		}
	}
	pred, _ := Predict(drive(t, "scsi0", "local-lvm:vm-1-disk-0,queues=8"), st, single, nil)
	run := pred
	run.Queues = 4
	if d := strings.Join(Diff(pred, run), "; "); d != "queues: config 8, running 4" {
		t.Errorf("diff %q", d)
	}
	run.Queues = 0
	if d := strings.Join(Diff(pred, run), "; "); d != "queues: config 8, running default" {
		t.Errorf("diff %q", d)
	}
	if d := Diff(run, run); len(d) != 0 {
		t.Errorf("same: %v", d)
	}
}
