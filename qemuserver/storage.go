package qemuserver

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/storage/storagetype"
)

// Storage is one section of /etc/pve/storage.cfg.
type Storage struct {
	ID    string
	Type  string // dir, lvmthin, lvm, zfspool, zfs, rbd, nfs, cifs, btrfs, iscsi, ... (Facts says what it means)
	Props map[string]string
}

// Storages maps storage id to its definition.
type Storages map[string]*Storage

// Of is the row of the storage a drive's volume is on: nil for a path,
// none, cdrom, a storage storage.cfg lacks, or no drive. The one lookup of
// a drive's storage: package disk resolves each disk's through it.
func (st Storages) Of(d *Drive) *Storage {
	if d == nil {
		return nil
	}
	return st[d.StorageID()]
}

// storageHeaderRe is PVE::SectionConfig's section header ("type: id"),
// storagePropRe its property line; storageTypeRe the names a storage
// plugin registers, storageIDRe pve-storage-id (parse_storage_id).
var (
	storageHeaderRe = regexp.MustCompile(`^(\S+):\s*(\S+)\s*$`)
	storagePropRe   = regexp.MustCompile(`^\s+(\S+)(\s+(.*\S))?\s*$`)
	storageTypeRe   = regexp.MustCompile(`^[a-z][a-z0-9]*$`)
	storageIDRe     = regexp.MustCompile(`(?i)^[a-z][a-z0-9\-_.]*[a-z0-9]$`)
)

// LoadStorages reads storage.cfg. A missing file yields an empty set. For
// fixtures and test doubles: the tool reads a node's files through
// node.Node.ReadFile (vm.ReadStorages).
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

// ParseStorages parses storage.cfg (ParseStoragesSkipped), without the
// lines Proxmox skips.
func ParseStorages(r io.Reader, name string) (Storages, error) {
	st, _, err := ParseStoragesSkipped(r, name)
	return st, err
}

// ParseStoragesSkipped parses storage.cfg as PVE::SectionConfig reads it
// (pve-storage's parse_section_header): a `type: id` header (the type in
// any case), indented `key value` lines (or bare flags), a blank line
// between sections. What Proxmox skips with a warning is skipped here too
// and said in skipped, naming the file and line: a line of no known
// shape, a section whose type no plugin can have (a BOM before the first
// header) or whose ID is no storage ID, a key given twice (Proxmox keeps
// the first: "duplicate attribute"), a section that lacks an option its
// type requires (storagetype's Required: a zfs: section without blocksize;
// check_config's "missing value for required option"), which takes the
// storage away: Proxmox has no storage of that ID; a storage ID given
// twice is the later section, silently, as in Proxmox. The error is for a file with no
// section at all but lines Proxmox cannot read: no storage.cfg.
func ParseStoragesSkipped(r io.Reader, name string) (Storages, []string, error) {
	out := Storages{}
	var skipped []string
	var first error
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), MaxLineBytes)
	var cur *Storage
	inSection := false // a skipped section's lines are its own
	n, header := 0, 0
	skipAt := func(line int, format string, args ...any) {
		skipped = append(skipped, fmt.Sprintf("%s line %d: ", name, line)+fmt.Sprintf(format, args...))
	}
	skip := func(format string, args ...any) { skipAt(n, format, args...) }
	// end closes the section: one that lacks an option its type requires
	// is dropped, as check_config drops it ("skip section": an ID given
	// before is then gone too, as Proxmox's is).
	end := func() {
		if cur == nil {
			return
		}
		if missing := cur.Missing(); len(missing) > 0 {
			delete(out, cur.ID)
			skipAt(header, "section %s skipped: it lacks %s, which Proxmox requires of a %s storage (Proxmox: \"missing value for required option '%s'\"): the storage does not exist for Proxmox",
				clip(cur.ID), strings.Join(missing, ", "), cur.Type, missing[0])
		}
		cur = nil
	}
	for sc.Scan() {
		n++
		line := sc.Text()
		trim := strings.TrimSpace(line)
		switch {
		case trim == "":
			end()
			inSection = false
			continue
		case strings.HasPrefix(trim, "#"):
			continue
		case inSection:
			p := storagePropRe.FindStringSubmatch(line)
			switch {
			case cur == nil:
			case p == nil:
				skip("%s is no property line of storage %s: Proxmox ignores it (\"ignore config line\")", clip(line), cur.ID)
			case hasProp(cur, p[1]):
				skip("%s given twice in storage %s: Proxmox keeps the first (\"duplicate attribute\")", clip(p[1]), cur.ID)
			default:
				cur.Props[p[1]] = p[3]
			}
			continue
		}
		m := storageHeaderRe.FindStringSubmatch(line)
		if m == nil {
			if first == nil {
				first = fmt.Errorf("%w: %s line %d: cannot parse %q", ErrParse, name, n, line)
				if line[0] == ' ' || line[0] == '\t' {
					first = fmt.Errorf("%w: %s line %d: property outside a section: %q", ErrParse, name, n, trim)
				}
			}
			skip("%s is outside a section: Proxmox ignores it (\"ignore config line\")", clip(line))
			continue
		}
		typ, id := strings.ToLower(m[1]), m[2]
		inSection, cur, header = true, nil, n
		switch {
		case !storageTypeRe.MatchString(typ):
			skip("section %s skipped: no storage type is called %s (Proxmox: \"unsupported type\")", clip(id), clip(m[1]))
		case !storageIDRe.MatchString(id):
			skip("section %s skipped: %s is no storage ID (Proxmox: \"skip section\")", clip(id), clip(id))
		default: // an ID given twice: the later section, as in Proxmox

			cur = &Storage{ID: id, Type: typ, Props: map[string]string{}}
			out[id] = cur
		}
	}
	if err := scanErr(sc.Err(), name, n+1); err != nil {
		return nil, nil, err
	}
	end()
	if len(out) == 0 && first != nil {
		return nil, nil, first
	}
	return out, skipped, nil
}

