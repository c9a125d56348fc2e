package qemuserver

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/storage/storagetype"
)

// storageCfg declares one storage of every type pve-storage 9.1 has (and
// glusterfs as PVE 8 had it, and two that no built-in plugin defines).
const storageCfg = `dir: local
	path /var/lib/vz
	content iso,vztmpl,backup,images

dir: vmimages
	path /srv/pve
	content-dirs images=vm-disks,iso=isos
	content images,iso

nfs: nas
	export /mnt/NAS/Proxmox
	path /mnt/pve/nas
	server 192.168.0.201
	content images,iso

cifs: smb
	server 192.168.0.1
	share F
	content images

cephfs: cephfs
	path /mnt/pve/cephfs
	content iso,vztmpl

btrfs: butter
	path /butter/bread
	content images

glusterfs: gluster
	server 10.0.0.5
	server2 10.0.0.6
	volume gv0
	content images,iso

lvm: vg-lvm
	vgname veegee
	content images

lvmthin: local-lvm
	thinpool data
	vgname pve
	content rootdir,images

zfspool: local-zfs
	pool rpool/data
	sparse 1
	content images,rootdir

zfs: zfs-over-iscsi
	iscsiprovider comstar
	portal 127.0.0.1
	target iqn.2019-10.org.test:foobar
	pool tank
	blocksize 4k
	content images

rbd: ceph
	pool vms
	content images

rbd: ceph-krbd
	pool vms
	krbd 1
	content images

rbd: ceph-krbd-fsid
	monhost 10.0.0.1 10.0.0.2
	fsid fc4181a6-56eb-4f68-b452-8ba1f381ca2a
	pool cpool
	namespace tenant1
	krbd 1
	content images

iscsi: san
	portal 10.0.0.9
	target iqn.2003-01.org.linux-iscsi.san:sn.1234
	content images

iscsidirect: san-direct
	portal 10.0.0.9
	target iqn.2003-01.org.linux-iscsi.san:sn.1234
	content images

pbs: backup
	datastore store1
	server 10.0.0.10
	content backup

drbd: drbdstorage
	resourcegroup drbdgrp
	controller 10.0.0.20
	content images,rootdir

blockbridge: bb
	api_url https://bb.example/api
	content images
`

