package stall

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/outfile"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// captureNode lays out VM 100 with disks SCSI disks, each on its own
// iothread, running as the recording's QEMU 2452: the recorded
// query-blockstats and query-block entries of the frozen scsi1 (its
// iothread 2455, whose 8 io_uring workers are blocked) and of the idle
// scsi0 for the others, the recorded threads plus one iothread per
// further disk (copies of the recorded idle iothread's files).
//
// QEMU answers each command of refuse as a QEMU without it does
// (CommandNotFound).
func captureNode(t testing.TB, disks int, refuse ...string) (node.Node, *qmptest.QEMU) {
	t.Helper()
	root := t.TempDir()
	n := node.New(node.NewPaths(root, filepath.Join(root, "proc"), filepath.Join(root, "sys")), 5*time.Second)
	write := func(p, text string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	read := func(name string) gjson.Result {
		b, err := os.ReadFile(filepath.Join("testdata", "frozen-7.2", name))
		if err != nil {
			t.Fatal(err)
		}
		return gjson.ParseBytes(b)
	}
	write(n.Paths.StorageCfg(), "dir: local\n\tpath /var/lib/vz\n\tcontent images\n")
	var cfg strings.Builder
	cfg.WriteString("name: stall\nscsihw: virtio-scsi-single\n")
	stats, block := read("query-blockstats.json").Array(), read("query-block.json").Array()
	var bs, qb, iots []string
	for i := 0; i < disks; i++ {
		fmt.Fprintf(&cfg, "scsi%d: local:100/vm-100-disk-%d.raw,iothread=1,aio=io_uring,size=16M\n", i, i)
		src := 0
		tid := 2454
		if i == 1 {
			src, tid = 1, 2455
		} else if i > 1 {
			tid = 2500 + i
		}
		re := strings.NewReplacer(`"scsi`+strconv.Itoa(src)+`"`, `"scsi`+strconv.Itoa(i)+`"`, `drive-scsi`+strconv.Itoa(src), `drive-scsi`+strconv.Itoa(i))
		bs = append(bs, re.Replace(stats[src].Raw))
		qb = append(qb, re.Replace(block[src].Raw))
		iots = append(iots, fmt.Sprintf(`{"id": "iothread-virtioscsi%d", "thread-id": %d}`, i, tid))
	}
	write(n.Paths.VMConfig(100), cfg.String())
	conf, err := qemuserver.ParseConfig(strings.NewReader(cfg.String()), "100")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := qemuserver.LoadStorages(n.Paths.StorageCfg())
	argv, err := fakenode.Argv("qemu-system-x86_64", conf, st, fakenode.ArgvOptions{VMID: 100, RunDir: "/var/run/qemu-server", Blockdev: true, QEMUVersion: "7.2.22"})
	if err != nil {
		t.Fatal(err)
	}
	const pid = 2452
	write(filepath.Join(n.Paths.ProcPid(pid), "cmdline"), strings.Join(argv, "\x00")+"\x00")
	write(n.Paths.PidFile(100), strconv.Itoa(pid)+"\n")
	task := filepath.Join("testdata", "frozen-7.2", "proc", strconv.Itoa(pid), "task")
	if err := os.CopyFS(filepath.Join(n.Paths.ProcPid(pid), "task"), os.DirFS(task)); err != nil {
		t.Fatal(err)
	}
	idle, _ := os.ReadFile(filepath.Join(task, "2454", "stat"))
	for i := 2; i < disks; i++ {
		tid := strconv.Itoa(2500 + i)
		write(filepath.Join(n.Paths.ProcPid(pid), "task", tid, "stat"), strings.Replace(string(idle), "2454", tid, 1))
		write(filepath.Join(n.Paths.ProcPid(pid), "task", tid, "wchan"), "0")
	}
	replies := qmptest.Replies(map[string]string{
		"query-blockstats": "[" + strings.Join(bs, ",") + "]",
		"query-block":      "[" + strings.Join(qb, ",") + "]",
		"query-block-jobs": read("query-block-jobs.json").Raw,
		"query-iothreads":  "[" + strings.Join(iots, ",") + "]",
		"query-cpus-fast":  read("query-cpus-fast.json").Raw,
		"qom-get":          `{"bps-write": 0}`,
	})
	q := qmptest.NewQEMU(t, func(cmd string, args gjson.Result) string {
		if slices.Contains(refuse, cmd) {
			return qmptest.NotFound(cmd)
		}
		return replies(cmd, args)
	})
	if err := os.Symlink(q.Sock(), n.Paths.QMPSocket(100)); err != nil {
		t.Fatal(err)
	}
	return n, q
}

// TestCapture: the folder of the stalled disk holds QEMU's answers, the
// blocked io_uring workers' stat and wchan, the verdict, and says what it
// could not read; bounded, and from top's --capture once per stall.
func TestCapture(t *testing.T) {
	n, q := captureNode(t, 15)
	out := t.TempDir()
	samples := []json.RawMessage{json.RawMessage(`{"disk":"scsi1","stalled_seconds":2.3}`)}
	c, err := Capture(context.Background(), n, 100, CaptureOptions{Out: parent(t, out), After: recAfter, Disks: []string{"scsi1"}, Samples: samples})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Verdicts) != 1 || !c.Verdicts[0].Stalled || len(c.Verdicts[0].Blocked) != 8 {
		t.Fatalf("verdicts %+v", c.Verdicts)
	}
	if !regexp.MustCompile(`^stall-100-scsi1-\d{8}T\d{6}\.\d{3}Z-[0-9a-f]{16}$`).MatchString(filepath.Base(c.Dir)) || filepath.Dir(c.Dir) != out {
		t.Errorf("dir %s", c.Dir)
	}
	for _, f := range []string{"query-block.json", "query-blockstats.json", "query-block-jobs.json", "query-iothreads.json", "query-cpus-fast.json",
		"throttle-groups.json", "settings.json", "verdicts.json", "blocked.json", "samples.json", "not-read.json", "threads/2460/stat", "threads/2460/wchan"} {
		if _, err := os.Stat(filepath.Join(c.Dir, f)); err != nil {
			t.Errorf("missing %s", f)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(c.Dir, "threads/2460/wchan")); string(b) != "percpu_rwsem_wait" {
		t.Errorf("wchan %q", b)
	}
	var set []map[string]any
	b, _ := os.ReadFile(filepath.Join(c.Dir, "settings.json"))
	if json.Unmarshal(b, &set) != nil || len(set) != 1 || set[0]["config"] != "local:100/vm-100-disk-1.raw,iothread=1,aio=io_uring,size=16M" {
		t.Errorf("settings %s", b)
	}
	// This fixture tree has no kernel stacks nor syscall lines and the
	// volumes are not there: each said, nothing else.
	want := []string{"device under scsi1: stat " + filepath.Join(n.Paths.ProcPid(2452), "root", "var/lib/vz/images/100/vm-100-disk-1.raw") + ": no such file or directory",
		"threads' stack: no such file or directory (30 threads)", "threads' syscall: no such file or directory (30 threads)"}
	if strings.Join(c.NotRead, "\n") != strings.Join(want, "\n") {
		t.Errorf("not read:\n%s\nwant\n%s", strings.Join(c.NotRead, "\n"), strings.Join(want, "\n"))
	}
	if c.Bytes > 1<<20 || c.Files < 60 {
		t.Errorf("%d files, %d bytes", c.Files, c.Bytes)
	}
	cmds := strings.Join(q.Seen(), " ")
	if cmds != "query-block query-blockstats query-block-jobs query-iothreads query-cpus-fast qom-get" {
		t.Errorf("QMP commands %s", cmds)
	}

	// The keeper: one capture per disk and stall.
	k := &Keeper{Out: parent(t, t.TempDir()), After: recAfter}
	var got []*Captured
	k.OnCapture = func(c *Captured, err error) {
		if err != nil {
			t.Error(err)
		}
		got = append(got, c)
	}
	t0 := time.Now()
	for i, stalled := range []bool{false, true, true, true, false, true} {
		k.Sample(context.Background(), n, t0.Add(time.Duration(i)*time.Second), 100, "scsi1", map[string]int{"i": i}, stalled)
	}
	if len(got) != 2 {
		t.Fatalf("%d captures for two stalls", len(got))
	}
	b, _ = os.ReadFile(filepath.Join(got[0].Dir, "samples.json"))
	var kept []map[string]int
	if json.Unmarshal(b, &kept) != nil || len(kept) != 2 || kept[0]["i"] != 0 || kept[1]["i"] != 1 {
		t.Errorf("samples of the first capture: %s", b)
	}
	// Past KeepFor, older samples drop out.
	k.Sample(context.Background(), n, t0.Add(KeepFor+3*time.Second), 100, "scsi1", map[string]int{"i": 9}, false)
	if h := k.hist[diskKey{100, "scsi1"}]; len(h) != 4 {
		t.Errorf("%d samples kept a minute on, want 4 (3, 4, 5, 9)", len(h))
	}
}

// BenchmarkCapture15Disks: one stalled disk of a VM with 15 disks.
func BenchmarkCapture15Disks(b *testing.B) {
	n, _ := captureNode(b, 15)
	out := parent(b, b.TempDir())
	var bytes int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := Capture(context.Background(), n, 100, CaptureOptions{Out: out, After: recAfter, Disks: []string{"scsi1"}})
		if err != nil || !c.Verdicts[0].Stalled {
			b.Fatal(err)
		}
		bytes = c.Bytes
	}
	b.ReportMetric(float64(bytes), "bytes/capture")
}

