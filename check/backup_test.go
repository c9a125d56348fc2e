package check

import (
	"reflect"
	"strings"
	"testing"
)

// check says which backup jobs back the VM up and with what fleecing, and
// warns for a fleecing storage against Proxmox's advice; without jobs.cfg
// there is nothing to say.
func TestBackupFleecing(t *testing.T) {
	const conf = "ostype: l26\nscsihw: virtio-scsi-single\nscsi0: local-lvm:vm-100-disk-0,discard=on,iothread=1\n"
	tn := newNode(t)
	tn.conf(100, conf)
	v := tn.check(100, quietRunner(), Options{})
	if len(v.Backups) != 0 || len(summary(v)) != 0 {
		t.Fatalf("without jobs.cfg: backups %+v, findings %q", v.Backups, summary(v))
	}
	tn.write("etc/vzdump.conf", "fleecing: enabled=1,storage=local\n")
	tn.write("etc/pve/jobs.cfg", "vzdump: backup-nightly\n\tschedule 21:00\n\tall 1\n\tstorage pbs\n\nvzdump: backup-own\n\tvmid 100\n\tfleecing enabled=1,storage=local-lvm\n\nvzdump: backup-off\n\tvmid 100\n\tfleecing 0\n")
	v = tn.check(100, quietRunner(), Options{})
	got := map[string]string{}
	for _, b := range v.Backups {
		got[b.Job] = b.FleecingFrom + " " + b.FleecingStorage
		if (b.Job == "backup-off") == b.Fleecing {
			t.Errorf("%s fleecing %v", b.Job, b.Fleecing)
		}
	}
	want := map[string]string{"backup-nightly": "vzdump.conf local", "backup-own": "job local-lvm", "backup-off": "job "}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("backups %v, want %v", got, want)
	}
	// local is a dir storage: raw files there are sparse, so thin and
	// discard-capable per image: no warning; a storage missing from
	// storage.cfg is.
	if s := summary(v); len(s) != 0 {
		t.Errorf("findings %q", s)
	}
	tn.write("etc/vzdump.conf", "fleecing: enabled=1,storage=fast-nvme\n")
	v = tn.check(100, quietRunner(), Options{})
	if s := summary(v); !reflect.DeepEqual(s, []string{"warning fleecing-storage -"}) {
		t.Fatalf("findings %q", s)
	}
	f := find(v, CodeFleecingStorage, "")
	if !strings.Contains(f.Message, "backup-nightly") || !strings.Contains(f.Message, "fast-nvme is not in storage.cfg") {
		t.Errorf("finding %+v", f)
	}
	// A thick LVM storage: neither thin nor does a discard return space.
	tn.write("etc/vzdump.conf", "fleecing: enabled=1,storage=thick\n")
	v = tn.check(100, quietRunner(), Options{})
	if f := find(v, CodeFleecingStorage, ""); !strings.Contains(f.Message, "storage thick is neither thin nor") || !strings.HasPrefix(f.Fix, "pvesh set /cluster/backup/backup-nightly --fleecing") {
		t.Errorf("thick: %+v", f)
	}
}
