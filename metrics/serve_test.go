package metrics

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
)

// sample is a small snapshot of every kind of series.
func sample(wrBytes int64) *Snapshot {
	alloc, data, meta := int64(1<<30), 50.0, 12.5
	return &Snapshot{Duration: 1500 * time.Millisecond, Errors: map[Source]int{SourceQMP: 2},
		VMs: []VM{{VMID: 100, Running: true, Live: true,
			Disks: []Disk{{ID: "scsi0", Controller: "virtio-scsi-single", Storage: "local-lvm", CacheConfigured: "none", CacheEffective: "none", AIO: "io_uring", IOThread: "iothread-virtioscsi0", Discard: "unmap",
				Stats: &qmp.BlockStats{WrBytes: wrBytes, WrTotalTimeNs: 2_500_000_000}, Protocol: &qmp.BlockStats{DiscardBytesOK: 4096, HasDriverSpecific: true},
				Limits: qemuserver.Limits{"bps-write": 20 << 20}, ConfigLimits: qemuserver.Limits{"bps-write": 20 << 20}}},
			CPU: &CPU{MainLoop: 1.5, VCPUs: 3, IOThreads: map[string]float64{"iothread-virtioscsi0": 0.25}}}},
		Pools: []thinpool.Pool{{Storage: "local-lvm", Type: thinpool.TypeLVMThin, Pool: "pve/data", SizeBytes: 2 << 30, AllocatedBytes: &alloc,
			DataPercent: &data, MetadataPercent: &meta, MetadataSizeBytes: 4 << 20, VirtualSumBytes: 3 << 30, SnapshotVirtualBytes: 1 << 30, OvercommitRatio: 1.5}}}
}

// parse reads an exposition as Prometheus does; an error for anything it
// would refuse.
func parse(t *testing.T, text string) map[string]int {
	t.Helper()
	p := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("%v\n%s", err, text)
	}
	out := map[string]int{}
	for n, mf := range mfs {
		out[n] = len(mf.GetMetric())
	}
	return out
}

// textfile checks dir and writes s there, as metrics --textfile does.
func textfile(dir string, s *Snapshot) (string, error) {
	f, err := CheckTextfile(dir)
	if err != nil {
		return "", err
	}
	return f.Path(), WriteTextfile(f, s)
}

func TestWriteTextfile(t *testing.T) {
	dir := t.TempDir()
	p, err := textfile(dir, sample(1))
	if err != nil || p != filepath.Join(dir, "pvediskcheck.prom") {
		t.Fatal(p, err)
	}
	st, _ := os.Stat(p)
	b, _ := os.ReadFile(p)
	if st.Mode().Perm() != 0o644 || !strings.Contains(string(b), `pvediskcheck_disk_write_bytes_total{disk="scsi0",vmid="100"} 1`+"\n") {
		t.Errorf("mode %v\n%s", st.Mode(), b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("left behind: %v", ents)
	}
	file := filepath.Join(dir, "x")
	os.WriteFile(file, nil, 0o644)
	for _, bad := range []string{filepath.Join(dir, "missing"), file} {
		if _, err := textfile(bad, sample(1)); exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "--textfile "+bad) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	// A directory that cannot be written is found before anything is
	// collected (issue 31): bad input, exit 2. /proc refuses new files
	// to root too; a 0555 directory refuses them to any other user.
	unwritable := []string{"/proc"}
	if os.Geteuid() != 0 {
		ro := t.TempDir()
		os.Chmod(ro, 0o555)
		unwritable = append(unwritable, ro)
	}
	for _, ro := range unwritable {
		if _, err := CheckTextfile(ro); exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "cannot write in "+ro+": ") {
			t.Errorf("a directory that cannot be written: %v", err)
		}
	}
}

