package fakenode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// ZFSDir holds the zvols' backing files and the state the zfs double
// reads (doubles/zfs).
func (n *Node) ZFSDir() string { return filepath.Join(n.Root, "var/lib/zfs") }

// ZPool is the pool dataset of the node's zfspool stand-in, unique per
// node like VG: its zvols are linked at /dev/zvol/<ZPool>/<name>.
func (n *Node) ZPool() string { return n.VG + "/data" }

// ZFSStorage is a storage.cfg section for a zfspool storage id on ZPool
// (sparse 1 makes zvols without refreservation), for WriteStorageCfg.
func (n *Node) ZFSStorage(id string, sparse bool) string {
	s := "zfspool: " + id + "\n\tpool " + n.ZPool() + "\n\tcontent images,rootdir\n"
	if sparse {
		s += "\tsparse 1\n"
	}
	return s
}

// zvolDefaults are the properties a new zvol gets: OpenZFS 2.2's
// defaults (volblocksize 16K since 2.2, sync standard, primarycache all,
// logbias latency) and compression on, as Proxmox's installer sets it on
// rpool (inherited).
var zvolDefaults = [][2]string{{"volblocksize", "16384"}, {"sync", "standard"}, {"compression", "on"}, {"primarycache", "all"}, {"logbias", "latency"}}

// createZvol makes a zvol stand-in: a sparse file behind a loop device,
// linked where ZFS puts a zvol's device (/dev/zvol/<pool>/<name>), and its
// properties in the zfs double's state.
func (n *Node) createZvol(dataset, devPath string, size int64, sparse bool) error {
	if err := os.MkdirAll(n.ZFSDir(), 0o755); err != nil {
		return err
	}
	backing := filepath.Join(n.ZFSDir(), strings.ReplaceAll(dataset, "/", "_")+".img")
	if err := truncate(backing, size); err != nil {
		return err
	}
	out, err := exec.Command("losetup", "--find", "--show", backing).Output()
	if err != nil {
		return fmt.Errorf("losetup %s: %w (loop devices needed for the zfspool stand-in)", backing, err)
	}
	loop := strings.TrimSpace(string(out))
	n.cleanups = append(n.cleanups, func() { _ = exec.Command("losetup", "-d", loop).Run() })
	if err := os.MkdirAll(filepath.Dir(devPath), 0o755); err != nil {
		return err
	}
	top := filepath.Join("/dev/zvol", strings.SplitN(n.ZPool(), "/", 2)[0])
	n.cleanups = append(n.cleanups, func() { _ = os.RemoveAll(top) })
	if err := os.Symlink(loop, devPath); err != nil {
		return err
	}
	if err := appendLine(filepath.Join(n.ZFSDir(), "zvols"), dataset+" "+backing); err != nil {
		return err
	}
	refres := "none"
	if !sparse {
		// zfs create -V without -s reserves the whole size (and a little
		// metadata, left out here).
		refres = strconv.FormatInt(size, 10)
	}
	for _, p := range append(zvolDefaults, [2]string{"refreservation", refres}) {
		if err := n.SetZvolProperty(dataset, p[0], p[1]); err != nil {
			return err
		}
	}
	return nil
}

// SetZvolProperty sets a zvol property the zfs double reports (as `zfs
// set` does).
func (n *Node) SetZvolProperty(dataset, prop, value string) error {
	return appendLine(filepath.Join(n.ZFSDir(), "props"), dataset+" "+prop+" "+value)
}

// SetZFSFault makes the zfs double misbehave: "sleep 30" hangs it, "exit
// 1 MESSAGE" makes it fail; "" restores it.
func (n *Node) SetZFSFault(fault string) error {
	p := filepath.Join(n.ZFSDir(), "zfs-fault")
	if fault == "" {
		if err := os.Remove(p); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(n.ZFSDir(), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(fault+"\n"), 0o644)
}

func appendLine(p, line string) error {
	f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintln(f, line)
	return err
}