// BenchmarkCaptureWholeVM15Disks: `stall VMID`, every disk of the 15.
func BenchmarkCaptureWholeVM15Disks(b *testing.B) {
	n, _ := captureNode(b, 15)
	out := parent(b, b.TempDir())
	var bytes int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := Capture(context.Background(), n, 100, CaptureOptions{Out: out, After: recAfter})
		if err != nil || len(c.Verdicts) != 15 {
			b.Fatal(err)
		}
		bytes = c.Bytes
	}
	b.ReportMetric(float64(bytes), "bytes/capture")
}

// parent is --capture's folder as the commands check it (outfile).
func parent(t testing.TB, dir string) *outfile.Parent {
	t.Helper()
	p, err := outfile.CheckParent("capture", dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// The campaign's capture cases (issue 31). 4,000 folders of the names
// Capture used to make, pre-created with settings.json linked to a
// root-only file: the capture makes a folder of its own (0700, files
// 0600) and the file is untouched. A disk the VM does not have is refused
// naming the VM's disks, with nothing written. Beyond MaxKept captures the
// oldest is removed, and only a capture folder of ours.
func TestCaptureHostileFolder(t *testing.T) {
	n, _ := captureNode(t, 2)
	out := t.TempDir()
	secret := filepath.Join(t.TempDir(), "root-only")
	if err := os.WriteFile(secret, []byte("secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	for i := -2000; i < 2000; i++ {
		d := filepath.Join(out, "stall-100-scsi1-"+now.Add(time.Duration(i)*time.Millisecond).Format("20060102T150405.000Z"))
		if err := os.Mkdir(d, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(secret, filepath.Join(d, "settings.json")); err != nil {
			t.Fatal(err)
		}
	}
	p := parent(t, out)
	c, err := Capture(context.Background(), n, 100, CaptureOptions{Out: p, After: recAfter, Disks: []string{"scsi1"}})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(secret); string(b) != "secret\n" {
		t.Errorf("the root-only file was written: %q", b)
	}
	if len(c.Removed) != 0 {
		t.Errorf("removed %v: none of the pre-created folders is ours", c.Removed)
	}
	filepath.Walk(c.Dir, func(path string, info os.FileInfo, err error) error {
		if err != nil {
			t.Fatal(err)
		}
		if want := os.FileMode(0o600); info.IsDir() && info.Mode() != os.ModeDir|0o700 || !info.IsDir() && info.Mode() != want {
			t.Errorf("%s: mode %v", path, info.Mode())
		}
		return nil
	})

	// A disk the VM does not have: one line naming its disks, nothing made.
	before, _ := os.ReadDir(out)
	_, err = Capture(context.Background(), n, 100, CaptureOptions{Out: p, After: recAfter, Disks: []string{"scsi1", "virtio7"}})
	if exitcode.Of(err) != exitcode.Usage || err.Error() != `VM 100 has no disk "virtio7" (disks: scsi0, scsi1)` {
		t.Errorf("unknown disk: %v", err)
	}
	if after, _ := os.ReadDir(out); len(after) != len(before) {
		t.Errorf("an unknown disk made %d entries", len(after)-len(before))
	}

	// The bound: the oldest capture goes once MaxKept are there.
	old := time.Now().Add(-time.Hour)
	os.Chtimes(c.Dir, old, old)
	for i := 1; i < MaxKept; i++ {
		f, err := p.New(folderName(100, []string{"scsi1"}, time.Now()))
		if err != nil {
			t.Fatal(err)
		}
		f.WriteFile("settings.json", []byte("[]\n"))
		f.Close()
	}
	c2, err := Capture(context.Background(), n, 100, CaptureOptions{Out: p, After: recAfter, Disks: []string{"scsi1"}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(c2.Removed, " ") != c.Dir {
		t.Errorf("removed %v, want the oldest capture %s", c2.Removed, c.Dir)
	}
	if ents, _ := os.ReadDir(out); len(ents) != 4000+MaxKept {
		t.Errorf("%d entries, want the 4,000 pre-created and %d captures", len(ents), MaxKept)
	}
}

func TestFolderName(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	for _, c := range []struct {
		disks []string
		want  string
	}{
		{nil, "stall-100-20260102T030405.006Z"},
		{[]string{"scsi1"}, "stall-100-scsi1-20260102T030405.006Z"},
		{[]string{"scsi1", "virtio0", "sata2"}, "stall-100-scsi1+virtio0+sata2-20260102T030405.006Z"},
		{[]string{"scsi1", "virtio0", "sata2", "ide0"}, "stall-100-4disks-20260102T030405.006Z"},
	} {
		if got := folderName(100, c.disks, at); got != c.want {
			t.Errorf("folderName(%v) = %s, want %s", c.disks, got, c.want)
		}
	}
}
