package discard

import (
	"context"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

func i64p(n int64) *int64 { return &n }

// The recorded trim of the real guest (testdata/guest/e2e-trim-report.json:
// sata1 after 64 MiB written and removed, a 256 MiB LV on local-lvm with
// 64 KiB chunks) and the filesystem the real guest agent reported on it
// (real-guest-get-fsinfo.json, recorded in the same test before the
// writes: ext4 on the whole disk, 14,336 bytes used of 223,465,472).
var (
	e2eAlloc = alloc.Result{Method: "lvs", VirtualBytes: i64p(268435456), AllocatedBytes: i64p(68236288), ResolutionBytes: 13933,
		Pool: &alloc.Pool{Name: "pdcc969dad4/data", ChunkSizeBytes: 65536}}
	e2eReturned = int64(66867200)
	ext4Whole   = guestdisk.Filesystem{Mountpoint: "/mnt/a1", Type: "ext4", Device: "sdc", Layout: guestdisk.OnDisk, UsedBytes: i64p(14336), TotalBytes: i64p(223465472), Disks: []string{"sata1"}}
)

// Every verdict of the reclaimable figure, with its exact reasons: known
// (an upper bound, and a lower one where the filesystems' totals say what
// they keep outside), unknown with why (never 0), no agent.
func TestJudgeReclaim(t *testing.T) {
	part := func(dev string, used int64) guestdisk.Filesystem {
		return guestdisk.Filesystem{Mountpoint: "/" + dev, Type: "ext4", Device: dev, Layout: guestdisk.OnPartition, UsedBytes: i64p(used), TotalBytes: i64p(100 << 20), Disks: []string{"scsi1"}}
	}
	bind := ext4Whole
	bind.Mountpoint = "/srv/bind"
	noUse := ext4Whole
	noUse.UsedBytes, noUse.TotalBytes = nil, nil
	lvm := ext4Whole
	lvm.Device, lvm.Layout = "dm-0", guestdisk.OnVirtual
	spans := ext4Whole
	spans.Disks = []string{"sata1", "scsi1"}
	ignore := Reason{CodeDiscardIgnore, "discard=ignore ...", "qm set 370 --sata1 local-lvm:vm-370-disk-3,discard=on"}
	small := alloc.Result{Method: "lvs", VirtualBytes: i64p(1 << 30), AllocatedBytes: i64p(1 << 20), Pool: &alloc.Pool{ChunkSizeBytes: 65536}}
	for _, tc := range []struct {
		name        string
		in          ReclaimInput
		verdict     ReclaimVerdict
		upTo, least *int64
		used        *int64
		codes       []Code
		fix         string
	}{
		{"known: ext4 on the whole disk (the real guest's)", ReclaimInput{Agent: true, Seen: &guestdisk.Seen{Filesystems: []guestdisk.Filesystem{ext4Whole}}, Alloc: e2eAlloc, Discard: "on"},
			ReclaimKnown, i64p(68236288 - 14336), i64p(68236288 - 14336 - (268435456 - 223465472)), i64p(14336), []Code{CodeFSMetadata, CodeTrimGranularity}, "--trim"},
		{"known: a bind mount counts its device once", ReclaimInput{Agent: true, Seen: &guestdisk.Seen{Filesystems: []guestdisk.Filesystem{bind, ext4Whole}}, Alloc: e2eAlloc, Discard: "on"},
			ReclaimKnown, i64p(68236288 - 14336), i64p(68236288 - 14336 - (268435456 - 223465472)), i64p(14336), []Code{CodeFSMetadata, CodeTrimGranularity}, "--trim"},
		{"known: the guest uses more than the node holds: 0, not negative", ReclaimInput{Agent: true, Seen: &guestdisk.Seen{Partitions: []string{"/dev/sda1", "/dev/sda2"}, Filesystems: []guestdisk.Filesystem{part("sda1", 3<<20), part("sda2", 0)}}, Alloc: small, Discard: "on"},
			ReclaimKnown, i64p(0), i64p(0), i64p(3 << 20), []Code{CodeFSMetadata, CodePartitionTable, CodeTrimGranularity}, "--trim"},
		{"known, but QEMU drops the discards", ReclaimInput{Agent: true, Seen: &guestdisk.Seen{Filesystems: []guestdisk.Filesystem{ext4Whole}}, Alloc: alloc.Result{AllocatedBytes: i64p(1 << 20)}, Discard: "ignore", DiscardWarn: &ignore},
			ReclaimKnown, i64p(1<<20 - 14336), nil, i64p(14336), []Code{CodeDiscardIgnore, CodeFSMetadata, CodeTrimGranularity}, "--trim"},
		{"known: nothing allocated, whatever the guest has", ReclaimInput{Agent: true, Seen: &guestdisk.Seen{Device: "/dev/sdc"}, Alloc: alloc.Result{AllocatedBytes: i64p(0)}},
			ReclaimKnown, i64p(0), i64p(0), nil, []Code{CodeNothingAllocated}, "--trim"},
		{"known: nothing allocated, no agent", ReclaimInput{Alloc: alloc.Result{AllocatedBytes: i64p(0)}},
			ReclaimKnown, i64p(0), i64p(0), nil, []Code{CodeNothingAllocated}, "fstrim -av in the guest"},
		{"unknown: no filesystem on the disk", ReclaimInput{Agent: true, Seen: &guestdisk.Seen{Device: "/dev/sdb", Partitions: []string{}}, Alloc: e2eAlloc},
			ReclaimUnknown, nil, nil, nil, []Code{CodeNoFilesystem}, "--trim"},
		{"unknown: the agent places nothing on the disk", ReclaimInput{Agent: true, Alloc: e2eAlloc},
			ReclaimUnknown, nil, nil, nil, []Code{CodeNoFilesystem}, "--trim"},
		{"unknown: a partition without a filesystem (swap)", ReclaimInput{Agent: true, Seen: &guestdisk.Seen{Partitions: []string{"/dev/sda1", "/dev/sda2"}, Filesystems: []guestdisk.Filesystem{part("sda1", 1)}}, Alloc: e2eAlloc},
			ReclaimUnknown, nil, nil, nil, []Code{CodeGuestPartitions}, "--trim"},
		{"unknown: partitions, agent without guest-get-disks", ReclaimInput{Agent: true, Seen: &guestdisk.Seen{Filesystems: []guestdisk.Filesystem{part("sda1", 1)}}, Alloc: e2eAlloc},
			ReclaimUnknown, nil, nil, nil, []Code{CodeGuestPartitions}, "--trim"},
		{"unknown: LVM in the guest", ReclaimInput{Agent: true, Seen: &guestdisk.Seen{Filesystems: []guestdisk.Filesystem{lvm}}, Alloc: e2eAlloc},
			ReclaimUnknown, nil, nil, nil, []Code{CodeGuestVirtual}, "--trim"},
		{"unknown: a filesystem over two disks", ReclaimInput{Agent: true, Seen: &guestdisk.Seen{Filesystems: []guestdisk.Filesystem{spans}}, Alloc: e2eAlloc},
			ReclaimUnknown, nil, nil, nil, []Code{CodeSharedFilesystem}, "--trim"},
		{"unknown: no used bytes (qemu-ga before 3.0)", ReclaimInput{Agent: true, Seen: &guestdisk.Seen{Filesystems: []guestdisk.Filesystem{noUse}}, Alloc: e2eAlloc},
			ReclaimUnknown, nil, nil, nil, []Code{CodeNoUsage}, "--trim"},
		{"unknown: the allocation cannot be read", ReclaimInput{Agent: true, Seen: &guestdisk.Seen{Filesystems: []guestdisk.Filesystem{ext4Whole}}, Alloc: alloc.Result{Method: "none", Unmeasured: "no allocation reader"}},
			ReclaimUnknown, nil, nil, nil, []Code{CodeUnmeasured}, "--trim"},
		{"no agent configured", ReclaimInput{Alloc: e2eAlloc},
			ReclaimNoAgent, nil, nil, nil, []Code{CodeNoAgent}, "fstrim -av in the guest (pvediskcheck discard 370 --wait 2m"},
		{"the agent did not answer", ReclaimInput{Agent: true, AgentErr: errors.New("guest agent did not answer within 1s"), Seen: &guestdisk.Seen{Filesystems: []guestdisk.Filesystem{ext4Whole}}, Alloc: e2eAlloc},
			ReclaimNoAgent, nil, nil, nil, []Code{CodeNoAgent}, "--trim"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.in.VMID = 370
			r := JudgeReclaim(tc.in)
			eq := func(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
			if r.Verdict != tc.verdict || !eq(r.UpToBytes, tc.upTo) || !eq(r.AtLeastBytes, tc.least) || !eq(r.GuestUsedBytes, tc.used) || !slices.Equal(codesOf(r.Reasons), tc.codes) {
				t.Errorf("%s up to %v at least %v used %v %v, want %s %v %v %v %v", r.Verdict, p(r.UpToBytes), p(r.AtLeastBytes), p(r.GuestUsedBytes), codesOf(r.Reasons),
					tc.verdict, p(tc.upTo), p(tc.least), p(tc.used), tc.codes)
			}
			if !strings.Contains(r.Fix, tc.fix) || !eq(r.AllocatedBytes, tc.in.Alloc.AllocatedBytes) {
				t.Errorf("fix %q, allocated %v", r.Fix, p(r.AllocatedBytes))
			}
			for _, rs := range r.Reasons {
				if rs.Text == "" {
					t.Errorf("%s: no text", rs.Code)
				}
			}
		})
	}
}

func p(n *int64) any {
	if n == nil {
		return nil
	}
	return *n
}

// What the real guest's trim gave back lies between the two bounds the
// recorded figures predict, the upper one at most an allocation unit below
// it (an upper bound).
func TestReclaimRecordedTrim(t *testing.T) {
	r := JudgeReclaim(ReclaimInput{VMID: 370, Agent: true, Seen: &guestdisk.Seen{Filesystems: []guestdisk.Filesystem{ext4Whole}}, Alloc: e2eAlloc, Discard: "on"})
	unit := max(e2eAlloc.Pool.ChunkSizeBytes, e2eAlloc.ResolutionBytes)
	if *r.UpToBytes < e2eReturned-unit || *r.AtLeastBytes > e2eReturned {
		t.Errorf("returned %d outside [%d, %d]", e2eReturned, *r.AtLeastBytes, *r.UpToBytes)
	}
	t.Logf("predicted %d..%d, returned %d: the upper bound over by %d (ext4 metadata the trim kept)", *r.AtLeastBytes, *r.UpToBytes, e2eReturned, *r.UpToBytes-e2eReturned)
}

// Run: status asks the guest agent once (guest-get-disks and
// guest-get-fsinfo, after query-pci) and shows each disk's filesystems and
// what a trim would give back; with the agent not configured, and under
// --wait, it is not asked at all; --trim places its own guest-get-fsinfo
// and sends no more.
func TestRunReclaim(t *testing.T) {
	replies := map[string]string{
		"guest-get-fsinfo": strings.TrimSpace(string(readFixture(t, "guest/real-guest-get-fsinfo.json"))),
		"guest-get-disks":  "[]",
		"guest-fstrim":     `{"paths": [{"path": "/mnt/s1", "trimmed": 1048576, "minimum": 0}]}`,
	}
	setup := func(t *testing.T, conf string) (*fakeVM, *qmptest.Agent) {
		f := newFakeVM(t, "vm370", 370)
		f.r.replies["query-pci"] = `{"return": ` + strings.TrimSpace(string(readFixture(t, "guest/real-query-pci.json"))) + `}`
		if conf != "" {
			b, err := os.ReadFile(f.paths.VMConfig(370))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(f.paths.VMConfig(370), []byte(strings.Replace(string(b), "agent: 1\n", conf, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		a := f.agent(t, 370)
		a.Handle = qmptest.AgentReplies(replies)
		return f, a
	}
	t.Run("status", func(t *testing.T) {
		f, a := setup(t, "")
		v := f.load(t, 370)
		rep, err := Run(context.Background(), f.node(2*time.Second), v, v.Disks, Options{Mode: Status, TrimTimeout: time.Minute, NewMeter: func() Meter { return f.meter }})
		if err != nil {
			t.Fatal(err)
		}
		// guest-get-disks and guest-get-fsinfo, each after its sync.
		if a.Requests() != 4 {
			t.Errorf("agent requests %d, want 4", a.Requests())
		}
		d := byID(t, rep)
		for _, id := range vm370Disks {
			fs, r := d[id].GuestFilesystems, d[id].Reclaimable
			if len(fs) != 1 || fs[0].UsedBytes == nil || *fs[0].UsedBytes != 14336 || fs[0].Layout != guestdisk.OnDisk || r == nil || r.Verdict != ReclaimKnown {
				t.Fatalf("%s: filesystems %+v, reclaimable %+v", id, fs, r)
			}
			// The recorded allocation (before: 8 MiB written at the start of every disk).
			if want := *f.meter.phases["before"][d[id].Volume[len("local-lvm:"):]].AllocatedBytes - 14336; *r.UpToBytes != want {
				t.Errorf("%s: up to %d, want %d", id, *r.UpToBytes, want)
			}
			want := []Code{CodeFSMetadata, CodeTrimGranularity}
			if id == "scsi2" {
				want = append([]Code{CodeDiscardIgnore}, want...)
			}
			if got := codesOf(r.Reasons); !slices.Equal(got, want) {
				t.Errorf("%s: reasons %v, want %v", id, got, want)
			}
		}
	})
	t.Run("no agent configured", func(t *testing.T) {
		f, a := setup(t, "agent: 0\n")
		v := f.load(t, 370)
		rep, err := Run(context.Background(), f.node(2*time.Second), v, v.Disks, Options{Mode: Status, TrimTimeout: time.Minute, NewMeter: func() Meter { return f.meter }})
		if err != nil {
			t.Fatal(err)
		}
		if a.Conns() != 0 {
			t.Errorf("agent asked: %d connections", a.Conns())
		}
		for _, d := range rep.Disks {
			if d.GuestFilesystems != nil || d.Reclaimable == nil || d.Reclaimable.Verdict != ReclaimNoAgent || d.Reclaimable.UpToBytes != nil {
				t.Errorf("%s: %+v %+v", d.ID, d.GuestFilesystems, d.Reclaimable)
			}
		}
	})
	t.Run("wait leaves the agent alone", func(t *testing.T) {
		f, a := setup(t, "")
		v := f.load(t, 370)
		rep, err := Run(context.Background(), f.node(2*time.Second), v, v.Disks, Options{Mode: Wait, Wait: 300 * time.Millisecond, Interval: 100 * time.Millisecond,
			TrimTimeout: time.Minute, NewMeter: func() Meter { return f.meter }})
		if rep == nil {
			t.Fatal(err)
		}
		if a.Conns() != 0 {
			t.Errorf("agent asked during --wait: %d connections", a.Conns())
		}
		for _, d := range rep.Disks {
			if d.GuestFilesystems != nil || d.Reclaimable != nil {
				t.Errorf("%s: %+v %+v", d.ID, d.GuestFilesystems, d.Reclaimable)
			}
		}
	})
	t.Run("trim", func(t *testing.T) {
		f, a := setup(t, "")
		v := f.load(t, 370)
		rep, err := Run(context.Background(), f.node(2*time.Second), v, v.Disks, trimOptions(f))
		if exitcode.Of(err) != exitcode.Problem { // scsi2 runs discard=ignore: not returned
			t.Fatal(err)
		}
		// guest-get-fsinfo and guest-fstrim: no guest-get-disks (no filesystem on a partition).
		if a.Requests() != 4 {
			t.Errorf("agent requests %d, want 4", a.Requests())
		}
		for _, d := range rep.Disks {
			if r := d.Reclaimable; len(d.GuestFilesystems) != 1 || r == nil || r.Verdict != ReclaimKnown ||
				*r.AllocatedBytes != *f.meter.phases["before"][d.Volume[len("local-lvm:"):]].AllocatedBytes {
				t.Errorf("%s: %+v %+v", d.ID, d.GuestFilesystems, r)
			}
		}
	})
}
