package metrics

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
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

// CheckTextfileDir checks that dir is a directory: the textfile is written
// there (a temporary file, then renamed over TextfileName, so node_exporter
// never reads it half-written).
func CheckTextfileDir(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return exitcode.Usagef("--textfile %s: %v", dir, err)
	}
	if !st.IsDir() {
		return exitcode.Usagef("--textfile %s: not a directory", dir)
	}
	return nil
}

// WriteTextfile writes s to dir/TextfileName atomically: a temporary file
// in dir (its name does not end in .prom, so node_exporter skips it), mode
// 0644, renamed over the old one. It returns the file's path.
func WriteTextfile(dir string, s *Snapshot) (string, error) {
	if err := CheckTextfileDir(dir); err != nil {
		return "", err
	}
	path := filepath.Join(dir, TextfileName)
	if err := prometheus.WriteToTextfile(path, Registry(s)); err != nil {
		return "", exitcode.Wrap(exitcode.Unreachable, "--textfile", err)
	}
	return path, nil
}

// Handler serves Path only, for GET and HEAD: each scrape collects anew
// within deadline (less when the scrape's own timeout is shorter), and
// scrapes that arrive while a collection runs share it. Nothing it serves
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
	f := h.join(h.deadlineFor(r))
	select {
	case <-f.done:
	case <-r.Context().Done():
		return // the scraper left; the collection goes on for the others
	}
	promhttp.HandlerFor(Registry(f.snap), promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}).ServeHTTP(w, r)
}

// deadlineFor is the handler's deadline, or the scrape's own timeout's
// share when that is shorter.
func (h *handler) deadlineFor(r *http.Request) time.Duration {
	d := h.deadline
	if s, err := strconv.ParseFloat(r.Header.Get("X-Prometheus-Scrape-Timeout-Seconds"), 64); err == nil && s > 0 {
		if sd := time.Duration(s * scrapeShare * float64(time.Second)); sd < d {
			d = sd
		}
	}
	return d
}

// join returns the collection running, or starts one. Its context is
// nobody's request: a scraper that leaves does not cut the others short.
func (h *handler) join(deadline time.Duration) *flight {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.cur != nil {
		return h.cur
	}
	f := &flight{done: make(chan struct{})}
	h.cur = f
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		defer cancel()
		f.snap = h.collect(ctx)
		h.mu.Lock()
		h.cur = nil
		h.mu.Unlock()
		close(f.done)
	}()
	return f
}

// Serve serves h on ln until ctx ends, then stops, letting scrapes in
// flight finish for up to a second.
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: time.Minute}
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

// Validate checks the node and the options before anything is collected:
// a tree that is not a Proxmox VE node is bad input (exit 2), as is a
// negative parallelism.
func Validate(p node.Paths, o Options) error {
	if o.Parallel < 0 {
		return exitcode.Usagef("--parallel %d: give a positive number", o.Parallel)
	}
	return p.CheckNode()
}
