//go:build integration

package alloc

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// TestQcow2 parses real qemu-img output, and measures a real image with the
// real qemu-img when it is installed.
func TestQcow2(t *testing.T) {
	v, a, err := ParseQemuImgInfo(read(t, "testdata/real-qemu-img-info-qcow2.json"))
	if err != nil || v != 64<<20 || a != 4460544 {
		t.Errorf("virtual %d actual %d err %v", v, a, err)
	}
	if _, _, err := ParseQemuImgInfo([]byte("qemu-img: Could not open 'x': No such file")); !errors.Is(err, ErrParse) {
		t.Errorf("garbage: %v", err)
	}
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img not installed")
	}
	p := filepath.Join(t.TempDir(), "vm-370-disk-1.qcow2")
	if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", p, "64M").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	dir := &qemuserver.Storage{ID: "local", Type: "dir"}
	r, err := NewMeter(node.Exec{Timeout: 5 * time.Second}, 0).Measure(context.Background(), Volume{Storage: dir, Path: p, Format: "qcow2"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Method != "qemu-img" || *r.VirtualBytes != 64<<20 || *r.AllocatedBytes <= 0 || *r.AllocatedBytes > 1<<20 {
		t.Errorf("%+v", r)
	}
}
