package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/cache"
	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/dpkg"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
)

// TestQEMUOutdatedRealQEMU runs a real QEMU from a copy of its binary,
// then deletes the copy as a package upgrade replaces the binary of a
// running VM, and installs newer versions in the node's dpkg status:
// check's qemu-outdated, cache's heading and JSON, and metrics say so, each
// step with the exact findings of the VM's QEMU build.
func TestQEMUOutdatedRealQEMU(t *testing.T) {
	t.Run(qemuName(t), func(t *testing.T) {
		n := fakenode.NewT(t)
		n.MustVolume(t, "local", "370/vm-370-disk-0.raw", 64<<20)
		if err := n.WriteConfig(370, "ostype: l26\nscsihw: virtio-scsi-single\nscsi0: local:370/vm-370-disk-0.raw,discard=on,iothread=1,size=64M\n"); err != nil {
			t.Fatal(err)
		}
		vm := n.MustStart(t, 370, fakenode.ArgvOptions{CopiedBinary: true})
		if vm.Binary == "" {
			t.Fatal("no copied binary")
		}
		status := filepath.Join(n.Root, dpkg.StatusFile)
		if err := os.MkdirAll(filepath.Dir(status), 0o755); err != nil {
			t.Fatal(err)
		}
		install := func(pkg, version string) {
			t.Helper()
			if err := os.WriteFile(status, []byte("Package: "+pkg+"\nStatus: install ok installed\nArchitecture: amd64\nVersion: "+version+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		// What check says of the VM's build: the QEMU it reports, and its
		// qemu-* findings.
		checkBuild := func(wantCode int) (*check.VMResult, []check.Finding) {
			t.Helper()
			var rep check.Report
			errs, code := runJSON(t, n, &rep, "check", "370")
			if code != wantCode || len(rep.VMs) != 1 || rep.VMs[0].QEMU == nil || len(rep.VMs[0].NotChecked) != 0 {
				t.Fatalf("check: exit %d (%s), %+v", code, errs, rep.VMs)
			}
			var qf []check.Finding
			for _, f := range rep.VMs[0].Findings {
				if strings.HasPrefix(string(f.Code), "qemu-") {
					qf = append(qf, f)
				}
			}
			return &rep.VMs[0], qf
		}

		// Running from the copy, nothing installed to compare with: no
		// finding, the binary read.
		v, qf := checkBuild(exitOK)
		q := v.QEMU
		if q.Name != "qemu-system-x86" || q.Version == "" || !strings.HasPrefix(q.Package, "Debian ") || !strings.HasSuffix(q.Exe, vm.Binary) || q.Replaced ||
			q.Installed != "" || !strings.HasPrefix(q.InstalledUnknown, "no ") || len(qf) != 0 {
			t.Fatalf("before: %+v, findings %+v", q, qf)
		}
		running := q.Version
		t.Logf("QEMU states %q, runs %s", q.Package, q.Exe)

		// The same version installed: still nothing.
		install("qemu-system-x86", running)
		if v, qf = checkBuild(exitOK); v.QEMU.Installed != running || v.QEMU.Outdated() || len(qf) != 0 {
			t.Fatalf("installed at the running version: %+v, findings %+v", v.QEMU, qf)
		}

		// The binary replaced: deleted, the process runs on.
		if err := os.Remove(vm.Binary); err != nil {
			t.Fatal(err)
		}
		v, qf = checkBuild(exitProblem)
		if !v.Running || !v.QEMU.Replaced || !strings.HasSuffix(v.QEMU.Exe, vm.Binary) || v.QEMU.Pid != vm.Pid || len(qf) != 1 ||
			qf[0].Code != check.CodeQEMUOutdated || qf[0].Severity != check.Warning || !strings.Contains(qf[0].Message, "(/proc/"+strconv.Itoa(vm.Pid)+"/exe: ") ||
			!strings.Contains(qf[0].Message, vm.Binary+" (deleted)), reinstalled at the version it runs: the running build qemu-system-x86 "+running+", as installed") {
			t.Fatalf("deleted, same version: %+v, findings %+v", v.QEMU, qf)
		}

		// A newer version installed: both named.
		newer := running + "+pdc1"
		install("qemu-system-x86", newer)
		_, qf = checkBuild(exitProblem)
		want := "(deleted)): the running build qemu-system-x86 " + running + ", the installed qemu-system-x86 is " + newer + "; the installed version's fixes, and what this tool knows of that version, apply to this VM only from its next full start"
		if len(qf) != 1 || qf[0].Code != check.CodeQEMUOutdated || !strings.HasSuffix(qf[0].Message, want) || qf[0].Fix != "qm reboot 370 (a full stop and start: a reboot inside the guest keeps the running binary; a live migration starts the target node's installed binary instead)" {
			t.Fatalf("deleted, newer installed: findings %+v", qf)
		}
		t.Logf("%s\n    fix: %s", qf[0].Message, qf[0].Fix)

		// cache: its heading and JSON.
		var view cache.View
		if errs, code := runJSON(t, n, &view, "cache", "370"); code != exitOK || view.QEMU == nil || !view.QEMU.Replaced || view.QEMU.Installed != newer {
			t.Fatalf("cache: exit %d (%s), %+v", code, errs, view.QEMU)
		}
		stdout, _, _ := runCLI(t, "--root", n.Root, "cache", "370")
		head := "VM 370: running, -blockdev, QEMU qemu-system-x86 " + running + " (its binary was replaced since the start, " + newer + " installed: the installed one runs after a full stop and start, qm reboot)\n"
		if !strings.HasPrefix(stdout, head) {
			t.Errorf("cache heading:\n%s\nwant\n%s", strings.SplitN(stdout, "\n", 2)[0], head)
		}

		// metrics: the build, outdated, no advisory (not pve-qemu-kvm).
		stdout, errs, code := runCLI(t, "--root", n.Root, "metrics")
		lines := strings.Split(stdout, "\n")
		for _, l := range []string{
			`pvediskcheck_vm_qemu_build_info{build="` + q.Package + `",installed_version="` + newer + `",package="qemu-system-x86",version="` + running + `",vmid="370"} 1`,
			`pvediskcheck_vm_qemu_outdated{vmid="370"} 1`,
			`pvediskcheck_vm_qemu_advisories{vmid="370"} 0`,
			`pvediskcheck_check_findings{code="qemu-outdated",severity="warning",vmid="370"} 1`,
		} {
			if !slices.Contains(lines, l) {
				t.Errorf("metrics (exit %d, %s) has no line %s", code, errs, l)
			}
		}
	})
}
