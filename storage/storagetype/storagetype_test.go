package storagetype

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/internal/pveoracle"
)

// proxmoxTypes are the types pve-storage 9 registers (Storage.pm:
// DirPlugin ... ESXiPlugin), PVE 8's glusterfs, and the variants a flag of
// storage.cfg makes of one, each with the flag.
var proxmoxTypes = []struct{ name, variant string }{
	{"dir", ""}, {"nfs", ""}, {"cifs", ""}, {"cephfs", ""}, {"glusterfs", ""},
	{"btrfs", ""}, {"btrfs", "nocow"},
	{"lvm", ""}, {"lvm", "snapshot-as-volume-chain"}, {"lvmthin", ""},
	{"zfspool", ""}, {"zfspool", "sparse"}, {"zfs", ""},
	{"rbd", ""}, {"rbd", "krbd"},
	{"iscsi", ""}, {"iscsidirect", ""},
	{"pbs", ""}, {"esxi", ""},
	{"plugin", ""},
}

// TestTable fails for a type of Proxmox's list without its row, a row
// twice, and a row that leaves a fact at its zero value ("not set"): every
// enum's zero is unset, and a reason is there exactly where its fact needs
// one.
func TestTable(t *testing.T) {
	seen := map[string]bool{}
	for i := range Table {
		r := &Table[i]
		if seen[r.String()] {
			t.Errorf("%s: two rows", r)
		}
		seen[r.String()] = true
		v := reflect.ValueOf(*r)
		for f := 0; f < v.NumField(); f++ {
			name := v.Type().Field(f).Name
			switch name {
			case "Variant", "Unmeasured", "IOUringWhy", "Required":
				continue // optional, checked below (Required: TestRequiredAsProxmox)
			}
			if v.Field(f).IsZero() {
				t.Errorf("%s: fact %s is not set", r, name)
			}
		}
		if (r.Alloc == AllocThick) != (r.Unmeasured != "") {
			t.Errorf("%s: Alloc %d with Unmeasured %q: a thick type says why, no other does", r, r.Alloc, r.Unmeasured)
		}
		if (r.IOUring != IOUringDefault) != (r.IOUringWhy != "") {
			t.Errorf("%s: IOUring %d with reason %q: qemu-server's reason goes with an avoided io_uring only", r, r.IOUring, r.IOUringWhy)
		}
	}
	for _, p := range proxmoxTypes {
		k := p.name
		if p.variant != "" {
			k += " " + p.variant + " 1"
		}
		if !seen[k] {
			t.Errorf("Proxmox's %s has no row", k)
		}
		delete(seen, k)
	}
	for k := range seen {
		t.Errorf("row %s is not in Proxmox's list (add it there, with where it comes from)", k)
	}
}

// TestConsistent ties the facts that follow from one another: a fact that
// contradicts another is a row's mistake.
func TestConsistent(t *testing.T) {
	for i := range Table {
		r := &Table[i]
		wantDiscard := map[Provision]Discard{Thin: DiscardReturns, Thick: DiscardNever, Reserved: DiscardNever, PerImage: DiscardPerImage,
			ProvisionNoDisks: DiscardNoDisks, ProvisionNotModelled: DiscardNotModelled}[r.Provision]
		if r.Discard != wantDiscard {
			t.Errorf("%s: provision %d with discard %d", r, r.Provision, r.Discard)
		}
		files := r.Volumes == VolDir || r.Volumes == VolMounted || r.Volumes == VolGluster || r.Volumes == VolBtrfs
		if files != (r.Layout == LayoutFiles) || files != (r.Writes == File) || files != (r.Alloc == AllocFile) {
			t.Errorf("%s: volumes %d, layout %d, writes %s, alloc %d disagree on files", r, r.Volumes, r.Layout, r.Writes, r.Alloc)
		}
		if (r.Layout == LayoutProtocol) != (r.Writes == Librbd || r.Writes == Libiscsi) {
			t.Errorf("%s: layout %d with writes %s", r, r.Layout, r.Writes)
		}
		if (r.Evidence == EvidenceLibrbd) != (r.Writes == Librbd) || (r.Evidence == EvidenceRemote) != (r.Writes == Libiscsi) {
			t.Errorf("%s: evidence %d with writes %s", r, r.Evidence, r.Writes)
		}
		if (r.Pool == PoolLVMThin) != (r.Alloc == AllocLvs) || (r.Pool == PoolZFS) != (r.Alloc == AllocZFS) {
			t.Errorf("%s: pool %d with alloc %d", r, r.Pool, r.Alloc)
		}
	}
}

func TestOf(t *testing.T) {
	flags := func(set ...string) func(string) bool {
		return func(k string) bool {
			for _, s := range set {
				if s == k {
					return true
				}
			}
			return false
		}
	}
	for _, c := range []struct {
		name  string
		flags []string
		want  string
	}{
		{"lvm", nil, "lvm"},
		{"lvm", []string{"snapshot-as-volume-chain"}, "lvm snapshot-as-volume-chain 1"},
		{"lvm", []string{"krbd", "sparse", "nocow"}, "lvm"}, // another type's flag picks nothing
		{"rbd", []string{"krbd"}, "rbd krbd 1"},
		{"rbd", []string{"sparse"}, "rbd"},
		{"zfspool", []string{"sparse"}, "zfspool sparse 1"},
		{"zfspool", nil, "zfspool"},
		{"btrfs", []string{"nocow"}, "btrfs nocow 1"},
		{"btrfs", nil, "btrfs"},
		{"dir", []string{"snapshot-as-volume-chain"}, "dir"},
		{"drbd", nil, "plugin"},
		{"", nil, "plugin"},
	} {
		if got := Of(c.name, flags(c.flags...)).String(); got != c.want {
			t.Errorf("Of(%s, %v) = %s, want %s", c.name, c.flags, got, c.want)
		}
	}
	if Of("rbd", nil).String() != "rbd" {
		t.Error("a nil flag reader picks the plain row")
	}
}

