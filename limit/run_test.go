package limit

import (
	"context"
	"errors"
	"fmt"
	"github.com/pvediskcheck/pvediskcheck/node"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/units"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

var gens = []string{"blockdev", "drive"}

var lab = qemuserver.Limits{"bps-write": 20 * mib, "iops-read": 500}

func change(values map[string]float64) *Change { return &Change{Values: values} }

func resultFor(t *testing.T, rs []*Result, disk string) *Result {
	t.Helper()
	for _, r := range rs {
		if r.Disk == disk {
			return r
		}
	}
	t.Fatalf("no result for %s", disk)
	return nil
}

func TestRunShow(t *testing.T) {
	for _, gen := range gens {
		t.Run(gen, func(t *testing.T) {
			tn := newTestNode(t, gen, true)
			tn.qemu.set("scsi1", lab)
			tn.writeConfig(t, strings.Replace(tn.config(t), "virtio1: local-lvm:vm-370-disk-2,iothread=1,size=256M", "virtio1: local-lvm:vm-370-disk-2,iothread=1,size=256M,iops_wr=300", 1))
			v, disks := tn.load(t)
			rs, err := Run(context.Background(), tn.node, v, disks, Request{})
			if err != nil || len(rs) != 4 {
				t.Fatalf("%d results, %v", len(rs), err)
			}
			s1 := resultFor(t, rs, "scsi1")
			want := Sets{Configured: Set{}, Running: Set{"mbps_wr": 20, "iops_rd": 500}, RunningQEMU: map[string]int64{"bps-write": 20 * mib, "iops-read": 500},
				Differs: []string{
					"iops_rd: running 500 ops/s but not in the config (set live, not saved: lost at the next restart)",
					"mbps_wr: running 20 MiB/s but not in the config (set live, not saved: lost at the next restart)"}}
			if !reflect.DeepEqual(s1.Limits, want) || s1.VMID != 370 || !s1.Running || s1.Blockdev != (gen == "blockdev") || s1.Apply != nil || s1.Verify != nil || len(s1.Notes) != 0 {
				t.Errorf("scsi1: %+v", s1)
			}
			v1 := resultFor(t, rs, "virtio1")
			if !reflect.DeepEqual(v1.Limits.Differs, []string{"iops_wr: configured 300 ops/s but not in effect (config changed without reaching the VM, e.g. restored from a backup or edited by hand)"}) {
				t.Errorf("virtio1: %+v", v1.Limits)
			}
			if s0 := resultFor(t, rs, "scsi0"); s0.Limits.Running == nil || len(s0.Limits.Running)+len(s0.Limits.Configured)+len(s0.Limits.Differs) != 0 {
				t.Errorf("scsi0: %+v", s0.Limits)
			}
			if len(tn.qemu.commands()) != 0 {
				t.Errorf("showing changed something: %v", tn.qemu.commands())
			}
			// Both differing: configured 30, running 20.
			tn.writeConfig(t, strings.Replace(tn.config(t), "scsi1: local-lvm:vm-370-disk-1,iothread=1,size=256M", "scsi1: local-lvm:vm-370-disk-1,iothread=1,size=256M,mbps_wr=30,iops_rd=500", 1))
			v, disks = tn.load(t, "scsi1")
			rs, err = Run(context.Background(), tn.node, v, disks, Request{})
			if err != nil || len(rs) != 1 || !reflect.DeepEqual(rs[0].Limits.Differs, []string{"mbps_wr: configured 30 MiB/s, running 20 MiB/s"}) {
				t.Errorf("%v: %+v", err, rs[0].Limits)
			}
		})
	}
}

func TestRunStopped(t *testing.T) {
	tn := newTestNode(t, "", false)
	tn.writeConfig(t, strings.Replace(tn.config(t), "size=256M\nvirtio1", "size=256M,mbps_wr=20\nvirtio1", 1))
	v, disks := tn.load(t, "scsi1")
	rs, err := Run(context.Background(), tn.node, v, disks, Request{})
	if exitcode.Of(err) != exitcode.Unreachable || err.Error() != "VM 370 is not running" || len(rs) != 1 {
		t.Fatalf("%v, %d results", err, len(rs))
	}
	if r := rs[0]; r.Running || r.Limits.Running != nil || r.Limits.RunningQEMU != nil || !reflect.DeepEqual(r.Limits.Configured, Set{"mbps_wr": 20}) ||
		!reflect.DeepEqual(r.Notes, []string{"VM 370 is not running: configured limits only"}) {
		t.Errorf("%+v", r)
	}
	// A live change: refused with the advice to persist, after the set is
	// checked (a bad one is exit 2).
	rs, err = Run(context.Background(), tn.node, v, disks, Request{Change: change(map[string]float64{"iops_rd": 500})})
	if rs != nil || exitcode.Of(err) != exitcode.Unreachable || !strings.Contains(err.Error(), "not running: nothing to apply live. Use --persist") {
		t.Errorf("live on a stopped VM: %v", err)
	}
	rs, err = Run(context.Background(), tn.node, v, disks, Request{Change: change(map[string]float64{"mbps": 10})})
	if rs != nil || exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "mbps cannot be combined with mbps_wr") {
		t.Errorf("bad set on a stopped VM: %v", err)
	}
	rs, err = Run(context.Background(), tn.node, v, disks, Request{Verify: MinWindow})
	if rs != nil || exitcode.Of(err) != exitcode.Unreachable || err.Error() != "VM 370 is not running: nothing to measure" {
		t.Errorf("verify on a stopped VM: %v", err)
	}
}