// The textfile is never seen half-written: a reader reading it in a loop
// while it is rewritten with growing counters always finds every family,
// whole.
func TestTextfileAtomic(t *testing.T) {
	dir := t.TempDir()
	if _, err := textfile(dir, sample(0)); err != nil {
		t.Fatal(err)
	}
	want := parse(t, exposition(t, sample(0)))
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	writes := 0
	go func() {
		defer wg.Done()
		for i := int64(1); !stop.Load(); i++ {
			if _, err := textfile(dir, sample(i<<20)); err != nil {
				t.Error(err)
				return
			}
			writes++
		}
	}()
	reads := 0
	for deadline := time.Now().Add(500 * time.Millisecond); time.Now().Before(deadline); reads++ {
		b, err := os.ReadFile(filepath.Join(dir, TextfileName))
		if err != nil {
			t.Fatal(err)
		}
		got := parse(t, string(b))
		for n, c := range want {
			if got[n] != c {
				t.Fatalf("read %d: %s has %d series, want %d:\n%s", reads, n, got[n], c, b)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	if writes < 10 || reads < 10 {
		t.Errorf("only %d writes, %d reads", writes, reads)
	}
	t.Logf("%d reads during %d rewrites", reads, writes)
}

// A handler over a collection the test controls: it counts collections and
// keeps each one's deadline.
type gate struct {
	mu        sync.Mutex
	runs      int
	deadlines []time.Duration
	release   chan struct{}
}

func (g *gate) collect(ctx context.Context) *Snapshot {
	d, _ := ctx.Deadline()
	g.mu.Lock()
	g.runs++
	g.deadlines = append(g.deadlines, time.Until(d))
	n := g.runs
	g.mu.Unlock()
	if g.release != nil {
		<-g.release
	}
	return sample(int64(n))
}

func get(t *testing.T, h http.Handler, method, path string, hdr map[string]string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestHandler(t *testing.T) {
	g := &gate{}
	h := &handler{collect: g.collect, deadline: 8 * time.Second}
	w := get(t, h, http.MethodGet, "/metrics", nil)
	if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/plain") {
		t.Fatalf("%d %v", w.Code, w.Header())
	}
	parse(t, w.Body.String())
	if !strings.Contains(w.Body.String(), `pvediskcheck_disk_write_bytes_total{disk="scsi0",vmid="100"} 1`) {
		t.Errorf("%s", w.Body)
	}
	// Each scrape collects anew.
	w = get(t, h, http.MethodHead, "/metrics", nil)
	if w.Code != 200 || g.runs != 2 {
		t.Errorf("HEAD: %d, %d runs", w.Code, g.runs)
	}
	for _, c := range []struct {
		method, path string
		code         int
	}{
		{http.MethodGet, "/", 404}, {http.MethodGet, "/metrics/x", 404}, {http.MethodGet, "/debug/pprof/", 404},
		{http.MethodPost, "/metrics", 405}, {http.MethodPut, "/metrics", 405}, {http.MethodDelete, "/metrics", 405},
	} {
		w := get(t, h, c.method, c.path, nil)
		if w.Code != c.code {
			t.Errorf("%s %s: %d, want %d", c.method, c.path, w.Code, c.code)
		}
		if c.code == 405 && w.Header().Get("Allow") != "GET, HEAD" {
			t.Errorf("Allow: %q", w.Header().Get("Allow"))
		}
	}
	if g.runs != 2 {
		t.Errorf("requests that are not scrapes collected: %d runs", g.runs)
	}
	// The deadline: the handler's, or 90 % of a shorter scrape timeout.
	for _, c := range []struct {
		header string
		want   time.Duration
	}{
		{"", 8 * time.Second}, {"5", 4500 * time.Millisecond}, {"10", 8 * time.Second}, {"bogus", 8 * time.Second}, {"-1", 8 * time.Second}, {"0", 8 * time.Second},
		// Not under the floor, however short the scrape's own timeout.
		{"0.001", time.Second}, {"1", time.Second}, {"1.2", 1080 * time.Millisecond},
	} {
		g.deadlines = nil
		get(t, h, http.MethodGet, "/metrics", map[string]string{"X-Prometheus-Scrape-Timeout-Seconds": c.header})
		if d := g.deadlines[0]; d > c.want || d < c.want-time.Second {
			t.Errorf("scrape timeout %q: deadline %s, want %s", c.header, d, c.want)
		}
	}
}

// Scrapes that come while a collection runs share it; the next scrape
// after it starts another. A scraper that leaves does not end it.
func TestHandlerSharesCollection(t *testing.T) {
	g := &gate{release: make(chan struct{})}
	h := &handler{collect: g.collect, deadline: time.Minute}
	gone, cancel := context.WithCancel(context.Background())
	left := make(chan struct{})
	go func() {
		r := httptest.NewRequest(http.MethodGet, "/metrics", nil).WithContext(gone)
		h.ServeHTTP(httptest.NewRecorder(), r)
		close(left)
	}()
	var wg sync.WaitGroup
	bodies := make([]string, 5)
	for i := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bodies[i] = get(t, h, http.MethodGet, "/metrics", nil).Body.String()
		}()
	}
	waitUntil(t, "a collection starts", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.cur != nil })
	time.Sleep(50 * time.Millisecond) // the scrapes join
	cancel()
	<-left
	close(g.release)
	wg.Wait()
	if g.runs != 1 {
		t.Errorf("%d collections for 6 concurrent scrapes", g.runs)
	}
	for i, b := range bodies {
		if b != bodies[0] || !strings.Contains(b, `pvediskcheck_disk_write_bytes_total{disk="scsi0",vmid="100"} 1`) {
			t.Errorf("scrape %d: %.200s", i, b)
		}
	}
	g.release = nil
	get(t, h, http.MethodGet, "/metrics", nil)
	if g.runs != 2 {
		t.Errorf("%d runs: a scrape after the shared collection did not collect", g.runs)
	}
}

