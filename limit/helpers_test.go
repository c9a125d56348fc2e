package limit

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/internal/fakerun"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// fakeQM does what `qm set VMID --DISK LINE [--digest D]` does to the config
// of a node under dir (the main section's line is replaced), and prints qm's
// line. dir/qm.fail makes it fail as qm does
// when the VM is locked, changing nothing. A --digest that is not the sha1 of
// the config file is refused with update_vm_api's message, changing nothing;
// dir/qm.race.1 (then .2) is another admin's qm set that lands first: the
// config it holds is written before the digest is compared (once each).
func fakeQM(dir string, argv []string) ([]byte, error) {
	fail := func(status int, msg string) ([]byte, error) {
		return nil, &node.CommandError{Argv: argv, Status: status, Stderr: msg}
	}
	args := argv[1:]
	if _, err := os.Stat(filepath.Join(dir, "qm.noop")); err == nil {
		return []byte(fmt.Sprintf("update VM %s: nothing saved\n", args[1])), nil
	}
	if msg, err := os.ReadFile(filepath.Join(dir, "qm.fail")); err == nil {
		return fail(255, string(msg))
	}
	digest := ""
	if len(args) == 6 && args[4] == "--digest" {
		digest, args = args[5], args[:4]
	}
	if len(args) != 4 || args[0] != "set" || !strings.HasPrefix(args[2], "--") {
		return fail(255, "fake qm: only 'qm set VMID --DISK LINE [--digest D]'\n")
	}
	cfg := filepath.Join(dir, "etc/pve/qemu-server", args[1]+".conf")
	for _, race := range []string{"qm.race.1", "qm.race.2"} {
		if other, err := os.ReadFile(filepath.Join(dir, race)); err == nil {
			os.WriteFile(cfg, other, 0o644)
			os.Remove(filepath.Join(dir, race))
			break
		}
	}
	text, err := os.ReadFile(cfg)
	if err != nil {
		return fail(2, err.Error()+"\n")
	}
	if sum := sha1.Sum(text); digest != "" && digest != hex.EncodeToString(sum[:]) {
		return fail(255, "checksum mismatch (file change by other user?)\n")
	}
	key := strings.TrimPrefix(args[2], "--")
	var out []string
	for _, l := range strings.Split(string(text), "\n") {
		if strings.HasPrefix(l, key+": ") {
			l = key + ": " + args[3]
		}
		out = append(out, l)
	}
	if err := os.WriteFile(cfg, []byte(strings.Join(out, "\n")), 0o644); err != nil {
		return fail(255, err.Error()+"\n")
	}
	return []byte(fmt.Sprintf("update VM %s: -%s %s\n", args[1], key, args[3])), nil
}

// testNode is VM 370 of the test harness (testdata/370.conf, recorded from
// internal/fakenode) on a node tree under a temp dir: running with the
// recorded command line of gen when q is not nil, its QMP socket the fake
// QEMU's.
type testNode struct {
	root string
	node node.Node
	qemu *fakeQEMU
	qm   *fakerun.Runner // qm as fakeQM (useQM)
}

