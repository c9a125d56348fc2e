package qmp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
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

// A batch is one write: qmp_capabilities and every command reach QEMU in
// one round trip, and each reply goes to its command, errors included.
func TestExecBatch(t *testing.T) {
	q := qmptest.NewQEMU(t, qmptest.Replies(map[string]string{
		"query-status": `{"status": "running", "running": true}`,
		"query-name":   `{"name": "vm370"}`,
	}))
	var rets []gjson.Result
	var errs []error
	err := Do(context.Background(), q.Sock(), 2*time.Second, func(s Session) error {
		var err error
		rets, errs, err = s.ExecBatch(Cmd{Name: "query-status"}, Cmd{Name: "x-nonesuch"}, Cmd{Name: "query-name"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var qe *Error
	if rets[0].Get("status").String() != "running" || errs[0] != nil ||
		!errors.As(errs[1], &qe) || qe.Class != "CommandNotFound" || rets[1].Exists() ||
		rets[2].Get("name").String() != "vm370" || errs[2] != nil {
		t.Errorf("replies %v, errors %v", rets, errs)
	}
	if got := q.Seen(); !reflect.DeepEqual(got, []string{"query-status", "x-nonesuch", "query-name"}) {
		t.Errorf("seen %v", got)
	}
	if q.Reads() != 1 {
		t.Errorf("%d round trips, want 1", q.Reads())
	}

	// Commands one after another: qmp_capabilities still rides with the
	// first, then one round trip each.
	q2 := qmptest.NewQEMU(t, qmptest.Replies(map[string]string{"query-status": `{"status": "running"}`}))
	err = Do(context.Background(), q2.Sock(), 2*time.Second, func(s Session) error {
		for i := 0; i < 3; i++ {
			if _, err := s.Exec("query-status", nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil || q2.Reads() != 3 || q2.Commands() != 3 {
		t.Errorf("3 commands: %v, %d round trips, %d commands", err, q2.Reads(), q2.Commands())
	}

	// An exchange that asks nothing sends nothing, not even the capabilities.
	q3 := qmptest.NewQEMU(t, nil)
	if err := Do(context.Background(), q3.Sock(), 2*time.Second, func(Session) error { return nil }); err != nil || q3.Reads() != 0 {
		t.Errorf("empty exchange: %v, %d reads", err, q3.Reads())
	}
}

// A QEMU that refuses qmp_capabilities fails the batch as a whole.
func TestExecBatchCapabilitiesRefused(t *testing.T) {
	q := qmptest.NewQEMU(t, nil)
	q.Raw = func(c net.Conn) {
		fmt.Fprint(c, qmptest.Greeting72+"\r\n")
		readCommands(c, 2)
		fmt.Fprint(c, qmptest.Fail("GenericError", "capabilities refused")+"\r\n")
		fmt.Fprint(c, qmptest.Fail("CommandNotFound", "Expecting capabilities negotiation with 'qmp_capabilities'")+"\r\n")
	}
	err := Do(context.Background(), q.Sock(), 2*time.Second, func(s Session) error {
		rets, errs, err := s.ExecBatch(Cmd{Name: "query-status"})
		if err == nil {
			t.Errorf("batch after a refused handshake: %v %v", rets, errs)
		}
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "capabilities refused") {
		t.Errorf("err = %v", err)
	}
}
