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

// StallConfig is VM 100 of StalledVM: scsi0 on "local" (written once,
// then idle), scsi1 on the freezable storage "frozen", each on its own
// iothread with io_uring and O_DIRECT (qemu-server's defaults for a dir
// storage with cache=none).
const StallConfig = `name: stall
scsihw: virtio-scsi-single
scsi0: local:100/vm-100-disk-0.raw,iothread=1,size=16M
scsi1: frozen:100/vm-100-disk-1.raw,iothread=1,aio=io_uring,size=16M
`

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
// and sends it 8 x 1 MiB writes, which block, and returns the time of the
// freeze (the stall counts from that last completion). The writes block in
// io_uring's workers (iou-wrk-<iothread TID>); now and then (3 runs in
// about 25 on this kernel, under load) the submission blocks inline
// instead and QEMU's main loop with it, so QMP stops answering: then it
// thaws, lets QEMU catch up and tries again, three times at most.
func (vm *VM) FreezeWithWrites(t testing.TB, fz *Frozen) time.Time {
	t.Helper()
	for attempt := 1; ; attempt++ {
		done := vm.WriteOps(t, "scsi1") + 1
		vm.MustQemuIO(t, "scsi1", "aio_write -P 0x5a 0 64k")
		for i := 0; i < 100 && vm.WriteOps(t, "scsi1") < done; i++ {
			time.Sleep(20 * time.Millisecond)
		}
		fz.Freeze(t)
		at := time.Now()
		var err error
		for i := 0; i < 8 && err == nil; i++ {
			err = vm.QemuIO("scsi1", "aio_write -P 0x5b "+strconv.Itoa(i)+"M 1M")
		}
		if err == nil {
			return at
		}
		if attempt == 3 {
			t.Fatalf("writes to the frozen scsi1, three times: %v", err)
		}
		t.Logf("writes to the frozen scsi1: %v; thawing and trying again", err)
		fz.Thaw(t)
		for ops, prev := vm.WriteOps(t, "scsi1"), int64(-1); ops != prev; ops, prev = vm.WriteOps(t, "scsi1"), ops {
			time.Sleep(500 * time.Millisecond)
		}
	}
}

// StallVM is StalledVM before the freeze: VM 100 running, one write
// completed on each disk, nothing frozen.
func StallVM(t testing.TB) (*Node, *VM, *Frozen) {
	t.Helper()
	if v := qemuVersionOnce(); !strings.HasPrefix(v, "7.") {
		// Measured with QEMU 11.1.3: after the freeze QMP answered nothing
		// within 5 s (no reply to qmp_capabilities), or answered with the
		// frozen disk's counters never idle; the stall then shows as a VM
		// whose QMP is busy or silent, not as a stalled disk.
		t.Skipf("the fsfreeze stall reproduction holds on QEMU 7.2 only: QEMU %s blocks its own threads on the frozen writes", v)
	}
	n := NewT(t)
	fz := n.FreezableStorage(t, "frozen")
	n.MustVolume(t, "local", "100/vm-100-disk-0.raw", 16<<20)
	n.MustVolume(t, "frozen", "100/vm-100-disk-1.raw", 16<<20)
	if err := n.WriteConfig(100, StallConfig); err != nil {
		t.Fatal(err)
	}
	v := n.MustStart(t, 100, ArgvOptions{})
	// aio_write: qemu-io accounts its asynchronous requests in the
	// device's counters (block_acct_start/done), not its synchronous ones.
	v.MustQemuIO(t, "scsi0", "aio_write -P 0x5a 0 64k")
	v.MustQemuIO(t, "scsi1", "aio_write -P 0x5a 0 64k")
	for i := 0; i < 100 && v.WriteOps(t, "scsi0")+v.WriteOps(t, "scsi1") < 2; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	return n, v, fz
}

// WriteOps is a disk's wr_operations now.
func (vm *VM) WriteOps(t testing.TB, disk string) int64 {
	t.Helper()
	var ops int64
	err := qmp.Do(context.Background(), vm.node.Paths.QMPSocket(vm.VMID), 5*time.Second, func(s qmp.Session) error {
		ret, err := s.Exec("query-blockstats", nil)
		for _, b := range qmp.ParseBlockstats(ret) {
			if b.ID == disk {
				ops = b.WrOps
			}
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ops
}
