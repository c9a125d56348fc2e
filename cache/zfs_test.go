package cache

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/internal/fakerun"
	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// zvolRunner answers storage/zfs's one call from storage/zfs's recorded
// zvol (pool/test), under each dataset's name with the sync given
// (fakerun.Zvols).
func zvolRunner(t *testing.T, sync map[string]string) *fakerun.Runner {
	b, err := os.ReadFile("../storage/zfs/testdata/get-sparse-512.txt")
	if err != nil {
		t.Fatal(err)
	}
	return &fakerun.Runner{Do: map[string]func([]string) ([]byte, error){"zfs": fakerun.Zvols(string(b), "pool/test", sync)}}
}

// zvols is v's disks with the ZFS layer read through r.
func zvols(v *vm.VM, r node.Runner) *disk.Set {
	set := disk.Of(v, v.Disks)
	set.Fill(context.Background(), node.Node{Runner: r}, disk.ZFS, disk.Options{})
	return set
}

// TestAttachZFS: each zvol disk gets its properties (text and JSON), the
// sync rules their lines, the other disks nothing; a zfs that fails is
// "unknown" with its reason on every zvol disk.
func TestAttachZFS(t *testing.T) {
	conf := "scsi0: local-lvm:vm-100-disk-0,size=8G\nscsi5: local-zfs:vm-100-disk-5,size=8G\nscsi12: local-zfs:vm-100-disk-12,cache=writeback,size=8G\nscsi13: local-zfs:vm-100-disk-13,size=8G\n"
	v := vmtest.New(t, 100, conf, everyType(t), nil).Load(t)
	r := zvolRunner(t, map[string]string{"rpool/data/vm-100-disk-5": "disabled", "rpool/data/vm-100-disk-12": "always", "rpool/data/vm-100-disk-13": "standard"})
	view := Build(zvols(v, r))
	if n := len(r.Calls()); n != 1 {
		t.Errorf("%d zfs calls, want 1", n)
	}
	byID := map[string]Disk{}
	for _, d := range view.Disks {
		byID[d.ID] = d
	}
	if d := byID["scsi0"]; d.ZFS != nil || strings.Contains(texts(d.Lines), "zvol") {
		t.Errorf("scsi0 (lvm-thin): %+v %q", d.ZFS, texts(d.Lines))
	}
	for id, want := range map[string][]string{
		"scsi5":  {"zvol rpool/data/vm-100-disk-5: volblocksize 512 B, sync disabled, compression on", "sync=disabled: ZFS completes the guest's flushes without writing anything", "(fix: zfs set sync=standard rpool/data/vm-100-disk-5)"},
		"scsi12": {"zvol rpool/data/vm-100-disk-12: volblocksize 512 B, sync always", "sync=always: ZFS commits every write to its intent log"},
		"scsi13": {"zvol rpool/data/vm-100-disk-13: volblocksize 512 B, sync standard"},
	} {
		d := byID[id]
		if d.ZFS == nil || d.ZFS.Dataset != "rpool/data/"+v.Disk(id).Drive.VolName() {
			t.Errorf("%s: %+v", id, d.ZFS)
		}
		for _, w := range want {
			if !strings.Contains(texts(d.Lines), w) {
				t.Errorf("%s: %q lacks %q", id, texts(d.Lines), w)
			}
		}
	}
	if l := texts(byID["scsi13"].Lines); strings.Contains(l, "sync=") {
		t.Errorf("scsi13 standard: no rule line: %q", l)
	}
	b, _ := json.Marshal(byID["scsi5"])
	if !strings.Contains(string(b), `"zfs":{"dataset":"rpool/data/vm-100-disk-5","volblocksize_bytes":512,"sync":"disabled","compression":"on","primarycache":"all","logbias":"latency","refreservation_bytes":0,"volsize_bytes":5497558138880}`) {
		t.Errorf("json %s", b)
	}
	if b, _ := json.Marshal(byID["scsi0"]); strings.Contains(string(b), `"zfs"`) {
		t.Errorf("scsi0 json has zfs: %s", b)
	}

	r = &fakerun.Runner{Err: map[string]error{"zfs": errors.New(`exec: "zfs": executable file not found in $PATH`)}}
	view = Build(zvols(v, r))
	for _, d := range view.Disks {
		if d.ID == "scsi0" {
			continue
		}
		if d.ZFS == nil || !strings.Contains(d.ZFS.Unknown, "executable file not found") || d.ZFS.Sync != "" || !strings.Contains(texts(d.Lines), "properties unknown: `zfs get -Hp") || strings.Contains(texts(d.Lines), "sync=") {
			t.Errorf("%s: %+v %q", d.ID, d.ZFS, texts(d.Lines))
		}
	}
}
