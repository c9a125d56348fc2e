// Command pvesm is the fake node's stand-in for Proxmox's pvesm, for the two
// questions pvediskcheck asks it about storages it does not model itself:
//
//	pvesm path VOLID               where the volume lives
//	pvesm status [--storage ID]    each storage's use, in pvesm's own table
//
// It answers from the test node's files, as the real plugins do from the
// real node:
//
//   - storage.cfg is $ROOT/etc/pve/storage.cfg; a storage it lacks, or one
//     of a type no installed plugin defines, is "storage 'ID' does not
//     exist" (pve-storage skips sections of unknown types);
//   - built-in types resolve as pve-storage does (qemuserver.ResolveVolume,
//     krbd with the fsid of $ROOT/etc/pve/ceph.conf);
//   - type drbd is LINSTOR's plugin (LINSTORPlugin.pm parse_volname and
//     get_dev_path): vm-<vmid>-<name> or pm-<8 hex>_<vmid>, at
//     /dev/drbd/by-res/<resource>/0;
//   - status measures the directory that holds a storage's volumes below
//     $ROOT (statfs): its path for file storages, /dev/drbd/by-res for drbd;
//     a storage with nothing below $ROOT is inactive, a disabled one
//     "disabled" with N/A, as pvesm prints them.
//
// Exit status 255 with pvesm's message on errors, as a Perl die ends it.
package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	root := os.Getenv("PVEDISKCHECK_FAKENODE_ROOT")
	if root == "" {
		fmt.Fprintln(stderr, "pvesm (fakenode double): PVEDISKCHECK_FAKENODE_ROOT is not set")
		return 3
	}
	st, err := qemuserver.LoadStorages(filepath.Join(root, "etc/pve/storage.cfg"))
	if err != nil {
		fmt.Fprintf(stderr, "%v\n", err)
		return 255
	}
	for id, s := range st {
		if !known(s.Type) {
			delete(st, id) // no plugin defines the type: pve-storage skips it
		}
	}
	switch {
	case len(args) == 2 && args[0] == "path":
		p, err := path(root, st, args[1])
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 255
		}
		fmt.Fprintln(stdout, p)
		return 0
	case len(args) >= 1 && args[0] == "status":
		only := ""
		if len(args) == 3 && args[1] == "--storage" {
			only = args[2]
			if _, ok := st[only]; !ok {
				fmt.Fprintf(stderr, "storage '%s' does not exist\n", only)
				return 255
			}
		} else if len(args) != 1 {
			fmt.Fprintf(stderr, "pvesm (fakenode double): unsupported arguments %q\n", args[1:])
			return 3
		}
		status(stdout, root, st, only)
		return 0
	}
	fmt.Fprintf(stderr, "pvesm (fakenode double): unsupported arguments %q\n", args)
	return 3
}

func known(t string) bool {
	switch t {
	case "dir", "nfs", "cifs", "cephfs", "btrfs", "lvm", "lvmthin", "zfspool", "zfs", "rbd", "iscsi", "iscsidirect", "pbs", "esxi", "drbd":
		return true
	}
	return false
}

var (
	volidRe        = regexp.MustCompile(`(?i)^([a-z][a-z0-9\-_.]*[a-z0-9]):(.+)$`)
	linstorLegacy  = regexp.MustCompile(`^vm-\d+-[a-z][a-z0-9\-_.]*[a-z0-9]+$`)
	linstorUUID    = regexp.MustCompile(`^(pm-[0-9a-f]{8})_\d+$`)
	cephFSIDLineRe = regexp.MustCompile(`^\s*fsid\s*=\s*([0-9a-fA-F-]{36})\s*$`)
)

