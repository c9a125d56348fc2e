package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/metrics"
)

// requireTool skips without an external tool (fails under CI=true: make
// test installs it, scripts/test-deps.sh).
func requireTool(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required in CI: run `make test`, which installs it", name)
		}
		t.Skipf("%s not installed (make test installs it): %v", name, err)
	}
	return p
}

// freeAddr is a loopback address with a port nobody listens on.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// serveMetrics runs `metrics --listen` in-process until the test ends.
func serveMetrics(t *testing.T, root string, extra ...string) string {
	t.Helper()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var errb bytes.Buffer
	go func() {
		done <- run(ctx, append([]string{"pvediskcheck", "--root", root, "metrics", "--listen", addr}, extra...), io.Discard, &errb)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("metrics --listen exited %d: %s", code, errb.String())
		}
	})
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		if i > 200 {
			t.Fatalf("metrics --listen %s: %v", addr, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func httpGet(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// promtoolCheck runs `promtool check metrics` (Prometheus' own lint) on an
// exposition.
func promtoolCheck(t *testing.T, what, text string) {
	t.Helper()
	cmd := exec.Command(requireTool(t, "promtool"), "check", "metrics")
	cmd.Stdin = strings.NewReader(text)
	out, err := cmd.CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("promtool check metrics on %s: %v\n%s", what, err, out)
	}
}

// Bad input is exit 2, before anything is collected or listened on.
func TestMetricsUsage(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc/pve/qemu-server"), 0o755)
	file := filepath.Join(root, "file")
	os.WriteFile(file, nil, 0o644)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--json", "metrics"}, "--json does not apply"},
		{[]string{"metrics", "370"}, "takes no arguments"},
		{[]string{"metrics", "--textfile", root, "--listen", "127.0.0.1:0"}, "not both"},
		{[]string{"metrics", "--textfile", filepath.Join(root, "none")}, "--textfile " + filepath.Join(root, "none")},
		{[]string{"metrics", "--textfile", file}, "not a directory"},
		{[]string{"metrics", "--listen", busy.Addr().String()}, `--listen "` + busy.Addr().String() + `"`},
		{[]string{"metrics", "--listen", "nohost:x"}, `--listen "nohost:x"`},
		// An empty value is refused, not taken for "print to stdout".
		{[]string{"metrics", "--listen", ""}, `--listen "": give host:port, e.g. --listen 127.0.0.1:9732`},
		{[]string{"metrics", "--listen="}, `--listen "": give host:port`},
		{[]string{"metrics", "--listen", "127.0.0.1"}, `--listen "127.0.0.1": address 127.0.0.1: missing port in address`},
		{[]string{"metrics", "--textfile", ""}, `--textfile "": give a directory`},
		{[]string{"metrics", "--textfile", "", "--listen", ""}, "not both"},
		{[]string{"metrics", "--deadline", "0s", "--listen", "127.0.0.1:0"}, "--deadline 0s"},
		{[]string{"metrics", "--parallel", "-2"}, "--parallel -2"},
	} {
		out, errs, code := runCLI(t, append([]string{"--root", root}, c.args...)...)
		if code != exitUsage || out != "" || !strings.Contains(errs, c.msg) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, %q %q", c.args, code, out, errs)
		}
	}
	if _, errs, code := runCLI(t, "--root", t.TempDir(), "metrics"); code != exitUsage || !strings.Contains(errs, "not a Proxmox VE node") {
		t.Errorf("not a node: %d %s", code, errs)
	}
	// An empty node: the collection's own series only.
	out, errs, code := runCLI(t, "--root", root, "metrics")
	if code != 0 || errs != "" || !strings.Contains(out, "pvediskcheck_collect_errors{source=\"qmp\"} 0\n") || strings.Contains(out, "vmid=") {
		t.Errorf("empty node: exit %d %s\n%s", code, errs, out)
	}
}

