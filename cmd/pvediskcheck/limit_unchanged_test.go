//go:build integration

package main

import (
	"bufio"
	"io"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/limit"
)

// throttleCounter sits in front of a real QEMU's QMP socket and counts the
// throttle commands clients send through it (block_set_io_throttle under
// -drive, qom-set of a throttle group under -blockdev).
type throttleCounter struct {
	n  atomic.Int64
	ln net.Listener
	wg sync.WaitGroup
}

func countThrottle(t *testing.T, sock string) *throttleCounter {
	t.Helper()
	real := sock + ".real"
	if err := os.Rename(sock, real); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	c := &throttleCounter{ln: ln}
	t.Cleanup(func() {
		ln.Close()
		c.wg.Wait()
		os.Remove(sock)
		os.Rename(real, sock)
	})
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("unix", real)
			if err != nil {
				in.Close()
				continue
			}
			c.wg.Add(2)
			go func() { // client -> QEMU, each line counted before QEMU gets it
				defer c.wg.Done()
				defer out.Close()
				rd := bufio.NewReader(in)
				for {
					line, err := rd.ReadString('\n')
					c.n.Add(int64(strings.Count(line, `"block_set_io_throttle"`) + strings.Count(line, `"qom-set"`)))
					if _, werr := io.WriteString(out, line); err != nil || werr != nil {
						return
					}
				}
			}()
			go func() {
				defer c.wg.Done()
				defer in.Close()
				_, _ = io.Copy(in, out)
			}()
		}
	}()
	return c
}

// TestLimitUnchangedRealQEMU: applying the limits that already run sends
// no throttle command and says so (text and JSON); with --persist and the
// config already carrying them, qm set is not run either.
func TestLimitUnchangedRealQEMU(t *testing.T) {
	for _, gen := range generations {
		t.Run(qemuName(t)+"/"+gen, func(t *testing.T) {
			n, _ := startLab370(t, gen)
			n.UseDoubles(t)
			t.Setenv("PVEDISKCHECK_ROOT", n.Root)
			c := countThrottle(t, n.Paths.QMPSocket(370))
			args := []string{"limit", "370", "scsi1", "--mbps-wr", "20", "--iops-rd", "500"}

			var first limit.Result
			if errs, code := runJSON(t, n, &first, args...); code != 0 || first.Apply == nil || first.Apply.Unchanged || c.n.Load() != 1 {
				t.Fatalf("first: exit %d %s %+v, %d throttle commands", code, errs, first.Apply, c.n.Load())
			}
			var again limit.Result
			if errs, code := runJSON(t, n, &again, args...); code != 0 || again.Apply == nil || !again.Apply.Unchanged || !again.Apply.Confirmed {
				t.Fatalf("again: exit %d %s %+v", code, errs, again.Apply)
			}
			if c.n.Load() != 1 {
				t.Errorf("the same limits again sent %d more throttle commands", c.n.Load()-1)
			}
			out, errs, code := runCLI(t, append([]string{"--root", n.Root}, args...)...)
			if code != 0 || !strings.Contains(out, "nothing changed: the limits asked for are already in effect") ||
				!strings.Contains(out, "scsi1 already runs with these limits: nothing was sent") || c.n.Load() != 1 {
				t.Errorf("text: exit %d, %d commands\n%s%s", code, c.n.Load(), out, errs)
			}

			// --persist: the config lacks them, so qm set runs once; then
			// config and QEMU agree and it is not run again.
			if errs, code := runJSON(t, n, &first, append(args, "--persist")...); code != 0 || first.Apply.Unchanged || len(n.QMCalls(t)) != 1 {
				t.Fatalf("persist: exit %d %s %+v, qm %v", code, errs, first.Apply, n.QMCalls(t))
			}
			sent := c.n.Load()
			if errs, code := runJSON(t, n, &again, append(args, "--persist")...); code != 0 || !again.Apply.Unchanged || len(n.QMCalls(t)) != 1 || c.n.Load() != sent {
				t.Errorf("persist again: exit %d %s %+v, qm %v, throttle commands %d -> %d", code, errs, again.Apply, n.QMCalls(t), sent, c.n.Load())
			}
			if !strings.Contains(strings.Join(again.Notes, " "), "the config and the running VM of VM 370 already have these limits for scsi1: qm set was not run") {
				t.Errorf("notes %q", again.Notes)
			}
		})
	}
}