func path(root string, st qemuserver.Storages, volid string) (string, error) {
	m := volidRe.FindStringSubmatch(volid)
	if m == nil {
		return "", fmt.Errorf("unable to parse volume ID '%s'", volid)
	}
	s, ok := st[m[1]]
	if !ok {
		return "", fmt.Errorf("storage '%s' does not exist", m[1])
	}
	if s.Type == "drbd" {
		name := m[2]
		if u := linstorUUID.FindStringSubmatch(name); u != nil {
			name = u[1]
		} else if !linstorLegacy.MatchString(name) {
			return "", fmt.Errorf("unable to parse PVE volume name '%s'", m[2])
		}
		return "/dev/drbd/by-res/" + name + "/0", nil
	}
	d := &qemuserver.Drive{Key: "scsi0", Bus: "scsi", Volume: volid, Opts: map[string]string{}}
	if s.Type == "rbd" && s.Bool("krbd") && s.Props["fsid"] == "" {
		fsid, err := cephFSID(root)
		if err != nil {
			return "", err
		}
		c := *s
		c.Props = map[string]string{"fsid": fsid}
		for k, v := range s.Props {
			c.Props[k] = v
		}
		st = qemuserver.Storages{s.ID: &c}
	}
	v, err := qemuserver.ResolveVolume(st, d, func(p string) bool {
		fi, err := os.Stat(filepath.Join(root, p))
		return err == nil && fi.Mode()&os.ModeDevice != 0
	})
	if err != nil {
		return "", err
	}
	if v.Driver == "rbd" {
		return "rbd:" + v.Path + ":conf=/etc/pve/ceph.conf", nil
	}
	return v.Path, nil
}

// cephFSID reads [global] fsid from the node's ceph.conf, as
// get_rbd_dev_path does for a storage without monhost.
func cephFSID(root string) (string, error) {
	b, err := os.ReadFile(filepath.Join(root, "etc/pve/ceph.conf"))
	if err != nil {
		return "", fmt.Errorf("cluster fsid has invalid format")
	}
	for _, l := range strings.Split(string(b), "\n") {
		if m := cephFSIDLineRe.FindStringSubmatch(l); m != nil {
			return strings.ToLower(m[1]), nil
		}
	}
	return "", fmt.Errorf("cluster fsid has invalid format")
}

// volumeDir is where a storage keeps its volumes on the test node.
func volumeDir(root string, s *qemuserver.Storage) string {
	switch {
	case s.Type == "drbd":
		return filepath.Join(root, "dev/drbd/by-res")
	case s.Props["path"] != "":
		return filepath.Join(root, s.Props["path"])
	}
	return ""
}

// status prints PVE::CLI::pvesm's table (libpve-storage-perl >= 9.0.14).
func status(w io.Writer, root string, st qemuserver.Storages, only string) {
	var ids []string
	for id := range st {
		if only == "" || id == only {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	maxlen := 0
	for _, id := range ids {
		maxlen = max(maxlen, len(id))
	}
	maxlen++
	fmt.Fprintf(w, "%-*s %10s %10s %15s %15s %15s %8s\n", maxlen, "Name", "Type", "Status", "Total (KiB)", "Used (KiB)", "Available (KiB)", "%")
	for _, id := range ids {
		s := st[id]
		var total, used, avail int64
		active := "inactive"
		var fs unix.Statfs_t
		if dir := volumeDir(root, s); dir != "" && unix.Statfs(dir, &fs) == nil {
			active = "active"
			total = int64(fs.Blocks) * fs.Bsize
			avail = int64(fs.Bavail) * fs.Bsize
			used = total - int64(fs.Bfree)*fs.Bsize
		}
		if s.Bool("disable") {
			fmt.Fprintf(w, "%-*s %10s %10s %15d %15d %15d % 8s\n", maxlen, id, s.Type, "disabled", total/1024, used/1024, avail/1024, "N/A")
			continue
		}
		pct := 0.0
		if total > 0 {
			pct = float64(used) * 100 / float64(total)
		}
		fmt.Fprintf(w, "%-*s %10s %10s %15d %15d %15d % 7.2f%%\n", maxlen, id, s.Type, active, total/1024, used/1024, avail/1024, pct)
	}
}
