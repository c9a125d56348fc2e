package qmp

// The QEMU guest agent (qemu-ga) client. Proxmox VE puts the agent's
// virtio-serial channel on /var/run/qemu-server/<vmid>.qga (`agent: 1`), and
// its own daemons (pvestatd, the API) use that socket too. QEMU's chardev
// serves one client at a time: a second connect() succeeds but hears nothing
// until the first client leaves. So every call here is one short exchange:
// dial, resynchronise with guest-sync-delimited, one command, close.
//
// The agent has no greeting and no capabilities handshake. What it sends
// before our sync reply may be anything a previous client left behind (a
// reply nobody read, the answer to a half-written request), so the stream is
// untrusted until the reply carrying our random id arrives after the 0xFF
// sentinel (qemu-ga's qapi-schema.json, guest-sync-delimited).

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tidwall/gjson"
)

// DefaultAgentTimeout bounds an exchange when Agent.Timeout is zero.
const DefaultAgentTimeout = 10 * time.Second

// Agent is a guest agent client on a unix socket.
//
// Timeout bounds connecting and the guest-sync-delimited handshake, whatever
// the context says: a guest without a running qemu-ga fails within Timeout.
// The command itself may then run until the context's deadline (guest-fstrim
// can take minutes: pass a context with a long deadline), or within Timeout
// when the context has none.
type Agent struct {
	Path    string        // e.g. /var/run/qemu-server/100.qga
	Timeout time.Duration // 0 means DefaultAgentTimeout
}

// AgentError is an error reply from the guest agent. Class is QMP's error
// class (GenericError, CommandNotFound, ...); Desc is the agent's message.
type AgentError struct {
	Command string
	Class   string
	Desc    string
}

func (e *AgentError) Error() string {
	return fmt.Sprintf("guest agent: %s: %s (%s)", e.Command, e.Desc, e.Class)
}

// AgentTimeoutError means the agent did not answer in time. Command is
// "guest-sync-delimited" when it never answered at all (no qemu-ga running in
// the guest, a guest still booting, or another client holding the socket).
// It matches errors.Is(err, os.ErrDeadlineExceeded).
type AgentTimeoutError struct {
	Path    string
	Command string
	After   time.Duration
}

func (e *AgentTimeoutError) Error() string {
	if e.Command == qgaSyncCommand {
		return fmt.Sprintf("guest agent at %s did not answer within %s (is qemu-guest-agent running in the guest?)",
			e.Path, qgaRound(e.After))
	}
	return fmt.Sprintf("guest agent at %s did not finish %s within %s", e.Path, e.Command, qgaRound(e.After))
}

func (e *AgentTimeoutError) Unwrap() error { return os.ErrDeadlineExceeded }

// Unsent reports a timeout on the sync that precedes every command: the
// command itself was never sent, so it had no effect and asking again is
// safe.
func (e *AgentTimeoutError) Unsent() bool { return e.Command == qgaSyncCommand }

// Timeout reports true, as net.Error timeouts do.
func (e *AgentTimeoutError) Timeout() bool { return true }

const qgaSyncCommand = "guest-sync-delimited"

