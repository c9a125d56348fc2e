package fakenode

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// Node is a fake Proxmox VE node rooted at Root.
type Node struct {
	Root  string
	Paths node.Paths
	QEMU  string // qemu-system-x86_64 or a wrapper (PVEDISKCHECK_QEMU)
	VG    string // volume group name of the local-lvm stand-in (unique per node)

	cleanups []func()
	vms      map[int]*VM
	version  string // QEMU's, once known
}

// QEMUBinary is the QEMU the harness runs: $PVEDISKCHECK_QEMU or the host's.
func QEMUBinary() string {
	if q := os.Getenv("PVEDISKCHECK_QEMU"); q != "" {
		return q
	}
	return "qemu-system-x86_64"
}

// QEMUVersion runs `QEMU --version` and returns e.g. "7.2.22".
func QEMUVersion(qemu string) (string, error) {
	out, err := exec.Command(qemu, "--version").Output()
	if err != nil {
		return "", err
	}
	f := strings.Fields(string(out))
	for i, w := range f {
		if w == "version" && i+1 < len(f) {
			return f[i+1], nil
		}
	}
	return "", fmt.Errorf("cannot read version from %q", out)
}

// New lays out a node under root: /etc/pve/qemu-server, /var/run/qemu-server,
// /var/lib/vz (storage "local", type dir) and /dev/<vg>/ (storage
// "local-lvm", type lvmthin, volumes on loop devices).
func New(root string) (*Node, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	n := &Node{Root: root, Paths: node.NewPaths(root, "/proc", "/sys"), QEMU: QEMUBinary(), VG: "pdc" + hex.EncodeToString(b), vms: map[int]*VM{}}
	for _, d := range []string{"etc/pve/qemu-server", "var/run/qemu-server", "var/lib/vz/images", "var/lib/lvm-thin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return nil, err
		}
	}
	// The node's /proc and /sys are the host's: QEMU runs here for real.
	for _, l := range []string{"proc", "sys"} {
		if err := os.Symlink("/"+l, filepath.Join(root, l)); err != nil && !os.IsExist(err) {
			return nil, err
		}
	}
	// Storage paths in storage.cfg are real absolute paths (QEMU opens
	// them), yet the tool reads node files below --root. A link from
	// ROOT/ROOT to ROOT makes both views of a storage path the same file.
	self := filepath.Join(root, root)
	if err := os.MkdirAll(filepath.Dir(self), 0o755); err != nil {
		return nil, err
	}
	if err := os.Symlink(root, self); err != nil && !os.IsExist(err) {
		return nil, err
	}
	if err := n.WriteStorageCfg(""); err != nil {
		return nil, err
	}
	return n, nil
}

// WriteStorageCfg writes storage.cfg with "local" and "local-lvm", plus extra.
func (n *Node) WriteStorageCfg(extra string) error {
	cfg := fmt.Sprintf("dir: local\n\tpath %s\n\tcontent iso,vztmpl,backup,images\n\nlvmthin: local-lvm\n\tthinpool data\n\tvgname %s\n\tcontent rootdir,images\n",
		filepath.Join(n.Root, "var/lib/vz"), n.VG)
	if extra != "" {
		cfg += "\n" + extra
	}
	return os.WriteFile(n.Paths.StorageCfg(), []byte(cfg), 0o644)
}

// Storages parses the node's storage.cfg.
func (n *Node) Storages() (qemuserver.Storages, error) {
	return qemuserver.LoadStorages(n.Paths.StorageCfg())
}

// WriteConfig writes /etc/pve/qemu-server/<vmid>.conf.
func (n *Node) WriteConfig(vmid int, text string) error {
	return os.WriteFile(n.Paths.VMConfig(vmid), []byte(text), 0o644)
}

// Config loads a VM config.
func (n *Node) Config(vmid int) (*qemuserver.Config, error) {
	return qemuserver.LoadConfig(n.Paths.VMConfig(vmid), vmid)
}

// ThinDir holds the backing files of the local-lvm stand-in and the state
// file the lvs double reads.
func (n *Node) ThinDir() string { return filepath.Join(n.Root, "var/lib/lvm-thin") }

