package discard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// The recorded VM 370 (testdata/vm370): scsi1 discard=on, scsi2
// discard=ignore, sata1 and virtio1 discard=on; between the two recordings
// 4 MiB were discarded at the start of every disk.
var vm370Disks = []string{"sata1", "scsi1", "scsi2", "virtio1"}

func byID(t *testing.T, rep *Report) map[string]Disk {
	t.Helper()
	out := map[string]Disk{}
	for _, d := range rep.Disks {
		out[d.ID] = d
	}
	if len(out) != len(vm370Disks) {
		t.Fatalf("disks %v", rep.Disks)
	}
	return out
}

func TestRunStatus(t *testing.T) {
	f := newFakeVM(t, "vm370", 370)
	f.r.set("after")
	f.meter.set("after")
	v := f.load(t, 370)
	rep, err := Run(context.Background(), f.node(2*time.Second), v, v.Disks, Options{Mode: Status, TrimTimeout: time.Minute, NewMeter: func() Meter { return f.meter }})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Mode != Status || !rep.Running || rep.VMID != 370 || rep.WindowSeconds != nil || rep.Sampling != nil || len(rep.Notes) != 0 {
		t.Errorf("report %+v", rep)
	}
	d := byID(t, rep)
	s1, s2, v1 := d["scsi1"], d["scsi2"], d["virtio1"]
	if c := s1.SinceStart; c == nil || c.ProtocolNode != "ec4fec502e68ce88eb30adba99ef5c7" || c.StorageAcceptedOps != 1 || c.StorageAcceptedBytes != 4<<20 || c.StorageFailedOps != 0 || !c.DeviceCounts {
		t.Errorf("scsi1 counters %+v", s1.SinceStart)
	}
	if c := s2.SinceStart; c == nil || c.StorageAcceptedBytes != 0 || c.ProtocolNode == "" {
		t.Errorf("scsi2 counters %+v", c)
	}
	if v1.SinceStart.DeviceCounts || *s1.Discard.Running != "on" || *s2.Discard.Running != "ignore" || *s1.SSD.Running || s1.Controller != "virtio-scsi-single" || v1.Controller != "virtio-blk" {
		t.Errorf("views: virtio1 %+v scsi1 %+v scsi2 %+v", v1, s1, s2)
	}
	if *s1.Allocation.AllocatedBytes != 4<<20 || s1.Allocation.Pool == nil || s1.Allocation.Method != "lvs" {
		t.Errorf("allocation %+v", s1.Allocation)
	}
	want := map[string][]Code{"scsi1": {CodeSSDOff}, "scsi2": {CodeDiscardIgnore}, "sata1": {CodeSSDOff}, "virtio1": {CodeVirtioBlkDiscard}}
	for id, codes := range want {
		if got := codesOf(d[id].Warnings); !slices.Equal(got, codes) {
			t.Errorf("%s warnings %v, want %v", id, got, codes)
		}
		if d[id].Result != nil {
			t.Errorf("%s: a verdict in status mode", id)
		}
		for _, w := range d[id].Warnings {
			checkFix(t, id, w)
		}
	}
	// Running: the fix says it takes a full stop and start.
	if f := s2.Warnings[0].Fix; !strings.HasSuffix(f, ", then qm reboot 370 (a full stop and start; a reboot inside the guest is not enough)") {
		t.Errorf("fix %q", f)
	}
	// The JSON keeps README's schema: snake_case keys, null for unknown.
	b, _ := json.Marshal(rep)
	for _, k := range []string{`"mode":"status"`, `"since_start":{"protocol_node":`, `"controller_discard":"yes"`, `"discard":{"configured":"ignore","running":"ignore","pending":null}`, `"warnings":[{"code":"discard-ignore"`} {
		if !strings.Contains(string(b), k) {
			t.Errorf("JSON lacks %s: %s", k, b)
		}
	}
	if strings.Contains(string(b), `"result"`) || strings.Contains(string(b), `"sampling"`) {
		t.Errorf("status JSON has a result or sampling: %s", b)
	}
}

