package metrics

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

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
