package check

import (
	"encoding/json"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/vm"
	"github.com/tidwall/gjson"
)

// backupJobs is query-block-jobs during a blockdev-backup of scsi1 on QEMU
// 7.2.22 (qmp/testdata/query-block-jobs-backup-7.2.json, recorded by
// TestRecordBlockJobs), its offset moved on to 64 MiB of the 256.
const backupJobs = `[{"auto-finalize": true, "io-status": "ok", "device": "backup-scsi1-test", "auto-dismiss": true, "busy": false, "len": 268435456, "offset": 67108864, "status": "running", "paused": false, "speed": 1048576, "ready": false, "type": "backup"}]`

// vzdumpTask and vzdumpStat are a running vzdump task as TestLocked's: this
// machine's /proc/PID/stat of pid 21854 (started at 148740 = 0x24504), its
// name changed to the task's title.
const (
	vzdumpTask = "UPID:pve1:0000555E:00024504:6740A1B2:vzdump::root@pam:"
	vzdumpStat = "21854 (task UPID:pve1:0000555E:00024504:6740A1B2:vzdump::root@pam:) S 21851 21851 10964 0 -1 4194304 127 0 0 0 0 0 0 0 20 0 1 0 148740 3133440 386 18446744073709551615 94439117492224 94439117512105 140723672593088 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
)

// agentSpy is a fake guest agent on VM 390's socket that answers
// guest-fsfreeze-status with state and records every command it is sent.
type agentSpy struct {
	a    *qmptest.Agent
	mu   sync.Mutex
	sent []string
}

func (tn *tnode) agentSpy(t *testing.T, state string) *agentSpy {
	s := &agentSpy{a: qmptest.NewAgent(t)}
	replies := qmptest.AgentReplies(map[string]string{"guest-fsfreeze-status": `"` + state + `"`, "guest-get-osinfo": osinfoDebian})
	s.a.Handle = func(w net.Conn, cmd string, req gjson.Result) {
		s.mu.Lock()
		s.sent = append(s.sent, cmd)
		s.mu.Unlock()
		replies(w, cmd, req)
	}
	if err := os.Symlink(s.a.Sock(), tn.n.Paths.QGASocket(390)); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *agentSpy) commands() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.sent)
}

