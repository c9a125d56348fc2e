// Package qmp talks to a running QEMU through its QMP socket and to the guest
// through the guest agent socket. Both sockets are shared with Proxmox's own
// daemons and serve one client at a time, so every use here is one short
// exchange: connect, ask, close.
package qmp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"

	goqmp "github.com/digitalocean/go-qemu/qmp"
	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// Monitor is go-qemu's four-method seam; SocketMonitor implements it.
type Monitor = goqmp.Monitor

// ErrBusy means another client holds the QMP socket: QEMU accepted the
// connection but sent no greeting before the deadline.
var ErrBusy = exitcode.New(exitcode.Unreachable, "QMP socket busy (another client, e.g. pvestatd, holds it)")

// ErrNoSocket means the socket does not exist or nobody listens on it.
var ErrNoSocket = exitcode.New(exitcode.Unreachable, "no QMP socket")

// Error is an error reply from QEMU; Class is QMP's error class
// (GenericError, DeviceNotFound, CommandNotFound, ...).
type Error struct {
	Class string
	Desc  string
}

func (e *Error) Error() string { return e.Desc + " (" + e.Class + ")" }

// SocketMonitor is a QMP client on a unix socket. Unlike go-qemu's, it reads
// replies of any size (no 64 KiB line limit) and skips events that arrive
// between the handshake and a reply.
type SocketMonitor struct {
	Path string
	// Timeout bounds the whole exchange: dial, greeting, capabilities and
	// every command until Disconnect.
	Timeout time.Duration

	mu   sync.Mutex
	conn net.Conn
	rd   *bufio.Reader
	end  time.Time       // Timeout after Connect began
	ctx  context.Context // cancelling it unblocks a read at once (Do)
	stop func() bool
	// Greeting is QEMU's banner ({"QMP": {"version": ...}}).
	Greeting []byte
}

var _ Monitor = (*SocketMonitor)(nil)

// NewSocketMonitor returns an unconnected monitor.
func NewSocketMonitor(path string, timeout time.Duration) *SocketMonitor {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	return &SocketMonitor{Path: path, Timeout: timeout}
}

// Connect dials, reads the greeting and negotiates capabilities.
func (m *SocketMonitor) Connect() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.end = time.Now().Add(m.Timeout)
	d := net.Dialer{Deadline: m.end}
	c, err := d.Dial("unix", m.Path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("%w at %s: %v", ErrNoSocket, m.Path, err)
		}
		if errors.Is(err, syscall.EAGAIN) {
			// QEMU listens with a backlog of 1: one client connected and
			// one waiting for its greeting fill it, and a third connect()
			// fails at once. That is a busy socket, not a missing one.
			return fmt.Errorf("%w: %s: %v", ErrBusy, m.Path, err)
		}
		return fmt.Errorf("QMP %s: %w", m.Path, err)
	}
	m.conn = c
	m.rd = readers.Get().(*bufio.Reader)
	m.rd.Reset(c)
	_ = c.SetDeadline(m.end)
	if m.ctx != nil {
		m.stop = context.AfterFunc(m.ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	}
	line, err := readLine(m.rd, MaxGreetingBytes)
	if err != nil {
		c.Close()
		m.conn = nil
		m.release()
		if errors.Is(err, ErrTooLarge) {
			return fmt.Errorf("QMP %s: not a QMP greeting: %w", m.Path, err)
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Errorf("%w: %s sent no greeting within %s", ErrBusy, m.Path, units.Duration(m.Timeout))
		}
		return fmt.Errorf("QMP %s: reading greeting: %w", m.Path, err)
	}
	if !gjson.GetBytes(line, "QMP").Exists() {
		c.Close()
		m.conn = nil
		m.release()
		return fmt.Errorf("QMP %s: unexpected greeting %.80q", m.Path, line)
	}
	m.Greeting = bytes.Clone(line)
	if _, err := m.runLocked([]byte(`{"execute":"qmp_capabilities"}`), "qmp_capabilities"); err != nil {
		c.Close()
		m.conn = nil
		m.release()
		return err
	}
	return nil
}

// Disconnect closes the connection (idempotent).
func (m *SocketMonitor) Disconnect() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.conn == nil {
		return nil
	}
	if m.stop != nil {
		m.stop()
	}
	err := m.conn.Close()
	m.conn = nil
	m.release()
	return err
}

// readers are the connections' read buffers, used again by the next
// connection: 64 KiB a connection, top makes 50 a second on 50 VMs, and
// that was most of what its collector had to free. No reply lives in one
// past its exchange (readLine's lines are copied out: reply.value, Run).
var readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 64*1024) }}

// release hands the read buffer back once the connection is closed.
func (m *SocketMonitor) release() {
	if m.rd != nil {
		m.rd.Reset(nil)
		readers.Put(m.rd)
		m.rd = nil
	}
}

// Run sends one command and returns its whole reply object. An error reply
// becomes *Error.
func (m *SocketMonitor) Run(cmd []byte) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := m.runLocked(cmd, "")
	return bytes.Clone(r.line), err
}

