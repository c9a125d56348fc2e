package discard

import (
	"slices"
	"strings"
	"testing"
)

func i64(n int64) *int64 { return &n }

func codesOf(rs []Reason) []Code {
	out := []Code{}
	for _, r := range rs {
		out = append(out, r.Code)
	}
	return out
}

func reasonOf(rs []Reason, c Code) Reason {
	for _, r := range rs {
		if r.Code == c {
			return r
		}
	}
	return Reason{}
}

// Lab 37's figures: a 4 GiB volume in a 14 GiB pool, lvs's 0.01 %
// resolution of each.
const (
	labVol       = 4 << 30
	labPool      = 15032385536
	labRes       = labVol/20000 + 512
	labPoolRes   = labPool/20000 + 512
	labTolerance = 2 * labRes // two readings, each rounded
)

func pct(p float64, size int64) *int64 { b := int64(p / 100 * float64(size)); return &b }

// labBase is Lab 37's scsi1 during --trim: discard=on on LVM-thin.
func labBase() Input {
	return Input{VMID: 370, DiskID: "scsi1", Bus: "scsi", ConfiguredDiscard: "on", RunningDiscard: "unmap",
		FixDrive: "local-lvm:vm-370-disk-1,iothread=1,discard=on", StorageID: "local-lvm", StorageType: "lvmthin", Thin: true, Mode: Trim,
		GuestMapped: true, DevCounts: true, Resolution: labRes, PoolName: "pve/data", PoolResolution: labPoolRes,
		PoolDiscards: "passdown", ChunkBytes: 64 << 10, Snapshots: []string{}}
}

// zfsBase is a zvol on a zfspool: referenced and the pool's used from zfs
// get (exact bytes, no resolution), no chunk size, no discards mode.
func zfsBase(sparse bool) Input {
	in := Input{VMID: 100, DiskID: "scsi0", Bus: "scsi", ConfiguredDiscard: "on", RunningDiscard: "unmap",
		FixDrive: "local-zfs:vm-100-disk-0,discard=on", StorageID: "local-zfs", StorageType: "zfspool", Thin: sparse, Mode: Trim,
		GuestMapped: true, DevCounts: true, PoolName: "rpool/data", Snapshots: []string{}, SnapshotHeldBytes: i64(0)}
	if !sparse {
		in.Reserved, in.Dataset = true, "rpool/data/vm-100-disk-0"
	}
	return in
}

type verdictCase struct {
	name    string
	in      func() Input
	verdict Verdict
	codes   []Code
}

