package main

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/dpkg"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
)

// TestCheckAllReadsDpkgStatusOnce: check --all over stopped VMs whose
// machine is unpinned (each starts with the installed pve-qemu-kvm's
// machine, read from dpkg's status) opens the status file once for the
// run, not once per VM; a run whose VMs all pin their machine opens it
// not at all. The opens are counted by the kernel (inotify IN_OPEN), not
// by a hook of the tool's; --parallel 1, so that no two reads overlap
// (inotify folds an event into an identical one still queued: opens are
// told apart by the close between them).
func TestCheckAllReadsDpkgStatusOnce(t *testing.T) {
	n := fakenode.NewT(t)
	status := filepath.Join(n.Root, dpkg.StatusFile)
	if err := os.MkdirAll(filepath.Dir(status), 0o755); err != nil {
		t.Fatal(err)
	}
	// PVE 8's QEMU: an unpinned machine starts with -drive.
	if err := os.WriteFile(status, []byte("Package: pve-qemu-kvm\nStatus: install ok installed\nArchitecture: amd64\nVersion: 9.2.0-7\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		machine string // "" unpinned
		opens   int
	}{
		{"unpinned", "", 1},
		{"pinned", "machine: pc-q35-10.0\n", 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			ids := []int{371, 372, 373, 374}
			for _, id := range ids {
				if err := n.WriteConfig(id, sf("ostype: l26\n%sscsi0: local:%d/vm-%d-disk-0.raw,size=1G\n", c.machine, id, id)); err != nil {
					t.Fatal(err)
				}
			}
			opens := countOpens(t, status)
			var rep check.Report
			errs, _ := runJSON(t, n, &rep, "check", "--all", "--parallel", "1")
			if got := opens(); got != c.opens {
				t.Errorf("%s opened %d times by check --all over %d stopped VMs, want %d", dpkg.StatusFile, got, len(ids), c.opens)
			}
			if len(rep.VMs) != len(ids) {
				t.Fatalf("%d VMs checked, want %d: %s", len(rep.VMs), len(ids), errs)
			}
			for _, v := range rep.VMs {
				if v.Err != nil || v.Running {
					t.Errorf("VM %d: running %v, err %v", v.VMID, v.Running, v.Err)
				}
			}
		})
	}
}

// countOpens watches path with inotify and returns how many times it was
// opened since (the kernel queues IN_OPEN as the open returns, so a count
// taken after the command returned holds every open of it). The closes
// are watched too: inotify coalesces an event with the identical one
// before it while unread, and a close between two opens keeps them two.
func countOpens(t *testing.T, path string) func() int {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_OPEN|unix.IN_CLOSE_NOWRITE); err != nil {
		t.Fatal(err)
	}
	return func() int {
		count := 0
		buf := make([]byte, 64<<10)
		for {
			k, err := unix.Read(fd, buf)
			if errors.Is(err, unix.EAGAIN) {
				return count
			}
			if err != nil {
				t.Fatal(err)
			}
			r := bytes.NewReader(buf[:k])
			for r.Len() > 0 {
				var ev unix.InotifyEvent
				if err := binary.Read(r, binary.NativeEndian, &ev); err != nil {
					t.Fatal(err)
				}
				r.Seek(int64(ev.Len), 1)
				if ev.Mask&unix.IN_OPEN != 0 {
					count++
				}
			}
		}
	}
}
