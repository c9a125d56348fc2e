package dpkg

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/node"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestInstalled(t *testing.T) {
	deb, pve := readFixture(t, "status-debian12"), readFixture(t, "status-pve")
	// A stanza of pkg in a given state, for the states' cases.
	stanza := func(pkg, status, version string) string {
		return "Package: " + pkg + "\nStatus: " + status + "\nArchitecture: amd64\nVersion: " + version + "\nDescription: x\n a line: with a colon\n"
	}
	for _, c := range []struct {
		name, status, pkg, want, err string
	}{
		{"Debian's QEMU, recorded", string(deb), "qemu-system-x86", "1:7.2+dfsg-7+deb12u18+b3", ""},
		{"the last stanza of the file", string(deb), "qemu-utils", "1:7.2+dfsg-7+deb12u18+b3", ""},
		{"the first stanza of the file", string(deb), "dpkg", "1.21.22", ""},
		{"pve-qemu-kvm after its -dbgsym", string(pve), "pve-qemu-kvm", "11.0.0-2", ""},
		{"the -dbgsym is its own package", string(pve), "pve-qemu-kvm-dbgsym", "10.2.1-1", ""},
		{"a package only Provided is not installed", string(pve), "qemu-system-x86", "", "not installed"},
		{"absent", string(deb), "pve-qemu-kvm", "", "not installed"},
		{"a prefix of a package name is not it", string(deb), "qemu", "", "not installed"},
		{"unpacked: its files are there", stanza("pve-qemu-kvm", "install ok unpacked", "11.0.0-1"), "pve-qemu-kvm", "11.0.0-1", ""},
		{"half-configured", stanza("pve-qemu-kvm", "install ok half-configured", "11.0.0-1"), "pve-qemu-kvm", "11.0.0-1", ""},
		{"triggers pending", stanza("pve-qemu-kvm", "install ok triggers-pending", "11.0.0-1"), "pve-qemu-kvm", "11.0.0-1", ""},
		{"held, installed", stanza("pve-qemu-kvm", "hold ok installed", "10.2.1-2"), "pve-qemu-kvm", "10.2.1-2", ""},
		{"half-installed: an unpack that did not finish", stanza("pve-qemu-kvm", "install reinstreq half-installed", "11.0.0-1"), "pve-qemu-kvm", "", "not installed"},
		{"removed, its config files kept", stanza("pve-qemu-kvm", "deinstall ok config-files", "11.0.0-1"), "pve-qemu-kvm", "", "not installed"},
		{"a Status line that is not three words", stanza("pve-qemu-kvm", "installed", "11.0.0-1"), "pve-qemu-kvm", "", "not installed"},
		{"multiarch at one version", stanza("libfoo", "install ok installed", "1.0-1") + "\n" + stanza("libfoo", "install ok installed", "1.0-1"), "libfoo", "1.0-1", ""},
		{"multiarch at two versions", stanza("libfoo", "install ok installed", "1.0-1") + "\n" + stanza("libfoo", "install ok installed", "1.0-2"), "libfoo", "", "several versions (1.0-1, 1.0-2)"},
		{"a version dpkg would not take", stanza("pve-qemu-kvm", "install ok installed", "x.y"), "pve-qemu-kvm", "", "not a Debian version"},
		{"a Package line inside another line is no stanza", "Package: other\nStatus: install ok installed\nVersion: 1\nDescription: see Package: pve-qemu-kvm\nStatus: install ok installed\nVersion: 2\n", "pve-qemu-kvm", "", "not installed"},
		{"a stanza without a Status line", "Package: pve-qemu-kvm\nVersion: 11.0.0-1\n", "pve-qemu-kvm", "", "not installed"},
		{"no newline at the end", "Package: pve-qemu-kvm\nStatus: install ok installed\nVersion: 9.2.0-7", "pve-qemu-kvm", "9.2.0-7", ""},
		{"empty", "", "pve-qemu-kvm", "", "not installed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			v, err := Installed([]byte(c.status), c.pkg)
			switch {
			case c.err == "" && (err != nil || v.String() != c.want):
				t.Errorf("Installed(%s) = %q, %v; want %q", c.pkg, v, err, c.want)
			case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
				t.Errorf("Installed(%s) = %q, %v; want an error with %q", c.pkg, v, err, c.err)
			}
		})
	}
}

// TestPackages reads the status file below the node root once for every
// package asked, and says why where it cannot.
func TestPackages(t *testing.T) {
	root := t.TempDir()
	n := node.New(node.NewPaths(root, "", ""), time.Second)
	ctx := context.Background()
	p := NewPackages(n)
	if _, err := p.Installed(ctx, "pve-qemu-kvm"); err == nil || !strings.Contains(err.Error(), "no "+filepath.Join(root, StatusFile)) {
		t.Fatalf("without a status file: %v", err)
	}
	st := filepath.Join(root, StatusFile)
	if err := os.MkdirAll(filepath.Dir(st), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(st, readFixture(t, "status-pve"), 0o644); err != nil {
		t.Fatal(err)
	}
	p = NewPackages(n)
	if v, err := p.Installed(ctx, "pve-qemu-kvm"); err != nil || v.String() != "11.0.0-2" {
		t.Fatalf("pve-qemu-kvm: %q %v", v, err)
	}
	// Read once: a changed file is not read again by the same reader.
	if err := os.WriteFile(st, readFixture(t, "status-debian12"), 0o644); err != nil {
		t.Fatal(err)
	}
	if v, err := p.Installed(ctx, "qemu-server"); err != nil || v.String() != "9.2.6" {
		t.Fatalf("qemu-server from the first read: %q %v", v, err)
	}
	if _, err := p.Installed(ctx, "qemu-system-x86"); !errors.Is(err, ErrNotInstalled) {
		t.Fatalf("qemu-system-x86 from the first read: %v", err)
	}
	// A status file that is no regular file is refused, as every node file.
	if err := os.Remove(st); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(st, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := NewPackages(n).Installed(ctx, "pve-qemu-kvm"); !errors.Is(err, node.ErrBadFile) {
		t.Fatalf("a directory: %v", err)
	}
}
