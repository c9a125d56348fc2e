package metrics

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/latency/latencytest"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// The exported histogram of a disk whose histogram the tracker set: the
// recorded answer (latency/testdata: 8 writes in flight under
// iops-write=20) against the zero bins the set starts from. Cumulative
// buckets at every doubling from 50 µs, +Inf, a _count of the bins' sum
// and a _sum of wr_total_time_ns over the same requests; a flush
// histogram that counted nothing is exported at 0; none without the
// histograms.
func TestExportLatencyHistogram(t *testing.T) {
	raw, err := os.ReadFile("../latency/testdata/qemu-7.2.22/query-blockstats-iops20-depth8-b.json")
	if err != nil {
		t.Fatal(err)
	}
	var entries []map[string]any
	json.Unmarshal(raw, &entries)
	for _, e := range entries {
		for _, k := range []string{"rd_latency_histogram", "wr_latency_histogram", "flush_latency_histogram"} {
			delete(e["stats"].(map[string]any), k)
		}
	}
	bare, _ := json.Marshal(entries)
	q := qmptest.NewQEMU(t, qmptest.Replies(map[string]string{"query-blockstats": string(bare), "block-latency-histogram-set": "{}"}))
	tr := latency.NewTracker()
	var base qmp.BlockStats
	// The test never releases: Ensure gets no Asker.
	if err := latencytest.Blockstats(context.Background(), q.Sock(), 2*time.Second, func(stats map[string]qmp.BlockStats, s qmp.Session) error {
		err := tr.Ensure(latencytest.Setter{S: s}, 370, 4242, nil, []string{"scsi1"}, stats)
		base = stats["scsi1"]
		return err
	}); err != nil {
		t.Fatal(err)
	}
	cur := qmp.ParseBlockstats(gjson.ParseBytes(raw))[0]
	// The recorded counters are the same answer's: make the baseline's
	// earlier so _sum covers the bins' requests.
	tr.Forget(370)
	base.WrTotalTimeNs, base.RdTotalTimeNs = 0, 0
	stats := map[string]qmp.BlockStats{"scsi1": base}
	if err := qmp.Do(context.Background(), q.Sock(), 2*time.Second, func(s qmp.Session) error {
		return tr.Ensure(latencytest.Setter{S: s}, 370, 4242, nil, []string{"scsi1"}, stats)
	}); err != nil {
		t.Fatal(err)
	}
	d := Disk{ID: "scsi1", Latency: map[latency.Kind]latency.Bucketed{}}
	for _, k := range latency.Kinds {
		if h, ok := tr.Cumulative(370, 4242, "scsi1", k, &cur); ok {
			d.Latency[k] = h
		}
	}
	text := exposition(t, &Snapshot{VMs: []VM{{VMID: 370, Live: true, Disks: []Disk{d}}}})
	w := only(text, "pvediskcheck_disk_write_latency_seconds")
	lines := strings.Split(w, "\n")
	if len(lines) != 19+1+2 {
		t.Fatalf("write histogram has %d series:\n%s", len(lines), w)
	}
	var sum int64
	for _, n := range cur.WrLatency.Bins {
		sum += n
	}
	for _, want := range []string{
		`pvediskcheck_disk_write_latency_seconds_bucket{disk="scsi1",vmid="370",le="5e-05"} 0`,
		// the throttle's first burst: 7 writes faster than 0.2 s (3 of
		// them within 200 µs), then the queue's ~390 ms.
		`pvediskcheck_disk_write_latency_seconds_bucket{disk="scsi1",vmid="370",le="0.0002"} 3`,
		`pvediskcheck_disk_write_latency_seconds_bucket{disk="scsi1",vmid="370",le="0.2048"} 7`,
		`pvediskcheck_disk_write_latency_seconds_bucket{disk="scsi1",vmid="370",le="0.4096"} 241`,
		fmt.Sprintf(`pvediskcheck_disk_write_latency_seconds_bucket{disk="scsi1",vmid="370",le="0.8192"} %d`, sum),
		fmt.Sprintf(`pvediskcheck_disk_write_latency_seconds_bucket{disk="scsi1",vmid="370",le="+Inf"} %d`, sum),
		fmt.Sprintf(`pvediskcheck_disk_write_latency_seconds_count{disk="scsi1",vmid="370"} %d`, sum),
		fmt.Sprintf(`pvediskcheck_disk_write_latency_seconds_sum{disk="scsi1",vmid="370"} %g`, float64(cur.WrTotalTimeNs)/1e9),
	} {
		if !strings.Contains(w+"\n", want+"\n") {
			t.Errorf("missing %s in\n%s", want, w)
		}
	}
	if f := only(text, "pvediskcheck_disk_flush_latency_seconds_count"); f != `pvediskcheck_disk_flush_latency_seconds_count{disk="scsi1",vmid="370"} 0` {
		t.Errorf("flush: %s", f)
	}
	if got := only(exposition(t, sample(7)), "pvediskcheck_disk_write_latency"); got != "" {
		t.Errorf("histogram series without --histogram: %s", got)
	}
}