// waitOptions steps through a short window: at the second sample the
// discards "happen" (the fake QEMU and meter answer the after-recording).
func waitOptions(f *fakeVM, window time.Duration, at int, fault func()) Options {
	n := 0
	return Options{Mode: Wait, Wait: window, Interval: 50 * time.Millisecond, TrimTimeout: time.Minute,
		NewMeter: func() Meter { return f.meter },
		OnSample: func(sampler.Tick) {
			n++
			if n == 2 {
				f.r.set("after")
				f.meter.set("after")
			}
			if n == at && fault != nil {
				fault()
			}
		}}
}

func TestRunWait(t *testing.T) {
	f := newFakeVM(t, "vm370", 370)
	v := f.load(t, 370)
	var progress []sampler.Tick
	o := waitOptions(f, 400*time.Millisecond, 0, nil)
	on := o.OnSample
	o.OnSample = func(p sampler.Tick) { on(p); progress = append(progress, p) }
	rep, err := Run(context.Background(), f.node(2*time.Second), v, v.Disks, o)
	if exitcode.Of(err) != exitcode.Problem || err.Error() != "" {
		t.Fatalf("exit %d (%v), want 1 (scsi2 has discard=ignore)", exitcode.Of(err), err)
	}
	s := rep.Sampling
	if s == nil || s.Cut != "" || s.Samples+s.Missed < 8 || s.Samples < 2 || s.IntervalSeconds != 0.05 || s.CoveredSeconds < 0.4 || *rep.WindowSeconds != 0.4 {
		t.Errorf("sampling %+v", s)
	}
	// A loaded machine can make a 50 ms tick late: then, and only then,
	// every verdict says so.
	var gaps []Code
	if s.Missed > 0 || len(s.Gaps) > 0 {
		gaps = []Code{CodeWindowGaps}
		t.Logf("the window had gaps on this machine: %+v", s)
	}
	d := byID(t, rep)
	for _, id := range []string{"scsi1", "sata1", "virtio1"} {
		r := d[id].Result
		if r.Verdict != Returned || !slices.Equal(codesOf(r.Reasons), append([]Code{}, gaps...)) || r.StorageAcceptedOps != 1 || r.StorageAcceptedBytes != 4<<20 || *r.ReturnedBytes != 4<<20 ||
			*r.PoolReturnedBytes != 33554432-20964864 || (r.StandsOnSeconds != nil) != (gaps != nil) || r.GuestTrimmedBytes != nil {
			t.Errorf("%s: %+v %v", id, r, codesOf(r.Reasons))
		}
	}
	r := d["scsi2"].Result
	if r.Verdict != NotReturned || !slices.Equal(codesOf(r.Reasons), append([]Code{CodeDiscardIgnore, CodeGuestSentNothing}, gaps...)) || *r.ReturnedBytes != 0 {
		t.Errorf("scsi2: %s %v", r.Verdict, codesOf(r.Reasons))
	}
	last := progress[len(progress)-1]
	if len(progress) != s.Samples || last.Detail != "QEMU received 0 B, storage accepted 12.0 MiB" || last.Window != 400*time.Millisecond || progress[0].Detail != "QEMU received 0 B, storage accepted 0 B" || progress[0].N != 1 || last.N != s.Samples {
		t.Errorf("progress: %d samples, last %+v", len(progress), last)
	}
	b, _ := json.Marshal(rep)
	if !strings.Contains(string(b), `"sampling":{"interval_seconds":0.05,`) || !strings.Contains(string(b), `"gaps":[`) {
		t.Errorf("JSON %s", b)
	}
}