// TestIOUringHazard follows Drive.pm storage_allows_io_uring_default case by
// case, including the storages next to each hazard that have none.
func TestIOUringHazard(t *testing.T) {
	krbd := func(k string) bool { return k == "krbd" }
	for _, c := range []struct {
		typ    *Type
		direct bool
		want   string
	}{
		{Of("rbd", krbd), false, "io_uring with cache mode writeback or writethrough on krbd will hang"},
		{Of("rbd", krbd), true, ""},
		{Of("rbd", nil), false, ""},
		{Of("lvm", nil), true, "io_uring with cache mode writeback or writethrough on LVM will hang, without cache only sometimes"},
		{Of("lvm", nil), false, "io_uring with cache mode writeback or writethrough on LVM will hang, without cache only sometimes"},
		{Of("lvm", func(k string) bool { return k == "snapshot-as-volume-chain" }), true, "io_uring with cache mode writeback or writethrough on LVM will hang, without cache only sometimes"},
		{Of("lvmthin", nil), false, ""},
		{Of("cifs", nil), true, "io_uring causes problems when used with CIFS since kernel 5.15"},
		{Of("nfs", nil), true, ""},
		{Of("dir", nil), false, ""},
		{Of("drbd", nil), false, ""},
	} {
		if got := c.typ.IOUringHazard(c.direct); got != c.want {
			t.Errorf("%s direct=%v: %q, want %q", c.typ, c.direct, got, c.want)
		}
	}
}

func TestReturnsSpace(t *testing.T) {
	yes, no := func() bool { return true }, func() bool { return false }
	for _, c := range []struct {
		typ      *Type
		perImage func() bool
		want     bool
	}{
		{Of("lvmthin", nil), no, true},
		{Of("lvm", nil), yes, false},
		{Of("dir", nil), yes, true},
		{Of("dir", nil), no, false},
		{Of("pbs", nil), yes, false},
		{Of("drbd", nil), yes, false},
	} {
		if got := c.typ.ReturnsSpace(c.perImage); got != c.want {
			t.Errorf("%s: %v, want %v", c.typ, got, c.want)
		}
	}
}

// TestVolumeChainRow: Proxmox 9's qcow2 volume chains on thick LVM
// (LVMPlugin.pm with snapshot-as-volume-chain 1) are thick LVM for
// everything but what the allocation says: LVs allocated in full, no
// space back from a discard, writes through a block device, no io_uring.
func TestVolumeChainRow(t *testing.T) {
	chain := Of("lvm", func(k string) bool { return k == "snapshot-as-volume-chain" })
	plain := Of("lvm", nil)
	if chain == plain || chain.Variant != "snapshot-as-volume-chain" {
		t.Fatalf("the flag picks %s", chain)
	}
	if chain.Volumes != VolLVM || chain.Layout != LayoutBlock || chain.Provision != Thick || chain.Discard != DiscardNever ||
		chain.Writes != Block || chain.IOUring != IOUringAvoided || chain.Direct != DirectDefault || chain.Pool != PoolNone || chain.Alloc != AllocThick {
		t.Errorf("%+v", *chain)
	}
	if chain.ReturnsSpace(func() bool { return true }) {
		t.Error("a qcow2 volume on a thick LV returns space")
	}
	for _, w := range []string{"qcow2 volume chains", "each snapshot is an LV allocated in full", "discard-no-unref"} {
		if !strings.Contains(chain.Unmeasured, w) {
			t.Errorf("Unmeasured %q lacks %q", chain.Unmeasured, w)
		}
	}
	if strings.Contains(plain.Unmeasured, "qcow2") {
		t.Errorf("plain lvm: %q", plain.Unmeasured)
	}
}

// TestRequiredAsProxmox: each row's Required are the options pve-storage's
// own check_config drops a section for (../shared/pve-oracle), row by row
// for every type it registers, its variants the same as the plain type;
// every type it registers has a row. glusterfs (PVE 8, not in the
// oracle's pve-storage 9) and plugin are not asked.
func TestRequiredAsProxmox(t *testing.T) {
	res, err := pveoracle.For(t).Storages(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	asked := map[string]bool{}
	for i := range Table {
		r := &Table[i]
		if !slices.IsSorted(r.Required) {
			t.Errorf("%s: Required %q not sorted", r, r.Required)
		}
		want, ok := res.Required[r.Name]
		if !ok {
			if r.Name != "glusterfs" && r.Name != "plugin" {
				t.Errorf("%s: pve-storage registers no such type", r)
			}
			continue
		}
		asked[r.Name] = true
		if !slices.Equal(r.Required, want) && (len(r.Required) != 0 || len(want) != 0) {
			t.Errorf("%s: Required %q, Proxmox requires %q", r, r.Required, want)
		}
	}
	for typ := range res.Required {
		if !asked[typ] {
			t.Errorf("pve-storage's %s has no row", typ)
		}
	}
	t.Logf("%d types of pve-storage, each with its row: %v", len(asked), res.Required)
}
