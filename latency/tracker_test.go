package latency

import (
	"context"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/latency/latencytest"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// fakeHist is a fake QEMU whose scsi1 histogram state follows the commands
// it gets: "none" answers query-blockstats with the recorded VM 370 answer
// without histograms (qmp/testdata), "ours" and "foreign" with the answers
// recorded here with pvediskcheck's and with someone else's boundaries.
type fakeHist struct {
	mu    sync.Mutex
	state string
	sets  []gjson.Result // block-latency-histogram-set arguments
	q     *qmptest.QEMU
}

func newFakeHist(t *testing.T, state string, refuse bool) *fakeHist {
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	answers := map[string]string{
		"none":    gjson.Get(read("../qmp/testdata/qemu-7.2.22/blockdev/query-blockstats.json"), "return").Raw,
		"ours":    read("testdata/qemu-7.2.22/query-blockstats-iops20-depth8-a.json"),
		"foreign": read("testdata/qemu-7.2.22/query-blockstats-foreign.json"),
	}
	f := &fakeHist{state: state}
	f.q = qmptest.NewQEMU(t, func(cmd string, args gjson.Result) string {
		f.mu.Lock()
		defer f.mu.Unlock()
		switch cmd {
		case "query-blockstats":
			return qmptest.Return(answers[f.state])
		case "block-latency-histogram-set":
			if refuse {
				return qmptest.NotFound(cmd)
			}
			f.sets = append(f.sets, args)
			if args.Get("boundaries-write").Exists() {
				f.state = "ours"
			} else if !args.Get("boundaries").Exists() {
				f.state = "none"
			}
			return qmptest.Return("{}")
		}
		return qmptest.NotFound(cmd)
	})
	return f
}

// ask is the Asker Release clears through: query-blockstats, then fn.
func (f *fakeHist) ask(ctx context.Context, fn func(map[string]qmp.BlockStats, Setter) error) error {
	return latencytest.Blockstats(ctx, f.q.Sock(), 2*time.Second, func(stats map[string]qmp.BlockStats, s qmp.Session) error {
		return fn(stats, latencytest.Setter{S: s})
	})
}

func (f *fakeHist) Sets() []gjson.Result {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]gjson.Result(nil), f.sets...)
}

// ensure runs one sample's exchange: query-blockstats, then Ensure.
func (f *fakeHist) ensure(t *testing.T, tr *Tracker, pid int, disks ...string) map[string]qmp.BlockStats {
	t.Helper()
	var stats map[string]qmp.BlockStats
	if err := latencytest.Blockstats(context.Background(), f.q.Sock(), 2*time.Second, func(st map[string]qmp.BlockStats, s qmp.Session) error {
		stats = st
		return tr.Ensure(latencytest.Setter{S: s}, 370, pid, f.ask, disks, stats)
	}); err != nil {
		t.Fatal(err)
	}
	return stats
}

func TestTrackerSetsOnceAndClears(t *testing.T) {
	f := newFakeHist(t, "none", false)
	tr := NewTracker()
	stats := f.ensure(t, tr, 1000, "scsi1", "scsi9")
	sets := f.Sets()
	if len(sets) != 1 || sets[0].Get("id").String() != "scsi1" {
		t.Fatalf("set commands %v, want one for scsi1 (scsi9 is not in query-blockstats)", sets)
	}
	for _, k := range []string{"boundaries-read", "boundaries-write", "boundaries-flush"} {
		var got []int64
		for _, v := range sets[0].Get(k).Array() {
			got = append(got, v.Int())
		}
		if !slices.Equal(got, Boundaries) {
			t.Errorf("%s sent %v", k, got)
		}
	}
	if sets[0].Get("boundaries").Exists() || sets[0].Get("boundaries-zap").Exists() {
		t.Errorf("set touches more than read, write and flush: %s", sets[0].Raw)
	}
	if b := stats["scsi1"]; !Ours(b.WrLatency) || slices.Max(b.WrLatency.Bins) != 0 {
		t.Errorf("the sample's entry does not start from zero bins: %+v", b.WrLatency)
	}
	if stats["scsi0"].WrLatency != nil {
		t.Error("a disk not watched got a histogram")
	}
	if n := tr.Notes(); len(n) != 1 || n[0] != (Note{VMID: 370, Disk: "scsi1", Owner: SetByUs, Boundaries: 142}) {
		t.Errorf("notes %+v", n)
	}
	// Later samples send nothing more.
	before := f.q.Commands()
	f.ensure(t, tr, 1000, "scsi1")
	if got := f.q.Commands() - before; got != 1 {
		t.Errorf("a later sample sent %d commands, want query-blockstats alone", got)
	}
	// The baseline is the zero bins: the cumulative histogram counts what
	// the recorded answer holds.
	cur := f.ensure(t, tr, 1000, "scsi1")["scsi1"]
	c, ok := tr.Cumulative(370, 1000, "scsi1", Write, &cur)
	var sum int64
	for _, n := range cur.WrLatency.Bins {
		sum += n
	}
	if !ok || c.Count != uint64(sum) || c.Count == 0 || len(c.Buckets) != 19 {
		t.Errorf("cumulative %+v %v, want %d requests in 19 buckets", c, ok, sum)
	}
	if err := tr.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	sets = f.Sets()
	if len(sets) != 2 || sets[1].Raw != `{"id":"scsi1"}` {
		t.Errorf("release sent %v, want the clearing set of scsi1", sets)
	}
	if n := tr.Notes(); len(n) != 0 {
		t.Errorf("notes after release %+v", n)
	}
}