// serving runs Serve with timeouts on a loopback port until the test ends
// (then Serve must return nil) and returns its address.
func serving(t *testing.T, to Timeouts) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, &handler{collect: (&gate{}).collect, deadline: time.Second}, to) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve after ctx ended: %v", err)
		}
	})
	return ln.Addr().String()
}

// Serve answers on the listener until ctx ends.
func TestServe(t *testing.T) {
	addr := serving(t, ServerTimeouts(time.Second))
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte("pvediskcheck_collect_errors")) {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	ln2.Close()
	if err := Serve(context.Background(), ln2, nil, ServerTimeouts(time.Second)); exitcode.Of(err) != exitcode.Unreachable {
		t.Errorf("closed listener: %v", err)
	}
}

// The floor is never above the handler's own deadline (--deadline 500ms).
func TestDeadlineFloor(t *testing.T) {
	h := &handler{deadline: 500 * time.Millisecond}
	for hdr, want := range map[string]time.Duration{"": 500 * time.Millisecond, "0.001": 500 * time.Millisecond, "0.3": 500 * time.Millisecond, "10": 500 * time.Millisecond} {
		r := httptest.NewRequest(http.MethodGet, Path, nil)
		r.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", hdr)
		if d := h.deadlineFor(r); d != want {
			t.Errorf("header %q: %s, want %s", hdr, d, want)
		}
	}
	h.deadline = 8 * time.Second
	r := httptest.NewRequest(http.MethodGet, Path, nil)
	r.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", "0.001")
	if d := h.deadlineFor(r); d != MinScrapeDeadline || MinScrapeDeadline != time.Second {
		t.Errorf("0.001 under --deadline 8s: %s", d)
	}
}

// held is a collection that runs until released or until its context ends,
// whichever comes first; it keeps its context.
type held struct {
	release chan struct{}
	ctx     chan context.Context
	runs    atomic.Int32
}

func newHeld() *held { return &held{release: make(chan struct{}), ctx: make(chan context.Context, 10)} }

func (g *held) collect(ctx context.Context) *Snapshot {
	n := g.runs.Add(1)
	g.ctx <- ctx
	select {
	case <-g.release:
	case <-ctx.Done():
	}
	return sample(int64(n))
}

type answer struct {
	code int
	body string
	at   time.Time
}