// TestRunWaitStopped: QEMU stops answering for part of the window (SIGSTOP,
// or another client holding the socket) and comes back: the gap is said in
// the sampling and in every verdict, which still stands on the whole window.
func TestRunWaitStopped(t *testing.T) {
	f := newFakeVM(t, "vm370", 370)
	v := f.load(t, 370)
	o := waitOptions(f, 800*time.Millisecond, 3, func() {
		f.q.Pause()
		time.AfterFunc(300*time.Millisecond, f.q.Resume)
	})
	rep, err := Run(context.Background(), f.node(time.Second), v, v.Disks, o)
	if exitcode.Of(err) != exitcode.Problem {
		t.Fatalf("exit %d (%v), want 1", exitcode.Of(err), err)
	}
	s := rep.Sampling
	long := slices.ContainsFunc(s.Gaps, func(g Gap) bool { return g.ToSeconds-g.FromSeconds >= 0.25 })
	if s.Missed == 0 || !long || s.Cut != "" || s.CoveredSeconds < 0.8 {
		t.Fatalf("sampling %+v: want a gap of the 300 ms pause", s)
	}
	for id, dk := range byID(t, rep) {
		r := dk.Result
		if r.StandsOnSeconds == nil || *r.StandsOnSeconds != s.CoveredSeconds || reasonOf(r.Reasons, CodeWindowGaps).Code == "" {
			t.Errorf("%s: stands on %v, reasons %v", id, r.StandsOnSeconds, codesOf(r.Reasons))
		}
		if id != "scsi2" && r.Verdict != Returned {
			t.Errorf("%s: %s", id, r.Verdict)
		}
	}
}

// TestRunWaitStoppedToTheEnd: QEMU stays stopped past the window: the
// reading after it fails within the timeout, and what was measured is
// reported with exit 3.
func TestRunWaitStoppedToTheEnd(t *testing.T) {
	f := newFakeVM(t, "vm370", 370)
	v := f.load(t, 370)
	const window, timeout = 500 * time.Millisecond, 700 * time.Millisecond
	var pausedAt time.Time
	o := waitOptions(f, window, 4, func() { pausedAt = time.Now(); f.q.Pause() })
	start := time.Now()
	rep, err := Run(context.Background(), f.node(timeout), v, v.Disks, o)
	took := time.Since(start)
	defer f.q.Resume()
	if exitcode.Of(err) != exitcode.Unreachable || rep == nil || !strings.Contains(err.Error(), "QEMU stopped answering") {
		t.Fatalf("exit %d (%v), report %v", exitcode.Of(err), err, rep != nil)
	}
	// The window, then at most the last sample's 2 s of patience
	// (sampler.Window), plus a margin.
	if bound := window + 2*time.Second + 500*time.Millisecond; took > bound {
		t.Errorf("took %s, bound %s", took, bound)
	}
	t.Logf("exit 3 after %s (paused %s into it)", took.Round(time.Millisecond), pausedAt.Sub(start).Round(time.Millisecond))
	s := rep.Sampling
	if s.Cut == "" || s.Missed == 0 || s.CoveredSeconds >= window.Seconds() {
		t.Errorf("sampling %+v", s)
	}
	r := byID(t, rep)["scsi1"].Result
	// The discards came before the pause: counted; the allocation after is
	// measured all the same.
	if r.Verdict != Returned || r.StorageAcceptedBytes != 4<<20 || reasonOf(r.Reasons, CodeWindowCut).Code == "" || r.StandsOnSeconds == nil {
		t.Errorf("scsi1 %s %v %+v", r.Verdict, codesOf(r.Reasons), r)
	}
}

// TestRunWaitKilled: QEMU killed mid-window: exit 3 at once, with the
// samples taken until then in the report.
func TestRunWaitKilled(t *testing.T) {
	f := newFakeVM(t, "vm370", 370)
	v := f.load(t, 370)
	var killedAt time.Time
	o := waitOptions(f, 5*time.Second, 4, func() {
		killedAt = time.Now()
		f.q.Kill()
		_ = os.RemoveAll(f.paths.ProcPid(fakePid))
	})
	rep, err := Run(context.Background(), f.node(2*time.Second), v, v.Disks, o)
	toError := time.Since(killedAt)
	if exitcode.Of(err) != exitcode.Unreachable || rep == nil {
		t.Fatalf("exit %d (%v)", exitcode.Of(err), err)
	}
	if toError > time.Second {
		t.Errorf("exit 3 %s after the kill", toError)
	}
	if !strings.Contains(err.Error(), "QEMU (pid 4242) exited") || !strings.Contains(rep.Sampling.Cut, "QEMU (pid 4242) exited") || rep.Sampling.Samples != 4 {
		t.Errorf("%v; sampling %+v", err, rep.Sampling)
	}
	r := byID(t, rep)["sata1"].Result
	if r.StorageAcceptedBytes != 4<<20 || r.Verdict != Returned || reasonOf(r.Reasons, CodeWindowCut).Code == "" {
		t.Errorf("sata1 %s %v", r.Verdict, codesOf(r.Reasons))
	}
	t.Logf("exit 3 %s after the kill: %v", toError.Round(time.Millisecond), err)
}

