// Package qmptest is the one fake QMP server and fake guest agent that every
// package's tests use. Both listen on a unix socket and, like QEMU's
// chardevs, serve one client at a time: a second client connects but hears
// nothing until the first has gone (QEMU-FACTS "One QMP client at a time").
package qmptest

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// Greeting72 is QEMU 7.2's QMP greeting.
const Greeting72 = `{"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}, "package": "Debian 1:7.2+dfsg-7+deb12u7"}, "capabilities": ["oob"]}}`

// Greeting111 is QEMU 11.1.3's QMP greeting (Debian trixie-backports
// 1:11.1.3+ds-1~bpo13+1, the labs' version): the first with qom-list-get.
const Greeting111 = `{"QMP": {"version": {"qemu": {"micro": 3, "minor": 1, "major": 11}, "package": "Debian 1:11.1.3+ds-1~bpo13+1"}, "capabilities": ["oob"]}}`

// Event is an asynchronous QMP event, as QEMU interleaves them with replies.
const Event = `{"timestamp": {"seconds": 1764449000, "microseconds": 1}, "event": "RESUME"}`

// QEMU is a fake QMP server. Set its fields before the first client comes.
type QEMU struct {
	Path string
	// Greeting is sent on connect (default Greeting72), after GreetDelay.
	Greeting   string
	GreetDelay time.Duration
	// BeforeCaps is sent between the greeting and the reply to
	// qmp_capabilities (go-qemu PR 210: an event there was taken for it).
	BeforeCaps string
	// Handler answers one command with the whole reply text (one or more
	// lines; events may come first). nil answers CommandNotFound.
	Handler func(cmd string, args gjson.Result) string
	// Raw, when set, replaces the whole dialogue of a connection.
	Raw func(c net.Conn)

	commands atomic.Int64
	conns    atomic.Int64
	done     chan struct{}
	ln       net.Listener
	start    sync.Once
	mu       sync.Mutex
	seen     []string
	paused   chan struct{} // closed when not paused; nil before the first Pause
	cur      net.Conn      // the client being served
}

// NewQEMU creates a fake QMP server on a fresh socket; it serves from the
// first Sock call on (configure it before) and stops at cleanup.
func NewQEMU(t testing.TB, handler func(cmd string, args gjson.Result) string) *QEMU {
	t.Helper()
	q := &QEMU{Path: socketPath(t, "100.qmp"), Handler: handler, done: make(chan struct{})}
	var err error
	if q.ln, err = net.Listen("unix", q.Path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(q.done); q.ln.Close() })
	return q
}

// Sock starts serving and returns the socket path.
func (q *QEMU) Sock() string {
	q.start.Do(func() {
		go func() {
			for {
				c, err := q.ln.Accept()
				if err != nil {
					return
				}
				q.conns.Add(1)
				q.serve(c) // one client at a time, as QEMU does
			}
		}()
	})
	return q.Path
}

// Commands is the number of commands answered (qmp_capabilities excluded).
func (q *QEMU) Commands() int64 { return q.commands.Load() }

// Conns is the number of connections accepted.
func (q *QEMU) Conns() int64 { return q.conns.Load() }

// Seen lists the commands received, in order (qmp_capabilities excluded).
func (q *QEMU) Seen() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.seen...)
}

func (q *QEMU) sleep(d time.Duration) bool {
	select {
	case <-q.done:
		return false
	case <-time.After(d):
		return true
	}
}

// Pause makes QEMU stop answering, as a SIGSTOPped process: clients still
// connect (the kernel accepts them), but no greeting or reply comes until
// Resume. A command already sent is answered after Resume.
func (q *QEMU) Pause() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.paused == nil || isClosed(q.paused) {
		q.paused = make(chan struct{})
	}
}

// Resume ends a Pause.
func (q *QEMU) Resume() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.paused != nil && !isClosed(q.paused) {
		close(q.paused)
	}
}

// Kill makes QEMU go away as a SIGKILLed process does: connections are
// cut and the socket file stays, refusing every new client.
func (q *QEMU) Kill() {
	if l, ok := q.ln.(*net.UnixListener); ok {
		l.SetUnlinkOnClose(false)
	}
	q.ln.Close()
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.cur != nil {
		q.cur.Close()
	}
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// wait blocks while paused; false when the server is done.
func (q *QEMU) wait() bool {
	q.mu.Lock()
	ch := q.paused
	q.mu.Unlock()
	if ch == nil {
		return true
	}
	select {
	case <-ch:
		return true
	case <-q.done:
		return false
	}
}

func (q *QEMU) serve(c net.Conn) {
	defer c.Close()
	q.mu.Lock()
	q.cur = c
	q.mu.Unlock()
	if q.Raw != nil {
		q.Raw(c)
		return
	}
	if q.GreetDelay > 0 && !q.sleep(q.GreetDelay) {
		return
	}
	if !q.wait() {
		return
	}
	greeting := q.Greeting
	if greeting == "" {
		greeting = Greeting72
	}
	fmt.Fprint(c, greeting+"\r\n")
	rd := bufio.NewReader(c)
	line, err := rd.ReadString('\n')
	if err != nil || gjson.Get(line, "execute").String() != "qmp_capabilities" {
		return
	}
	if q.BeforeCaps != "" {
		fmt.Fprint(c, q.BeforeCaps+"\r\n")
	}
	fmt.Fprint(c, `{"return": {}}`+"\r\n")
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return
		}
		if !q.wait() {
			return
		}
		req := gjson.Parse(line)
		cmd := req.Get("execute").String()
		q.commands.Add(1)
		q.mu.Lock()
		q.seen = append(q.seen, cmd)
		q.mu.Unlock()
		reply := NotFound(cmd)
		if q.Handler != nil {
			reply = q.Handler(cmd, req.Get("arguments"))
		}
		fmt.Fprint(c, reply+"\r\n")
	}
}

