package vm

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// TestAskFreeze: over the fake agent and QMP. Thawed: asked once, the
// jobs read first. Frozen with no backup: frozen, no hold. Frozen, and the
// backup job started after the freeze (vzdump freezes, then starts the
// job): frozen with the job on Backup. A job before: not asked at all, the
// agent not opened. No agent socket: nil, nothing asked.
func TestAskFreeze(t *testing.T) {
	backup := `[{"device": "backup-scsi0", "type": "backup", "status": "running", "len": 100, "offset": 40}]`
	for _, c := range []struct {
		name       string
		answer     string
		jobs       []string // query-block-jobs, each in turn (the last repeats)
		state      FreezeState
		held       bool
		agentConns int32
	}{
		{"thawed", "thawed", []string{"[]"}, Thawed, false, 1},
		{"frozen", "frozen", []string{"[]"}, Frozen, false, 1},
		{"frozen, then the backup job", "frozen", []string{"[]", backup}, Frozen, true, 1},
		{"a backup job first", "frozen", []string{backup}, FreezeNotAsked, true, 0},
		{"an odd answer", "half", []string{"[]"}, FreezeUnknown, false, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, q := liveVM(t, 2, qmptest.Greeting72)
			v.Config.Main["agent"] = "1"
			var mu sync.Mutex
			n := 0
			withHandler(q, func(cmd string, _ gjson.Result) string {
				if cmd != "query-block-jobs" {
					return ""
				}
				mu.Lock()
				defer mu.Unlock()
				r := c.jobs[min(n, len(c.jobs)-1)]
				n++
				return qmptest.Return(r)
			})
			a := qmptest.NewAgent(t)
			var sent []string
			a.Handle = func(w net.Conn, cmd string, _ gjson.Result) {
				sent = append(sent, cmd)
				fmt.Fprintf(w, "{\"return\": %q}\n", c.answer)
			}
			if err := os.Symlink(a.Sock(), v.QGASocket()); err != nil {
				t.Fatal(err)
			}
			f := v.AskFreeze(context.Background(), node.New(v.paths, 2*time.Second), 0)
			if f == nil || f.State != c.state || (f.Backup != nil) != c.held || a.Conns() != c.agentConns {
				t.Fatalf("%+v, agent connections %d", f, a.Conns())
			}
			if c.agentConns > 0 && !slices.Equal(sent, []string{"guest-fsfreeze-status"}) {
				t.Errorf("agent sent %q", sent)
			}
			if c.held && (len(f.Backup.Jobs) != 1 || f.Backup.Jobs[0].Progress() != "40% of 100 B") {
				t.Errorf("backup %+v", f.Backup)
			}
		})
	}
	t.Run("paused by an I/O error", func(t *testing.T) {
		v, q := liveVM(t, 2, qmptest.Greeting72)
		v.Config.Main["agent"] = "1"
		v.Status = "io-error"
		a := qmptest.NewAgent(t)
		if err := os.Symlink(a.Sock(), v.QGASocket()); err != nil {
			t.Fatal(err)
		}
		f := v.AskFreeze(context.Background(), node.New(v.paths, time.Second), 0)
		if f == nil || f.State != FreezeNotAsked || f.Skip() != nil || a.Conns() != 0 || len(q.Seen()) != 0 {
			t.Errorf("%+v, agent connections %d, QMP %q", f, a.Conns(), q.Seen())
		}
	})
	t.Run("no agent socket", func(t *testing.T) {
		v, q := liveVM(t, 2, qmptest.Greeting72)
		v.Config.Main["agent"] = "1"
		if f := v.AskFreeze(context.Background(), node.New(v.paths, time.Second), 0); f != nil || len(q.Seen()) != 0 {
			t.Errorf("%+v, QMP %q", f, q.Seen())
		}
	})
}
