package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Configs replaces /etc/pve/qemu-server (another node's configs in pmxcfs);
// without it the configs are the node's own.
func TestPathsConfigs(t *testing.T) {
	p := NewPaths("/r", "", "")
	if p.QemuServerDir() != "/r/etc/pve/qemu-server" || p.VMConfig(370) != "/r/etc/pve/qemu-server/370.conf" {
		t.Errorf("own configs: %s %s", p.QemuServerDir(), p.VMConfig(370))
	}
	p.Configs = "/r/etc/pve/nodes/pve2/qemu-server"
	if p.QemuServerDir() != p.Configs || p.VMConfig(380) != "/r/etc/pve/nodes/pve2/qemu-server/380.conf" {
		t.Errorf("another node's configs: %s %s", p.QemuServerDir(), p.VMConfig(380))
	}
}

// A runner that refuses runs nothing and says why, with either deadline;
// an empty command is refused as Exec refuses it.
func TestRefuse(t *testing.T) {
	why := errors.New("config-only view of pve2")
	r := Refuse(why)
	out, err := r.Run(context.Background(), "true")
	if out != nil || !errors.Is(err, why) || err.Error() != "true not run: config-only view of pve2" {
		t.Errorf("Run = %q, %v", out, err)
	}
	if out, err := r.RunTimeout(context.Background(), time.Minute, "lvs", "pve"); out != nil || !errors.Is(err, why) || !strings.HasPrefix(err.Error(), "lvs not run: ") {
		t.Errorf("RunTimeout = %q, %v", out, err)
	}
	for _, r := range []Runner{r, Exec{}} {
		if _, err := r.Run(context.Background()); err == nil || err.Error() != "runner: empty command" {
			t.Errorf("%T: empty command: %v", r, err)
		}
	}
}

// NodeName below a copied tree comes from that tree only: pmxcfs's
// /etc/pve/local, else its /etc/hostname; without either it is unknown,
// never the host name of the machine running the tool (which made thin
// skip a storage "available on nodes pve1 only, this is <the analyst's
// laptop>"). A hostile /etc/hostname (a BOM, CRLF, unicode, empty) is a
// name only where it is a host name.
func TestNodeName(t *testing.T) {
	for _, c := range []struct {
		name, hostname, local, want string
	}{
		{"nothing below the root", "", "", ""},
		{"pmxcfs link", "", "nodes/pve2", "pve2"},
		{"link wins over hostname", "other\n", "nodes/pve2", "pve2"},
		{"hostname with domain", "pve3.example.com\n", "", "pve3"},
		{"hostname CRLF", "pve3\r\n", "", "pve3"},
		{"hostname with BOM", "\ufeffpve3\n", "", ""},
		{"hostname unicode", "pvé\n", "", ""},
		{"hostname empty", "\n", "", ""},
		{"hostname of spaces inside", "pve 3\n", "", ""},
		{"link to no host name", "", "nodes/-bad-", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			if err := os.MkdirAll(filepath.Join(root, "etc/pve"), 0o755); err != nil {
				t.Fatal(err)
			}
			if c.hostname != "" {
				if err := os.WriteFile(filepath.Join(root, "etc/hostname"), []byte(c.hostname), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if c.local != "" {
				if err := os.Symlink(c.local, filepath.Join(root, "etc/pve/local")); err != nil {
					t.Fatal(err)
				}
			}
			if got := NewPaths(root, "", "").NodeName(); got != c.want {
				t.Errorf("NodeName = %q, want %q", got, c.want)
			}
		})
	}
}
