package check

import (
	"reflect"
	"strings"
	"testing"
)

// fleecing-leftover: images the config records while no backup holds the
// VM are a warning naming each image, its storage and the fix; under lock:
// backup (a backup runs, or a stale lock the locked rule reports) and
// without the section, nothing.
func TestFleecingLeftover(t *testing.T) {
	const main = "ostype: l26\nscsihw: virtio-scsi-single\nscsi0: local-lvm:vm-100-disk-0,discard=on,iothread=1\n"
	const section = "\n[special:fleecing]\nfleecing-images: local-lvm:vm-100-fleece-0,local-lvm:vm-100-fleece-1\n"
	for _, c := range []struct {
		name, conf string
		want       []string
	}{
		{"recorded, no backup", main + section, []string{"warning fleecing-leftover -"}},
		{"a backup holds the VM (stopped: the locked rule speaks)", "lock: backup\n" + main + section, []string{"error locked -"}},
		{"nothing recorded", main, []string{}},
		{"an empty section", main + "\n[special:fleecing]\n", []string{}},
	} {
		tn := newNode(t)
		tn.conf(100, c.conf)
		v := tn.check(100, quietRunner(), Options{})
		if got := summary(v); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	tn := newNode(t)
	tn.conf(100, main+section)
	f := find(tn.check(100, quietRunner(), Options{}), CodeFleecingLeftover, "")
	if f == nil || !strings.Contains(f.Message, "fleecing images (local-lvm:vm-100-fleece-0, local-lvm:vm-100-fleece-1)") ||
		!strings.Contains(f.Message, "on storage local-lvm (lvmthin) until the next backup of VM 100") ||
		!strings.Contains(f.Fix, "pvesm free local-lvm:vm-100-fleece-0; pvesm free local-lvm:vm-100-fleece-1") {
		t.Errorf("%+v", f)
	}
	// Images on two storages, one of them not in storage.cfg.
	tn = newNode(t)
	tn.conf(100, main+"\n[special:fleecing]\nfleecing-images: local-lvm:vm-100-fleece-0 gone:vm-100-fleece-1\n")
	if f := find(tn.check(100, quietRunner(), Options{}), CodeFleecingLeftover, ""); f == nil || !strings.Contains(f.Message, "on storage gone and storage local-lvm (lvmthin) until") {
		t.Errorf("two storages: %+v", f)
	}
}