// TestApplyLive: the change merged into the running limits, sent as one
// throttle command built from the numbers, read back and confirmed.
func TestApplyLive(t *testing.T) {
	for _, gen := range gens {
		t.Run(gen, func(t *testing.T) {
			tn := newTestNode(t, gen, true)
			tn.qemu.set("scsi1", lab)
			v, disks := tn.load(t, "scsi1")
			want := Set{"mbps_wr": 30, "iops_rd": 500}
			m, args, _ := LiveCommand("scsi1", gen == "blockdev", want)

			rs, err := Run(context.Background(), tn.node, v, disks, Request{Change: change(map[string]float64{"mbps_wr": 30}), DryRun: true})
			if err != nil || rs[0].Apply == nil || !rs[0].Apply.DryRun || rs[0].Apply.Command != CommandJSON(m, args) || len(tn.qemu.commands()) != 0 {
				t.Fatalf("dry run: %v %+v %v", err, rs[0].Apply, tn.qemu.commands())
			}

			rs, err = Run(context.Background(), tn.node, v, disks, Request{Change: change(map[string]float64{"mbps_wr": 30})})
			if err != nil {
				t.Fatal(err)
			}
			a := rs[0].Apply
			wantA := &Applied{Method: m, Command: CommandJSON(m, args), Before: Set{"mbps_wr": 20, "iops_rd": 500}, After: want, Confirmed: true}
			if !reflect.DeepEqual(a, wantA) {
				t.Errorf("apply:\n%+v\nwant\n%+v", a, wantA)
			}
			if cmds := tn.qemu.commands(); len(cmds) != 1 || cmds[0] != CommandJSON(m, args) {
				t.Errorf("QEMU got %v", cmds)
			}
			if got := tn.qemu.get("scsi1"); !got.Equal(want.QEMU()) {
				t.Errorf("QEMU runs %v", got)
			}
			if !reflect.DeepEqual(rs[0].Limits.Running, want) || len(rs[0].Limits.Differs) != 2 ||
				!reflect.DeepEqual(rs[0].Notes, []string{"applied live only: the config of VM 370 was not changed, these limits disappear at the next restart (use --persist to save them)"}) {
				t.Errorf("result: %+v", rs[0])
			}

			// --clear: every field to 0.
			rs, err = Run(context.Background(), tn.node, v, disks, Request{Change: &Change{Clear: true}})
			if err != nil || !rs[0].Apply.Confirmed || len(rs[0].Apply.After) != 0 || len(tn.qemu.get("scsi1")) != 0 {
				t.Errorf("clear: %v %+v %v", err, rs[0].Apply, tn.qemu.get("scsi1"))
			}
		})
	}
}

func TestApplyLiveFailures(t *testing.T) {
	tn := newTestNode(t, "blockdev", true)
	tn.qemu.set("scsi1", lab)
	v, disks := tn.load(t, "scsi1")
	ctx := context.Background()

	// Rejected before anything is sent.
	rs, err := Run(ctx, tn.node, v, disks, Request{Change: change(map[string]float64{"mbps_wr_max": 10})})
	if rs != nil || exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "lower than its rate") || len(tn.qemu.commands()) != 0 {
		t.Errorf("rejected: %v %v", err, tn.qemu.commands())
	}
	// QEMU accepts and changes nothing: not confirmed, exit 1, printed.
	tn.qemu.ignore = true
	rs, err = Run(ctx, tn.node, v, disks, Request{Change: change(map[string]float64{"mbps_wr": 30})})
	if exitcode.Of(err) != exitcode.Problem || rs == nil || rs[0].Apply.Confirmed || !reflect.DeepEqual(rs[0].Apply.After, Set{"mbps_wr": 20, "iops_rd": 500}) ||
		err.Error() != "limit: QEMU accepted qom-set, but QEMU runs scsi1 with {bps-write=20971520 iops-read=500}, not {bps-write=31457280 iops-read=500}" {
		t.Errorf("ignored: %v %+v", err, rs)
	}
	// QEMU refuses: exit 3, nothing to print.
	tn.qemu.ignore, tn.qemu.refuse = false, "GenericError"
	rs, err = Run(ctx, tn.node, v, disks, Request{Change: change(map[string]float64{"mbps_wr": 30})})
	if rs != nil || exitcode.Of(err) != exitcode.Unreachable || !strings.Contains(err.Error(), "VM 370: QEMU refused the limits: qom-set scsi1:") || !strings.HasSuffix(err.Error(), "(nothing was changed)") {
		t.Errorf("refused: %v", err)
	}
}

// TestBusySocket (issue 15 #6): another client holds the QMP socket for
// 1.5 s; limit waits it out like the other commands, for the first read,
// the change and the read-back. Held longer than the timeout: exit 3.
func TestBusySocket(t *testing.T) {
	tn := newTestNode(t, "blockdev", true)
	tn.qemu.set("scsi1", lab)
	v, disks := tn.load(t, "scsi1")
	release := tn.qemu.Hold(t)
	time.AfterFunc(1500*time.Millisecond, release)
	start := time.Now()
	rs, err := Run(context.Background(), tn.node, v, disks, Request{Change: change(map[string]float64{"mbps_wr": 30})})
	if err != nil || !rs[0].Apply.Confirmed || time.Since(start) < 1400*time.Millisecond {
		t.Fatalf("after %s: %v", time.Since(start), err)
	}
	// Held for longer than --timeout (2 s here).
	release = tn.qemu.Hold(t)
	defer release()
	rs, err = Run(context.Background(), tn.node, v, disks, Request{Change: change(map[string]float64{"mbps_wr": 40})})
	if rs != nil || exitcode.Of(err) != exitcode.Unreachable || !strings.Contains(err.Error(), "VM 370: QMP socket busy") {
		t.Errorf("held: %v", err)
	}
	// Showing prints what the config says, and says why the rest is missing.
	rs, err = Run(context.Background(), tn.node, v, disks, Request{})
	if exitcode.Of(err) != exitcode.Unreachable || len(rs) != 1 || rs[0].Limits.Running != nil || len(rs[0].Notes) != 1 || !strings.HasPrefix(rs[0].Notes[0], "QMP socket busy (another client") {
		t.Errorf("show held: %v %+v", err, rs)
	}
}

