package flush

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/latency/latencytest"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// With Histogram the window's percentiles come from the recorded answers
// of latency/testdata (scsi1: 8 writes in flight under iops-write=20,
// ~390 ms each; no flush), the first with its histograms removed (the
// disk as found); the histogram is set in the first exchange and cleared
// after the window.
func TestMeasureHistogram(t *testing.T) {
	bare, a, b := latencytest.Recorded(t)
	v, n, _, tree := fakeVM(t, conf)
	fake := latencytest.NewQEMU(bare, a, b)
	q := qmptest.NewQEMU(t, fake.Handle)
	serveInstead(t, tree, q)
	res, err := Measure(context.Background(), n, disk.Of(v, v.Disks), Options{Window: time.Second, Hz: 2, Histogram: true})
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
	if sets := fake.Sets(); len(sets) != 2 || !strings.Contains(sets[0], "boundaries-flush") || sets[1] != `{"id":"scsi1"}` {
		t.Errorf("sets %v, want one set and one clear", sets)
	}
}

// serveInstead points the VM's QMP socket at q.
func serveInstead(t *testing.T, tree *vmtest.Node, q *qmptest.QEMU) {
	t.Helper()
	os.Remove(tree.Paths.QMPSocket(100))
	tree.Serve(t, q)
}

// A histogram of pvediskcheck's found on the disk and not set by this run
// (a run killed before it cleared it) is said with the command that clears
// it, with --histogram (used as found, not replaced, not cleared) and
// without; one this run set is not.
func TestMeasureHistogramLeft(t *testing.T) {
	bare, a, b := latencytest.Recorded(t)
	for _, c := range []struct {
		name    string
		hist    bool
		replies []string
		left    bool
	}{{"left, no --histogram", false, []string{a, a, b}, true}, {"left, --histogram", true, []string{a, a, b}, true}, {"set by this run", true, []string{bare, a, b}, false}, {"none", false, []string{bare}, false}} {
		v, n, _, tree := fakeVM(t, conf)
		fake := latencytest.NewQEMU(c.replies...)
		serveInstead(t, tree, qmptest.NewQEMU(t, fake.Handle))
		res, err := Measure(context.Background(), n, disk.Of(v, v.Disks), Options{Window: time.Second, Hz: 2, Histogram: c.hist})
		if err != nil {
			t.Fatal(err)
		}
		want := []latency.Leftover{{VMID: 100, Disk: "scsi1", Clear: latency.ClearCommand(tree.Paths.QMPSocket(100), "scsi1")}}
		if !c.left {
			want = nil
		}
		if !slices.Equal(res.HistogramsLeft, want) {
			t.Errorf("%s: left %+v, want %+v", c.name, res.HistogramsLeft, want)
		}
		if sets := fake.Sets(); c.left && len(sets) != 0 {
			t.Errorf("%s: sets %v on a histogram found", c.name, sets)
		}
	}
}