// exec is Run for Session.Exec: the reply as its one scan indexed it, with
// the shape of name's return value checked on the way.
func (m *SocketMonitor) exec(cmd []byte, name string) (reply, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.runLocked(cmd, name)
}

func (m *SocketMonitor) runLocked(cmd []byte, name string) (reply, error) {
	if m.conn == nil {
		return reply{}, fmt.Errorf("QMP %s: not connected", m.Path)
	}
	command := func() string {
		if name != "" {
			return name
		}
		return gjson.GetBytes(cmd, "execute").String()
	}
	_ = m.conn.SetDeadline(m.end)
	if _, err := m.conn.Write(append(cmd, '\n')); err != nil {
		return reply{}, fmt.Errorf("QMP %s: %w", m.Path, err)
	}
	for {
		line, err := readLine(m.rd, MaxReplyBytes)
		if err != nil {
			if m.ctx != nil && m.ctx.Err() != nil {
				return reply{}, fmt.Errorf("QMP %s: %s interrupted: %w", m.Path, command(), m.ctx.Err())
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return reply{}, fmt.Errorf("QMP %s: no reply to %s within %s", m.Path, command(), units.Duration(m.Timeout))
			}
			return reply{}, fmt.Errorf("QMP %s: %w", m.Path, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue // a blank line is no reply
		}
		// One pass: validity, the bounds, the top-level keys (a reply can
		// be tens of KiB) and the return value's shape.
		r, err := scanReply(line, name)
		if errors.Is(err, ErrHostileReply) {
			return reply{}, fmt.Errorf("QMP %s: %s: %w", m.Path, command(), err)
		}
		if err != nil {
			return reply{}, fmt.Errorf("QMP %s: malformed reply to %s: %s", m.Path, command(), units.Clip(string(line), 80))
		}
		switch r.first {
		case 'v':
			continue // asynchronous event, not our reply
		case 'e':
			qerr := r.value(r.err)
			return reply{}, &Error{Class: qerr.Get("class").String(), Desc: qerr.Get("desc").String()}
		case 'r':
			return r, nil
		}
	}
}

// Events is not supported: pvediskcheck never holds the socket long enough.
func (m *SocketMonitor) Events(context.Context) (<-chan goqmp.Event, error) {
	return nil, goqmp.ErrEventsNotSupported
}

// Session is one connected exchange with typed helpers.
type Session struct{ M Monitor }

// Exec runs a command with arguments and returns the "return" value.
func (s Session) Exec(name string, args any) (gjson.Result, error) {
	b, err := command(name, args)
	if err != nil {
		return gjson.Result{}, err
	}
	var r reply
	if m, ok := s.M.(*SocketMonitor); ok {
		r, err = m.exec(b, name)
	} else {
		var out []byte
		if out, err = s.M.Run(b); err == nil {
			if r, err = scanReply(out, name); err != nil {
				err = fmt.Errorf("QMP %s: %w", name, err)
			}
		}
	}
	if err != nil {
		return gjson.Result{}, err
	}
	if r.shape != nil {
		return gjson.Result{}, r.shape
	}
	return r.value(r.ret), nil
}

// command is the line of a command, byte for byte what json.Marshal makes
// of {"execute": name, "arguments": args} (keys in order, arguments left
// out when nil) without marshalling a map for it: top sends three commands
// per VM and second, most without arguments.
func command(name string, args any) ([]byte, error) {
	var q []byte
	if plainName(name) {
		q = append(append([]byte{'"'}, name...), '"')
	} else {
		var err error
		if q, err = json.Marshal(name); err != nil {
			return nil, err
		}
	}
	if args == nil {
		return append(append([]byte(`{"execute":`), q...), '}'), nil
	}
	a, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(a)+len(q)+27)
	b = append(append(append(b, `{"arguments":`...), a...), `,"execute":`...)
	return append(append(b, q...), '}'), nil
}

// plainName: a command name JSON writes as it is between quotes (QAPI's
// names are letters, digits, '-' and '_').
func plainName(name string) bool {
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// Do connects to the socket, runs fn and disconnects: one exchange, so the
// socket is free again for Proxmox's daemons as soon as fn returns.
func Do(ctx context.Context, path string, timeout time.Duration, fn func(Session) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m := NewSocketMonitor(path, timeout)
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < m.Timeout {
		m.Timeout = time.Until(dl)
	}
	m.ctx = ctx
	if err := m.Connect(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("QMP %s: %w", path, ctx.Err())
		}
		return err
	}
	defer m.Disconnect()
	return fn(Session{M: m})
}

// DoRetry is Do for samplers: a briefly busy socket (another client's short
// exchange) is retried until patience runs out; only then is ErrBusy returned.
func DoRetry(ctx context.Context, path string, timeout, patience time.Duration, fn func(Session) error) error {
	deadline := time.Now().Add(patience)
	backoff := 50 * time.Millisecond
	for {
		attempt := timeout
		if left := time.Until(deadline); left < attempt && left > 100*time.Millisecond {
			attempt = left
		}
		err := Do(ctx, path, attempt, fn)
		if err == nil || !errors.Is(err, ErrBusy) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		if backoff < 400*time.Millisecond {
			backoff *= 2
		}
	}
}