func TestRunRefusesDisk(t *testing.T) {
	tn := newTestNode(t, "blockdev", true)
	cfg := tn.config(t) + "ide2: none,media=cdrom\nscsi5: /dev/sdz,scsiblock=1\n[PENDING]\nscsi1: local-lvm:vm-370-disk-1,iothread=1,size=256M,cache=writeback\n"
	tn.writeConfig(t, cfg)
	for _, tc := range []struct {
		disk    string
		persist bool
		err     string
	}{
		{"ide2", false, "limit: ide2 is a CD-ROM drive"},
		{"scsi5", false, "limit: scsi5 is passed through with scsiblock=1"},
		{"scsi1", true, "limit: scsi1 has a pending change in [PENDING]; qm set would replace it"},
	} {
		v, disks := tn.load(t, tc.disk)
		rs, err := Run(context.Background(), tn.node, v, disks, Request{Change: change(map[string]float64{"mbps_wr": 20}), Persist: tc.persist})
		if rs != nil || exitcode.Of(err) != exitcode.Usage || !strings.HasPrefix(err.Error(), tc.err) {
			t.Errorf("%s: %v", tc.disk, err)
		}
	}
	// A disk only [PENDING] adds.
	tn.writeConfig(t, tn.config(t)+"[PENDING]\nvirtio5: local-lvm:vm-370-disk-9,size=1G\n")
	v, disks := tn.load(t, "virtio5")
	if _, err := Run(context.Background(), tn.node, v, disks, Request{Change: change(map[string]float64{"mbps_wr": 20})}); err == nil || err.Error() != "limit: virtio5 is not in VM 370's config" {
		t.Errorf("pending only: %v", err)
	}
	// Only a CD-ROM named: nothing to show.
	v, disks = tn.load(t, "ide2")
	if rs, err := Run(context.Background(), tn.node, v, disks, Request{}); rs != nil || exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "no disk with limits to show") {
		t.Errorf("show a CD-ROM: %v", err)
	}
	if len(tn.qemu.commands()) != 0 {
		t.Errorf("QEMU got %v", tn.qemu.commands())
	}
}

