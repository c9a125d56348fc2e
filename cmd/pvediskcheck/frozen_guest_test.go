//go:build integration

package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/internal/e2e"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// TestCheckFrozenGuest (issue 34 item 3): a real guest (qemu-ga) with an
// ext4 filesystem mounted on scsi1 is frozen through a second agent client
// (guest-fsfreeze-freeze, as vzdump does, with no backup after it): check
// finds guest-frozen, an error with the thaw command, and metrics' gauge is
// 1; thawed through the same client, the finding and the gauge are gone.
func TestCheckFrozenGuest(t *testing.T) {
	fakenode.RequireQEMU(t)
	n := fakenode.NewT(t)
	n.UseDoubles(t)
	n.MustVolume(t, "local", "392/vm-392-disk-1.raw", 64<<20)
	if err := n.WriteConfig(392, "agent: 1\nostype: l26\nscsihw: virtio-scsi-single\nscsi1: local:392/vm-392-disk-1.raw,iothread=1,size=64M\n"); err != nil {
		t.Fatal(err)
	}
	g := bootGuest(t, n, 392, e2e.GuestQEMU(t))
	dev := g.scsiDev(t, "scsi1")
	g.sh(t, "set -e; mkfs.ext4 -q -F "+dev+"; mkdir -p /mnt/s1; mount -t ext4 "+dev+" /mnt/s1; echo x > /mnt/s1/f; sync")
	second := qmp.Agent{Path: n.Paths.QGASocket(392), Timeout: 30 * time.Second}
	call := func(cmd string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		r, err := second.Call(ctx, cmd, nil)
		if err != nil {
			t.Fatalf("%s: %v\nserial:\n%s", cmd, err, e2e.SerialTail(g.serial))
		}
		return r.Raw
	}
	var others []string // the findings that are not guest-frozen, before the freeze
	frozenFindings := func() ([]check.Finding, *vm.Freeze, int) {
		t.Helper()
		var res check.Report
		_, code := runJSON(t, n, &res, "check", "392")
		var out []check.Finding
		var rest []string
		for _, f := range res.VMs[0].Findings {
			if f.Code == check.CodeGuestFrozen {
				out = append(out, f)
			} else {
				rest = append(rest, string(f.Severity)+" "+string(f.Code)+" "+f.Disk)
			}
		}
		if others == nil {
			others = append([]string{}, rest...)
		} else if strings.Join(rest, ", ") != strings.Join(others, ", ") {
			t.Errorf("the other findings changed: %q, before %q", rest, others)
		}
		return out, res.VMs[0].GuestFreeze, code
	}
	gauge := func() string {
		t.Helper()
		out, _, _ := runCLI(t, "--root", n.Root, "metrics")
		return grepLines(out, `pvediskcheck_vm_guest_frozen{vmid="392"}`)
	}

	if fs, f, _ := frozenFindings(); len(fs) != 0 || f == nil || f.State != vm.Thawed {
		t.Fatalf("before the freeze: %+v %+v", fs, f)
	}
	t0 := time.Now()
	if got := call("guest-fsfreeze-freeze"); got != "1" {
		t.Fatalf("guest-fsfreeze-freeze froze %s filesystems, want 1", got)
	}
	t.Logf("frozen in %.1f s", time.Since(t0).Seconds())
	thawed := false
	defer func() {
		if !thawed {
			call("guest-fsfreeze-thaw")
		}
	}()
	fs, f, code := frozenFindings()
	if code != exitProblem || len(fs) != 1 || fs[0].Severity != check.Error || fs[0].Fix != "qm guest cmd 392 fsfreeze-thaw" ||
		!strings.Contains(fs[0].Message, "no backup holds the VM") || f == nil || f.State != vm.Frozen {
		t.Fatalf("frozen: exit %d, %+v %+v", code, fs, f)
	}
	t.Logf("%s %s: %s\n  fix: %s", fs[0].Severity, fs[0].Code, fs[0].Message, fs[0].Fix)
	if got := gauge(); got != `pvediskcheck_vm_guest_frozen{vmid="392"} 1` {
		t.Errorf("metrics frozen: %q", got)
	}

	if got := call("guest-fsfreeze-thaw"); got != "1" {
		t.Errorf("guest-fsfreeze-thaw thawed %s filesystems, want 1", got)
	}
	thawed = true
	if fs, f, _ := frozenFindings(); len(fs) != 0 || f == nil || f.State != vm.Thawed {
		t.Errorf("thawed: %+v %+v", fs, f)
	}
	if got := gauge(); got != `pvediskcheck_vm_guest_frozen{vmid="392"} 0` {
		t.Errorf("metrics thawed: %q", got)
	}
}
