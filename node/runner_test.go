package node

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestRunner(t *testing.T) {
	r := Runner{Timeout: 2 * time.Second}
	out, err := r.Run(context.Background(), "/bin/sh", "-c", "echo hello; echo oops >&2")
	if err != nil || string(out) != "hello\n" {
		t.Fatalf("out %q err %v", out, err)
	}
	_, err = r.Run(context.Background(), "/bin/sh", "-c", "echo bad >&2; exit 5")
	var ce *CommandError
	if !errors.As(err, &ce) || ce.Status != 5 || err.Error() != "/bin/sh exited with status 5: bad" {
		t.Fatalf("err %v", err)
	}
	start := time.Now()
	_, err = Runner{Timeout: 200 * time.Millisecond}.Run(context.Background(), "/bin/sh", "-c", "sleep 10")
	if !errors.Is(err, ErrTimeout) || time.Since(start) > 3*time.Second {
		t.Fatalf("timeout: %v after %s", err, time.Since(start))
	}
	// A command that floods its output is stopped at the cap, not read to
	// the end into memory.
	_, err = Runner{Timeout: time.Minute}.Run(context.Background(), "/bin/sh", "-c", "yes 0123456789abcdef")
	if !errors.Is(err, ErrTooMuchOutput) {
		t.Fatalf("flood: %v", err)
	}
	// A flood on stderr is dropped beyond its cap; the command's status
	// and first line still tell.
	_, err = r.Run(context.Background(), "/bin/sh", "-c", "head -c 1000000 /dev/zero | tr '\\000' x >&2; echo; exit 3")
	if !errors.As(err, &ce) || ce.Status != 3 || len(ce.Stderr) != MaxErrorBytes || !strings.HasPrefix(ce.Stderr, "xxx") {
		t.Fatalf("stderr flood: %v (%d bytes)", err, len(ce.Stderr))
	}
	if _, err := (Runner{Off: errors.New("config-only")}).Run(context.Background(), "lvs"); err == nil {
		t.Fatal("Off ran a command")
	}
}