// Missing are the options the storage's type requires (its row's
// Required: pve-storage's plugin declares them not optional) that the
// section does not set; a bare flag sets none of them (each takes a value).
func (s *Storage) Missing() []string {
	var out []string
	for _, k := range s.Facts().Required {
		if s.Props[k] == "" {
			out = append(out, k)
		}
	}
	return out
}

func hasProp(s *Storage, k string) bool {
	_, ok := s.Props[k]
	return ok
}

// Bool returns a boolean property (bare flags count as true).
// Unavailable says why Proxmox does not activate the storage on node
// here: disabled, or restricted by its nodes list to other nodes
// (pve-storage storage_check_enabled, which vm_start reaches through
// activate_volumes, and pvesm status skips). "" when it is available; with
// here "" (the node's name unknown) only disable is decided.
func (s *Storage) Unavailable(here string) string {
	if s.Bool("disable") {
		return "disabled in storage.cfg"
	}
	nodes := s.Props["nodes"]
	if nodes == "" || here == "" {
		return ""
	}
	for _, n := range strings.FieldsFunc(nodes, func(r rune) bool { return r == ',' || r == ' ' || r == ';' || r == '\t' }) {
		if n == here {
			return ""
		}
	}
	return fmt.Sprintf("available on nodes %s only, this is %s", nodes, here)
}

// ProxmoxRefusal is pve-storage's own message for an unavailable storage
// (storage_check_enabled), what qm start prints; "" when available.
func (s *Storage) ProxmoxRefusal(here string) string {
	switch {
	case s.Unavailable(here) == "":
		return ""
	case s.Bool("disable"):
		return "storage '" + s.ID + "' is disabled"
	default:
		return "storage '" + s.ID + "' is not available on node '" + here + "'"
	}
}

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

// Facts is the storage's row of the storage-type table: what its type (and
// the variant its flags pick: krbd, nocow, sparse,
// snapshot-as-volume-chain) means for volumes, writes, discards and
// allocation. A type pve-storage does not register is storagetype.Plugin.
func (s *Storage) Facts() *storagetype.Type {
	return storagetype.Of(s.Type, s.Bool)
}

// Volume describes where a volume lives, as PVE::Storage resolves it and
// qemu-server opens it.
type Volume struct {
	// Path is the host path, or the protocol's address: pool/image for
	// librbd, iscsi://portal/target/lun, gluster://server/volume/...
	Path   string
	Driver string // QEMU protocol driver: file, host_device, rbd, iscsi, nbd, gluster
	Format string // raw, qcow2, vmdk
	// ResolvedBy says where Path comes from: ResolvedByStorageCfg (computed
	// from storage.cfg as the storage plugin does) or ResolvedByPvesm.
	ResolvedBy string
}

// Where a Volume's path comes from.
const (
	ResolvedByStorageCfg = "storage.cfg"
	ResolvedByPvesm      = "pvesm path"
)

