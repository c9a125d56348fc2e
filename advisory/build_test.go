package advisory

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/dpkg"
	"github.com/pvediskcheck/pvediskcheck/node"
)

// binTree is a node root with a running QEMU's /proc/<pid>/exe and, when
// status is not "", dpkg's status file.
func binTree(t *testing.T, exe, status string) node.Node {
	t.Helper()
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc/4100"), 0o755); err != nil {
		t.Fatal(err)
	}
	if exe != "" {
		if err := os.Symlink(exe, filepath.Join(root, "proc/4100/exe")); err != nil {
			t.Fatal(err)
		}
	}
	if status != "" {
		st := filepath.Join(root, dpkg.StatusFile)
		if err := os.MkdirAll(filepath.Dir(st), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(st, []byte(status), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return node.New(node.NewPaths(root, "", ""), time.Second)
}

func stanza(pkg, version string) string {
	return "Package: " + pkg + "\nStatus: install ok installed\nArchitecture: amd64\nVersion: " + version + "\n\n"
}

func TestReadBinary(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name, exe, status, pkg string
		alive                  bool
		want                   Binary
		outdated               bool
		differs                int
	}{
		{"upgraded: the binary replaced and a newer version installed", "/usr/bin/qemu-system-x86_64 (deleted)", stanza("pve-qemu-kvm", "11.0.0-2"), "pve-qemu-kvm_10.2.1-1", true,
			Binary{Pid: 4100, Package: "pve-qemu-kvm_10.2.1-1", Name: "pve-qemu-kvm", Version: "10.2.1-1", Exe: "/usr/bin/qemu-system-x86_64", Replaced: true, Installed: "11.0.0-2"}, true, -1},
		{"current", "/usr/bin/qemu-system-x86_64", stanza("pve-qemu-kvm", "11.0.0-2"), "pve-qemu-kvm_11.0.0-2", true,
			Binary{Pid: 4100, Package: "pve-qemu-kvm_11.0.0-2", Name: "pve-qemu-kvm", Version: "11.0.0-2", Exe: "/usr/bin/qemu-system-x86_64", Installed: "11.0.0-2"}, false, 0},
		{"reinstalled at the same version: replaced all the same", "/usr/bin/qemu-system-x86_64 (deleted)", stanza("pve-qemu-kvm", "11.0.0-2"), "pve-qemu-kvm_11.0.0-2", true,
			Binary{Pid: 4100, Package: "pve-qemu-kvm_11.0.0-2", Name: "pve-qemu-kvm", Version: "11.0.0-2", Exe: "/usr/bin/qemu-system-x86_64", Replaced: true, Installed: "11.0.0-2"}, true, 0},
		{"an older version installed (a downgrade not yet run)", "/usr/bin/qemu-system-x86_64", stanza("pve-qemu-kvm", "10.2.1-2"), "pve-qemu-kvm_11.0.0-1", true,
			Binary{Pid: 4100, Package: "pve-qemu-kvm_11.0.0-1", Name: "pve-qemu-kvm", Version: "11.0.0-1", Exe: "/usr/bin/qemu-system-x86_64", Installed: "10.2.1-2"}, true, 1},
		{"Debian's QEMU", "/usr/bin/qemu-system-x86_64", stanza("qemu-system-x86", "1:7.2+dfsg-7+deb12u19"), "Debian 1:7.2+dfsg-7+deb12u18+b3", true,
			Binary{Pid: 4100, Package: "Debian 1:7.2+dfsg-7+deb12u18+b3", Name: "qemu-system-x86", Version: "1:7.2+dfsg-7+deb12u18+b3", Exe: "/usr/bin/qemu-system-x86_64", Installed: "1:7.2+dfsg-7+deb12u19"}, true, -1},
		{"a copied tree: no exe read, the status file still is", "/usr/bin/qemu-system-x86_64 (deleted)", stanza("pve-qemu-kvm", "11.0.0-2"), "pve-qemu-kvm_10.2.1-1", false,
			Binary{Pid: 4100, Package: "pve-qemu-kvm_10.2.1-1", Name: "pve-qemu-kvm", Version: "10.2.1-1", Installed: "11.0.0-2"}, true, -1},
		{"no status file", "/usr/bin/qemu-system-x86_64", "", "pve-qemu-kvm_10.2.1-1", true,
			Binary{Pid: 4100, Package: "pve-qemu-kvm_10.2.1-1", Name: "pve-qemu-kvm", Version: "10.2.1-1", Exe: "/usr/bin/qemu-system-x86_64", InstalledUnknown: "no ROOT/var/lib/dpkg/status"}, false, 0},
		{"the package not installed", "/usr/bin/qemu-system-x86_64", stanza("qemu-server", "9.2.6"), "pve-qemu-kvm_10.2.1-1", true,
			Binary{Pid: 4100, Package: "pve-qemu-kvm_10.2.1-1", Name: "pve-qemu-kvm", Version: "10.2.1-1", Exe: "/usr/bin/qemu-system-x86_64", InstalledUnknown: "pve-qemu-kvm: not installed"}, false, 0},
		{"a build that names no package", "/opt/qemu/bin/qemu-system-x86_64 (deleted)", stanza("pve-qemu-kvm", "11.0.0-2"), "my-build", true,
			Binary{Pid: 4100, Package: "my-build", Exe: "/opt/qemu/bin/qemu-system-x86_64", Replaced: true, InstalledUnknown: "the running build names no package"}, true, 0},
		{"QMP not read: no build, the exe all the same", "/usr/bin/qemu-system-x86_64 (deleted)", stanza("pve-qemu-kvm", "11.0.0-2"), "", true,
			Binary{Pid: 4100, Exe: "/usr/bin/qemu-system-x86_64", Replaced: true, InstalledUnknown: "the running build is not known: QEMU's greeting was not read"}, true, 0},
		{"no exe link (a process gone)", "", stanza("pve-qemu-kvm", "10.2.1-1"), "pve-qemu-kvm_10.2.1-1", true,
			Binary{Pid: 4100, Package: "pve-qemu-kvm_10.2.1-1", Name: "pve-qemu-kvm", Version: "10.2.1-1", Installed: "10.2.1-1"}, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := binTree(t, c.exe, c.status)
			got := ReadBinary(ctx, n, 4100, c.alive, c.pkg, nil)
			want := c.want
			want.InstalledUnknown = strings.ReplaceAll(want.InstalledUnknown, "ROOT", n.Paths.Root)
			if got != want || got.Outdated() != c.outdated || got.Differs() != c.differs {
				t.Errorf("ReadBinary = %+v outdated %v differs %d\nwant %+v outdated %v differs %d", got, got.Outdated(), got.Differs(), want, c.outdated, c.differs)
			}
			if b := got.Build(); b.Raw != c.pkg {
				t.Errorf("Build() = %+v", b)
			}
		})
	}
	for _, c := range []struct {
		b    Binary
		want string
	}{
		{Binary{Package: "pve-qemu-kvm_11.0.0-2", Installed: "11.0.0-2"}, "pve-qemu-kvm 11.0.0-2"},
		{Binary{Package: "pve-qemu-kvm_10.2.1-1", Replaced: true, Installed: "11.0.0-2"}, "pve-qemu-kvm 10.2.1-1 (its binary was replaced since the start, 11.0.0-2 installed: the installed one runs after a full stop and start, qm reboot)"},
		{Binary{Package: "pve-qemu-kvm_10.2.1-1", Installed: "11.0.0-2"}, "pve-qemu-kvm 10.2.1-1 (11.0.0-2 installed: the installed one runs after a full stop and start, qm reboot)"},
		{Binary{Package: "pve-qemu-kvm_11.0.0-2", Installed: "11.0.0-1"}, "pve-qemu-kvm 11.0.0-2 (older 11.0.0-1 installed: the installed one runs after a full stop and start, qm reboot)"},
		{Binary{Package: "pve-qemu-kvm_11.0.0-2", Replaced: true, Installed: "11.0.0-2"}, "pve-qemu-kvm 11.0.0-2 (its binary was replaced since the start, reinstalled at the same version: the installed one runs after a full stop and start, qm reboot)"},
		{Binary{Package: "pve-qemu-kvm_11.0.0-2", Replaced: true}, "pve-qemu-kvm 11.0.0-2 (its binary was replaced since the start: the installed one runs after a full stop and start, qm reboot)"},
		{Binary{Package: "my-build"}, "build my-build"},
		{Binary{}, "build not stated"},
	} {
		if got := c.b.String(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.b, got, c.want)
		}
	}
	// One status read for every VM of a run.
	n := binTree(t, "/usr/bin/kvm", stanza("pve-qemu-kvm", "11.0.0-2"))
	pkgs := dpkg.NewPackages(n)
	if b := ReadBinary(ctx, n, 4100, true, "pve-qemu-kvm_11.0.0-1", pkgs); b.Installed != "11.0.0-2" {
		t.Fatalf("%+v", b)
	}
	if err := os.Remove(filepath.Join(n.Paths.Root, dpkg.StatusFile)); err != nil {
		t.Fatal(err)
	}
	if b := ReadBinary(ctx, n, 4100, true, "pve-qemu-kvm_11.0.0-1", pkgs); b.Installed != "11.0.0-2" {
		t.Fatalf("the second VM read the status again: %+v", b)
	}
}
