package metrics

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/advisory"
	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/policy"

	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// Issue 21 #1: a QMP reply of 12 MB of nesting made the validator overflow
// Go's stack and killed `metrics --listen` outright. The VM whose reply it
// is counts as a QMP error; the exporter answers every scrape, with the
// other VMs' series, as before and after.
func TestHostileReplyKeepsServing(t *testing.T) {
	f := loadFixture(t, "lab370-blockdev")
	r := f.start(t, nil, 0, qmptest.Greeting72)
	f.start(t, r.n, 371, qmptest.Greeting72)
	// VM 371's QEMU answers its counters with a hostile reply, its
	// other commands as recorded.
	recorded := vmtest.Recorded(f.Replies)
	hostile := qmptest.NewQEMU(t, func(cmd string, args gjson.Result) string {
		if cmd == "query-blockstats" {
			return strings.Repeat("[", 12<<20)
		}
		return recorded(cmd, args)
	})
	sock := r.n.Paths.QMPSocket(371)
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(hostile.Sock(), sock); err != nil {
		t.Fatal(err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ln, Handler(r.node(), Options{}, 10*time.Second), ServerTimeouts(10*time.Second))
	}()
	for i := 0; i < 2; i++ {
		start := time.Now()
		resp, err := http.Get("http://" + ln.Addr().String() + "/metrics")
		if err != nil {
			t.Fatalf("scrape %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		text := string(b)
		if resp.StatusCode != 200 || !strings.Contains(text, `pvediskcheck_collect_errors{source="qmp"} 1`) {
			t.Errorf("scrape %d: %d, want the hostile VM counted as one QMP error:\n%.2000s", i, resp.StatusCode, only(text, "pvediskcheck_collect_errors"))
		}
		// VM 370's counters, VM 371's findings (its config and first
		// exchange are fine), and no counters of VM 371.
		if !strings.Contains(text, `pvediskcheck_disk_discard_bytes_total{disk="scsi1",vmid="370"}`) ||
			!strings.Contains(text, `pvediskcheck_check_findings{code="drift",severity="warning",vmid="371"} 1`) ||
			strings.Contains(text, `pvediskcheck_disk_discard_bytes_total{disk="scsi1",vmid="371"}`) {
			t.Errorf("scrape %d: want VM 370's counters, VM 371's findings and no counters of VM 371:\n%s", i, text)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Errorf("scrape %d took %s", i, took)
		}
	}
	if hostile.Commands() == 0 {
		t.Error("the hostile QEMU was never asked")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// Issue 31: one VM whose data holds a value that is not UTF-8 made
// client_golang refuse the whole collection (stdout empty, --listen a 500
// with a stack trace, --textfile nothing). Every source of a label value,
// one at a time: that VM (or pool) has no series and counts in
// collect_errors{source="labels"}; the other VM and the pools are exported.
func TestBadLabelValueIsThatVMsError(t *testing.T) {
	bad := "iothread-\xff\xfe\x1b[2J"
	for _, c := range []struct {
		name string
		set  func(s *Snapshot)
		pool bool // the pool is the one refused
	}{
		{"disk id", func(s *Snapshot) { s.VMs[1].Disks[0].ID = bad }, false},
		{"controller", func(s *Snapshot) { s.VMs[1].Disks[0].Controller = bad }, false},
		{"storage", func(s *Snapshot) { s.VMs[1].Disks[0].Storage = bad }, false},
		{"cache configured", func(s *Snapshot) { s.VMs[1].Disks[0].CacheConfigured = bad }, false},
		{"cache effective", func(s *Snapshot) { s.VMs[1].Disks[0].CacheEffective = bad }, false},
		{"aio", func(s *Snapshot) { s.VMs[1].Disks[0].AIO = bad }, false},
		{"disk's iothread", func(s *Snapshot) { s.VMs[1].Disks[0].IOThread = bad }, false},
		{"discard", func(s *Snapshot) { s.VMs[1].Disks[0].Discard = bad }, false},
		{"iothread's CPU", func(s *Snapshot) { s.VMs[1].CPU.IOThreads[bad] = 1 }, false},
		{"finding code", func(s *Snapshot) {
			s.VMs[1].Findings = []check.Finding{{Code: check.Code(bad), Severity: check.Warning}}
		}, false},
		{"QEMU's package string", func(s *Snapshot) {
			s.VMs[1].QEMU = &advisory.Binary{Package: "pve-qemu-kvm_" + bad, Version: "9.2.0"}
		}, false},
		{"policy rule of the VM", func(s *Snapshot) { s.VMs[1].Policy = []policy.RuleCount{{Rule: bad, Violations: 1}} }, false},
		{"pool storage", func(s *Snapshot) { s.Pools[0].Storage = bad }, true},
		{"pool name", func(s *Snapshot) { s.Pools[0].Pool = bad }, true},
		{"pool type", func(s *Snapshot) { s.Pools[0].Type = bad }, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := sample(1)
			other := s.VMs[0]
			other.VMID = 101
			other.Disks = append([]Disk(nil), other.Disks...)
			other.CPU = &CPU{MainLoop: 1, IOThreads: map[string]float64{"iothread-virtioscsi0": 1}}
			s.VMs = append(s.VMs, other)
			s.VMs[0], s.VMs[1] = s.VMs[1], s.VMs[0] // 100 second, the one made bad
			s.Errors = map[Source]int{}
			c.set(s)
			s.Exportable()
			var b strings.Builder
			if err := WriteText(&b, s); err != nil {
				t.Fatalf("WriteText: %v", err)
			}
			text := b.String()
			if !strings.Contains(text, `pvediskcheck_collect_errors{source="labels"} 1`) {
				t.Errorf("not counted:\n%s", only(text, "pvediskcheck_collect_errors"))
			}
			if !strings.Contains(text, `pvediskcheck_disk_write_bytes_total{disk="scsi0",vmid="101"} 1`) {
				t.Errorf("the other VM is missing:\n%s", text)
			}
			if has100 := strings.Contains(text, `vmid="100"`); has100 == !c.pool {
				t.Errorf("VM 100 exported %v, want %v:\n%s", has100, c.pool, text)
			}
			if hasPool := strings.Contains(text, "pvediskcheck_thinpool_size_bytes"); hasPool == c.pool {
				t.Errorf("pool exported %v, want %v", hasPool, !c.pool)
			}
			if strings.Contains(text, "\xff") || strings.Contains(text, "\x1b") {
				t.Error("the bad value reached the exposition")
			}
			// What the registry serves: 200, not a 500 with a trace.
			rec := httptest.NewRecorder()
			promhttp.HandlerFor(Registry(s), promhttp.HandlerOpts{ErrorHandling: promhttp.HTTPErrorOnError}).ServeHTTP(rec, httptest.NewRequest("GET", Path, nil))
			if rec.Code != 200 {
				t.Errorf("served %d: %.300s", rec.Code, rec.Body.String())
			}
		})
	}
	// A policy rule of the node (its disks' count) named with bytes that
	// are not UTF-8 is left out, the other rules and VMs exported.
	ps := sample(1)
	ps.Errors = map[Source]int{}
	ps.PolicyRules = []policy.RuleCount{{Rule: bad, Disks: 1}, {Rule: "fast", Disks: 2}}
	ps.Exportable()
	var pb strings.Builder
	if err := WriteText(&pb, ps); err != nil || !strings.Contains(pb.String(), `pvediskcheck_policy_rule_disks{rule="fast"} 2`) ||
		strings.Count(pb.String(), "pvediskcheck_policy_rule_disks{") != 1 || !strings.Contains(pb.String(), `pvediskcheck_collect_errors{source="labels"} 1`) {
		t.Errorf("policy rules: %v\n%s", err, pb.String())
	}
	// A snapshot not passed through Exportable still never sends part of
	// a VM, nor fails whole.
	s := sample(1)
	s.VMs[0].CPU.IOThreads[bad] = 1
	var b strings.Builder
	if err := WriteText(&b, s); err != nil || strings.Contains(b.String(), `vmid="100"`) || !strings.Contains(b.String(), "pvediskcheck_thinpool_size_bytes") {
		t.Errorf("%v\n%s", err, b.String())
	}
}

// The same end to end: VM 371's QEMU names an iothread with bytes that are
// not UTF-8 (its thread's CPU is read, so the id becomes a label value):
// stdout, --listen and --textfile export VM 370 and count VM 371 as one
// labels error.
func TestBadIOThreadIDEndToEnd(t *testing.T) {
	f := loadFixture(t, "lab370-blockdev")
	r := f.start(t, nil, 0, qmptest.Greeting72)
	f.start(t, r.n, 371, qmptest.Greeting72)
	recorded := vmtest.Recorded(f.Replies)
	hostile := qmptest.NewQEMU(t, func(cmd string, args gjson.Result) string {
		ret := recorded(cmd, args)
		if cmd == "query-iothreads" {
			ret = strings.Replace(ret, `"iothread-virtioscsi0"`, "\"iothread-\xff\xfe\"", 1)
		}
		return ret
	})
	sock := r.n.Paths.QMPSocket(371)
	if err := os.Remove(sock); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(hostile.Sock(), sock); err != nil {
		t.Fatal(err)
	}
	check := func(how, text string) {
		t.Helper()
		if !strings.Contains(text, `pvediskcheck_collect_errors{source="labels"} 1`) ||
			!strings.Contains(text, `pvediskcheck_disk_discard_bytes_total{disk="scsi1",vmid="370"}`) || strings.Contains(text, `vmid="371"`) {
			t.Errorf("%s: want VM 370's series, none of VM 371, one labels error:\n%s", how, text)
		}
	}
	var b strings.Builder
	if err := WriteText(&b, Collect(context.Background(), r.node(), Options{})); err != nil {
		t.Fatalf("stdout: %v", err)
	}
	check("stdout", b.String())

	dir := t.TempDir()
	tf, err := CheckTextfile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteTextfile(tf, Collect(context.Background(), r.node(), Options{})); err != nil {
		t.Fatalf("textfile: %v", err)
	}
	text, _ := os.ReadFile(filepath.Join(dir, TextfileName))
	check("textfile", string(text))

	srv := httptest.NewServer(Handler(r.node(), Options{}, 10*time.Second))
	defer srv.Close()
	resp, err := http.Get(srv.URL + Path)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Errorf("listen: %d %.500s", resp.StatusCode, body)
	}
	check("listen", string(body))
}