// UnmodelledError is a volume this package cannot place from storage.cfg
// alone: a storage type it does not model (a third-party plugin such as
// LINSTOR's drbd, Blockbridge or a TrueNAS plugin, or a type it does not
// know), or a path only the node can tell (krbd's cluster fsid). The node's
// own `pvesm path VOLID` answers it (VolumeFromPath reads the answer).
type UnmodelledError struct {
	Storage *Storage
	Volid   string
	Why     string
	// Known is what storage.cfg does tell when only the path is unknown
	// (a krbd device: host_device, raw), so the rules that depend on the
	// storage and not on the path still apply; nil when nothing is.
	Known *Volume
}

func (e *UnmodelledError) Error() string {
	return fmt.Sprintf("%s: %s", e.Volid, e.Why)
}

// ResolveVolume maps a drive's volume to its path, protocol driver and
// format, as the storage's plugin in pve-storage 9.1 computes them (path(),
// parse_volname(), qemu_blockdev_options()). isBlock tells whether a path
// is a block device (nil: below /dev). A volume it cannot place from
// storage.cfg is an *UnmodelledError; a volume name the plugin refuses, or
// a storage storage.cfg lacks, is an error Proxmox also stops at when it
// starts the VM.
func ResolveVolume(st Storages, d *Drive, isBlock func(string) bool) (Volume, error) {
	if isBlock == nil {
		isBlock = func(p string) bool { return strings.HasPrefix(p, "/dev/") }
	}
	if strings.HasPrefix(d.Volume, "/") {
		v := Volume{Path: d.Volume, Driver: "file", Format: "raw", ResolvedBy: ResolvedByStorageCfg}
		if f := d.Opts["format"]; f != "" {
			v.Format = f
		}
		if isBlock(d.Volume) {
			v.Driver = "host_device"
		}
		return v, nil
	}
	sid, volname, ok := strings.Cut(d.Volume, ":")
	if !ok || !volumeIDRe.MatchString(d.Volume) {
		return Volume{}, fmt.Errorf("%s: %s is not a volume id", d.Key, clip(d.Volume))
	}
	s, ok := st[sid]
	if !ok {
		return Volume{}, fmt.Errorf("%s: storage %q is not defined in storage.cfg (Proxmox cannot start the VM with it)", d.Key, sid)
	}
	v, err := s.resolve(volname)
	if err != nil {
		var ue *UnmodelledError
		if errors.As(err, &ue) {
			ue.Volid = d.Volume
			return Volume{}, ue
		}
		return Volume{}, fmt.Errorf("%s: %w", d.Key, err)
	}
	v.ResolvedBy = ResolvedByStorageCfg
	return v, nil
}

// Volume names of pve-storage's plugins (parse_volname).
var (
	dirImageRe     = regexp.MustCompile(`^(\d+)/(\S+)$`)
	dirLinkedRe    = regexp.MustCompile(`^(\d+)/(\S+)/(\d+)/(\S+)$`)
	dirNameRe      = regexp.MustCompile(`^((?:vm-|base-|subvol-)\d+-[^/\s]+|(?:base-)?[^/\s]+)\.(raw|qcow2|vmdk|subvol)$`)
	dirISORe       = regexp.MustCompile(`(?i)^iso/([^/]+\.(?:iso|img))$`)
	dirImportRe    = regexp.MustCompile(`^import/([ a-zA-Z0-9\-.+=_]+\.(ova|ovf|qcow2|raw|vmdk))$`)
	lvmNameRe      = regexp.MustCompile(`^vm-\d+-\S+$`)
	lvmThinNameRe  = regexp.MustCompile(`^(?:vm|base)-\d+-\S+$`)
	zfsNameRe      = regexp.MustCompile(`^(?:(?:base|basevol)-\d+-\S+/)?((base|basevol|vm|subvol)-\d+-\S+)$`)
	rbdNameRe      = regexp.MustCompile(`^(?:base-\d+-\S+/)?((?:base)?(?:vm)?-\d+-\S+)$`)
	iscsiNameRe    = regexp.MustCompile(`^\d+\.\d+\.\d+\.([^/\s]+)$`)
	iscsiDirectRe  = regexp.MustCompile(`^lun(\d+)$`)
	snapshotFileRe = regexp.MustCompile(`^snap-.*\.qcow2$`)
	fileFormatRe   = regexp.MustCompile(`\.(raw|qcow2|vmdk|subvol)$`)
)

