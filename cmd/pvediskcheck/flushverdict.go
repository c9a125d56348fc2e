package main

import (
	"fmt"

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
