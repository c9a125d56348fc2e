package node

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWithin: a call that returns in time is Within's result, its own
// error included (and GaveUp says no); one that blocks is given up at the
// timeout with ErrFileTimeout, or when the context ends with its error,
// at once, while the call goes on alone.
func TestWithin(t *testing.T) {
	ctx := context.Background()
	v, err := Within(ctx, time.Second, func() (int, error) { return 7, nil })
	if v != 7 || err != nil || GaveUp(err) {
		t.Fatalf("answered: %d, %v", v, err)
	}
	// The call's own error, a stat's errno as the bounded stats get it.
	_, err = Within(ctx, time.Second, func() (st unix.Stat_t, err error) {
		err = unix.Stat("/nonexistent/pvediskcheck", &st)
		return st, err
	})
	if !errors.Is(err, unix.ENOENT) || GaveUp(err) {
		t.Fatalf("the call's error: %v (gave up %v)", err, GaveUp(err))
	}

	release := make(chan struct{})
	defer close(release)
	blocked := func() (int, error) { <-release; return 1, nil }
	start := time.Now()
	v, err = Within(ctx, 50*time.Millisecond, blocked)
	if took := time.Since(start); v != 0 || err != ErrFileTimeout || !GaveUp(err) || took < 50*time.Millisecond || took > 2*time.Second {
		t.Fatalf("timeout: %d, %v after %s", v, err, took)
	}
	cctx, cancel := context.WithCancel(ctx)
	time.AfterFunc(20*time.Millisecond, cancel)
	start = time.Now()
	v, err = Within(cctx, time.Minute, blocked)
	if took := time.Since(start); v != 0 || !errors.Is(err, context.Canceled) || errors.Is(err, ErrFileTimeout) || !GaveUp(err) || took > 2*time.Second {
		t.Fatalf("context ended: %d, %v after %s", v, err, took)
	}
	if GaveUp(nil) || GaveUp(errors.New("no answer")) {
		t.Fatal("GaveUp holds for an error that is not Within's")
	}
}

// TestEach: every index is done exactly once, never more than par at a
// time, and par below 1 is one at a time; Each returns after the last.
func TestEach(t *testing.T) {
	for _, tc := range []struct{ count, par, most int }{{20, 3, 3}, {5, 8, 5}, {4, 0, 1}, {4, -2, 1}, {0, 4, 0}} {
		var running, peak atomic.Int32
		var mu sync.Mutex
		done := map[int]int{}
		Each(tc.count, tc.par, func(i int) {
			now := running.Add(1)
			for {
				p := peak.Load()
				if now <= p || peak.CompareAndSwap(p, now) {
					break
				}
			}
			time.Sleep(20 * time.Millisecond)
			running.Add(-1)
			mu.Lock()
			done[i]++
			mu.Unlock()
		})
		if running.Load() != 0 || len(done) != tc.count {
			t.Errorf("count %d par %d: returned with %d running, %d indexes done", tc.count, tc.par, running.Load(), len(done))
		}
		for i := range tc.count {
			if done[i] != 1 {
				t.Errorf("count %d par %d: index %d done %d times", tc.count, tc.par, i, done[i])
			}
		}
		if int(peak.Load()) > tc.most || (tc.count > 0 && tc.most > 1 && peak.Load() < 2) {
			t.Errorf("count %d par %d: %d at once, at most %d wanted", tc.count, tc.par, peak.Load(), tc.most)
		}
	}
}
