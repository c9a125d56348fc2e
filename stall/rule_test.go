package stall

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/threads"
)

// A disk is a candidate from exactly After without a completion.
func TestCandidateEdge(t *testing.T) {
	at := func(d time.Duration) qmp.BlockStats { return qmp.BlockStats{IdleTimeNs: int64(d), HasIdleTime: true} }
	if !Candidate(at(DefaultAfter), DefaultAfter) || Candidate(at(DefaultAfter-1), DefaultAfter) || Candidate(qmp.BlockStats{IdleTimeNs: int64(time.Hour)}, DefaultAfter) {
		t.Error("candidate from After, with QEMU's idle time only")
	}
}

// The threads serving a disk, in TID order: its own, its io_uring workers,
// and for aio=threads the pool's workers, which an io_uring disk does not
// count.
func TestServingThreads(t *testing.T) {
	idle := qmp.BlockStats{IdleTimeNs: int64(time.Minute), HasIdleTime: true}
	worker := Thread{TID: 51, Comm: "worker", State: "D", Wchan: "io_schedule"}
	iou := Thread{TID: 50, Comm: "iou-wrk-20", State: "D"}
	self := Thread{TID: 20, Comm: "qemu-system-x86", State: "D"}
	other := Thread{TID: 52, Comm: "iou-wrk-21", State: "D"}
	for _, c := range []struct {
		name string
		d    Disk
		in   []Thread
		want []int
	}{
		{"pool disk, a worker alone", Disk{ID: "scsi1", ServingTID: 20, ThreadPool: true}, []Thread{worker}, []int{51}},
		{"pool disk, another's io_uring worker", Disk{ID: "scsi1", ServingTID: 20, ThreadPool: true}, []Thread{other}, nil},
		{"io_uring disk, in TID order", Disk{ID: "scsi1", ServingTID: 20}, []Thread{other, iou, worker, self}, []int{20, 50}},
	} {
		v := Judge(c.d, idle, Look{Blocked: c.in}, DefaultAfter)
		var got []int
		for _, th := range v.Blocked {
			got = append(got, th.TID)
		}
		if !slices.Equal(got, c.want) || v.Stalled != (len(c.want) > 0) {
			t.Errorf("%s: blocked %v stalled %v, want %v", c.name, got, v.Stalled, c.want)
		}
	}
}

// The threads of a process are listed in TID order, not in the order of
// their names (999 before 1000).
func TestBlockedTIDOrder(t *testing.T) {
	n, _ := recorded(t)
	src := filepath.Join(n.Paths.ProcPid(recPID), "task", "2460")
	root := t.TempDir()
	n.Paths.Proc = root
	for _, tid := range []string{"1000", "999"} {
		dir := filepath.Join(root, "77", "task", tid)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"stat", "wchan"} {
			b, err := os.ReadFile(filepath.Join(src, f))
			if err != nil {
				t.Fatal(err)
			}
			if f == "stat" {
				b = []byte(strings.Replace(string(b), "2460", tid, 1))
			}
			if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	got, err := blocked(context.Background(), n, 77)
	if err != nil || len(got) != 2 || got[0].TID != 999 || got[1].TID != 1000 {
		t.Errorf("%+v %v", got, err)
	}
}

// The detector reads an idle VM's threads again once After/2 has passed
// since the last read, not before.
func TestDetectorRereadsAfterHalf(t *testing.T) {
	n, stats := recorded(t)
	busy := map[string]qmp.BlockStats{"scsi0": stats["scsi0"], "scsi1": {IdleTimeNs: int64(time.Millisecond), HasIdleTime: true}}
	var dt Detector
	dt.Place(n, recPID, recDisks())
	dt.Detect(context.Background(), busy, recAfter)
	for _, c := range []struct {
		ago    time.Duration
		reread bool
	}{{recAfter/2 - 300*time.Millisecond, false}, {recAfter/2 + 100*time.Millisecond, true}} {
		last := time.Now().Add(-c.ago)
		dt.at = last
		dt.Detect(context.Background(), busy, recAfter)
		if got := !dt.at.Equal(last); got != c.reread {
			t.Errorf("last read %s ago: read again %v, want %v", c.ago, got, c.reread)
		}
	}
}

// The rule's view of a VM's running disks: the storage, the thread pool
// for aio=threads only, the path QEMU opened and the node device under
// it, no CD-ROM; without
// known iothreads every disk is served by the main loop.
func TestDisks(t *testing.T) {
	conf := "scsihw: virtio-scsi-single\nscsi0: local:100/vm-100-disk-0.raw,aio=threads,size=1G\nscsi1: local:100/vm-100-disk-1.raw,iothread=1,size=1G\nide2: none,media=cdrom\n"
	cfg, err := qemuserver.ParseConfig(strings.NewReader(conf), "100.conf")
	if err != nil {
		t.Fatal(err)
	}
	const storages = "dir: local\n\tpath /var/lib/vz\n\tcontent images\n"
	st, _ := qemuserver.ParseStorages(strings.NewReader(storages), "storage.cfg")
	argv, err := fakenode.Argv("qemu-system-x86_64", cfg, st, fakenode.ArgvOptions{VMID: 100, RunDir: "/var/run/qemu-server", Blockdev: true, QEMUVersion: "7.2.22"})
	if err != nil {
		t.Fatal(err)
	}
	v := vmtest.New(t, 100, conf, storages, argv).Load(t)
	set := disk.Of(v, v.Disks)
	for _, d := range set.Disks {
		if d.Running != nil && d.Running.Path != "" {
			d.Dev = "dev-of-" + filepath.Base(d.Running.Path)
		}
	}
	set.PlaceThreads(threads.Map{})
	got := Disks(set)
	if len(got) != 2 {
		t.Fatalf("%+v", got)
	}
	want := []Disk{
		{ID: "scsi0", Storage: "local", ServingTID: v.Pid, ThreadPool: true, Path: "/var/lib/vz/images/100/vm-100-disk-0.raw", Dev: "dev-of-vm-100-disk-0.raw"},
		{ID: "scsi1", Storage: "local", ServingTID: v.Pid, Path: "/var/lib/vz/images/100/vm-100-disk-1.raw", Dev: "dev-of-vm-100-disk-1.raw"},
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%+v\nwant %+v", got[i], want[i])
		}
	}
}
