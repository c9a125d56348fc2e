package fakenode

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Frozen is a dir storage on its own ext4 filesystem (a loop-mounted
// image) that a test can freeze (fsfreeze -f) to make every write to its
// volumes block in the kernel, as a storage that stops answering does.
type Frozen struct {
	Storage string // the storage id in storage.cfg
	Mount   string // the mount point (the storage's path)
	frozen  bool
}

// FreezableStorage adds dir storage id on a fresh 64 MiB ext4 mount. The
// filesystem is thawed and unmounted at cleanup whatever the test did.
func (n *Node) FreezableStorage(t testing.TB, id string) *Frozen {
	t.Helper()
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	if err := truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v: %s", err, out)
	}
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v: %s", err, out)
	}
	f := &Frozen{Storage: id, Mount: mnt}
	// Registered after TempDir's removal, so it runs first: thaw (always,
	// a frozen mount left behind hangs every writer on the host), stop the
	// VMs that hold files on it, unmount.
	t.Cleanup(func() {
		_ = exec.Command("fsfreeze", "-u", mnt).Run()
		for _, vm := range n.vms {
			vm.Stop()
		}
		_ = exec.Command("umount", "-l", mnt).Run()
	})
	if err := n.WriteStorageCfg("dir: " + id + "\n\tpath " + mnt + "\n\tcontent images\n"); err != nil {
		t.Fatal(err)
	}
	return f
}

// Freeze blocks every write to the filesystem (fsfreeze -f).
func (f *Frozen) Freeze(t testing.TB) {
	t.Helper()
	if out, err := exec.Command("fsfreeze", "-f", f.Mount).CombinedOutput(); err != nil {
		t.Fatalf("fsfreeze -f: %v: %s", err, out)
	}
	f.frozen = true
}

// Thaw lets the blocked writes complete (fsfreeze -u).
func (f *Frozen) Thaw(t testing.TB) {
	t.Helper()
	if !f.frozen {
		return
	}
	if out, err := exec.Command("fsfreeze", "-u", f.Mount).CombinedOutput(); err != nil {
		t.Fatalf("fsfreeze -u: %v: %s", err, out)
	}
	f.frozen = false
}
