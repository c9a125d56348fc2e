package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/cache"
	"github.com/pvediskcheck/pvediskcheck/discard"
	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/internal/e2e"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// TestDiscardGuestE2E is Lab 37 section 5 with a real guest: ext4 on VirtIO
// SCSI (discard=on and discard=ignore), SATA and VirtIO Block disks on the
// local-lvm stand-in, 64 MiB of non-zero data written and removed in the
// guest, then `discard --trim` (guest-fstrim through the agent). The guest
// reports the same trim on every disk; only the discard=on disks give the
// space back, SCSI and SATA count the discards at the device even with
// discard=ignore, VirtIO Block does not count them at all. A second --trim
// finds ext4 trimming nothing; --wait sees an fstrim run in the guest.
func TestDiscardGuestE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a guest")
	}
	skipOnAlternateQEMU(t)
	n := fakenode.NewT(t)
	n.QEMU = e2e.GuestQEMU(t)
	kernel, initrd := e2e.GuestImage(t)
	n.UseDoubles(t)
	disks := []struct{ id, vol, discard, mnt string }{
		{"scsi1", "vm-370-disk-1", "on", "/mnt/s1"},
		{"scsi2", "vm-370-disk-2", "ignore", "/mnt/s2"},
		{"sata1", "vm-370-disk-3", "on", "/mnt/a1"},
		{"virtio1", "vm-370-disk-4", "on", "/mnt/v1"},
	}
	var cfg strings.Builder
	cfg.WriteString("agent: 1\nscsihw: virtio-scsi-single\nostype: l26\n")
	for _, d := range disks {
		n.MustVolume(t, "local-lvm", d.vol, 256<<20)
		cfg.WriteString(sf("%s: local-lvm:%s,discard=%s,size=256M\n", d.id, d.vol, d.discard))
	}
	// Issue 34: a disk the guest has no filesystem on: what a trim would
	// give back is unknown, never 0.
	n.MustVolume(t, "local-lvm", "vm-370-disk-5", 64<<20)
	cfg.WriteString("scsi3: local-lvm:vm-370-disk-5,discard=on,size=64M\n")
	// and one with a partition table: ext4 on the first partition, swap
	// (never mounted) on the second: unknown, the swap partition's doing.
	n.MustVolume(t, "local-lvm", "vm-370-disk-6", 64<<20)
	cfg.WriteString("scsi4: local-lvm:vm-370-disk-6,discard=on,size=64M\n")
	if err := n.WriteConfig(370, cfg.String()); err != nil {
		t.Fatal(err)
	}
	serial := filepath.Join(t.TempDir(), "serial.log")
	qga := n.Paths.QGASocket(370)
	boot := time.Now()
	n.MustStart(t, 370, fakenode.ArgvOptions{Extra: e2e.GuestArgs(kernel, initrd, qga, serial)})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bootCtx, bootCancel := context.WithTimeout(ctx, 2*time.Minute)
	defer bootCancel()
	if err := e2e.WaitAgent(bootCtx, qga); err != nil {
		t.Fatalf("%v\nserial:\n%s", err, e2e.SerialTail(serial))
	}
	t.Logf("guest agent ready %.1f s after start", time.Since(boot).Seconds())
	agent := qmp.Agent{Path: qga, Timeout: 10 * time.Second}

	// Find each disk in the guest: SCSI by device id, the one virtio disk,
	// and the sd* behind the AHCI controller.
	dev := map[string]string{}
	for _, d := range disks[:2] {
		p, err := e2e.FindSCSIDisk(ctx, agent, "drive-"+d.id)
		if err != nil {
			t.Fatal(err)
		}
		dev[d.id] = p
	}
	dev["virtio1"] = "/dev/vda"
	out, err := e2e.Sh(ctx, agent, `for f in /sys/block/sd*; do case "$(readlink -f $f)" in *ata*) echo /dev/${f##*/};; esac; done`)
	if err != nil {
		t.Fatal(err)
	}
	dev["sata1"] = strings.TrimSpace(out)
	t.Logf("guest devices: %v", dev)

	prep := time.Now()
	for _, d := range disks {
		script := sf("set -e; mkfs.ext4 -q -F %s; mkdir -p %s; mount -t ext4 %s %s; "+
			"yes pvediskcheck | dd of=%s/f bs=1M count=64 iflag=fullblock 2>/dev/null; sync", dev[d.id], d.mnt, dev[d.id], d.mnt, d.mnt)
		if _, err := e2e.Sh(ctx, agent, script); err != nil {
			t.Fatal(err)
		}
	}
	allocWritten := map[string]int64{}
	for _, d := range disks {
		allocWritten[d.id] = fakenode.MustAllocated(t, n.ThinVolumeFile(d.vol))
	}
	if _, err := e2e.Sh(ctx, agent, "set -e; rm /mnt/s1/f /mnt/s2/f /mnt/a1/f /mnt/v1/f; sync; sleep 1; sync"); err != nil {
		t.Fatal(err)
	}
	t.Logf("mkfs + 4 x 64 MiB written and removed in %.1f s", time.Since(prep).Seconds())
	// scsi3 holds 8 MiB with no filesystem (as a raw database would).
	raw, err := e2e.FindSCSIDisk(ctx, agent, "drive-scsi3")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e2e.Sh(ctx, agent, sf("set -e; yes pvediskcheck | dd of=%s bs=1M count=8 iflag=fullblock oflag=direct 2>/dev/null; sync", raw)); err != nil {
		t.Fatal(err)
	}
	parted, err := e2e.FindSCSIDisk(ctx, agent, "drive-scsi4")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := e2e.Sh(ctx, agent, sf("set -e; printf 'n\\np\\n1\\n\\n+32M\\nn\\np\\n2\\n\\n\\nw\\n' | fdisk %[1]s >/dev/null 2>&1 || true; partprobe %[1]s 2>/dev/null || true; sleep 1; "+
		"mkfs.ext4 -q -F %[1]s1; mkswap %[1]s2 >/dev/null; mkdir -p /mnt/p1; mount -t ext4 %[1]s1 /mnt/p1; "+
		"yes pvediskcheck | dd of=/mnt/p1/f bs=1M count=4 iflag=fullblock 2>/dev/null; sync; ls %[1]s*", parted)); err != nil {
		t.Fatalf("partitioning %s: %v %s", parted, err, out)
	}
	for _, c := range []string{"guest-get-disks", "guest-get-fsinfo"} {
		if r, err := agent.Call(ctx, c, nil); err == nil {
			t.Logf("%s with %s partitioned: %s", c, parted, r.Raw)
		}
	}
	if fs, err := agent.Call(ctx, "guest-get-fsinfo", nil); err == nil {
		t.Logf("guest-get-fsinfo before the trim: %s", fs.Raw)
	}

	// Issue 34: the status asks the agent (guest-get-disks, guest-get-fsinfo)
	// and predicts what the trim gives back.
	var status discard.Report
	if errs, code := runJSON(t, n, &status, "discard", "370"); code != 0 {
		t.Errorf("status: exit %d: %s", code, errs)
	}
	// cache shows the same filesystems per disk (within its 0.5 s).
	var cv cache.View
	if errs, code := runJSON(t, n, &cv, "cache", "370"); code != 0 {
		t.Errorf("cache: exit %d: %s", code, errs)
	}
	for _, cd := range cv.Disks {
		want := ""
		for _, d := range disks {
			if d.id == cd.ID {
				want = d.mnt
			}
		}
		layout := guestdisk.OnDisk
		if cd.ID == "scsi4" {
			want, layout = "/mnt/p1", guestdisk.OnPartition
		}
		fs := cd.GuestFilesystems
		if want == "" && (fs == nil || len(fs) != 0) || want != "" && (len(fs) != 1 || fs[0].Mountpoint != want || fs[0].UsedBytes == nil || fs[0].Layout != layout) {
			t.Errorf("cache %s: guest filesystems %+v, want %q", cd.ID, fs, want)
		}
	}
	for _, id := range []string{"scsi1", "scsi2", "sata1", "virtio1", "scsi3", "scsi4"} {
		if r := diskByID(t, status, id).Reclaimable; r != nil {
			t.Logf("status %-8s reclaimable %s up to %v at least %v (allocated %v, guest uses %v) %v", id, r.Verdict, deref(r.UpToBytes), deref(r.AtLeastBytes), deref(r.AllocatedBytes), deref(r.GuestUsedBytes), reasonCodes(r.Reasons))
		}
	}

	trimStart := time.Now()
	var res discard.Report
	errs, code := runJSON(t, n, &res, "discard", "370", "--trim")
	t.Logf("discard --trim took %.1f s (guest-fstrim %.1f s)", time.Since(trimStart).Seconds(), *res.WindowSeconds)
	if code != exitProblem {
		t.Errorf("exit %d, want 1 (scsi2 has discard=ignore): %s", code, errs)
	}
	for _, p := range res.GuestFstrim {
		t.Logf("guest: %s trimmed %d on %v %s", p.Path, p.TrimmedBytes, p.Disks, p.Error)
	}
	// Issue 34: the prediction made before the trim against what it gave
	// back. An upper bound: what ext4 wrote of its own metadata (journal,
	// bitmaps, inode tables: not in its used bytes) stays allocated; the
	// lower bound takes all of the metadata space off.
	if rc := diskByID(t, res, "scsi3").Reclaimable; rc == nil || rc.Verdict != discard.ReclaimUnknown || rc.UpToBytes != nil || !hasReason(rc.Reasons, discard.CodeNoFilesystem) {
		t.Errorf("scsi3 (no filesystem): reclaimable %+v, want unknown (no-filesystem)", rc)
	}
	if dj := diskByID(t, res, "scsi4"); dj.Reclaimable == nil || dj.Reclaimable.Verdict != discard.ReclaimUnknown || dj.Reclaimable.UpToBytes != nil ||
		!hasReason(dj.Reclaimable.Reasons, discard.CodeGuestPartitions) || len(dj.GuestFilesystems) != 1 || dj.GuestFilesystems[0].Layout != "partition" {
		t.Errorf("scsi4 (ext4 and swap partitions): filesystems %+v, reclaimable %+v, want unknown (guest-partitions)", dj.GuestFilesystems, dj.Reclaimable)
	} else {
		t.Logf("scsi4: %s", dj.Reclaimable.Reasons[len(dj.Reclaimable.Reasons)-1].Text)
	}
	for _, d := range disks {
		dj := diskByID(t, res, d.id)
		rc, r := dj.Reclaimable, dj.Result
		if rc == nil || rc.Verdict != discard.ReclaimKnown || len(dj.GuestFilesystems) != 1 || dj.GuestFilesystems[0].Mountpoint != d.mnt {
			t.Errorf("%s: filesystems %+v, reclaimable %+v: want known, %s", d.id, dj.GuestFilesystems, rc, d.mnt)
			continue
		}
		unit := max(r.ResolutionBytes, dj.Allocation.Pool.ChunkSizeBytes)
		t.Logf("%-8s predicted up to %d, at least %d (allocated %d, guest uses %d); returned %d: upper bound over by %d (%.1f allocation units of %d)",
			d.id, *rc.UpToBytes, deref(rc.AtLeastBytes), *rc.AllocatedBytes, *rc.GuestUsedBytes, *r.ReturnedBytes, *rc.UpToBytes-*r.ReturnedBytes, float64(*rc.UpToBytes-*r.ReturnedBytes)/float64(unit), unit)
		if *rc.AllocatedBytes != *r.AllocatedBeforeBytes {
			t.Errorf("%s: predicted from %d, the trim's before is %d", d.id, *rc.AllocatedBytes, *r.AllocatedBeforeBytes)
		}
		if d.discard == "ignore" {
			if !hasReason(rc.Reasons, discard.CodeDiscardIgnore) {
				t.Errorf("%s: reclaimable without discard-ignore: %v", d.id, reasonCodes(rc.Reasons))
			}
			continue
		}
		if *r.ReturnedBytes > *rc.UpToBytes+unit || rc.AtLeastBytes == nil || *r.ReturnedBytes < *rc.AtLeastBytes-unit {
			t.Errorf("%s: returned %d outside the predicted [%v, %d] (+-%d)", d.id, *r.ReturnedBytes, deref(rc.AtLeastBytes), *rc.UpToBytes, unit)
		}
	}
	for _, d := range disks {
		dj := diskByID(t, res, d.id)
		r := dj.Result
		t.Logf("%-8s discard=%-6s written: file %d; guest trimmed %v; QEMU received %d/%d; storage ok %d/%d failed %d; allocated %v -> %v (returned %v); pool %v -> %v; %s %v",
			d.id, d.discard, allocWritten[d.id], deref(r.GuestTrimmedBytes), r.QEMUReceivedOps, r.QEMUReceivedBytes, r.StorageAcceptedOps, r.StorageAcceptedBytes, r.StorageFailedOps,
			deref(r.AllocatedBeforeBytes), deref(r.AllocatedAfterBytes), deref(r.ReturnedBytes), deref(r.PoolBeforeBytes), deref(r.PoolAfterBytes), r.Verdict, reasonCodes(r.Reasons))
		if r.GuestTrimmedBytes == nil || *r.GuestTrimmedBytes < 60<<20 {
			t.Errorf("%s: the guest's trim was not placed on this disk or is too small: %v", d.id, deref(r.GuestTrimmedBytes))
		}
		switch {
		case d.discard == "ignore":
			if r.Verdict != discard.NotReturned || !hasReason(r.Reasons, "discard-ignore") || r.StorageAcceptedBytes != 0 || *r.ReturnedBytes > 2*r.ResolutionBytes {
				t.Errorf("%s: %s %v accepted %d returned %d", d.id, r.Verdict, reasonCodes(r.Reasons), r.StorageAcceptedBytes, *r.ReturnedBytes)
			}
		default:
			if r.Verdict != discard.Returned || r.StorageAcceptedBytes < 60<<20 || *r.ReturnedBytes < 60<<20 {
				t.Errorf("%s: %s %v accepted %d returned %d", d.id, r.Verdict, reasonCodes(r.Reasons), r.StorageAcceptedBytes, *r.ReturnedBytes)
			}
		}
		// QEMU-FACTS: SCSI and SATA count guest discards at the device even
		// with discard=ignore; VirtIO Block does not count them.
		if d.id == "virtio1" {
			if r.QEMUReceivedOps != 0 || dj.SinceStart.DeviceCounts {
				t.Errorf("virtio1: device counted %d discards", r.QEMUReceivedOps)
			}
		} else if r.QEMUReceivedBytes < 60<<20 {
			t.Errorf("%s: device unmap_bytes grew by %d, want the guest's trim", d.id, r.QEMUReceivedBytes)
		}
	}
	if dir := os.Getenv("PVEDISKCHECK_E2E_DUMP"); dir != "" {
		// Fixture making (discard/testdata/README.md, PVEDISKCHECK_E2E_DUMP=$PWD/discard/testdata/guest): the real answers the
		// guest mapping is built on, and this run's report.
		b, _ := json.MarshalIndent(res, "", "  ")
		_ = os.WriteFile(filepath.Join(dir, "e2e-trim-report.json"), b, 0o644)
		fs, _ := agent.Call(ctx, "guest-get-fsinfo", nil)
		_ = os.WriteFile(filepath.Join(dir, "real-guest-get-fsinfo.json"), []byte(fs.Raw+"\n"), 0o644)
		_ = qmp.Do(ctx, n.Paths.QMPSocket(370), 5*time.Second, func(s qmp.Session) error {
			pci, err := s.Exec("query-pci", nil)
			_ = os.WriteFile(filepath.Join(dir, "real-query-pci.json"), []byte(pci.Raw+"\n"), 0o644)
			return err
		})
	}
	human, _, _ := runCLI(t, "--root", n.Root, "discard", "370", "scsi1", "scsi2")
	t.Logf("human output after the trim (status):\n%s", human)
	if dir := os.Getenv("PVEDISKCHECK_E2E_DUMP"); dir != "" {
		// The README's example: another 64 MiB written and removed on every
		// disk, then the human report of a trim.
		if _, err := e2e.Sh(ctx, agent, "set -e; for m in /mnt/s1 /mnt/s2 /mnt/a1 /mnt/v1; do yes pvediskcheck | dd of=$m/f bs=1M count=64 iflag=fullblock 2>/dev/null; done; sync; rm /mnt/*/f; sync; sleep 1; sync"); err != nil {
			t.Fatal(err)
		}
		stdout, _, code := runCLI(t, "--root", n.Root, "discard", "370", "--trim")
		_ = os.WriteFile(filepath.Join(dir, "e2e-trim-human.txt"), []byte(sf("$ pvediskcheck discard 370 --trim\n%s[exit %d]\n", stdout, code)), 0o644)
	}

	// Lab 37: a second trim right away trims nothing on ext4.
	var again discard.Report
	if _, code := runJSON(t, n, &again, "discard", "370", "scsi1", "--trim"); code != exitProblem {
		t.Errorf("second --trim: exit %d", code)
	}
	if r := diskByID(t, again, "scsi1").Result; r.Verdict != discard.NotReturned || !hasReason(r.Reasons, "guest-sent-nothing") || deref(r.GuestTrimmedBytes) != int64(0) {
		t.Errorf("second --trim: %s %v trimmed %v", r.Verdict, reasonCodes(r.Reasons), deref(r.GuestTrimmedBytes))
	}

	// --wait: the tool never touches the agent; the "admin" runs fstrim in
	// the guest during the window.
	if _, err := e2e.Sh(ctx, agent, "set -e; yes pvediskcheck | dd of=/mnt/s1/g bs=1M count=32 iflag=fullblock 2>/dev/null; sync; rm /mnt/s1/g; sync; sleep 1; sync"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	var fstrimOut string
	var fstrimErr error
	go func() {
		defer wg.Done()
		time.Sleep(2 * time.Second)
		fstrimOut, fstrimErr = e2e.Sh(ctx, agent, "fstrim -v /mnt/s1")
	}()
	var w discard.Report
	_, code = runJSON(t, n, &w, "discard", "370", "scsi1", "--wait", "8s")
	wg.Wait()
	if fstrimErr != nil {
		t.Fatal(fstrimErr)
	}
	r := diskByID(t, w, "scsi1").Result
	t.Logf("--wait: guest said %q; QEMU received %d, storage accepted %d, returned %v: %s %v",
		strings.TrimSpace(fstrimOut), r.QEMUReceivedBytes, r.StorageAcceptedBytes, deref(r.ReturnedBytes), r.Verdict, reasonCodes(r.Reasons))
	if code != 0 || r.Verdict != discard.Returned || r.GuestTrimmedBytes != nil || *r.ReturnedBytes < 28<<20 {
		t.Errorf("--wait: exit %d %s returned %v", code, r.Verdict, deref(r.ReturnedBytes))
	}
}
