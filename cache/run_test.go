package cache

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/flush"
	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/node"
)

// The two sentences once per heading, in the order the disks come, with
// how much the heading's mode can lose.
func TestHeadings(t *testing.T) {
	view, _ := recorded(t, "real-blockdev-modes")
	var got []string
	for _, h := range view.Headings() {
		got = append(got, fmt.Sprintf("%s [%s] %s", h.Title, h.Risk, strings.Join(h.Disks, ",")))
		if h.AckedDataIn == "" || h.CrashLoses == "" {
			t.Errorf("%s: no sentences", h.Title)
		}
	}
	want := []string{
		"cd-rom [] ide2",
		"none, qcow2 [] sata1",
		"none [] scsi1,virtio1",
		"writethrough [] scsi2,virtio2",
		"writeback [unflushed] scsi3,virtio3",
		"directsync [] scsi4,virtio4",
		"unsafe [flushed] scsi5,virtio5",
		"unsafe, at the next start [flushed] scsi7",
		"EFI vars (writeback) [] efidisk0",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("headings:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	// Flags no mode names are as risky as unsafe; no guest disk is.
	for _, c := range []struct {
		d    Disk
		want Risk
	}{
		{Disk{Kind: "disk", Shown: "custom"}, RiskFlushed},
		{Disk{Kind: "disk", Shown: "unsafe"}, RiskFlushed},
		{Disk{Kind: "disk", Shown: "writeback"}, RiskUnflushed},
		{Disk{Kind: "disk", Shown: "none"}, RiskNone},
		{Disk{Kind: "efivars", Shown: "unsafe"}, RiskNone},
		{Disk{Kind: "cdrom", Shown: "writeback"}, RiskNone},
	} {
		if got := risk(c.d); got != c.want {
			t.Errorf("%s %s: %q, want %q", c.d.Kind, c.d.Shown, got, c.want)
		}
	}
	if h := (View{}).Headings(); len(h) != 0 {
		t.Errorf("no disks: %+v", h)
	}
}

func runNode(n *vmtest.Node) node.Node { return node.New(n.Paths, 2*time.Second) }

// Run: the view, and the error the run ends with.
func TestRun(t *testing.T) {
	ctx := context.Background()
	// Running, QMP answering: the view from QMP, the guest's names, no error.
	n, v := vmtest.LoadFixture(t, "testdata/real-blockdev-modes.json").Start(t)
	view, err := Run(ctx, runNode(n), v, v.Disks, false, flush.Options{})
	if err != nil || view == nil || !view.Running || len(view.Disks) != 14 || byID(*view)["sata1"].Cache.Effective == nil || *byID(*view)["sata1"].Cache.Effective != "none" {
		t.Fatalf("running: %v %+v", err, view)
	}
	if d := byID(*view)["scsi1"]; d.GuestByID == nil || !strings.HasSuffix(*d.GuestByID, "drive-scsi1") {
		t.Errorf("scsi1's guest name: %v", d.GuestByID)
	}
	// A tree with no cgroup of the VM: not measured and why, never 0.
	if u := view.Unflushed; u == nil || u.Measured || u.UnflushedBytes != nil || !strings.Contains(u.NotMeasured, "no /qemu.slice/380.scope with a memory.stat") {
		t.Errorf("unflushed without a cgroup: %+v", view.Unflushed)
	}
	// The build QEMU's greeting states (qmptest's 7.2), in a tree without
	// procfs (no exe) or dpkg status.
	if q := view.QEMU; q == nil || q.Package != "Debian 1:7.2+dfsg-7+deb12u7" || q.Name != "qemu-system-x86" || q.Version != "1:7.2+dfsg-7+deb12u7" ||
		q.Exe != "" || q.Replaced || q.Installed != "" || !strings.HasPrefix(q.InstalledUnknown, "no ") {
		t.Errorf("qemu: %+v", view.QEMU)
	}

	// --verify: the disks that can hold writes in node RAM are measured;
	// this recording has no query-blockstats, so the measurement fails, and
	// its error ends the run after the view.
	n, v = vmtest.LoadFixture(t, "testdata/real-blockdev-modes.json").Start(t)
	view, err = Run(ctx, runNode(n), v, v.Disks, true, flush.Options{Window: time.Second})
	if err == nil || !strings.Contains(err.Error(), "query-blockstats") || view == nil || len(view.Disks) != 14 {
		t.Errorf("verify: %v", err)
	}

	// --verify with no disk that can hold writes in node RAM: nothing to
	// measure, so nothing is asked of QEMU beyond the view.
	n, v = vmtest.LoadFixture(t, "testdata/real-virtio-held.json").Start(t)
	if view, err = Run(ctx, runNode(n), v, v.Disks, true, flush.Options{Window: time.Second}); err != nil || view.Disks[0].Flush != nil {
		t.Errorf("verify, nothing to verify: %v", err)
	}

	// Stopped: the configured values, exit 3.
	f := vmtest.LoadFixture(t, "testdata/real-drive-modes.json")
	f.Argv = nil
	n, v = f.Start(t)
	view, err = Run(ctx, runNode(n), v, v.Disks, true, flush.Options{})
	if exitcode.Of(err) != exitcode.Unreachable || exitcode.Message(err) != "VM 380 is not running" || view == nil || view.Running || len(view.Disks) == 0 || view.QEMU != nil {
		t.Errorf("stopped: %v (exit %d) %+v", err, exitcode.Of(err), view)
	}
	for _, d := range view.Disks {
		if d.Flush != nil {
			t.Errorf("stopped: %s measured", d.ID)
		}
	}
	if view.Unflushed != nil {
		t.Errorf("stopped: an unflushed section %+v", view.Unflushed)
	}

	// Running, no QMP socket: effective modes from the command line, exit 3.
	n, v = vmtest.LoadFixture(t, "testdata/real-drive-modes.json").Start(t)
	if err := os.Remove(n.Paths.QMPSocket(v.VMID)); err != nil {
		t.Fatal(err)
	}
	view, err = Run(ctx, runNode(n), v, v.Disks, true, flush.Options{})
	if exitcode.Of(err) != exitcode.Unreachable || !strings.Contains(err.Error(), "VM 380") || !strings.Contains(err.Error(), "is the VM running?") || view == nil || !view.Running {
		t.Errorf("no socket: %v (exit %d)", err, exitcode.Of(err))
	}
	if !strings.Contains(strings.Join(view.Notes, "\n"), "effective modes are taken from the command line") {
		t.Errorf("no socket: notes %q", view.Notes)
	}
}