func TestResolveVolumeEveryType(t *testing.T) {
	st, err := ParseStorages(strings.NewReader(storageCfg), "storage.cfg")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		volume, path, driver, format string
	}{
		{"local:100/vm-100-disk-0.raw", "/var/lib/vz/images/100/vm-100-disk-0.raw", "file", "raw"},
		{"local:100/vm-100-disk-0.qcow2", "/var/lib/vz/images/100/vm-100-disk-0.qcow2", "file", "qcow2"},
		{"local:100/vm-100-disk-0.vmdk", "/var/lib/vz/images/100/vm-100-disk-0.vmdk", "file", "vmdk"},
		{"local:100/base-100-disk-0.raw/101/vm-101-disk-0.qcow2", "/var/lib/vz/images/101/vm-101-disk-0.qcow2", "file", "qcow2"},
		{"local:iso/debian-13.0.0-amd64-netinst.iso", "/var/lib/vz/template/iso/debian-13.0.0-amd64-netinst.iso", "file", "raw"},
		{"local:iso/OpenCore.IMG", "/var/lib/vz/template/iso/OpenCore.IMG", "file", "raw"},
		{"local:import/debian-13-genericcloud-amd64.qcow2", "/var/lib/vz/import/debian-13-genericcloud-amd64.qcow2", "file", "qcow2"},
		{"vmimages:100/vm-100-disk-0.raw", "/srv/pve/vm-disks/100/vm-100-disk-0.raw", "file", "raw"},
		{"vmimages:iso/x.iso", "/srv/pve/isos/x.iso", "file", "raw"},
		{"nas:202/vm-202-disk-1.qcow2", "/mnt/pve/nas/images/202/vm-202-disk-1.qcow2", "file", "qcow2"},
		{"smb:100/vm-100-disk-0.raw", "/mnt/pve/smb/images/100/vm-100-disk-0.raw", "file", "raw"},
		{"cephfs:iso/x.iso", "/mnt/pve/cephfs/template/iso/x.iso", "file", "raw"},
		{"butter:100/vm-100-disk-0.raw", "/butter/bread/images/100/vm-100-disk-0/disk.raw", "file", "raw"},
		{"butter:100/vm-100-disk-1.qcow2", "/butter/bread/images/100/vm-100-disk-1.qcow2", "file", "qcow2"},
		{"gluster:100/vm-100-disk-0.qcow2", "gluster://10.0.0.5/gv0/images/100/vm-100-disk-0.qcow2", "gluster", "qcow2"},
		{"gluster:iso/x.iso", "/mnt/pve/gluster/template/iso/x.iso", "file", "raw"},
		{"vg-lvm:vm-100-disk-0", "/dev/veegee/vm-100-disk-0", "host_device", "raw"},
		{"vg-lvm:vm-100-disk-0.qcow2", "/dev/veegee/vm-100-disk-0.qcow2", "host_device", "qcow2"},
		{"local-lvm:vm-100-disk-0", "/dev/pve/vm-100-disk-0", "host_device", "raw"},
		{"local-lvm:base-9000-disk-0", "/dev/pve/base-9000-disk-0", "host_device", "raw"},
		{"local-zfs:vm-103-disk-1", "/dev/zvol/rpool/data/vm-103-disk-1", "host_device", "raw"},
		{"local-zfs:base-100-disk-0/vm-101-disk-0", "/dev/zvol/rpool/data/vm-101-disk-0", "host_device", "raw"},
		{"zfs-over-iscsi:vm-8006-disk-0", "iscsi://127.0.0.1/iqn.2019-10.org.test:foobar", "iscsi", "raw"},
		{"ceph:vm-100-disk-0", "vms/vm-100-disk-0", "rbd", "raw"},
		{"ceph:base-100-disk-0/vm-101-disk-0", "vms/vm-101-disk-0", "rbd", "raw"},
		{"ceph-krbd-fsid:vm-100-disk-0", "/dev/rbd-pve/fc4181a6-56eb-4f68-b452-8ba1f381ca2a/cpool/tenant1/vm-100-disk-0", "host_device", "raw"},
		{"san:0.0.1.scsi-36001405e4c3e7d9a0e9f4c2b8d6a1f20", "/dev/disk/by-id/scsi-36001405e4c3e7d9a0e9f4c2b8d6a1f20", "host_device", "raw"},
		{"san-direct:lun3", "iscsi://10.0.0.9/iqn.2003-01.org.linux-iscsi.san:sn.1234/3", "iscsi", "raw"},
		{"/dev/disk/by-id/ata-ST4000DM004_Z1", "/dev/disk/by-id/ata-ST4000DM004_Z1", "host_device", "raw"},
		{"/mnt/images/a.img", "/mnt/images/a.img", "file", "raw"},
	} {
		d := &Drive{Key: "scsi0", Bus: "scsi", Volume: c.volume, Opts: map[string]string{}}
		v, err := ResolveVolume(st, d, nil)
		if err != nil {
			t.Errorf("%s: %v", c.volume, err)
			continue
		}
		if v.Path != c.path || v.Driver != c.driver || v.Format != c.format || v.ResolvedBy != ResolvedByStorageCfg {
			t.Errorf("%s: %+v, want %s %s %s", c.volume, v, c.path, c.driver, c.format)
		}
	}
	// An absolute path keeps format= and asks isBlock.
	d := &Drive{Key: "scsi0", Volume: "/srv/x.img", Opts: map[string]string{"format": "qcow2"}}
	if v, _ := ResolveVolume(st, d, func(string) bool { return true }); v.Driver != "host_device" || v.Format != "qcow2" {
		t.Errorf("path: %+v", v)
	}
}

