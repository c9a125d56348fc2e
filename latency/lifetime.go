package latency

import (
	"context"
	"errors"
	"time"

	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// A run's latency histograms live here, the one place a command wires
// them: Start (or With) when the run begins, Hook in each VM's sample
// exchange (set where none is, use one found set), End on every way out.

// Start begins one run's histogram lifetime; timeout is the node's (End's
// bound). nil when on is false: the run sets none, and every method of a
// nil Tracker does nothing (Leftovers still finds a killed run's).
func Start(on bool, timeout time.Duration) *Tracker {
	if !on {
		return nil
	}
	t := NewTracker()
	t.timeout = timeout
	return t
}

// With runs fn with a tracker of its own (Start) and ends it (End) however
// fn returns, a cancelled ctx and a panic included: fn's error joined with
// what could not be cleared.
func With(ctx context.Context, timeout time.Duration, fn func(*Tracker) error) (err error) {
	t := Start(true, timeout)
	defer func() { err = errors.Join(err, t.End(ctx)) }()
	return fn(t)
}

// Hook is the vm.Query.Then of VM v's sample exchanges (its Need includes
// vm.NeedStats): it sets the histograms of disks the first time the QEMU
// process is sampled (Ensure: one found set is used as it is), and End
// clears them in an exchange of patience. nil for a nil tracker.
func (t *Tracker) Hook(v *vm.VM, patience time.Duration, disks []string) func(vm.Change, *vm.Answer) error {
	if t == nil {
		return nil
	}
	ask := func(ctx context.Context, fn func(map[string]qmp.BlockStats, Setter) error) error {
		_, err := v.Ask(ctx, patience, vm.Query{Need: vm.NeedStats, Then: func(c vm.Change, a *vm.Answer) error {
			return fn(a.Stats, c)
		}})
		return err
	}
	return func(c vm.Change, a *vm.Answer) error {
		return t.Ensure(c, v.VMID, v.Pid, ask, disks, a.Stats)
	}
}

// End clears the histograms the run set (Release) on a context of its
// own: ctx's values but not its end, as End runs after Ctrl-C and SIGTERM
// too, within twice the node's timeout (at least 2 s). Nothing for a nil
// tracker.
func (t *Tracker) End(ctx context.Context) error {
	if t == nil {
		return nil
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*max(t.timeout, time.Second))
	defer cancel()
	return t.Release(rctx)
}
