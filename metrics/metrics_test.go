package metrics

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from what the collector exports now")

// exposition is s in the text format, its duration zeroed (the one value
// that differs between runs).
func exposition(t *testing.T, s *Snapshot) string {
	t.Helper()
	s.Duration = 0
	var b bytes.Buffer
	if err := WriteText(&b, s); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// golden compares got with testdata/golden/name (rewritten with -update).
func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", "golden", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("%s differs from what the collector exports (go test -run %s -update to accept):\n%s", p, t.Name(), diff(string(want), got))
	}
}

// diff lists the lines only one side has.
func diff(want, got string) string {
	w, g := map[string]bool{}, map[string]bool{}
	for _, l := range strings.Split(want, "\n") {
		w[l] = true
	}
	for _, l := range strings.Split(got, "\n") {
		g[l] = true
	}
	var out []string
	for l := range w {
		if !g[l] {
			out = append(out, "- "+l)
		}
	}
	for l := range g {
		if !w[l] {
			out = append(out, "+ "+l)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// series parses an exposition into "name{labels} value" lines, sorted.
func series(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

// The exact set of series, with their values, of Lab 37's VM 370 as QEMU
// 7.2 ran it on each command-line generation (testdata/lab370-*.json),
// and the QMP commands that took: FetchLive's, then four.
func TestGoldenQEMU72(t *testing.T) {
	for _, c := range []struct {
		gen  string
		seen []string
	}{
		// 7.2 has no qom-list-get: FetchLive reads the write cache of
		// the VirtIO Block disk and each throttle group's limits one by one.
		{"blockdev", []string{"query-status", "query-block", "query-named-block-nodes", "x-debug-query-block-graph",
			"qom-get", "qom-get", "qom-get", "qom-get", "qom-get", "qom-get", "qom-get",
			"query-blockstats", "query-blockstats", "query-iothreads", "query-cpus-fast"}},
		{"drive", []string{"query-status", "query-block", "query-named-block-nodes", "x-debug-query-block-graph",
			"qom-get", "query-blockstats", "query-blockstats", "query-iothreads", "query-cpus-fast"}},
	} {
		t.Run(c.gen, func(t *testing.T) {
			f := loadFixture(t, "lab370-"+c.gen)
			r := f.start(t, nil, 0, qmptest.Greeting72)
			s := r.collect(t)
			if got := strings.Join(r.q.Seen(), " "); got != strings.Join(c.seen, " ") {
				t.Errorf("commands:\n%s\nwant\n%s", got, strings.Join(c.seen, " "))
			}
			if r.q.Conns() != 2 {
				t.Errorf("%d connections, want 2 (FetchLive's exchange, then the counters')", r.q.Conns())
			}
			// The pools' figures and check's thin-overcommit share one lvs.
			if n := r.lvs.Count("lvs"); n != 1 {
				t.Errorf("lvs ran %d times in one collection, want 1", n)
			}
			golden(t, "lab370-"+c.gen+"-7.2.prom", exposition(t, s))
		})
	}
}

// qemu111 answers as QEMU 11.1.3 did in qmp/testdata/qemu-11.1.3/<gen>
// (one file per command, recorded by internal/fakenode/record). Two
// answers are assembled from that recording, per object, in the order
// asked: qom-list-get (the recording asked for four devices and two
// throttle groups), from its objects, the other devices' qom-get of
// write-cache, and for a throttle group the recording did not ask for, the
// recorded object of throttle-drive-scsi0, a group created with no limits
// (-object ... "limits":{}), as the test checks each such group was.
func qemu111(t *testing.T, gen string) (func(string, gjson.Result) string, []string) {
	dir := filepath.Join("..", "qmp", "testdata", "qemu-11.1.3", gen)
	read := func(name string) (gjson.Result, bool) {
		b, err := os.ReadFile(filepath.Join(dir, name+".json"))
		if err != nil {
			return gjson.Result{}, false
		}
		r := gjson.ParseBytes(b)
		return r.Get("return"), r.Get("return").Exists()
	}
	var argv []string
	b, err := os.ReadFile(filepath.Join(dir, "argv.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &argv); err != nil {
		t.Fatal(err)
	}
	recorded := map[string]string{} // object path -> its recorded object
	if l, ok := read("qom-list-get"); ok {
		asked := []string{"/machine/peripheral/scsi0", "/machine/peripheral/scsi1", "/machine/peripheral/virtio1", "/machine/peripheral/sata1",
			"/objects/throttle-drive-scsi0", "/objects/throttle-drive-scsi1"}
		for i, o := range l.Array() {
			recorded[asked[i]] = o.Raw
		}
	}
	object := func(path string) (string, bool) {
		if o, ok := recorded[path]; ok {
			return o, true
		}
		if id, ok := strings.CutPrefix(path, "/machine/peripheral/"); ok {
			if v, ok := read("qom-get-write-cache-" + id); ok {
				return `{"properties": [{"name": "write-cache", "type": "OnOffAuto", "value": ` + v.Raw + `}]}`, true
			}
			return "", false
		}
		group := strings.TrimPrefix(path, "/objects/")
		if !strings.Contains(strings.Join(argv, "\n"), `{"id":"`+group+`","limits":{},"qom-type":"throttle-group"}`) {
			t.Errorf("%s: a throttle group the recording has no answer for, and not created unlimited", path)
			return "", false
		}
		return recorded["/objects/throttle-drive-scsi0"], true
	}
	return func(cmd string, args gjson.Result) string {
		name := cmd
		switch {
		case cmd == "qom-list-get":
			var objs []string
			for _, p := range args.Get("paths").Array() {
				o, ok := object(p.String())
				if !ok {
					return qmptest.Fail("GenericError", "Path '"+p.String()+"' not found")
				}
				objs = append(objs, o)
			}
			return qmptest.Return("[" + strings.Join(objs, ",") + "]")
		case cmd == "query-blockstats" && args.Get("query-nodes").Bool():
			name = "query-blockstats-nodes"
		case cmd == "qom-get":
			id := strings.TrimPrefix(args.Get("path").String(), "/machine/peripheral/")
			name = "qom-get-write-cache-" + id
		}
		if r, ok := read(name); ok {
			var c bytes.Buffer
			json.Compact(&c, []byte(r.Raw))
			return qmptest.Return(c.String())
		}
		return qmptest.NotFound(cmd)
	}, argv
}

// The same VM on QEMU 11.1.3 (qmp/testdata/qemu-11.1.3): 8 commands in two
// exchanges on both generations, the limits read in one qom-list-get.
func TestGoldenQEMU111(t *testing.T) {
	base := loadFixture(t, "lab370-blockdev")
	for _, gen := range []string{"blockdev", "drive"} {
		t.Run(gen, func(t *testing.T) {
			handler, argv := qemu111(t, gen)
			f := base
			f.Argv = argv
			// The recording's volume group; its thread ids with counters
			// made up (one second per thread id step), its main thread's
			// stat line the 7.2 recording's.
			vg := regexp.MustCompile(`/dev/(pdc[0-9a-f]+)/`).FindStringSubmatch(strings.Join(argv, " "))[1]
			f.StorageCfg = regexp.MustCompile(`vgname \S+`).ReplaceAllString(f.StorageCfg, "vgname "+vg)
			f.LVS = strings.ReplaceAll(f.LVS, "pdce90c38f8", vg)
			f.Replies = nil
			f.Threads = map[string]map[string]string{strconv.Itoa(f.Pid): base.Threads[strconv.Itoa(base.Pid)]}
			for _, file := range []string{"query-iothreads", "query-cpus-fast"} {
				b, _ := os.ReadFile(filepath.Join("..", "qmp", "testdata", "qemu-11.1.3", gen, file+".json"))
				for _, th := range gjson.GetBytes(b, "return.#.thread-id").Array() {
					f.Threads[th.String()] = map[string]string{"schedstat": fmt.Sprintf("%d000000000 0 1\n", th.Int()%100)}
				}
			}
			r := f.start(t, nil, 0, qmptest.Greeting111)
			r.q.Handler = handler
			s := r.collect(t)
			// -drive: the limits come with query-block and qom-list-get
			// asks for the write caches only; the same commands.
			want := "query-status query-block query-named-block-nodes qom-list-get query-blockstats query-blockstats query-iothreads query-cpus-fast"
			if got := strings.Join(r.q.Seen(), " "); got != want {
				t.Errorf("commands:\n%s\nwant\n%s", got, want)
			}
			golden(t, "lab370-"+gen+"-11.1.prom", exposition(t, s))
		})
	}
}

// families gathers s.
func families(t *testing.T, s *Snapshot) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := Registry(s).Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func labelsOf(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// Label cardinality: every label is one of the few the README names, and
// every label whose values are a fixed set takes only values of that set;
// the series per VM grow with its disks and iothreads, nothing else.
func TestLabelCardinality(t *testing.T) {
	f := loadFixture(t, "lab370-blockdev")
	r := f.start(t, nil, 0, qmptest.Greeting72)
	for _, id := range []int{371, 372} {
		f.start(t, r.n, id, qmptest.Greeting72)
	}
	s := r.collect(t)
	codes := map[string]bool{}
	for _, c := range check.Codes {
		codes[string(c)] = true
	}
	set := func(vs ...string) map[string]bool {
		m := map[string]bool{}
		for _, v := range vs {
			m[v] = true
		}
		return m
	}
	enums := map[string]map[string]bool{
		"controller":       set("virtio-scsi-single", "virtio-scsi-pci", "lsi", "lsi53c810", "megasas", "pvscsi", "virtio-blk", "sata", "ide", "efi"),
		"cache_configured": set("none", "writeback", "writethrough", "directsync", "unsafe", ""),
		"cache_effective":  set("none", "writeback", "writethrough", "directsync", "unsafe", "custom"),
		"aio":              set("threads", "native", "io_uring", ""),
		"discard":          set("unmap", "ignore", ""),
		"direction":        set("total", "read", "write"),
		"limit":            set("bytes", "operations"),
		"code":             codes,
		"severity":         set(string(check.Error), string(check.Warning), string(check.Info)),
		"role":             set("main-loop", "iothread", "vcpu"),
		"source":           set("node", "config", "qmp", "threads", "thinpool", "labels"),
		"type":             set("lvmthin", "zfspool"),
		"layer":            set("qemu", "storage"),
		"shared":           set("true", "false"),
	}
	bounded := set("vmid", "disk", "storage", "pool", "iothread", "build", "package", "version", "installed_version", "device") // one value per VM, disk, storage, iothread
	perVM := map[string]int{}
	for name, mf := range families(t, s) {
		for _, m := range mf.GetMetric() {
			ls := labelsOf(m)
			for k, v := range ls {
				if vals, ok := enums[k]; ok {
					if !vals[v] {
						t.Errorf("%s{%s=%q}: not one of the label's values", name, k, v)
					}
				} else if !bounded[k] {
					t.Errorf("%s has label %s, not one of the README's", name, k)
				}
			}
			if id, ok := ls["vmid"]; ok {
				perVM[id]++
			}
			if m.GetTimestampMs() != 0 {
				t.Errorf("%s has a timestamp", name)
			}
		}
	}
	// 6 disks x (info + 13 device + 3 storage counters + limits differ +
	// stalled seconds + QEMU's layer requests and seconds) + 4 limits, 4 finding series, 2 + 3 CPU series (3
	// iothreads), the QEMU build and its advisory count (no outdated
	// series: a tree without procfs or dpkg status); no in-flight series
	// and no storage layer (the fixture's volumes are no block devices or
	// files of this node).
	for _, id := range []string{"370", "371", "372"} {
		if perVM[id] != 6*21+4+4+2+3+1+2 {
			t.Errorf("VM %s: %d series", id, perVM[id])
		}
	}
	if len(perVM) != 3 {
		t.Errorf("series for VMs %v", perVM)
	}
}

// holdAfter makes another client take the socket as soon as the
// collector's exchange that sends cmd ends: it connects while that
// exchange runs (QEMU serves one client at a time, so it gets the socket
// next) and keeps it for the rest of the test.
func holdAfter(t *testing.T, q *qmptest.QEMU, cmd string) {
	handler := q.Handler
	held := false
	q.Handler = func(c string, args gjson.Result) string {
		if c == cmd && !held {
			held = true
			go func() {
				conn, err := net.Dial("unix", q.Sock())
				if err == nil {
					t.Cleanup(func() { conn.Close() })
				}
			}()
		}
		return handler(c, args)
	}
}

// A VM whose socket stays busy is an error of source qmp and has no live
// series at all (no info, counter, limit or CPU series: never a zero),
// while the other VMs and its findings are there; whether the socket is
// taken before the first exchange or between the two.
func TestBusySocket(t *testing.T) {
	for _, c := range []struct {
		name, after string
	}{
		{"before FetchLive", ""},
		{"between the exchanges", "query-status"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := loadFixture(t, "lab370-drive")
			r := f.start(t, nil, 0, qmptest.Greeting72)
			busy := f.start(t, r.n, 371, qmptest.Greeting72)
			if c.after == "" {
				busy.q.Hold(t)
			} else {
				holdAfter(t, busy.q, c.after)
			}
			n := r.node()
			n.Timeout = 300 * time.Millisecond
			s := Collect(context.Background(), n, Options{})
			if s.Errors[SourceQMP] != 1 || len(s.Errors) != 1 {
				t.Errorf("errors %v, want one of source qmp", s.Errors)
			}
			text := exposition(t, s)
			if !strings.Contains(text, `pvediskcheck_collect_errors{source="qmp"} 1`) {
				t.Error("collect_errors{source=qmp} is not 1")
			}
			for _, l := range series(text) {
				// check's findings and, where its exchange was read, the
				// build QEMU stated are check's: exported all the same.
				checks := strings.HasPrefix(l, "pvediskcheck_check_findings") || c.after != "" && strings.HasPrefix(l, "pvediskcheck_vm_qemu_")
				if strings.Contains(l, `vmid="371"`) && !checks {
					t.Errorf("a series of the busy VM: %s", l)
				}
			}
			if !strings.Contains(text, `pvediskcheck_check_findings{code="cache-writeback",severity="warning",vmid="371"} 1`) {
				t.Error("the busy VM's findings are missing")
			}
			if build := strings.Contains(text, `pvediskcheck_vm_qemu_build_info{build="Debian 1:7.2+dfsg-7+deb12u7",installed_version="",package="qemu-system-x86",version="1:7.2+dfsg-7+deb12u7",vmid="371"} 1`); build != (c.after != "") {
				t.Errorf("the busy VM's build exported: %v", build)
			}
			if !strings.Contains(text, `pvediskcheck_disk_info{aio="io_uring",cache_configured="none",cache_effective="none",controller="virtio-scsi-single",discard="ignore",disk="scsi1",iothread="iothread-virtioscsi1",storage="local-lvm",vmid="370"} 1`) {
				t.Error("the other VM lost its series")
			}
		})
	}
}