// Volume names a plugin refuses, storages storage.cfg lacks, and the
// volumes only the node can place.
func TestResolveVolumeRefused(t *testing.T) {
	st, _ := ParseStorages(strings.NewReader(storageCfg), "storage.cfg")
	for _, c := range []struct {
		volume, why string
		unmodelled  bool
	}{
		{"nosuch:vm-100-disk-0", `storage "nosuch" is not defined in storage.cfg`, false},
		{"local:100/disk.img", "unable to parse volume filename", false},
		{"local:100/snap-x-vm-100-disk-0.qcow2", "is a snapshot filename", false},
		{"local:100/subvol-100-disk-0.subvol", "container's subvolume", false},
		{"local:vztmpl/debian.tar.zst", "unable to parse directory volume name", false},
		{"local:import/x.ova", "archive, not a disk image", false},
		{"local-lvm:disk-0", "unable to parse lvm volume name", false},
		{"vg-lvm:base-100-disk-0", "unable to parse lvm volume name", false},
		{"local-zfs:subvol-100-disk-0", "container's subvolume", false},
		{"local-zfs:tank", "unable to parse zfs volume name", false},
		{"ceph:disk0", "unable to parse rbd volume name", false},
		{"san:lun0", "unable to parse iscsi volume name", false},
		{"san-direct:0.0.1.x", "unable to parse iscsi volume name", false},
		{"backup:backup/vm/100/2024-01-01T00:00:00Z", "Proxmox Backup Server", false},
		{"ceph-krbd:vm-100-disk-0", "fsid", true},
		{"drbdstorage:vm-100-disk-1", "type drbd, which pvediskcheck does not model", true},
		{"bb:vm-100-disk-1", "type blockbridge, which pvediskcheck does not model", true},
		{"local", "is not a volume id", false},
	} {
		d := &Drive{Key: "virtio1", Volume: c.volume, Opts: map[string]string{}}
		_, err := ResolveVolume(st, d, nil)
		var ue *UnmodelledError
		if err == nil || !strings.Contains(err.Error(), c.why) || errors.As(err, &ue) != c.unmodelled {
			t.Errorf("%s: %v, want %q (unmodelled %v)", c.volume, err, c.why, c.unmodelled)
			continue
		}
		if c.unmodelled && (ue.Volid != c.volume || ue.Storage == nil) {
			t.Errorf("%s: %+v", c.volume, ue)
		}
		if !c.unmodelled && !strings.HasPrefix(err.Error(), "virtio1: ") {
			t.Errorf("%s: %v does not name the disk", c.volume, err)
		}
	}
}

// What `pvesm path` prints, read the way qemu_blockdev_options does.
func TestVolumeFromPath(t *testing.T) {
	blk := func(p string) bool { return strings.HasPrefix(p, "/dev/drbd") }
	for _, c := range []struct {
		out, format     string
		path, drv, fmtt string
	}{
		{"/dev/drbd/by-res/vm-100-disk-1/0\n", "", "/dev/drbd/by-res/vm-100-disk-1/0", "host_device", "raw"},
		{"/mnt/truenas/images/100/vm-100-disk-0.qcow2", "", "/mnt/truenas/images/100/vm-100-disk-0.qcow2", "file", "qcow2"},
		{"/mnt/truenas/images/100/vm-100-disk-0.img", "qcow2", "/mnt/truenas/images/100/vm-100-disk-0.img", "file", "qcow2"},
		{"file:/srv/x.raw", "", "/srv/x.raw", "file", "raw"},
		{"host_device:/dev/mapper/bb-vol1", "", "/dev/mapper/bb-vol1", "host_device", "raw"},
		{"iscsi://10.0.0.9/iqn.2003-01.org.x:t/1", "", "iscsi://10.0.0.9/iqn.2003-01.org.x:t/1", "iscsi", "raw"},
		{"iser://10.0.0.9/iqn.2003-01.org.x:t/1", "", "iser://10.0.0.9/iqn.2003-01.org.x:t/1", "iscsi", "raw"},
		{"nbd:unix:/run/x.sock:exportname=drive-scsi0", "", "nbd:unix:/run/x.sock:exportname=drive-scsi0", "nbd", "raw"},
		{"rbd:vms/vm-100-disk-0:conf=/etc/pve/ceph.conf:id=admin", "", "vms/vm-100-disk-0", "rbd", "raw"},
		{"gluster://10.0.0.5/gv0/images/100/vm-100-disk-0.qcow2", "", "gluster://10.0.0.5/gv0/images/100/vm-100-disk-0.qcow2", "gluster", "qcow2"},
	} {
		d := &Drive{Key: "scsi0", Opts: map[string]string{}}
		if c.format != "" {
			d.Opts["format"] = c.format
		}
		v, err := VolumeFromPath(c.out, d, blk)
		if err != nil || v.Path != c.path || v.Driver != c.drv || v.Format != c.fmtt || v.ResolvedBy != ResolvedByPvesm {
			t.Errorf("%q: %+v %v", c.out, v, err)
		}
	}
	for _, out := range []string{"", "relative/path", "rbd:", "ftp://x/y"} {
		if v, err := VolumeFromPath(out, &Drive{Opts: map[string]string{}}, nil); err == nil {
			t.Errorf("%q: accepted as %+v", out, v)
		}
	}
}

