package flush

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// With Histogram the window's percentiles come from the recorded answers
// of latency/testdata (scsi1: 8 writes in flight under iops-write=20,
// ~390 ms each; no flush), the first with its histograms removed (the
// disk as found); the histogram is set in the first exchange and cleared
// after the window.
func TestMeasureHistogram(t *testing.T) {
	read := func(name string) string {
		b, err := os.ReadFile("../latency/testdata/qemu-7.2.22/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	a := read("query-blockstats-iops20-depth8-a.json")
	var entries []map[string]any
	json.Unmarshal([]byte(a), &entries)
	for _, e := range entries {
		for _, k := range []string{"rd_latency_histogram", "wr_latency_histogram", "flush_latency_histogram"} {
			delete(e["stats"].(map[string]any), k)
		}
	}
	bare, _ := json.Marshal(entries)
	replies := []string{string(bare), a, read("query-blockstats-iops20-depth8-b.json")}
	v, n, _, tree := fakeVM(t, conf)
	var mu sync.Mutex
	var sets []string
	served := 0
	q := qmptest.NewQEMU(t, func(cmd string, args gjson.Result) string {
		mu.Lock()
		defer mu.Unlock()
		switch cmd {
		case "query-blockstats":
			r := replies[min(served, len(replies)-1)]
			served++
			return qmptest.Return(r)
		case "block-latency-histogram-set":
			sets = append(sets, args.Raw)
			return qmptest.Return("{}")
		}
		return qmptest.NotFound(cmd)
	})
	serveInstead(t, tree, q)
	res, err := Measure(context.Background(), n, v, v.Disks, Options{Window: time.Second, Hz: 2, Histogram: true})
	if err != nil {
		t.Fatal(err)
	}
	p, ok := res.Percentiles["scsi1"]
	if !ok || p.WriteP50Ms == nil || *p.WriteP50Ms < 370 || *p.WriteP50Ms > 410 || p.FlushP50Ms != nil {
		t.Fatalf("percentiles %+v", res.Percentiles)
	}
	if len(res.Histograms) != 1 || res.Histograms[0].Owner != "set" {
		t.Errorf("notes %+v", res.Histograms)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sets) != 2 || !strings.Contains(sets[0], "boundaries-flush") || sets[1] != `{"id":"scsi1"}` {
		t.Errorf("sets %v, want one set and one clear", sets)
	}
}

// serveInstead points the VM's QMP socket at q.
func serveInstead(t *testing.T, tree *vmtest.Node, q *qmptest.QEMU) {
	t.Helper()
	os.Remove(tree.Paths.QMPSocket(100))
	tree.Serve(t, q)
}