// TestJudge pins the verdict and the exact reason chain for the cases of
// Lab 37 section 5, the ways a trim fails to return space, and the edges
// each threshold exists for.
func TestJudge(t *testing.T) {
	const gib = 1 << 30
	cases := []verdictCase{
		{"lab: discard=ignore, fstrim 2.9 GiB, lvs unchanged at 50.79 %", func() Input {
			in := labBase()
			in.ConfiguredDiscard, in.RunningDiscard = "ignore", "ignore"
			in.GuestTrimmed = i64(3068858368)
			in.DevOps, in.DevBytes = 24, 3068858368
			in.Before, in.After = pct(50.79, labVol), pct(50.79, labVol)
			in.PoolBefore, in.PoolAfter = pct(79, labPool), pct(79, labPool)
			return in
		}, NotReturned, []Code{CodeDiscardIgnore}},
		{"lab: discard=on, 50.79 % -> 3.46 %, pool 79 % -> 65.69 %", func() Input {
			in := labBase()
			in.GuestTrimmed = i64(4142604288)
			in.DevOps, in.DevBytes, in.OKOps, in.OKBytes = 40, 4142604288, 40, 4142604288
			in.Before, in.After = pct(50.79, labVol), pct(3.46, labVol)
			in.PoolBefore, in.PoolAfter = pct(79, labPool), pct(65.69, labPool)
			return in
		}, Returned, nil},
		{"lab: fstrim right after rm frees 6 MiB (journal not committed)", func() Input {
			in := labBase()
			in.GuestTrimmed = i64(6283264)
			in.OKOps, in.OKBytes = 3, 6283264
			in.Before, in.After = pct(28.46, labVol), pct(28.46, labVol)
			return in
		}, NotReturned, []Code{CodeAlreadyFree}},
		{"second trim: ext4 trims 0", func() Input {
			in := labBase()
			in.GuestTrimmed = i64(0)
			in.Before, in.After = pct(3.46, labVol), pct(3.46, labVol)
			return in
		}, NotReturned, []Code{CodeGuestSentNothing}},
		{"config on, QEMU still ignore", func() Input {
			in := labBase()
			in.RunningDiscard = "ignore"
			in.GuestTrimmed = i64(gib)
			in.DevOps, in.DevBytes = 8, gib
			in.Before, in.After = pct(50, labVol), pct(50, labVol)
			return in
		}, NotReturned, []Code{CodeDiscardPending}},
		{"pool discards=ignore: QEMU's discards fail", func() Input {
			in := labBase()
			in.PoolDiscards = "ignore"
			in.GuestTrimmed = i64(gib)
			in.DevOps, in.DevBytes, in.FailedOps = 8, gib, 8
			in.Before, in.After = pct(50, labVol), pct(50, labVol)
			return in
		}, NotReturned, []Code{CodeStorageRefused, CodePoolIgnoresDiscards}},
		{"snapshot holds the blocks", func() Input {
			in := labBase()
			in.Snapshots = []string{"snap_vm-370-disk-1_before"}
			in.GuestTrimmed = i64(gib)
			in.OKOps, in.OKBytes = 8, gib
			in.Before, in.After = pct(50, labVol), pct(25, labVol)
			in.PoolBefore, in.PoolAfter = pct(79, labPool), pct(79, labPool)
			return in
		}, PartlyReturned, []Code{CodeSnapshotsHoldBlocks}},
		{"snapshot exists, pool got it back: not held", func() Input {
			in := labBase()
			in.Snapshots = []string{"snap_vm-370-disk-1_before"}
			in.GuestTrimmed = i64(gib)
			in.OKOps, in.OKBytes = 8, gib
			in.Before, in.After = i64(2*gib), i64(gib)
			in.PoolBefore, in.PoolAfter = i64(10*gib), i64(9*gib)
			return in
		}, Returned, nil},
		{"nothing returned, snapshots hold what the discards hit", func() Input {
			in := labBase()
			in.Snapshots = []string{"before-upgrade"}
			in.SnapshotHeldBytes = i64(gib)
			in.GuestTrimmed = i64(gib)
			in.OKOps, in.OKBytes = 8, gib
			in.Before, in.After = pct(50, labVol), pct(50, labVol)
			return in
		}, NotReturned, []Code{CodeSnapshotsHoldBlocks}},
		{"partly: the storage refused some discards", func() Input {
			in := labBase()
			in.GuestTrimmed = i64(gib)
			in.OKOps, in.OKBytes, in.FailedOps = 8, gib, 2
			in.Before, in.After = i64(2*gib), i64(gib)
			in.PoolBefore, in.PoolAfter = i64(10*gib), i64(9*gib)
			return in
		}, PartlyReturned, []Code{CodeStorageRefused}},
		{"discards smaller than the chunk", func() Input {
			in := labBase()
			in.GuestTrimmed = i64(1 << 20)
			in.OKOps, in.OKBytes = 64, 1<<20
			in.Before, in.After = pct(50, labVol), pct(50, labVol)
			return in
		}, NotReturned, []Code{CodeBelowChunkSize}},
		{"discards of exactly the chunk size free chunks", func() Input {
			in := labBase()
			in.GuestTrimmed = i64(1 << 20)
			in.OKOps, in.OKBytes = 16, 1<<20
			in.Before, in.After = pct(50, labVol), pct(50, labVol)
			return in
		}, NotReturned, []Code{CodeAlreadyFree}},
		{"virtio-blk, --wait, nothing seen, discard on: not trimmed", func() Input {
			in := labBase()
			in.Bus, in.Mode, in.DevCounts, in.GuestMapped = "virtio", Wait, false, false
			in.Before, in.After = pct(50, labVol), pct(50, labVol)
			return in
		}, NotTrimmed, []Code{CodeGuestSentNothing}},
		{"virtio-blk, --wait, discard ignore on thin: not returned", func() Input {
			in := labBase()
			in.Bus, in.Mode, in.DevCounts, in.GuestMapped = "virtio", Wait, false, false
			in.ConfiguredDiscard, in.RunningDiscard = "ignore", "ignore"
			in.Before, in.After = pct(50, labVol), pct(50, labVol)
			return in
		}, NotReturned, []Code{CodeDiscardIgnore, CodeGuestSentNothing}},
		{"--trim, no filesystem on the disk", func() Input {
			in := labBase()
			in.Before, in.After = pct(50, labVol), pct(50, labVol)
			return in
		}, NotTrimmed, []Code{CodeNoFilesystem}},
		{"--trim, filesystems not placed on disks: not trimmed is not claimed", func() Input {
			in := labBase()
			in.GuestMapped = false
			in.Before, in.After = pct(50, labVol), pct(50, labVol)
			return in
		}, NotReturned, nil},
		{"--trim, a filesystem spanning two disks, none reached this one", func() Input {
			in := labBase()
			in.GuestShared = []string{"/data"}
			in.Before, in.After = pct(50, labVol), pct(50, labVol)
			return in
		}, NotTrimmed, []Code{CodeSharedFilesystem}},
		{"--trim, a filesystem spanning two disks, this one gave back", func() Input {
			in := labBase()
			in.GuestShared = []string{"/data"}
			in.OKOps, in.OKBytes = 8, gib
			in.Before, in.After = i64(2*gib), i64(gib)
			return in
		}, Returned, []Code{CodeSharedFilesystem}},
		{"--trim, discard=ignore on storage that returns nothing: not trimmed", func() Input {
			in := zfsBase(false)
			in.ConfiguredDiscard, in.RunningDiscard = "ignore", "ignore"
			in.Before, in.After = i64(gib), i64(gib)
			return in
		}, NotTrimmed, []Code{CodeNoFilesystem, CodeDiscardIgnore}},
		{"guest wrote during the window", func() Input {
			in := labBase()
			in.Mode = Wait
			in.OKOps, in.OKBytes = 1, 1<<20
			in.Before, in.After = pct(10, labVol), pct(20, labVol)
			return in
		}, NotReturned, []Code{CodeAllocationGrew, CodeAlreadyFree}},
		{"rbd: not measurable", func() Input {
			in := labBase()
			in.StorageType, in.PoolName, in.PoolDiscards = "rbd", "", ""
			in.Unmeasured = "rbd du failed"
			in.GuestTrimmed = i64(1 << 20)
			in.OKOps, in.OKBytes = 1, 1<<20
			return in
		}, Unmeasured, []Code{CodeUnmeasured}},
		{"pool busy: other volumes allocate meanwhile", func() Input {
			in := labBase()
			in.GuestTrimmed = i64(gib)
			in.OKOps, in.OKBytes = 8, gib
			in.Before, in.After = pct(50, labVol), pct(25, labVol)
			in.PoolBefore, in.PoolAfter = pct(79, labPool), pct(79, labPool)
			return in
		}, Returned, []Code{CodePoolBusy}},
		{"pool nopassdown", func() Input {
			in := labBase()
			in.PoolDiscards = "nopassdown"
			in.OKOps, in.OKBytes = 8, gib
			in.Before, in.After = i64(2*gib), i64(gib)
			return in
		}, Returned, []Code{CodePoolNopassdown}},
		{"zfspool without sparse: the zvol freed, the pool cannot grow", func() Input {
			in := zfsBase(false)
			in.GuestTrimmed = i64(gib)
			in.OKOps, in.OKBytes = 8, gib
			in.Before, in.After = i64(3*gib), i64(2*gib)
			in.PoolBefore, in.PoolAfter = i64(40*gib), i64(40*gib)
			return in
		}, PartlyReturned, []Code{CodeZvolRefreservation}},
		{"zfspool without sparse whose zvol had its refreservation dropped", func() Input {
			in := zfsBase(false)
			in.OKOps, in.OKBytes = 8, gib
			in.Before, in.After = i64(3*gib), i64(2*gib)
			in.PoolBefore, in.PoolAfter = i64(40*gib), i64(39*gib)
			return in
		}, Returned, nil},
		{"sparse zvol: snapshots hold it (usedbysnapshots, no names)", func() Input {
			in := zfsBase(true)
			in.SnapshotHeldBytes = i64(gib)
			in.OKOps, in.OKBytes = 8, gib
			in.Before, in.After = i64(3*gib), i64(2*gib)
			in.PoolBefore, in.PoolAfter = i64(40*gib), i64(40*gib)
			return in
		}, PartlyReturned, []Code{CodeSnapshotsHoldBlocks}},
		{"zvol without sparse and with snapshots", func() Input {
			in := zfsBase(false)
			in.SnapshotHeldBytes = i64(gib)
			in.OKOps, in.OKBytes = 8, gib
			in.Before, in.After = i64(3*gib), i64(2*gib)
			in.PoolBefore, in.PoolAfter = i64(40*gib), i64(40*gib)
			return in
		}, PartlyReturned, []Code{CodeZvolRefreservation, CodeSnapshotsHoldBlocks}},
		{"zvol: small discards are no chunk matter, the pool's mode is LVM's", func() Input {
			in := zfsBase(true)
			in.PoolDiscards = "ignore"
			in.ChunkBytes = 64 << 10
			in.OKOps, in.OKBytes = 64, 1<<20
			in.Before, in.After = i64(gib), i64(gib)
			return in
		}, NotReturned, []Code{CodeAlreadyFree}},
		{"--wait with a gap", func() Input {
			in := labBase()
			in.Mode = Wait
			in.OKOps, in.OKBytes = 8, gib
			in.Before, in.After = i64(2*gib), i64(gib)
			in.WindowSeconds, in.CoveredSeconds, in.Missed = 8, 8.1, 2
			in.Gaps = []Gap{{2, 5}}
			return in
		}, Returned, []Code{CodeWindowGaps}},
		{"--wait with missed ticks the samples cover", func() Input {
			in := labBase()
			in.Mode = Wait
			in.OKOps, in.OKBytes = 8, gib
			in.Before, in.After = i64(2*gib), i64(gib)
			in.WindowSeconds, in.CoveredSeconds, in.Missed = 8, 8.1, 1
			return in
		}, Returned, []Code{CodeWindowGaps}},
		{"--wait cut short by QEMU going away", func() Input {
			in := labBase()
			in.Mode = Wait
			in.Before, in.After = i64(2*gib), i64(2*gib)
			in.WindowSeconds, in.CoveredSeconds, in.Cut = 8, 2, "QEMU (pid 42) exited"
			in.Gaps = []Gap{}
			return in
		}, NotTrimmed, []Code{CodeGuestSentNothing, CodeWindowCut}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, rs := Judge(c.in())
			want := c.codes
			if want == nil {
				want = []Code{}
			}
			if v != c.verdict || !slices.Equal(codesOf(rs), want) {
				t.Errorf("verdict %s %v, want %s %v", v, codesOf(rs), c.verdict, want)
				for _, r := range rs {
					t.Logf("  %s: %s | %s", r.Code, r.Text, r.Fix)
				}
			}
		})
	}
}

