// Package latencytest gives other packages' tests the latency package's
// recorded QEMU answers with latency histograms, and a fake QEMU handler
// that serves them and records what was set.
package latencytest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// Setter sets latency histograms on a bare session (a test's QEMU without
// a VM to vm.Ask): vm.Change's SetHistogram, a latency.Setter.
type Setter struct{ S qmp.Session }

// SetHistogram sends qmp.HistogramCommand.
func (c Setter) SetHistogram(disk string, boundaries []int64) error {
	_, err := c.S.Exec(qmp.HistogramCommand(disk, boundaries))
	return err
}

// Blockstats runs fn in one exchange with the QEMU at sock, after
// query-blockstats, with its answer by disk id (a sample's exchange:
// what latency.Tracker.Ensure is called in).
func Blockstats(ctx context.Context, sock string, timeout time.Duration, fn func(stats map[string]qmp.BlockStats, s qmp.Session) error) error {
	return qmp.Do(ctx, sock, timeout, func(s qmp.Session) error {
		ret, err := s.Exec("query-blockstats", nil)
		if err != nil {
			return err
		}
		stats := map[string]qmp.BlockStats{}
		for _, b := range qmp.ParseBlockstats(ret) {
			stats[b.ID] = b
		}
		return fn(stats, s)
	})
}

// Recorded is QEMU 7.2.22's recorded query-blockstats answers ("return"
// values) with scsi1 under iops-write=20 and 8 writes in flight, about
// 390 ms each, no flush (latency/testdata/README.md): a and b read some
// seconds apart, and bare, a without its histograms (the disk as found,
// before pvediskcheck sets one).
func Recorded(t testing.TB) (bare, a, b string) {
	t.Helper()
	dir := filepath.Join(moduleRoot(t), "latency", "testdata", "qemu-7.2.22")
	read := func(name string) string {
		raw, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(raw)
	}
	a, b = read("query-blockstats-iops20-depth8-a.json"), read("query-blockstats-iops20-depth8-b.json")
	var entries []map[string]any
	if err := json.Unmarshal([]byte(a), &entries); err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		for _, k := range []string{"rd_latency_histogram", "wr_latency_histogram", "flush_latency_histogram"} {
			delete(e["stats"].(map[string]any), k)
		}
	}
	out, _ := json.Marshal(entries)
	return string(out), a, b
}

// moduleRoot is the directory of go.mod above the test's working
// directory (its package's).
func moduleRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			t.Fatal("latencytest: no go.mod above the working directory")
		}
		dir = up
	}
}

// QEMU answers query-blockstats with its replies in turn (the last one
// from then on), block-latency-histogram-set with success, recording its
// arguments, and every other command as not found.
type QEMU struct {
	mu      sync.Mutex
	replies []string
	served  int
	sets    []string
}

// NewQEMU serves replies (query-blockstats "return" values).
func NewQEMU(replies ...string) *QEMU { return &QEMU{replies: replies} }

// Handle is a qmptest.NewQEMU handler.
func (q *QEMU) Handle(cmd string, args gjson.Result) string {
	q.mu.Lock()
	defer q.mu.Unlock()
	switch cmd {
	case "query-blockstats":
		r := q.replies[min(q.served, len(q.replies)-1)]
		q.served++
		return qmptest.Return(r)
	case "block-latency-histogram-set":
		q.sets = append(q.sets, args.Raw)
		return qmptest.Return("{}")
	}
	return qmptest.NotFound(cmd)
}

// Sets are the arguments of each block-latency-histogram-set, in order.
func (q *QEMU) Sets() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]string(nil), q.sets...)
}
