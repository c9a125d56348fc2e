package main

import (
	"context"
	"fmt"
	"time"

	"github.com/pvediskcheck/pvediskcheck/flush"
)

// Rendering shared by the commands that show flush verdicts (flush, and
// cache --verify).

// printFlushVerdictLine prints one disk's verdict, coloured by what it means.
func printFlushVerdictLine(e *env, f *flush.Judgement) {
	color := green
	switch f.Verdict {
	case flush.Ignored:
		color = red
	case flush.NoFlushes, flush.ZeroData, flush.Inconclusive:
		color = yellow
	case flush.NotApplicable:
		color = ""
	}
	fmt.Fprintf(e.out, "  flushes: %s: %s\n", e.paint(color, string(f.Verdict)), f.Reason)
}

// sampleHookKey carries, in the command's context, a function called after
// each flush sample: the tests' way to act at a known point of a window
// (stop or kill QEMU) instead of sleeping.
type sampleHookKey struct{}

// withSampleHook returns ctx carrying fn.
func withSampleHook(ctx context.Context, fn func(n int, s flush.Sample)) context.Context {
	return context.WithValue(ctx, sampleHookKey{}, fn)
}

// sampleHook is the OnSample of a flush measurement: progress on a
// terminal, and the context's hook when a test set one.
func sampleHook(e *env) func(s flush.Sample, elapsed, window time.Duration) {
	hook, _ := e.ctx().Value(sampleHookKey{}).(func(int, flush.Sample))
	progress := isTerminal(e.errOut) && !e.json
	n := 0
	return func(s flush.Sample, elapsed, window time.Duration) {
		n++
		if progress {
			fmt.Fprintf(e.errOut, "\rsampling %4.1f/%.0f s", elapsed.Seconds(), window.Seconds())
		}
		if hook != nil {
			hook(n, s)
		}
	}
}

// endProgress clears the progress line.
func endProgress(e *env) {
	if isTerminal(e.errOut) && !e.json {
		fmt.Fprint(e.errOut, "\r\x1b[K")
	}
}
