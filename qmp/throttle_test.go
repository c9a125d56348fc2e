package qmp_test

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

func TestLimitNameMapping(t *testing.T) {
	if len(qmp.ThrottleLimitNames) != 18 {
		t.Fatalf("%d names", len(qmp.ThrottleLimitNames))
	}
	if !reflect.DeepEqual(qmp.ThrottleLimitNames, qemuserver.QEMULimitNames()) {
		t.Errorf("qmp and qemuserver disagree on the 18 fields:\n%v\n%v", qmp.ThrottleLimitNames, qemuserver.QEMULimitNames())
	}
	for q, b := range map[string]string{
		"bps-total": "bps", "bps-read": "bps_rd", "bps-write": "bps_wr", "iops-total": "iops",
		"iops-total-max": "iops_max", "bps-write-max": "bps_wr_max", "bps-total-max-length": "bps_max_length",
		"iops-read-max-length": "iops_rd_max_length", "bps-write-max-length": "bps_wr_max_length",
	} {
		if got := qmp.QEMUToBackendLimitName(q); got != b {
			t.Errorf("QEMUToBackendLimitName(%s) = %s, want %s", q, got, b)
		}
	}
	for _, n := range qmp.ThrottleLimitNames {
		if got := qmp.BackendToQEMULimitName(qmp.QEMUToBackendLimitName(n)); got != n {
			t.Errorf("round trip of %s gives %s", n, got)
		}
	}
}

func TestThrottleCommand(t *testing.T) {
	full := qemuserver.Limits{"bps-write": 20 << 20, "iops-read": 500}.Full()
	name, args, err := qmp.ThrottleCommand("scsi1", true, full)
	if err != nil || name != "qom-set" || args["path"] != "throttle-drive-scsi1" || args["property"] != "limits" {
		t.Fatalf("blockdev: %s %v %v", name, args, err)
	}
	if v := args["value"].(map[string]any); len(v) != 18 || v["bps-write"] != int64(20<<20) || v["bps-read-max-length"] != int64(1) || v["iops-total"] != int64(0) {
		t.Errorf("qom-set value %v", v)
	}
	name, args, err = qmp.ThrottleCommand("scsi1", false, full)
	if err != nil || name != "block_set_io_throttle" || args["device"] != "drive-scsi1" || len(args) != 19 || args["bps_wr"] != int64(20<<20) || args["iops_rd"] != int64(500) || args["iops_wr_max_length"] != int64(1) {
		t.Errorf("drive: %s %v %v", name, args, err)
	}
	delete(full, "iops-write-max-length")
	if _, _, err := qmp.ThrottleCommand("scsi1", true, full); err == nil || !strings.Contains(err.Error(), "iops-write-max-length") {
		t.Errorf("a missing field must be refused (qom-set merges: it would keep its old value): %v", err)
	}
}

// TestConnectFullBacklogIsBusy: QEMU listens with a backlog of 1, so with one
// client connected and one waiting, a third connect() fails at once with
// EAGAIN. That is a busy socket (retried by DoRetry), not a missing one.
func TestConnectFullBacklogIsBusy(t *testing.T) {
	path := filepath.Join(t.TempDir(), "q.qmp")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil { // never accepts
		t.Fatal(err)
	}
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	var busy error
	for i := 0; i < 4 && busy == nil; i++ {
		m := qmp.NewSocketMonitor(path, 200*time.Millisecond)
		err := m.Connect()
		if !errors.Is(err, qmp.ErrBusy) {
			t.Fatalf("connect %d: %v, want ErrBusy", i, err)
		}
		if strings.Contains(err.Error(), "temporarily unavailable") {
			busy = err
		}
		c, err := net.Dial("unix", path)
		if err == nil {
			held = append(held, c)
		}
	}
	if busy == nil {
		t.Fatalf("never saw a full backlog")
	}
	start := time.Now()
	err = qmp.DoRetry(context.Background(), path, 100*time.Millisecond, 500*time.Millisecond, func(qmp.Session) error { return nil })
	if !errors.Is(err, qmp.ErrBusy) || time.Since(start) < 400*time.Millisecond || time.Since(start) > 3*time.Second {
		t.Errorf("DoRetry on a full backlog: %v after %s", err, time.Since(start))
	}
}