// RBDImage is the RBD image a volume name of an rbd storage is: a linked
// clone's name (base-100-disk-0/vm-101-disk-0) names its base before the
// image (RBDPlugin.pm parse_volname: the image is $name, the part after the
// slash, which `rbd` commands take); any other name is the image itself.
func RBDImage(volname string) string {
	if m := rbdNameRe.FindStringSubmatch(volname); m != nil {
		return m[1]
	}
	return volname
}

func (s *Storage) resolve(volname string) (Volume, error) {
	switch s.Facts().Volumes {
	case storagetype.VolDir, storagetype.VolMounted, storagetype.VolGluster, storagetype.VolBtrfs:
		return s.resolveFile(volname)
	case storagetype.VolLVM:
		if !lvmNameRe.MatchString(volname) {
			return Volume{}, fmt.Errorf("unable to parse lvm volume name %s", clip(volname))
		}
		v := Volume{Path: "/dev/" + s.Props["vgname"] + "/" + volname, Driver: "host_device", Format: "raw"}
		if strings.HasSuffix(volname, ".qcow2") {
			v.Format = "qcow2" // qcow2 on LVM (snapshot-as-volume-chain)
		}
		return v, nil
	case storagetype.VolLVMThin:
		if !lvmThinNameRe.MatchString(volname) {
			return Volume{}, fmt.Errorf("unable to parse lvm volume name %s", clip(volname))
		}
		return Volume{Path: "/dev/" + s.Props["vgname"] + "/" + volname, Driver: "host_device", Format: "raw"}, nil
	case storagetype.VolZvol, storagetype.VolZFSOverISCSI:
		m := zfsNameRe.FindStringSubmatch(volname)
		if m == nil {
			return Volume{}, fmt.Errorf("unable to parse zfs volume name %s", clip(volname))
		}
		if m[2] == "subvol" || m[2] == "basevol" {
			return Volume{}, fmt.Errorf("volume %s is a container's subvolume, not usable as VM image", clip(volname))
		}
		if s.Facts().Volumes == storagetype.VolZFSOverISCSI {
			// ZFS over iSCSI: the LUN is looked up on the target (over
			// ssh) at start; QEMU opens it with its iscsi driver.
			return Volume{Path: "iscsi://" + s.Props["portal"] + "/" + s.Props["target"], Driver: "iscsi", Format: "raw"}, nil
		}
		return Volume{Path: "/dev/zvol/" + s.Props["pool"] + "/" + m[1], Driver: "host_device", Format: "raw"}, nil
	case storagetype.VolRBD, storagetype.VolKRBD:
		m := rbdNameRe.FindStringSubmatch(volname)
		if m == nil {
			return Volume{}, fmt.Errorf("unable to parse rbd volume name %s", clip(volname))
		}
		image := s.rbdPool() + "/" + m[1]
		if s.Facts().Volumes == storagetype.VolKRBD {
			fsid := s.Props["fsid"]
			if fsid == "" {
				return Volume{}, &UnmodelledError{Storage: s, Why: "a krbd device is named by the Ceph cluster's fsid, which storage.cfg does not hold",
					Known: &Volume{Driver: "host_device", Format: "raw"}}
			}
			return Volume{Path: "/dev/rbd-pve/" + fsid + "/" + image, Driver: "host_device", Format: "raw"}, nil
		}
		return Volume{Path: image, Driver: "rbd", Format: "raw"}, nil
	case storagetype.VolISCSI:
		m := iscsiNameRe.FindStringSubmatch(volname)
		if m == nil {
			return Volume{}, fmt.Errorf("unable to parse iscsi volume name %s", clip(volname))
		}
		return Volume{Path: "/dev/disk/by-id/" + m[1], Driver: "host_device", Format: "raw"}, nil
	case storagetype.VolISCSIDirect:
		m := iscsiDirectRe.FindStringSubmatch(volname)
		if m == nil {
			return Volume{}, fmt.Errorf("unable to parse iscsi volume name %s", clip(volname))
		}
		return Volume{Path: "iscsi://" + s.Props["portal"] + "/" + s.Props["target"] + "/" + m[1], Driver: "iscsi", Format: "raw"}, nil
	case storagetype.VolNoDisks:
		return Volume{}, fmt.Errorf("storage %s is a Proxmox Backup Server: it holds backups, not VM disks", s.ID)
	}
	return Volume{}, &UnmodelledError{Storage: s, Why: fmt.Sprintf("storage %s is of type %s, which pvediskcheck does not model (a third-party storage plugin, or a type it does not know)", s.ID, s.Type)}
}

