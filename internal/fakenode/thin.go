package fakenode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// ThinPool is what the lvs double reports for the local-lvm pool.
type ThinPool struct {
	SizeBytes       int64   // pool data size; 0 means the sum of the volumes' sizes
	ChunkSizeBytes  int64   // allocation unit; 0 means 64 KiB (lvm2's default)
	Discards        string  // ignore, nopassdown, passdown (default)
	MetadataPercent float64 // 0 means 1.56
	WhenFull        string  // lv_when_full: queue (default), error
	VGFreeBytes     int64   // vg_free: what autoextend can grow into
	Monitor         string  // seg_monitor: "" means monitored
	// PV is the block device lvs -a names under the pool's data (NewPV
	// makes a real one); "" names none.
	PV string
	// AutoextendThreshold and AutoextendPercent are what the lvmconfig
	// double prints; 0 keeps lvm2's defaults (100: off, and 20).
	AutoextendThreshold, AutoextendPercent int
}

// SetThinPool writes the pool the lvs double reports. Discards "ignore" also
// does to the volumes what dm-thin does: a pool that ignores discards makes
// its thin volumes stop accepting them (BLKDISCARD fails with EOPNOTSUPP, so
// QEMU counts discard-nb-failed and nothing is freed). The stand-in is
// discard_max_bytes 0 on the volumes' loop devices, so call it after the
// volumes exist. The kernel keeps that cap on a loop device for its whole
// life, across re-binding, so those devices are removed (LOOP_CTL_REMOVE)
// when the node closes, after they are detached, and no later test gets one.
func (n *Node) SetThinPool(p ThinPool) error {
	var b strings.Builder
	if p.SizeBytes > 0 {
		fmt.Fprintf(&b, "size %d\n", p.SizeBytes)
	}
	if p.ChunkSizeBytes > 0 {
		fmt.Fprintf(&b, "chunk_size %d\n", p.ChunkSizeBytes)
	}
	if p.Discards != "" {
		fmt.Fprintf(&b, "discards %s\n", p.Discards)
	}
	if p.MetadataPercent > 0 {
		fmt.Fprintf(&b, "metadata_percent %.2f\n", p.MetadataPercent)
	}
	for k, v := range map[string]string{"when_full": p.WhenFull, "monitor": p.Monitor, "pv": p.PV} {
		if v != "" {
			fmt.Fprintf(&b, "%s %s\n", k, v)
		}
	}
	if p.VGFreeBytes > 0 {
		fmt.Fprintf(&b, "vg_free %d\n", p.VGFreeBytes)
	}
	if err := os.WriteFile(filepath.Join(n.ThinDir(), "pool"), []byte(b.String()), 0o644); err != nil {
		return err
	}
	var conf strings.Builder
	if p.AutoextendThreshold > 0 {
		fmt.Fprintf(&conf, "thin_pool_autoextend_threshold %d\n", p.AutoextendThreshold)
	}
	if p.AutoextendPercent > 0 {
		fmt.Fprintf(&conf, "thin_pool_autoextend_percent %d\n", p.AutoextendPercent)
	}
	if err := os.WriteFile(filepath.Join(n.ThinDir(), "lvmconfig"), []byte(conf.String()), 0o644); err != nil {
		return err
	}
	if p.Discards != "ignore" {
		return nil
	}
	vols, err := n.thinVolumes()
	if err != nil {
		return err
	}
	for _, v := range vols {
		loop, err := os.Readlink(filepath.Join("/dev", v[0], v[1]))
		if err != nil {
			return fmt.Errorf("SetThinPool: %s/%s has no loop device: %w", v[0], v[1], err)
		}
		if err := n.disableDiscard(loop); err != nil {
			return fmt.Errorf("SetThinPool: %w", err)
		}
	}
	return nil
}

// disableDiscard sets a loop device's discard_max_bytes to 0 and removes
// the device when the node closes (the cap outlives re-binding).
func (n *Node) disableDiscard(loop string) error {
	name := filepath.Base(loop)
	if err := os.WriteFile("/sys/block/"+name+"/queue/discard_max_bytes", []byte("0"), 0o644); err != nil {
		return fmt.Errorf("disabling discard on %s: %w", loop, err)
	}
	idx, err := strconv.Atoi(strings.TrimPrefix(name, "loop"))
	if err != nil {
		return nil
	}
	// Runs after the detach registered when the device was made (cleanups
	// run in reverse order).
	n.cleanups = append([]func(){func() { removeLoop(idx) }}, n.cleanups...)
	return nil
}