// CreateVolume creates a volume of size bytes on a storage of the node:
// a sparse file for dir storages, a sparse file behind a loop device at
// /dev/<vg>/<lv> for local-lvm. It returns the path QEMU opens.
func (n *Node) CreateVolume(storage, volname string, size int64) (string, error) {
	st, err := n.Storages()
	if err != nil {
		return "", err
	}
	s, ok := st[storage]
	if !ok {
		return "", fmt.Errorf("no storage %q", storage)
	}
	d := &qemuserver.Drive{Key: "scsi0", Bus: "scsi", Volume: storage + ":" + volname, Opts: map[string]string{}}
	vol, err := qemuserver.ResolveVolume(st, d, nil)
	if err != nil {
		return "", err
	}
	switch s.Type {
	case "dir", "nfs", "cifs", "btrfs":
		if err := os.MkdirAll(filepath.Dir(vol.Path), 0o755); err != nil {
			return "", err
		}
		if vol.Format == "qcow2" {
			out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", vol.Path, strconv.FormatInt(size, 10)).CombinedOutput()
			if err != nil {
				return "", fmt.Errorf("qemu-img create: %v: %s", err, out)
			}
			return vol.Path, nil
		}
		return vol.Path, truncate(vol.Path, size)
	case "lvmthin":
		backing := filepath.Join(n.ThinDir(), volname+".img")
		if err := truncate(backing, size); err != nil {
			return "", err
		}
		out, err := exec.Command("losetup", "--find", "--show", backing).Output()
		if err != nil {
			return "", fmt.Errorf("losetup %s: %w (loop devices needed for the local-lvm stand-in)", backing, err)
		}
		loop := strings.TrimSpace(string(out))
		n.cleanups = append(n.cleanups, func() { _ = exec.Command("losetup", "-d", loop).Run() })
		if err := os.MkdirAll(filepath.Dir(vol.Path), 0o755); err != nil {
			return "", err
		}
		vgdir := filepath.Dir(vol.Path)
		n.cleanups = append(n.cleanups, func() { _ = os.RemoveAll(vgdir) })
		if err := os.Symlink(loop, vol.Path); err != nil {
			return "", err
		}
		// The lvs double maps <vg>/<lv> to its backing file through this.
		f, err := os.OpenFile(filepath.Join(n.ThinDir(), "volumes"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return "", err
		}
		defer f.Close()
		fmt.Fprintf(f, "%s %s %d %s\n", n.VG, volname, size, backing)
		return vol.Path, nil
	case "zfspool":
		return vol.Path, n.createZvol(s.Props["pool"]+"/"+volname, vol.Path, size, s.Bool("sparse"))
	}
	return "", fmt.Errorf("fakenode: storage type %s not supported", s.Type)
}

func truncate(p string, size int64) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Truncate(size)
}

// VM is a QEMU process started for a config.
type VM struct {
	VMID int
	Pid  int
	Argv []string
	// Binary is the copy of QEMU's binary the process runs (host path),
	// with ArgvOptions.CopiedBinary; "" otherwise.
	Binary string
	node   *Node
}

// StartError is QEMU refusing to start; Stderr holds its own message.
type StartError struct {
	Argv   []string
	Stderr string
}

func (e *StartError) Error() string { return "QEMU refused to start: " + strings.TrimSpace(e.Stderr) }