// --listen :PORT serves on every interface, and says so on stderr (one
// line, and how to serve this node only); a loopback address says nothing.
func TestMetricsListenAllInterfaces(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "etc/pve/qemu-server"), 0o755)
	_, port, _ := net.SplitHostPort(freeAddr(t))
	for _, c := range []struct{ addr, warning string }{
		{":" + port, "pvediskcheck: --listen :" + port + " listens on every interface of this node (every address it has); for this node only: --listen 127.0.0.1:" + port + "\n"},
		{"127.0.0.1:" + port, ""},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		var errb bytes.Buffer // read once run has returned
		done := make(chan int, 1)
		go func() {
			done <- run(ctx, []string{"pvediskcheck", "--root", root, "metrics", "--listen", c.addr}, io.Discard, &errb)
		}()
		var code int
		var body string
		for i := 0; ; i++ {
			resp, err := http.Get("http://127.0.0.1:" + port + "/metrics")
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				code, body = resp.StatusCode, string(b)
				break
			}
			if i > 500 {
				t.Fatalf("%s: %v", c.addr, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
		exit := <-done
		if errs := errb.String(); exit != 0 || code != 200 || !strings.Contains(body, "pvediskcheck_collect_errors") || errs != c.warning {
			t.Errorf("%s: exit %d, scrape %d, stderr %q", c.addr, exit, code, errs)
		}
	}
}

// metricsNode is a node of the harness with Lab 37's VM 370 (-blockdev,
// scsi1 limited to 20 MiB/s of writes) and VM 371 (-drive, two disks)
// running, lvs answering for its thin pool.
func metricsNode(t *testing.T) (*fakenode.Node, *fakenode.VM) {
	t.Helper()
	n := fakenode.NewT(t)
	n.UseDoubles(t)
	lab370(t, n, "")
	n.WriteConfig(370, strings.Replace(fakenode.Lab370Config, "vm-370-disk-1,iothread=1,", "vm-370-disk-1,iothread=1,mbps_wr=20,", 1))
	n.MustVolume(t, "local-lvm", "vm-371-disk-0", 64<<20)
	n.MustVolume(t, "local", "371/vm-371-disk-1.qcow2", 64<<20)
	n.WriteConfig(371, "scsihw: virtio-scsi-pci\nscsi0: local-lvm:vm-371-disk-0,cache=writeback,size=64M\nvirtio0: local:371/vm-371-disk-1.qcow2,size=64M\n")
	vm370 := n.MustStart(t, 370, fakenode.ArgvOptions{Blockdev: true})
	n.MustStart(t, 371, fakenode.ArgvOptions{Legacy: true})
	return n, vm370
}

// The exposition passes promtool's lint on stdout, in the textfile and on
// /metrics; the textfile is never seen half-written while metrics
// rewrites it; /metrics serves nothing else.
func TestMetricsPromtool(t *testing.T) {
	requireTool(t, "promtool")
	n, _ := metricsNode(t)
	out, errs, code := runCLI(t, "--root", n.Root, "metrics")
	if code != 0 || errs != "" {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{`pvediskcheck_disk_info{aio="io_uring",cache_configured="none",cache_effective="none",controller="virtio-scsi-single",discard="ignore",disk="scsi1",iothread="iothread-virtioscsi1",storage="local-lvm",vmid="370"} 1`,
		`pvediskcheck_disk_info{aio="io_uring",cache_configured="writeback",cache_effective="writeback",controller="virtio-scsi-pci",discard="ignore",disk="scsi0",iothread="",storage="local-lvm",vmid="371"} 1`,
		`pvediskcheck_disk_limit_bytes_per_second{direction="write",disk="scsi1",vmid="370"} 2.097152e+07`,
		`pvediskcheck_thinpool_info{pool="` + n.VG + `/data",storage="local-lvm",type="lvmthin"} 1`,
		`pvediskcheck_vm_cpu_seconds_total{role="vcpu",vmid="371"} `,
		`pvediskcheck_collect_errors{source="qmp"} 0`, `pvediskcheck_collect_errors{source="thinpool"} 0`, `pvediskcheck_collect_errors{source="threads"} 0`} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %s", want)
		}
	}
	promtoolCheck(t, "stdout", out)

	dir := t.TempDir()
	if out, errs, code := runCLI(t, "--root", n.Root, "metrics", "--textfile", dir); code != 0 || out != "" || errs != "" {
		t.Fatalf("--textfile: exit %d %q %q", code, out, errs)
	}
	b, err := os.ReadFile(filepath.Join(dir, metrics.TextfileName))
	if err != nil {
		t.Fatal(err)
	}
	promtoolCheck(t, "the textfile", string(b))
	families := func(text string) (int, error) {
		p := expfmt.NewTextParser(model.LegacyValidation)
		mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
		return len(mfs), err
	}
	want, err := families(string(b))
	if err != nil {
		t.Fatal(err)
	}
	// Rewritten by the command again and again while read.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	rewrites := 0
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, errs, code := runCLI(t, "--root", n.Root, "metrics", "--textfile", dir); code != 0 {
				t.Errorf("rewrite: %d %s", code, errs)
				return
			}
			rewrites++
		}
	}()
	reads := 0
	for start := time.Now(); time.Since(start) < 3*time.Second; reads++ {
		b, err := os.ReadFile(filepath.Join(dir, metrics.TextfileName))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := families(string(b)); err != nil || got != want {
			t.Fatalf("read %d: %d families (want %d): %v\n%s", reads, got, want, err, b)
		}
	}
	close(stop)
	wg.Wait()
	if ents, _ := os.ReadDir(dir); len(ents) != 1 || rewrites < 2 {
		t.Errorf("%d rewrites; directory %v", rewrites, ents)
	}
	t.Logf("%d reads of the textfile during %d rewrites: every one whole", reads, rewrites)

	addr := serveMetrics(t, n.Root)
	code, page := httpGet(t, "http://"+addr+"/metrics")
	if code != 200 || !strings.Contains(page, `disk="virtio0",vmid="371"`) {
		t.Fatalf("/metrics: %d\n%.500s", code, page)
	}
	promtoolCheck(t, "/metrics", page)
	for _, p := range []string{"/", "/debug/pprof/", "/metrics/../x"} {
		if code, _ := httpGet(t, "http://"+addr+p); code != 404 {
			t.Errorf("%s: %d, want 404", p, code)
		}
	}
	resp, err := http.Post("http://"+addr+"/metrics", "text/plain", nil)
	if err != nil || resp.StatusCode != 405 {
		t.Errorf("POST /metrics: %v %v", resp.StatusCode, err)
	}
}

