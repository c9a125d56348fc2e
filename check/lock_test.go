package check

import (
	"reflect"
	"strings"
	"testing"
)

// TestLocked (issue 26 #7): a locked config says by what; `qm unlock`
// comes before the fixes only where no task holds the lock. The task list
// is /var/log/pve/tasks/active in RESTEnvironment's format; the stat line
// is this machine's /proc/PID/stat for a process (pid 21854, started at
// 148740 = 0x24504), its name changed to a task's title.
func TestLocked(t *testing.T) {
	const (
		stat = "21854 (task UPID:pve1:0000555E:00024504:6740A1B2:qmdelsnapshot:105:root@pam:) S 21851 21851 10964 0 -1 4194304 127 0 0 0 0 0 0 0 20 0 1 0 148740 3133440 386 18446744073709551615 94439117492224 94439117512105 140723672593088 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
		task = "UPID:pve1:0000555E:00024504:6740A1B2:qmdelsnapshot:100:root@pam:"
		conf = "ostype: l26\nscsihw: virtio-scsi-single\nscsi0: local-lvm:vm-100-disk-0,cache=unsafe,discard=on\n"
	)
	for _, c := range []struct {
		name, lock, active string
		noList             bool
		want               []string
		lockMsg, lockFix   string
		diskFix            string
	}{
		{name: "interrupted snapshot delete: stale", lock: "snapshot-delete", active: task + " 6740A1C0 unexpected status\n",
			want:    []string{"error cache-unsafe scsi0", "error locked -"},
			lockMsg: `the config is locked (lock: snapshot-delete) and no qmdelsnapshot task runs on this node: the lock is stale, left by an interrupted snapshot-delete; Proxmox refuses qm set and qm start with "VM is locked (snapshot-delete)"`,
			lockFix: "qm unlock 100", diskFix: "qm unlock 100, then qm set 100 --scsi0 local-lvm:vm-100-disk-0,discard=on"},
		{name: "the snapshot delete runs: no unlock", lock: "snapshot-delete", active: task + "\n",
			want:    []string{"error cache-unsafe scsi0", "info locked -"},
			lockMsg: "the config is locked (lock: snapshot-delete) by task " + task + ", which runs", lockFix: "",
			diskFix: "once task " + task + " has ended: qm set 100 --scsi0 local-lvm:vm-100-disk-0,discard=on"},
		{name: "a backup lock on a copied tree: unknown", lock: "backup", noList: true,
			want:    []string{"error cache-unsafe scsi0", "error locked -"},
			lockMsg: "whether a vzdump task still holds it is not known here", lockFix: "if no vzdump task runs for VM 100: qm unlock 100",
			diskFix: "if no vzdump task runs for VM 100: qm unlock 100, then qm set 100 --scsi0 local-lvm:vm-100-disk-0,discard=on"},
		{name: "hibernated", lock: "suspended", active: "",
			want:    []string{"error cache-unsafe scsi0", "info locked -"},
			lockMsg: "the VM is hibernated (lock: suspended)", lockFix: "qm start 100",
			diskFix: "qm start 100 (resumes it), then qm set 100 --scsi0 local-lvm:vm-100-disk-0,discard=on"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tn := newNode(t)
			tn.conf(100, "lock: "+c.lock+"\n"+conf)
			if !c.noList {
				tn.write("var/log/pve/tasks/active", c.active)
			}
			tn.write("proc/21854/stat", stat)
			v := tn.check(100, quietRunner(), Options{})
			if got := summary(v); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("findings %q, want %q", got, c.want)
			}
			l, d := find(v, CodeLocked, ""), find(v, CodeCacheUnsafe, "scsi0")
			if !strings.Contains(l.Message, c.lockMsg) || l.Fix != c.lockFix || l.Command != nil {
				t.Errorf("lock finding %+v", l)
			}
			// Refused while locked: no longer the one command.
			if d.Fix != c.diskFix || d.Command != nil {
				t.Errorf("disk fix %q %q, want %q", d.Fix, d.Command, c.diskFix)
			}
		})
	}
	// Not locked: no finding, the fix is the command.
	tn := newNode(t)
	tn.conf(100, conf)
	v := tn.check(100, quietRunner(), Options{})
	if got := summary(v); !reflect.DeepEqual(got, []string{"error cache-unsafe scsi0"}) || v.Findings[0].Command == nil {
		t.Errorf("%+v", v.Findings)
	}
}
