package metrics

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/outfile"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// Path is the one path Handler serves.
const Path = "/metrics"

// TextfileName is the file WriteTextfile writes: node_exporter's textfile
// collector reads every *.prom file of its directory.
const TextfileName = "pvediskcheck.prom"

// DefaultDeadline bounds one collection of --listen: under Prometheus'
// default scrape_timeout (10 s), so a scrape gets an answer, with what
// could not be read in time counted as errors.
const DefaultDeadline = 8 * time.Second

// scrapeShare is the share of the scrape timeout Prometheus announces
// (X-Prometheus-Scrape-Timeout-Seconds) a collection may take: the rest is
// for encoding the answer and sending it.
const scrapeShare = 0.9

// MinScrapeDeadline is the least a scrape's announced timeout gives a
// collection: a header of 0.001 would cut every VM off before its first
// QMP exchange. Prometheus' scrape_timeout is seconds in practice.
const MinScrapeDeadline = time.Second

// MaxDeadline bounds --deadline: Prometheus' scrape_timeout is at most its
// scrape_interval, minutes at the very most.
const MaxDeadline = 10 * time.Minute

// Registry registers s alone: the gatherer every output is encoded from.
func Registry(s *Snapshot) *prometheus.Registry {
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s)
	return reg
}

// WriteText writes s in Prometheus' text format, without timestamps.
func WriteText(w io.Writer, s *Snapshot) error {
	mfs, err := Registry(s).Gather()
	if err != nil {
		return err
	}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return err
		}
	}
	return nil
}

// CheckTextfile checks --textfile DIR before anything is collected: DIR
// is a directory (not a link) where a file can be made, and
// DIR/TextfileName, when there, is a textfile of ours (package outfile's
// rules).
func CheckTextfile(dir string) (*outfile.File, error) {
	if dir == "" {
		return nil, exitcode.Usagef(`--textfile "": give a directory, e.g. --textfile /var/lib/prometheus/node-exporter`)
	}
	if err := outfile.CheckDirectory("textfile", dir); err != nil {
		return nil, err
	}
	return outfile.Check("textfile", filepath.Join(dir, TextfileName), Ours, 0o644)
}

// Ours recognises a textfile this exporter wrote: its first line is the
// HELP of one of its metrics (every name begins with Namespace).
func Ours(head []byte) bool {
	return strings.HasPrefix(string(head), "# HELP "+Namespace+"_")
}

// WriteTextfile writes s to the checked textfile atomically: a new
// temporary file in its directory (its name does not end in .prom, so
// node_exporter skips it), mode 0644, renamed over the old one.
func WriteTextfile(f *outfile.File, s *Snapshot) error {
	return f.Write(func(w io.Writer) error { return WriteText(w, s) })
}

// Handler serves Path only, for GET and HEAD: each scrape collects anew
// within deadline (less when the scrape's own timeout is shorter, but not
// under MinScrapeDeadline), and scrapes that arrive while a collection runs
// share it: it then runs until the latest of their deadlines, so a scrape
// with a short timeout never cuts it short for the others; a scrape whose
// own deadline passes first gets a 503 of its own. Nothing it serves
// changes anything.
func Handler(n node.Node, o Options, deadline time.Duration) http.Handler {
	return &handler{collect: func(ctx context.Context) *Snapshot { return Collect(ctx, n, o) }, deadline: deadline}
}

type handler struct {
	collect  func(context.Context) *Snapshot
	deadline time.Duration
	mu       sync.Mutex
	cur      *flight // the collection running, nil when none
}

// flight is one collection that several scrapes wait for.
type flight struct {
	done chan struct{}
	snap *Snapshot
	ctx  *stretch
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path {
		http.Error(w, "pvediskcheck serves "+Path+" only", http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method "+r.Method+" not allowed", http.StatusMethodNotAllowed)
		return
	}
	d := h.deadlineFor(r)
	own := time.Now().Add(d)
	f := h.join(own)
	timer := time.NewTimer(d)
	defer timer.Stop()
	for waiting := true; waiting; {
		select {
		case <-f.done:
			waiting = false
		case <-r.Context().Done():
			return // the scraper left; the collection goes on for the others
		case <-timer.C:
			// The collection runs for a later scrape: this one's time is
			// up. (When it is this scrape's own deadline, the collection
			// is being cut now and answers at once: wait for it.)
			if dl, _ := f.ctx.Deadline(); dl.After(own) {
				http.Error(w, fmt.Sprintf("this scrape's deadline (%s) passed; the collection it joined runs %s more for a scrape with a later one", units.Duration(d), units.Duration(time.Until(dl))), http.StatusServiceUnavailable)
				return
			}
			timer.Reset(time.Until(own) + time.Second)
		}
	}
	promhttp.HandlerFor(Registry(f.snap), promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}).ServeHTTP(w, r)
}

// deadlineFor is how long a collection may take for r: the handler's
// deadline, or the scrape's own timeout's share when that is shorter, but
// at least MinScrapeDeadline (never more than the handler's).
func (h *handler) deadlineFor(r *http.Request) time.Duration {
	d := h.deadline
	if s, err := strconv.ParseFloat(r.Header.Get("X-Prometheus-Scrape-Timeout-Seconds"), 64); err == nil && s > 0 {
		if sd := time.Duration(s * scrapeShare * float64(time.Second)); sd < d {
			d = max(sd, min(MinScrapeDeadline, h.deadline))
		}
	}
	return d
}

