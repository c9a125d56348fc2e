package disk

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/internal/fakerun"
	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/threads"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

const resolveStorages = `dir: local
	path /var/lib/vz
	content images,iso

lvmthin: local-lvm
	thinpool data
	vgname pve

zfspool: local-zfs
	pool rpool/data
`

// A running VM: a thin LV with an iothread, a qcow2 on a dir storage whose
// [PENDING] moves it to the thin pool, an empty CD-ROM drive and a disk
// only [PENDING] adds.
const resolveConf = `scsihw: virtio-scsi-single
scsi0: local-lvm:vm-100-disk-0,iothread=1,size=1G
scsi1: local:100/vm-100-disk-1.qcow2,size=1G
ide2: none,media=cdrom

[PENDING]
scsi1: local-lvm:vm-100-disk-1,size=1G
scsi2: local:100/vm-100-disk-2.raw,size=1G
`

func resolveVM(t *testing.T) *vm.VM {
	t.Helper()
	run := "scsihw: virtio-scsi-single\nscsi0: local-lvm:vm-100-disk-0,iothread=1,size=1G\nscsi1: local:100/vm-100-disk-1.qcow2,size=1G\nide2: none,media=cdrom\n"
	cfg, err := qemuserver.ParseConfig(strings.NewReader(run), "100.conf")
	if err != nil {
		t.Fatal(err)
	}
	st, err := qemuserver.ParseStorages(strings.NewReader(resolveStorages), "storage.cfg")
	if err != nil {
		t.Fatal(err)
	}
	argv, err := fakenode.Argv("qemu-system-x86_64", cfg, st, fakenode.ArgvOptions{VMID: 100, RunDir: "/var/run/qemu-server", Blockdev: true, QEMUVersion: "7.2.22"})
	if err != nil {
		t.Fatal(err)
	}
	return vmtest.New(t, 100, resolveConf, resolveStorages, argv).Load(t)
}

// TestOf: each disk's storage rows (the main section's and the pending
// drive's), the drive pair in effect now and at the next start, its paths
// through the running QEMU's root, the allocation source, the running
// graph and the guest's name; nothing for what a disk has not.
func TestOf(t *testing.T) {
	v := resolveVM(t)
	s := Of(v, v.Disks)
	if len(s.Disks) != len(v.Disks) || s.VM != v || s.AskErr != nil || s.Stats != nil {
		t.Fatalf("set %+v", s)
	}
	root := filepath.Join(v.Paths().ProcPid(v.Pid), "root")
	d0 := s.Disk("scsi0")
	if d0.Storage == nil || d0.Storage.ID != "local-lvm" || d0.PendingStorage != nil {
		t.Errorf("scsi0 storages %v %v", d0.Storage, d0.PendingStorage)
	}
	if d0.Path != root+"/dev/pve/vm-100-disk-0" || d0.NextPath != d0.Path {
		t.Errorf("scsi0 paths %q %q", d0.Path, d0.NextPath)
	}
	if d0.Alloc.Storage != d0.Storage || d0.Alloc.VolName != "vm-100-disk-0" || d0.Alloc.Path != d0.Path || d0.Alloc.Format != "raw" {
		t.Errorf("scsi0 alloc %+v", d0.Alloc)
	}
	if g := d0.Graph; g == nil || !g.ThrottleGroup || !g.Throttled || g.Effective.Mode != "none" || g.Path != "/dev/pve/vm-100-disk-0" || g.IOThread != "" || g.ServingTID != v.Pid {
		t.Errorf("scsi0 graph %+v", d0.Graph)
	}
	if d0.Guest.Name.ByID != "/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_drive-scsi0" || d0.Guest.Seen != nil || d0.Dataset != "" || d0.Dev != "" || d0.ZFS != nil || d0.Queues != nil || d0.Backing != nil || d0.Chain != nil {
		t.Errorf("scsi0 guest %+v, layers unread %q %q %v %v %v %v", d0.Guest, d0.Dataset, d0.Dev, d0.ZFS, d0.Queues, d0.Backing, d0.Chain)
	}
	// [PENDING] moves scsi1 to the thin pool: now is the dir, the next
	// start the LV.
	d1 := s.Disk("scsi1")
	if drv, st := d1.Now(); drv != d1.Drive || st == nil || st.ID != "local" {
		t.Errorf("scsi1 now %v %v", drv, st)
	}
	if drv, st := d1.NextStart(); drv != d1.PendingDrive || st == nil || st.ID != "local-lvm" {
		t.Errorf("scsi1 next start %v %v", drv, st)
	}
	if d1.Path != root+"/var/lib/vz/images/100/vm-100-disk-1.qcow2" || d1.NextPath != root+"/dev/pve/vm-100-disk-1" || d1.Alloc.Format != "qcow2" {
		t.Errorf("scsi1 paths %q %q %+v", d1.Path, d1.NextPath, d1.Alloc)
	}
	// Only [PENDING] adds scsi2: no graph, no allocation source, its
	// pending drive in effect.
	d2 := s.Disk("scsi2")
	if d2.Graph != nil || d2.Storage != nil || d2.Alloc != (Disk{}).Alloc || d2.Path != "" || d2.NextPath != root+"/var/lib/vz/images/100/vm-100-disk-2.raw" {
		t.Errorf("scsi2 %+v", d2)
	}
	if drv, st := d2.Now(); drv != d2.PendingDrive || st == nil || st.ID != "local" {
		t.Errorf("scsi2 now %v %v", drv, st)
	}
	// The empty CD-ROM drive: no storage, no path, no allocation source,
	// no graph (this command line attaches none).
	if c := s.Disk("ide2"); c.Storage != nil || c.Path != "" || c.Alloc != (Disk{}).Alloc || c.Graph != nil {
		t.Errorf("ide2 %+v", c)
	}
	if s.Disk("scsi9") != nil {
		t.Error("a disk the VM has not")
	}
	if got := s.Only([]string{"scsi1", "scsi0"}); len(got.Disks) != 2 || got.Disks[0] != d0 || got.Disks[1] != d1 || len(s.Disks) != len(v.Disks) {
		t.Errorf("Only: %v", got.Disks)
	}
	if got := s.Running(); len(got) != 2 || got[0] != d0 || got[1] != d1 {
		t.Errorf("running %v, want scsi0 and scsi1", got)
	}
}