func qgaRound(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

// qgaLocks serialises exchanges on one socket within this process: the agent
// answers one client at a time, and a second caller would otherwise spend its
// sync timeout waiting behind the first one's command.
var qgaLocks sync.Map // path -> chan struct{} (capacity 1)

func qgaLock(ctx context.Context, path string) (unlock func(), err error) {
	v, _ := qgaLocks.LoadOrStore(path, make(chan struct{}, 1))
	ch := v.(chan struct{})
	select {
	case ch <- struct{}{}:
		return func() { <-ch }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("guest agent at %s: waiting for another exchange on the socket: %w", path, ctx.Err())
	}
}

// Call runs one command and returns its "return" value. args may be nil.
func (a Agent) Call(ctx context.Context, command string, args any) (gjson.Result, error) {
	var ret gjson.Result
	err := a.Session(ctx, command, func(s *AgentSession) error {
		var err error
		ret, err = s.Call(command, args)
		return err
	})
	return ret, err
}

// AgentCommand is one command of AgentSession.Pipeline.
type AgentCommand struct {
	Execute string
	// Arguments are marshalled to JSON, or sent as they are when they are
	// a json.RawMessage (of the caller's making: one object); nil: none.
	Arguments any
}

// AgentSession is the commands of one exchange (Agent.Session).
type AgentSession struct {
	send func(cmds []AgentCommand) ([]gjson.Result, error)
}

// Call runs one command and returns its "return" value.
func (s *AgentSession) Call(command string, args any) (gjson.Result, error) {
	r, err := s.send([]AgentCommand{{command, args}})
	if err != nil {
		return gjson.Result{}, err
	}
	return r[0], nil
}

// Pipeline sends the commands in one write and reads their replies in
// order (qemu-ga answers in order): one round trip for commands that do
// not depend on each other's answers (guest-file-read and guest-file-close
// of one handle). The first error ends it.
func (s *AgentSession) Pipeline(cmds ...AgentCommand) ([]gjson.Result, error) {
	return s.send(cmds)
}

// Session is one exchange with the agent that runs several commands: one
// connection, one guest-sync-delimited, then the commands fn sends in turn
// (guest-file-open, -read, -close of one file: one exchange, as Call is for
// one command). first names fn's first command for the errors of a
// context that ended before it was sent. An error fn returns ends the
// session with that error.
func (a Agent) Session(ctx context.Context, first string, fn func(*AgentSession) error) error {
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return fmt.Errorf("guest agent at %s: %s not sent: %w", a.Path, first, context.DeadlineExceeded)
	}
	unlock, err := qgaLock(ctx, a.Path)
	if err != nil {
		return err
	}
	defer unlock()

	timeout := a.Timeout
	if timeout <= 0 {
		timeout = DefaultAgentTimeout
	}
	start := time.Now()
	syncDeadline := start.Add(timeout)
	cmdDeadline := syncDeadline
	if d, ok := ctx.Deadline(); ok {
		cmdDeadline = d
		if d.Before(syncDeadline) {
			syncDeadline = d
		}
	}

	dctx, cancel := context.WithDeadline(ctx, syncDeadline)
	defer cancel()
	var dialer net.Dialer
	conn, err := dialer.DialContext(dctx, "unix", a.Path)
	if err != nil {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("guest agent at %s: connect interrupted: %w", a.Path, ctx.Err())
		}
		if dctx.Err() != nil {
			return &AgentTimeoutError{Path: a.Path, Command: qgaSyncCommand, After: syncDeadline.Sub(start)}
		}
		return fmt.Errorf("guest agent at %s: %w", a.Path, err)
	}
	defer conn.Close()
	// Cancelling the context unblocks a read or write at once.
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	fail := func(phase string, deadline time.Time, err error) error {
		if ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return fmt.Errorf("guest agent at %s: %s interrupted: %w", a.Path, phase, ctx.Err())
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() || ctx.Err() != nil {
			return &AgentTimeoutError{Path: a.Path, Command: phase, After: deadline.Sub(start)}
		}
		var ae *AgentError
		if errors.As(err, &ae) {
			return err
		}
		return fmt.Errorf("guest agent at %s: %s: %w", a.Path, phase, err)
	}

	// 0xFF first: qemu-ga then drops whatever half a request an earlier
	// client left in its parser.
	id := rand.Int64N(1<<53) + 1
	_ = conn.SetDeadline(syncDeadline)
	if _, err := fmt.Fprintf(conn, "\xff{\"execute\":%q,\"arguments\":{\"id\":%d}}\n", qgaSyncCommand, id); err != nil {
		return fail(qgaSyncCommand, syncDeadline, err)
	}
	rd := bufio.NewReader(conn)
	if err := qgaReadSync(rd, id); err != nil {
		return fail(qgaSyncCommand, syncDeadline, err)
	}

	_ = conn.SetDeadline(cmdDeadline)
	return fn(&AgentSession{send: func(cmds []AgentCommand) ([]gjson.Result, error) {
		var lines []byte
		for _, c := range cmds {
			name, err := json.Marshal(c.Execute)
			if err != nil {
				return nil, fmt.Errorf("guest agent: %s: %w", c.Execute, err)
			}
			lines = append(append(append(lines, `{"execute":`...), name...), ',')
			if c.Arguments != nil {
				args, ok := c.Arguments.(json.RawMessage)
				if !ok {
					if args, err = json.Marshal(c.Arguments); err != nil {
						return nil, fmt.Errorf("guest agent: %s: %w", c.Execute, err)
					}
				}
				lines = append(append(append(lines, `"arguments":`...), args...), ',')
			}
			lines = append(lines[:len(lines)-1], "}\n"...)
		}
		if _, err := conn.Write(lines); err != nil {
			return nil, fail(cmds[0].Execute, cmdDeadline, err)
		}
		out := make([]gjson.Result, 0, len(cmds))
		for _, c := range cmds {
			ret, err := qgaReadReply(rd, c.Execute)
			if err != nil {
				return nil, fail(c.Execute, cmdDeadline, err)
			}
			out = append(out, ret)
		}
		return out, nil
	}})
}