// NewPV makes a real block device standing for the PV under the thin
// pool: a loop device over a sparse file, taking no discards when
// noDiscard (discard_max_bytes 0, as a disk behind a RAID controller
// shows). Give its path as ThinPool.PV.
func (n *Node) NewPV(noDiscard bool) (string, error) {
	f, err := os.CreateTemp(n.ThinDir(), "pv-*.img")
	if err != nil {
		return "", err
	}
	err = f.Truncate(64 << 20)
	f.Close()
	if err != nil {
		return "", err
	}
	out, err := exec.Command("losetup", "--find", "--show", f.Name()).Output()
	if err != nil {
		return "", fmt.Errorf("losetup %s: %w", f.Name(), err)
	}
	loop := strings.TrimSpace(string(out))
	n.cleanups = append(n.cleanups, func() { _ = exec.Command("losetup", "-d", loop).Run() })
	if noDiscard {
		if err := n.disableDiscard(loop); err != nil {
			return "", err
		}
	}
	return loop, nil
}

// removeLoop deletes /dev/loopN once it is unbound.
func removeLoop(idx int) {
	fd, err := unix.Open("/dev/loop-control", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), unix.LOOP_CTL_REMOVE, uintptr(idx))
		if errno == 0 || errno == unix.ENODEV || time.Now().After(deadline) {
			if errno == unix.EBUSY {
				fmt.Fprintf(os.Stderr, "fakenode: /dev/loop%d (discard disabled) is still bound and was not removed\n", idx)
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// thinVolumes lists (vg, lv, size, backing) from the lvs double's state.
func (n *Node) thinVolumes() ([][4]string, error) {
	f, err := os.Open(filepath.Join(n.ThinDir(), "volumes"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out [][4]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		w := strings.Fields(sc.Text())
		if len(w) == 4 {
			out = append(out, [4]string{w[0], w[1], w[2], w[3]})
		}
	}
	return out, sc.Err()
}

// ThinVolumeFile is the backing file of a local-lvm volume.
func (n *Node) ThinVolumeFile(volname string) string {
	return filepath.Join(n.ThinDir(), volname+".img")
}

// SnapshotVolume takes a thin snapshot of a local-lvm volume the way the lvs
// double models one: a sparse copy of the volume's file that keeps the
// chunks it shares with its origin allocated in the pool. Name it as Proxmox
// does: snap_<volume>_<snapname>.
func (n *Node) SnapshotVolume(volname, snap string) error {
	src := n.ThinVolumeFile(volname)
	dst := filepath.Join(n.ThinDir(), snap+".img")
	if out, err := exec.Command("cp", "--sparse=always", src, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("snapshot %s: %v: %s", volname, err, out)
	}
	f, err := os.OpenFile(filepath.Join(n.ThinDir(), "snapshots"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "%s %s %s %s\n", n.VG, snap, volname, dst)
	return err
}

// SetLVSFault makes the lvs double misbehave: "sleep 30" hangs it, "exit 5
// Volume group \"x\" not found" makes it fail; "" restores it.
func (n *Node) SetLVSFault(fault string) error {
	p := filepath.Join(n.ThinDir(), "lvs-fault")
	if fault == "" {
		err := os.Remove(p)
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return err
	}
	return os.WriteFile(p, []byte(fault+"\n"), 0o644)
}

// AllocatedBytes is a file's allocation (st_blocks x 512).
func AllocatedBytes(path string) (int64, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return 0, err
	}
	return st.Blocks * 512, nil
}

// MustAllocated is AllocatedBytes that fails the test on error.
func MustAllocated(t testing.TB, path string) int64 {
	t.Helper()
	b, err := AllocatedBytes(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// HMP runs one human-monitor-command in its own QMP exchange and returns
// the monitor's text reply.
func (vm *VM) HMP(line string) (string, error) {
	var out string
	err := qmp.DoRetry(context.Background(), vm.node.Paths.QMPSocket(vm.VMID), 5*time.Second, 10*time.Second, func(s qmp.Session) error {
		r, err := s.Exec("human-monitor-command", map[string]any{"command-line": line})
		out = r.String()
		return err
	})
	return out, err
}

// QemuIO runs a synchronous qemu-io command on a disk's own BlockBackend
// (`qemu-io -d <qdev> "<cmd>"`), e.g. "write -P 0x5a 0 1M" or
// "discard 0 1M". Write non-zero patterns: zeroes become write-zeroes under
// detect-zeroes and allocate nothing. qemu-io prints its own errors on
// QEMU's stdout, not in the reply, so a bad command fails silently: check
// the effect (counters, allocation).
func (vm *VM) QemuIO(disk, cmd string) error {
	qdev := disk
	if strings.HasPrefix(disk, "virtio") {
		// The BlockBackend is on virtio-blk-pci's child device.
		qdev = "/machine/peripheral/" + disk + "/virtio-backend"
	}
	out, err := vm.HMP(fmt.Sprintf("qemu-io -d %s %q", qdev, cmd))
	if err != nil {
		return err
	}
	if out != "" {
		return fmt.Errorf("qemu-io -d %s %q: %s", disk, cmd, strings.TrimSpace(out))
	}
	return nil
}

// MustQemuIO is QemuIO that fails the test on error.
func (vm *VM) MustQemuIO(t testing.TB, disk, cmd string) {
	t.Helper()
	if err := vm.QemuIO(disk, cmd); err != nil {
		t.Fatal(err)
	}
}