// TestPersist: qm set with the config line and the new numbers; the config
// read back; QEMU read back when the VM runs.
func TestPersist(t *testing.T) {
	tn := newTestNode(t, "blockdev", true)
	tn.useQM(t)
	tn.writeConfig(t, strings.Replace(tn.config(t), "size=256M\nvirtio1", "size=256M,mbps_wr=20.000\nvirtio1", 1))
	v, disks := tn.load(t, "scsi1")
	ctx := context.Background()
	req := Request{Change: change(map[string]float64{"iops_rd": 500}), Persist: true}
	line := "local-lvm:vm-370-disk-1,iothread=1,size=256M,mbps_wr=20,iops_rd=500"
	digest := sha1hex(tn.config(t)) // of the config the line was built from

	dry := req
	dry.DryRun = true
	rs, err := Run(ctx, tn.node, v, disks, dry)
	if err != nil || rs[0].Apply.Command != "qm set 370 --scsi1 "+line+" --digest "+digest || rs[0].Apply.Method != QMSet || len(tn.qmCalls(t)) != 0 {
		t.Fatalf("dry run: %v %+v %v", err, rs[0].Apply, tn.qmCalls(t))
	}

	// Proxmox applies the saved line live itself: the fake QEMU is given
	// what it would apply.
	tn.qemu.set("scsi1", qemuserver.Limits{"bps-write": 20 * mib, "iops-read": 500})
	rs, err = Run(ctx, tn.node, v, disks, req)
	if err != nil {
		t.Fatal(err)
	}
	if calls := tn.qmCalls(t); !reflect.DeepEqual(calls, [][]string{{"set", "370", "--scsi1", line, "--digest", digest}}) {
		t.Errorf("qm calls %q", calls)
	}
	a := rs[0].Apply
	if !a.Persisted || !a.Confirmed || a.Output != "update VM 370: -scsi1 "+line || !reflect.DeepEqual(a.Before, Set{"mbps_wr": 20}) ||
		!reflect.DeepEqual(rs[0].Limits.Configured, Set{"mbps_wr": 20, "iops_rd": 500}) || len(rs[0].Limits.Differs) != 0 {
		t.Errorf("persist: %+v %+v", a, rs[0].Limits)
	}
	if !strings.Contains(tn.config(t), "\nscsi1: "+line+"\n") {
		t.Errorf("config:\n%s", tn.config(t))
	}

	// QEMU did not get it (Proxmox skipped the live part): exit 1.
	v, disks = tn.load(t, "scsi1")
	rs, err = Run(ctx, tn.node, v, disks, Request{Change: change(map[string]float64{"iops_rd": 600}), Persist: true})
	if exitcode.Of(err) != exitcode.Problem || !strings.Contains(err.Error(), "qm set saved the config, but QEMU runs scsi1 with") || !rs[0].Apply.Persisted || rs[0].Apply.Confirmed {
		t.Errorf("not live: %v %+v", err, rs)
	}

	// qm fails: exit 3 with its message, nothing printed.
	if err := os.WriteFile(filepath.Join(tn.root, "qm.fail"), []byte("VM 370 is locked (backup)\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	v, disks = tn.load(t, "scsi1")
	before := tn.config(t)
	rs, err = Run(ctx, tn.node, v, disks, Request{Change: change(map[string]float64{"iops_rd": 700}), Persist: true})
	if rs != nil || exitcode.Of(err) != exitcode.Unreachable || !strings.Contains(err.Error(), "locked (backup)") || !strings.Contains(err.Error(), "nothing confirmed; check 'qm config 370'") || tn.config(t) != before {
		t.Errorf("qm failing: %v", err)
	}
	os.Remove(filepath.Join(tn.root, "qm.fail"))

	// A config value Proxmox would not take is not carried into qm: a hex
	// float is refused as the line is read (Proxmox's number format), before
	// anything can run.
	tn.writeConfig(t, strings.Replace(tn.config(t), ",mbps_wr=20,", ",mbps_wr=0x1p4,", 1))
	calls := len(tn.qmCalls(t))
	v, err = vm.Load(context.Background(), node.New(tn.node.Paths, 0), 370)
	if err == nil {
		_, err = v.Select([]string{"scsi1"})
	}
	if exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "mbps_wr") || !strings.Contains(err.Error(), "0x1p4") || len(tn.qmCalls(t)) != calls {
		t.Errorf("bad config value: %v", err)
	}
}

func TestPersistStopped(t *testing.T) {
	tn := newTestNode(t, "", false)
	tn.useQM(t)
	v, disks := tn.load(t, "scsi1")
	rs, err := Run(context.Background(), tn.node, v, disks, Request{Change: change(map[string]float64{"mbps_wr": 0.5}), Persist: true})
	if err != nil {
		t.Fatal(err)
	}
	a := rs[0].Apply
	if !a.Persisted || !a.Confirmed || a.After != nil || !reflect.DeepEqual(rs[0].Limits.Configured, Set{"mbps_wr": 0.5}) ||
		rs[0].Notes[len(rs[0].Notes)-1] != "VM 370 is stopped: the config is changed, the limits apply at the next start" {
		t.Errorf("%+v %+v", a, rs[0])
	}
	// qm that exits 0 and saves nothing: exit 1, printed.
	if err := os.WriteFile(filepath.Join(tn.root, "qm.noop"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	v, disks = tn.load(t, "scsi1")
	rs, err = Run(context.Background(), tn.node, v, disks, Request{Change: change(map[string]float64{"mbps_wr": 7}), Persist: true})
	if exitcode.Of(err) != exitcode.Problem || err.Error() != "limit: qm set ran, but scsi1's config line does not carry the new limits" || rs == nil || rs[0].Apply.Persisted {
		t.Errorf("qm saved nothing: %v", err)
	}
}

// TestJudgeWindow: the verdicts of a recorded window against the limits
// read before it; limits changed during it; limits unreadable before it.
func TestJudgeWindow(t *testing.T) {
	f := loadSeries(t, "series-blockdev-warm.json")
	tn := newTestNode(t, "blockdev", true)
	tn.qemu.set("scsi1", lab)
	v, disks := tn.load(t, "scsi1")
	ctx := context.Background()
	fresh := func() *Result { return &Result{Disk: "scsi1", Limits: setsFor(disks[0], lab, true)} }

	res := fresh()
	if err := judgeWindow(ctx, tn.node, v, disks[0], res, f.measurement(t0), nil); err != nil {
		t.Fatal(err)
	}
	vj := res.Verify
	if len(vj.Verdicts) != 2 || vj.Verdicts[0].Limit != "iops_rd" || vj.Verdicts[1].Limit != "mbps_wr" || vj.Verdicts[0].Verdict != Holds || vj.Verdicts[1].Verdict != Holds {
		t.Errorf("verdicts %+v", vj.Verdicts)
	}
	if vj.WindowS != 10 || vj.SkippedS != 3 || vj.SteadyS < 6.9 || vj.SampledS != 7 || vj.Samples != 21 || vj.Missed != 0 || vj.Gaps == nil || len(vj.Gaps) != 0 || vj.ChangedTo != nil || len(res.Notes) != 0 {
		t.Errorf("verify %+v, notes %v", vj, res.Notes)
	}
	if m := vj.Measured; m.WriteBps < 19*mib || m.ReadIOPS < 480 || m.WriteQueueDepth < 6 || m.ReadLatencyMs <= 0 {
		t.Errorf("measured %+v", m)
	}
	for _, vd := range vj.Verdicts {
		if strings.Contains(vd.Reason, "stands on") {
			t.Errorf("a window without gaps: %q", vd.Reason)
		}
	}

	// Loosened behind the tool's back during the window: judged against
	// the limits read before, the change reported.
	tn.qemu.set("scsi1", qemuserver.Limits{"bps-write": 80 * mib, "iops-read": 500})
	res = fresh()
	if err := judgeWindow(ctx, tn.node, v, disks[0], res, f.measurement(t0), nil); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(res.Verify.ChangedTo, Set{"mbps_wr": 80, "iops_rd": 500}) || len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "changed during the window (now {bps-write=83886080 iops-read=500})") {
		t.Errorf("changed: %+v %v", res.Verify.ChangedTo, res.Notes)
	}

	// Tightened to 10 MiB/s before the window: 20 MiB/s exceeds it.
	res = &Result{Disk: "scsi1", Limits: setsFor(disks[0], qemuserver.Limits{"bps-write": 10 * mib, "iops-read": 500}, true)}
	if err := judgeWindow(ctx, tn.node, v, disks[0], res, f.measurement(t0), nil); !errors.Is(err, exitcode.ErrProblem) || verdictFor(t, res.Verify.Verdicts, "mbps_wr").Verdict != Exceeded {
		t.Errorf("exceeded: %v %+v", err, res.Verify.Verdicts)
	}

	// The first read failed: the limits read after the window are judged.
	tn.qemu.set("scsi1", lab)
	res = &Result{Disk: "scsi1", Limits: setsFor(disks[0], nil, false)}
	if err := judgeWindow(ctx, tn.node, v, disks[0], res, f.measurement(t0), nil); err != nil || len(res.Verify.Verdicts) != 2 ||
		!reflect.DeepEqual(res.Limits.Running, Set{"mbps_wr": 20, "iops_rd": 500}) ||
		!reflect.DeepEqual(res.Notes, []string{"the running limits of scsi1 could not be read before the window: the verdicts judge those read after it"}) {
		t.Errorf("unread before: %v %+v %v", err, res.Verify, res.Notes)
	}
	// ... and after it too: exit 3, and the message ends in what failed.
	release := tn.qemu.Hold(t)
	res = &Result{Disk: "scsi1", Limits: setsFor(disks[0], nil, false)}
	err := judgeWindow(ctx, tn.node, v, disks[0], res, f.measurement(t0), nil)
	release()
	if exitcode.Of(err) != exitcode.Unreachable || !strings.Contains(err.Error(), "could not be read before the window or after it: VM 370: QMP socket busy") {
		t.Errorf("unread: %v", err)
	}

	// A disk without limits: rates, no verdicts, a note.
	tn.qemu.set("scsi1", nil)
	res = &Result{Disk: "scsi1", Limits: setsFor(disks[0], nil, true)}
	if err := judgeWindow(ctx, tn.node, v, disks[0], res, f.measurement(t0), nil); err != nil || res.Verify.Verdicts == nil || len(res.Verify.Verdicts) != 0 ||
		!reflect.DeepEqual(res.Notes, []string{"scsi1 runs without limits: nothing to verify (rates measured anyway)"}) {
		t.Errorf("no limits: %v %+v %v", err, res.Verify, res.Notes)
	}
}

// TestJudgeWindowWithGaps (issue 15 #8): QEMU stopped for 3 s: the gap and
// what the verdicts stand on are said, in each verdict too.
func TestJudgeWindowWithGaps(t *testing.T) {
	f := loadSeries(t, "series-blockdev-stopped.json")
	tn := newTestNode(t, "blockdev", true)
	tn.qemu.set("scsi1", lab)
	v, disks := tn.load(t, "scsi1")
	res := &Result{Disk: "scsi1", Limits: setsFor(disks[0], lab, true)}
	m := f.measurement(t0)
	if err := judgeWindow(context.Background(), tn.node, v, disks[0], res, m, nil); err != nil {
		t.Fatal(err)
	}
	vj := res.Verify
	if len(vj.Gaps) != 1 || vj.Missed != m.Missed || vj.Missed < 5 || vj.SampledS >= 7 || vj.SampledS < 5 {
		t.Fatalf("verify %+v", vj)
	}
	g := vj.Gaps[0]
	want := fmt.Sprintf("; it stands on %.1f s of the 7.0 s steady part (no sample from %.1f s to %.1f s)", vj.SampledS, g.FromS, g.ToS)
	for _, vd := range vj.Verdicts {
		if !strings.HasSuffix(vd.Reason, want) {
			t.Errorf("%s: %q, want it to end in %q", vd.Limit, vd.Reason, want)
		}
	}
	// Too few samples: exit 3, a message that says why, no "<nil>"; what
	// was sampled is still reported, without a cut (the window ran out).
	m.Samples = m.Samples[:len(m.Samples)-9]
	few := &Result{Limits: res.Limits}
	err := judgeWindow(context.Background(), tn.node, v, disks[0], few, m, nil)
	if exitcode.Of(err) != exitcode.Unreachable || strings.Contains(err.Error(), "nil") || !strings.HasPrefix(err.Error(), "VM 370: not enough samples for a verdict: ") ||
		!strings.HasSuffix(err.Error(), " taken, "+itoa(m.Missed)+" missed: QMP socket busy or QEMU not answering)") {
		t.Errorf("too few: %v", err)
	}
	if vj := few.Verify; vj == nil || vj.Samples != len(m.Samples) || vj.Cut != nil || vj.Verdicts == nil || len(vj.Verdicts) != 0 || len(vj.Gaps) == 0 || vj.Gaps[len(vj.Gaps)-1].ToS != 10 {
		t.Errorf("too few: %+v", vj)
	}
}

// TestVerifyWindow: the whole --verify through the sampler, the recorded
// counters served by the fake QEMU at 2 Hz; the first read of the running
// limits fails, and the run that sampled its window does not end on it.
func TestVerifyWindow(t *testing.T) {
	f := loadSeries(t, "series-drive-warm.json")
	tn := newTestNode(t, "drive", true)
	tn.qemu.set("scsi1", lab)
	tn.qemu.failReads = 1
	for _, s := range f.Samples[:11] {
		tn.qemu.serve(s.Return)
	}
	v, disks := tn.load(t, "scsi1")
	var ticks []time.Duration
	onSample := func(tk sampler.Tick) {
		ticks = append(ticks, tk.Elapsed)
		if tk.Window != MinWindow || tk.Sample.Stats["scsi1"].WrOps == 0 || tk.N != len(ticks) {
			t.Errorf("sample %+v", tk)
		}
	}
	rs, err := Run(context.Background(), tn.node, v, disks, Request{Verify: MinWindow, OnSample: onSample})
	if err != nil {
		t.Fatal(err)
	}
	vj := rs[0].Verify
	if len(ticks) != 11 || vj.Samples != 11 || vj.WindowS != 5 || vj.SteadyS < 1.9 || len(vj.Verdicts) != 2 {
		t.Errorf("%d ticks, %+v", len(ticks), vj)
	}
	if !reflect.DeepEqual(rs[0].Notes, []string{"the running limits of scsi1 could not be read before the window: the verdicts judge those read after it"}) {
		t.Errorf("notes %q", rs[0].Notes)
	}
	for _, vd := range vj.Verdicts {
		if vd.Verdict != Holds {
			t.Errorf("%s: %s %s", vd.Limit, vd.Verdict, vd.Reason)
		}
	}
}

func TestVerifyFails(t *testing.T) {
	tn := newTestNode(t, "blockdev", true)
	tn.qemu.set("scsi1", lab)
	v, disks := tn.load(t, "scsi1")
	// Interrupted (Ctrl-C) during the window, right after its third
	// sample: exit 3, the limits printed and the samples taken, cut where
	// it was interrupted. The interruption comes from the hook, not a
	// clock: a loaded machine may take a tick late (it once made a 1.2 s
	// deadline land after a fourth sample).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var taken int
	var last time.Duration
	onSample := func(tk sampler.Tick) {
		if taken++; taken == 3 {
			last = tk.Elapsed
			cancel()
		}
	}
	rs, err := Run(ctx, tn.node, v, disks, Request{Verify: MinWindow, OnSample: onSample})
	if exitcode.Of(err) != exitcode.Unreachable || len(rs) != 1 || rs[0].Limits.Running == nil || rs[0].Verify == nil || rs[0].Verify.Cut == nil {
		t.Fatalf("interrupted: %v %+v", err, rs)
	}
	vj := rs[0].Verify
	if vj.Samples != 3 || vj.Cut.Why != CutInterrupted || vj.Cut.AtS < units.Round(last.Seconds(), 1)-0.1 || vj.Cut.AtS > last.Seconds()+0.2 || vj.Measured != nil || len(vj.Verdicts) != 0 {
		t.Errorf("interrupted after the sample at %s: %+v (cut %+v)", last, vj, vj.Cut)
	}
	if want := fmt.Sprintf("interrupted %.1f s into the 5s window: ", vj.Cut.AtS); !strings.HasPrefix(err.Error(), want) {
		t.Errorf("interrupted: %v, want %q...", err, want)
	}
	// QEMU fails query-blockstats: exit 3 at once, the cut says why.
	tn.qemu.failStats = true
	start := time.Now()
	rs, err = Run(context.Background(), tn.node, v, disks, Request{Verify: MinWindow})
	if exitcode.Of(err) != exitcode.Unreachable || !strings.HasPrefix(err.Error(), "VM 370: sampling stopped 0.0 s into the 5s window (blockstats broke (GenericError)): ") || len(rs) != 1 || time.Since(start) > 2*time.Second {
		t.Errorf("failing: %v %+v after %s", err, rs, time.Since(start))
	}
	if vj := rs[0].Verify; vj == nil || vj.Samples != 0 || vj.Cut == nil || vj.Cut.Why != "blockstats broke (GenericError)" || !reflect.DeepEqual(vj.Gaps, []Gap{{0, 5}}) {
		t.Errorf("failing: %+v", vj)
	}
}

// TestVerifyCut (issue 21 #5): QEMU dies mid-window (qmptest's Kill: the
// connection cut, the socket left refusing). Before, limit exited 3 and
// printed no sample, no gap and no verify object. Now the samples taken,
// the gap to the window's end and the cut are kept, and the rates when
// the steady part had two samples; the verdicts when it has MinSteady of
// them, saying what they stand on; exit 3 either way.
func TestVerifyCut(t *testing.T) {
	f := loadSeries(t, "series-drive-warm.json")
	for _, c := range []struct {
		name   string
		killAt time.Duration // the sample after which QEMU dies
		exited bool          // the process gone from procfs too
		why    string
	}{
		{"at 4 s of 8 s, the process gone", 4 * time.Second, true, "QEMU (pid 4242) exited"},
		{"at 5.5 s of 8 s, the socket refusing", 5500 * time.Millisecond, false, "no QMP socket at "},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			tn := newTestNode(t, "drive", true)
			tn.qemu.set("scsi1", lab)
			for _, s := range f.Samples {
				tn.qemu.serve(s.Return)
			}
			v, disks := tn.load(t, "scsi1")
			taken := 0
			var last time.Duration
			onSample := func(tk sampler.Tick) {
				taken++
				last = tk.Elapsed
				if taken == int(c.killAt/Interval)+1 { // the sample at killAt
					tn.qemu.Kill()
					if c.exited {
						os.Remove(filepath.Join(tn.root, "proc/4242/stat"))
					}
				}
			}
			rs, err := Run(context.Background(), tn.node, v, disks, Request{Verify: 8 * time.Second, OnSample: onSample})
			if exitcode.Of(err) != exitcode.Unreachable || len(rs) != 1 {
				t.Fatalf("%v (exit %d) %+v", err, exitcode.Of(err), rs)
			}
			// A busy machine may delay a tick: what is asserted is what
			// the hook saw, the schedule only where it cannot move a verdict.
			at := last.Seconds()
			vj := rs[0].Verify
			if vj == nil || vj.Cut == nil || vj.Samples != taken || taken != int(c.killAt/Interval)+1 || vj.WindowS != 8 {
				t.Fatalf("taken %d, verify %+v", taken, vj)
			}
			if vj.Cut.AtS < at-0.1 || vj.Cut.AtS > at+0.1 || vj.Cut.AtS < c.killAt.Seconds()-0.1 || !strings.HasPrefix(vj.Cut.Why, c.why) {
				t.Errorf("cut %+v, last sample at %.2f s", vj.Cut, at)
			}
			if !strings.Contains(err.Error(), "VM 370: sampling stopped ") || !strings.Contains(err.Error(), " s into the 8s window ("+c.why) || !strings.HasSuffix(err.Error(), "the report shows what was measured until then") {
				t.Errorf("err %v", err)
			}
			// The last gap runs from the last sample to the window's end.
			if g := vj.Gaps; len(g) == 0 || vj.Missed == 0 && len(g) != 1 || g[len(g)-1] != (Gap{vj.Cut.AtS, 8}) || vj.Missed == 0 && vj.SampledS != units.Round(vj.Cut.AtS-Skip.Seconds(), 2) {
				t.Errorf("gaps %+v sampled %.2f, %d missed", g, vj.SampledS, vj.Missed)
			}
			if vj.Measured == nil || vj.Measured.WriteBps < 18*mib || vj.Measured.WriteBps > 22*mib || vj.SteadyS < at-Skip.Seconds()-0.1 {
				t.Errorf("measured %+v over %.2f s", vj.Measured, vj.SteadyS)
			}
			if c.killAt-Skip < MinSteady {
				if len(vj.Verdicts) != 0 || vj.Verdicts == nil {
					t.Errorf("verdicts on %.1f s: %+v", vj.SteadyS, vj.Verdicts)
				}
				return
			}
			if len(vj.Verdicts) != 2 {
				t.Fatalf("verdicts %+v", vj.Verdicts)
			}
			for _, vd := range vj.Verdicts {
				if vd.Verdict != Holds || !strings.Contains(vd.Reason, fmt.Sprintf("it stands on %.1f s of the 5.0 s steady part (no sample from ", vj.SampledS)) ||
					!strings.HasSuffix(vd.Reason, fmt.Sprintf("%.1f s to 8.0 s)", vj.Cut.AtS)) {
					t.Errorf("%s: %s %s", vd.Limit, vd.Verdict, vd.Reason)
				}
			}
		})
	}
}

