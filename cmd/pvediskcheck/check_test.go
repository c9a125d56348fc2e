package main

import (
	"context"
	"errors"
	"time"

	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
)

func findingsByCode(v check.VMResult) map[string][]check.Finding {
	m := map[string][]check.Finding{}
	for _, f := range v.Findings {
		m[string(f.Code)] = append(m[string(f.Code)], f)
	}
	return m
}

// TestCheckFindingsOnConfig covers every config-only code on a stopped VM.
func TestCheckFindingsOnConfig(t *testing.T) {
	n := fakenode.NewT(t)
	for _, v := range []string{"vm-380-disk-0", "vm-380-disk-1", "vm-380-disk-2", "vm-380-disk-3", "vm-380-disk-4"} {
		n.MustVolume(t, "local-lvm", v, 64<<20)
	}
	n.MustVolume(t, "local", "380/vm-380-disk-9.raw", 64<<20)
	cfg := `ostype: l26
scsihw: lsi
scsi0: local-lvm:vm-380-disk-0,aio=native,cache=writeback,discard=on,size=64M
scsi1: local-lvm:vm-380-disk-1,iothread=1,cache=unsafe,discard=on,size=64M
virtio0: local-lvm:vm-380-disk-2,ssd=1,discard=on,size=64M
sata0: local-lvm:vm-380-disk-3,iothread=1,size=64M
sata1: local-lvm:vm-380-disk-4,discard=on,mbps=10,mbps_rd=5,size=64M
scsi2: local:380/vm-380-disk-9.raw,size=64M
`
	if err := n.WriteConfig(380, cfg); err != nil {
		t.Fatal(err)
	}
	var out check.Report
	errs, code := runJSON(t, n, &out, "check", "380")
	if code != 1 {
		t.Fatalf("exit %d (%s), want 1", code, errs)
	}
	got := findingsByCode(out.VMs[0])
	want := map[string]struct{ sev, disk, fixHas string }{
		// One command per disk fixes everything found on it (issue 14 #7):
		// dropping cache=writeback gives O_DIRECT, so aio=native can stay;
		// scsihw lsi is emulated (issue 26 #2), so every SCSI disk's fix
		// makes it VirtIO SCSI, and so does the move off SATA (#1).
		"aio-native-needs-direct": {"error", "scsi0", "qm set 380 --scsihw virtio-scsi-single --scsi0 local-lvm:vm-380-disk-0,aio=native,discard=on,size=64M"},
		"iothread-ignored":        {"warning", "scsi1", "qm set 380 --scsihw virtio-scsi-single --scsi1 local-lvm:vm-380-disk-1,iothread=1,discard=on,size=64M"},
		"cache-unsafe":            {"error", "scsi1", "qm set 380 --scsihw virtio-scsi-single --scsi1 local-lvm:vm-380-disk-1,iothread=1,discard=on,size=64M"},
		"cache-writeback":         {"warning", "scsi0", "qm set 380 --scsihw virtio-scsi-single --scsi0 local-lvm:vm-380-disk-0,aio=native,discard=on,size=64M"},
		"ssd-unsupported":         {"error", "virtio0", "qm set 380 --virtio0 local-lvm:vm-380-disk-2,discard=on,size=64M"},
		"config-invalid":          {"error", "sata0", ""},
		"limit-invalid":           {"error", "sata1", "with the VM stopped: qm set 380 --scsihw virtio-scsi-single --delete sata1 --scsi3 local-lvm:vm-380-disk-4,discard=on,mbps_rd=5,size=64M"},
		"emulated-controller":     {"warning", "sata1", "with the VM stopped: qm set 380 --scsihw virtio-scsi-single --delete sata1 --scsi3 local-lvm:vm-380-disk-4,discard=on,mbps_rd=5,size=64M"},
		"discard-ignored-on-thin": {"warning", "scsi2", "qm set 380 --scsihw virtio-scsi-single --scsi2 local:380/vm-380-disk-9.raw,size=64M,discard=on"},
	}
	for code, w := range want {
		fs := got[code]
		if len(fs) == 0 {
			t.Errorf("no %s finding; got %+v", code, out.VMs[0].Findings)
			continue
		}
		f := fs[0]
		if string(f.Severity) != w.sev || f.Disk != w.disk || !strings.Contains(f.Fix, w.fixHas) || f.Message == "" {
			t.Errorf("%s: %+v, want severity %s disk %s fix containing %q", code, f, w.sev, w.disk, w.fixHas)
		}
	}
	if !strings.Contains(got["aio-native-needs-direct"][0].Message, check.QEMUNativeMsg) {
		t.Errorf("aio finding does not quote QEMU: %s", got["aio-native-needs-direct"][0].Message)
	}
	var emulated []string
	for _, f := range got["emulated-controller"] {
		emulated = append(emulated, f.Disk)
	}
	if !slices.Equal(emulated, []string{"sata1", "scsi0", "scsi1", "scsi2"}) {
		t.Errorf("emulated-controller on %v, want sata1 and the three disks on lsi", emulated)
	}
	if out.Summary.Errors < 4 || out.Summary.Warnings < 4 || out.Summary.VMs != 1 {
		t.Errorf("summary %+v", out.Summary)
	}
	// --fail-on error still fails on errors; a clean VM passes.
	if _, _, code := runCLI(t, "--root", n.Root, "check", "--fail-on", "error", "380"); code != 1 {
		t.Errorf("--fail-on error: exit %d", code)
	}
	if _, errs, code := runCLI(t, "--root", n.Root, "check", "--fail-on", "bogus", "380"); code != 2 || !strings.Contains(errs, "--fail-on") {
		t.Errorf("bad --fail-on: %d %q", code, errs)
	}
}

