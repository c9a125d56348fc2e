//go:build record

package limit

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// TestRecordSeries records the query-blockstats series the Measure and Judge
// tests read (testdata/series-*.json): a disk of the test harness under
// mbps_wr=20 and iops_rd=500 with qemu-io load (1 MiB writes, 8 in flight;
// 4 KiB random reads, 32 in flight), sampled at 2 Hz for 10 s. With each
// sample it keeps how many requests the load generator had issued, so the
// true queue depth can be set against what Little's law says.
//
//	go test -tags record -count=1 -run TestRecordSeries ./limit/
func TestRecordSeries(t *testing.T) {
	for _, gen := range []string{"blockdev", "drive"} {
		for _, start := range []string{"cold", "warm", "stopped"} {
			t.Run(gen+"/"+start, func(t *testing.T) { recordSeries(t, gen, start) })
		}
	}
}

func recordSeries(t *testing.T, gen, start string) {
	ver, _ := fakenode.QEMUVersion(fakenode.QEMUBinary())
	n := fakenode.NewT(t)
	if err := n.CreateLab370(""); err != nil {
		t.Fatal(err)
	}
	vm := n.MustStart(t, 370, fakenode.ArgvOptions{Legacy: gen == "drive", Blockdev: gen == "blockdev"})
	sock := n.Paths.QMPSocket(370)
	if start == "cold" {
		recordNode(t, n, vm, gen)
	}
	ctx := context.Background()
	lim := qemuserver.Limits{"bps-write": 20 << 20, "iops-read": 500}
	setLimits := func() {
		if err := qmp.DoRetry(ctx, sock, 5*time.Second, 10*time.Second, func(s qmp.Session) error {
			return s.SetThrottleLimits("scsi1", gen == "blockdev", lim.Full())
		}); err != nil {
			t.Fatal(err)
		}
	}
	entry := func(s qmp.Session) (gjson.Result, error) {
		ret, err := s.Exec("query-blockstats", nil)
		if err != nil {
			return gjson.Result{}, err
		}
		for _, e := range ret.Array() {
			if qmp.QdevToDiskID(e.Get("qdev").String()) == "scsi1" || e.Get("device").String() == "drive-scsi1" {
				return e, nil
			}
		}
		return gjson.Result{}, fmt.Errorf("scsi1 not in query-blockstats")
	}
	f := fixture{
		Source: "limit/record_test.go TestRecordSeries (go test -tags integration -count=1 -run TestRecordSeries ./limit/ -record): " +
			"fakenode VM 370 (Lab 37 layout), scsi1 on VirtIO SCSI single with iothread, qemu-io load through HMP",
		QEMU: ver, Generation: gen, Date: time.Now().UTC().Format("2006-01-02"), Start: start,
		Limits:   map[string]int64(lim),
		Load:     "fakenode.StartLoad: writes 1 MiB sequential, 8 in flight; reads 4 KiB random, 32 in flight, refilled every 5 ms",
		WindowNs: int64(10 * time.Second),
	}
	if err := qmp.Do(ctx, sock, 5*time.Second, func(s qmp.Session) error {
		e, err := entry(s)
		f.BaselineRdOps, f.BaselineWrOps = e.Get("stats.rd_operations").Int(), e.Get("stats.wr_operations").Int()
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if start == "cold" {
		setLimits()
	}
	load := vm.StartLoad(
		fakenode.LoadSpec{Disk: "scsi1", Write: true, Size: 1 << 20, Depth: 8},
		fakenode.LoadSpec{Disk: "scsi1", Size: 4096, Depth: 32, Random: true, Every: 5 * time.Millisecond})
	defer load.Stop()
	if start != "cold" {
		time.Sleep(3 * time.Second)
		setLimits()
	}
	t0 := time.Now()
	if start == "stopped" {
		time.AfterFunc(time.Second, func() {
			_ = syscall.Kill(vm.Pid, syscall.SIGSTOP)
			time.AfterFunc(3*time.Second, func() { _ = syscall.Kill(vm.Pid, syscall.SIGCONT) })
		})
	}
	for k := 0; k <= 20; k++ {
		// The sampler's schedule (sampler.Window.Run): a tick still
		// late from the previous one is skipped, a busy socket is waited
		// for up to one interval.
		if d := time.Until(t0.Add(time.Duration(k) * 500 * time.Millisecond)); d > 0 {
			time.Sleep(d)
		} else if k > 0 && k < 20 && -d > 250*time.Millisecond {
			continue
		}
		var s fixtureSample
		err := qmp.DoRetry(ctx, sock, 2*time.Second, 500*time.Millisecond, func(sess qmp.Session) error {
			a := time.Now()
			e, err := entry(sess)
			b := time.Now()
			s.TNs = a.Add(b.Sub(a) / 2).Sub(t0).Nanoseconds()
			s.Return = json.RawMessage("[" + e.Raw + "]")
			// While this client holds the socket the generator cannot
			// issue: its count is of the same moment as the counters.
			if q := load.Stats().Queues; len(q) == 2 {
				s.SubmittedWr, s.SubmittedRd = q[0], q[1]
			}
			return err
		})
		if err != nil && start == "stopped" {
			continue // busy, or no reply while QEMU is stopped: a missed tick
		}
		if err != nil {
			t.Fatal(err)
		}
		f.Samples = append(f.Samples, s)
	}
	if st := load.Stop(); st.Err != nil {
		t.Fatal(st.Err)
	}
	// A series is kept only when the load kept its queues over the steady
	// part (a machine busy with other QEMUs starves the generator, and
	// such a series says nothing about a limit or a queue).
	if rd, wr := f.trueDepth(5 * time.Second); rd < 20 || wr < 6.5 {
		t.Fatalf("the load kept %.1f reads and %.1f writes in flight, not 32 and 8: record again on a quieter machine", rd, wr)
	}
	if rd, wr := f.twoPointRates(Skip); math.Abs(rd/500-1) > 0.02 || math.Abs(wr/(20<<20)-1) > 0.02 {
		t.Fatalf("the load ran dry: %.1f reads/s and %.2f MiB/s written from 3 s on, not 500 and 20: record again on a quieter machine", rd, wr/(1<<20))
	}
	// The stopped series is there to show the backlog: the writes that
	// waited out the stop complete after the first sample of the steady
	// part. Whether they do depends on when the sample after the resume
	// gets the socket: record until one does.
	if start == "stopped" {
		if old := f.totalLatencyDepth(Skip); old < 8.8 {
			t.Fatalf("the writes' backlog drained before the first steady sample (%.1f, 8 in flight): record again", old)
		}
	}
	b, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join("testdata", fmt.Sprintf("series-%s-%s.json", gen, start))
	if err := os.WriteFile(p, append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d samples)", p, len(f.Samples))
}

// recordNode keeps what vm.Load reads of the running VM: its config, the
// node's storage.cfg and QEMU's command line (NUL-separated, as
// /proc/PID/cmdline), with the node's root written as @ROOT@.
func recordNode(t *testing.T, n *fakenode.Node, vm *fakenode.VM, gen string) {
	files := map[string]string{"370.conf": n.Paths.VMConfig(370), "storage.cfg": n.Paths.StorageCfg(),
		"cmdline-370-" + gen: filepath.Join("/proc", strconv.Itoa(vm.Pid), "cmdline")}
	for name, src := range files {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		b = bytes.ReplaceAll(b, []byte(n.Root), []byte("@ROOT@"))
		b = bytes.ReplaceAll(b, []byte(n.VG), []byte("pdcVG"))
		if err := os.WriteFile(filepath.Join("testdata", name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