// TestRunWaitInterrupted: Ctrl-C mid-window ends it with what was seen.
func TestRunWaitInterrupted(t *testing.T) {
	f := newFakeVM(t, "vm370", 370)
	v := f.load(t, 370)
	ctx, cancel := context.WithCancel(context.Background())
	rep, err := Run(ctx, f.node(time.Second), v, v.Disks, waitOptions(f, 5*time.Second, 3, cancel))
	if exitcode.Of(err) != exitcode.Unreachable || rep == nil || rep.Sampling.Cut != "interrupted" {
		t.Fatalf("exit %d (%v) %+v", exitcode.Of(err), err, rep)
	}
}

// trimAgent is a guest agent answering as the end-to-end guest did: its
// recorded filesystems, and a trim of 230 MiB on each (e2e-trim-report.json);
// trimmed flips the fake QEMU and meter to what followed.
func trimAgent(t *testing.T, f *fakeVM) (*qmptest.Agent, *int) {
	a := f.agent(t, 370)
	fsinfo := strings.TrimSpace(string(readFixture(t, "guest/real-guest-get-fsinfo.json")))
	var mu sync.Mutex
	trims := 0
	a.Handle = func(w net.Conn, cmd string, req gjson.Result) {
		switch cmd {
		case "guest-get-fsinfo":
			fmt.Fprintf(w, "{\"return\": %s}\n", fsinfo)
		case "guest-fstrim":
			mu.Lock()
			trims++
			mu.Unlock()
			f.r.set("after")
			f.meter.set("after")
			fmt.Fprintln(w, `{"return": {"paths": [{"path": "/mnt/v1", "trimmed": 241067008, "minimum": 0}, {"path": "/mnt/a1", "trimmed": 241067008, "minimum": 0}, {"path": "/mnt/s2", "trimmed": 241067008, "minimum": 0}, {"path": "/mnt/s1", "trimmed": 241067008, "minimum": 0}, {"path": "/", "error": "Operation not supported"}]}}`)
		}
	}
	return a, &trims
}

func trimOptions(f *fakeVM) Options {
	return Options{Mode: Trim, TrimTimeout: 5 * time.Second, NewMeter: func() Meter { return f.meter }}
}

func TestRunTrim(t *testing.T) {
	f := newFakeVM(t, "vm370", 370)
	f.r.replies["query-pci"] = `{"return": ` + strings.TrimSpace(string(readFixture(t, "guest/real-query-pci.json"))) + `}`
	_, trims := trimAgent(t, f)
	v := f.load(t, 370)
	started, ended := 0, 0
	o := trimOptions(f)
	o.OnTrim = func(timeout time.Duration) func() {
		started++
		if timeout != 5*time.Second {
			t.Errorf("OnTrim timeout %s", timeout)
		}
		return func() { ended++ }
	}
	rep, err := Run(context.Background(), f.node(2*time.Second), v, v.Disks, o)
	if exitcode.Of(err) != exitcode.Problem {
		t.Fatalf("exit %d (%v), want 1", exitcode.Of(err), err)
	}
	if *trims != 1 || started != 1 || ended != 1 || rep.WindowSeconds == nil || rep.Sampling != nil || len(rep.Notes) != 0 || len(rep.GuestFstrim) != 5 {
		t.Errorf("trims %d, hooks %d/%d, report %+v", *trims, started, ended, rep)
	}
	d := byID(t, rep)
	for _, id := range vm370Disks {
		r := d[id].Result
		if r.GuestTrimmedBytes == nil || *r.GuestTrimmedBytes != 241067008 {
			t.Errorf("%s: guest trimmed %v", id, r.GuestTrimmedBytes)
		}
		want, codes := Returned, []Code{}
		if id == "scsi2" {
			want, codes = NotReturned, []Code{CodeDiscardIgnore}
		}
		if r.Verdict != want || !slices.Equal(codesOf(r.Reasons), codes) {
			t.Errorf("%s: %s %v, want %s %v", id, r.Verdict, codesOf(r.Reasons), want, codes)
		}
	}
	if p := rep.GuestFstrim[4]; p.Path != "/" || p.Error == "" || len(p.Disks) != 0 {
		t.Errorf("root filesystem %+v", p)
	}
}