func scrape(h http.Handler, timeout string) <-chan answer {
	out := make(chan answer, 1)
	go func() {
		r := httptest.NewRequest(http.MethodGet, Path, nil)
		if timeout != "" {
			r.Header.Set("X-Prometheus-Scrape-Timeout-Seconds", timeout)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		out <- answer{w.Code, w.Body.String(), time.Now()}
	}()
	return out
}

// waitUntil polls cond (the test's own bound: 10 s).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

// A scrape announcing a tiny timeout (0.001 s) and one without, at the
// same time, in either order: the shared collection runs until the later
// deadline (the default 8 s), the short scrape gets its own 503 when its
// floored deadline (1 s) passes, and the other gets the whole collection.
func TestHandlerShortScrapeDoesNotCutOthers(t *testing.T) {
	const series = `pvediskcheck_disk_write_bytes_total{disk="scsi0",vmid="100"} 1`
	for _, shortFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "short first", false: "short joins"}[shortFirst], func(t *testing.T) {
			g := newHeld()
			h := &handler{collect: g.collect, deadline: 8 * time.Second}
			start := time.Now()
			var short, long <-chan answer
			if shortFirst {
				short = scrape(h, "0.001")
			} else {
				long = scrape(h, "")
			}
			ctx := <-g.ctx
			if shortFirst {
				if dl, _ := ctx.Deadline(); dl.Before(start.Add(MinScrapeDeadline)) || dl.After(start.Add(MinScrapeDeadline+time.Second)) {
					t.Fatalf("the short scrape's collection ends %s after the start, want its floor %s", dl.Sub(start), MinScrapeDeadline)
				}
				long = scrape(h, "")
			} else {
				short = scrape(h, "0.001")
			}
			// The longer scrape has joined once the deadline moved (or, the
			// long one first, both wait).
			waitUntil(t, "the default scrape joins", func() bool { dl, _ := ctx.Deadline(); return dl.After(start.Add(7 * time.Second)) })
			var a answer
			select {
			case a = <-short:
			case <-time.After(10 * time.Second):
				t.Fatal("the short scrape waits for the whole collection")
			}
			if a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, "this scrape's deadline (1s) passed; the collection it joined runs") || a.at.Sub(start) < MinScrapeDeadline {
				t.Errorf("short scrape: %d after %s: %q", a.code, a.at.Sub(start), a.body)
			}
			if ctx.Err() != nil {
				t.Fatalf("the short scrape cut the collection: %v", ctx.Err())
			}
			select {
			case b := <-long:
				t.Fatalf("the default scrape answered before the collection ended: %d %q", b.code, b.body)
			default:
			}
			close(g.release)
			b := <-long
			if b.code != 200 || !strings.Contains(b.body, series) {
				t.Errorf("default scrape: %d %.200q", b.code, b.body)
			}
			if dl, _ := ctx.Deadline(); dl.Before(start.Add(7*time.Second)) || dl.After(time.Now().Add(8*time.Second)) {
				t.Errorf("collection deadline %s from the start, want the default scrape's 8s", dl.Sub(start))
			}
			if n := g.runs.Load(); n != 1 {
				t.Errorf("%d collections for 2 concurrent scrapes", n)
			}
			if !errors.Is(ctx.Err(), context.Canceled) {
				t.Errorf("after the collection: %v", ctx.Err())
			}
		})
	}
}

// A short scrape alone is cut at its floored deadline, and gets what was
// collected by then (the errors counted), not a 503.
func TestHandlerShortScrapeAlone(t *testing.T) {
	g := newHeld()
	h := &handler{collect: g.collect, deadline: 8 * time.Second}
	start := time.Now()
	a := scrape(h, "0.001")
	ctx := <-g.ctx
	got := <-a
	if got.code != 200 || !strings.Contains(got.body, "pvediskcheck_collect_errors") || !errors.Is(ctx.Err(), context.DeadlineExceeded) || got.at.Sub(start) < MinScrapeDeadline {
		t.Errorf("%d after %s, collection %v: %.200q", got.code, got.at.Sub(start), ctx.Err(), got.body)
	}
}

// The shared collection's context: its deadline only moves later, it ends
// with DeadlineExceeded at the last one (a context made from it too), and
// with Canceled once stopped.
func TestStretch(t *testing.T) {
	start := time.Now()
	s := newStretch(start.Add(100 * time.Millisecond))
	child, cancel := context.WithTimeout(s, time.Hour)
	defer cancel()
	s.extend(start.Add(50 * time.Millisecond)) // earlier: ignored
	s.extend(start.Add(400 * time.Millisecond))
	if dl, ok := s.Deadline(); !ok || !dl.Equal(start.Add(400*time.Millisecond)) {
		t.Errorf("deadline %s", dl.Sub(start))
	}
	if cdl, _ := child.Deadline(); !cdl.Equal(start.Add(400 * time.Millisecond)) {
		t.Errorf("a context made from it follows: %s", cdl.Sub(start))
	}
	<-s.Done()
	if el := time.Since(start); el < 400*time.Millisecond || !errors.Is(s.Err(), context.DeadlineExceeded) {
		t.Errorf("ended after %s with %v", el, s.Err())
	}
	<-child.Done()
	if !errors.Is(child.Err(), context.DeadlineExceeded) {
		t.Errorf("child: %v", child.Err())
	}
	s.extend(time.Now().Add(time.Hour)) // after the end: nothing
	s.stop()
	if !errors.Is(s.Err(), context.DeadlineExceeded) {
		t.Errorf("stopped after its deadline: %v", s.Err())
	}
	s2 := newStretch(time.Now().Add(time.Hour))
	s2.stop()
	if !errors.Is(s2.Err(), context.Canceled) || s2.Value("x") != nil {
		t.Errorf("stopped: %v", s2.Err())
	}
}

