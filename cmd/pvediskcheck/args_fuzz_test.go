package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"
)

// FuzzArgs runs the CLI in-process with arbitrary arguments against an empty
// node root (no VM can exist, nothing can be changed): it must not panic,
// must end well within its deadline, must exit 0-3, and an error is one
// short line on stderr.
func FuzzArgs(f *testing.F) {
	for _, seed := range []string{
		"cache 370", "cache 0370 scsi1", "check --all --json", "check 370 --fail-on nope",
		"limit 370 scsi1 --mbps-wr 20,cache=unsafe --persist", "limit 370 scsi1 --mbps-wr 1e400",
		"limit 370 scsi1 --iops-rd -1 --dry-run", "flush 370 --for -1s", "flush 370 --hz 0",
		"discard 370 --trim --wait 1s", "thin nope", "--timeout 0 cache 370", "cache 370 --timeout=-1s",
		"nope", "cache " + strings.Repeat("9", 5000), "check 100 -- --json", "limit --clear",
	} {
		f.Add(seed)
	}
	root := f.TempDir()
	f.Fuzz(func(t *testing.T, line string) {
		args := strings.Fields(line)
		if len(args) == 0 {
			return
		}
		switch args[0] {
		case "cache", "check", "limit", "flush", "discard", "thin", "nope":
		default:
			return // commands that read paths (fio) or serve forever are not fuzzed here
		}
		for _, a := range args {
			if strings.Contains(a, "root") || strings.Contains(a, "proc") || strings.Contains(a, "sys") {
				return // the node stays the empty one
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		var out, errb bytes.Buffer
		start := time.Now()
		code := run(ctx, append([]string{"pvediskcheck", "--root", root, "--timeout", "1s"}, args...), &out, &errb)
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("%.200q took %s", line, took)
		}
		if code < 0 || code > 3 {
			t.Errorf("%.200q: exit %d", line, code)
		}
		if code != 0 {
			msg := strings.TrimRight(errb.String(), "\n")
			if strings.Count(msg, "\n") > 0 || len(msg) > maxErrorLine+len("pvediskcheck: ... (99999 bytes)") {
				t.Errorf("%.200q: exit %d with a stderr of %d lines, %d bytes: %.300q", line, code, strings.Count(msg, "\n")+1, len(msg), msg)
			}
		}
	})
}
