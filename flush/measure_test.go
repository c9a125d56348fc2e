package flush

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// fakeVM lays out a node tree with VM 100 "running" (internal/vmtest) on
// the command line qemu-server generates for conf (fakenode.Argv), with a
// QMP socket that answers query-blockstats with counters that grow by
// 1 MiB per sample. No QEMU.
func fakeVM(t *testing.T, conf string) (*vm.VM, node.Node, *qmptest.QEMU, *vmtest.Node) {
	t.Helper()
	const storageCfg = "dir: local\n\tpath /var/lib/vz\n\nlvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n"
	cfg, err := qemuserver.ParseConfig(strings.NewReader(conf), "100.conf")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := qemuserver.ParseStorages(strings.NewReader(storageCfg), "storage.cfg")
	argv, err := fakenode.Argv("qemu-system-x86_64", cfg, st, fakenode.ArgvOptions{VMID: 100, RunDir: "/var/run/qemu-server"})
	if err != nil {
		t.Fatal(err)
	}
	tree := vmtest.New(t, 100, conf, storageCfg, argv)
	var calls atomic.Int64
	q := qmptest.NewQEMU(t, func(cmd string, _ gjson.Result) string {
		if cmd != "query-blockstats" {
			return qmptest.NotFound(cmd)
		}
		n := calls.Add(1)
		return qmptest.Return(fmt.Sprintf(`[{"device": "", "qdev": "/machine/peripheral/scsi1", "node-name": "drive-scsi1", "stats": {"wr_bytes": %d, "flush_operations": 0, "flush_total_time_ns": 0}}]`, n<<20))
	})
	tree.Serve(t, q)
	v := tree.Load(t)
	if !v.Running {
		t.Fatal("fake VM not running")
	}
	return v, node.New(tree.Paths, time.Second), q, tree
}

const conf = "scsihw: virtio-scsi-single\nscsi1: local-lvm:vm-100-disk-1,cache=writeback,size=1G\nide2: none,media=cdrom\n"

