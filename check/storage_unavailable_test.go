package check

import (
	"reflect"
	"strings"
	"testing"
)

// A volume on a storage disabled or restricted to other nodes stops the
// next start (pve-storage storage_check_enabled from activate_volumes):
// storage-unavailable on every drive kind with a volume, with pve-storage's
// own message; nothing for a storage this node may use; a note, not a
// guess, where this node's name is unknown.
func TestStorageUnavailable(t *testing.T) {
	const extra = `
lvmthin: far
	vgname pve
	thinpool data
	content images
	nodes pve2,pve3

lvmthin: near
	vgname pve
	thinpool data
	content images
	nodes pve2,pve1

lvmthin: off
	vgname pve
	thinpool data
	content images
	disable

dir: isos
	path /mnt/isos
	content iso
	nodes pve2
`
	for _, c := range []struct {
		name, conf, host string
		want             []string
		fix, msg         string // of the first finding
		note             string
	}{
		{name: "a disk on a storage of other nodes", host: "pve1", conf: "scsi0: far:vm-100-disk-0,discard=on\n",
			want: []string{"error storage-unavailable scsi0"},
			fix:  "pvesm set far --nodes pve2,pve3,pve1 (when this node reaches the storage), or run the VM on a node of pve2,pve3 (qm disk move cannot help: it activates the volume on this node first and fails as the start does)",
			msg:  `storage far is available on nodes pve2,pve3 only, this is pve1: the next start fails with "storage 'far' is not available on node 'pve1'"`},
		{name: "a disk on a storage this node is listed for", host: "pve1", conf: "scsi0: near:vm-100-disk-0,discard=on\n", want: []string{}},
		{name: "a disk on a storage without nodes", host: "pve1", conf: "scsi0: local-lvm:vm-100-disk-0,discard=on\n", want: []string{}},
		{name: "a disabled storage, whatever the node", host: "pve2", conf: "scsi0: off:vm-100-disk-0,discard=on\n",
			want: []string{"error storage-unavailable scsi0"}, fix: "pvesm set off --disable 0 (qm disk move cannot help: it activates the volume first and fails as the start does)",
			msg: `storage off is disabled in storage.cfg: the next start fails with "storage 'off' is disabled"`},
		{name: "EFI vars and TPM state are activated too", host: "pve1", conf: "bios: ovmf\nefidisk0: off:vm-100-disk-1,efitype=4m,size=4M\ntpmstate0: far:vm-100-disk-2,size=4M,version=v2.0\n",
			want: []string{"error storage-unavailable efidisk0", "error storage-unavailable tpmstate0"}, fix: "pvesm set off --disable 0 (qm disk move cannot help: it activates the volume first and fails as the start does)"},
		{name: "an ISO on a storage of another node", host: "pve1", conf: "ostype: l26\nide2: isos:iso/debian.iso,media=cdrom\n",
			want: []string{"error storage-unavailable ide2"}},
		{name: "an empty CD-ROM drive has no storage", host: "pve1", conf: "ide2: none,media=cdrom\n", want: []string{}},
		{name: "this node's name unknown: said, not guessed", conf: "scsi0: far:vm-100-disk-0,discard=on\n", want: []string{},
			note: "scsi0: storage far is available on nodes pve2,pve3 only; this node's name is unknown"},
		{name: "this node's name unknown, disabled is still known", conf: "scsi0: off:vm-100-disk-0,discard=on\n",
			want: []string{"error storage-unavailable scsi0"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tn := newNode(t)
			tn.write("etc/pve/storage.cfg", storageCfg+extra)
			if c.host != "" {
				tn.write("etc/hostname", c.host+"\n")
			}
			tn.conf(100, c.conf)
			v := tn.check(100, quietRunner(), Options{})
			got := []string{}
			var first *Finding
			for i, f := range v.Findings {
				if f.Code == CodeStorageUnavailable {
					got = append(got, "error storage-unavailable "+f.Disk)
					if first == nil {
						first = &v.Findings[i]
					}
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got %q, want %q (%+v)", got, c.want, v.Findings)
			}
			if first != nil && (first.Severity != Error || first.Command != nil || (c.fix != "" && first.Fix != c.fix) || !strings.Contains(first.Message, c.msg)) {
				t.Errorf("finding %+v\nwant fix %q, message with %q", *first, c.fix, c.msg)
			}
			noted := false
			for _, n := range v.Notes {
				if strings.Contains(n, "node's name is unknown") {
					noted = c.note != "" && strings.Contains(n, c.note)
					if !noted {
						t.Errorf("unexpected note %q", n)
					}
				}
			}
			if c.note != "" && !noted {
				t.Errorf("notes %q lack %q", v.Notes, c.note)
			}
		})
	}
}
