package vm

import (
	"errors"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// TestBackupHolds: the one decision, over the exact inputs: lock: backup
// held by its vzdump task (or where the task list cannot be read) holds; a
// stale one does not (nothing will thaw the guest: the freeze state must
// be asked); a backup block job holds whoever started it, other jobs do
// not; jobs QEMU could not list hold (a backup may run unseen).
func TestBackupHolds(t *testing.T) {
	backup := qmp.BlockJob{ID: "drive-scsi0", Type: "backup", Status: "running", Len: 4 << 30, Offset: 1 << 30}
	mirror := qmp.BlockJob{ID: "mirror-scsi1", Type: "mirror", Status: "ready"}
	cases := []struct {
		name string
		lock *Lock
		jobs []qmp.BlockJob
		err  error
		why  string // "" for no hold
	}{
		{"nothing", nil, nil, nil, ""},
		{"another lock", &Lock{Kind: "snapshot", Known: true, Task: "UPID:x"}, nil, nil, ""},
		{"a mirror", nil, []qmp.BlockJob{mirror}, nil, ""},
		{"lock: backup, its task runs", &Lock{Kind: "backup", Known: true, Task: "UPID:pve1:1:2:3:vzdump::root@pam:"}, nil, nil,
			"a backup holds the VM (lock: backup, task UPID:pve1:1:2:3:vzdump::root@pam:), and vzdump needs the agent's one-client socket to thaw the guest"},
		{"lock: backup, tasks unknown", &Lock{Kind: "backup"}, nil, nil,
			"a backup holds the VM (lock: backup), and vzdump needs the agent's one-client socket to thaw the guest"},
		{"lock: backup, stale", &Lock{Kind: "backup", Known: true}, nil, nil, ""},
		{"a backup job", nil, []qmp.BlockJob{mirror, backup}, nil,
			"a backup holds the VM (backup job drive-scsi0 running, 25% of 4.00 GiB), and vzdump needs the agent's one-client socket to thaw the guest"},
		{"jobs unknown", nil, nil, errors.New("query-block-jobs: QMP socket busy"),
			"a backup may hold the VM (whether a backup job runs is unknown: query-block-jobs: QMP socket busy), and vzdump needs the agent's one-client socket to thaw the guest"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := BackupHolds(c.lock, c.jobs, c.err)
			switch {
			case c.why == "" && h != nil:
				t.Errorf("held: %s", h.Why())
			case c.why != "" && h == nil:
				t.Errorf("not held, want %q", c.why)
			case h != nil && h.Why() != c.why:
				t.Errorf("%q\nwant %q", h.Why(), c.why)
			}
		})
	}
}

// TestMainLock: the lock of the main section only ([PENDING] and
// snapshots have their own lines).
func TestMainLock(t *testing.T) {
	for conf, want := range map[string]string{
		"name: a\nlock: backup\nscsi0: x\n":                "backup",
		"name: a\n[snap1]\nlock: backup\n":                 "",
		"lock:  backup  \n":                                "backup",
		"name: a\nscsi0: x\n[PENDING]\nlock: snapshot\n":   "",
		"#lock: backup\nname: a\n":                         "",
		"name: a\nlock: suspended\n[snap]\nlock: backup\n": "suspended",
	} {
		if got := mainLock([]byte(conf)); got != want {
			t.Errorf("%q: %q, want %q", conf, got, want)
		}
	}
}

// TestAgentUnless: a hold gives no client and the skip that says what was
// not asked and why; none gives the VM's socket.
func TestAgentUnless(t *testing.T) {
	v := &VM{VMID: 370}
	h := BackupHolds(&Lock{Kind: "backup"}, nil, nil)
	a, s := v.AgentUnless(h, 0, FreezeCommand, FreezeFor)
	if a != nil || s == nil || s.Command != FreezeCommand || s.Backup != h ||
		s.String() != "guest agent not asked for the guest's freeze state (guest-fsfreeze-status): "+h.Why() {
		t.Fatalf("%v %+v", a, s)
	}
	if a, s := v.AgentUnless(nil, 0, FreezeCommand, FreezeFor); a == nil || s != nil || a.Path != v.QGASocket() {
		t.Errorf("%v %+v", a, s)
	}
	f := &Freeze{State: FreezeNotAsked, Why: h.Why(), Backup: h}
	if sk := f.Skip(); sk == nil || sk.Command != FreezeCommand {
		t.Errorf("%+v", sk)
	}
	if sk := (&Freeze{State: Frozen, Backup: h}).Skip(); sk != nil {
		t.Errorf("asked, yet skipped: %+v", sk)
	}
}