// TestPlaceThreads: a disk the command line puts on an iothread QEMU
// reports is served by it; one QEMU does not report, or without one, by
// the main loop; a new map places them anew.
func TestPlaceThreads(t *testing.T) {
	v := resolveVM(t)
	s := Of(v, v.Disks)
	io := gjson.Parse(`[{"id":"iothread-virtioscsi0","thread-id":4300}]`)
	s.PlaceThreads(threads.New(v.Pid, io, gjson.Parse(`[]`)))
	if g := s.Disk("scsi0").Graph; g.IOThread != "iothread-virtioscsi0" || g.ServingTID != 4300 {
		t.Errorf("scsi0 %+v", g)
	}
	if g := s.Disk("scsi1").Graph; g.IOThread != "" || g.ServingTID != v.Pid {
		t.Errorf("scsi1 %+v", g)
	}
	s.PlaceThreads(threads.New(v.Pid, gjson.Parse(`[]`), gjson.Parse(`[]`)))
	if g := s.Disk("scsi0").Graph; g.IOThread != "" || g.ServingTID != v.Pid || len(s.Threads.IOThreads) != 0 {
		t.Errorf("scsi0 after the iothread went: %+v", g)
	}
}

// TestFillOnce: a layer is read once per set, whoever asks for it again
// (flush after cache: one zfs get), and a set of some of the disks shares
// what was read.
func TestFillOnce(t *testing.T) {
	v := vmtest.New(t, 100, "scsi0: local-zfs:vm-100-disk-0,size=8G\nscsi1: local-lvm:vm-100-disk-1,size=8G\n", resolveStorages, nil).Load(t)
	r := zvolRunner(t)
	n := node.Node{Runner: r}
	s := Resolve(context.Background(), n, v, v.Disks, ZFS, Options{})
	s.Fill(context.Background(), n, ZFS, Options{})
	s.Only([]string{"scsi0"}).Fill(context.Background(), n, ZFS, Options{})
	if calls := r.Calls(); len(calls) != 1 {
		t.Errorf("zfs calls %q, want one", calls)
	}
	if z := s.Disk("scsi0").ZFS; z == nil || z.Dataset != "rpool/data/vm-100-disk-0" || s.Disk("scsi1").ZFS != nil {
		t.Errorf("zvols %+v %+v", s.Disk("scsi0").ZFS, s.Disk("scsi1").ZFS)
	}
	// A stopped VM is not asked anything, whatever the layers.
	if s := Resolve(context.Background(), n, v, v.Disks, Live|Counters|Threads, Options{}); s.AskErr != nil || s.Stats != nil {
		t.Errorf("stopped: %+v", s)
	}
}

func zvolRunner(t *testing.T) *fakerun.Runner {
	t.Helper()
	b := readFile(t, "../storage/zfs/testdata/get-sparse-512.txt")
	return &fakerun.Runner{Do: map[string]func([]string) ([]byte, error){"zfs": fakerun.Zvols(b, "pool/test", nil)}}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The guest agent is not asked without agent: 1, nor of a stopped VM, and
// the set says which (Set.AgentErr), with nothing seen on any disk.
func TestAgentNotAsked(t *testing.T) {
	for conf, want := range map[string]error{
		"scsi0: local-lvm:vm-100-disk-1,size=8G\n":           ErrNoAgent,
		"agent: 0\nscsi0: local-lvm:vm-100-disk-1,size=8G\n": ErrNoAgent,
		"agent: 1\nscsi0: local-lvm:vm-100-disk-1,size=8G\n": ErrNotRunning,
	} {
		v := vmtest.New(t, 100, conf, resolveStorages, nil).Load(t)
		r := &fakerun.Runner{}
		s := Resolve(context.Background(), node.Node{Runner: r}, v, v.Disks, Agent, Options{})
		if s.AgentErr != want || s.Disk("scsi0").Guest.Seen != nil || len(r.Calls()) != 0 {
			t.Errorf("%q: AgentErr %v, seen %+v, calls %q; want %v", conf, s.AgentErr, s.Disk("scsi0").Guest.Seen, r.Calls(), want)
		}
	}
}
