package fakenode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// ChainVG is the volume group of the volume-chain storage ChainStorageCfg
// adds (thick LVs stood in for by loop devices at /dev/<vg>/<lv>).
func (n *Node) ChainVG() string { return n.VG + "t" }

// ChainStorageCfg is storage.cfg's entry for Proxmox 9's qcow2 volume
// chains on thick LVM, storage "chain" (pass it to WriteStorageCfg).
func (n *Node) ChainStorageCfg() string {
	return fmt.Sprintf("lvm: chain\n\tvgname %s\n\tcontent images\n\tsaferemove 0\n\tshared 0\n\tsnapshot-as-volume-chain 1\n", n.ChainVG())
}

// ChainLayer is one layer CreateChain makes: its LV name, and the LV size
// when it should differ from Proxmox's (0: qemu-img measure's
// fully-allocated figure rounded up to 4 MiB extents, as LVMPlugin sizes
// it).
type ChainLayer struct {
	LV     string
	LVSize int64
}

// CreateChain makes a disk of the chain storage the way pve-storage's
// LVMPlugin does after `qm snapshot` per layer: layers[0] is the oldest
// (the base image, qcow2 of size bytes), each further one a qcow2 overlay
// backed by the one before by its LV name (qemu-img create -F qcow2 -b NAME
// -o extended_l2=on,cluster_size=128k), the last the current volume. Every
// qcow2 gets preallocation prealloc ("metadata" is Proxmox's default). Each
// LV is a loop device over a sparse file of the LV's size, linked at
// /dev/<vg>/<lv>. It returns the current layer's path.
func (n *Node) CreateChain(size int64, prealloc string, layers ...ChainLayer) (string, error) {
	dir := filepath.Join("/dev", n.ChainVG())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	n.cleanups = append(n.cleanups, func() { _ = os.RemoveAll(dir) })
	var path string
	for i, l := range layers {
		opts := []string{"preallocation=" + prealloc}
		if i > 0 {
			opts = append(opts, "extended_l2=on", "cluster_size=128k")
		}
		lvSize := l.LVSize
		if lvSize == 0 {
			argv := []string{"measure", "--output=json", "-O", "qcow2", "--size", strconv.FormatInt(size, 10)}
			if i > 0 {
				argv = append(argv, "-o", strings.Join(opts[1:], ","))
			}
			out, err := exec.Command("qemu-img", argv...).Output()
			if err != nil {
				return "", fmt.Errorf("qemu-img measure: %w", err)
			}
			lvSize = (gjson.GetBytes(out, "fully-allocated").Int() + 4<<20 - 1) / (4 << 20) * (4 << 20)
		}
		backing := filepath.Join(n.ThinDir(), "chain-"+l.LV+".img")
		if err := truncate(backing, lvSize); err != nil {
			return "", err
		}
		out, err := exec.Command("losetup", "--find", "--show", backing).Output()
		if err != nil {
			return "", fmt.Errorf("losetup %s: %w", backing, err)
		}
		loop := strings.TrimSpace(string(out))
		n.cleanups = append(n.cleanups, func() { _ = exec.Command("losetup", "-d", loop).Run() })
		path = filepath.Join(dir, l.LV)
		if err := os.Symlink(loop, path); err != nil {
			return "", err
		}
		argv := []string{"create", "-q", "-f", "qcow2", "-o", strings.Join(opts, ",")}
		if i > 0 {
			argv = append(argv, "-F", "qcow2", "-b", layers[i-1].LV)
		}
		argv = append(argv, path)
		if i == 0 {
			argv = append(argv, strconv.FormatInt(size, 10))
		}
		if out, err := exec.Command("qemu-img", argv...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("qemu-img %s: %v: %s", strings.Join(argv, " "), err, out)
		}
	}
	return path, nil
}