// TestGuestFrozen: the exact findings for a guest frozen without a backup
// (error, with the thaw command), frozen during a backup job or with the
// config's lock: backup (info with the job's progress, or the agent left
// alone), and thawed (none); guest-fsfreeze-status is asked once, and not
// at all while a backup holds the VM.
func TestGuestFrozen(t *testing.T) {
	base := quiet(t)
	cases := []struct {
		name     string
		state    string // the agent's answer
		jobs     string // query-block-jobs; "" as recorded (none)
		lock     bool
		task     bool // a vzdump task holds the lock
		want     []string
		sent     []string
		freeze   vm.FreezeState
		msg      string
		notAsked bool
	}{
		{name: "frozen without a backup", state: "frozen", want: []string{"error guest-frozen -"},
			sent: []string{"guest-fsfreeze-status"}, freeze: vm.Frozen, msg: "no backup holds the VM"},
		{name: "thawed", state: "thawed", want: []string{}, sent: []string{"guest-fsfreeze-status"}, freeze: vm.Thawed},
		{name: "frozen, a backup job runs", state: "frozen", jobs: backupJobs, want: []string{},
			freeze: vm.FreezeNotAsked, notAsked: true},
		{name: "lock: backup", state: "frozen", lock: true, task: true, want: []string{"info locked -"},
			freeze: vm.FreezeNotAsked, notAsked: true},
		// vzdump was killed: its lock is stale, nothing will thaw the guest.
		{name: "stale lock: backup, frozen", state: "frozen", lock: true, want: []string{"error guest-frozen -", "warning locked -"},
			sent: []string{"guest-fsfreeze-status"}, freeze: vm.Frozen, msg: "no backup holds the VM"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rec := base
			rec.Replies = map[string]json.RawMessage{}
			for k, v := range base.Replies {
				rec.Replies[k] = v
			}
			if c.jobs != "" {
				rec.Replies["query-block-jobs"] = json.RawMessage(c.jobs)
			}
			conf := ""
			if c.lock {
				conf = rec.Config + "lock: backup\n"
			}
			tn := newNode(t)
			tn.replay(t, rec, 390, conf)
			withImages(t, tn)
			if c.lock {
				active := ""
				if c.task {
					active = vzdumpTask + "\n"
					tn.write("proc/21854/stat", vzdumpStat)
				}
				tn.write("var/log/pve/tasks/active", active)
			}
			spy := tn.agentSpy(t, c.state)
			v := tn.check(390, quietRunner(), Options{})
			if got := summary(v); !slices.Equal(got, c.want) {
				t.Errorf("findings %q, want %q (%+v) notes %q", got, c.want, v.Findings, v.Notes)
			}
			if got := spy.commands(); !slices.Equal(got, c.sent) {
				t.Errorf("agent was sent %q, want %q", got, c.sent)
			}
			if v.GuestFreeze == nil || v.GuestFreeze.State != c.freeze {
				t.Fatalf("guest_freeze %+v, want %s", v.GuestFreeze, c.freeze)
			}
			if f := find(v, CodeGuestFrozen, ""); c.msg != "" && (f == nil || !strings.Contains(f.Message, c.msg) || f.Fix != "qm guest cmd 390 fsfreeze-thaw") {
				t.Errorf("%+v", f)
			}
			if got := len(v.AgentNotAsked) > 0; got != c.notAsked {
				t.Errorf("agent_not_asked %+v", v.AgentNotAsked)
			}
			if c.notAsked {
				if !slices.Contains(v.NotChecked, CodeGuestFrozen) {
					t.Errorf("not checked %q", v.NotChecked)
				}
				s := v.AgentNotAsked[0]
				if s.Command != vm.FreezeCommand || !strings.Contains(s.Why, "a backup holds the VM") {
					t.Errorf("%+v", s)
				}
				if c.jobs != "" && !strings.Contains(s.Why, "backup job backup-scsi1-test running, 25% of 256.0 MiB") {
					t.Errorf("why %q", s.Why)
				}
				if c.lock && !strings.Contains(s.Why, "lock: backup") {
					t.Errorf("why %q", s.Why)
				}
			} else if slices.Contains(v.NotChecked, CodeGuestFrozen) {
				t.Errorf("not checked %q", v.NotChecked)
			}
		})
	}
}

// TestGuestFrozenJudge: the rule over each freeze state, the exact set:
// frozen with a backup seen right after the answer is info with the job's
// progress; frozen where the jobs could not be read is still an error.
func TestGuestFrozenJudge(t *testing.T) {
	job := &vm.BackupHold{Jobs: []vm.BackupJob{{ID: "drive-scsi0", Status: "running", DoneBytes: 1 << 30, TotalBytes: 4 << 30}}}
	cases := []struct {
		name       string
		f          *vm.Freeze
		want       []string
		msg        string
		notChecked bool
	}{
		{"none", nil, []string{}, "", false},
		{"thawed", &vm.Freeze{State: vm.Thawed}, []string{}, "", false},
		{"frozen", &vm.Freeze{State: vm.Frozen}, []string{"error guest-frozen -"}, "every write in the guest hangs", false},
		{"frozen in a backup", &vm.Freeze{State: vm.Frozen, Backup: job}, []string{"info guest-frozen -"}, "backup job drive-scsi0 running, 25% of 4.00 GiB", false},
		{"frozen, jobs unknown", &vm.Freeze{State: vm.Frozen, Backup: &vm.BackupHold{Unknown: "query-block-jobs: busy"}}, []string{"error guest-frozen -"}, "no backup was seen", false},
		{"not asked", &vm.Freeze{State: vm.FreezeNotAsked, Backup: job}, []string{}, "", true},
		{"unknown", &vm.Freeze{State: vm.FreezeUnknown, Why: "timeout"}, []string{}, "", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := VMResult{Findings: []Finding{}}
			guestFrozen(390, c.f, &out)
			if got := summary(out); !slices.Equal(got, c.want) {
				t.Fatalf("%q, want %q", got, c.want)
			}
			if c.msg != "" && !strings.Contains(out.Findings[0].Message, c.msg) {
				t.Errorf("%q", out.Findings[0].Message)
			}
			if slices.Contains(out.NotChecked, CodeGuestFrozen) != c.notChecked {
				t.Errorf("not checked %q", out.NotChecked)
			}
		})
	}
}