func TestStorageHelpers(t *testing.T) {
	st, _ := ParseStorages(strings.NewReader(storageCfg), "storage.cfg")
	if vg, lv := st["local-lvm"].ThinPool(); vg != "pve" || lv != "data" {
		t.Errorf("ThinPool %s/%s", vg, lv)
	}
	if !st["local-zfs"].Bool("sparse") || st["local"].Bool("sparse") || !st["ceph-krbd"].Bool("krbd") {
		t.Error("Bool")
	}
	for id, row := range map[string]string{"local-lvm": "lvmthin", "local-zfs": "zfspool sparse 1", "ceph": "rbd", "ceph-krbd": "rbd krbd 1",
		"zfs-over-iscsi": "zfs", "local": "dir", "vg-lvm": "lvm", "butter": "btrfs"} {
		if got := st[id].Facts().String(); got != row {
			t.Errorf("%s: row %s, want %s", id, got, row)
		}
	}
	for id, file := range map[string]bool{"local": true, "nas": true, "smb": true, "butter": true, "cephfs": true, "local-lvm": false} {
		if (st[id].Facts().Layout == storagetype.LayoutFiles) != file {
			t.Errorf("%s: files %v", id, !file)
		}
	}
}

// TestIsISO (issue 26 #6): parse_volname's vtype iso, which qemu-server
// refuses to start without media= and qm set refuses without media=cdrom.
func TestIsISO(t *testing.T) {
	st, _ := ParseStorages(strings.NewReader(storageCfg), "storage.cfg")
	for volid, want := range map[string]bool{
		"local:iso/debian.iso":           true,
		"local:iso/OpenCore-v21.ISO":     true, // the extension in any case
		"nas:iso/recovery-sequoia.img":   true,
		"smb:iso/macOS.iso":              true,
		"vmimages:iso/x.iso":             true, // content-dirs moves the directory, not the name
		"local:iso/sub/x.iso":            false,
		"local:iso/x.qcow2":              false,
		"local:100/vm-100-disk-0.raw":    false,
		"local:import/x.raw":             false,
		"local-lvm:iso/x.iso":            false, // LVM's parse_volname has no iso
		"nostorage:iso/x.iso":            false,
		"/var/lib/vz/template/iso/x.iso": false, // a path is no volume id
		"none":                           false,
	} {
		if got := st.IsISO(volid); got != want {
			t.Errorf("IsISO(%q) = %v", volid, got)
		}
	}
}