// TestRunTrimAgentFaults: a guest agent that is dead, silent, hangs in
// guest-fstrim, answers a hostile reply, or is not configured: exit 3 within the timeout (plus a
// small margin), with nothing trimmed unless the trim itself hangs.
func TestRunTrimAgentFaults(t *testing.T) {
	// Timeouts of a second, margins of 600 ms: a loaded CI machine stays
	// inside the margin, an exchange that waited a second time does not.
	const timeout = time.Second
	cases := []struct {
		name    string
		setup   func(t *testing.T, f *fakeVM) *qmptest.Agent
		conf    string
		bound   time.Duration
		want    string
		trimmed bool
	}{
		{"dead: nobody listens", func(t *testing.T, f *fakeVM) *qmptest.Agent {
			l, err := net.Listen("unix", f.paths.QGASocket(370))
			if err != nil {
				t.Fatal(err)
			}
			l.(*net.UnixListener).SetUnlinkOnClose(false)
			l.Close()
			return nil
		}, "", timeout, "connection refused", false},
		{"silent: qemu-ga not running", func(t *testing.T, f *fakeVM) *qmptest.Agent {
			a := f.agent(t, 370)
			a.Silent = true
			return a
		}, "", timeout + 300*time.Millisecond, "did not answer within 1s", false},
		{"guest-get-fsinfo hangs", func(t *testing.T, f *fakeVM) *qmptest.Agent {
			a := f.agent(t, 370)
			a.Handle = qmptest.AgentReplies(map[string]string{"guest-fstrim": `{"paths": []}`})
			return a
		}, "", timeout + 300*time.Millisecond, "did not finish guest-get-fsinfo within 1s", false},
		{"guest-fstrim outlasts --trim-timeout", func(t *testing.T, f *fakeVM) *qmptest.Agent {
			a := f.agent(t, 370)
			a.Handle = qmptest.AgentReplies(map[string]string{"guest-get-fsinfo": `[]`})
			return a
		}, "", time.Second + 300*time.Millisecond, "did not finish guest-fstrim", true},
		// Issue 21 #1: the guest writes these replies; 24 MB of "[" made
		// the validator overflow Go's stack (a fatal error, 1.09 GB).
		{"fsinfo: 24 MB of [", func(t *testing.T, f *fakeVM) *qmptest.Agent {
			a := f.agent(t, 370)
			a.Handle = qmptest.AgentReplies(map[string]string{"guest-get-fsinfo": strings.Repeat("[", 24_000_000)})
			return a
		}, "", timeout, "guest-get-fsinfo: reply refused: nested deeper than 1024 levels", false},
		{"fstrim: deep paths", func(t *testing.T, f *fakeVM) *qmptest.Agent {
			a := f.agent(t, 370)
			a.Handle = qmptest.AgentReplies(map[string]string{"guest-get-fsinfo": `[]`,
				"guest-fstrim": `{"paths": [{"path": "/", "trimmed": ` + strings.Repeat(`{"a": `, 1<<20) + `}]}`})
			return a
		}, "", time.Second, "guest-fstrim: reply refused: nested deeper than 1024 levels", true},
		{"no socket", func(t *testing.T, f *fakeVM) *qmptest.Agent { return nil }, "", 100 * time.Millisecond, "no guest agent socket at", false},
		{"agent: 0", func(t *testing.T, f *fakeVM) *qmptest.Agent { return f.agent(t, 370) }, "agent: 0\n", 100 * time.Millisecond, "has no guest agent configured", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeVM(t, "vm370", 370)
			if c.conf != "" {
				b, _ := os.ReadFile(f.paths.VMConfig(370))
				_ = os.WriteFile(f.paths.VMConfig(370), []byte(strings.Replace(string(b), "agent: 1\n", c.conf, 1)), 0o644)
			}
			a := c.setup(t, f)
			v := f.load(t, 370)
			o := trimOptions(f)
			o.TrimTimeout = time.Second
			trimStarted := false
			o.OnTrim = func(time.Duration) func() { trimStarted = true; return func() {} }
			start := time.Now()
			rep, err := Run(context.Background(), f.node(timeout), v, v.Disks, o)
			took := time.Since(start)
			if exitcode.Of(err) != exitcode.Unreachable || rep != nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("exit %d: %v (report %v), want 3 with %q", exitcode.Of(err), err, rep != nil, c.want)
			}
			if took > c.bound+600*time.Millisecond {
				t.Errorf("took %s, bound %s", took, c.bound)
			}
			if trimStarted != c.trimmed {
				t.Errorf("guest-fstrim sent: %v", trimStarted)
			}
			if a != nil && a.Silent && a.Requests() != 1 {
				t.Errorf("silent agent got %d requests: only the sync may be sent", a.Requests())
			}
			t.Logf("exit 3 after %s: %v", took.Round(time.Millisecond), err)
		})
	}
}