// qgaReadSync reads until the reply {"return": id} that follows a 0xFF
// sentinel, discarding everything before it. Replies are newline-terminated
// and bounded by MaxAgentReplyBytes; each is read in one scan (scanReply),
// and one past the nesting or member bounds ends the exchange.
func qgaReadSync(rd *bufio.Reader, id int64) error {
	for {
		line, err := readLine(rd, MaxAgentReplyBytes)
		if err != nil {
			return err
		}
		i := bytes.LastIndexByte(line, 0xff)
		r, err := scanReply(line[i+1:], "")
		if errors.Is(err, ErrHostileReply) {
			return err
		}
		if err != nil {
			continue // what an earlier client left behind
		}
		if i >= 0 {
			if v := r.value(r.ret); v.Type == gjson.Number && v.Int() == id {
				return nil
			}
			continue
		}
		// An agent that refuses the sync itself answers without a sentinel.
		if e := r.value(r.err); e.Exists() && strings.Contains(e.Get("desc").String(), qgaSyncCommand) {
			return &AgentError{Command: qgaSyncCommand, Class: e.Get("class").String(), Desc: e.Get("desc").String()}
		}
	}
}

// qgaReadReply reads the command's reply line in one scan (scanReply).
func qgaReadReply(rd *bufio.Reader, command string) (gjson.Result, error) {
	for {
		line, err := readLine(rd, MaxAgentReplyBytes)
		if err != nil {
			return gjson.Result{}, err
		}
		line = bytes.TrimSpace(bytes.Trim(line, "\xff"))
		if len(line) == 0 {
			continue
		}
		r, err := scanReply(line, "")
		if errors.Is(err, ErrHostileReply) {
			return gjson.Result{}, err
		}
		if err != nil {
			return gjson.Result{}, fmt.Errorf("malformed reply %q", qgaClip(line))
		}
		if r.err.ok() {
			e := r.value(r.err)
			return gjson.Result{}, &AgentError{Command: command, Class: e.Get("class").String(), Desc: e.Get("desc").String()}
		}
		if !r.ret.ok() {
			return gjson.Result{}, fmt.Errorf("reply without return: %q", qgaClip(line))
		}
		return r.value(r.ret), nil
	}
}

func qgaClip(b []byte) string {
	if len(b) > 200 {
		return string(b[:200]) + "..."
	}
	return string(b)
}

// Ping checks that the agent answers (guest-ping).
func (a Agent) Ping(ctx context.Context) error {
	_, err := a.Call(ctx, "guest-ping", nil)
	return err
}

// Exec starts a program in the guest (guest-exec) with its output captured
// and returns the guest's pid. path is looked up on the agent's PATH. stdin,
// when not nil, is the program's whole standard input.
func (a Agent) Exec(ctx context.Context, path string, args []string, stdin []byte) (int, error) {
	req := map[string]any{"path": path, "capture-output": true}
	if args != nil {
		req["arg"] = args
	}
	if stdin != nil {
		req["input-data"] = base64.StdEncoding.EncodeToString(stdin)
	}
	ret, err := a.Call(ctx, "guest-exec", req)
	if err != nil {
		return 0, err
	}
	pid := ret.Get("pid")
	if pid.Type != gjson.Number {
		return 0, fmt.Errorf("guest agent at %s: guest-exec returned no pid: %s", a.Path, ret.Raw)
	}
	return int(pid.Int()), nil
}

// ExecStatus is guest-exec-status's answer. Until Exited, the other fields
// are empty. qemu-ga keeps at most 16 MiB of each stream (then *Truncated).
type ExecStatus struct {
	Exited          bool
	ExitCode        int // meaningful when Signal == 0
	Signal          int // the signal that ended the program, 0 if none
	Stdout, Stderr  []byte
	StdoutTruncated bool
	StderrTruncated bool
}

// OK reports a program that exited with status 0.
func (s ExecStatus) OK() bool { return s.Exited && s.Signal == 0 && s.ExitCode == 0 }

