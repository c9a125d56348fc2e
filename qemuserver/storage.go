package qemuserver

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strings"
)

// Storage is one section of /etc/pve/storage.cfg.
type Storage struct {
	ID    string
	Type  string // dir, lvmthin, lvm, zfspool, zfs, rbd, nfs, cifs, btrfs, iscsi, ...
	Props map[string]string
}

// Storages maps storage id to its definition.
type Storages map[string]*Storage

var storageHeaderRe = regexp.MustCompile(`^([a-z][a-z0-9]*):\s*(\S+)\s*$`)

// LoadStorages reads storage.cfg. A missing file yields an empty set.
func LoadStorages(p string) (Storages, error) {
	data, err := os.ReadFile(p)
	if err != nil {
		if os.IsNotExist(err) {
			return Storages{}, nil
		}
		return nil, err
	}
	return ParseStorages(bytes.NewReader(data), p)
}

// ParseStorages parses storage.cfg: a `type: id` header, indented
// `key value` lines (or bare flags), a blank line between sections.
func ParseStorages(r io.Reader, name string) (Storages, error) {
	out := Storages{}
	sc := bufio.NewScanner(r)
	var cur *Storage
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		trim := strings.TrimSpace(line)
		if trim == "" {
			cur = nil
			continue
		}
		if strings.HasPrefix(trim, "#") {
			continue
		}
		if line[0] != ' ' && line[0] != '\t' {
			m := storageHeaderRe.FindStringSubmatch(line)
			if m == nil {
				return nil, fmt.Errorf("%w: %s line %d: cannot parse %q", ErrParse, name, n, line)
			}
			cur = &Storage{ID: m[2], Type: m[1], Props: map[string]string{}}
			out[cur.ID] = cur
			continue
		}
		if cur == nil {
			return nil, fmt.Errorf("%w: %s line %d: property outside a section: %q", ErrParse, name, n, trim)
		}
		k, v, _ := strings.Cut(trim, " ")
		k, _, _ = strings.Cut(k, "\t")
		cur.Props[k] = strings.TrimSpace(v)
	}
	return out, sc.Err()
}

// Bool returns a boolean property (bare flags count as true).
func (s *Storage) Bool(k string) bool {
	v, ok := s.Props[k]
	if !ok {
		return false
	}
	if v == "" {
		return true
	}
	b, _ := ParseBool(v)
	return b
}

// IsThin reports storage types whose volumes allocate on write, so discards
// can return space: lvmthin, zfspool (sparse or not, zvols free on discard),
// rbd. File storages are thin when the image is sparse (decided per file).
func (s *Storage) IsThin() bool {
	switch s.Type {
	case "lvmthin", "zfspool", "rbd", "zfs":
		return true
	}
	return false
}

// IsFileBased reports storages that keep images as files below a path.
func (s *Storage) IsFileBased() bool {
	switch s.Type {
	case "dir", "nfs", "cifs", "btrfs", "glusterfs", "cephfs":
		return true
	}
	return false
}

// Volume describes where a volume lives, as PVE::Storage resolves it.
type Volume struct {
	Path   string // host path or URL-ish name (rbd: pool/image)
	Driver string // QEMU protocol driver: file, host_device, rbd, iscsi, nbd
	Format string // raw, qcow2, vmdk
}

var fileFormatRe = regexp.MustCompile(`\.(raw|qcow2|vmdk|subvol)$`)

// iscsiVolRe is ISCSIPlugin.pm parse_volname.
var iscsiVolRe = regexp.MustCompile(`^\d+\.\d+\.\d+\.([^/\s]+)$`)

// ResolveVolume maps a drive's volume to its path and formats. isBlock tells
// whether an absolute path is a block device (the caller stats it).
func ResolveVolume(st Storages, d *Drive, isBlock func(string) bool) (Volume, error) {
	if strings.HasPrefix(d.Volume, "/") {
		v := Volume{Path: d.Volume, Driver: "file", Format: "raw"}
		if f := d.Opts["format"]; f != "" {
			v.Format = f
		}
		if isBlock != nil && isBlock(d.Volume) {
			v.Driver = "host_device"
		}
		return v, nil
	}
	sid := d.StorageID()
	s, ok := st[sid]
	if !ok {
		return Volume{}, fmt.Errorf("storage %q of %s is not defined in storage.cfg", sid, d.Key)
	}
	vol := d.VolName()
	switch s.Type {
	case "dir", "nfs", "cifs", "glusterfs", "cephfs":
		base := s.Props["path"]
		if s.Type == "nfs" || s.Type == "cifs" {
			if base == "" {
				base = "/mnt/pve/" + sid
			}
		}
		sub := "images"
		if strings.HasPrefix(vol, "iso/") {
			sub, vol = "template/iso", strings.TrimPrefix(vol, "iso/")
		}
		v := Volume{Path: path.Join(base, sub, vol), Driver: "file", Format: "raw"}
		if m := fileFormatRe.FindStringSubmatch(vol); m != nil {
			v.Format = m[1]
		}
		return v, nil
	case "btrfs":
		// <path>/images/<vmid>/<name>/disk.raw
		dir, file := path.Split(vol)
		name := strings.TrimSuffix(file, ".raw")
		return Volume{Path: path.Join(s.Props["path"], "images", dir, name, "disk.raw"), Driver: "file", Format: "raw"}, nil
	case "lvmthin", "lvm":
		return Volume{Path: "/dev/" + s.Props["vgname"] + "/" + vol, Driver: "host_device", Format: "raw"}, nil
	case "zfspool":
		return Volume{Path: "/dev/zvol/" + s.Props["pool"] + "/" + vol, Driver: "host_device", Format: "raw"}, nil
	case "rbd":
		pool := s.Props["pool"]
		if pool == "" {
			pool = "rbd"
		}
		if s.Bool("krbd") {
			return Volume{Path: "/dev/rbd-pve/" + s.Props["fsid"] + "/" + pool + "/" + vol, Driver: "host_device", Format: "raw"}, nil
		}
		return Volume{Path: pool + "/" + vol, Driver: "rbd", Format: "raw"}, nil
	case "zfs", "iscsidirect":
		return Volume{Path: vol, Driver: "iscsi", Format: "raw"}, nil
	case "iscsi":
		// The kernel's iSCSI initiator: volname <n>.<n>.<n>.<lun id>, the
		// LUN at /dev/disk/by-id/<lun id> (ISCSIPlugin.pm parse_volname, path).
		m := iscsiVolRe.FindStringSubmatch(vol)
		if m == nil {
			return Volume{}, fmt.Errorf("iscsi volume %q of %s is not <n>.<n>.<n>.<lun>", vol, d.Key)
		}
		return Volume{Path: "/dev/disk/by-id/" + m[1], Driver: "host_device", Format: "raw"}, nil
	}
	return Volume{}, fmt.Errorf("storage type %q of %s is not supported", s.Type, sid)
}

// ThinPool names an lvmthin storage's pool: its volume group and thin pool
// LV ("data" when storage.cfg does not say, as on a default install).
func (s *Storage) ThinPool() (vg, lv string) {
	vg, lv = s.Props["vgname"], s.Props["thinpool"]
	if lv == "" {
		lv = "data"
	}
	return vg, lv
}
