//go:build integration

package qmp_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// TestThrottleRealQEMU sets limits and reads them back in both generations,
// then clears them: every field is sent, so zeros really clear.
func TestThrottleRealQEMU(t *testing.T) {
	v, _ := fakenode.QEMUVersion(fakenode.QEMUBinary())
	for _, gen := range []string{"blockdev", "drive"} {
		t.Run("qemu-"+v+"/"+gen, func(t *testing.T) {
			n := fakenode.NewT(t)
			n.MustVolume(t, "local-lvm", "vm-370-disk-1", 64<<20)
			if err := n.WriteConfig(370, "scsihw: virtio-scsi-single\nscsi1: local-lvm:vm-370-disk-1,iothread=1,size=64M\n"); err != nil {
				t.Fatal(err)
			}
			n.MustStart(t, 370, fakenode.ArgvOptions{Legacy: gen == "drive", Blockdev: gen == "blockdev"})
			bd := gen == "blockdev"
			do := func(fn func(qmp.Session) error) {
				t.Helper()
				if err := qmp.Do(context.Background(), n.Paths.QMPSocket(370), 5*time.Second, fn); err != nil {
					t.Fatal(err)
				}
			}
			var got map[string]int64
			do(func(s qmp.Session) (err error) { got, err = s.ReadThrottleLimits("scsi1", bd); return })
			if l := qemuserver.Limits(got).Normal(); len(l) != 0 {
				t.Fatalf("fresh disk runs limits %v", l)
			}
			want := qemuserver.Limits{"bps-write": 20 << 20, "bps-write-max": 40 << 20, "bps-write-max-length": 5, "iops-read": 500}
			do(func(s qmp.Session) error { return s.SetThrottleLimits("scsi1", bd, want.Full()) })
			do(func(s qmp.Session) (err error) { got, err = s.ReadThrottleLimits("scsi1", bd); return })
			if !qemuserver.Limits(got).Equal(want) {
				t.Errorf("read back %v, want %v", qemuserver.Limits(got).Normal(), want)
			}
			if bd && len(got) < 18 {
				t.Errorf("qom-get limits has %d fields", len(got))
			}
			do(func(s qmp.Session) error { return s.SetThrottleLimits("scsi1", bd, qemuserver.Limits{}.Full()) })
			do(func(s qmp.Session) (err error) { got, err = s.ReadThrottleLimits("scsi1", bd); return })
			if l := qemuserver.Limits(got).Normal(); len(l) != 0 {
				t.Errorf("after clearing: %v", l)
			}
			// QEMU's own rule: a burst below its rate is refused, with the class kept.
			bad := qemuserver.Limits{"bps-write": 20 << 20, "bps-write-max": 10 << 20}.Full()
			err := qmp.Do(context.Background(), n.Paths.QMPSocket(370), 5*time.Second, func(s qmp.Session) error { return s.SetThrottleLimits("scsi1", bd, bad) })
			var qe *qmp.Error
			if !errors.As(err, &qe) || qe.Class != "GenericError" {
				t.Errorf("burst below rate: %v", err)
			}
			err = qmp.Do(context.Background(), n.Paths.QMPSocket(370), 5*time.Second, func(s qmp.Session) error { _, err := s.ReadThrottleLimits("scsi9", bd); return err })
			if err == nil {
				t.Errorf("no error for a disk the VM does not have")
			}
		})
	}
}