func TestTrackerRestartedVMGetsItAgain(t *testing.T) {
	f := newFakeHist(t, "none", false)
	tr := NewTracker()
	f.ensure(t, tr, 1000, "scsi1")
	f.mu.Lock()
	f.state = "none" // the new process has no histogram
	f.mu.Unlock()
	f.ensure(t, tr, 1001, "scsi1")
	if n := len(f.Sets()); n != 2 {
		t.Errorf("%d sets, want one per process", n)
	}
	if _, ok := tr.Cumulative(370, 1000, "scsi1", Write, &qmp.BlockStats{WrLatency: zero()}); ok {
		t.Error("a cumulative histogram for the old process")
	}
}

func TestTrackerKeepsExisting(t *testing.T) {
	for _, state := range []string{"foreign", "ours"} {
		f := newFakeHist(t, state, false)
		tr := NewTracker()
		f.ensure(t, tr, 1000, "scsi1")
		if sets := f.Sets(); len(sets) != 0 {
			t.Errorf("%s: replaced a histogram found set: %v", state, sets)
		}
		want := 3
		if state == "ours" {
			want = 142 // an earlier run's, killed: still not this run's to clear
		}
		if n := tr.Notes(); len(n) != 1 || n[0].Owner != Existing || n[0].Boundaries != want {
			t.Errorf("%s: notes %+v", state, n)
		}
		if err := tr.Release(context.Background()); err != nil {
			t.Fatal(err)
		}
		if sets := f.Sets(); len(sets) != 0 {
			t.Errorf("%s: release cleared a histogram it did not set: %v", state, sets)
		}
	}
}

// Someone replaces the histogram while the run watches: release leaves it.
func TestTrackerReleaseLeavesReplaced(t *testing.T) {
	f := newFakeHist(t, "none", false)
	tr := NewTracker()
	f.ensure(t, tr, 1000, "scsi1")
	f.mu.Lock()
	f.state = "foreign"
	f.mu.Unlock()
	cur := f.ensure(t, tr, 1000, "scsi1")["scsi1"]
	if _, ok := tr.Cumulative(370, 1000, "scsi1", Write, &cur); ok {
		t.Error("a cumulative histogram across other boundaries")
	}
	if err := tr.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sets := f.Sets(); len(sets) != 1 {
		t.Errorf("release sent %v", sets)
	}
}

func TestTrackerRefused(t *testing.T) {
	f := newFakeHist(t, "none", true)
	tr := NewTracker()
	stats := f.ensure(t, tr, 1000, "scsi1")
	n := tr.Notes()
	if len(n) != 1 || n[0].Owner != Refused || !strings.Contains(n[0].Error, "has not been found") {
		t.Errorf("notes %+v", n)
	}
	if stats["scsi1"].WrLatency != nil {
		t.Error("refused, and still zero bins")
	}
	before := f.q.Commands()
	f.ensure(t, tr, 1000, "scsi1")
	if got := f.q.Commands() - before; got != 1 {
		t.Errorf("asked again after a refusal: %d commands", got)
	}
}

