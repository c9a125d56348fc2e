package vm

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// qmpWord is QMP as a word (the test's temporary paths hold its name).
var qmpWord = regexp.MustCompile(`\bQMP\b`)

// Every way talking to QEMU fails names QMP once, in the error line and in
// a note: qmp's own errors say so themselves, the others get it added.
func TestQMPErrorNamesQMPOnce(t *testing.T) {
	do := func(ctx context.Context, q *qmptest.QEMU, fn func(qmp.Session) error) error {
		return qmp.Do(ctx, q.Sock(), 300*time.Millisecond, fn)
	}
	hangUp := qmptest.NewQEMU(t, nil)
	hangUp.Raw = func(c net.Conn) { c.Close() }
	silent := qmptest.NewQEMU(t, nil)
	silent.GreetDelay = time.Hour
	failing := qmptest.NewQEMU(t, nil) // CommandNotFound for everything
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name string
		err  error
		want string // QMPNote; QMPError is "VM 370: " and it
		is   error
	}{
		{"hung up", do(context.Background(), hangUp, nil), "QMP " + hangUp.Path + ": reading greeting: EOF", nil},
		{"busy", do(context.Background(), silent, nil), "QMP socket busy (another client, e.g. pvestatd, holds it): " + silent.Path + " sent no greeting within 300ms", qmp.ErrBusy},
		{"no socket", qmp.Do(context.Background(), filepath.Join(t.TempDir(), "370.qmp"), time.Second, nil), "no QMP socket at ", qmp.ErrNoSocket},
		{"error reply", do(context.Background(), failing, func(s qmp.Session) error { _, err := s.Exec("query-block", nil); return err }), "QMP: The command query-block has not been found (CommandNotFound)", nil},
		{"cancelled", do(cancelled, failing, nil), "QMP: context canceled", context.Canceled},
		{"the caller's", errors.New("no stats for scsi0"), "QMP: no stats for scsi0", nil},
	} {
		if c.err == nil {
			t.Fatalf("%s: no error", c.name)
		}
		note, err := QMPNote(c.err), QMPError(370, c.err)
		if !strings.HasPrefix(note, c.want) || err.Error() != "VM 370: "+note+map[bool]string{true: " (is the VM running?)"}[c.is == qmp.ErrNoSocket] {
			t.Errorf("%s: note %q, error %q, want %q", c.name, note, err, c.want)
		}
		if n := len(qmpWord.FindAllString(err.Error(), -1)); n != 1 {
			t.Errorf("%s: %q names QMP %d times", c.name, err, n)
		}
		if exitcode.Of(err) != exitcode.Unreachable || c.is != nil && !errors.Is(err, c.is) || !errors.Is(err, c.err) {
			t.Errorf("%s: exit %d, chain %v", c.name, exitcode.Of(err), err)
		}
	}
}
