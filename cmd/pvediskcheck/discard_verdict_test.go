package main

import (
	"strings"
	"testing"
)

func i64(n int64) *int64 { return &n }

// TestDecideDiscard pins the verdict and reason chain for the cases of Lab 37
// section 5 and the ways a trim fails to return space, with the lab's own
// numbers where it has them (4 GiB volume, 14 GiB pool).
func TestDecideDiscard(t *testing.T) {
	const vol = 4 << 30
	res := int64(vol/20000 + 512)
	base := func() verdictIn {
		return verdictIn{VMID: 370, DiskID: "scsi1", Bus: "scsi", ConfiguredDiscard: "on", RunningDiscard: "unmap",
			FixDrive: "local-lvm:vm-370-disk-1,iothread=1,discard=on", StorageType: "lvmthin", Thin: true, Mode: "trim",
			GuestMapped: true, DevCounts: true, Resolution: res, PoolName: "pve/data", PoolResolution: 15032385536/20000 + 512,
			PoolDiscards: "passdown", ChunkBytes: 64 << 10, Snapshots: []string{}}
	}
	pct := func(p float64, size int64) *int64 { b := int64(p / 100 * float64(size)); return &b }
	cases := []struct {
		name    string
		in      func() verdictIn
		verdict string
		codes   []string
	}{
		{"lab: discard=ignore, fstrim 2.9 GiB, lvs unchanged at 50.79 %", func() verdictIn {
			in := base()
			in.ConfiguredDiscard, in.RunningDiscard = "ignore", "ignore"
			in.GuestTrimmed = i64(3068858368)
			in.DevOps, in.DevBytes = 24, 3068858368
			in.Before, in.After = pct(50.79, vol), pct(50.79, vol)
			in.PoolBefore, in.PoolAfter = pct(79, 15032385536), pct(79, 15032385536)
			return in
		}, verdictNot, []string{"discard-ignore"}},
		{"lab: discard=on, 50.79 % -> 3.46 %, pool 79 % -> 65.69 %", func() verdictIn {
			in := base()
			in.GuestTrimmed = i64(4142604288)
			in.DevOps, in.DevBytes, in.OKOps, in.OKBytes = 40, 4142604288, 40, 4142604288
			in.Before, in.After = pct(50.79, vol), pct(3.46, vol)
			in.PoolBefore, in.PoolAfter = pct(79, 15032385536), pct(65.69, 15032385536)
			return in
		}, verdictReturned, nil},
		{"lab: fstrim right after rm frees 6 MiB (journal not committed)", func() verdictIn {
			in := base()
			in.GuestTrimmed = i64(6283264)
			in.OKOps, in.OKBytes = 3, 6283264
			in.Before, in.After = pct(28.46, vol), pct(28.46, vol)
			return in
		}, verdictNot, []string{"already-free"}},
		{"second trim: ext4 trims 0", func() verdictIn {
			in := base()
			in.GuestTrimmed = i64(0)
			in.Before, in.After = pct(3.46, vol), pct(3.46, vol)
			return in
		}, verdictNot, []string{"guest-sent-nothing"}},
		{"config on, QEMU still ignore", func() verdictIn {
			in := base()
			in.RunningDiscard = "ignore"
			in.GuestTrimmed = i64(1 << 30)
			in.DevOps, in.DevBytes = 8, 1<<30
			in.Before, in.After = pct(50, vol), pct(50, vol)
			return in
		}, verdictNot, []string{"discard-pending"}},
		{"pool discards=ignore: QEMU's discards fail", func() verdictIn {
			in := base()
			in.PoolDiscards = "ignore"
			in.GuestTrimmed = i64(1 << 30)
			in.DevOps, in.DevBytes, in.FailedOps = 8, 1<<30, 8
			in.Before, in.After = pct(50, vol), pct(50, vol)
			return in
		}, verdictNot, []string{"storage-refused", "pool-ignores-discards"}},
		{"snapshot holds the blocks", func() verdictIn {
			in := base()
			in.Snapshots = []string{"snap_vm-370-disk-1_before"}
			in.GuestTrimmed = i64(1 << 30)
			in.OKOps, in.OKBytes = 8, 1<<30
			in.Before, in.After = pct(50, vol), pct(25, vol)
			in.PoolBefore, in.PoolAfter = pct(79, 15032385536), pct(79, 15032385536)
			return in
		}, verdictPartly, []string{"snapshots-hold-blocks"}},
		{"discards smaller than the chunk", func() verdictIn {
			in := base()
			in.GuestTrimmed = i64(1 << 20)
			in.OKOps, in.OKBytes = 64, 1<<20
			in.Before, in.After = pct(50, vol), pct(50, vol)
			return in
		}, verdictNot, []string{"below-chunk-size"}},
		{"virtio-blk, --wait, nothing seen, discard on: not trimmed", func() verdictIn {
			in := base()
			in.Bus, in.Mode, in.DevCounts, in.GuestMapped = "virtio", "wait", false, false
			in.Before, in.After = pct(50, vol), pct(50, vol)
			return in
		}, verdictNotTrimmed, []string{"guest-sent-nothing"}},
		{"virtio-blk, --wait, discard ignore on thin: not returned", func() verdictIn {
			in := base()
			in.Bus, in.Mode, in.DevCounts, in.GuestMapped = "virtio", "wait", false, false
			in.ConfiguredDiscard, in.RunningDiscard = "ignore", "ignore"
			in.Before, in.After = pct(50, vol), pct(50, vol)
			return in
		}, verdictNot, []string{"discard-ignore", "guest-sent-nothing"}},
		{"--trim, no filesystem on the disk", func() verdictIn {
			in := base()
			in.Before, in.After = pct(50, vol), pct(50, vol)
			return in
		}, verdictNotTrimmed, []string{"no-filesystem"}},
		{"guest wrote during the window", func() verdictIn {
			in := base()
			in.Mode = "wait"
			in.OKOps, in.OKBytes = 1, 1<<20
			in.Before, in.After = pct(10, vol), pct(20, vol)
			return in
		}, verdictNot, []string{"allocation-grew", "already-free"}},
		{"rbd: not measurable", func() verdictIn {
			in := base()
			in.StorageType, in.PoolName, in.PoolDiscards = "rbd", "", ""
			in.Unmeasured = "rbd du failed"
			in.GuestTrimmed = i64(1 << 20)
			in.OKOps, in.OKBytes = 1, 1<<20
			return in
		}, verdictUnmeasured, []string{"unmeasured"}},
		{"pool busy: other volumes allocate meanwhile", func() verdictIn {
			in := base()
			in.GuestTrimmed = i64(1 << 30)
			in.OKOps, in.OKBytes = 8, 1<<30
			in.Before, in.After = pct(50, vol), pct(25, vol)
			in.PoolBefore, in.PoolAfter = pct(79, 15032385536), pct(79, 15032385536)
			return in
		}, verdictReturned, []string{"pool-busy"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v, rs := decideDiscard(c.in())
			if v != c.verdict || strings.Join(codes(rs), ",") != strings.Join(c.codes, ",") {
				t.Errorf("verdict %s %v, want %s %v", v, codes(rs), c.verdict, c.codes)
				for _, r := range rs {
					t.Logf("  %s: %s | %s", r.Code, r.Text, r.Fix)
				}
			}
		})
	}
	// The fix keeps every other option of the disk and says a guest reboot is not enough.
	in := cases[0].in()
	_, rs := decideDiscard(in)
	if want := "qm set 370 --scsi1 local-lvm:vm-370-disk-1,iothread=1,discard=on, then qm reboot 370 (a full stop and start; a reboot inside the guest is not enough)"; rs[0].Fix != want {
		t.Errorf("fix\n got %s\nwant %s", rs[0].Fix, want)
	}
	if !strings.Contains(rs[0].Text, "received 2.86 GiB in 24 requests and passed on none") {
		t.Errorf("text %s", rs[0].Text)
	}
}

func hasCode(rs []discardReason, code string) bool {
	for _, r := range rs {
		if r.Code == code {
			return true
		}
	}
	return false
}

func codes(rs []discardReason) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.Code)
	}
	return out
}
