package node

import (
	"context"
	"errors"
	"strings"
	"testing"
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

// A runner that is off runs nothing and says why.
func TestRunnerOff(t *testing.T) {
	why := errors.New("config-only view of pve2")
	out, err := Runner{Off: why}.Run(context.Background(), "true")
	if out != nil || !errors.Is(err, why) || !strings.HasPrefix(err.Error(), "true not run: ") {
		t.Errorf("Run = %q, %v", out, err)
	}
}
