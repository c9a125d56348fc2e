//go:build integration

package qmp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// TestBatchRealQEMU: a batch longer than QEMU's request queue (8), with an
// error reply in the middle and a command that raises an event (stop and
// cont: STOP, RESUME), goes out in one write behind qmp_capabilities and
// every reply comes back to its own command, on the QEMU under test.
func TestBatchRealQEMU(t *testing.T) {
	v, _ := fakenode.QEMUVersion(fakenode.QEMUBinary())
	n := fakenode.NewT(t)
	n.MustVolume(t, "local-lvm", "vm-370-disk-1", 16<<20)
	if err := n.WriteConfig(370, "scsihw: virtio-scsi-single\nscsi1: local-lvm:vm-370-disk-1,iothread=1,size=16M\n"); err != nil {
		t.Fatal(err)
	}
	n.MustStart(t, 370, fakenode.ArgvOptions{})
	cmds := []qmp.Cmd{{Name: "stop"}, {Name: "query-status"}, {Name: "cont"}}
	for i := 0; i < 12; i++ {
		if i == 5 {
			cmds = append(cmds, qmp.Cmd{Name: "qom-get", Args: map[string]any{"path": "/machine/peripheral/nonesuch", "property": "write-cache"}})
			continue
		}
		cmds = append(cmds, qmp.Cmd{Name: "query-name"}, qmp.Cmd{Name: "qom-get", Args: map[string]any{"path": "/machine/peripheral/scsi1", "property": "write-cache"}})
	}
	cmds = append(cmds, qmp.Cmd{Name: "query-status"})
	err := qmp.Do(context.Background(), n.Paths.QMPSocket(370), 10*time.Second, func(s qmp.Session) error {
		rets, errs, err := s.ExecBatch(cmds...)
		if err != nil {
			return err
		}
		var qe *qmp.Error
		for i, c := range cmds {
			got := rets[i]
			switch {
			case i == 1:
				if got.Get("status").String() != "paused" {
					t.Errorf("%d %s after stop: %s %v", i, c.Name, got.Raw, errs[i])
				}
			case i == len(cmds)-1:
				if got.Get("status").String() != "running" {
					t.Errorf("%d %s after cont: %s %v", i, c.Name, got.Raw, errs[i])
				}
			case c.Name == "query-name":
				if !got.Get("name").Exists() || errs[i] != nil {
					t.Errorf("%d %s: %s %v", i, c.Name, got.Raw, errs[i])
				}
			case c.Name == "qom-get" && c.Args.(map[string]any)["path"] == "/machine/peripheral/nonesuch":
				if !errors.As(errs[i], &qe) || got.Exists() {
					t.Errorf("%d qom-get of a missing device: %s %v", i, got.Raw, errs[i])
				}
			case c.Name == "qom-get":
				if got.String() != "on" || errs[i] != nil {
					t.Errorf("%d qom-get write-cache: %s %v", i, got.Raw, errs[i])
				}
			case errs[i] != nil:
				t.Errorf("%d %s: %v", i, c.Name, errs[i])
			}
		}
		t.Logf("QEMU %s: %d commands in one batch, replies in order (the error at its place)", v, len(cmds))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
