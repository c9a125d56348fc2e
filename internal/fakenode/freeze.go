package fakenode

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// Frozen is a dir storage on its own ext4 filesystem (a loop-mounted
// image) that a test can freeze (fsfreeze -f) to make every write to its
// volumes block in the kernel, as a storage that stops answering does.
type Frozen struct {
	Storage string // the storage id in storage.cfg
	Mount   string // the mount point (the storage's path)
	frozen  bool
}

// FreezableStorage adds dir storage id on a fresh 64 MiB ext4 mount. The
// filesystem is thawed and unmounted at cleanup whatever the test did.
func (n *Node) FreezableStorage(t testing.TB, id string) *Frozen {
	t.Helper()
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	if err := truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v: %s", err, out)
	}
	f := &Frozen{Storage: id, Mount: mnt}
	// Registered after TempDir's removal, so it runs first: thaw (always,
	// a frozen mount left behind hangs every writer on the host), stop the
	// VMs that hold files on it, unmount.
	t.Cleanup(func() {
		_ = exec.Command("fsfreeze", "-u", mnt).Run()
		for _, vm := range n.vms {
			vm.Stop()
		}
		_ = exec.Command("umount", "-l", mnt).Run()
	})
	if err := n.WriteStorageCfg("dir: " + id + "\n\tpath " + mnt + "\n\tcontent images\n"); err != nil {
		t.Fatal(err)
	}
	return f
}

// Freeze blocks every write to the filesystem (fsfreeze -f).
func (f *Frozen) Freeze(t testing.TB) {
	t.Helper()
	if out, err := exec.Command("fsfreeze", "-f", f.Mount).CombinedOutput(); err != nil {
		t.Fatalf("fsfreeze -f: %v: %s", err, out)
	}
	f.frozen = true
}

// Thaw lets the blocked writes complete (fsfreeze -u).
func (f *Frozen) Thaw(t testing.TB) {
	t.Helper()
	if !f.frozen {
		return
	}
	if out, err := exec.Command("fsfreeze", "-u", f.Mount).CombinedOutput(); err != nil {
		t.Fatalf("fsfreeze -u: %v: %s", err, out)
	}
	f.frozen = false
}

// StallConfig is VM 100 of StalledVM on QEMU 7.2 (and of the recordings
// in stall/testdata): scsi0 on "local" (written once, then idle), scsi1 on
// the freezable storage "frozen", each on its own iothread with io_uring
// and O_DIRECT (qemu-server's defaults for a dir storage with cache=none).
const StallConfig = `name: stall
scsihw: virtio-scsi-single
scsi0: local:100/vm-100-disk-0.raw,iothread=1,size=16M
scsi1: frozen:100/vm-100-disk-1.raw,iothread=1,aio=io_uring,size=16M
`

// StallMainLoopConfig is VM 100 of StalledVM from QEMU 8.2 on: StallConfig
// with scsi1 served by the main loop (no iothread). From 8.2 (the
// multiqueue block layer) a request runs in the AioContext of the thread
// that issues it, so qemu-io's writes, issued from the monitor, are the
// main loop's whatever the disk's iothread (measured with QEMU 11.1.3:
// their io_uring workers are iou-wrk-<main loop TID>); with scsi1 on the
// main loop they are the disk's own requests, as a guest's are on its
// iothread. On 7.2 they are submitted in the disk's AioContext, so
// StallConfig's iothread serves them.
const StallMainLoopConfig = `name: stall
scsihw: virtio-scsi-single
scsi0: local:100/vm-100-disk-0.raw,iothread=1,size=16M
scsi1: frozen:100/vm-100-disk-1.raw,aio=io_uring,size=16M
`

// stallConfigFor is StalledVM's layout for a QEMU version ("7.2.22").
func stallConfigFor(version string) string {
	if strings.HasPrefix(version, "7.") || strings.HasPrefix(version, "8.0") || strings.HasPrefix(version, "8.1") {
		return StallConfig
	}
	return StallMainLoopConfig
}

// StalledVM starts VM 100 (StallConfig) on a new node: one 64 KiB write
// completes on each disk, then scsi1's filesystem is frozen and 8 x 1 MiB
// writes are sent to it, which block (FreezeWithWrites). It returns the
// node, the VM and the storage to thaw (thawed at cleanup in any case).
func StalledVM(t testing.TB) (*Node, *VM, *Frozen) {
	t.Helper()
	n, v, fz := StallVM(t)
	v.FreezeWithWrites(t, fz)
	return n, v, fz
}