// join returns the collection running, its deadline moved to dl when that
// is later, or starts one that ends at dl. Its context is nobody's
// request: a scraper that leaves does not cut the others short.
func (h *handler) join(dl time.Time) *flight {
	h.mu.Lock()
	defer h.mu.Unlock()
	if f := h.cur; f != nil {
		f.ctx.extend(dl)
		return f
	}
	f := &flight{done: make(chan struct{}), ctx: newStretch(dl)}
	h.cur = f
	go func() {
		f.snap = h.collect(f.ctx)
		// The collection's context ends before anyone is told it is over:
		// nothing it started outlives the answer.
		f.ctx.stop()
		h.mu.Lock()
		h.cur = nil
		h.mu.Unlock()
		close(f.done)
	}()
	return f
}

// stretch is a context whose deadline can move later, never earlier: the
// shared collection's, which runs until the latest deadline of the scrapes
// waiting for it. A context made from it follows it; what reads its
// deadline once (a QMP exchange sizing its timeout) keeps what it read.
type stretch struct {
	done  chan struct{}
	mu    sync.Mutex
	dl    time.Time
	err   error
	timer *time.Timer
}

func newStretch(dl time.Time) *stretch {
	s := &stretch{done: make(chan struct{}), dl: dl}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timer = time.AfterFunc(time.Until(dl), s.fire)
	return s
}

func (s *stretch) Deadline() (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dl, true
}

func (s *stretch) Done() <-chan struct{} { return s.done }

func (s *stretch) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

func (s *stretch) Value(any) any { return nil }

// extend moves the deadline to dl when that is later and it has not passed.
func (s *stretch) extend(dl time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err == nil && dl.After(s.dl) {
		s.dl = dl
		s.timer.Reset(time.Until(dl))
	}
}

// fire ends the context at its deadline (or waits on, when it moved).
func (s *stretch) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if left := time.Until(s.dl); left > 0 {
		s.timer.Reset(left)
		return
	}
	s.end(context.DeadlineExceeded)
}

// stop ends the context once the collection is over.
func (s *stretch) stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timer.Stop()
	s.end(context.Canceled)
}

func (s *stretch) end(err error) {
	if s.err == nil {
		s.err = err
		close(s.done)
	}
}

// Connection bounds of the --listen server.
const (
	// ReadHeaderTimeout: a request's headers arrive within this, or the
	// connection is closed (slowloris).
	ReadHeaderTimeout = 10 * time.Second
	// IdleTimeout closes a keep-alive connection with no request for this
	// long: 2,000 idle connections held 35 MB. Longer than Prometheus'
	// default scrape_interval (1 min), so its connection stays open
	// between scrapes.
	IdleTimeout = 90 * time.Second
	// SendTimeout is what an answer may take to be sent after the longest
	// collection (WriteTimeout is deadline + SendTimeout).
	SendTimeout = 30 * time.Second
	// MaxHeaderBytes bounds a request's headers (Prometheus sends about
	// 300 bytes; a bearer token a few KiB).
	MaxHeaderBytes = 16 << 10
)

// Timeouts are the server's connection bounds.
type Timeouts struct {
	ReadHeader, Write, Idle time.Duration
}

// ServerTimeouts are the bounds for collections of at most deadline.
func ServerTimeouts(deadline time.Duration) Timeouts {
	return Timeouts{ReadHeader: ReadHeaderTimeout, Write: deadline + SendTimeout, Idle: IdleTimeout}
}

// Serve serves h on ln until ctx ends, then stops, letting scrapes in
// flight finish for up to a second.
func Serve(ctx context.Context, ln net.Listener, h http.Handler, t Timeouts) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: t.ReadHeader, WriteTimeout: t.Write, IdleTimeout: t.Idle, MaxHeaderBytes: MaxHeaderBytes}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return exitcode.Wrap(exitcode.Unreachable, "--listen", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	return nil
}

// Listen opens addr (host:port) for --listen. An empty address or one
// without a port is bad input (exit 2), as is one it cannot listen on. The
// note, when not empty, is a warning for the admin: addr listens on every
// interface of the node (no host, 0.0.0.0 or ::), and how to serve one.
func Listen(addr string) (ln net.Listener, note string, err error) {
	host, port, err := net.SplitHostPort(addr)
	switch {
	case addr == "":
		return nil, "", exitcode.Usagef(`--listen "": give host:port, e.g. --listen 127.0.0.1:9732`)
	case err != nil:
		return nil, "", exitcode.Usagef("--listen %s: %v (give host:port, e.g. 127.0.0.1:9732)", units.Clip(addr, 80), err)
	case port == "":
		return nil, "", exitcode.Usagef("--listen %s: no port (give host:port, e.g. 127.0.0.1:9732)", units.Clip(addr, 80))
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		note = fmt.Sprintf("--listen %s listens on every interface of this node (every address it has); for this node only: --listen 127.0.0.1:%s", addr, port)
	}
	if ln, err = net.Listen("tcp", addr); err != nil {
		return nil, "", exitcode.Usagef("--listen %s: %v", units.Clip(addr, 80), err)
	}
	return ln, note, nil
}

// Validate checks the node and the options before anything is collected:
// a tree that is not a Proxmox VE node is bad input (exit 2), as is a
// negative parallelism.
func Validate(p node.Paths, o Options) error {
	if o.Parallel < 0 {
		return exitcode.Usagef("--parallel %d: give a positive number", o.Parallel)
	}
	if o.Parallel > MaxParallel {
		return exitcode.Usagef("--parallel %d: at most %d", o.Parallel, MaxParallel)
	}
	return p.CheckNode()
}