func TestValidate(t *testing.T) {
	ok := Options{Mode: Status, TrimTimeout: DefaultTrimTimeout}
	if err := Validate(ok); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{Mode: Wait, TrimTimeout: time.Minute}, "--wait 0s: give a positive duration, e.g. --wait 2m"},
		{Options{Mode: Wait, Wait: -time.Second, TrimTimeout: time.Minute}, "--wait -1s: give a positive duration"},
		{Options{Mode: Trim}, "--trim-timeout 0s: give a positive duration"},
		{Options{Mode: Status, TrimTimeout: -time.Second}, "--trim-timeout -1s"},
		{Options{Mode: "scrub", TrimTimeout: time.Minute}, `unknown mode "scrub"`},
		{Options{Mode: Wait, Wait: time.Second, TrimTimeout: time.Minute, Interval: -1}, "sampling interval"},
		{Options{Mode: Wait, Wait: MaxWait + 1, TrimTimeout: time.Minute}, "--wait 6h0m0.000000001s: at most 6h"},
		{Options{Mode: Trim, TrimTimeout: MaxTrimTimeout + 1}, "--trim-timeout 6h0m0.000000001s: at most 6h"},
	} {
		err := Validate(c.o)
		if exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%+v: exit %d %v, want 2 with %q", c.o, exitcode.Of(err), err, c.want)
		}
		// Run validates before it reads anything.
		if _, err := Run(context.Background(), node.Node{}, nil, nil, c.o); exitcode.Of(err) != exitcode.Usage {
			t.Errorf("Run %+v: %v", c.o, err)
		}
	}
	if err := Validate(Options{Mode: Wait, Wait: MaxWait, TrimTimeout: MaxTrimTimeout}); err != nil {
		t.Errorf("the largest durations: %v", err)
	}
	if err := Validate(Options{Mode: Wait, Wait: time.Millisecond, TrimTimeout: time.Nanosecond}); err != nil {
		t.Errorf("smallest positive durations: %v", err)
	}
}

// TestRunStopped: a stopped VM shows its allocation without counters
// (exit 3); --wait and --trim need it running.
func TestRunStopped(t *testing.T) {
	f := newFakeVM(t, "vm370", 370)
	_ = os.Remove(f.paths.PidFile(370))
	v, err := vm.Load(context.Background(), node.New(f.paths, 0), 370)
	if err != nil || v.Running {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), f.node(time.Second), v, v.Disks, Options{Mode: Status, TrimTimeout: time.Minute, NewMeter: func() Meter { return f.meter }})
	if exitcode.Of(err) != exitcode.Unreachable || rep == nil || rep.Running || len(rep.Notes) != 1 || !strings.Contains(err.Error(), "VM 370 is not running") {
		t.Fatalf("exit %d %v %+v", exitcode.Of(err), err, rep)
	}
	for _, d := range rep.Disks {
		if d.SinceStart != nil || d.Allocation.AllocatedBytes == nil || d.Discard.Running != nil {
			t.Errorf("%s: %+v", d.ID, d)
		}
	}
	if f.q.Conns() != 0 {
		t.Errorf("QMP asked %d times about a stopped VM", f.q.Conns())
	}
	for _, m := range []Mode{Wait, Trim} {
		rep, err := Run(context.Background(), f.node(time.Second), v, v.Disks, Options{Mode: m, Wait: time.Second, TrimTimeout: time.Minute})
		if exitcode.Of(err) != exitcode.Unreachable || rep != nil || !strings.Contains(err.Error(), "needs the running QEMU") {
			t.Errorf("%s: %v", m, err)
		}
	}
}

