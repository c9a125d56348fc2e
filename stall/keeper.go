package stall

import (
	"context"
	"encoding/json"
	"time"

	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/outfile"
)

// KeepFor is how much history a Keeper holds: the last minute of samples.
const KeepFor = time.Minute

// Keeper is --capture for the commands that sample (top, metrics): it
// keeps each disk's last minute of samples and captures a stall once,
// when it is first seen; the disk is captured again only after a sample
// shows it completing (a new stall). Not safe for concurrent use.
type Keeper struct {
	// Out is --capture's folder (checked when the run starts).
	Out   *outfile.Parent
	After time.Duration
	// OnCapture gets each capture's result (the commands print it).
	OnCapture func(*Captured, error)

	hist     map[diskKey][]kept
	captured map[diskKey]bool
}

type diskKey struct {
	vmid int
	disk string
}

type kept struct {
	at  time.Time
	raw json.RawMessage
}

// Sample records one disk's row (any JSON-encodable value) at t, and
// captures the disk when stalled is true and it was not captured for this
// stall yet.
func (k *Keeper) Sample(ctx context.Context, n node.Node, t time.Time, vmid int, disk string, row any, stalled bool) {
	if k.hist == nil {
		k.hist, k.captured = map[diskKey][]kept{}, map[diskKey]bool{}
	}
	key := diskKey{vmid, disk}
	if b, err := json.Marshal(row); err == nil {
		h := append(k.hist[key], kept{t, b})
		for len(h) > 0 && t.Sub(h[0].at) > KeepFor {
			h = h[1:]
		}
		k.hist[key] = h
	}
	if !stalled {
		delete(k.captured, key)
		return
	}
	if k.captured[key] {
		return
	}
	k.captured[key] = true
	samples := []json.RawMessage{}
	for _, e := range k.hist[key] {
		samples = append(samples, e.raw)
	}
	c, err := Capture(ctx, n, vmid, CaptureOptions{Out: k.Out, After: k.After, Disks: []string{disk}, Samples: samples})
	if k.OnCapture != nil {
		k.OnCapture(c, err)
	}
}

// Forget drops the history of disks not seen at t for KeepFor (VMs gone).
func (k *Keeper) Forget(t time.Time) {
	for key, h := range k.hist {
		if len(h) == 0 || t.Sub(h[len(h)-1].at) > KeepFor {
			delete(k.hist, key)
			delete(k.captured, key)
		}
	}
}