func newTestNode(t *testing.T, gen string, running bool) *testNode {
	t.Helper()
	root := t.TempDir()
	tn := &testNode{root: root}
	for _, d := range []string{"etc/pve/qemu-server", "var/run/qemu-server", "proc/4242"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	copyFixture(t, "370.conf", filepath.Join(root, "etc/pve/qemu-server/370.conf"), root)
	copyFixture(t, "storage.cfg", filepath.Join(root, "etc/pve/storage.cfg"), root)
	if running {
		copyFixture(t, "cmdline-370-"+gen, filepath.Join(root, "proc/4242/cmdline"), root)
		// A live process's stat (state S); removing it is QEMU exiting.
		if err := os.WriteFile(filepath.Join(root, "proc/4242/stat"), []byte("4242 (kvm) S 1 4242 4242 0 -1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, "var/run/qemu-server/370.pid"), []byte("4242\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		tn.qemu = newFakeQEMU(t, gen == "blockdev")
		if err := os.Symlink(tn.qemu.Sock(), filepath.Join(root, "var/run/qemu-server/370.qmp")); err != nil {
			t.Fatal(err)
		}
	}
	tn.node = node.New(node.NewPaths(root, "", ""), 2*time.Second)
	return tn
}

func copyFixture(t *testing.T, name, dst, root string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, bytes.ReplaceAll(b, []byte("@ROOT@"), []byte(root)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeConfig replaces VM 370's config.
func (tn *testNode) writeConfig(t *testing.T, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(tn.root, "etc/pve/qemu-server/370.conf"), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func (tn *testNode) config(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(tn.root, "etc/pve/qemu-server/370.conf"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// load is vm.Load and vm.Select of the disks named (all when none).
func (tn *testNode) load(t *testing.T, disks ...string) (*vm.VM, []*vm.Disk) {
	t.Helper()
	v, err := vm.Load(context.Background(), node.New(tn.node.Paths, 0), 370)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := v.Select(disks)
	if err != nil {
		t.Fatal(err)
	}
	return v, ds
}

// useQM makes the node's runner run qm as fakeQM, acting on this node.
func (tn *testNode) useQM(t *testing.T) {
	t.Helper()
	tn.qm = &fakerun.Runner{Do: map[string]func([]string) ([]byte, error){"qm": func(argv []string) ([]byte, error) { return fakeQM(tn.root, argv) }}}
	tn.node = tn.qm.Node(tn.node)
}

// qmCalls is every qm argv so far (without "qm"), each run with limit's
// deadline for qm.
func (tn *testNode) qmCalls(t *testing.T) [][]string {
	t.Helper()
	var out [][]string
	for _, c := range tn.qm.Recorded() {
		if c.Timeout != max(tn.node.Timeout, qmTimeout) {
			t.Errorf("%q ran with a deadline of %s", c.Argv, c.Timeout)
		}
		out = append(out, c.Argv[1:])
	}
	return out
}

// fakeQEMU answers what limit asks QEMU, with state: each disk's 19
// ThrottleLimits fields, set with qom-set (-blockdev, fields merge) or
// block_set_io_throttle (-drive), read with qom-get or query-block; and
// query-blockstats from a recorded series, one sample per call.
type fakeQEMU struct {
	*qmptest.QEMU
	blockdev bool

	mu     sync.Mutex
	limits map[string]map[string]int64
	sent   []string // the throttle commands received, as JSON
	stats  []json.RawMessage
	// ignore makes QEMU accept a throttle command and change nothing.
	ignore bool
	// refuse answers throttle commands with this error class.
	refuse string
	// failReads answers that many reads of the limits with an error.
	failReads int
	// failStats answers query-blockstats with an error.
	failStats bool
}

func newFakeQEMU(t *testing.T, blockdev bool) *fakeQEMU {
	f := &fakeQEMU{blockdev: blockdev, limits: map[string]map[string]int64{}}
	for _, d := range []string{"scsi0", "scsi1", "virtio1", "sata1"} {
		f.limits[d] = qemuserver.Limits{}.Full()
		f.limits[d]["iops-size"] = 0
	}
	f.QEMU = qmptest.NewQEMU(t, f.handle)
	return f
}

func (f *fakeQEMU) set(disk string, l qemuserver.Limits) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, v := range l.Full() {
		f.limits[disk][k] = v
	}
}

func (f *fakeQEMU) get(disk string) qemuserver.Limits {
	f.mu.Lock()
	defer f.mu.Unlock()
	return qemuserver.Limits(f.limits[disk]).Normal()
}

func (f *fakeQEMU) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.sent...)
}

// serve queues query-blockstats replies (each a whole return value).
func (f *fakeQEMU) serve(replies ...json.RawMessage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range replies {
		var b bytes.Buffer
		_ = json.Compact(&b, r) // one line: QMP is line-delimited
		f.stats = append(f.stats, b.Bytes())
	}
}

func (f *fakeQEMU) handle(cmd string, args gjson.Result) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	disk := func(path string) string {
		return strings.TrimPrefix(strings.TrimPrefix(path, "throttle-drive-"), "drive-")
	}
	if (cmd == "qom-get" || cmd == "query-block") && f.failReads > 0 {
		f.failReads--
		return qmptest.Fail("GenericError", "a read that failed")
	}
	switch cmd {
	case "qom-get":
		l, ok := f.limits[disk(args.Get("path").String())]
		if !f.blockdev || !ok || args.Get("property").String() != "limits" {
			return qmptest.Fail("GenericError", "Device '"+args.Get("path").String()+"' not found")
		}
		b, _ := json.Marshal(l)
		return qmptest.Return(string(b))
	case "query-block":
		var out []map[string]any
		for _, d := range sortedDisks(f.limits) {
			in := map[string]any{"node-name": "drive-" + d}
			if !f.blockdev {
				for k, v := range f.limits[d] {
					if k != "iops-size" {
						in[qmp.QEMUToBackendLimitName(k)] = v
					}
				}
			}
			dev := ""
			if !f.blockdev {
				dev = "drive-" + d
			}
			out = append(out, map[string]any{"device": dev, "qdev": "/machine/peripheral/" + d + "/virtio-backend", "inserted": in})
		}
		b, _ := json.Marshal(out)
		return qmptest.Return(string(b))
	case "qom-set", "block_set_io_throttle":
		if (cmd == "qom-set") != f.blockdev {
			return qmptest.NotFound(cmd)
		}
		sent, _ := json.Marshal(map[string]any{"execute": cmd, "arguments": json.RawMessage(args.Raw)})
		f.sent = append(f.sent, string(sent))
		if f.refuse != "" {
			return qmptest.Fail(f.refuse, "bps_max/iops_max cannot be lower than bps/iops")
		}
		if f.ignore {
			return qmptest.Return("{}")
		}
		fields := args.Get("value")
		d := disk(args.Get("path").String())
		if cmd == "block_set_io_throttle" {
			fields, d = args, disk(args.Get("device").String())
		}
		fields.ForEach(func(k, v gjson.Result) bool {
			switch {
			case cmd == "qom-set":
				f.limits[d][k.String()] = v.Int()
			case k.String() != "device":
				f.limits[d][qmp.BackendToQEMULimitName(k.String())] = v.Int()
			}
			return true
		})
		return qmptest.Return("{}")
	case "query-blockstats":
		if f.failStats {
			return qmptest.Fail("GenericError", "blockstats broke")
		}
		if len(f.stats) == 0 {
			return qmptest.Return("[]")
		}
		r := f.stats[0]
		if len(f.stats) > 1 {
			f.stats = f.stats[1:]
		}
		return qmptest.Return(string(r))
	}
	return qmptest.NotFound(cmd)
}

func sortedDisks(m map[string]map[string]int64) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// loadSeries reads a recorded series (testdata/series-*.json).
func loadSeries(t *testing.T, name string) *fixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var f fixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return &f
}

// measurement is the recorded series as Measure returns it: the window
// starting at t0, each sample at its recorded time.
func (f *fixture) measurement(t0 time.Time) *Measurement {
	m := &Measurement{Disk: "scsi1", Start: t0, Window: time.Duration(f.WindowNs), Interval: Interval}
	for _, s := range f.Samples {
		at := t0.Add(time.Duration(s.TNs))
		st := map[string]qmp.BlockStats{}
		for _, b := range qmp.ParseBlockstats(gjson.ParseBytes(s.Return)) {
			st["scsi1"] = b
		}
		m.Samples = append(m.Samples, sampler.Sample{Time: at, Stats: st})
	}
	m.Missed = int(f.WindowNs/int64(Interval)) + 1 - len(f.Samples)
	return m
}

// trueDepth is the mean number of requests the load generator had in
// flight over the samples from skip on: issued less completed.
func (f *fixture) trueDepth(skip time.Duration) (rd, wr float64) {
	n := 0
	for _, s := range f.Samples {
		if s.TNs < int64(skip) {
			continue
		}
		st := gjson.GetBytes(s.Return, "0.stats")
		rd += float64(int64(s.SubmittedRd) - (st.Get("rd_operations").Int() - f.BaselineRdOps))
		wr += float64(int64(s.SubmittedWr) - (st.Get("wr_operations").Int() - f.BaselineWrOps))
		n++
	}
	return rd / float64(n), wr / float64(n)
}

func itoa(i int) string { return strconv.Itoa(i) }

// sha1hex is what qemu-server's digest is: sha1_hex of the file's bytes.
func sha1hex(text string) string {
	sum := sha1.Sum([]byte(text))
	return hex.EncodeToString(sum[:])
}

// steadyEnds are the first and the last sample from skip on.
func (f *fixture) steadyEnds(skip time.Duration) (first, last *fixtureSample) {
	for i := range f.Samples {
		if f.Samples[i].TNs >= int64(skip) {
			if first == nil {
				first = &f.Samples[i]
			}
			last = &f.Samples[i]
		}
	}
	return first, last
}

func counter(s *fixtureSample, name string) float64 {
	return gjson.GetBytes(s.Return, "0.stats."+name).Float()
}

// totalLatencyDepth is the write queue depth as Little's law gave it before
// issue 15: the write latency completed from skip on per second.
func (f *fixture) totalLatencyDepth(skip time.Duration) float64 {
	first, last := f.steadyEnds(skip)
	return (counter(last, "wr_total_time_ns") - counter(first, "wr_total_time_ns")) / float64(last.TNs-first.TNs)
}