// Start launches QEMU for the VM's config, daemonized, with its pid file and
// QMP socket where Proxmox keeps them, and waits until QMP answers.
func (n *Node) Start(vmid int, o ArgvOptions) (*VM, error) {
	cfg, err := n.Config(vmid)
	if err != nil {
		return nil, err
	}
	st, err := n.Storages()
	if err != nil {
		return nil, err
	}
	o.VMID = vmid
	o.RunDir = n.Paths.RunDir()
	if o.QEMUVersion == "" {
		o.QEMUVersion = n.qemuVersion()
	}
	argv, err := Argv(n.QEMU, cfg, st, o)
	if err != nil {
		return nil, err
	}
	_ = os.Remove(n.Paths.PidFile(vmid))
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	var binary string
	if o.CopiedBinary {
		var inChroot string
		if binary, inChroot, err = n.copyBinary(vmid); err != nil {
			return nil, err
		}
		if inChroot == "" {
			cmd.Path, argv[0] = binary, binary
			cmd.Args[0] = binary
		} else {
			cmd.Env = append(os.Environ(), "PVEDISKCHECK_QEMU_BIN="+inChroot)
		}
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Run(); err != nil {
		return nil, &StartError{Argv: argv, Stderr: stderr.String() + " (" + err.Error() + ")"}
	}
	pid, err := readPid(n.Paths.PidFile(vmid))
	if err != nil {
		return nil, fmt.Errorf("QEMU started but %v", err)
	}
	vm := &VM{VMID: vmid, Pid: pid, Argv: argv, Binary: binary, node: n}
	n.vms[vmid] = vm
	// QMP listens before -daemonize returns; nothing else to wait for.
	return vm, nil
}

// copyBinary copies the QEMU binary n.QEMU runs into a directory of its
// own: the host's binary (found on PATH) below the node's root, or, for
// the 11.1 wrapper (a script), the chroot's binary below the /tmp the
// chroot shares with the host, whose path inside the chroot the wrapper
// then execs (PVEDISKCHECK_QEMU_BIN). It returns the copy's host path and,
// for the wrapper, its path in the chroot.
func (n *Node) copyBinary(vmid int) (host, inChroot string, err error) {
	src, err := exec.LookPath(n.QEMU)
	if err != nil {
		return "", "", err
	}
	head := make([]byte, 2)
	if f, err := os.Open(src); err == nil {
		_, _ = f.Read(head)
		f.Close()
	}
	wrapper := string(head) == "#!"
	dir := filepath.Join(n.Root, "qemu-copy", strconv.Itoa(vmid))
	if wrapper {
		src = filepath.Join(cacheDir(), "trixie-qemu11", "usr/bin/qemu-system-x86_64")
		if dir, err = os.MkdirTemp("/tmp", "pdc-qemu-copy"); err != nil {
			return "", "", err
		}
		n.cleanups = append(n.cleanups, func() { os.RemoveAll(dir) })
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", err
	}
	// QEMU finds its modules and firmware relative to its binary's
	// directory as if that were /usr/bin (get_relocated_path): DIR/bin
	// beside DIR/lib and DIR/share, linked to the real ones (inside the
	// chroot for the wrapper: absolute links resolve there).
	for _, l := range []string{"lib", "share"} {
		if err := os.Symlink("/usr/"+l, filepath.Join(dir, l)); err != nil {
			return "", "", err
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
		return "", "", err
	}
	host = filepath.Join(dir, "bin", "qemu-system-x86_64")
	b, err := os.ReadFile(src)
	if err != nil {
		return "", "", err
	}
	if err := os.WriteFile(host, b, 0o755); err != nil {
		return "", "", err
	}
	if wrapper {
		inChroot = host // the chroot's /tmp is the host's
	}
	return host, inChroot, nil
}

// cacheDir is where the 11.1 chroot lives (scripts/qemu-11.1's
// PVEDISKCHECK_CACHE).
func cacheDir() string {
	if d := os.Getenv("PVEDISKCHECK_CACHE"); d != "" {
		return d
	}
	return "/var/cache/pvediskcheck"
}

// qemuVersion is the version of n.QEMU, asked once per node.
func (n *Node) qemuVersion() string {
	if n.version == "" {
		n.version, _ = QEMUVersion(n.QEMU)
	}
	return n.version
}

func readPid(p string) (int, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// Stop kills the VM's QEMU and waits for it to go.
func (vm *VM) Stop() {
	if vm == nil || vm.Pid <= 0 {
		return
	}
	// The pid as it was: a second Stop (a test's, and Close's) sets
	// vm.Pid to 0, and kill(0, ...) would signal the whole process group.
	pid := vm.Pid
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 100; i++ {
		if syscall.Kill(pid, 0) != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	delete(vm.node.vms, vm.VMID)
	vm.Pid = 0
}

// Close stops every VM and releases loop devices and /dev/<vg>.
func (n *Node) Close() {
	for _, vm := range n.vms {
		vm.Stop()
	}
	for i := len(n.cleanups) - 1; i >= 0; i-- {
		n.cleanups[i]()
	}
	n.cleanups = nil
}

// ErrNoQEMU is returned by Require when QEMU is not installed.
var ErrNoQEMU = errors.New("qemu-system-x86_64 not found")
