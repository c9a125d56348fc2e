package vm

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/node"
)

// statLine is /proc/PID/stat as this machine printed it for `cat` (pid
// 21854, starttime 148740 = 0x24504), with the name changed to one with a
// blank and a parenthesis, as a task's process title can have.
const statLine = "21854 (task worker) x) R 21851 21851 10964 0 -1 4194304 127 0 0 0 0 0 0 0 20 0 1 0 148740 3133440 386 18446744073709551615 94439117492224 94439117512105 140723672593088 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"

// TestLock (issue 26 #7): the config's lock, and whether a running task of
// the node holds it. The task list is /var/log/pve/tasks/active as
// RESTEnvironment active_workers writes it: a running task's UPID alone, a
// finished one's followed by its end time and status; a task runs when its
// pid is alive with its start time (ProcFSTools check_process_running).
func TestLock(t *testing.T) {
	const (
		run     = "UPID:pve1:0000555E:00024504:6740A1B2:qmdelsnapshot:105:root@pam:"
		reused  = "UPID:pve1:0000555E:00024505:6740A1B2:qmdelsnapshot:105:root@pam:" // pid alive, other start: reused
		other   = "UPID:pve1:0000555E:00024504:6740A1B2:qmdelsnapshot:106:root@pam:"
		done    = "UPID:pve1:0000555E:00024504:6740A1B2:qmdelsnapshot:105:root@pam: 6740A1C0 OK"
		backup  = "UPID:pve1:0000555E:00024504:6740A1B2:vzdump::root@pam:" // a job of several VMs: no id
		cloneOf = "UPID:pve1:0000555E:00024504:6740A1B2:qmclone:100:root@pam:"
	)
	for _, c := range []struct {
		name, lock, active string
		noList             bool
		task               string
		stale              bool
	}{
		{"snapshot-delete, its task runs", "snapshot-delete", run + "\n", false, run, false},
		{"snapshot-delete, interrupted: stale", "snapshot-delete", done + "\n", false, "", true},
		{"a reused pid is no task", "snapshot-delete", reused + "\n", false, "", true},
		{"another VM's task", "snapshot-delete", other + "\n", false, "", true},
		{"another kind's task", "migrate", run + "\n", false, "", true},
		{"a backup job of several VMs", "backup", done + "\n" + backup + "\n", false, backup, false},
		{"a clone's task is the source VM's", "clone", cloneOf + "\n", false, cloneOf, false},
		{"suspended is a hibernated VM, never stale", "suspended", "", false, "", false},
		{"no task list (a copied tree): unknown", "snapshot-delete", "", true, "", false},
		{"empty task list", "backup", "", false, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := writeNode(t, 105, "lock: "+c.lock+"\nscsi0: local-lvm:vm-105-disk-0\n")
			if !c.noList {
				os.MkdirAll(p.Join("/var/log/pve/tasks"), 0o755)
				os.WriteFile(p.Join("/var/log/pve/tasks/active"), []byte(c.active), 0o644)
			}
			os.MkdirAll(filepath.Join(p.Proc, "21854"), 0o755)
			os.WriteFile(filepath.Join(p.Proc, "21854", "stat"), []byte(statLine), 0o644)
			v, err := Load(context.Background(), node.New(p, 0), 105)
			if err != nil {
				t.Fatal(err)
			}
			l := v.Lock()
			if l == nil || l.Kind != c.lock || l.Task != c.task || l.Stale() != c.stale || l.Known == c.noList {
				t.Errorf("%+v (stale %v), want task %q stale %v", l, l.Stale(), c.task, c.stale)
			}
		})
	}
	// No lock line: not locked. A value outside the lock enum is kept by
	// parse_vm_config (check_type checks no enum; asked of Proxmox:
	// qemuserver's TestParseAsProxmox), and check_lock refuses on any
	// lock: locked.
	v, err := Load(context.Background(), node.New(writeNode(t, 105, "scsi0: local-lvm:vm-105-disk-0\n"), 0), 105)
	if err != nil || v.Lock() != nil {
		t.Errorf("no lock line: %v %+v", err, v.Lock())
	}
	v, err = Load(context.Background(), node.New(writeNode(t, 105, "lock: mine\n"), 0), 105)
	if err != nil || v.Lock() == nil || v.Lock().Kind != "mine" {
		t.Errorf("lock: mine: %v %+v", err, v.Lock())
	}
	if LockTasks("migrate") != "qmigrate or hamigrate or qmtunnel" || LockTasks("suspended") != "" {
		t.Error(LockTasks("migrate"), LockTasks("suspended"))
	}
}
