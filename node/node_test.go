package node

import (
	"context"
	"errors"
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
