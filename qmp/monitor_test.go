package qmp

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/units"
)

const event = qmptest.Event

func TestMonitorEventDuringHandshakeAndBigReply(t *testing.T) {
	// A query-block reply well over 64 KiB on one line (15 disks give ~17 KB
	// on QEMU 7.2; a VM with many disks and long paths passes 64 KiB).
	big := `{"return": [` + strings.Repeat(`{"device": "", "qdev": "/machine/peripheral/scsi1", "inserted": {"file": "`+strings.Repeat("x", 1000)+`"}},`, 100) + `{}]}`
	if len(big) < 100_000 {
		t.Fatal("reply not big enough")
	}
	f := qmptest.NewQEMU(t, func(cmd string, _ gjson.Result) string {
		if cmd == "query-block" {
			return event + "\r\n" + big // an event right before the reply, too
		}
		return qmptest.NotFound(cmd)
	})
	f.BeforeCaps = event
	err := Do(context.Background(), f.Sock(), 2*time.Second, func(s Session) error {
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
	f := qmptest.NewQEMU(t, qmptest.Replies(nil))
	f.GreetDelay = time.Hour
	start := time.Now()
	err := Do(context.Background(), f.Sock(), 300*time.Millisecond, func(Session) error { return nil })
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("got %v, want ErrBusy", err)
	}
	if el := time.Since(start); el > 5*time.Second { // bounded by the deadline, not hanging
		t.Fatalf("busy detection took %s", el)
	}
	// DoRetry gives up after its patience, still with ErrBusy.
	err = DoRetry(context.Background(), f.Sock(), 200*time.Millisecond, 700*time.Millisecond, func(Session) error { return nil })
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("DoRetry: %v", err)
	}
	// The last attempt gets what is left of the patience (~150ms): it
	// prints rounded to three digits, not as the clock left it
	// ("149.999439ms").
	_, within, _ := strings.Cut(err.Error(), "within ")
	if d, perr := time.ParseDuration(within); perr != nil || units.Duration(d) != within {
		t.Errorf("DoRetry: %v: the duration is not rounded", err)
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
	f := qmptest.NewQEMU(t, func(string, gjson.Result) string { time.Sleep(time.Hour); return "" })
	err := Do(context.Background(), f.Sock(), 300*time.Millisecond, func(s Session) error {
		_, err := s.Exec("query-blockstats", nil)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "no reply to query-blockstats") {
		t.Fatalf("got %v", err)
	}
}
