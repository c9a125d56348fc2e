package layers

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/sampler"
)

// GuestStatsPath is the file the guest layer reads: every block device's
// counters in one read, so one exchange per VM whatever its disks.
const GuestStatsPath = "/proc/diskstats"

// maxGuestStats bounds what is read of it (a guest with thousands of
// devices is refused, not read without end): 64 KiB is ~500 devices.
const maxGuestStats = 64 << 10

// ErrGuestForbidden: the agent's policy allows neither guest-file-open nor
// guest-exec (qemu-ga --block-rpcs / allow-rpcs); the guest layer is
// unknown for the run and the agent is not asked again.
var ErrGuestForbidden = errors.New("the guest agent forbids guest-file-open and guest-exec")

// GuestReader reads one VM's guest diskstats through its agent, one
// exchange (one connection) per Read: guest-file-open, guest-file-read and
// guest-file-close of GuestStatsPath; where the agent refuses file access,
// guest-exec of cat and its guest-exec-status in the same exchange (and in
// every later Read alone). Where it refuses both, Read returns
// ErrGuestForbidden at once from then on, asking nothing.
type GuestReader struct {
	Agent qmp.Agent
	// PollEvery is the pause between guest-exec-status polls; 0 means
	// 5 ms.
	PollEvery time.Duration

	viaExec   bool
	forbidden error
}

// Read is the guest's block devices' counters by kernel name (sdb, vdb),
// and the time they were read (the middle of the exchange).
func (g *GuestReader) Read(ctx context.Context) (map[string]sampler.BlockStat, time.Time, error) {
	if g.forbidden != nil {
		return nil, time.Time{}, g.forbidden
	}
	var text []byte
	var at time.Time
	first := "guest-file-open"
	if g.viaExec {
		first = "guest-exec"
	}
	err := g.Agent.Session(ctx, first, func(call *qmp.AgentSession) error {
		t0 := time.Now()
		if !g.viaExec {
			b, err := readFile(call, GuestStatsPath)
			var ae *qmp.AgentError
			if err == nil {
				text, at = b, t0.Add(time.Since(t0)/2)
				return nil
			} else if !errors.As(err, &ae) || ae.Command != "guest-file-open" {
				return err
			}
			g.viaExec = true
			t0 = time.Now()
			b, xerr := g.catFile(ctx, call, GuestStatsPath)
			if errors.As(xerr, &ae) && ae.Command == "guest-exec" {
				g.forbidden = fmt.Errorf("%w (%v; %v)", ErrGuestForbidden, err, xerr)
				return g.forbidden
			}
			text, at = b, t0.Add(time.Since(t0)/2)
			return xerr
		}
		b, err := g.catFile(ctx, call, GuestStatsPath)
		var ae *qmp.AgentError
		if errors.As(err, &ae) && ae.Command == "guest-exec" {
			g.forbidden = fmt.Errorf("%w (%v)", ErrGuestForbidden, err)
			return g.forbidden
		}
		text, at = b, t0.Add(time.Since(t0)/2)
		return err
	})
	if err != nil {
		return nil, time.Time{}, err
	}
	return sampler.ParseDiskstats(string(text)), at, nil
}

// GuestDev is the kernel name of a guest device node (/dev/sdb: sdb).
func GuestDev(device string) string {
	return filepath.Base(strings.TrimSpace(device))
}

func readFile(call *qmp.AgentSession, path string) ([]byte, error) {
	h, err := call.Call("guest-file-open", openArgs(path))
	if err != nil {
		return nil, err
	}
	if h.Type != gjson.Number {
		return nil, fmt.Errorf("guest agent: guest-file-open %s: handle %q is no number", path, h.Raw)
	}
	handle := h.Int()
	// The whole file in one read (it is far below maxGuestStats), its
	// close sent with it: one round trip.
	h64 := strconv.FormatInt(handle, 10)
	r, err := call.Pipeline(
		qmp.AgentCommand{Execute: "guest-file-read", Arguments: json.RawMessage(`{"handle":` + h64 + `,"count":` + strconv.Itoa(maxGuestStats) + `}`)},
		qmp.AgentCommand{Execute: "guest-file-close", Arguments: json.RawMessage(`{"handle":` + h64 + `}`)})
	if err != nil {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(r[0].Get("buf-b64").String())
	if err != nil {
		return nil, fmt.Errorf("guest agent: guest-file-read %s: %w", path, err)
	}
	if !r[0].Get("eof").Bool() && len(b) >= maxGuestStats {
		return nil, fmt.Errorf("guest agent: %s: more than %d bytes", path, maxGuestStats)
	}
	return b, nil
}

func (g *GuestReader) catFile(ctx context.Context, call *qmp.AgentSession, path string) ([]byte, error) {
	r, err := call.Call("guest-exec", map[string]any{"path": "cat", "arg": []string{path}, "capture-output": true})
	if err != nil {
		return nil, err
	}
	pid := r.Get("pid")
	if pid.Type != gjson.Number {
		return nil, fmt.Errorf("guest agent: guest-exec cat: pid %q is no number", r.Raw)
	}
	every := g.PollEvery
	if every <= 0 {
		every = 5 * time.Millisecond
	}
	for {
		st, err := call.Call("guest-exec-status", map[string]any{"pid": pid.Int()})
		if err != nil {
			return nil, err
		}
		if st.Get("exited").Bool() {
			if c := st.Get("exitcode").Int(); c != 0 {
				return nil, fmt.Errorf("guest agent: cat %s exited %d", path, c)
			}
			b, err := base64.StdEncoding.DecodeString(st.Get("out-data").String())
			if err != nil {
				return nil, fmt.Errorf("guest agent: cat %s: %w", path, err)
			}
			if len(b) > maxGuestStats {
				return nil, fmt.Errorf("guest agent: %s: more than %d bytes", path, maxGuestStats)
			}
			return b, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(every):
		}
	}
}

// openStats are guest-file-open's arguments for GuestStatsPath, marshalled
// once (the same every sample).
var openStats = marshalOpen(GuestStatsPath)

func openArgs(path string) json.RawMessage {
	if path == GuestStatsPath {
		return openStats
	}
	return marshalOpen(path)
}

func marshalOpen(path string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"path": path, "mode": "r"})
	return b
}
