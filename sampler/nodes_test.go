package sampler

import (
	"context"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// TestTakeNodes: the named nodes' counters come in the same exchange as
// the devices' (query-blockstats with query-nodes), others are left out.
func TestTakeNodes(t *testing.T) {
	q := qmptest.NewQEMU(t, func(cmd string, args gjson.Result) string {
		if args.Get("query-nodes").Bool() {
			return qmptest.Return(`[{"node-name":"e1","stats":{"unmap_operations":0},"driver-specific":{"discard-nb-ok":3,"discard-bytes-ok":12288,"discard-nb-failed":1}},{"node-name":"f1","stats":{}}]`)
		}
		return qmptest.Return(`[{"device":"","qdev":"scsi1","node-name":"drive-scsi1","stats":{"unmap_operations":3,"unmap_bytes":12288}}]`)
	})
	b := &Blockstats{Socket: q.Sock(), Disks: []string{"scsi1"}, Nodes: []string{"e1"}, Timeout: time.Second}
	s, err := b.Take(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if n := s.Nodes["e1"]; len(s.Nodes) != 1 || n.DiscardNbOK != 3 || n.DiscardBytesOK != 12288 || n.DiscardNbFailed != 1 || s.Stats["scsi1"].UnmapOps != 3 {
		t.Errorf("sample %+v", s)
	}
	if q.Conns() != 1 || q.Commands() != 2 {
		t.Errorf("%d connections, %d commands: want one exchange of two", q.Conns(), q.Commands())
	}
	// Without Nodes, one command and no node map.
	b.Nodes = nil
	if s, err = b.Take(context.Background()); err != nil || s.Nodes != nil || q.Commands() != 3 {
		t.Errorf("%v %+v, %d commands", err, s, q.Commands())
	}
}