// TestJudgeEdges: each threshold, one unit on either side.
func TestJudgeEdges(t *testing.T) {
	const gib = 1 << 30
	returned := func(ret int64, pool int64) Input {
		in := labBase()
		in.OKOps, in.OKBytes = 8, gib
		in.Before, in.After = i64(2*gib), i64(2*gib-ret)
		if pool >= 0 {
			in.PoolBefore, in.PoolAfter = i64(10*gib), i64(10*gib-pool)
		}
		return in
	}
	// The volume's figure: a change within twice its resolution is none.
	for _, c := range []struct {
		ret   int64
		want  Verdict
		codes []Code
	}{
		{labTolerance, NotReturned, []Code{CodeAlreadyFree}},
		{labTolerance + 1, Returned, []Code{}},
		{-labTolerance, NotReturned, []Code{CodeAlreadyFree}},
		{-labTolerance - 1, NotReturned, []Code{CodeAllocationGrew, CodeAlreadyFree}},
	} {
		v, rs := Judge(returned(c.ret, -1))
		if v != c.want || !slices.Equal(codesOf(rs), c.codes) {
			t.Errorf("returned %d (tolerance %d): %s %v, want %s %v", c.ret, labTolerance, v, codesOf(rs), c.want, c.codes)
		}
	}
	// The pool's slack: rounding of both figures plus 5 % of what the
	// volume gave.
	const ret = gib
	slack := int64(2*labPoolRes + labTolerance + ret/20) // rounding of both, plus 5 %
	for _, c := range []struct {
		pool  int64
		codes []Code
	}{
		{ret - slack, []Code{}},
		{ret - slack - 1, []Code{CodePoolBusy}},
	} {
		v, rs := Judge(returned(ret, c.pool))
		if v != Returned || !slices.Equal(codesOf(rs), c.codes) {
			t.Errorf("pool got %d of %d (slack %d): %s %v, want returned %v", c.pool, ret, slack, v, codesOf(rs), c.codes)
		}
	}
	// The lab's own case sits inside the slack: the volume gave back
	// 1.89 GiB, the pool 1.86 GiB.
	if v, rs := Judge(returned(2029372784, 1997159219)); v != Returned || len(rs) != 0 {
		t.Errorf("lab: %s %v", v, codesOf(rs))
	}
}