func TestMeasureWholeWindow(t *testing.T) {
	v, n, _, tree := fakeVM(t, conf+"scsi3: local:100/vm-100-disk-3.raw,cache=writeback,size=1M\n")
	tree.SetWriteBytes(t, 7<<20)
	// The volume file as the running QEMU sees it (/proc/PID/root/...):
	// cachestat reads its page cache.
	img := filepath.Join(tree.Root, "proc/4242/root/var/lib/vz/images/100/vm-100-disk-3.raw")
	if err := os.MkdirAll(filepath.Dir(img), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img, make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	// scsi1's LV, and its block device's counters in the node's sysfs.
	dev := filepath.Join(tree.Root, "proc/4242/root/dev/pve/vm-100-disk-1")
	os.MkdirAll(filepath.Dir(dev), 0o755)
	os.MkdirAll(filepath.Join(tree.Root, "sys/class/block/vm-100-disk-1"), 0o755)
	tree.Write(t, dev, "")
	tree.Write(t, filepath.Join(tree.Root, "sys/class/block/vm-100-disk-1/stat"), "10 0 80 5 20 0 2048 30 0 40 50 0 0 0 0 15 9\n")
	var seen int
	res, err := Measure(context.Background(), n, disk.Of(v, v.Disks), Options{Window: time.Second, Hz: 4, OnSample: func(tk sampler.Tick) {
		seen++
		if tk.Window != time.Second || tk.Sample.Stats["scsi1"].WrBytes == 0 || tk.N != seen {
			t.Errorf("sample %+v", tk)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Samples) != 5 || seen != 5 || len(res.Gaps) != 0 || res.SampledS != 1 || res.IntervalS != 0.25 || res.WindowS != 1 || res.Trigger {
		t.Errorf("%d samples (%d seen), gaps %+v, sampled %.1f s, interval %g", len(res.Samples), seen, res.Gaps, res.SampledS, res.IntervalS)
	}
	// The CD-ROM is not measured: a verdict per disk. The fake
	// /proc/4242/io says QEMU wrote nothing: scsi1's 4 MiB were zeroes.
	if len(res.Verdicts) != 2 || res.Verdicts[1].Disk != "scsi3" || res.Verdicts[0].Disk != "scsi1" || res.Verdicts[0].Verdict != ZeroData || res.Verdicts[0].WrittenBytes != 4<<20 || res.Verdicts[0].SampledS != 1 || strings.Contains(res.Verdicts[0].Reason, "stands on") {
		t.Errorf("verdicts %+v", res.Verdicts)
	}
	if res.Samples[1].DirtyBytes != 2<<20 || res.Samples[1].QEMUWriteBytes != 7<<20 || res.Ignored() {
		t.Errorf("dirty %d, ignored %v", res.Samples[1].DirtyBytes, res.Ignored())
	}
	// scsi1's device counters: /sys/class/block/<dev>/stat below the node's sysfs.
	if res.Samples[1].DeviceFlushIOs["scsi1"] != 15 || res.Samples[1].DeviceWriteSect["scsi1"] != 2048 || res.Verdicts[0].DeviceFlushes == nil || *res.Verdicts[0].DeviceFlushes != 0 {
		t.Errorf("device counters %v %v", res.Samples[1].DeviceFlushIOs, res.Samples[1].DeviceWriteSect)
	}
	// scsi3's file is read with cachestat.
	if pc, ok := res.Samples[1].Volumes["scsi3"]; !ok || len(res.Samples[1].Volumes) != 2 || pc.CachedBytes < 0 {
		t.Errorf("volume page cache %+v", res.Samples[1].Volumes)
	}
	// Defaults: 15 s at 4 Hz; only the window is cut short here.
	ctx, cancel := context.WithCancel(context.Background())
	res, err = Measure(ctx, n, disk.Of(v, v.Disks), Options{OnSample: func(tk sampler.Tick) {
		if tk.Window != DefaultWindow {
			t.Errorf("default window %s", tk.Window)
		}
		cancel()
	}})
	if err == nil || !strings.HasPrefix(err.Error(), "interrupted 0.0 s into the 15 s window") || exitcode.Of(err) != exitcode.Unreachable || res.IntervalS != 0.25 {
		t.Errorf("interrupted: %v", err)
	}
}

// TestMeasureQEMUKilled: the socket goes away after the 3rd sample (QEMU
// killed): exit 3 at once, the samples taken kept, the gap up to the end of
// the window said, and verdicts that say what they stand on.
func TestMeasureQEMUKilled(t *testing.T) {
	v, n, _, _ := fakeVM(t, conf)
	start := time.Now()
	var killed time.Time
	res, err := Measure(context.Background(), n, disk.Of(v, v.Disks), Options{Window: 5 * time.Second, Hz: 4, OnSample: func(tk sampler.Tick) {
		if tk.Sample.Stats["scsi1"].WrBytes == 3<<20 {
			killed = time.Now()
			os.Remove(v.QMPSocket())
		}
	}})
	if err == nil || exitcode.Of(err) != exitcode.Unreachable || !strings.Contains(err.Error(), "VM 100: QMP stopped answering 0.5 s into the 5 s window (3 sample(s) taken)") {
		t.Fatalf("error %v", err)
	}
	if time.Since(killed) > 500*time.Millisecond || time.Since(start) > 2*time.Second {
		t.Errorf("the error came %s after the kill", time.Since(killed))
	}
	if len(res.Samples) != 3 || len(res.Gaps) != 1 || res.Gaps[0].FromS != 0.5 || res.Gaps[0].ToS != 5 || res.Gaps[0].Missed != 18 || !strings.HasPrefix(res.Gaps[0].Why, "QMP stopped answering: ") || res.SampledS != 0.5 {
		t.Errorf("samples %d gaps %+v sampled %.1f", len(res.Samples), res.Gaps, res.SampledS)
	}
	if len(res.Verdicts) != 1 || !strings.HasSuffix(res.Verdicts[0].Reason, " (stands on 0.5 s of samples in the 5 s window: none from 0.5 to 5.0 s, 4.5 s in all)") {
		t.Errorf("verdicts %+v", res.Verdicts)
	}
	// No socket from the start: nothing sampled, the whole window a gap.
	v, n, _, _ = fakeVM(t, conf)
	os.Remove(v.QMPSocket())
	res, err = Measure(context.Background(), n, disk.Of(v, v.Disks), Options{Window: 2 * time.Second})
	if err == nil || len(res.Samples) != 0 || len(res.Gaps) != 1 || res.Gaps[0].FromS != 0 || res.Gaps[0].ToS != 2 || !strings.Contains(err.Error(), "VM 100: QMP stopped answering: ") {
		t.Errorf("no socket: %v %+v", err, res)
	}
	// Killed before the second sample: no verdict to give; after it, one.
	for _, k := range []int{1, 2} {
		v, n, _, _ = fakeVM(t, conf)
		taken := 0
		res, err = Measure(context.Background(), n, disk.Of(v, v.Disks), Options{Window: 2 * time.Second, OnSample: func(tk sampler.Tick) {
			if taken++; tk.N == k {
				os.Remove(v.QMPSocket())
			}
		}})
		if err == nil || len(res.Samples) != k || len(res.Verdicts) != k-1 {
			t.Errorf("%d sample(s): %v %+v", k, err, res)
		}
	}
}

// TestMeasureQEMUStopped: another client holds the socket for 1.5 s (as a
// stopped QEMU: it accepts, never greets): the series has a gap, the run
// ends normally, and the verdict says what it stands on.
func TestMeasureQEMUStopped(t *testing.T) {
	v, n, q, _ := fakeVM(t, conf)
	held := false
	res, err := Measure(context.Background(), n, disk.Of(v, v.Disks), Options{Window: 3 * time.Second, Hz: 4, OnSample: func(tk sampler.Tick) {
		if !held && tk.N == 3 { // 0.5 s in at 4 Hz
			held = true
			release := q.Hold(t)
			time.AfterFunc(1500*time.Millisecond, release)
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Gaps) != 1 || res.Gaps[0].Seconds() < 1.2 || res.Gaps[0].Seconds() > 2 || res.Gaps[0].Why != GapNoAnswer || res.Gaps[0].Missed < 4 {
		t.Fatalf("gaps %+v", res.Gaps)
	}
	if res.SampledS < 1 || res.SampledS > 1.8 || !strings.Contains(res.Verdicts[0].Reason, "(stands on ") {
		t.Errorf("sampled %.1f s: %s", res.SampledS, res.Verdicts[0].Reason)
	}
}

func TestMeasureTrigger(t *testing.T) {
	agent := func(t *testing.T, v *vm.VM, replies map[string]string, silent bool) *qmptest.Agent {
		a := qmptest.NewAgent(t)
		a.Silent = silent
		a.Handle = qmptest.AgentReplies(replies)
		if err := os.Symlink(a.Sock(), v.QGASocket()); err != nil {
			t.Fatal(err)
		}
		return a
	}
	t.Run("silent agent fails before the window", func(t *testing.T) {
		v, n, q, _ := fakeVM(t, conf)
		agent(t, v, nil, true)
		start := time.Now()
		res, err := Measure(context.Background(), n, disk.Of(v, v.Disks), Options{Window: 20 * time.Second, Trigger: true})
		if !errors.Is(err, ErrAgent) || exitcode.Of(err) != exitcode.Unreachable || !strings.Contains(err.Error(), "did not answer within 1s") {
			t.Errorf("error %v", err)
		}
		// The one QMP command is the backup hold's query-block-jobs.
		if took := time.Since(start); took > 1500*time.Millisecond || len(res.Samples) != 0 || !slices.Equal(q.Seen(), []string{"query-block-jobs"}) {
			t.Errorf("took %s, %d samples, QMP commands %q: the window must not start", took, len(res.Samples), q.Seen())
		}
	})
	t.Run("no agent socket", func(t *testing.T) {
		v, n, _, _ := fakeVM(t, conf)
		if _, err := Measure(context.Background(), n, disk.Of(v, v.Disks), Options{Window: 20 * time.Second, Trigger: true}); !errors.Is(err, ErrAgent) {
			t.Errorf("error %v", err)
		}
	})
	t.Run("the guest syncs", func(t *testing.T) {
		v, n, _, _ := fakeVM(t, conf)
		a := agent(t, v, map[string]string{"guest-ping": "{}", "guest-exec": `{"pid": 7}`, "guest-exec-status": `{"exited": true, "exitcode": 0}`}, false)
		res, err := Measure(context.Background(), n, disk.Of(v, v.Disks), Options{Window: time.Second, Trigger: true})
		if err != nil || !res.Trigger || len(res.Verdicts) != 1 || a.Requests() < 6 {
			t.Errorf("err %v, trigger %v, %d verdicts, %d agent requests", err, res.Trigger, len(res.Verdicts), a.Requests())
		}
	})
	t.Run("sync fails mid-window: the window ends at once", func(t *testing.T) {
		v, n, _, _ := fakeVM(t, conf)
		agent(t, v, map[string]string{"guest-ping": "{}", "guest-exec": `{"pid": 7}`, "guest-exec-status": `{"exited": true, "exitcode": 1, "err-data": "c3luYzogZXJyb3IK"}`}, false)
		start := time.Now()
		res, err := Measure(context.Background(), n, disk.Of(v, v.Disks), Options{Window: 10 * time.Second, Trigger: true})
		if err == nil || exitcode.Of(err) != exitcode.Unreachable || !strings.Contains(err.Error(), "VM 100: making the guest flush failed 0.0 s into the 10 s window (1 sample(s) taken): sync in the guest exited 1: sync: error") {
			t.Errorf("error %v", err)
		}
		if time.Since(start) > 2*time.Second || len(res.Gaps) != 1 || !strings.HasPrefix(res.Gaps[0].Why, "making the guest flush failed: ") {
			t.Errorf("took %s, gaps %+v", time.Since(start), res.Gaps)
		}
	})
	t.Run("sync outlasts the window", func(t *testing.T) {
		v, n, _, _ := fakeVM(t, conf)
		agent(t, v, map[string]string{"guest-ping": "{}", "guest-exec": `{"pid": 7}`, "guest-exec-status": `{"exited": false}`}, false)
		n.Timeout = 300 * time.Millisecond
		_, err := Measure(context.Background(), n, disk.Of(v, v.Disks), Options{Window: time.Second, Trigger: true})
		if err == nil || !strings.Contains(err.Error(), "sync in the guest did not finish within the window and 300ms more") {
			t.Errorf("error %v", err)
		}
	})
}

func TestMeasureNotRunning(t *testing.T) {
	v, n, _, tree := fakeVM(t, conf)
	os.Remove(filepath.Join(tree.Root, "proc/4242/cmdline"))
	v, _ = vm.Load(context.Background(), node.New(v.Paths(), 0), 100)
	res, err := Measure(context.Background(), n, disk.Of(v, v.Disks), Options{})
	if !errors.Is(err, ErrNotRunning) || exitcode.Of(err) != exitcode.Unreachable || res == nil || len(res.Samples) != 0 {
		t.Errorf("not running: %v %+v", err, res)
	}
}

func TestMeasurable(t *testing.T) {
	v, _, _, _ := fakeVM(t, conf+"ide0: local:iso/x.iso,media=cdrom\nscsi2: local-lvm:vm-100-disk-2\n")
	got := map[string]bool{}
	for _, d := range v.Disks {
		got[d.ID] = Measurable(d)
	}
	// CD-ROMs, with a medium or empty, are not measured.
	if !got["scsi1"] || !got["scsi2"] || got["ide2"] || got["ide0"] || len(got) != 4 {
		t.Errorf("measurable %v", got)
	}
}

func TestFindGaps(t *testing.T) {
	at := func(ts ...float64) []Sample {
		var s []Sample
		for _, x := range ts {
			s = append(s, Sample{TimeS: x})
		}
		return s
	}
	for _, c := range []struct {
		name    string
		samples []Sample
		window  float64
		why     string
		gaps    []Gap
		sampled float64
	}{
		{"whole", at(0, 0.25, 0.5, 0.75, 1), 1, "", []Gap{}, 1},
		{"a late sample is no gap", at(0, 0.25, 0.625, 0.75, 1), 1, "", []Gap{}, 1},
		{"one tick missed", at(0, 0.25, 0.76, 1), 1, "", []Gap{{0.3, 0.8, 1, GapNoAnswer}}, 0.5},
		{"stopped 3 s", at(0, 0.25, 0.5, 0.75, 1, 4, 4, 4.25, 4.5, 4.75, 5), 5, "", []Gap{{1, 4, 11, GapNoAnswer}}, 2},
		{"killed", at(0, 0.25, 0.5), 5, "QMP stopped answering: gone", []Gap{{0.5, 5, 18, "QMP stopped answering: gone"}}, 0.5},
		{"ended early without a reason", at(0, 0.25, 0.5), 5, "", []Gap{{0.5, 5, 18, GapNoAnswer}}, 0.5},
		{"the last tick up to 1.5 intervals late is no gap", at(0, 0.25, 0.5, 0.75, 1), 1.375, "", []Gap{}, 1},
		{"no samples", nil, 2, "QMP stopped answering: x", []Gap{{0, 2, 9, "QMP stopped answering: x"}}, 0},
		{"no samples, no window", nil, 0, "", []Gap{}, 0},
	} {
		gaps, sampled := FindGaps(c.samples, 0.25, c.window, c.why)
		if fmt.Sprint(gaps) != fmt.Sprint(c.gaps) || sampled != c.sampled {
			t.Errorf("%s: gaps %v sampled %g, want %v %g", c.name, gaps, sampled, c.gaps, c.sampled)
		}
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		window time.Duration
		hz     float64
		ok     bool
	}{
		{time.Second, 2, true}, {time.Second, 10, true}, {15 * time.Second, 4, true},
		{time.Second - 1, 4, false}, {time.Second, 1.99, false}, {time.Second, 10.01, false},
		{time.Second, 0, false}, {-time.Second, 4, false},
		{MaxWindow, MaxHz, true}, {MaxWindow + 1, 4, false}, {1000001 * time.Hour, 4, false},
	} {
		err := Validate(c.window, c.hz)
		if (err == nil) != c.ok || err != nil && exitcode.Of(err) != exitcode.Usage {
			t.Errorf("%s %g: %v", c.window, c.hz, err)
		}
	}
}

func TestIgnored(t *testing.T) {
	r := &Result{Verdicts: []Judgement{{Verdict: Honored}, {Verdict: Inconclusive}}}
	if r.Ignored() {
		t.Error("no ignored verdict")
	}
	r.Verdicts = append(r.Verdicts, Judgement{Verdict: Ignored})
	if !r.Ignored() {
		t.Error("ignored")
	}
}