// TestCheckPredictsRefusedStart: QEMU refuses aio=native without O_DIRECT with
// the very message check quotes.
func TestCheckPredictsRefusedStart(t *testing.T) {
	n := fakenode.NewT(t)
	n.MustVolume(t, "local-lvm", "vm-381-disk-1", 64<<20)
	n.WriteConfig(381, "scsihw: virtio-scsi-single\nscsi1: local-lvm:vm-381-disk-1,iothread=1,aio=native,cache=writeback,size=64M\n")
	var out check.Report
	runJSON(t, n, &out, "check", "381")
	f := findingsByCode(out.VMs[0])["aio-native-needs-direct"]
	if len(f) != 1 {
		t.Fatalf("findings %+v", out.VMs[0].Findings)
	}
	_, err := n.Start(381, fakenode.ArgvOptions{})
	var se *fakenode.StartError
	if !errors.As(err, &se) {
		t.Fatalf("QEMU started although check predicted it would not: %v", err)
	}
	if !strings.Contains(se.Stderr, check.QEMUNativeMsg) {
		t.Fatalf("QEMU's message changed: %s", se.Stderr)
	}
	t.Logf("%s refused as predicted: %s", qemuName(t), strings.TrimSpace(se.Stderr))
}

// TestCheckNoDriftOnProxmoxLayouts: a VM started from its own config shows no
// drift, across storages, controllers and both generations; then a live
// config edit is reported as drift and a [PENDING] change as pending-restart.
func TestCheckNoDriftOnProxmoxLayouts(t *testing.T) {
	for _, gen := range []string{"blockdev", "drive"} {
		t.Run(qemuName(t)+"/"+gen, func(t *testing.T) {
			n := fakenode.NewT(t)
			n.UseDoubles(t) // lvs: the local-lvm stand-in's pool
			lab370(t, n, "scsi2: local:370/vm-370-disk-5.qcow2,discard=on,cache=writeback,mbps_wr=20,iops_rd=500,size=64M\nvirtio2: local:370/vm-370-disk-6.raw,cache=directsync,detect_zeroes=0,iops=300,iops_max=600,size=64M\n")
			n.MustVolume(t, "local", "370/vm-370-disk-5.qcow2", 64<<20)
			n.MustVolume(t, "local", "370/vm-370-disk-6.raw", 64<<20)
			n.MustStart(t, 370, fakenode.ArgvOptions{Legacy: gen == "drive", Blockdev: gen == "blockdev"})
			var out check.Report
			runJSON(t, n, &out, "check", "370")
			for _, f := range out.VMs[0].Findings {
				if f.Code == "drift" || f.Code == "pending-restart" || f.Code == "config-invalid" {
					t.Errorf("unexpected %+v", f)
				}
			}
			if len(out.VMs[0].Notes) > 0 {
				t.Errorf("notes: %v", out.VMs[0].Notes)
			}
			for _, d := range out.VMs[0].Disks {
				if d.Running == nil || d.Configured == nil {
					t.Errorf("%s: configured %v running %v", d.ID, d.Configured, d.Running)
				}
			}
			// Edit the main section behind the VM's back and add a pending change.
			cfgPath := n.Paths.VMConfig(370)
			b, _ := os.ReadFile(cfgPath)
			s := strings.Replace(string(b), "virtio1: local-lvm:vm-370-disk-2,iothread=1", "virtio1: local-lvm:vm-370-disk-2,iothread=1,detect_zeroes=0", 1)
			s += "\n[PENDING]\nscsi1: local-lvm:vm-370-disk-1,iothread=1,cache=writeback,size=256M\n"
			os.WriteFile(cfgPath, []byte(s), 0o644)
			runJSON(t, n, &out, "check", "370")
			got := findingsByCode(out.VMs[0])
			if d := got["drift"]; len(d) != 1 || d[0].Disk != "virtio1" || !strings.Contains(d[0].Message, "detect_zeroes: config off, running on") {
				t.Errorf("drift: %+v", d)
			}
			if p := got["pending-restart"]; len(p) != 1 || p[0].Disk != "scsi1" {
				t.Errorf("pending: %+v", p)
			}
		})
	}
}