// TestParseStoragesHostile: storage.cfg files as Proxmox would still read
// them (PVE::SectionConfig skips what it cannot read with a warning and
// keeps the rest), and the one answer for a file with nothing to read.
// Before, a BOM, a stray indented line after a blank one or a header with
// trailing words refused the whole file: check said config-invalid (an
// error) for every VM of the node, cache and thin exited 2.
func TestParseStoragesHostile(t *testing.T) {
	const lvm = "lvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n"
	for _, c := range []struct {
		name, text string
		ids        string // the storages read, "id=type prop=value ..." sorted
		skipped    []string
		err        string
	}{
		{"CRLF", "dir: local\r\n\tpath /var/lib/vz\r\n\r\n" + strings.ReplaceAll(lvm, "\n", "\r\n"),
			"local=dir path=/var/lib/vz; local-lvm=lvmthin thinpool=data vgname=pve", nil, ""},
		{"BOM before the first header: that section is Proxmox's \"unsupported type\"", "\ufeffdir: local\n\tpath /var/lib/vz\n\n" + lvm,
			"local-lvm=lvmthin thinpool=data vgname=pve", []string{`s.cfg line 1: section "local" skipped: no storage type is called "\ufeffdir" (Proxmox: "unsupported type")`}, ""},
		{"stray line after a blank one", lvm + "\n\tfrobnicate 7\n",
			"local-lvm=lvmthin thinpool=data vgname=pve", []string{`s.cfg line 5: "\tfrobnicate 7" is outside a section: Proxmox ignores it ("ignore config line")`}, ""},
		{"duplicate key: the first wins", lvm + "\tvgname other\n",
			"local-lvm=lvmthin thinpool=data vgname=pve", []string{`s.cfg line 4: "vgname" given twice in storage local-lvm: Proxmox keeps the first ("duplicate attribute")`}, ""},
		{"unknown keys are kept", lvm + "\tfrobnicate 7\n\tflag\n",
			"local-lvm=lvmthin flag= frobnicate=7 thinpool=data vgname=pve", nil, ""},
		{"header in upper case", "LVMThin: local-lvm\n\tthinpool data\n\tvgname pve\n", "local-lvm=lvmthin thinpool=data vgname=pve", nil, ""},
		{"header with trailing words", "dir: local extra\n\tpath /x\n\n" + lvm, "local-lvm=lvmthin thinpool=data vgname=pve",
			[]string{`s.cfg line 1: "dir: local extra" is outside a section: Proxmox ignores it ("ignore config line")`,
				`s.cfg line 2: "\tpath /x" is outside a section: Proxmox ignores it ("ignore config line")`}, ""},
		{"unicode storage ID", "lvmthin: lökal\n\tvgname pve\n\n" + lvm, "local-lvm=lvmthin thinpool=data vgname=pve",
			[]string{`s.cfg line 1: section "lökal" skipped: "lökal" is no storage ID (Proxmox: "skip section")`}, ""},
		{"one-letter storage ID", "dir: a\n\tpath /x\n\n" + lvm, "local-lvm=lvmthin thinpool=data vgname=pve",
			[]string{`s.cfg line 1: section "a" skipped: "a" is no storage ID (Proxmox: "skip section")`}, ""},
		{"a header without a blank line before it belongs to the section above", lvm + "dir: local\n\tpath /x\n",
			"local-lvm=lvmthin path=/x thinpool=data vgname=pve", []string{`s.cfg line 4: "dir: local" is no property line of storage local-lvm: Proxmox ignores it ("ignore config line")`}, ""},
		{"the same ID twice: the later section", lvm + "\nlvmthin: local-lvm\n\tthinpool other\n\tvgname pve\n",
			"local-lvm=lvmthin thinpool=other vgname=pve", nil, ""},
		{"a section without an option its type requires: Proxmox skips it", "zfs: zz\n\tpool tank\n\tportal 192.0.2.1\n\ttarget iqn.x\n\tiscsiprovider LIO\n\n" + lvm,
			"local-lvm=lvmthin thinpool=data vgname=pve", []string{`s.cfg line 1: section "zz" skipped: it lacks blocksize, which Proxmox requires of a zfs storage (Proxmox: "missing value for required option 'blocksize'"): the storage does not exist for Proxmox`}, ""},
		{"two options missing, at the end of the file", lvm + "\nlvmthin: tt\n\tcontent images\n", "local-lvm=lvmthin thinpool=data vgname=pve",
			[]string{`s.cfg line 5: section "tt" skipped: it lacks thinpool, vgname, which Proxmox requires of a lvmthin storage (Proxmox: "missing value for required option 'thinpool'"): the storage does not exist for Proxmox`}, ""},
		{"a required option given bare sets nothing", "dir: dd\n\tpath\n\n" + lvm, "local-lvm=lvmthin thinpool=data vgname=pve",
			[]string{`s.cfg line 1: section "dd" skipped: it lacks path, which Proxmox requires of a dir storage (Proxmox: "missing value for required option 'path'"): the storage does not exist for Proxmox`}, ""},
		{"the same ID twice, the later skipped: no such storage", lvm + "\nlvmthin: local-lvm\n\tvgname pve\n", "",
			[]string{`s.cfg line 5: section "local-lvm" skipped: it lacks thinpool, which Proxmox requires of a lvmthin storage (Proxmox: "missing value for required option 'thinpool'"): the storage does not exist for Proxmox`}, ""},
		{"nfs without path: Proxmox fills it in", "nfs: nn\n\tserver 192.0.2.2\n\texport /e\n", "nn=nfs export=/e server=192.0.2.2", nil, ""},
		{"a type this tool does not know: its plugin decides", "drbd: dr\n\tcontent images\n", "dr=drbd content=images", nil, ""},
		{"huge value", lvm + "\tmaxfiles " + strings.Repeat("9", 100000) + "\n", "", nil, ""},
		{"truncated last line", lvm + "\tcont", "local-lvm=lvmthin cont= thinpool=data vgname=pve", nil, ""},
		{"comments anywhere", "# head\n" + lvm + "  # inside\n", "local-lvm=lvmthin thinpool=data vgname=pve", nil, ""},
		{"nothing Proxmox can read", "this is not storage.cfg\n", "", nil, `parse error: s.cfg line 1: cannot parse "this is not storage.cfg"`},
		{"only a property", "\tpath /x\n", "", nil, `parse error: s.cfg line 1: property outside a section: "path /x"`},
		{"empty", "", "", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, skipped, err := ParseStoragesSkipped(strings.NewReader(c.text), "s.cfg")
			if c.err != "" || err != nil {
				if err == nil || err.Error() != c.err || st != nil {
					t.Fatalf("err %v, want %q", err, c.err)
				}
				return
			}
			var ids []string
			for _, id := range SortedKeys(st) {
				e := id + "=" + st[id].Type
				for _, k := range SortedKeys(st[id].Props) {
					e += " " + k + "=" + st[id].Props[k]
				}
				ids = append(ids, e)
			}
			got := strings.Join(ids, "; ")
			if c.name == "huge value" {
				got, c.ids = fmt.Sprint(len(st["local-lvm"].Props["maxfiles"])), "100000"
			}
			if got != c.ids || !reflect.DeepEqual(skipped, c.skipped) {
				t.Errorf("storages %q\nskipped %q\nwant %q\n     %q", got, skipped, c.ids, c.skipped)
			}
		})
	}
}

