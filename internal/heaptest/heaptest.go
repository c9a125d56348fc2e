// Package heaptest measures memory for the tests that bound it: the most
// live heap while a function runs.
package heaptest

import (
	"runtime"
	"runtime/metrics"
	"time"
)

// Peak runs fn and returns the most live heap it saw above the heap before
// fn, sampled every millisecond. Total allocation would measure throughput
// (an endless event stream allocates more on a faster machine); a bound on
// memory is a bound on what is live at once.
func Peak(fn func()) uint64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	runtime.GC()
	base := read()
	var peak uint64
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			peak = max(peak, read())
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	fn()
	close(done)
	<-stopped
	peak = max(peak, read())
	if peak < base {
		return 0
	}
	return peak - base
}
