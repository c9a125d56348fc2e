package qmp

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

// fakeQEMU serves one QMP client on a unix socket: it sends the greeting,
// expects qmp_capabilities, then answers each command with reply(cmd).
// Before greeting it waits greetDelay (a busy socket sends nothing).
type fakeQEMU struct {
	path       string
	greetDelay time.Duration
	// beforeCaps is sent between the greeting and the capabilities reply
	// (go-qemu PR 210: an event there was taken for the reply).
	beforeCaps string
	reply      func(cmd string) string
}

func (f *fakeQEMU) serve(t *testing.T) {
	t.Helper()
	dir, err := os.MkdirTemp("", "qmp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	f.path = filepath.Join(dir, "100.qmp")
	l, err := net.Listen("unix", f.path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go f.handle(c)
		}
	}()
}

func (f *fakeQEMU) handle(c net.Conn) {
	defer c.Close()
	time.Sleep(f.greetDelay)
	c.Write([]byte(`{"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}}, "capabilities": ["oob"]}}` + "\r\n"))
	rd := bufio.NewReader(c)
	line, err := rd.ReadString('\n')
	if err != nil || gjson.Get(line, "execute").String() != "qmp_capabilities" {
		return
	}
	if f.beforeCaps != "" {
		c.Write([]byte(f.beforeCaps + "\r\n"))
	}
	c.Write([]byte(`{"return": {}}` + "\r\n"))
	for {
		line, err := rd.ReadString('\n')
		if err != nil {
			return
		}
		c.Write([]byte(f.reply(gjson.Get(line, "execute").String()) + "\r\n"))
	}
}

const event = `{"timestamp": {"seconds": 1764449000, "microseconds": 1}, "event": "RESUME"}`

func TestMonitorEventDuringHandshakeAndBigReply(t *testing.T) {
	// A query-block reply well over 64 KiB on one line (15 disks give ~17 KB
	// on QEMU 7.2; a VM with many disks and long paths passes 64 KiB).
	big := `{"return": [` + strings.Repeat(`{"device": "", "qdev": "/machine/peripheral/scsi1", "inserted": {"file": "`+strings.Repeat("x", 1000)+`"}},`, 100) + `{}]}`
	if len(big) < 100_000 {
		t.Fatal("reply not big enough")
	}
	f := &fakeQEMU{beforeCaps: event, reply: func(cmd string) string {
		if cmd == "query-block" {
			return event + "\r\n" + big // an event right before the reply, too
		}
		return `{"error": {"class": "CommandNotFound", "desc": "The command nope has not been found"}}`
	}}
	f.serve(t)
	err := Do(context.Background(), f.path, 2*time.Second, func(s Session) error {
		r, err := s.Exec("query-block", nil)
		if err != nil {
			return err
		}
		if n := len(r.Array()); n != 101 {
			t.Errorf("%d entries, want 101", n)
		}
		_, err = s.Exec("nope", nil)
		var qe *Error
		if !errors.As(err, &qe) || qe.Class != "CommandNotFound" {
			t.Errorf("error class lost: %#v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestMonitorBusySocket(t *testing.T) {
	f := &fakeQEMU{greetDelay: time.Hour, reply: func(string) string { return `{"return": {}}` }}
	f.serve(t)
	start := time.Now()
	err := Do(context.Background(), f.path, 300*time.Millisecond, func(Session) error { return nil })
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("got %v, want ErrBusy", err)
	}
	if el := time.Since(start); el > 5*time.Second { // bounded by the deadline, not hanging
		t.Fatalf("busy detection took %s", el)
	}
	// DoRetry gives up after its patience, still with ErrBusy.
	err = DoRetry(context.Background(), f.path, 200*time.Millisecond, 700*time.Millisecond, func(Session) error { return nil })
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("DoRetry: %v", err)
	}
}

func TestMonitorNoSocket(t *testing.T) {
	err := Do(context.Background(), filepath.Join(t.TempDir(), "none.qmp"), time.Second, func(Session) error { return nil })
	if !errors.Is(err, ErrNoSocket) {
		t.Fatalf("got %v, want ErrNoSocket", err)
	}
}

// A reply that never comes is a timeout naming the command, not a hang.
func TestMonitorSilentReply(t *testing.T) {
	f := &fakeQEMU{}
	f.reply = func(string) string { time.Sleep(time.Hour); return "" }
	f.serve(t)
	err := Do(context.Background(), f.path, 300*time.Millisecond, func(s Session) error {
		_, err := s.Exec("query-blockstats", nil)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "no reply to query-blockstats") {
		t.Fatalf("got %v", err)
	}
}
