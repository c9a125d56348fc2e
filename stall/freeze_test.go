package stall

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// TestCaptureGuestFreeze: the evidence records the guest's freeze state
// (a frozen guest sends nothing, so no disk stalls): frozen, in
// guest-freeze.json and Captured; with the config's lock: backup and its
// vzdump task running, the agent is not opened and the capture says why.
func TestCaptureGuestFreeze(t *testing.T) {
	for _, backup := range []bool{false, true} {
		t.Run(fmt.Sprintf("backup %v", backup), func(t *testing.T) {
			n, _ := captureNode(t, 2)
			b, err := os.ReadFile(n.Paths.VMConfig(100))
			if err != nil {
				t.Fatal(err)
			}
			conf := string(b) + "agent: 1\n"
			if backup {
				// A running vzdump task: this machine's /proc/PID/stat of
				// pid 21854 (started at 148740 = 0x24504) renamed to the
				// task's title, as check's TestLocked.
				const task = "UPID:pve1:0000555E:00024504:6740A1B2:vzdump::root@pam:"
				conf += "lock: backup\n"
				writeFile(t, n.Paths.Join("/var/log/pve/tasks/active"), task+"\n")
				writeFile(t, n.Paths.ProcPid(21854)+"/stat", "21854 (task "+task+") S 21851 21851 10964 0 -1 4194304 127 0 0 0 0 0 0 0 20 0 1 0 148740 3133440 386 18446744073709551615 94439117492224 94439117512105 140723672593088 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n")
			}
			writeFile(t, n.Paths.VMConfig(100), conf)
			a := qmptest.NewAgent(t)
			var sent []string
			a.Handle = func(w net.Conn, cmd string, _ gjson.Result) {
				sent = append(sent, cmd)
				fmt.Fprintln(w, `{"return": "frozen"}`)
			}
			if err := os.Symlink(a.Sock(), n.Paths.QGASocket(100)); err != nil {
				t.Fatal(err)
			}
			c, err := Capture(context.Background(), n, 100, CaptureOptions{Out: parent(t, t.TempDir()), After: recAfter})
			if err != nil {
				t.Fatal(err)
			}
			f := c.GuestFreeze
			var file vm.Freeze
			fb, _ := os.ReadFile(c.Dir + "/guest-freeze.json")
			if err := json.Unmarshal(fb, &file); err != nil {
				t.Fatalf("guest-freeze.json %q: %v", fb, err)
			}
			if !backup {
				if f == nil || f.State != vm.Frozen || f.Backup != nil || file.State != vm.Frozen || !slices.Equal(sent, []string{"guest-fsfreeze-status"}) {
					t.Errorf("freeze %+v, file %+v, agent sent %q", f, file, sent)
				}
				return
			}
			if f == nil || f.State != vm.FreezeNotAsked || !strings.Contains(f.Why, "lock: backup, task UPID") || a.Conns() != 0 || file.State != vm.FreezeNotAsked {
				t.Errorf("freeze %+v, file %+v, agent connections %d", f, file, a.Conns())
			}
			if !slices.ContainsFunc(c.NotRead, func(s string) bool {
				return strings.HasPrefix(s, "guest freeze state: not-asked: a backup holds the VM")
			}) {
				t.Errorf("not read %q", c.NotRead)
			}
		})
	}
}

func writeFile(t *testing.T, p, text string) {
	t.Helper()
	if err := os.MkdirAll(p[:strings.LastIndexByte(p, '/')], 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
