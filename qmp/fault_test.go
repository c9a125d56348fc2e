package qmp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/internal/heaptest"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// flood writes b to c until the client goes away.
func flood(c net.Conn, b []byte) {
	for {
		if _, err := c.Write(b); err != nil {
			return
		}
	}
}

// Hostile and broken sockets: each ends in an error within the timeout (plus
// a margin for a loaded machine), with bounded memory, and is not mistaken for
// a busy socket (which DoRetry would retry).
func TestMonitorHostileSockets(t *testing.T) {
	const timeout = 500 * time.Millisecond
	junk := []byte(strings.Repeat("x", 64<<10))
	cases := []struct {
		name    string
		raw     func(c net.Conn)
		handler func(cmd string, args gjson.Result) string
		want    string // in the error
		busy    bool
		big     bool // may hold one maximal reply
	}{
		{name: "endless greeting without a line end", raw: func(c net.Conn) { flood(c, junk) }, want: "not a QMP greeting"},
		{name: "a greeting that is not QMP", raw: func(c net.Conn) {
			fmt.Fprint(c, "SSH-2.0-OpenSSH_9.2\r\n")
			time.Sleep(time.Second)
		}, want: "unexpected greeting"},
		{name: "greeting, then silence", raw: func(c net.Conn) {
			fmt.Fprint(c, qmptest.Greeting72+"\r\n")
			time.Sleep(2 * time.Second)
		}, want: "no reply to qmp_capabilities"},
		{name: "endless reply", raw: func(c net.Conn) {
			fmt.Fprint(c, qmptest.Greeting72+"\r\n")
			buf := make([]byte, 4096)
			c.Read(buf)
			fmt.Fprint(c, `{"return": {}}`+"\r\n")
			c.Read(buf)
			fmt.Fprint(c, `{"return": "`)
			flood(c, junk)
		}, want: "reply too large", big: true},
		{name: "endless events", raw: func(c net.Conn) {
			fmt.Fprint(c, qmptest.Greeting72+"\r\n")
			buf := make([]byte, 4096)
			c.Read(buf)
			fmt.Fprint(c, `{"return": {}}`+"\r\n")
			c.Read(buf)
			flood(c, []byte(qmptest.Event+"\r\n"))
		}, want: "no reply to query-block within"},
		{name: "garbage reply", handler: func(string, gjson.Result) string { return "Segmentation fault" }, want: "malformed reply to query-block"},
		// Issue 21: nesting that made gjson's validator overflow Go's
		// stack (12 MB: fatal error; 2 MB: 244 MB of heap and stack).
		{name: "12 MB of [", handler: always(strings.Repeat("[", 12<<20)), want: "query-block: reply refused: nested deeper than 1024 levels", big: true},
		{name: "12 MB of {\"a\": chained", handler: always(strings.Repeat(`{"a":`, 12<<20/5)), want: "nested deeper than 1024 levels", big: true},
		{name: "deep nesting inside a return of the right shape", handler: always(qmptest.Return(`[{"qdev": "scsi0", "inserted": {"image": ` + strings.Repeat("[", 2<<20) + strings.Repeat("]", 2<<20) + `}}]`)), want: "nested deeper than 1024 levels", big: true},
		{name: "millions of empty entries", handler: always(qmptest.Return("[" + strings.Repeat("{},", 4<<20) + "{}]")), want: "more than 65536 members", big: true},
		{name: "a client that holds the socket", raw: func(c net.Conn) { time.Sleep(2 * time.Second) }, busy: true, want: "busy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := qmptest.NewQEMU(t, c.handler)
			q.Raw = c.raw
			sock := q.Sock()
			var err error
			var took time.Duration
			peak := heaptest.Peak(func() {
				start := time.Now()
				err = Do(context.Background(), sock, timeout, func(s Session) error {
					_, err := s.Exec("query-block", nil)
					return err
				})
				took = time.Since(start)
			})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err = %v, want one containing %q", err, c.want)
			}
			if errors.Is(err, ErrBusy) != c.busy {
				t.Errorf("errors.Is(err, ErrBusy) = %v, want %v", !c.busy, c.busy)
			}
			if took > timeout+time.Second {
				t.Errorf("took %s with a %s timeout", took, timeout)
			}
			// 16 MiB is garbage the collector has not yet reclaimed; a
			// client that kept what it skipped (events) passes it within
			// the window.
			limit := uint64(16 << 20)
			if c.big {
				limit += 3 * MaxReplyBytes
			}
			if peak > limit {
				t.Errorf("peak live heap %d bytes, more than %d", peak, limit)
			}
			t.Logf("%s: %v after %s, peak live heap +%d KiB", c.name, err, took.Round(time.Millisecond), peak>>10)
		})
	}
}

