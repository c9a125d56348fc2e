package check

import (
	"reflect"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/advisory"
	"github.com/pvediskcheck/pvediskcheck/dpkg"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// pveGreeting is QMP's greeting of a Proxmox VE build (pve-qemu's
// debian/rules: --with-pkgversion=${DEB_SOURCE}_${DEB_VERSION_UPSTREAM_REVISION}),
// otherwise qmptest's recorded 7.2 greeting.
func pveGreeting(pkg string) string {
	return `{"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}, "package": "` + pkg + `"}, "capabilities": ["oob"]}}`
}

// shaped is the recorded running VM 390 (TestCheckIOError's, QEMU 7.2,
// virtio-scsi-single, scsi1 and scsi2 raw with discard=on, iothread=1,
// aio io_uring; every io-status ok) with its command line and config
// edited into the shape a case needs.
func shaped(t *testing.T, edit func(argv []string, conf string) ([]string, string)) (recording, string) {
	t.Helper()
	rec := patch(loadRecording(t, "real-ioerror-resumed.json"), `"io-status":"nospace"`, `"io-status":"ok"`)
	argv := append([]string(nil), rec.Cmdline...)
	conf := rec.Config
	if edit != nil {
		argv, conf = edit(argv, conf)
	}
	rec.Cmdline = argv
	return rec, conf
}

// replace edits every argument and the config alike.
func replace(old, new string) func([]string, string) ([]string, string) {
	return func(argv []string, conf string) ([]string, string) {
		for i := range argv {
			argv[i] = strings.ReplaceAll(argv[i], old, new)
		}
		return argv, strings.ReplaceAll(conf, old, new)
	}
}

// TestQEMUAdvisory: a fake QEMU states the build; check judges the
// table's advisories on the recorded VM's running disks, in the shapes
// they name, with the exact set of findings.
func TestQEMUAdvisory(t *testing.T) {
	// scsi1's format node qcow2 (the recorded raw node with qcow2's driver).
	qcow2 := func(argv []string, conf string) ([]string, string) {
		for i := range argv {
			argv[i] = strings.Replace(argv[i], `"driver":"raw","file":{"aio":"io_uring"`, `"driver":"qcow2","file":{"aio":"io_uring"`, 1)
		}
		return argv, strings.Replace(conf, "vm-390-disk-1.raw", "vm-390-disk-1.qcow2", 1)
	}
	noIOThread := func(argv []string, conf string) ([]string, string) {
		for i := range argv {
			argv[i] = strings.ReplaceAll(argv[i], ",iothread=iothread-virtioscsi", ",x-iothread=none")
		}
		return argv, strings.ReplaceAll(conf, "iothread=1,", "")
	}
	for _, c := range []struct {
		name, pkg string
		edit      func([]string, string) ([]string, string)
		installed string // pve-qemu-kvm in dpkg's status below the root
		want      []string
	}{
		{"10.2.1-1: iothreads count as IO wait", "pve-qemu-kvm_10.2.1-1", nil, "", []string{"info qemu-advisory -"}},
		{"10.2.1-1 without iothreads", "pve-qemu-kvm_10.2.1-1", noIOThread, "", []string{}},
		{"10.2.1-2", "pve-qemu-kvm_10.2.1-2", nil, "", []string{}},
		{"10.2.1-2, scsi1 qcow2 with discard", "pve-qemu-kvm_10.2.1-2", qcow2, "", []string{"error qemu-advisory -"}},
		{"10.2.1-2, scsi1 qcow2 without discard", "pve-qemu-kvm_10.2.1-2", func(a []string, c string) ([]string, string) {
			a, c = qcow2(a, c)
			a, c = replace(`"discard":"unmap"`, `"discard":"ignore"`)(a, strings.ReplaceAll(c, "discard=on,", ""))
			return replace(`"detect-zeroes":"unmap"`, `"detect-zeroes":"on"`)(a, c)
		}, "", []string{"warning discard-ignored-on-thin scsi1"}},
		{"11.0.0-1, scsi1 qcow2 with discard", "pve-qemu-kvm_11.0.0-1", qcow2, "", []string{}},
		{"10.1.2-4: io_uring and a disk move", "pve-qemu-kvm_10.1.2-4", nil, "", []string{"warning qemu-advisory -", "warning qemu-advisory -"}},
		{"10.1.2-4 with aio=native", "pve-qemu-kvm_10.1.2-4", func(a []string, c string) ([]string, string) {
			return replace(`"aio":"io_uring"`, `"aio":"native"`)(a, strings.ReplaceAll(c, "iothread=1,", "aio=native,iothread=1,"))
		}, "", []string{"warning qemu-advisory -"}},
		{"10.1.0-1: VirtIO SCSI's deadlock too", "pve-qemu-kvm_10.1.0-1", nil, "", []string{"warning qemu-advisory -", "warning qemu-advisory -", "warning qemu-advisory -"}},
		{"Debian's QEMU: not pve-qemu-kvm", "Debian 1:7.2+dfsg-7+deb12u18+b3", qcow2, "", []string{}},
		{"10.2.1-2 qcow2, the fix installed but not started", "pve-qemu-kvm_10.2.1-2", qcow2, "11.0.0-2", []string{"error qemu-advisory -", "warning qemu-outdated -"}},
		{"the fixed build installed and running", "pve-qemu-kvm_11.0.0-2", qcow2, "11.0.0-2", []string{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			tn := newNode(t)
			tn.greeting = pveGreeting(c.pkg)
			if c.installed != "" {
				tn.write("var/lib/dpkg/status", "Package: pve-qemu-kvm\nStatus: install ok installed\nVersion: "+c.installed+"\n")
			}
			rec, conf := shaped(t, c.edit)
			tn.replay(t, rec, 390, conf)
			withImages(t, tn)
			v := tn.check(390, quietRunner(), Options{})
			if got := summary(v); !reflect.DeepEqual(got, c.want) || v.Err != nil || len(v.NotChecked) != 0 {
				t.Fatalf("findings %q, want %q; err %v, not checked %v, notes %q", got, c.want, v.Err, v.NotChecked, v.Notes)
			}
			if v.QEMU == nil || v.QEMU.Package != c.pkg {
				t.Errorf("qemu %+v", v.QEMU)
			}
			for _, f := range v.Findings {
				t.Logf("%s %s: %s\n    fix: %s", f.Severity, f.Code, f.Message, f.Fix)
			}
		})
	}
}

// TestQEMUAdvisoryText: what one finding says and the fix both ways.
func TestQEMUAdvisoryText(t *testing.T) {
	tab := advisory.Known()
	disks := runningDisksOf(t)
	for _, c := range []struct {
		installed, fix string
	}{
		{"", "apt update && apt install pve-qemu-kvm (10.2.1-2 or later has the fix), then qm reboot 390 (a full stop and start; a reboot inside the guest is not enough)"},
		{"10.2.1-1", "apt update && apt install pve-qemu-kvm (10.2.1-2 or later has the fix), then qm reboot 390 (a full stop and start; a reboot inside the guest is not enough)"},
		{"10.2.1-2", "qm reboot 390: the installed pve-qemu-kvm 10.2.1-2 has the fix, and the VM runs it only after a full stop and start (a reboot inside the guest is not enough)"},
	} {
		out := VMResult{}
		qemuAdvisories(390, &advisory.Binary{Package: "pve-qemu-kvm_10.2.1-1", Name: "pve-qemu-kvm", Version: "10.2.1-1", Installed: c.installed}, disks, tab, &out)
		if len(out.Findings) != 1 {
			t.Fatalf("%+v", out.Findings)
		}
		f := out.Findings[0]
		want := "this VM runs pve-qemu-kvm 10.2.1-1, which has iothread-io-pressure-accounting: an idle iothread counted as IO wait: nearly 100 % IO pressure: the node's IO pressure"
		if f.Severity != Info || f.Code != CodeQEMUAdvisory || f.Disk != "" || !strings.HasPrefix(f.Message, want) ||
			!strings.Contains(f.Message, "; on disks scsi1, scsi2 (iothread=1), when the disk's iothread waits for work, so always while its disks are idle; fixed in pve-qemu-kvm 10.2.1-2; the fix asks the kernel") ||
			!strings.HasSuffix(f.Message, " (pve-qemu changelog 10.2.1-2; pve-qemu commit 775e41b (debian/patches/extra/0031-fdmon-io_uring-avoid-idle-event-loop-being-accounted.patch); https://lore.proxmox.com/pve-devel/525c4dad-6d04-41f0-8a21-9302b0c6baa4@proxmox.com/)") {
			t.Errorf("message %q", f.Message)
		}
		if f.Fix != c.fix {
			t.Errorf("installed %q: fix %q, want %q", c.installed, f.Fix, c.fix)
		}
	}
	// A bug fixed, then back: the upgrade past both; an avoiding setting
	// after it, VMID filled in.
	for _, c := range []struct{ installed, fix string }{
		{"", "apt update && apt install pve-qemu-kvm (fixed in 8.1.2-5; affected again from 8.1.2-6, fixed in 8.1.5-2), then qm reboot 390 (a full stop and start; a reboot inside the guest is not enough)"},
		{"8.1.2-6", "apt update && apt install pve-qemu-kvm (fixed in 8.1.2-5; affected again from 8.1.2-6, fixed in 8.1.5-2), then qm reboot 390 (a full stop and start; a reboot inside the guest is not enough)"},
		{"8.1.2-5", "qm reboot 390: the installed pve-qemu-kvm 8.1.2-5 has the fix, and the VM runs it only after a full stop and start (a reboot inside the guest is not enough)"},
		{"8.1.5-2", "qm reboot 390: the installed pve-qemu-kvm 8.1.5-2 has the fix, and the VM runs it only after a full stop and start (a reboot inside the guest is not enough)"},
	} {
		out := VMResult{}
		qemuAdvisories(390, &advisory.Binary{Package: "pve-qemu-kvm_8.1.2-4", Name: "pve-qemu-kvm", Version: "8.1.2-4", Installed: c.installed}, disks[:1], tab, &out)
		if got := summary(out); !reflect.DeepEqual(got, []string{"warning qemu-advisory -", "warning qemu-advisory -"}) {
			t.Fatalf("8.1.2-4: %q", got)
		}
		f := out.Findings[1]
		if !strings.Contains(f.Message, "iothread-drain-stuck-io") || f.Fix != c.fix+"; until then: iothread=0 on the disks named, applied by qm reboot; a stuck disk runs again after qm suspend 390 and qm resume 390 (stopping the vCPUs restarts the dataplane)" ||
			!strings.Contains(f.Message, "on disk scsi1 (on virtio-blk or virtio-scsi-single or virtio-scsi-pci, iothread=1)") || !strings.Contains(f.Message, "fixed in pve-qemu-kvm 8.1.2-5; affected again from 8.1.2-6, fixed in 8.1.5-2;") {
			t.Errorf("8.1.2-4, installed %q: %s\n    fix: %s", c.installed, f.Message, f.Fix)
		}
	}
	// A build that names no version is said, and not judged.
	out := VMResult{}
	qemuAdvisories(390, &advisory.Binary{Package: "qemu-git"}, disks, tab, &out)
	if len(out.Findings) != 0 || !reflect.DeepEqual(out.NotChecked, []Code{CodeQEMUAdvisory}) || len(out.Notes) != 1 || out.Notes[0] != `QEMU states the build "qemu-git", which names no package version: qemu-advisory not checked` {
		t.Errorf("qemu-git: %+v", out)
	}
	// No build stated (a replay without a greeting) and a stopped VM: nothing.
	for _, bin := range []*advisory.Binary{{}, nil} {
		out = VMResult{}
		qemuAdvisories(390, bin, disks, tab, &out)
		if len(out.Findings)+len(out.Notes)+len(out.NotChecked) != 0 {
			t.Errorf("%+v: %+v", bin, out)
		}
	}
}

// runningDisksOf is the recorded VM's running disks.
func runningDisksOf(t *testing.T) []qemuserver.DiskSettings {
	t.Helper()
	tn := newNode(t)
	rec, conf := shaped(t, nil)
	tn.replay(t, rec, 390, conf)
	v, set := VMLoaded(t.Context(), quietRunner().Node(tn.n), 390, Options{Packages: dpkg.NewPackages(tn.n)}, nil)
	if set == nil || set.AskErr != nil {
		t.Fatal(v.Err, set)
	}
	return runningDisks(set.VM)
}

func TestQEMUOutdated(t *testing.T) {
	for _, c := range []struct {
		name string
		bin  *advisory.Binary
		want string // the message's start; "" for no finding
	}{
		{"replaced by an upgrade, the pid known", &advisory.Binary{Pid: 4242, Package: "pve-qemu-kvm_10.2.1-1", Name: "pve-qemu-kvm", Version: "10.2.1-1", Exe: "/usr/bin/qemu-system-x86_64", Replaced: true, Installed: "11.0.0-2"},
			"QEMU runs a binary that was replaced since the VM started (/proc/4242/exe: /usr/bin/qemu-system-x86_64 (deleted)): the running build pve-qemu-kvm 10.2.1-1, the installed pve-qemu-kvm is 11.0.0-2; the installed version's fixes"},
		{"replaced by an upgrade", &advisory.Binary{Package: "pve-qemu-kvm_10.2.1-1", Name: "pve-qemu-kvm", Version: "10.2.1-1", Exe: "/usr/bin/qemu-system-x86_64", Replaced: true, Installed: "11.0.0-2"},
			"QEMU runs a binary that was replaced since the VM started (/proc/PID/exe: /usr/bin/qemu-system-x86_64 (deleted)): the running build pve-qemu-kvm 10.2.1-1, the installed pve-qemu-kvm is 11.0.0-2; the installed version's fixes"},
		{"reinstalled at the same version", &advisory.Binary{Package: "pve-qemu-kvm_11.0.0-2", Name: "pve-qemu-kvm", Version: "11.0.0-2", Exe: "/usr/bin/qemu-system-x86_64", Replaced: true, Installed: "11.0.0-2"},
			"QEMU runs a binary that was replaced since the VM started (/proc/PID/exe: /usr/bin/qemu-system-x86_64 (deleted)), reinstalled at the version it runs: the running build pve-qemu-kvm 11.0.0-2, as installed;"},
		{"replaced, the installed version unknown", &advisory.Binary{Package: "pve-qemu-kvm_10.2.1-1", Name: "pve-qemu-kvm", Version: "10.2.1-1", Exe: "/usr/bin/qemu-system-x86_64", Replaced: true, InstalledUnknown: "no /var/lib/dpkg/status"},
			"QEMU runs a binary that was replaced since the VM started (/proc/PID/exe: /usr/bin/qemu-system-x86_64 (deleted)): the running build pve-qemu-kvm 10.2.1-1, the installed version is unknown (no /var/lib/dpkg/status);"},
		{"older than installed, the binary not replaced (a copied tree)", &advisory.Binary{Package: "pve-qemu-kvm_10.2.1-1", Name: "pve-qemu-kvm", Version: "10.2.1-1", Installed: "10.2.1-2"},
			"the running build pve-qemu-kvm 10.2.1-1 is older than the one installed: the installed pve-qemu-kvm is 10.2.1-2;"},
		{"newer than installed", &advisory.Binary{Package: "pve-qemu-kvm_11.0.0-2", Name: "pve-qemu-kvm", Version: "11.0.0-2", Installed: "11.0.0-1"},
			"the running build pve-qemu-kvm 11.0.0-2 is newer than the one installed (a downgrade the VM has not started): the installed pve-qemu-kvm is 11.0.0-1;"},
		{"a Debian build, upgraded", &advisory.Binary{Package: "Debian 1:7.2+dfsg-7+deb12u18+b3", Name: "qemu-system-x86", Version: "1:7.2+dfsg-7+deb12u18+b3", Exe: "/usr/bin/qemu-system-x86_64", Replaced: true, Installed: "1:7.2+dfsg-7+deb12u19"},
			"QEMU runs a binary that was replaced since the VM started (/proc/PID/exe: /usr/bin/qemu-system-x86_64 (deleted)): the running build qemu-system-x86 1:7.2+dfsg-7+deb12u18+b3, the installed qemu-system-x86 is 1:7.2+dfsg-7+deb12u19;"},
		{"replaced, QMP not read", &advisory.Binary{Pid: 4242, Exe: "/usr/bin/qemu-system-x86_64", Replaced: true, InstalledUnknown: "the running build names no package"},
			"QEMU runs a binary that was replaced since the VM started (/proc/4242/exe: /usr/bin/qemu-system-x86_64 (deleted)): the running build is unknown, and so is the version installed;"},
		{"current", &advisory.Binary{Package: "pve-qemu-kvm_11.0.0-2", Name: "pve-qemu-kvm", Version: "11.0.0-2", Exe: "/usr/bin/qemu-system-x86_64", Installed: "11.0.0-2"}, ""},
		{"the same version written two ways", &advisory.Binary{Package: "pve-qemu-kvm_0:11.0.0-2", Name: "pve-qemu-kvm", Version: "11.0.0-2", Installed: "11.0.0-2"}, ""},
		{"nothing known", &advisory.Binary{Package: "pve-qemu-kvm_11.0.0-2", Name: "pve-qemu-kvm", Version: "11.0.0-2", InstalledUnknown: "no /var/lib/dpkg/status"}, ""},
		{"not running", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := VMResult{}
			qemuOutdated(390, c.bin, &out)
			if c.want == "" {
				if len(out.Findings) != 0 {
					t.Fatalf("%+v", out.Findings)
				}
				return
			}
			if len(out.Findings) != 1 {
				t.Fatalf("%+v", out.Findings)
			}
			f := out.Findings[0]
			if f.Severity != Warning || f.Code != CodeQEMUOutdated || !strings.HasPrefix(f.Message, c.want) ||
				!strings.HasSuffix(f.Message, "; the installed version's fixes, and what this tool knows of that version, apply to this VM only from its next full start") ||
				f.Fix != "qm reboot 390 (a full stop and start: a reboot inside the guest keeps the running binary; a live migration starts the target node's installed binary instead)" {
				t.Errorf("%s\n    fix: %s", f.Message, f.Fix)
			}
		})
	}
}
