package main

import (
	"errors"
	"fmt"

	"github.com/pvediskcheck/pvediskcheck/node"
)

// toolErr makes a tool failure read as what happened.
func toolErr(err error) string {
	if errors.Is(err, node.ErrTimeout) {
		return err.Error() + " (raise --timeout if the node is just slow)"
	}
	return err.Error()
}

// human prints bytes in binary units.
func human(b int64) string {
	neg := ""
	if b < 0 {
		neg, b = "-", -b
	}
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%s%.2f GiB", neg, float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%s%.1f MiB", neg, float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%s%.1f KiB", neg, float64(b)/(1<<10))
	}
	return fmt.Sprintf("%s%d B", neg, b)
}

func humanPtr(b *int64) string {
	if b == nil {
		return "-"
	}
	return human(*b)
}

func pctPtr(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f %%", *p)
}
