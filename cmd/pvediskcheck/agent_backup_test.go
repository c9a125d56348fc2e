//go:build integration

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// TestAgentLeftAloneDuringBackup (issue 34 items 2 and 3): VM 370 runs in
// real QEMU with agent: 1, a spy on its .qga socket (qmptest's agent:
// every byte a client sends is counted) answering guest-fsfreeze-status.
// Before the backup, check asks the freeze state (the spy hears it: the
// control that the socket is the one the tool would open); frozen, it is
// the error guest-frozen. During a real blockdev-backup job of scsi1
// (throttled to a slow target, so it runs for minutes), top, cache,
// discard --trim, metrics, check, stall and flush --trigger send the
// socket zero bytes and each says, in JSON and in text, which answer it
// did not ask for and why; discard --trim and flush --trigger are refused
// (exit 3). Once the job is cancelled the agent
// is asked again.
func TestAgentLeftAloneDuringBackup(t *testing.T) {
	n := fakenode.NewT(t)
	n.UseDoubles(t)
	lab370(t, n, "agent: 1\n")
	n.MustStart(t, 370, fakenode.ArgvOptions{Blockdev: true})
	state := make(chan string, 1)
	state <- "thawed"
	spy := qmptest.NewAgent(t)
	spy.Handle = func(w net.Conn, cmd string, _ gjson.Result) {
		st := <-state
		state <- st
		switch cmd {
		case "guest-fsfreeze-status":
			fmt.Fprintf(w, "{\"return\": %q}\n", st)
		default:
			fmt.Fprintf(w, "{\"error\": {\"class\": \"CommandNotFound\", \"desc\": \"The command %s has not been found\"}}\n", cmd)
		}
	}
	if err := os.Symlink(spy.Sock(), n.Paths.QGASocket(370)); err != nil {
		t.Fatal(err)
	}
	setState := func(s string) { <-state; state <- s }

	// Control: no backup, thawed: asked, no finding; frozen: the error.
	var res check.Report
	runJSON(t, n, &res, "check", "370")
	if len(res.VMs) != 1 || res.VMs[0].GuestFreeze == nil || res.VMs[0].GuestFreeze.State != vm.Thawed || spy.Bytes() == 0 {
		t.Fatalf("before the backup: %+v, spy heard %d bytes", res.VMs, spy.Bytes())
	}
	for _, f := range res.VMs[0].Findings {
		if f.Code == check.CodeGuestFrozen {
			t.Errorf("thawed: %+v", f)
		}
	}
	setState("frozen")
	res = check.Report{}
	if _, code := runJSON(t, n, &res, "check", "370"); code != 1 {
		t.Errorf("frozen: exit %d, want 1", code)
	}
	if f := findCode(res.VMs[0].Findings, check.CodeGuestFrozen); f == nil || f.Severity != check.Error || f.Fix != "qm guest cmd 370 fsfreeze-thaw" {
		t.Errorf("frozen: %+v", res.VMs[0].Findings)
	}

	// A backup job: slow target, 1 MiB/s, so it runs through every command.
	target := n.MustVolume(t, "local", "370/backup-target.raw", fakenode.Lab370DiskSize)
	err := qmp.DoRetry(context.Background(), n.Paths.QMPSocket(370), 5*time.Second, 10*time.Second, func(s qmp.Session) error {
		if _, err := s.Exec("blockdev-add", map[string]any{"driver": "raw", "node-name": "target", "file": map[string]any{"driver": "file", "filename": target}}); err != nil {
			return err
		}
		_, err := s.Exec("blockdev-backup", map[string]any{"job-id": "backup-scsi1-test", "device": "drive-scsi1", "target": "target", "sync": "full", "speed": 1 << 20})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	heard := spy.Bytes()
	const why = "backup job backup-scsi1-test running"
	// Each skip names the job; the one of command is there.
	says := func(name string, skips []vm.AgentSkip, command string) {
		t.Helper()
		found := false
		for _, s := range skips {
			if !strings.Contains(s.Why, why) || s.Backup == nil || len(s.Backup.Jobs) != 1 {
				t.Errorf("%s: %+v", name, s)
			}
			found = found || s.Command == command
		}
		if !found {
			t.Errorf("%s: agent_not_asked %+v, none for %s", name, skips, command)
		}
	}

	// check: the freeze state not asked, guest-frozen not checked.
	res = check.Report{}
	runJSON(t, n, &res, "check", "370")
	cv := res.VMs[0]
	says("check", cv.AgentNotAsked, vm.FreezeCommand)
	if cv.GuestFreeze == nil || cv.GuestFreeze.State != vm.FreezeNotAsked || findCode(cv.Findings, check.CodeGuestFrozen) != nil {
		t.Errorf("check during the backup: %+v %+v", cv.GuestFreeze, cv.Findings)
	}
	if out, _, _ := runCLI(t, "--root", n.Root, "check", "370"); !strings.Contains(out, "note: guest agent not asked for the guest's freeze state (guest-fsfreeze-status): a backup holds the VM ("+why) {
		t.Errorf("check text:\n%s", out)
	} else {
		t.Logf("check text during the backup:\n%s", grepLines(out, "guest"))
	}

	// top: three samples, the guest names and the freeze state not asked.
	code, stderr, samples := topStream(t, []string{"--root", n.Root, "top", "370", "--count", "3", "--interval", "500ms", "--stall-after", "1s"}, nil)
	if code != 0 || len(samples) != 3 {
		t.Fatalf("top: exit %d, %d samples: %s", code, len(samples), stderr)
	}
	last := samples[2].VMs[0]
	if last.GuestFreeze == nil || last.GuestFreeze.State != vm.FreezeNotAsked || len(last.AgentNotAsked) == 0 {
		t.Errorf("top during the backup: %+v", last)
	}
	for _, s := range last.AgentNotAsked {
		if !strings.Contains(s.Why, why) {
			t.Errorf("top: %+v", s)
		}
	}

	// cache: the guest names not asked.
	var cv2 struct {
		AgentNotAsked []vm.AgentSkip `json:"agent_not_asked"`
	}
	runJSON(t, n, &cv2, "cache", "370")
	says("cache", cv2.AgentNotAsked, "guest-get-disks, guest-get-fsinfo")
	if out, _, _ := runCLI(t, "--root", n.Root, "cache", "370"); !strings.Contains(out, "note: guest agent not asked for the guest's device names and mount points") {
		t.Errorf("cache text:\n%s", out)
	}

	// discard --trim: refused, exit 3, the disks as they are.
	var dv struct {
		Mode          string           `json:"mode"`
		Disks         []map[string]any `json:"disks"`
		AgentNotAsked []vm.AgentSkip   `json:"agent_not_asked"`
	}
	if _, code := runJSON(t, n, &dv, "discard", "370", "scsi1", "--trim"); code != 3 {
		t.Errorf("discard --trim: exit %d, want 3", code)
	}
	says("discard --trim", dv.AgentNotAsked, "guest-get-fsinfo, guest-fstrim")
	if len(dv.Disks) != 1 {
		t.Errorf("discard --trim: disks %+v", dv.Disks)
	}

	// discard (status): the guest's filesystems not asked.
	dv.AgentNotAsked = nil
	runJSON(t, n, &dv, "discard", "370", "scsi1")
	says("discard", dv.AgentNotAsked, "guest-get-disks, guest-get-fsinfo")

	// metrics --guest: the freeze state has no series, the hold is 1.
	out, errs, code := runCLI(t, "--root", n.Root, "metrics", "--guest")
	if code != 0 || !strings.Contains(out, `pvediskcheck_vm_backup_holds{vmid="370"} 1`) || strings.Contains(out, "pvediskcheck_vm_guest_frozen{") {
		t.Errorf("metrics: exit %d %s\n%s", code, errs, grepLines(out, "pvediskcheck_vm_"))
	}

	// stall: the evidence says the freeze state was not asked, and why.
	var cp struct {
		NotRead     []string   `json:"not_read"`
		GuestFreeze *vm.Freeze `json:"guest_freeze"`
	}
	runJSON(t, n, &cp, "stall", "370", "--out", t.TempDir())
	if cp.GuestFreeze == nil || cp.GuestFreeze.State != vm.FreezeNotAsked || !strings.Contains(cp.GuestFreeze.Why, why) {
		t.Errorf("stall: %+v %q", cp.GuestFreeze, cp.NotRead)
	}
	// flush --trigger: refused before its window.
	if _, errs, code := runCLI(t, "--root", n.Root, "flush", "370", "--trigger", "--for", "2s"); code != 3 || !strings.Contains(errs, "--trigger refused") || !strings.Contains(errs, why) {
		t.Errorf("flush --trigger: exit %d: %s", code, errs)
	}

	if got := spy.Bytes() - heard; got != 0 {
		t.Errorf("the agent socket heard %d bytes during the backup, want 0", got)
	}
	t.Logf("agent socket: %d bytes before the backup, %d during it (check, top, cache, discard, discard --trim, metrics --guest, stall, flush --trigger)", heard, spy.Bytes()-heard)

	// The job cancelled: the agent is asked again, the guest still frozen.
	err = qmp.DoRetry(context.Background(), n.Paths.QMPSocket(370), 5*time.Second, 10*time.Second, func(s qmp.Session) error {
		if _, err := s.Exec("block-job-cancel", map[string]any{"device": "backup-scsi1-test", "force": true}); err != nil {
			return err
		}
		for i := 0; i < 100; i++ {
			r, err := s.Exec("query-block-jobs", nil)
			if err != nil {
				return err
			}
			if len(r.Array()) == 0 {
				return nil
			}
			time.Sleep(50 * time.Millisecond)
		}
		return fmt.Errorf("backup job still listed after cancel")
	})
	if err != nil {
		t.Fatal(err)
	}
	res = check.Report{}
	runJSON(t, n, &res, "check", "370")
	if f := findCode(res.VMs[0].Findings, check.CodeGuestFrozen); f == nil || f.Severity != check.Error || spy.Bytes() == heard {
		t.Errorf("after the backup: %+v", res.VMs[0].Findings)
	}
	setState("thawed")
	res = check.Report{}
	runJSON(t, n, &res, "check", "370")
	if f := findCode(res.VMs[0].Findings, check.CodeGuestFrozen); f != nil {
		t.Errorf("thawed: %+v", f)
	}
}

func findCode(fs []check.Finding, c check.Code) *check.Finding {
	for i := range fs {
		if fs[i].Code == c {
			return &fs[i]
		}
	}
	return nil
}
