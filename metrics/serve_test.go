package metrics

import (
	"bytes"
	"context"
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

func TestWriteTextfile(t *testing.T) {
	dir := t.TempDir()
	p, err := WriteTextfile(dir, sample(1))
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
		if _, err := WriteTextfile(bad, sample(1)); exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "--textfile "+bad) {
			t.Errorf("%s: %v", bad, err)
		}
	}
	if os.Geteuid() != 0 {
		ro := t.TempDir()
		os.Chmod(ro, 0o555)
		if _, err := WriteTextfile(ro, sample(1)); exitcode.Of(err) != exitcode.Unreachable {
			t.Errorf("a directory that cannot be written: %v", err)
		}
	}
}

// The textfile is never seen half-written: a reader reading it in a loop
// while it is rewritten with growing counters always finds every family,
// whole.
func TestTextfileAtomic(t *testing.T) {
	dir := t.TempDir()
	if _, err := WriteTextfile(dir, sample(0)); err != nil {
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
			if _, err := WriteTextfile(dir, sample(i<<20)); err != nil {
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
	for h.cur == nil {
		time.Sleep(time.Millisecond)
	}
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

// Serve answers on the listener until ctx ends.
func TestServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, &handler{collect: (&gate{}).collect, deadline: time.Second}) }()
	resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Contains(b, []byte("pvediskcheck_collect_errors")) {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after ctx ended: %v", err)
	}
	ln2, _ := net.Listen("tcp", "127.0.0.1:0")
	ln2.Close()
	if err := Serve(context.Background(), ln2, nil); exitcode.Of(err) != exitcode.Unreachable {
		t.Errorf("closed listener: %v", err)
	}
}