// Issue 31: a block-latency-histogram-set whose reply a loaded QEMU
// gave after the exchange's deadline ("no reply ... within 500ms") took
// all the same: the next sample finds pvediskcheck's boundaries there and
// keeps the histogram as this run's, cleared on exit, instead of taking
// it for someone else's and leaving it set.
func TestTrackerSetWithoutReply(t *testing.T) {
	f := newFakeHist(t, "none", false)
	slow := f.q.Handler
	f.q.Handler = func(cmd string, args gjson.Result) string {
		r := slow(cmd, args)
		if cmd == "block-latency-histogram-set" && args.Get("boundaries-write").Exists() {
			time.Sleep(400 * time.Millisecond) // past the exchange's deadline: set, no reply in time
		}
		return r
	}
	tr := NewTracker()
	err := latencytest.Blockstats(context.Background(), f.q.Sock(), 200*time.Millisecond, func(stats map[string]qmp.BlockStats, s qmp.Session) error {
		return tr.Ensure(latencytest.Setter{S: s}, 370, 1000, f.ask, []string{"scsi1"}, stats)
	})
	if err == nil || !strings.Contains(err.Error(), "no reply to block-latency-histogram-set") {
		t.Fatalf("the set's exchange: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // the fake finishes the set
	// Before the next sample decides it, it is this run's: no leftover.
	if got := tr.Leftovers(370, 1000, "/var/run/qemu-server/370.qmp", f.stats(t)); len(got) != 0 {
		t.Errorf("a set whose reply was lost, taken for a leftover: %+v", got)
	}
	f.ensure(t, tr, 1000, "scsi1")
	if n := tr.Notes(); len(n) != 1 || n[0].Owner != SetByUs {
		t.Errorf("notes %+v, want scsi1 set by us", n)
	}
	if sets := f.Sets(); len(sets) != 1 {
		t.Errorf("set again: %v", sets)
	}
	if err := tr.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sets := f.Sets(); len(sets) != 2 || sets[1].Get("boundaries-write").Exists() {
		t.Errorf("not cleared on release: %v", sets)
	}
}

// stats answers query-blockstats of the fake, by disk.
func (f *fakeHist) stats(t *testing.T) map[string]qmp.BlockStats {
	t.Helper()
	var out map[string]qmp.BlockStats
	if err := latencytest.Blockstats(context.Background(), f.q.Sock(), 2*time.Second, func(stats map[string]qmp.BlockStats, _ qmp.Session) error {
		out = stats
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// A histogram with pvediskcheck's boundaries that the run did not set is
// a leftover, whichever run it is (none set, another VM's process, the
// same VM restarted): said with the command that clears it. One the run
// set, one with other boundaries and none at all are not; the run that
// finds one with --histogram notes it as existing and left over.
func TestLeftovers(t *testing.T) {
	const sock = "/var/run/qemu-server/370.qmp"
	want := []Leftover{{VMID: 370, Disk: "scsi1", Clear: `(echo '{"execute":"qmp_capabilities"}'; echo '{"execute":"block-latency-histogram-set","arguments":{"id":"scsi1"}}'; sleep 1) | socat - UNIX-CONNECT:/var/run/qemu-server/370.qmp`}}
	ours := newFakeHist(t, "ours", false)
	var none *Tracker
	if got := none.Leftovers(370, 1000, sock, ours.stats(t)); !slices.Equal(got, want) {
		t.Errorf("no tracker:\n got %+v\nwant %+v", got, want)
	}
	// A run with --histogram finds it: existing, left over, not replaced.
	tr := NewTracker()
	stats := ours.ensure(t, tr, 1000, "scsi1")
	if n := tr.Notes(); len(n) != 1 || n[0].Owner != Existing || !n[0].Leftover || n[0].Boundaries != len(Boundaries) || len(ours.Sets()) != 0 {
		t.Errorf("notes %+v, sets %v", n, ours.Sets())
	}
	if got := tr.Leftovers(370, 1000, sock, stats); !slices.Equal(got, want) {
		t.Errorf("found by a run with --histogram: %+v", got)
	}
	// One this run set, on this process, is not; on a process since
	// restarted it would be another run's.
	f := newFakeHist(t, "none", false)
	mine := NewTracker()
	f.ensure(t, mine, 1000, "scsi1")
	now := f.stats(t)
	if got := mine.Leftovers(370, 1000, sock, now); len(got) != 0 {
		t.Errorf("the run's own histogram: %+v", got)
	}
	if got := mine.Leftovers(370, 1001, sock, now); !slices.Equal(got, want) {
		t.Errorf("on another process: %+v", got)
	}
	if got := mine.Leftovers(371, 1000, "/var/run/qemu-server/371.qmp", now); len(got) != 1 || got[0].VMID != 371 || !strings.HasSuffix(got[0].Clear, "UNIX-CONNECT:/var/run/qemu-server/371.qmp") {
		t.Errorf("another VM: %+v", got)
	}
	// Someone else's boundaries, and no histogram, are nobody's leftover.
	foreign := newFakeHist(t, "foreign", false)
	ftr := NewTracker()
	fstats := foreign.ensure(t, ftr, 1000, "scsi1")
	if n := ftr.Notes(); len(n) != 1 || n[0].Owner != Existing || n[0].Leftover {
		t.Errorf("foreign notes %+v", n)
	}
	if got := append(none.Leftovers(370, 1000, sock, fstats), none.Leftovers(370, 1000, sock, newFakeHist(t, "none", false).stats(t))...); len(got) != 0 {
		t.Errorf("foreign or none: %+v", got)
	}
	// Cleared (Release), it is gone from the next answer.
	if err := mine.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := none.Leftovers(370, 1000, sock, f.stats(t)); len(got) != 0 {
		t.Errorf("after Release: %+v", got)
	}
	if m := want[0].Message(); !strings.HasPrefix(m, "latency histogram of scsi1 set by pvediskcheck and not cleared: a run was killed before it could clear it (SIGKILL, the OOM killer), unless one with --histogram still runs on VM 370;") || !strings.HasSuffix(m, "clear it: "+want[0].Clear) {
		t.Errorf("message %s", m)
	}
}