func TestThrottled(t *testing.T) {
	drive := func(line string) *qemuserver.Drive {
		d, err := qemuserver.ParseDrive("scsi5", line)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	running := &qemuserver.DiskSettings{}
	for _, tc := range []struct {
		d    *vm.Disk
		want bool
	}{
		{&vm.Disk{Drive: drive("local-lvm:vm-370-disk-1"), Running: running}, true},
		{&vm.Disk{Running: running}, true}, // running, not in the config (hot-plugged)
		{&vm.Disk{Drive: drive("local-lvm:vm-370-disk-1")}, false},
		{&vm.Disk{Drive: drive("/dev/sdz,scsiblock=1"), Running: running}, false},
		{&vm.Disk{Drive: drive("local:iso/x.iso,media=cdrom"), Running: running}, false},
	} {
		for _, blockdev := range []bool{true, false} {
			if got := throttled(&vm.VM{Blockdev: blockdev}, tc.d); got != tc.want {
				t.Errorf("blockdev %v, %+v: %v", blockdev, tc.d.Drive, got)
			}
		}
	}
}

// TestStandsOn: only gaps that reach into the steady part are named.
func TestStandsOn(t *testing.T) {
	m := &Measurement{Window: 10 * time.Second}
	vj := &Verification{SampledS: 5, Gaps: []Gap{{0, 3}, {4, 6}, {9.2, 10}}}
	if got := standsOn(m, vj); got != "it stands on 5.0 s of the 7.0 s steady part (no sample from 4.0 s to 6.0 s, 9.2 s to 10.0 s)" {
		t.Errorf("%q", got)
	}
	vj = &Verification{SampledS: 7, Gaps: []Gap{{0, 3}}}
	if got := standsOn(m, vj); got != "" {
		t.Errorf("a gap before the steady part: %q", got)
	}
}

// TestPersistRace (issue 21 #3): another admin's qm set lands between the
// read of the config and limit's qm set. qm refuses the stale --digest; the
// config is read again and the line rebuilt from it, so the other edit
// survives; a second race is exit 3 naming it, and a race that leaves a
// pending change is refused as one; nothing else changes.
func TestPersistRace(t *testing.T) {
	const other = "local-lvm:vm-370-disk-1,cache=writeback,discard=on,iothread=1,size=256M"
	race := func(tn *testNode, n int, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(tn.root, "qm.race."+itoa(n)), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	req := Request{Change: change(map[string]float64{"mbps_wr": 0.5}), Persist: true}

	t.Run("stopped: retried on top of the other edit", func(t *testing.T) {
		tn := newTestNode(t, "", false)
		tn.useQM(t)
		v, disks := tn.load(t, "scsi1")
		first := sha1hex(tn.config(t))
		edited := strings.Replace(tn.config(t), "scsi1: local-lvm:vm-370-disk-1,iothread=1,size=256M", "scsi1: "+other, 1)
		race(tn, 1, edited)
		rs, err := Run(ctx, tn.node, v, disks, req)
		if err != nil {
			t.Fatalf("%v", err)
		}
		line := other + ",mbps_wr=0.5"
		calls := tn.qmCalls(t)
		if len(calls) != 2 || calls[0][5] != first || !reflect.DeepEqual(calls[1], []string{"set", "370", "--scsi1", line, "--digest", sha1hex(edited)}) {
			t.Errorf("qm calls %q", calls)
		}
		// The other admin's cache and discard are in the saved line; only
		// scsi1's limit changed.
		if want := strings.Replace(edited, "scsi1: "+other, "scsi1: "+line, 1); tn.config(t) != want {
			t.Errorf("config:\n%s\nwant:\n%s", tn.config(t), want)
		}
		a := rs[0].Apply
		if !a.Persisted || !a.Confirmed || a.Command != "qm set 370 --scsi1 "+line+" --digest "+sha1hex(edited) ||
			!reflect.DeepEqual(rs[0].Limits.Configured, Set{"mbps_wr": 0.5}) {
			t.Errorf("apply %+v, limits %+v", a, rs[0].Limits)
		}
		if n := rs[0].Notes; len(n) == 0 || !strings.Contains(n[len(n)-1], "config changed between reading it and saving") || !strings.Contains(n[len(n)-1], "saved on top of the other change") {
			t.Errorf("notes %q", n)
		}
	})

	t.Run("raced twice: exit 3, nothing saved", func(t *testing.T) {
		tn := newTestNode(t, "", false)
		tn.useQM(t)
		v, disks := tn.load(t, "scsi1")
		race(tn, 1, strings.Replace(tn.config(t), "cores: 2", "cores: 4", 1))
		second := strings.Replace(tn.config(t), "scsi1: local-lvm:vm-370-disk-1,iothread=1,size=256M", "scsi1: "+other, 1)
		race(tn, 2, second)
		rs, err := Run(ctx, tn.node, v, disks, req)
		if rs != nil || exitcode.Of(err) != exitcode.Unreachable || !strings.Contains(err.Error(), "VM 370's config changed between reading it and saving (qm set --digest: checksum mismatch") ||
			!strings.Contains(err.Error(), "nothing was saved") || !strings.Contains(err.Error(), "twice") {
			t.Fatalf("%v (exit %d)", err, exitcode.Of(err))
		}
		if len(tn.qmCalls(t)) != 2 || tn.config(t) != second {
			t.Errorf("qm calls %q, config:\n%s", tn.qmCalls(t), tn.config(t))
		}
	})

	t.Run("running: the other edit is pending", func(t *testing.T) {
		tn := newTestNode(t, "blockdev", true)
		tn.useQM(t)
		v, disks := tn.load(t, "scsi1")
		// qemu-server puts a cache change of a running VM in [PENDING].
		edited := tn.config(t) + "\n[PENDING]\nscsi1: " + other + "\n"
		race(tn, 1, edited)
		rs, err := Run(ctx, tn.node, v, disks, req)
		if rs != nil || exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "config changed between reading it and saving") ||
			!strings.Contains(err.Error(), "scsi1 has a pending change in [PENDING]") {
			t.Fatalf("%v (exit %d)", err, exitcode.Of(err))
		}
		if len(tn.qmCalls(t)) != 1 || tn.config(t) != edited || len(tn.qemu.commands()) != 0 {
			t.Errorf("qm calls %q, QEMU got %v, config:\n%s", tn.qmCalls(t), tn.qemu.commands(), tn.config(t))
		}
	})
}

// TestApplyLiveUnchanged: values equal to the running limits send nothing,
// and the result says so; one value off sends the command.
func TestApplyLiveUnchanged(t *testing.T) {
	for _, gen := range gens {
		t.Run(gen, func(t *testing.T) {
			tn := newTestNode(t, gen, true)
			tn.qemu.set("scsi1", lab)
			v, disks := tn.load(t, "scsi1")
			for _, dry := range []bool{false, true} {
				rs, err := Run(context.Background(), tn.node, v, disks, Request{Change: change(map[string]float64{"mbps_wr": 20, "iops_rd": 500}), DryRun: dry})
				if err != nil {
					t.Fatal(err)
				}
				a := rs[0].Apply
				if a == nil || !a.Unchanged || !a.Confirmed || !reflect.DeepEqual(a.After, a.Before) || !reflect.DeepEqual(a.Before, Set{"mbps_wr": 20, "iops_rd": 500}) || len(tn.qemu.commands()) != 0 {
					t.Fatalf("dry %v: %+v, QEMU got %v", dry, a, tn.qemu.commands())
				}
				if !reflect.DeepEqual(rs[0].Notes, []string{"scsi1 already runs with these limits: nothing was sent (a live rewrite would restart the throttle's accounting for no change)"}) {
					t.Errorf("notes %q", rs[0].Notes)
				}
			}
			rs, err := Run(context.Background(), tn.node, v, disks, Request{Change: change(map[string]float64{"mbps_wr": 21})})
			if err != nil || rs[0].Apply.Unchanged || len(tn.qemu.commands()) != 1 {
				t.Errorf("one value off: %v %+v %v", err, rs[0].Apply, tn.qemu.commands())
			}
		})
	}
}
