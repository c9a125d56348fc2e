package fakenode

import (
	"os"
	"os/exec"
	"sync"
	"testing"
)

// NewT builds a node under t.TempDir() and removes everything at cleanup.
// Without QEMU it skips, except under CI=true where a missing QEMU fails.
func NewT(t testing.TB) *Node {
	t.Helper()
	RequireQEMU(t)
	n, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close)
	t.Logf("fake node %s, QEMU %s", n.Root, qemuVersionOnce())
	return n
}

var (
	versionOnce sync.Once
	versionStr  string
)

// qemuVersionOnce names the QEMU under test in every test's log.
func qemuVersionOnce() string {
	versionOnce.Do(func() {
		v, err := QEMUVersion(QEMUBinary())
		if err != nil {
			v = "unknown (" + err.Error() + ")"
		}
		versionStr = v + " (" + QEMUBinary() + ")"
	})
	return versionStr
}

// RequireQEMU fails (CI) or skips (elsewhere) when QEMU cannot run.
func RequireQEMU(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath(QEMUBinary()); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required in CI: run `make test`, which installs it", QEMUBinary())
		}
		t.Skipf("%s not installed (make test installs it): %v", QEMUBinary(), err)
	}
	if os.Geteuid() != 0 {
		t.Skip("real-QEMU tests need root (loop devices, /dev/<vg> links)")
	}
}

// MustVolume is CreateVolume that fails the test on error.
func (n *Node) MustVolume(t testing.TB, storage, volname string, size int64) string {
	t.Helper()
	p, err := n.CreateVolume(storage, volname, size)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// MustStart is Start that fails the test on error.
func (n *Node) MustStart(t testing.TB, vmid int, o ArgvOptions) *VM {
	t.Helper()
	vm, err := n.Start(vmid, o)
	if err != nil {
		t.Fatal(err)
	}
	return vm
}