// promQuery asks Prometheus' HTTP API for an instant vector.
func promQuery(t *testing.T, addr, q string) []struct {
	Metric map[string]string `json:"metric"`
	Value  [2]any            `json:"value"`
} {
	t.Helper()
	code, body := httpGet(t, "http://"+addr+"/api/v1/query?query="+url.QueryEscape(q))
	var r struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &r); err != nil || code != 200 || r.Status != "success" {
		t.Fatalf("query %s: %d %v\n%s", q, code, err, body)
	}
	return r.Data.Result
}

func value(t *testing.T, v [2]any) float64 {
	t.Helper()
	var f float64
	if _, err := fmt.Sscan(v[1].(string), &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// startPrometheus runs Prometheus (scrapes and rule evaluations every
// second, the package's rule file loaded) on target until the test ends,
// and returns its address once it is ready.
func startPrometheus(t *testing.T, prom, target string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nrule_files: ['%s']\nscrape_configs:\n  - job_name: pvediskcheck\n    static_configs:\n      - targets: ['%s']\n", rulesPath(t), target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	var plog bytes.Buffer
	cmd := exec.Command(prom, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--log.level=warn")
	cmd.Stdout, cmd.Stderr = &plog, &plog
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus:\n%s", plog.String())
		}
	})
	for i := 0; ; i++ {
		if resp, err := http.Get("http://" + addr + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if i > 300 {
			t.Fatalf("prometheus not ready:\n%s", plog.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return addr
}

// Debian's Prometheus scrapes `metrics --listen` on a node of the harness
// while qemu-io writes to VM 370's scsi1 under its 20 MiB/s limit: every
// running disk has its info series, the loaded disk's write rate is the
// limit within 5 %, the idle ones' 0, and the findings are check --json's;
// it loads the package's alert rules, which hold active what check finds,
// and the dashboard's queries return series.
func TestMetricsPrometheus(t *testing.T) {
	prom := requireTool(t, "prometheus")
	n, vm370 := metricsNode(t)
	// 371's scsi0 runs with cache=writeback, its config now says none:
	// check's drift, and the drift alert pending.
	n.WriteConfig(371, "scsihw: virtio-scsi-pci\nscsi0: local-lvm:vm-371-disk-0,cache=none,size=64M\nvirtio0: local:371/vm-371-disk-1.qcow2,size=64M\n")
	load := vm370.StartLoad(fakenode.LoadSpec{Disk: "scsi1", Write: true, Size: 256 << 10, Depth: 16, Span: 64 << 20})
	defer load.Stop()
	target := serveMetrics(t, n.Root)

	addr := startPrometheus(t, prom, target)
	// 5 s for the throttle's first burst, then 20 s of steady writes.
	time.Sleep(26 * time.Second)

	up := promQuery(t, addr, `up{job="pvediskcheck"}`)
	if len(up) != 1 || value(t, up[0].Value) != 1 {
		t.Fatalf("up: %v", up)
	}
	if r := promQuery(t, addr, `sum(pvediskcheck_collect_errors)`); len(r) != 1 || value(t, r[0].Value) != 0 {
		t.Errorf("collection errors: %v", r)
	}
	// Every running disk, as cache --json lists it, has its info series.
	var info []string
	for _, r := range promQuery(t, addr, `pvediskcheck_disk_info`) {
		info = append(info, r.Metric["vmid"]+"/"+r.Metric["disk"]+"/"+r.Metric["cache_effective"]+"/"+r.Metric["iothread"])
	}
	sort.Strings(info)
	var want []string
	for _, id := range []string{"370", "371"} {
		var view struct {
			Disks []struct {
				ID    string `json:"id"`
				Cache struct {
					Effective *string `json:"effective"`
				} `json:"cache"`
				IOThread bool `json:"iothread"`
			} `json:"disks"`
		}
		if errs, code := runJSON(t, n, &view, "cache", id); code != 0 {
			t.Fatalf("cache %s: %d %s", id, code, errs)
		}
		for _, d := range view.Disks {
			it := ""
			if d.IOThread {
				it = "iothread-virtioscsi" + strings.TrimPrefix(d.ID, "scsi")
				if strings.HasPrefix(d.ID, "virtio") {
					it = "iothread-" + d.ID
				}
			}
			want = append(want, id+"/"+d.ID+"/"+*d.Cache.Effective+"/"+it)
		}
	}
	sort.Strings(want)
	if strings.Join(info, " ") != strings.Join(want, " ") {
		t.Errorf("info series\n%v\nwant (cache --json)\n%v", info, want)
	}
	// The loaded disk writes at its limit, the others not at all.
	rates := map[string]float64{}
	for _, r := range promQuery(t, addr, `rate(pvediskcheck_disk_write_bytes_total[20s])`) {
		rates[r.Metric["vmid"]+"/"+r.Metric["disk"]] = value(t, r.Value)
	}
	got := rates["370/scsi1"] / (20 << 20)
	t.Logf("rate(pvediskcheck_disk_write_bytes_total[20s]) of 370/scsi1 under mbps_wr=20: %.2f MiB/s (%d series)", got*20, len(rates))
	if math.Abs(got-1) > 0.05 {
		t.Errorf("370/scsi1 writes %.2f MiB/s in Prometheus, want 20 MiB/s within 5 %%", got*20)
	}
	if len(rates) != len(want) {
		t.Errorf("%d write rate series for %d disks", len(rates), len(want))
	}
	for d, r := range rates {
		if d != "370/scsi1" && r != 0 {
			t.Errorf("%s writes %.0f B/s, want 0", d, r)
		}
	}
	if r := promQuery(t, addr, `pvediskcheck_disk_limit_bytes_per_second{vmid="370",disk="scsi1",direction="write"}`); len(r) != 1 || value(t, r[0].Value) != 20<<20 {
		t.Errorf("limit: %v", r)
	}
	if r := promQuery(t, addr, `rate(pvediskcheck_iothread_cpu_seconds_total{vmid="370",iothread="iothread-virtioscsi1"}[20s])`); len(r) != 1 || value(t, r[0].Value) <= 0 {
		t.Errorf("the loaded disk's iothread did not run: %v", r)
	}
	// The findings: what check --all --json finds, counted.
	var rep check.Report
	if errs, code := runJSON(t, n, &rep, "check", "--all"); code > exitProblem {
		t.Fatalf("check: %d %s", code, errs)
	}
	counts := map[string]int{}
	for _, v := range rep.VMs {
		for _, f := range v.Findings {
			counts[fmt.Sprintf("%d/%s/%s", v.VMID, f.Code, f.Severity)]++
		}
	}
	got2 := map[string]int{}
	for _, r := range promQuery(t, addr, `pvediskcheck_check_findings`) {
		got2[r.Metric["vmid"]+"/"+r.Metric["code"]+"/"+r.Metric["severity"]] = int(value(t, r.Value))
	}
	if fmt.Sprint(got2) != fmt.Sprint(counts) || len(counts) == 0 {
		t.Errorf("findings in Prometheus %v, check --json %v", got2, counts)
	}
	// The package's alert rules load and evaluate; the dashboard's queries
	// return series (monitoring_test.go).
	checkRules(t, addr)
	checkDashboard(t, addr)
	checkAlerts(t, addr, rep)
	if st := load.Stop(); st.Err != nil {
		t.Errorf("load: %v", st.Err)
	}
}
