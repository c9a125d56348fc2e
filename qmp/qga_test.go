package qmp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

func newFakeAgent(t *testing.T) *qmptest.Agent { return qmptest.NewAgent(t) }

func agentOf(f *qmptest.Agent) Agent { return Agent{Path: f.Sock(), Timeout: 2 * time.Second} }

func TestAgentPing(t *testing.T) {
	f := newFakeAgent(t)
	f.Handle = func(w net.Conn, cmd string, _ gjson.Result) {
		if cmd == "guest-ping" {
			fmt.Fprint(w, "{\"return\": {}}\n")
		}
	}
	for i := 0; i < 3; i++ {
		if err := agentOf(f).Ping(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.Conns(); got != 3 {
		t.Errorf("connections = %d, want one per call (3)", got)
	}
}

// A previous client's unread replies (with and without a sentinel, and a
// sync reply with someone else's id) precede ours: all are discarded.
func TestAgentDiscardsStaleReplies(t *testing.T) {
	f := newFakeAgent(t)
	f.OnAccept = func(c net.Conn) {
		fmt.Fprint(c, "{\"return\": {\"pid\": 4242}}\n")
		fmt.Fprint(c, "\xff{\"return\": 77}\n")
		fmt.Fprint(c, "{\"error\": {\"class\": \"GenericError\", \"desc\": \"JSON parse error\"}}\n")
	}
	f.Handle = func(w net.Conn, cmd string, _ gjson.Result) {
		if cmd == "guest-exec" {
			fmt.Fprint(w, "{\"return\": {\"pid\": 7}}\n")
		}
	}
	pid, err := agentOf(f).Exec(context.Background(), "true", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if pid != 7 {
		t.Errorf("pid = %d, want 7 (4242 was a stale reply)", pid)
	}
}

func TestAgentReplySplitAcrossWrites(t *testing.T) {
	f := newFakeAgent(t)
	out := base64.StdEncoding.EncodeToString([]byte("hello\n"))
	f.Handle = func(w net.Conn, cmd string, _ gjson.Result) {
		reply := `{"return": {"exited": true, "exitcode": 3, "out-data": "` + out + `"}}` + "\n"
		for i := 0; i < len(reply); i += 7 {
			end := min(i+7, len(reply))
			w.Write([]byte(reply[i:end]))
			time.Sleep(2 * time.Millisecond)
		}
	}
	st, err := agentOf(f).ExecStatus(context.Background(), 7)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Exited || st.ExitCode != 3 || string(st.Stdout) != "hello\n" || st.OK() {
		t.Errorf("status = %+v", st)
	}
}

func TestAgentSyncSplitAcrossWrites(t *testing.T) {
	f := newFakeAgent(t)
	f.Raw = func(c net.Conn) {
		rd := bufio.NewReader(c)
		line, _ := rd.ReadBytes('\n')
		id := gjson.ParseBytes(bytes.TrimLeft(line, "\xff")).Get("arguments.id").Int()
		c.Write([]byte("\xff"))
		time.Sleep(20 * time.Millisecond)
		fmt.Fprintf(c, "{\"return\": %d", id)
		time.Sleep(20 * time.Millisecond)
		c.Write([]byte("}\n"))
		rd.ReadBytes('\n')
		c.Write([]byte("{\"return\": {}}\n"))
	}
	if err := agentOf(f).Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestAgentBigReply(t *testing.T) {
	f := newFakeAgent(t)
	big := bytes.Repeat([]byte("0123456789abcdef"), 20000) // 320 KB of output
	f.Handle = func(w net.Conn, cmd string, _ gjson.Result) {
		fmt.Fprintf(w, "{\"return\": {\"exited\": true, \"exitcode\": 0, \"out-data\": %q}}\n",
			base64.StdEncoding.EncodeToString(big))
	}
	st, err := agentOf(f).ExecStatus(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(st.Stdout, big) || !st.OK() {
		t.Errorf("stdout has %d bytes, want %d", len(st.Stdout), len(big))
	}
}

func TestAgentErrorReply(t *testing.T) {
	f := newFakeAgent(t)
	f.Handle = func(w net.Conn, cmd string, _ gjson.Result) {
		fmt.Fprint(w, `{"error": {"class": "GenericError", "desc": "Guest agent command failed, error was 'Failed to execute child process “nope” (No such file or directory)'"}}`+"\n")
	}
	_, err := agentOf(f).Exec(context.Background(), "nope", nil, nil)
	var ae *AgentError
	if !errors.As(err, &ae) {
		t.Fatalf("err = %v (%T), want *AgentError", err, err)
	}
	if ae.Class != "GenericError" || !strings.Contains(ae.Desc, "No such file") || ae.Command != "guest-exec" {
		t.Errorf("AgentError = %+v", ae)
	}
}

func TestAgentSilentTimesOut(t *testing.T) {
	f := newFakeAgent(t)
	f.Silent = true
	a := Agent{Path: f.Sock(), Timeout: 300 * time.Millisecond}
	// Even with a long context, the sync is bounded by Timeout.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	start := time.Now()
	err := a.Ping(ctx)
	took := time.Since(start)
	if err == nil {
		t.Fatal("Ping of a silent agent succeeded")
	}
	want := "guest agent at " + f.Path + " did not answer within 300ms (is qemu-guest-agent running in the guest?)"
	if err.Error() != want {
		t.Errorf("err = %q\nwant  %q", err, want)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("errors.Is(err, os.ErrDeadlineExceeded) = false")
	}
	if took < 300*time.Millisecond || took > 5*time.Second { // bounded by the deadline, not hanging
		t.Errorf("took %v, want about 300ms", took)
	}
}

// A context deadline shorter than Timeout wins.
func TestAgentContextDeadline(t *testing.T) {
	f := newFakeAgent(t)
	f.Silent = true
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := Agent{Path: f.Sock(), Timeout: 10 * time.Second}.Ping(ctx)
	var te *AgentTimeoutError
	if !errors.As(err, &te) || time.Since(start) > 2*time.Second {
		t.Fatalf("err = %v after %v", err, time.Since(start))
	}
}

// The command (not the sync) may outlast Timeout when the context allows it:
// guest-fstrim takes minutes on big filesystems.
func TestAgentLongCommandUsesContextDeadline(t *testing.T) {
	f := newFakeAgent(t)
	f.Handle = func(w net.Conn, cmd string, req gjson.Result) {
		if cmd != "guest-fstrim" || req.Get("arguments.minimum").Int() != 65536 {
			fmt.Fprint(w, `{"error": {"class": "GenericError", "desc": "unexpected"}}`+"\n")
			return
		}
		time.Sleep(500 * time.Millisecond)
		fmt.Fprint(w, `{"return": {"paths": [{"path": "/mnt/a", "trimmed": 1020678144, "minimum": 65536}, {"path": "/", "error": "Operation not supported"}]}}`+"\n")
	}
	a := Agent{Path: f.Sock(), Timeout: 200 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := a.Fstrim(ctx, 65536)
	if err != nil {
		t.Fatal(err)
	}
	want := []FstrimResult{{Path: "/mnt/a", Trimmed: 1020678144, Minimum: 65536}, {Path: "/", Error: "Operation not supported"}}
	if fmt.Sprint(res) != fmt.Sprint(want) {
		t.Errorf("Fstrim = %+v, want %+v", res, want)
	}

	// Without a context deadline the command gets Timeout too.
	_, err = a.Fstrim(context.Background(), 65536)
	var te *AgentTimeoutError
	if !errors.As(err, &te) || te.Command != "guest-fstrim" {
		t.Fatalf("err = %v, want a guest-fstrim timeout", err)
	}
	if !strings.Contains(err.Error(), "did not finish guest-fstrim within 200ms") {
		t.Errorf("err = %q", err)
	}
}

func TestAgentCancel(t *testing.T) {
	f := newFakeAgent(t)
	f.Silent = true
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	err := Agent{Path: f.Sock(), Timeout: 10 * time.Second}.Ping(ctx)
	if !errors.Is(err, context.Canceled) || time.Since(start) > 2*time.Second {
		t.Fatalf("err = %v after %v, want context.Canceled soon", err, time.Since(start))
	}
}

func TestAgentNoSocket(t *testing.T) {
	p := filepath.Join(t.TempDir(), "missing.qga")
	err := Agent{Path: p, Timeout: time.Second}.Ping(context.Background())
	if err == nil || !strings.Contains(err.Error(), p) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("err = %v, want one naming %s and matching os.ErrNotExist", err, p)
	}
}

func TestAgentRunPolls(t *testing.T) {
	f := newFakeAgent(t)
	var polls atomic.Int32
	f.Handle = func(w net.Conn, cmd string, req gjson.Result) {
		switch cmd {
		case "guest-exec":
			in, _ := base64.StdEncoding.DecodeString(req.Get("arguments.input-data").String())
			if req.Get("arguments.path").String() != "sh" || req.Get("arguments.arg.1").String() != "cat" ||
				string(in) != "data" || !req.Get("arguments.capture-output").Bool() {
				fmt.Fprintf(w, `{"error": {"class": "GenericError", "desc": "bad request %s"}}`+"\n", req.Raw)
				return
			}
			fmt.Fprint(w, `{"return": {"pid": 9}}`+"\n")
		case "guest-exec-status":
			if polls.Add(1) < 3 {
				fmt.Fprint(w, `{"return": {"exited": false}}`+"\n")
				return
			}
			fmt.Fprintf(w, `{"return": {"exited": true, "exitcode": 0, "out-data": %q, "err-data": %q}}`+"\n",
				base64.StdEncoding.EncodeToString([]byte("data")), base64.StdEncoding.EncodeToString([]byte("warn")))
		}
	}
	st, err := agentOf(f).Run(context.Background(), "sh", []string{"-c", "cat"}, []byte("data"), 10*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !st.OK() || string(st.Stdout) != "data" || string(st.Stderr) != "warn" || polls.Load() != 3 {
		t.Errorf("status = %+v after %d polls", st, polls.Load())
	}
}

func TestAgentRunDeadline(t *testing.T) {
	f := newFakeAgent(t)
	f.Handle = func(w net.Conn, cmd string, _ gjson.Result) {
		if cmd == "guest-exec" {
			fmt.Fprint(w, `{"return": {"pid": 9}}`+"\n")
			return
		}
		fmt.Fprint(w, `{"return": {"exited": false}}`+"\n")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	_, err := agentOf(f).Run(ctx, "sleep", []string{"100"}, nil, 20*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "sleep (guest pid 9) still running") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
}

// Two goroutines on one socket take turns instead of timing out behind each
// other.
func TestAgentSerialisesCallers(t *testing.T) {
	f := newFakeAgent(t)
	f.Handle = func(w net.Conn, cmd string, _ gjson.Result) {
		time.Sleep(150 * time.Millisecond)
		fmt.Fprint(w, `{"return": {}}`+"\n")
	}
	a := Agent{Path: f.Sock(), Timeout: 250 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	errs := make(chan error, 4)
	for i := 0; i < 4; i++ {
		go func() { errs <- a.Ping(ctx) }()
	}
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
}

func TestParseFsInfo(t *testing.T) {
	// guest-get-fsinfo from the test guest (QEMU 7.2, qemu-ga 7.2): ext4 on a
	// VirtIO SCSI disk without a serial.
	ret := gjson.Parse(`[{"name": "sda", "total-bytes": 223465472, "mountpoint": "/mnt/t", "disk": [{"bus-type": "scsi",
	  "bus": 0, "unit": 0, "pci-controller": {"bus": 0, "slot": 2, "domain": 0, "function": 0}, "dev": "/dev/sda",
	  "target": 0}], "used-bytes": 14336, "type": "ext4"}]`)
	got := parseFsInfo(ret)
	want := []GuestFilesystem{{Name: "sda", Mountpoint: "/mnt/t", Type: "ext4", UsedBytes: 14336, TotalBytes: 223465472,
		Disks: []GuestDisk{{BusType: "scsi", Dev: "/dev/sda", PCI: "0000:00:02.0"}}}}
	if fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want) {
		t.Errorf("parseFsInfo =\n%+v\nwant\n%+v", got, want)
	}
	// Without the optional sizes (qemu-ga before 3.0), -1 means unknown.
	if got := parseFsInfo(gjson.Parse(`[{"name": "vda1", "mountpoint": "/", "type": "xfs", "disk": []}]`)); got[0].UsedBytes != -1 || got[0].TotalBytes != -1 {
		t.Errorf("sizes without used-bytes/total-bytes = %+v", got[0])
	}
}

// TestAgentRunMissedSyncs: a poll whose sync the agent leaves unanswered
// is asked again and the program's status still arrives; a start whose
// sync goes unanswered fails Run (nothing was started), and so does a
// poll once ctx has ended.
func TestAgentRunMissedSyncs(t *testing.T) {
	serve := func(silent func(n int) bool) (*qmptest.Agent, *atomic.Int32) {
		f := newFakeAgent(t)
		var execs atomic.Int32
		f.SyncSilent = silent
		f.Handle = func(w net.Conn, cmd string, _ gjson.Result) {
			if cmd == "guest-exec" {
				execs.Add(1)
				fmt.Fprint(w, `{"return": {"pid": 9}}`+"\n")
				return
			}
			fmt.Fprint(w, `{"return": {"exited": true, "exitcode": 0}}`+"\n")
		}
		return f, &execs
	}
	// Syncs 2 and 3 (the first two polls) missed.
	f, execs := serve(func(n int) bool { return n == 2 || n == 3 })
	a := Agent{Path: f.Sock(), Timeout: 50 * time.Millisecond}
	st, err := a.Run(context.Background(), "true", nil, nil, 10*time.Millisecond)
	if err != nil || !st.OK() || execs.Load() != 1 {
		t.Errorf("polls missed: %+v %v, %d started", st, err, execs.Load())
	}
	// The start's sync missed.
	f, execs = serve(func(n int) bool { return n == 1 })
	a = Agent{Path: f.Sock(), Timeout: 50 * time.Millisecond}
	var te *AgentTimeoutError
	if _, err := a.Run(context.Background(), "true", nil, nil, 10*time.Millisecond); !errors.As(err, &te) || !te.Unsent() || execs.Load() != 0 {
		t.Errorf("start missed: %v, %d started", err, execs.Load())
	}
	// Every poll missed: Run ends with ctx.
	f, _ = serve(func(n int) bool { return n > 1 })
	a = Agent{Path: f.Sock(), Timeout: 50 * time.Millisecond}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := a.Run(ctx, "sleep", nil, nil, 10*time.Millisecond); err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("polls never answered: %v", err)
	}
}

// TestAgentRunGivesUp: polls whose syncs all go unanswered end Run after
// MissedSyncTries in a row, without a deadline on ctx (nothing hangs).
func TestAgentRunGivesUp(t *testing.T) {
	f := newFakeAgent(t)
	f.SyncSilent = func(n int) bool { return n > 1 }
	f.Handle = func(w net.Conn, cmd string, _ gjson.Result) { fmt.Fprint(w, `{"return": {"pid": 9}}`+"\n") }
	a := Agent{Path: f.Sock(), Timeout: 30 * time.Millisecond}
	_, err := a.Run(context.Background(), "sleep", nil, nil, time.Millisecond)
	var te *AgentTimeoutError
	if !errors.As(err, &te) || !te.Unsent() || !strings.Contains(err.Error(), "sleep (guest pid 9)") {
		t.Errorf("%v", err)
	}
	if n := f.Requests(); n != 1+1+MissedSyncTries {
		t.Errorf("%d requests, want the start's sync and command and %d syncs", n, MissedSyncTries)
	}
}
