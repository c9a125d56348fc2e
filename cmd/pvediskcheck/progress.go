package main

import (
	"context"
	"fmt"
	"io"

	"github.com/pvediskcheck/pvediskcheck/sampler"
)

// The one progress line of a window sampled by sampler.Window (flush,
// cache --verify, limit --verify, discard --wait), on stderr when it is a
// terminal and the output is not JSON.

// onSampleMeta is where runWith keeps the caller's sampler.OnSample in the
// app (newEnv reads it into env.onSample).
const onSampleMeta = "pvediskcheck.onSample"

// runWith is run with onSample called after each sample of a window, after
// the progress line: the in-process tests' way to act at a known sample of
// a window (stop or kill QEMU) instead of sleeping.
func runWith(ctx context.Context, args []string, stdout, stderr io.Writer, onSample sampler.OnSample) int {
	app := newApp(stdout, stderr)
	app.Metadata = map[string]any{onSampleMeta: onSample}
	return runApp(ctx, app, args, stdout, stderr)
}

// showsProgress reports whether e prints the progress line.
func showsProgress(e *env) bool { return isTerminal(e.errOut) && !e.json }

// windowProgress is the OnSample of a window: "sampling WHAT 2.5/10 s"
// (and the capability's Detail), then runWith's hook when a test set one.
func windowProgress(e *env, what string) sampler.OnSample {
	show := showsProgress(e)
	hook := e.onSample
	return func(t sampler.Tick) {
		if show {
			line := ctl("\r\x1b[K") + fmt.Sprintf("sampling %s %4.1f/%.0f s", what, t.Elapsed.Seconds(), t.Window.Seconds())
			if t.Detail != "" {
				line += ": " + t.Detail
			}
			fmt.Fprint(e.errOut, line)
		}
		if hook != nil {
			hook(t)
		}
	}
}

// endProgress clears the progress line, however the window ended.
func endProgress(e *env) {
	if showsProgress(e) {
		fmt.Fprint(e.errOut, ctl("\r\x1b[K"))
	}
}