// TestJudgeTexts: the sentences quote the measurement and the storage's
// own terms, and every fix is what Proxmox (or the storage) accepts.
func TestJudgeTexts(t *testing.T) {
	in := labBase()
	in.ConfiguredDiscard, in.RunningDiscard = "ignore", "ignore"
	in.DevOps, in.DevBytes = 24, 3068858368
	in.Before, in.After = pct(50.79, labVol), pct(50.79, labVol)
	_, rs := Judge(in)
	if want := "qm set 370 --scsi1 local-lvm:vm-370-disk-1,iothread=1,discard=on, then qm reboot 370 (a full stop and start; a reboot inside the guest is not enough)"; rs[0].Fix != want {
		t.Errorf("fix\n got %s\nwant %s", rs[0].Fix, want)
	}
	if !strings.Contains(rs[0].Text, "received 2.86 GiB in 24 requests and passed on none") {
		t.Errorf("text %s", rs[0].Text)
	}
	// VirtIO Block counts nothing at the device: no figure is quoted.
	in.DevCounts = false
	if _, rs := Judge(in); strings.Contains(rs[0].Text, "received") {
		t.Errorf("virtio-blk text quotes a device figure: %s", rs[0].Text)
	}
	in.RunningDiscard, in.ConfiguredDiscard = "ignore", "on"
	if _, rs := Judge(in); rs[0].Fix != "qm reboot 370 (a full stop and start; a reboot inside the guest is not enough)" {
		t.Errorf("pending fix %q", rs[0].Fix)
	}

	z := zfsBase(false)
	z.OKOps, z.OKBytes = 8, 1<<30
	z.Before, z.After = i64(3<<30), i64(2<<30)
	z.PoolBefore, z.PoolAfter = i64(40<<30), i64(40<<30)
	_, rs = Judge(z)
	r := reasonOf(rs, CodeZvolRefreservation)
	for _, want := range []string{"zfs set refreservation=none rpool/data/vm-100-disk-0", "pvesm set local-zfs --sparse 1"} {
		if !strings.Contains(r.Fix, want) {
			t.Errorf("refreservation fix lacks %q: %s", want, r.Fix)
		}
	}
	if !strings.Contains(r.Text, "freed 1.00 GiB but pool rpool/data got back 0 B") || strings.Contains(r.Text+r.Fix, "lvs") || strings.Contains(r.Text+r.Fix, "lvchange") {
		t.Errorf("refreservation text: %s", r.Text)
	}
	z = zfsBase(true)
	z.SnapshotHeldBytes = i64(1 << 30)
	z.OKOps, z.OKBytes = 8, 1<<30
	z.Before, z.After = i64(3<<30), i64(2<<30)
	z.PoolBefore, z.PoolAfter = i64(40<<30), i64(40<<30)
	_, rs = Judge(z)
	if r := reasonOf(rs, CodeSnapshotsHoldBlocks); !strings.Contains(r.Text, "snapshots holding 1.00 GiB (zfs usedbysnapshots)") || !strings.HasPrefix(r.Fix, "qm listsnapshot 100") {
		t.Errorf("zfs snapshots: %+v", r)
	}

	lab := labBase()
	lab.Snapshots = []string{"a", "b"}
	lab.OKOps, lab.OKBytes = 8, 1<<30
	lab.Before, lab.After = i64(2<<30), i64(1<<30)
	lab.PoolBefore, lab.PoolAfter = i64(10<<30), i64(10<<30)
	if _, rs := Judge(lab); !strings.Contains(rs[0].Text, "snapshot(s) a, b still reference") {
		t.Errorf("lvm snapshots: %s", rs[0].Text)
	}

	w := labBase()
	w.Mode = Wait
	w.Before, w.After = i64(1<<30), i64(1<<30)
	w.WindowSeconds, w.CoveredSeconds, w.Missed = 8, 8.1, 3
	w.Gaps = []Gap{{2, 5.1}}
	_, rs = Judge(w)
	if r := reasonOf(rs, CodeWindowGaps); !strings.Contains(r.Text, "3 sample(s) missed at 2.0-5.1 s") || !strings.Contains(r.Text, "whole 8.1 s") {
		t.Errorf("gaps: %s", r.Text)
	}
	w.Cut, w.CoveredSeconds = "QEMU (pid 7) exited", 2.1
	_, rs = Judge(w)
	if r := reasonOf(rs, CodeWindowCut); !strings.Contains(r.Text, "2.1 s into the 8 s window (QEMU (pid 7) exited)") || !strings.Contains(r.Text, "(26% of the window)") || reasonOf(rs, CodeWindowGaps).Code != "" {
		t.Errorf("cut: %v", codesOf(rs))
	}

	v := labBase()
	v.Bus, v.Mode, v.DevCounts = "virtio", Wait, false
	v.Before, v.After = i64(1<<30), i64(1<<30)
	if _, rs := Judge(v); !strings.Contains(rs[0].Text, "kernel is older than 5.0") {
		t.Errorf("virtio wait: %s", rs[0].Text)
	}
	v.RunningDiscard, v.ConfiguredDiscard = "ignore", "ignore"
	if _, rs := Judge(v); !strings.Contains(reasonOf(rs, CodeGuestSentNothing).Text, "with discard=ignore none reached the storage") {
		t.Errorf("virtio wait ignore: %v", rs)
	}
	s := labBase()
	s.Mode = Wait
	s.Before, s.After = i64(1<<30), i64(1<<30)
	if _, rs := Judge(s); !strings.Contains(rs[0].Text, "was fstrim run in the guest") {
		t.Errorf("scsi wait: %s", rs[0].Text)
	}
	p := labBase()
	p.PoolDiscards, p.FailedOps = "ignore", 3
	p.Before, p.After = i64(1<<30), i64(1<<30)
	_, rs = Judge(p)
	if !strings.HasSuffix(rs[0].Text, "because its thin pool ignores them") || !strings.Contains(rs[1].Fix, "lvchange --discards passdown pve/data") {
		t.Errorf("pool ignore: %+v", rs)
	}
	p.StorageType = "rbd"
	if _, rs := Judge(p); strings.Contains(rs[0].Text, "thin pool") || len(rs) != 1 {
		t.Errorf("rbd refusing: %+v", rs)
	}
	u := labBase()
	if _, rs := Judge(u); rs[len(rs)-1].Text != "the volume's allocation could not be read" {
		t.Errorf("unmeasured without a reason: %+v", rs)
	}
}
