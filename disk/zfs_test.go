package disk

import (
	"context"
	"os"
	"reflect"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/internal/fakerun"
	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/storage/zfs"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// Two zfspools (one thick, one sparse), a zfspool line without its pool
// (storage.cfg requires one: pvesm refuses it) and an lvm-thin pool.
const vmStorages = `zfspool: local-zfs
	pool rpool/data
	sparse 1

zfspool: tank
	pool tank/vms

zfspool: nopool
	content images

lvmthin: local-lvm
	thinpool data
	vgname pve
`

// Every drive kind a zfspool can hold and every way a volume is not a zvol
// of a pool: only disks and the EFI vars disk are zvols read here.
const vmConf = `efidisk0: local-zfs:vm-100-disk-0,efitype=4m,size=1M
tpmstate0: local-zfs:vm-100-disk-1,size=4M,version=v2.0
scsi0: local-zfs:vm-100-disk-2,size=8G
scsi1: tank:vm-100-disk-3,size=8G
scsi2: local-lvm:vm-100-disk-4,size=8G
scsi3: nopool:vm-100-disk-5,size=8G
scsi4: gone:vm-100-disk-6,size=8G
scsi5: /dev/disk/by-id/ata-WDC_WD40EFRX-68N32N0_WD-WCC7K1234567,size=4T
ide2: none,media=cdrom
ide0: local-zfs:vm-100-cloudinit,media=cdrom
unused0: local-zfs:vm-100-disk-9

[PENDING]
scsi6: local-zfs:vm-100-disk-7,size=8G
`

func TestDataset(t *testing.T) {
	v := vmtest.New(t, 100, vmConf, vmStorages, nil).Load(t)
	want := map[string]string{
		"efidisk0":  "rpool/data/vm-100-disk-0",
		"tpmstate0": "", // the TPM state is no block device of the guest's
		"scsi0":     "rpool/data/vm-100-disk-2",
		"scsi1":     "tank/vms/vm-100-disk-3",
		"scsi2":     "",                         // lvm-thin
		"scsi3":     "",                         // a zfspool without a pool names no dataset
		"scsi4":     "",                         // a storage storage.cfg does not have
		"scsi5":     "",                         // a path
		"ide2":      "",                         // an empty CD-ROM
		"ide0":      "",                         // a CD-ROM (cloud-init): not a disk's zvol
		"scsi6":     "rpool/data/vm-100-disk-7", // only [PENDING] adds it
	}
	got := map[string]string{}
	for _, d := range Resolve(context.Background(), node.Node{}, v, v.Disks, 0, Options{}).Disks {
		got[d.ID] = d.Dataset
	}
	for id, w := range want {
		if g, ok := got[id]; !ok || g != w {
			t.Errorf("%s: dataset %q (listed %v), want %q", id, g, ok, w)
		}
	}
	for id := range got {
		if _, ok := want[id]; !ok {
			t.Errorf("%s: unexpected disk (dataset %q)", id, got[id])
		}
	}
}

// zvols is the ZFS layer of v's disks read with r, by disk id (disks that
// are no zvol are not in it).
func zvols(v *vm.VM, r node.Runner) map[string]*zfs.Zvol {
	out := map[string]*zfs.Zvol{}
	for _, d := range Resolve(context.Background(), node.Node{Runner: r}, v, v.Disks, ZFS, Options{}).Disks {
		if d.Dataset != "" {
			out[d.ID] = d.ZFS
		}
	}
	return out
}

// TestZFSLayer: one zfs get for every zvol of the VM, each disk given its
// own.
func TestZFSLayer(t *testing.T) {
	v := vmtest.New(t, 100, vmConf, vmStorages, nil).Load(t)
	b, err := os.ReadFile("../storage/zfs/testdata/get-sparse-512.txt")
	if err != nil {
		t.Fatal(err)
	}
	r := &fakerun.Runner{Do: map[string]func([]string) ([]byte, error){"zfs": fakerun.Zvols(string(b), "pool/test", map[string]string{"tank/vms/vm-100-disk-3": "disabled"})}}
	got := zvols(v, r)
	if calls := r.Calls(); len(calls) != 1 || calls[0] != "zfs get -Hp -o name,property,value volblocksize,sync,compression,primarycache,logbias,refreservation,volsize rpool/data/vm-100-disk-2 tank/vms/vm-100-disk-3 rpool/data/vm-100-disk-7 rpool/data/vm-100-disk-0" {
		t.Errorf("calls %q, want one zfs get of the four zvols in the order of v.Disks", calls)
	}
	ids := map[string]string{}
	for id, z := range got {
		ids[id] = z.Dataset
		if z.Unknown != "" || z.VolblocksizeBytes == nil || *z.VolblocksizeBytes != 512 {
			t.Errorf("%s: %+v", id, z)
		}
	}
	if want := map[string]string{"efidisk0": "rpool/data/vm-100-disk-0", "scsi0": "rpool/data/vm-100-disk-2", "scsi1": "tank/vms/vm-100-disk-3", "scsi6": "rpool/data/vm-100-disk-7"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("disks %v, want %v", ids, want)
	}
	if !got["scsi1"].FlushesDropped() || got["scsi0"].FlushesDropped() {
		t.Errorf("sync: scsi1 %q scsi0 %q", got["scsi1"].Sync, got["scsi0"].Sync)
	}

	// Two disks on one zvol (a config edited by hand) ask for it once and
	// both get it.
	v = vmtest.New(t, 100, "scsi0: local-zfs:vm-100-disk-2,size=8G\nvirtio0: local-zfs:vm-100-disk-2,size=8G\n", vmStorages, nil).Load(t)
	r = &fakerun.Runner{Do: map[string]func([]string) ([]byte, error){"zfs": fakerun.Zvols(string(b), "pool/test", nil)}}
	got = zvols(v, r)
	if calls := r.Calls(); len(calls) != 1 || calls[0] != "zfs get -Hp -o name,property,value volblocksize,sync,compression,primarycache,logbias,refreservation,volsize rpool/data/vm-100-disk-2" {
		t.Errorf("calls %q, want the shared zvol once", calls)
	}
	if len(got) != 2 || got["scsi0"] == nil || got["scsi0"] != got["virtio0"] {
		t.Errorf("got %v, want both disks with the one zvol", got)
	}

	// No zvol: nothing runs, nothing is returned.
	v = vmtest.New(t, 100, "scsi0: local-lvm:vm-100-disk-4,size=8G\n", vmStorages, nil).Load(t)
	r = &fakerun.Runner{}
	if got := zvols(v, r); len(got) != 0 || len(r.Calls()) != 0 {
		t.Errorf("got %v, calls %q; want nothing", got, r.Calls())
	}
}