// ISOMediaRefusal is qemu-server's refusal to start a VM with drive d
// (config key key): an ISO volume with no media= (QemuServer.pm
// print_drive_commandline_full, Blockdev.pm generate_file_blockdev, as
// pve-cfg2cmd prints it); "" for any other drive.
func (st Storages) ISOMediaRefusal(key string, d *Drive) string {
	if d == nil || d.Opts["media"] != "" || !st.IsISO(d.Volume) {
		return ""
	}
	return key + ": explicit media parameter is required for iso images"
}

// IsISO reports a volume of ISO content: pve-storage's parse_volname gives
// vtype iso for iso/NAME.iso or .img on the storages that keep files
// (Plugin.pm; dir, nfs, cifs, cephfs, btrfs, glusterfs). qemu-server
// refuses to start such a drive without an explicit media= (QemuServer.pm
// print_drive_commandline_full, Blockdev.pm generate_file_blockdev:
// "explicit media parameter is
// required for iso images"), and qm set refuses it without media=cdrom
// (API2/Qemu.pm check_drive_param: "explicit 'media=cdrom' is required for
// iso images").
func (st Storages) IsISO(volid string) bool {
	sid, volname, ok := strings.Cut(volid, ":")
	if !ok {
		return false
	}
	s := st[sid]
	if s == nil {
		return false
	}
	switch s.Type {
	case "dir", "nfs", "cifs", "cephfs", "btrfs", "glusterfs":
		return dirISORe.MatchString(volname)
	}
	return false
}

// rbdPool is get_rbd_path's pool and namespace.
func (s *Storage) rbdPool() string {
	pool := s.Props["pool"]
	if pool == "" {
		pool = "rbd"
	}
	if ns, ok := s.Props["namespace"]; ok {
		pool += "/" + ns
	}
	return pool
}

// resolveFile is Plugin.pm's parse_volname and filesystem_path for the
// storages that keep volumes as files below a path (dir, nfs, cifs,
// cephfs, btrfs, and glusterfs on PVE 8).
func (s *Storage) resolveFile(volname string) (Volume, error) {
	var vtype, name, vmid, format string
	switch {
	case dirLinkedRe.MatchString(volname):
		m := dirLinkedRe.FindStringSubmatch(volname)
		vtype, vmid, name = "images", m[3], m[4]
	case dirImageRe.MatchString(volname):
		m := dirImageRe.FindStringSubmatch(volname)
		vtype, vmid, name = "images", m[1], m[2]
	case dirISORe.MatchString(volname):
		vtype, name, format = "iso", dirISORe.FindStringSubmatch(volname)[1], "raw"
	case dirImportRe.MatchString(volname):
		m := dirImportRe.FindStringSubmatch(volname)
		vtype, name, format = "import", m[1], m[2]
		if format == "ova" || format == "ovf" {
			return Volume{}, fmt.Errorf("volume %s is an %s archive, not a disk image", clip(volname), format)
		}
	default:
		return Volume{}, fmt.Errorf("unable to parse directory volume name %s", clip(volname))
	}
	if vtype == "images" {
		if snapshotFileRe.MatchString(name) {
			return Volume{}, fmt.Errorf("%s is a snapshot filename, not a volume", clip(name))
		}
		m := dirNameRe.FindStringSubmatch(name)
		if m == nil {
			return Volume{}, fmt.Errorf("unable to parse volume filename %s", clip(name))
		}
		format = m[2]
		if format == "subvol" {
			return Volume{}, fmt.Errorf("volume %s is a container's subvolume, not usable as VM image", clip(volname))
		}
	}
	base := s.Props["path"]
	vols := s.Facts().Volumes
	if base == "" && (vols == storagetype.VolMounted || vols == storagetype.VolGluster) {
		base = "/mnt/pve/" + s.ID // their default mount point
	}
	dir := path.Join(base, s.contentDir(vtype))
	if vtype == "images" {
		dir = path.Join(dir, vmid)
		if vols == storagetype.VolGluster {
			// PVE 8's GlusterfsPlugin: QEMU opens images through gluster://.
			return Volume{Path: "gluster://" + s.Props["server"] + "/" + s.Props["volume"] + "/images/" + vmid + "/" + name, Driver: "gluster", Format: format}, nil
		}
		if vols == storagetype.VolBtrfs && format == "raw" {
			// <path>/images/<vmid>/<name without .raw>/disk.raw: each raw
			// image is a subvolume.
			return Volume{Path: path.Join(dir, strings.TrimSuffix(name, ".raw"), "disk.raw"), Driver: "file", Format: format}, nil
		}
	}
	return Volume{Path: path.Join(dir, name), Driver: "file", Format: format}, nil
}

