package metrics

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/heaptest"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// (issue 21) A config that is a symlink to a FIFO used to hang the
// collection for good, and every scrape of `metrics --listen` with it; a
// symlink to /dev/zero grew memory without limit. Each is now that VM's
// config error, at once: the other VMs are collected, the server keeps
// answering, and recovers when the file is fixed.
func TestHostileConfigFiles(t *testing.T) {
	n, _ := manyDisks(t, 1, qmptest.Greeting111)
	fifo := n.Paths.Join("/etc/pve/fifo")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for vmid, target := range map[int]string{104: fifo, 105: "/dev/zero"} {
		if err := os.Symlink(target, n.Paths.VMConfig(vmid)); err != nil {
			t.Fatal(err)
		}
	}
	n.Write(t, n.Paths.VMConfig(106), "memory: 512\nname: "+strings.Repeat("x", 5<<20)+"\n")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, ln, Handler(bare(n.Paths, time.Minute), Options{}, 30*time.Second), ServerTimeouts(30*time.Second))
	}()
	defer func() { cancel(); <-done }()
	scrape := func() string {
		t.Helper()
		c := http.Client{Timeout: 10 * time.Second} // "does not hang": it used to never answer
		resp, err := c.Get("http://" + ln.Addr().String() + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d: %s", resp.StatusCode, b)
		}
		return string(b)
	}
	var text string
	peak := heaptest.Peak(func() { text = scrape() })
	for _, want := range []string{`pvediskcheck_collect_errors{source="config"} 3`, `disk="scsi0",vmid="100"`} {
		if !strings.Contains(text, want) {
			t.Errorf("first scrape lacks %s:\n%s", want, text)
		}
	}
	t.Logf("peak heap during the scrape: %.1f MiB", float64(peak)/(1<<20))
	if peak > 256<<20 {
		t.Errorf("peak heap %d bytes", peak)
	}
	// Fixed: the next scrape has that VM, and one error fewer.
	os.Remove(n.Paths.VMConfig(104))
	n.Write(t, n.Paths.VMConfig(104), "memory: 512\n")
	text = scrape()
	if !strings.Contains(text, `pvediskcheck_collect_errors{source="config"} 2`) || !strings.Contains(text, `disk="scsi0",vmid="100"`) {
		t.Errorf("after the fix:\n%s", text)
	}
	s := Collect(context.Background(), bare(n.Paths, time.Second), Options{})
	if fmt.Sprint(s.Errors) != "map[config:2]" || len(s.VMs) != 4 || !s.VMs[0].Live || s.VMs[1].VMID != 104 {
		t.Errorf("errors %v, %d VMs", s.Errors, len(s.VMs))
	}
}