// FreezeWithWrites completes one write on scsi1, freezes its filesystem
// and sends it 8 x 1 MiB writes, which block in io_uring's workers
// (iou-wrk-<TID of scsi1's serving thread>, state D), and returns the time
// of the freeze (the stall counts from that last completion).
func (vm *VM) FreezeWithWrites(t testing.TB, fz *Frozen) time.Time {
	t.Helper()
	done := vm.WriteOps(t, "scsi1") + 1
	vm.MustQemuIO(t, "scsi1", "aio_write -P 0x5a 0 64k")
	for i := 0; i < 100 && vm.WriteOps(t, "scsi1") < done; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	fz.Freeze(t)
	at := time.Now()
	for i := 0; i < 8; i++ {
		if err := vm.QemuIO("scsi1", "aio_write -P 0x5b "+strconv.Itoa(i)+"M 1M"); err != nil {
			t.Fatalf("write %d to the frozen scsi1: %v", i, err)
		}
	}
	return at
}

// StallVM is StalledVM before the freeze: VM 100 running (the layout
// stallConfigFor the QEMU under test), its firmware done with the disks,
// one write completed on each disk, nothing frozen.
func StallVM(t testing.TB) (*Node, *VM, *Frozen) {
	t.Helper()
	n := NewT(t)
	fz := n.FreezableStorage(t, "frozen")
	n.MustVolume(t, "local", "100/vm-100-disk-0.raw", 16<<20)
	n.MustVolume(t, "frozen", "100/vm-100-disk-1.raw", 16<<20)
	version, err := QEMUVersion(n.QEMU)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.WriteConfig(100, stallConfigFor(version)); err != nil {
		t.Fatal(err)
	}
	v := n.MustStart(t, 100, ArgvOptions{})
	v.WaitFirmware(t, "scsi0", "scsi1")
	// aio_write: qemu-io accounts its asynchronous requests in the
	// device's counters (block_acct_start/done), not its synchronous ones.
	v.MustQemuIO(t, "scsi0", "aio_write -P 0x5a 0 64k")
	v.MustQemuIO(t, "scsi1", "aio_write -P 0x5a 0 64k")
	for i := 0; i < 100 && v.WriteOps(t, "scsi0")+v.WriteOps(t, "scsi1") < 2; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	return n, v, fz
}

// WaitFirmware waits until the firmware has read a boot sector from one of
// disks (rd_operations), which it does once every controller is set up.
// SeaBIOS resets each virtio-scsi controller as it sets it up, up to
// ~300 ms after start here (trace: virtio_set_status 0, then
// scsi_bus_drained_begin on its bus), and QEMU drains the disks on that
// reset in the vCPU thread, which holds the BQL: a write blocked on the
// frozen filesystem then keeps the BQL held and QMP silent until the
// thaw (the vCPU thread waits in io_uring_enter on the main loop's ring
// on 11.1.3, in ppoll on 7.2; the main loop and call_rcu wait on one
// futex). Frozen right after start that happened in 3 runs of 12 on
// 7.2 and 6 of 13 on 11.1.3; after the firmware's boot-sector read,
// which comes once every controller is set up, in none of 12 on each.
func (vm *VM) WaitFirmware(t testing.TB, disks ...string) {
	t.Helper()
	for i := 0; ; i++ {
		var reads int64
		for _, d := range disks {
			reads += vm.ReadOps(t, d)
		}
		if reads > 0 {
			return
		}
		if i == 500 {
			t.Fatalf("the firmware read no boot sector of %v within 10 s", disks)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WriteOps is a disk's wr_operations now.
func (vm *VM) WriteOps(t testing.TB, disk string) int64 {
	t.Helper()
	return vm.blockstats(t, disk).WrOps
}

// ReadOps is a disk's rd_operations now.
func (vm *VM) ReadOps(t testing.TB, disk string) int64 {
	t.Helper()
	return vm.blockstats(t, disk).RdOps
}

// blockstats is a disk's query-blockstats entry now.
func (vm *VM) blockstats(t testing.TB, disk string) qmp.BlockStats {
	t.Helper()
	var out qmp.BlockStats
	err := qmp.Do(context.Background(), vm.node.Paths.QMPSocket(vm.VMID), 5*time.Second, func(s qmp.Session) error {
		ret, err := s.Exec("query-blockstats", nil)
		for _, b := range qmp.ParseBlockstats(ret) {
			if b.ID == disk {
				out = b
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
