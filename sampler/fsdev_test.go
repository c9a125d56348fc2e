package sampler

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
)

// The device under a file's filesystem is the one its st_dev names in
// sysfs; a missing path and a filesystem on no block device (/proc) have
// none.
func TestFilesystemDeviceName(t *testing.T) {
	h := Host{Proc: "/proc", Sys: "/sys"}
	if _, ok := h.FilesystemDeviceName("/nonexistent/pvediskcheck"); ok {
		t.Error("a missing path has a device")
	}
	if name, ok := h.FilesystemDeviceName("/proc/self/stat"); ok {
		t.Errorf("procfs on %s", name)
	}
	f := t.TempDir() + "/vol.raw"
	if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	name, ok := h.FilesystemDeviceName(f)
	if !ok {
		t.Skipf("%s is on a filesystem without a block device here (tmpfs, overlay)", f)
	}
	st, _ := os.Stat(f)
	dev := uint64(st.Sys().(*syscall.Stat_t).Dev)
	want := fmt.Sprintf("%d:%d", (dev>>8)&0xfff|(dev>>32)&^uint64(0xfff), dev&0xff|(dev>>12)&^uint64(0xff))
	b, err := os.ReadFile("/sys/class/block/" + name + "/dev")
	if err != nil || strings.TrimSpace(string(b)) != want {
		t.Errorf("%s: %s is %q (%v), want %s", f, name, b, err, want)
	}
	if _, err := h.BlockStatOf(name); err != nil {
		t.Error(err)
	}
}