// contentDir is get_subdir: the content type's directory, or the
// storage's content-dirs override.
func (s *Storage) contentDir(vtype string) string {
	for _, o := range strings.FieldsFunc(s.Props["content-dirs"], func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\t' || r == 0 }) {
		if k, v, ok := strings.Cut(o, "="); ok && k == vtype && v != "" {
			return v
		}
	}
	return map[string]string{"images": "images", "iso": "template/iso", "import": "import"}[vtype]
}

// VolumeFromPath reads what `pvesm path VOLID` printed the way
// PVE::Storage::Plugin::qemu_blockdev_options does for a plugin that does
// not define its own: an absolute path is a block device (host_device) or
// a file, and file:, host_device:, iscsi://, iser://, nbd: and rbd: name
// their QEMU driver (gluster:// too, on PVE 8). The format is the drive's
// format=, else the file's extension, else raw: `pvesm path` does not say,
// and the plugins known to pve-storage keep VM images raw.
func VolumeFromPath(p string, d *Drive, isBlock func(string) bool) (Volume, error) {
	if isBlock == nil {
		isBlock = func(p string) bool { return strings.HasPrefix(p, "/dev/") }
	}
	p = strings.TrimSpace(p)
	v := Volume{Format: "raw", ResolvedBy: ResolvedByPvesm}
	switch {
	case strings.HasPrefix(p, "/"):
		v.Path, v.Driver = p, "file"
		if isBlock(p) {
			v.Driver = "host_device"
		}
	case strings.HasPrefix(p, "file:"):
		v.Path, v.Driver = strings.TrimPrefix(p, "file:"), "file"
	case strings.HasPrefix(p, "host_device:"):
		v.Path, v.Driver = strings.TrimPrefix(p, "host_device:"), "host_device"
	case strings.HasPrefix(p, "iscsi://"), strings.HasPrefix(p, "iser://"):
		v.Path, v.Driver = p, "iscsi"
	case strings.HasPrefix(p, "nbd:"), strings.HasPrefix(p, "nbd+"):
		v.Path, v.Driver = p, "nbd"
	case strings.HasPrefix(p, "rbd:"):
		image, _, _ := strings.Cut(strings.TrimPrefix(p, "rbd:"), ":")
		v.Path, v.Driver = image, "rbd"
	case strings.HasPrefix(p, "gluster"):
		v.Path, v.Driver = p, "gluster"
	default:
		return Volume{}, fmt.Errorf("pvesm path printed %s, which is no path or address QEMU opens", clip(p))
	}
	if v.Path == "" {
		return Volume{}, fmt.Errorf("pvesm path printed %s, which names no volume", clip(p))
	}
	if m := fileFormatRe.FindStringSubmatch(v.Path); m != nil && m[1] != "subvol" {
		v.Format = m[1]
	}
	if f := d.Opts["format"]; f != "" {
		v.Format = f
	}
	return v, nil
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

// cephFSIDRe is a [global] fsid line of ceph.conf.
var cephFSIDRe = regexp.MustCompile(`^\s*fsid\s*=\s*([0-9a-fA-F-]{36})\s*$`)

// ParseCephFSID reads the cluster fsid from ceph.conf's [global] section,
// where pve-storage's RBDPlugin takes it for a hyperconverged cluster
// (get_rbd_dev_path: cfs_read_file('ceph.conf')->{global}->{fsid}).
func ParseCephFSID(conf []byte) (string, bool) {
	section := ""
	for _, line := range strings.Split(string(conf), "\n") {
		t := strings.TrimSpace(line)
		if strings.HasPrefix(t, "[") && strings.HasSuffix(t, "]") {
			section = strings.TrimSpace(t[1 : len(t)-1])
			continue
		}
		if section == "global" {
			if m := cephFSIDRe.FindStringSubmatch(line); m != nil {
				return m[1], true
			}
		}
	}
	return "", false
}

// SetCephFSID gives krbd storages of the local Ceph cluster (no monhost: a
// hyperconverged cluster, whose ceph.conf is /etc/pve/ceph.conf) the fsid
// their device paths are named by. A storage of an external cluster
// (monhost set) is left alone: only `pvesm path` can ask that cluster.
func (st Storages) SetCephFSID(fsid string) {
	for _, s := range st {
		if s.Facts().Volumes == storagetype.VolKRBD && s.Props["monhost"] == "" && s.Props["fsid"] == "" {
			s.Props["fsid"] = fsid
		}
	}
}
