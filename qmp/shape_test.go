package qmp

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// Every recorded reply has the shape the tool relies on.
func TestRecordedRepliesHaveTheirShape(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("testdata", "qemu-*", "*", "*.json"))
	if len(files) < 40 {
		t.Fatalf("only %d recorded replies", len(files))
	}
	checked := 0
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		cmd := strings.TrimSuffix(filepath.Base(p), ".json")
		cmd = strings.TrimSuffix(cmd, "-nodes") // query-blockstats-nodes
		if !gjson.GetBytes(b, "return").Exists() {
			continue // recorded errors
		}
		if _, ok := shapes[cmd]; ok {
			checked++
		}
		r, err := scanReply(b, cmd)
		if err != nil || r.first != 'r' || r.shape != nil {
			t.Errorf("%s: %v, %c, %v", p, err, r.first, r.shape)
		}
	}
	if checked < 30 {
		t.Errorf("only %d replies had a shape to check", checked)
	}
}

func TestWrongShapesAreErrors(t *testing.T) {
	for _, c := range []struct{ cmd, ret, want string }{
		{"query-blockstats", `{"device": "x"}`, "the reply is"},
		{"query-blockstats", `[{"qdev": "/machine/peripheral/scsi1", "stats": {"wr_bytes": "12"}}]`, `entry 0's stats.wr_bytes is "\"12\"", not a number`},
		{"query-blockstats", `[{"qdev": 5, "stats": {}}]`, "entry 0's qdev is \"5\", not a string"},
		{"query-blockstats", `[7]`, "entry 0 is \"7\""},
		{"query-block", `[{"qdev": "/machine/peripheral/scsi1", "inserted": {"cache": {"direct": "yes"}}}]`, "inserted.cache.direct"},
		{"query-iothreads", `[{"id": "iothread-virtioscsi1", "thread-id": "123"}]`, "thread-id"},
		{"query-status", `[]`, "the reply is"},
	} {
		err := shapeOf(t, c.cmd, c.ret)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s: err = %v, want %q", c.cmd, c.ret, err, c.want)
		}
	}
	// Absent optional fields and commands without a shape pass.
	for _, c := range []struct{ cmd, ret string }{
		{"query-blockstats", `[{"device": "", "stats": {"wr_bytes": 1}}]`},
		{"query-block", `[{"qdev": "ide2", "io-status": "ok"}]`},
		{"qom-get", `"on"`},
		{"query-status", `{"status": "running", "running": true}`},
	} {
		if err := shapeOf(t, c.cmd, c.ret); err != nil {
			t.Errorf("%s %s: %v", c.cmd, c.ret, err)
		}
	}
}

// shapeOf is the shape error scanReply finds in a reply returning ret.
func shapeOf(t *testing.T, cmd, ret string) error {
	t.Helper()
	r, err := scanReply([]byte(qmptest.Return(ret)), cmd)
	if err != nil || r.first != 'r' {
		t.Fatalf("%s %s: %v, %c", cmd, ret, err, r.first)
	}
	return r.shape
}

// Through a session: a reply of the wrong shape is an error, not zeros.
func TestExecRefusesWrongShape(t *testing.T) {
	q := qmptest.NewQEMU(t, qmptest.Replies(map[string]string{"query-blockstats": `[{"device": "drive-scsi1", "stats": {"wr_bytes": "lots"}}]`}))
	err := Do(context.Background(), q.Sock(), time.Second, func(s Session) error {
		_, err := s.Exec("query-blockstats", nil)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "stats.wr_bytes") {
		t.Fatalf("err = %v", err)
	}
}