// ExecStatus asks whether the guest program pid has exited. Once it has, the
// agent forgets the pid: the answer with Exited comes only once.
func (a Agent) ExecStatus(ctx context.Context, pid int) (ExecStatus, error) {
	ret, err := a.Call(ctx, "guest-exec-status", map[string]any{"pid": pid})
	if err != nil {
		return ExecStatus{}, err
	}
	return parseExecStatus(ret)
}

func parseExecStatus(ret gjson.Result) (ExecStatus, error) {
	s := ExecStatus{
		Exited:          ret.Get("exited").Bool(),
		ExitCode:        int(ret.Get("exitcode").Int()),
		Signal:          int(ret.Get("signal").Int()),
		StdoutTruncated: ret.Get("out-truncated").Bool(),
		StderrTruncated: ret.Get("err-truncated").Bool(),
	}
	var err error
	if s.Stdout, err = qgaBase64(ret, "out-data"); err != nil {
		return s, err
	}
	s.Stderr, err = qgaBase64(ret, "err-data")
	return s, err
}

func qgaBase64(ret gjson.Result, key string) ([]byte, error) {
	v := ret.Get(key)
	if !v.Exists() {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(v.String())
	if err != nil {
		return nil, fmt.Errorf("guest agent: %s is not base64: %w", key, err)
	}
	return b, nil
}

// MissedSyncTries is how many exchanges in a row a guest agent may leave
// unanswered at the sync (each for the Agent's Timeout) while a program it
// started runs, before the caller gives up on it. A busy guest's agent can
// miss one: a TCG guest running fio at queue depth 16 left a 10 s sync
// unanswered (CI, 2026-12-01). Only an unanswered sync is asked again: its
// command was never sent.
const MissedSyncTries = 6

// Run runs a program in the guest and polls every pollEvery (0 means 100 ms)
// until it exits or ctx ends; a poll whose sync the agent left unanswered
// is asked again, up to MissedSyncTries in a row (the program's start is
// not: an agent that does not answer it fails Run). A program that exits
// with a non-zero status is not an error: check ExecStatus.OK.
func (a Agent) Run(ctx context.Context, path string, args []string, stdin []byte, pollEvery time.Duration) (ExecStatus, error) {
	if pollEvery <= 0 {
		pollEvery = 100 * time.Millisecond
	}
	pid, err := a.Exec(ctx, path, args, stdin)
	if err != nil {
		return ExecStatus{}, err
	}
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for missed := 0; ; {
		st, err := a.ExecStatus(ctx, pid)
		var te *AgentTimeoutError
		if errors.As(err, &te) && te.Unsent() {
			missed++
		} else {
			missed = 0
		}
		switch {
		case missed > 0 && missed < MissedSyncTries && ctx.Err() == nil:
			// A busy guest's agent missed the sync: the poll was never
			// sent and the program runs on; ask again at the next tick.
		case err != nil:
			if d, ok := ctx.Deadline(); ctx.Err() == nil && (!ok || time.Now().Before(d)) {
				return st, fmt.Errorf("%s (guest pid %d): %w", path, pid, err)
			}
			// The deadline cut the poll short: report the program, not the poll.
			<-ctx.Done()
		case st.Exited:
			return st, nil
		}
		select {
		case <-ctx.Done():
			return st, fmt.Errorf("guest agent at %s: %s (guest pid %d) still running: %w", a.Path, path, pid, ctx.Err())
		case <-t.C:
		}
	}
}

// FstrimResult is guest-fstrim's answer for one mounted filesystem.
type FstrimResult struct {
	Path    string
	Trimmed int64  // bytes the guest filesystem reports trimmed
	Minimum int64  // the minimum extent size used, bytes
	Error   string // set when trimming this filesystem failed
}

// Fstrim trims every mounted filesystem in the guest (guest-fstrim).
// minimum is the smallest free extent to discard, in bytes (0: all).
// It can take minutes on big filesystems: give ctx a deadline that allows it.
// Trimmed is the guest filesystem's own figure; it does not prove that
// anything reached the storage.
func (a Agent) Fstrim(ctx context.Context, minimum int64) ([]FstrimResult, error) {
	var args any
	if minimum > 0 {
		args = map[string]any{"minimum": minimum}
	}
	ret, err := a.Call(ctx, "guest-fstrim", args)
	if err != nil {
		return nil, err
	}
	return parseFstrim(ret), nil
}

func parseFstrim(ret gjson.Result) []FstrimResult {
	var out []FstrimResult
	for _, p := range ret.Get("paths").Array() {
		out = append(out, FstrimResult{
			Path:    p.Get("path").String(),
			Trimmed: p.Get("trimmed").Int(),
			Minimum: p.Get("minimum").Int(),
			Error:   p.Get("error").String(),
		})
	}
	return out
}

// GuestFilesystem is one mounted filesystem from guest-get-fsinfo.
type GuestFilesystem struct {
	Name       string // kernel name of the device, e.g. "sda"
	Mountpoint string
	Type       string // e.g. "ext4"
	UsedBytes  int64  // -1 when the agent did not say (before QEMU 3.0)
	TotalBytes int64  // -1 when the agent did not say
	Disks      []GuestDisk
}

// GuestDisk is one disk below a guest filesystem.
type GuestDisk struct {
	BusType string // "scsi", "virtio", "sata", ...
	Bus     int
	Target  int
	Unit    int
	Serial  string // the disk's serial as the guest sees it, if any
	Dev     string // e.g. /dev/sda
	PCI     string // controller address, domain:bus:slot.function
}

// FsInfo lists the guest's mounted filesystems (guest-get-fsinfo).
func (a Agent) FsInfo(ctx context.Context) ([]GuestFilesystem, error) {
	ret, err := a.Call(ctx, "guest-get-fsinfo", nil)
	if err != nil {
		return nil, err
	}
	return parseFsInfo(ret), nil
}

func parseFsInfo(ret gjson.Result) []GuestFilesystem {
	var out []GuestFilesystem
	for _, f := range ret.Array() {
		fs := GuestFilesystem{
			Name:       f.Get("name").String(),
			Mountpoint: f.Get("mountpoint").String(),
			Type:       f.Get("type").String(),
			UsedBytes:  -1,
			TotalBytes: -1,
		}
		if v := f.Get("used-bytes"); v.Exists() {
			fs.UsedBytes = v.Int()
		}
		if v := f.Get("total-bytes"); v.Exists() {
			fs.TotalBytes = v.Int()
		}
		for _, d := range f.Get("disk").Array() {
			fs.Disks = append(fs.Disks, parseGuestDiskAddress(d))
		}
		out = append(out, fs)
	}
	return out
}

// parseGuestDiskAddress reads a GuestDiskAddress (guest-get-fsinfo's disk
// entries, guest-get-disks' address).
func parseGuestDiskAddress(d gjson.Result) GuestDisk {
	pci := d.Get("pci-controller")
	gd := GuestDisk{
		BusType: d.Get("bus-type").String(),
		Bus:     int(d.Get("bus").Int()),
		Target:  int(d.Get("target").Int()),
		Unit:    int(d.Get("unit").Int()),
		Serial:  d.Get("serial").String(),
		Dev:     d.Get("dev").String(),
	}
	if pci.Exists() {
		gd.PCI = fmt.Sprintf("%04x:%02x:%02x.%x", pci.Get("domain").Int(), pci.Get("bus").Int(),
			pci.Get("slot").Int(), pci.Get("function").Int())
	}
	return gd
}

// GuestBlockDevice is one entry of guest-get-disks (qemu-ga 5.2 and later):
// a disk, a partition or a virtual device (dm, md) of the guest.
type GuestBlockDevice struct {
	Name         string   // e.g. /dev/sda, /dev/sda1, /dev/dm-0
	Partition    bool     // a partition of one of the disks
	Dependencies []string // the devices it sits on (a partition's disk, a dm device's parts)
	// Address is where the device sits on the VM's controllers; nil when
	// the agent could not tell (a virtual device).
	Address *GuestDisk
}

// Disks lists the guest's block devices (guest-get-disks).
func (a Agent) Disks(ctx context.Context) ([]GuestBlockDevice, error) {
	ret, err := a.Call(ctx, "guest-get-disks", nil)
	if err != nil {
		return nil, err
	}
	return parseDisks(ret), nil
}

func parseDisks(ret gjson.Result) []GuestBlockDevice {
	var out []GuestBlockDevice
	for _, d := range ret.Array() {
		bd := GuestBlockDevice{Name: d.Get("name").String(), Partition: d.Get("partition").Bool()}
		for _, dep := range d.Get("dependencies").Array() {
			bd.Dependencies = append(bd.Dependencies, dep.String())
		}
		if a := d.Get("address"); a.Exists() {
			gd := parseGuestDiskAddress(a)
			bd.Address = &gd
		}
		out = append(out, bd)
	}
	return out
}