// always answers every command with text.
func always(text string) func(string, gjson.Result) string {
	return func(string, gjson.Result) string { return text }
}

// The whole exchange is bounded by the timeout, not each command: a QEMU
// that answers each command just before its deadline cannot stretch it.
func TestMonitorExchangeDeadline(t *testing.T) {
	q := qmptest.NewQEMU(t, func(string, gjson.Result) string {
		time.Sleep(150 * time.Millisecond)
		return qmptest.Return("{}")
	})
	start := time.Now()
	err := Do(context.Background(), q.Sock(), 400*time.Millisecond, func(s Session) error {
		for i := 0; i < 10; i++ {
			if _, err := s.Exec("query-status", nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), "no reply to query-status") {
		t.Fatalf("err = %v, want the exchange to end at its deadline", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("took %s with a 400ms timeout", took)
	}
}

// Cancelling the context ends a blocked exchange at once.
func TestMonitorCancel(t *testing.T) {
	q := qmptest.NewQEMU(t, func(string, gjson.Result) string { time.Sleep(5 * time.Second); return "" })
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	err := Do(ctx, q.Sock(), 10*time.Second, func(s Session) error {
		_, err := s.Exec("query-blockstats", nil)
		return err
	})
	if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Fatalf("err = %v after %s, want context.Canceled at once", err, time.Since(start))
	}
}

// A flooding agent is bounded too.
func TestAgentFloodBounded(t *testing.T) {
	f := qmptest.NewAgent(t)
	f.Raw = func(c net.Conn) { flood(c, []byte(strings.Repeat("z", 64<<10))) }
	var err error
	peak := heaptest.Peak(func() {
		err = Agent{Path: f.Sock(), Timeout: 2 * time.Second}.Ping(context.Background())
	})
	if err == nil || !strings.Contains(err.Error(), "reply too large") {
		t.Fatalf("err = %v", err)
	}
	if limit := uint64(3*MaxAgentReplyBytes + 8<<20); peak > limit {
		t.Errorf("peak live heap %d bytes, more than %d", peak, limit)
	}
}

// Issue 21: the guest writes the agent's replies. Nesting that made the
// validator overflow Go's stack (24 MB of "[": fatal error, 1.09 GB), as the
// command's reply or as what the sync reads through, is refused in bounded
// time and memory, an exit 3 error naming the command.
func TestAgentHostileReplies(t *testing.T) {
	deep := strings.Repeat("[", 24_000_000)
	for _, c := range []struct {
		name   string
		reply  string // the command's reply line
		before string // a line sent on connect, before the sync
		want   string
	}{
		{name: "24 MB of [", reply: deep, want: "guest-ping: reply refused: nested deeper than 1024 levels"},
		{name: "a chain of objects", reply: strings.Repeat(`{"a": `, 4_000_000), want: "guest-ping: reply refused: nested deeper"},
		{name: "deep nesting inside a return", reply: `{"return": {"paths": [{"path": "/", "x": ` + strings.Repeat("[", 1<<20) + strings.Repeat("]", 1<<20) + `}]}}`, want: "nested deeper"},
		{name: "millions of members", reply: `{"return": [` + strings.Repeat("0,", 8<<20) + `0]}`, want: "more than 65536 members"},
		{name: "before the sync", before: "\xff" + deep, want: "guest-sync-delimited: reply refused: nested deeper"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := qmptest.NewAgent(t)
			before, reply := []byte(c.before+"\n"), []byte(c.reply+"\n") // the fake's copies, made before the count
			if c.before != "" {
				f.OnAccept = func(w net.Conn) { w.Write(before) }
			}
			f.Handle = func(w net.Conn, _ string, _ gjson.Result) { w.Write(reply) }
			const timeout = 5 * time.Second
			var err error
			var took time.Duration
			peak := heaptest.Peak(func() {
				start := time.Now()
				err = Agent{Path: f.Sock(), Timeout: timeout}.Ping(context.Background())
				took = time.Since(start)
			})
			if err == nil || !strings.Contains(err.Error(), c.want) || !errors.Is(err, ErrHostileReply) || exitcode.Of(err) != exitcode.Unreachable {
				t.Fatalf("err = %v (exit %d), want one containing %q, exit 3", err, exitcode.Of(err), c.want)
			}
			if took > timeout {
				t.Errorf("took %s", took)
			}
			// The line itself (read with doubling buffers) and the
			// collector's slack; the stack overflow took 1.09 GB.
			if limit := uint64(3*MaxAgentReplyBytes + 8<<20); peak > limit {
				t.Errorf("peak live heap %d bytes, more than %d", peak, limit)
			}
			t.Logf("%v after %s, peak live heap +%d KiB", err, took.Round(time.Millisecond), peak>>10)
		})
	}
}
