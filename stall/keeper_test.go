package stall

import (
	"context"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

// --stall-after: a second is the least taken, a usage error below it.
func TestValidateAfter(t *testing.T) {
	for d, ok := range map[time.Duration]bool{0: false, 999 * time.Millisecond: false, time.Second: true, 10 * time.Second: true} {
		err := ValidateAfter(d)
		if (err == nil) != ok || !ok && exitcode.Of(err) != exitcode.Usage {
			t.Errorf("%s: %v (exit %d), want accepted %v", d, err, exitcode.Of(err), ok)
		}
	}
}

// Forget drops a disk not sampled for KeepFor, and with it the record of
// its capture: a disk of a VM that comes back stalled is captured again;
// a disk sampled within KeepFor keeps both.
func TestKeeperForget(t *testing.T) {
	n, _ := captureNode(t, 2)
	k := &Keeper{Out: t.TempDir(), After: recAfter}
	captures := 0
	k.OnCapture = func(c *Captured, err error) {
		if err != nil {
			t.Error(err)
		}
		captures++
	}
	t0 := time.Now()
	ctx := context.Background()
	k.Sample(ctx, n, t0, 100, "scsi1", map[string]int{"i": 0}, true)
	k.Sample(ctx, n, t0.Add(30*time.Second), 100, "scsi0", map[string]int{"i": 1}, false)
	if captures != 1 {
		t.Fatalf("%d captures, want 1", captures)
	}
	// KeepFor after scsi1's last sample: kept, still captured for this stall.
	k.Forget(t0.Add(KeepFor))
	k.Sample(ctx, n, t0.Add(KeepFor), 100, "scsi1", map[string]int{"i": 2}, true)
	if captures != 1 || len(k.hist[diskKey{100, "scsi1"}]) != 2 {
		t.Errorf("forgotten at KeepFor: %d captures, %d samples", captures, len(k.hist[diskKey{100, "scsi1"}]))
	}
	// A nanosecond past KeepFor since scsi1's last sample: it goes with
	// its capture; scsi0, sampled 30 s before, stays.
	k.Sample(ctx, n, t0.Add(KeepFor+30*time.Second), 100, "scsi0", map[string]int{"i": 3}, false)
	k.Forget(t0.Add(2*KeepFor + time.Nanosecond))
	if _, ok := k.hist[diskKey{100, "scsi1"}]; ok {
		t.Error("scsi1 kept past KeepFor")
	}
	if _, ok := k.hist[diskKey{100, "scsi0"}]; !ok {
		t.Error("scsi0 forgotten 30 s after its last sample")
	}
	k.Sample(ctx, n, t0.Add(2*KeepFor+time.Second), 100, "scsi1", map[string]int{"i": 4}, true)
	if captures != 2 {
		t.Errorf("%d captures, want the forgotten disk's new stall captured", captures)
	}
}
