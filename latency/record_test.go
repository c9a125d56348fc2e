//go:build record

package latency_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// TestRecordFixtures records latency/testdata from real QEMU (root, loop
// devices; testdata/README.md):
//
//	go test -tags record -run TestRecordFixtures -count=1 ./latency/
func TestRecordFixtures(t *testing.T) {
	v, err := fakenode.QEMUVersion(fakenode.QEMUBinary())
	if err != nil {
		t.Fatal(err)
	}
	sc := runThrottled(t, 20, 8, 8*time.Second)
	// Someone else's histogram: boundaries 1, 10 and 100 ms, set over ours
	// (block-latency-histogram-set replaces).
	var foreign json.RawMessage
	if err := sc.exch(context.Background(), func(s qmp.Session) error {
		if _, err := s.Exec("block-latency-histogram-set", map[string]any{"id": "scsi1", "boundaries": []int64{1e6, 1e7, 1e8}}); err != nil {
			return err
		}
		time.Sleep(time.Second)
		r, err := s.Exec("query-blockstats", nil)
		foreign = json.RawMessage(r.Raw)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"iops20-depth8-a": sc.a, "iops20-depth8-b": sc.b, "foreign": foreign} {
		p := filepath.Join("testdata", "qemu-"+v, "query-blockstats-"+name+".json")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