// Hold connects as another client (pvestatd, say) and keeps the socket
// until release is called: meanwhile other clients wait for a greeting.
func (q *QEMU) Hold(t testing.TB) (release func()) {
	t.Helper()
	c, err := net.Dial("unix", q.Sock())
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the server is ours: the greeting has arrived.
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		t.Fatalf("hold: no greeting: %v", err)
	}
	var once sync.Once
	release = func() { once.Do(func() { c.Close() }) }
	t.Cleanup(release)
	return release
}

// Return is a success reply carrying value (JSON).
func Return(value string) string { return `{"return": ` + value + `}` }

// Fail is an error reply of class with desc.
func Fail(class, desc string) string {
	return fmt.Sprintf(`{"error": {"class": %q, "desc": %q}}`, class, desc)
}

// NotFound is QEMU's reply to an unknown command.
func NotFound(cmd string) string {
	return Fail("CommandNotFound", "The command "+cmd+" has not been found")
}

// Replies answers each command with {"return": replies[cmd]}, and
// CommandNotFound for the others.
func Replies(replies map[string]string) func(cmd string, args gjson.Result) string {
	return func(cmd string, _ gjson.Result) string {
		if r, ok := replies[cmd]; ok {
			return Return(r)
		}
		return NotFound(cmd)
	}
}

// Agent is a fake qemu-guest-agent socket: it answers guest-sync-delimited
// as qemu-ga does (0xFF, then the id) and each other request with Handle.
type Agent struct {
	Path string
	// OnAccept runs first on every connection (a previous client's stale
	// replies, say).
	OnAccept func(c net.Conn)
	// Raw replaces the whole dialogue of a connection.
	Raw func(c net.Conn)
	// Handle answers one request by writing to w; nil answers nothing.
	Handle func(w net.Conn, cmd string, req gjson.Result)
	// Silent reads requests and never answers (an agent that is not
	// running in the guest: QEMU's chardev accepts, nobody reads).
	Silent bool
	// SyncSilent leaves sync number n (from 1, over all connections)
	// unanswered: an agent that misses one in a loaded guest.
	SyncSilent func(n int) bool

	requests atomic.Int32
	syncs    atomic.Int32
	conns    atomic.Int32
	bytes    atomic.Int64
	ln       net.Listener
	once     sync.Once
}

// NewAgent creates the socket; it serves from the first Sock call on, so
// configure it before.
func NewAgent(t testing.TB) *Agent {
	t.Helper()
	a := &Agent{Path: socketPath(t, "100.qga")}
	var err error
	if a.ln, err = net.Listen("unix", a.Path); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.ln.Close() })
	return a
}

// Sock starts serving and returns the socket path.
func (a *Agent) Sock() string {
	a.once.Do(func() {
		go func() {
			for {
				c, err := a.ln.Accept()
				if err != nil {
					return
				}
				a.conns.Add(1)
				a.serve(c) // one client at a time, as QEMU's chardev
			}
		}()
	})
	return a.Path
}

// Requests counts request lines read (syncs included).
func (a *Agent) Requests() int32 { return a.requests.Load() }

// Conns counts connections accepted.
func (a *Agent) Conns() int32 { return a.conns.Load() }

// Bytes counts the bytes clients sent (a spy's measure: 0 means nothing
// reached the socket). Raw dialogues are not counted.
func (a *Agent) Bytes() int64 { return a.bytes.Load() }

// countingConn counts what is read from the connection into Agent.bytes.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	c.n.Add(int64(k))
	return k, err
}

func (a *Agent) serve(conn net.Conn) {
	defer conn.Close()
	var c net.Conn = countingConn{conn, &a.bytes}
	if a.Raw != nil {
		a.Raw(conn)
		return
	}
	if a.OnAccept != nil {
		a.OnAccept(c)
	}
	rd := bufio.NewReader(c)
	for {
		line, err := rd.ReadBytes('\n')
		if err != nil {
			return
		}
		a.requests.Add(1)
		if a.Silent {
			continue
		}
		req := gjson.ParseBytes(bytes.TrimLeft(line, "\xff"))
		cmd := req.Get("execute").String()
		if cmd == "guest-sync-delimited" {
			if n := int(a.syncs.Add(1)); a.SyncSilent != nil && a.SyncSilent(n) {
				continue
			}
			fmt.Fprintf(c, "\xff{\"return\": %d}\n", req.Get("arguments.id").Int())
			continue
		}
		if a.Handle != nil {
			a.Handle(c, cmd, req)
		}
	}
}

// AgentReplies answers each command with {"return": replies[cmd]}; a command
// without a reply gets no answer at all (as an agent that hangs).
func AgentReplies(replies map[string]string) func(w net.Conn, cmd string, req gjson.Result) {
	return func(w net.Conn, cmd string, _ gjson.Result) {
		if r, ok := replies[cmd]; ok {
			fmt.Fprintf(w, "{\"return\": %s}\n", r)
		}
	}
}

// socketPath is a short path (unix socket paths are limited to 108 bytes,
// and t.TempDir can be longer).
func socketPath(t testing.TB, name string) string {
	dir, err := os.MkdirTemp("", "qmptest")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, name)
}