// TestRunFaults: QEMU silent from the start, a tool that fails: exit 3
// before anything is trimmed, naming what failed.
func TestRunFaults(t *testing.T) {
	t.Run("QMP silent", func(t *testing.T) {
		f := newFakeVM(t, "vm370", 370)
		f.q.Pause()
		defer f.q.Resume()
		v := f.load(t, 370)
		start := time.Now()
		_, err := Run(context.Background(), f.node(300*time.Millisecond), v, v.Disks, Options{Mode: Status, TrimTimeout: time.Minute, NewMeter: func() Meter { return f.meter }})
		if exitcode.Of(err) != exitcode.Unreachable || !strings.Contains(err.Error(), "VM 370: QMP socket busy") || time.Since(start) > time.Second {
			t.Errorf("exit %d after %s: %v", exitcode.Of(err), time.Since(start), err)
		}
	})
	t.Run("counters fail", func(t *testing.T) {
		f := newFakeVM(t, "vm370", 370)
		for k := range f.r.phases["before"] {
			f.r.phases["before"][k] = qmptest.Fail("GenericError", "no stats")
		}
		v := f.load(t, 370)
		_, err := Run(context.Background(), f.node(time.Second), v, v.Disks, Options{Mode: Status, TrimTimeout: time.Minute, NewMeter: func() Meter { return f.meter }})
		if exitcode.Of(err) != exitcode.Unreachable || !strings.Contains(err.Error(), "VM 370: QMP: no stats") {
			t.Errorf("%v", err)
		}
	})
	t.Run("allocation tool fails", func(t *testing.T) {
		f := newFakeVM(t, "vm370", 370)
		f.meter.err = errors.New("lvs exited with status 5: not found")
		_, trims := trimAgent(t, f)
		v := f.load(t, 370)
		_, err := Run(context.Background(), f.node(time.Second), v, v.Disks, trimOptions(f))
		if exitcode.Of(err) != exitcode.Unreachable || !strings.Contains(err.Error(), "VM 370 sata1: cannot measure the allocation of local-lvm:vm-370-disk-3: lvs exited") || *trims != 0 {
			t.Errorf("%v (trims %d)", err, *trims)
		}
	})
}

// A drive line Proxmox refuses (here an EFI disk with discard=on, which
// qemu-server drops) leaves the other disks' report as it was and is named
// in a note.
func TestRunStatusRefusedLine(t *testing.T) {
	f := newFakeVM(t, "vm370", 370)
	f.r.set("after")
	f.meter.set("after")
	b, _ := os.ReadFile(f.paths.VMConfig(370))
	if err := os.WriteFile(f.paths.VMConfig(370), append(b, "efidisk0: local-lvm:vm-370-disk-9,efitype=4m,discard=on,size=4M\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	v := f.load(t, 370)
	sel, err := v.Select(nil)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), f.node(2*time.Second), v, sel, Options{Mode: Status, TrimTimeout: time.Minute, NewMeter: func() Meter { return f.meter }})
	if err != nil {
		t.Fatal(err)
	}
	byID(t, rep) // the same disks as without the line
	if len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "efidisk0: discard is not an option of EFI disks") ||
		!strings.HasSuffix(rep.Notes[0], "Proxmox refuses this line and starts the VM without the disk: not listed") {
		t.Errorf("notes %q", rep.Notes)
	}
}