// A keep-alive client that goes quiet is disconnected after the idle
// timeout; while within it, its connection serves the next scrape.
func TestServeClosesIdleConnections(t *testing.T) {
	const idle = 300 * time.Millisecond
	addr := serving(t, Timeouts{ReadHeader: 10 * time.Second, Write: time.Minute, Idle: idle})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rd := bufio.NewReader(c)
	get := func() {
		t.Helper()
		fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(rd, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Close || !bytes.Contains(b, []byte("pvediskcheck_collect_errors")) {
			t.Fatalf("%d close=%v %.100s", resp.StatusCode, resp.Close, b)
		}
	}
	get()
	// The server's idle clock starts once it has written the answer, which
	// may be before this side has read it: time from the request's send.
	quiet := time.Now()
	get() // the same connection, kept alive
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := rd.Read(make([]byte, 1))
	if n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("an idle connection: read %d, %v (want the server to close it)", n, err)
	}
	if el := time.Since(quiet); el < idle {
		t.Errorf("closed after %s, before the idle timeout %s", el, idle)
	}
}

// A request whose headers pass MaxHeaderBytes is refused (431), not read.
func TestServeMaxHeaderBytes(t *testing.T) {
	addr := serving(t, ServerTimeouts(time.Second))
	for size, want := range map[int]int{4 << 10: 200, 64 << 10: http.StatusRequestHeaderFieldsTooLarge} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+Path, nil)
		req.Header.Set("Authorization", "Bearer "+strings.Repeat("x", size))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("%d bytes of headers: %d, want %d", size, resp.StatusCode, want)
		}
	}
}

// The bounds --listen runs with: the idle timeout set (keep-alive
// connections do not pile up), longer than Prometheus' default 1 min scrape
// interval; an answer may be written for the whole collection and then some.
func TestServerTimeouts(t *testing.T) {
	for _, d := range []time.Duration{8 * time.Second, 2 * time.Minute} {
		to := ServerTimeouts(d)
		if to.Idle != 90*time.Second || to.ReadHeader != 10*time.Second || to.Write != d+30*time.Second {
			t.Errorf("deadline %s: %+v", d, to)
		}
	}
}

// --listen: host:port; an empty address or none of a port is exit 2, and
// every interface is said so.
func TestListen(t *testing.T) {
	for _, c := range []struct {
		addr, err string
	}{
		{"", `--listen "": give host:port, e.g. --listen 127.0.0.1:9732`},
		{"127.0.0.1", `--listen "127.0.0.1": address 127.0.0.1: missing port in address`},
		{"127.0.0.1:", `--listen "127.0.0.1:": no port`},
		{"nohost:x", `--listen "nohost:x": `},
	} {
		ln, note, err := Listen(c.addr)
		if ln != nil || note != "" || exitcode.Of(err) != exitcode.Usage || !strings.HasPrefix(err.Error(), c.err) {
			t.Errorf("%q: %v %q %v", c.addr, ln, note, err)
		}
	}
	for _, c := range []struct {
		addr string
		all  bool
	}{{"127.0.0.1:0", false}, {"localhost:0", false}, {":0", true}, {"0.0.0.0:0", true}, {"[::]:0", true}} {
		ln, note, err := Listen(c.addr)
		if err != nil {
			if c.addr == "[::]:0" && strings.Contains(err.Error(), "address family not supported") {
				continue // no IPv6 here
			}
			t.Fatalf("%s: %v", c.addr, err)
		}
		ln.Close()
		want := ""
		if c.all {
			want = "--listen " + c.addr + " listens on every interface of this node (every address it has); for this node only: --listen 127.0.0.1:0"
		}
		if note != want {
			t.Errorf("%s: note %q, want %q", c.addr, note, want)
		}
	}
}
