package node

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"
)

// Within is the one way a system call that can block for good is made:
// stat(2) or statfs(2) of a hung NFS or CIFS mount, a read of a pmxcfs file
// while the cluster has no quorum. It runs call in a goroutine of its own
// and waits for it at most timeout (DefaultTimeout when 0 or less) and no
// longer than ctx. When call returns in time, its result is Within's. When
// not, Within returns at once with ErrFileTimeout (the timeout passed) or
// ctx's error (ctx ended first); call, which nothing can interrupt, goes
// on alone and its result is dropped (GaveUp tells these errors from
// call's own).
func Within[T any](ctx context.Context, timeout time.Duration, call func() (T, error)) (T, error) {
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := call()
		ch <- result{v, err}
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	case <-t.C:
		var zero T
		return zero, ErrFileTimeout
	}
}

// GaveUp says whether err is Within's for a call it did not wait out: the
// timeout passed or the context ended.
func GaveUp(err error) bool {
	return errors.Is(err, ErrFileTimeout) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Each calls do(i) for every i from 0 to count-1, at most par at a time
// (one when par is less than 1), and returns when every call has: the one
// bounded fan-out (check --all and metrics over the node's VMs, top over
// its running ones). The calls start in order of i, taken in turn by par
// goroutines (fewer when count is smaller), not one goroutine per call:
// top's sample of 50 VMs grew 50 fresh stacks a second to the depth of a
// QMP exchange. do writes its result to its own index, so no two calls
// share a variable.
func Each(count, par int, do func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(max(par, 1), count) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < count; i = int(next.Add(1) - 1) {
				do(i)
			}
		}()
	}
	wg.Wait()
}
