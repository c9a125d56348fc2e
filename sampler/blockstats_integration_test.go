//go:build integration

package sampler

import (
	"context"
	"fmt"
	"math"
	"net"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	pvevm "github.com/pvediskcheck/pvediskcheck/vm"
)

// TestBlockstatsRealQEMU samples a throttled disk under a deep queue started
// at the beginning of the window, while a third client holds the QMP socket
// for a while: the sampler must wait it out, and the steady part must give
// the limit within 3 %.
func TestBlockstatsRealQEMU(t *testing.T) {
	v, _ := fakenode.QEMUVersion(fakenode.QEMUBinary())
	for _, gen := range []string{"blockdev", "drive"} {
		t.Run("qemu-"+v+"/"+gen, func(t *testing.T) {
			n := fakenode.NewT(t)
			n.MustVolume(t, "local-lvm", "vm-370-disk-1", 256<<20)
			if err := n.WriteConfig(370, "scsihw: virtio-scsi-single\nscsi1: local-lvm:vm-370-disk-1,iothread=1,size=256M\n"); err != nil {
				t.Fatal(err)
			}
			vm := n.MustStart(t, 370, fakenode.ArgvOptions{Legacy: gen == "drive", Blockdev: gen == "blockdev"})
			sock := n.Paths.QMPSocket(370)
			ctx := context.Background()
			lim := qemuserver.Limits{"bps-write": 20 << 20}
			if err := qmp.Do(ctx, sock, 5*time.Second, func(s qmp.Session) error { return s.SetThrottleLimits("scsi1", gen == "blockdev", lim.Full()) }); err != nil {
				t.Fatal(err)
			}
			load := vm.StartLoad(fakenode.LoadSpec{Disk: "scsi1", Write: true, Size: 1 << 20, Depth: 48})
			// A client that takes the socket for 1.2 s (a slow pvestatd).
			// It holds it once QEMU has greeted it: a dial that lands while
			// the sampler is connected waits in (or, with the backlog full,
			// is refused by) the listen queue, and holds nothing.
			held := make(chan error, 1)
			time.AfterFunc(4*time.Second, func() { held <- holdQMP(sock, 1200*time.Millisecond, 2*time.Second) })
			v, err := pvevm.Load(ctx, node.New(n.Paths, 0), 370)
			if err != nil {
				t.Fatal(err)
			}
			b := &Window{VM: v, Disks: []string{"scsi1"}}
			ser, err := b.Run(ctx, 10*time.Second)
			if st := load.Stop(); st.Err != nil {
				t.Errorf("load: %v", st.Err)
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := <-held; err != nil {
				t.Fatalf("the third client never held the socket: %v", err)
			}
			t.Logf("%d samples, %d ticks missed, %d waited for the socket", len(ser.Samples), ser.Missed, ser.Busy)
			if ser.Missed+ser.Busy == 0 {
				t.Errorf("the held socket went unnoticed")
			}
			// The window's 10 s less at most one tick (0.5 s): its first
			// sample waits for QMP's connect, 0.27 s late once on a loaded
			// machine (QEMU 11.1.3).
			if len(ser.Samples) < 15 || ser.Samples[len(ser.Samples)-1].Time.Sub(ser.Samples[0].Time) < 9500*time.Millisecond {
				t.Errorf("%d samples over %s", len(ser.Samples), ser.Samples[len(ser.Samples)-1].Time.Sub(ser.Samples[0].Time))
			}
			t0 := ser.Samples[0].Time
			for i := 1; i < len(ser.Samples); i++ {
				d := DeltaRates("scsi1", ser.Samples[i-1], ser.Samples[i])
				t.Logf("t=%5.2f s  %6.2f MiB/s", ser.Samples[i].Time.Sub(t0).Seconds(), d.WriteBytesPerSec/(1<<20))
			}
			for _, skip := range []time.Duration{0, time.Second, 2 * time.Second, 3 * time.Second} {
				r, err := ser.Rates("scsi1", skip)
				if err != nil {
					t.Fatal(err)
				}
				d := DeltaRates("scsi1", ser.Samples[len(ser.Samples)-r.Samples], ser.Samples[len(ser.Samples)-1])
				t.Logf("skip %s: fit %.3f MiB/s (%+.2f %%), two-point %.3f MiB/s (%+.2f %%)", skip,
					r.WriteBytesPerSec/(1<<20), (r.WriteBytesPerSec/(20<<20)-1)*100, d.WriteBytesPerSec/(1<<20), (d.WriteBytesPerSec/(20<<20)-1)*100)
				if skip == 3*time.Second && math.Abs(r.WriteBytesPerSec/(20<<20)-1) > 0.03 {
					t.Errorf("steady rate %.3f MiB/s, not within 3 %% of 20", r.WriteBytesPerSec/(1<<20))
				}
			}
		})
	}
}

// holdQMP connects to a QMP socket, retrying a refused connect for up to
// within, and once QEMU's greeting arrives (QEMU serves this client) keeps
// the connection for hold.
func holdQMP(sock string, hold, within time.Duration) error {
	end := time.Now().Add(within)
	for {
		c, err := net.Dial("unix", sock)
		if err != nil {
			if time.Now().After(end) {
				return err
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		defer c.Close()
		if err := c.SetReadDeadline(end); err != nil {
			return err
		}
		if _, err := c.Read(make([]byte, 4096)); err != nil {
			return fmt.Errorf("no greeting: %w", err)
		}
		time.Sleep(hold)
		return nil
	}
}