// Unavailable and ProxmoxRefusal decide, as pve-storage's
// storage_check_enabled does, whether a storage is active on this node.
func TestStorageUnavailable(t *testing.T) {
	st := func(props ...string) *Storage {
		s := &Storage{ID: "s", Type: "lvmthin", Props: map[string]string{}}
		for i := 0; i+1 < len(props); i += 2 {
			s.Props[props[i]] = props[i+1]
		}
		return s
	}
	for _, c := range []struct {
		s          *Storage
		here, want string
		refusal    string
	}{
		{st(), "pve1", "", ""},
		{st("nodes", "pve1,pve2"), "pve1", "", ""},
		{st("nodes", "pve1,pve2"), "pve2", "", ""},
		{st("nodes", "pve1 pve2"), "pve2", "", ""},
		{st("nodes", "pve1;pve2"), "pve2", "", ""},
		{st("nodes", "pve2"), "pve1", "available on nodes pve2 only, this is pve1", "storage 's' is not available on node 'pve1'"},
		{st("nodes", "pve10"), "pve1", "available on nodes pve10 only, this is pve1", "storage 's' is not available on node 'pve1'"},
		{st("nodes", "pve2"), "", "", ""},
		{st("disable", ""), "pve1", "disabled in storage.cfg", "storage 's' is disabled"},
		{st("disable", "1", "nodes", "pve2"), "pve1", "disabled in storage.cfg", "storage 's' is disabled"},
		{st("disable", ""), "", "disabled in storage.cfg", "storage 's' is disabled"},
		{st("disable", "0"), "pve1", "", ""},
	} {
		if got := c.s.Unavailable(c.here); got != c.want {
			t.Errorf("%v on %q: %q, want %q", c.s.Props, c.here, got, c.want)
		}
		if got := c.s.ProxmoxRefusal(c.here); got != c.refusal {
			t.Errorf("%v on %q: refusal %q, want %q", c.s.Props, c.here, got, c.refusal)
		}
	}
}

// QueuesRefusal: QEMU's own refusals of num_queues (measured on 7.2 and
// 11.1.3: 1022 starts, 1023 and a value past uint32 do not; UINT32_MAX
// is QEMU's auto and starts).
func TestQueuesRefusal(t *testing.T) {
	for v, want := range map[string]string{
		"2": "", "16": "", "1022": "",
		"1023":                 "Invalid number of queues (= 1023), must be a positive integer less than 1022.",
		"4294967294":           "Invalid number of queues (= 4294967294), must be a positive integer less than 1022.",
		"4294967295":           "", // QEMU's auto: one queue per vCPU
		"4294967296":           "Parameter 'num_queues' expects uint32_t",
		"18446744073709551615": "Parameter 'num_queues' expects uint32_t",
		"99999999999999999999": "Parameter 'num_queues' expects integer",
	} {
		if got := QueuesRefusal(v); got != want {
			t.Errorf("queues=%s: %q, want %q", v, got, want)
		}
	}
}
