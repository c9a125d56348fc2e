package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// metrics --listen --histogram on real QEMU: the first scrape sets the
// histograms, the next ones export them (cumulative, counting the writes
// qemu-io keeps sending, valid for promtool), and they are cleared when the
// exporter ends. Without --listen, --histogram is refused.
func TestMetricsHistogramRealQEMU(t *testing.T) {
	n, vmq := startLab370(t, "blockdev")
	if _, errs, code := runCLI(t, "--root", n.Root, "metrics", "--histogram"); code != 2 || !strings.Contains(errs, "--histogram needs --listen") {
		t.Errorf("without --listen: exit %d %s", code, errs)
	}
	load := vmq.StartLoad(fakenode.LoadSpec{Disk: "scsi1", Write: true, Size: 64 << 10, Depth: 4, Random: true, Span: fakenode.Lab370DiskSize})
	defer load.Stop()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	var errb bytes.Buffer
	go func() {
		done <- run(ctx, []string{"pvediskcheck", "--root", n.Root, "metrics", "--listen", addr, "--histogram"}, io.Discard, &errb)
	}()
	for i := 0; ; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			break
		}
		if i > 200 {
			t.Fatal("metrics --listen did not listen")
		}
		time.Sleep(10 * time.Millisecond)
	}
	count := regexp.MustCompile(`(?m)^pvediskcheck_disk_write_latency_seconds_count\{disk="scsi1",vmid="370"\} (\d+)$`)
	var counts []int
	for i := 0; i < 3; i++ {
		code, body := httpGet(t, "http://"+addr+"/metrics")
		if code != 200 {
			t.Fatalf("scrape %d: %d %s", i, code, body)
		}
		if m := count.FindStringSubmatch(body); m != nil {
			c, _ := strconv.Atoi(m[1])
			counts = append(counts, c)
			if i == 2 {
				promtoolCheck(t, "the exposition with histograms", body)
				if !strings.Contains(body, `pvediskcheck_disk_write_latency_seconds_bucket{disk="scsi1",vmid="370",le="+Inf"}`) {
					t.Errorf("no +Inf bucket")
				}
			}
		}
		time.Sleep(time.Second)
	}
	if len(counts) < 2 || counts[len(counts)-1] <= counts[0] {
		t.Errorf("write histogram counts %v: want growing counts from the second scrape on", counts)
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d: %s", code, errb.String())
		}
	case <-time.After(15 * time.Second):
		t.Fatal("metrics did not end")
	}
	if !strings.Contains(errb.String(), "--histogram: setting QEMU latency histograms") {
		t.Errorf("stderr does not say it changes QEMU: %s", errb.String())
	}
	if err := qmp.DoRetry(context.Background(), n.Paths.QMPSocket(370), 5*time.Second, 10*time.Second, func(s qmp.Session) error {
		ret, err := s.Exec("query-blockstats", nil)
		for _, e := range qmp.ParseBlockstats(ret) {
			if e.WrLatency != nil {
				t.Errorf("%s keeps a histogram after metrics ended", e.ID)
			}
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