// TestCheckAllAndSupportBundle: --all over running and stopped VMs with one
// unparsable config, then the same node copied into a bundle (pid files and
// proc/<pid>/cmdline, no sockets).
func TestCheckAllAndSupportBundle(t *testing.T) {
	n := fakenode.NewT(t)
	lab370(t, n, "")
	vm := n.MustStart(t, 370, fakenode.ArgvOptions{})
	n.WriteConfig(371, "ostype: l26\nscsi0: local-lvm:vm-371-disk-0,size=1G\n")
	n.WriteConfig(372, "ostype: l26\nthis line is broken\n")
	var out check.Report
	runJSON(t, n, &out, "check", "--all")
	if out.Summary.VMs != 3 || len(out.VMs) != 3 {
		t.Fatalf("summary %+v", out.Summary)
	}
	// Proxmox skips the broken line and starts the VM: a note, no finding.
	if v := out.VMs[2]; len(v.Findings) != 0 || len(v.Notes) != 1 || !strings.Contains(v.Notes[0], `372.conf line 2: "this line is broken" is not a `) {
		t.Errorf("372: %+v %q", v.Findings, v.Notes)
	}
	stdout, _, _ := runCLI(t, "--root", n.Root, "check", "--all")
	if !strings.Contains(stdout, "3 VM(s) checked:") {
		t.Errorf("no summary line:\n%s", stdout)
	}

	// The bundle: configs, storage.cfg, pid file and the process' cmdline.
	b := t.TempDir()
	copyFile(t, n.Paths.StorageCfg(), filepath.Join(b, "etc/pve/storage.cfg"))
	copyFile(t, n.Paths.VMConfig(370), filepath.Join(b, "etc/pve/qemu-server/370.conf"))
	os.MkdirAll(filepath.Join(b, "var/run/qemu-server"), 0o755)
	os.WriteFile(filepath.Join(b, "var/run/qemu-server/370.pid"), []byte(strconv.Itoa(vm.Pid)+"\n"), 0o644)
	copyFile(t, "/proc/"+strconv.Itoa(vm.Pid)+"/cmdline", filepath.Join(b, "proc", strconv.Itoa(vm.Pid), "cmdline"))
	var bo check.Report
	if errs, code := runJSON(t, n, &bo, "--root", b, "check", "370"); code != 1 {
		t.Fatalf("bundle: exit %d %s %+v", code, errs, bo)
	}
	if f := findingsByCode(bo.VMs[0]); len(f["discard-ignored-on-thin"]) != 4 || len(f["drift"]) != 0 {
		t.Errorf("bundle findings: %+v", bo.VMs[0].Findings)
	}
	if !bo.VMs[0].Running || len(bo.VMs[0].Notes) == 0 || !strings.Contains(bo.VMs[0].Notes[0], "QMP not reachable") {
		t.Errorf("bundle: running=%v notes=%v", bo.VMs[0].Running, bo.VMs[0].Notes)
	}
	if len(bo.VMs[0].Disks) != 4 || bo.VMs[0].Disks[0].Running == nil {
		t.Errorf("bundle disks: %+v", bo.VMs[0].Disks)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	os.MkdirAll(filepath.Dir(to), 0o755)
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCheckLiveLimitDrift: a limit set live over QMP (not saved) is drift,
// in both generations.
func TestCheckLiveLimitDrift(t *testing.T) {
	for _, gen := range []string{"blockdev", "drive"} {
		t.Run(qemuName(t)+"/"+gen, func(t *testing.T) {
			n := fakenode.NewT(t)
			lab370(t, n, "")
			n.MustStart(t, 370, fakenode.ArgvOptions{Legacy: gen == "drive", Blockdev: gen == "blockdev"})
			full := qemuserver.Limits{"bps-write": 20 * qemuserver.MiB}.Full()
			err := qmp.Do(context.Background(), n.Paths.QMPSocket(370), 5*time.Second, func(s qmp.Session) error {
				return s.SetThrottleLimits("scsi1", gen == "blockdev", full)
			})
			if err != nil {
				t.Fatal(err)
			}
			var out check.Report
			runJSON(t, n, &out, "check", "370")
			d := findingsByCode(out.VMs[0])["drift"]
			if len(d) != 1 || d[0].Disk != "scsi1" || !strings.Contains(d[0].Message, "running {bps-write=20971520}") {
				t.Errorf("drift findings: %+v", d)
			}
		})
	}
}

// TestCheckThinOvercommit: the lvs double reports the real allocation of the
// local-lvm stand-in; 4 x 256 MiB volumes on a 512 MiB pool is 2x.
func TestCheckThinOvercommit(t *testing.T) {
	n := fakenode.NewT(t)
	n.UseDoubles(t)
	lab370(t, n, "")
	if err := n.SetThinPool(fakenode.ThinPool{SizeBytes: 512 << 20, MetadataPercent: 85}); err != nil {
		t.Fatal(err)
	}
	var out check.Report
	runJSON(t, n, &out, "check", "370")
	f := findingsByCode(out.VMs[0])["thin-overcommit"]
	if len(f) != 2 || !strings.Contains(f[0].Message, "1.0 GiB on a 0.5 GiB pool (2.0x)") || !strings.Contains(f[1].Message, "metadata at 85.00 %") {
		t.Errorf("findings %+v notes %v", f, out.VMs[0].Notes)
	}
	// lvs failing is a note, not a crash of the run.
	n.SetLVSFault("exit 5 Volume group \"pve\" not found")
	runJSON(t, n, &out, "check", "370")
	if len(findingsByCode(out.VMs[0])["thin-overcommit"]) != 0 || len(out.VMs[0].Notes) == 0 || !strings.Contains(out.VMs[0].Notes[0], "exited with status 5") {
		t.Errorf("with lvs failing: %+v %v", out.VMs[0].Findings, out.VMs[0].Notes)
	}
}

// TestCheckNextStart: `qm showcmd` (the double generates it from the config
// with [PENDING] applied, as qemu-server does) against the running VM.
func TestCheckNextStart(t *testing.T) {
	n := fakenode.NewT(t)
	n.UseDoubles(t)
	lab370(t, n, "")
	n.MustStart(t, 370, fakenode.ArgvOptions{})
	b, _ := os.ReadFile(n.Paths.VMConfig(370))
	os.WriteFile(n.Paths.VMConfig(370), append(b, []byte("\n[PENDING]\nscsi1: local-lvm:vm-370-disk-1,iothread=1,cache=unsafe,aio=threads,size=256M\n")...), 0o644)
	var out check.Report
	runJSON(t, n, &out, "check", "370", "--next-start")
	var msgs []string
	for _, f := range findingsByCode(out.VMs[0])["pending-restart"] {
		msgs = append(msgs, f.Message)
	}
	joined := strings.Join(msgs, "\n")
	for _, want := range []string{"cache_no_flush: now false, next start true", "aio: now io_uring, next start threads", "cache_direct: now true, next start false"} {
		if !strings.Contains(joined, want) {
			t.Errorf("missing %q in:\n%s\nnotes %v", want, joined, out.VMs[0].Notes)
		}
	}
	for _, d := range out.VMs[0].Disks {
		if d.ID == "scsi1" && (d.NextStart == nil || !d.NextStart.CacheNoFlush) {
			t.Errorf("scsi1 next_start %+v", d.NextStart)
		}
	}
}
