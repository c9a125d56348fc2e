package layers

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// disabled is qemu-ga's reply to a command its --block-rpcs (or
// allow-rpcs) policy forbids (qapi/qmp-dispatch.c: "The command %s has
// been disabled for this instance", class CommandNotFound).
func disabled(w net.Conn, cmd string) {
	fmt.Fprintf(w, `{"error": {"class": "CommandNotFound", "desc": "The command %s has been disabled for this instance"}}`+"\n", cmd)
}

// agent is a fake qemu-ga serving the recorded diskstats, with file access
// and guest-exec allowed or not; it records the commands of each
// connection.
type agent struct {
	files, exec bool
	mu          sync.Mutex
	cmds        []string
}

func (g *agent) handle(text string) func(w net.Conn, cmd string, req gjson.Result) {
	b64 := base64.StdEncoding.EncodeToString([]byte(text))
	return func(w net.Conn, cmd string, req gjson.Result) {
		g.mu.Lock()
		g.cmds = append(g.cmds, cmd)
		g.mu.Unlock()
		switch {
		case strings.HasPrefix(cmd, "guest-file-") && !g.files, strings.HasPrefix(cmd, "guest-exec") && !g.exec:
			disabled(w, cmd)
		case cmd == "guest-file-open":
			if p := req.Get("arguments.path").String(); p != GuestStatsPath {
				fmt.Fprintf(w, `{"error": {"class": "GenericError", "desc": "no %s"}}`+"\n", p)
				return
			}
			fmt.Fprint(w, `{"return": 1000}`+"\n")
		case cmd == "guest-file-read":
			fmt.Fprintf(w, `{"return": {"count": %d, "buf-b64": %q, "eof": true}}`+"\n", len(text), b64)
		case cmd == "guest-file-close":
			fmt.Fprint(w, `{"return": {}}`+"\n")
		case cmd == "guest-exec":
			if req.Get("arguments.path").String() != "cat" || req.Get("arguments.arg.0").String() != GuestStatsPath {
				fmt.Fprintf(w, `{"error": {"class": "GenericError", "desc": "unexpected %s"}}`+"\n", req.Raw)
				return
			}
			fmt.Fprint(w, `{"return": {"pid": 4242}}`+"\n")
		case cmd == "guest-exec-status":
			fmt.Fprintf(w, `{"return": {"exited": true, "exitcode": 0, "out-data": %q}}`+"\n", b64)
		}
	}
}

func (g *agent) seen() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := strings.Join(g.cmds, " ")
	g.cmds = nil
	return s
}

func TestGuestReader(t *testing.T) {
	text := mustRead(t, "testdata/diskstats-6.18.txt")
	for _, c := range []struct {
		name        string
		files, exec bool
		first, next string // the commands of the first and second Read
		forbidden   bool
	}{
		{"file access", true, true, "guest-file-open guest-file-read guest-file-close", "guest-file-open guest-file-read guest-file-close", false},
		{"files forbidden", false, true, "guest-file-open guest-exec guest-exec-status", "guest-exec guest-exec-status", false},
		{"both forbidden", false, false, "guest-file-open guest-exec", "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			fake := qmptest.NewAgent(t)
			g := &agent{files: c.files, exec: c.exec}
			fake.Handle = g.handle(text)
			r := &GuestReader{Agent: qmp.Agent{Path: fake.Sock(), Timeout: 2 * time.Second}}
			for i, want := range []string{c.first, c.next} {
				conns := fake.Conns()
				m, at, err := r.Read(context.Background())
				if got := g.seen(); got != want {
					t.Errorf("read %d: commands %q, want %q", i, got, want)
				}
				if c.forbidden {
					if !errors.Is(err, ErrGuestForbidden) || m != nil || !at.IsZero() {
						t.Fatalf("read %d: %v %v, want ErrGuestForbidden", i, m, err)
					}
					if i == 0 && !strings.Contains(err.Error(), "guest-exec has been disabled") {
						t.Errorf("the reason lost: %v", err)
					}
					if i == 1 && fake.Conns() != conns {
						t.Errorf("a forbidding agent asked again")
					}
					continue
				}
				if err != nil {
					t.Fatalf("read %d: %v", i, err)
				}
				if fake.Conns() != conns+1 {
					t.Errorf("read %d: %d connections, want one exchange", i, fake.Conns()-conns)
				}
				if len(m) != 2 || m["loop2"].WriteIOs != 120604 || m["loop2"].WriteTicksMs != 32273 || at.IsZero() {
					t.Errorf("read %d: %+v at %v", i, m, at)
				}
			}
		})
	}
}

// An agent that does not answer fails the read within its timeout and is
// asked again next time (a guest still booting).
func TestGuestReaderSilent(t *testing.T) {
	fake := qmptest.NewAgent(t)
	fake.Silent = true
	r := &GuestReader{Agent: qmp.Agent{Path: fake.Sock(), Timeout: 200 * time.Millisecond}}
	for i := 0; i < 2; i++ {
		start := time.Now()
		_, _, err := r.Read(context.Background())
		if err == nil || errors.Is(err, ErrGuestForbidden) || time.Since(start) > 2*time.Second {
			t.Fatalf("read %d: %v after %s", i, err, time.Since(start))
		}
	}
	if fake.Conns() != 2 {
		t.Errorf("%d connections, want 2", fake.Conns())
	}
}

func TestGuestDev(t *testing.T) {
	for in, want := range map[string]string{"/dev/sdb": "sdb", "/dev/vda\n": "vda", "nvme0n1": "nvme0n1"} {
		if got := GuestDev(in); got != want {
			t.Errorf("GuestDev(%q) = %q, want %q", in, got, want)
		}
	}
}
