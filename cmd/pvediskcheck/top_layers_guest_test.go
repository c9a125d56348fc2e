//go:build integration

package main

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/e2e"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/layers"
)

// TestTopLayersGuest (issue 35 item 3, the real-guest tier), three fio jobs
// in a real guest at once, top --layers reading the guest's own diskstats
// through its agent, one exchange per sample:
//   - scsi1, depth 32 against iops_wr=200: the guest waits about as long as
//     QEMU (32/200 s), QEMU's throttle holds the requests, the loop device
//     below takes a fraction: held by QEMU: I/O limit;
//   - scsi2, the same load on a volume whose node device is slowed (its
//     loop device on one a blkio v1 group throttles to 200 writes/s):
//     storage, the guest, QEMU and the device all near 32/200 s;
//   - scsi0, depth 1 with an fsync per write on an unlimited disk: neither
//     a limit nor a guest queue.
func TestTopLayersGuest(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a guest and runs fio")
	}
	skipOnAlternateQEMU(t)
	n := fakenode.NewT(t)
	n.UseDoubles(t)
	cfg := "agent: 1\nostype: l26\nscsihw: virtio-scsi-single\n"
	for i, opt := range []string{"", "iops_wr=200,", ""} {
		vol := sf("vm-372-disk-%d", i)
		n.MustVolume(t, "local-lvm", vol, 256<<20)
		cfg += sf("scsi%d: local-lvm:%s,iothread=1,%ssize=256M\n", i, vol, opt)
	}
	if err := n.WriteConfig(372, cfg); err != nil {
		t.Fatal(err)
	}
	_, join := throttledLoop(t, n, "vm-372-disk-2", 200)
	g := bootGuest(t, n, 372, n.QEMU)
	join(g.vm.Pid)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	devs := map[string]string{}
	for _, id := range []string{"scsi0", "scsi1", "scsi2"} {
		dev, err := e2e.FindSCSIDisk(ctx, g.agent, "drive-"+id)
		if err != nil {
			t.Fatal(err)
		}
		devs[id] = dev
	}
	for id, job := range map[string]string{
		"scsi1": "--rw=randwrite --bs=4k --iodepth=32", "scsi2": "--rw=randwrite --bs=4k --iodepth=32",
		"scsi0": "--rw=write --bs=4k --iodepth=1 --fsync=1",
	} {
		if _, err := g.agent.Exec(ctx, "/bin/sh", []string{"-c", "fio --name=" + id + " --filename=" + devs[id] + " " + job +
			" --ioengine=libaio --direct=1 --time_based --runtime=40 >/dev/null 2>&1"}, nil); err != nil {
			t.Fatal(err)
		}
	}
	code, stderr, samples := topStream(t, []string{"--root", n.Root, "top", "372", "--layers", "--count", "12", "--interval", "1s"}, nil)
	if code != 0 || stderr != "" {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	const want = 32.0 / 200 * 1000
	read, steady := 0, 0
	for i, s := range samples {
		rows := rowsOf(s, 372)
		l := rows["scsi1"].Layers
		if l == nil {
			t.Fatalf("sample %d: scsi1 without layers", i)
		}
		for _, id := range []string{"scsi1", "scsi2", "scsi0"} {
			if rl := rows[id].Layers; rl != nil {
				t.Logf("%d %s: QD %.1f: %s", i, id, rows[id].QueueDepth, rl.Says)
			}
		}
		if l.Guest == nil {
			continue // the agent's lookup of the devices, then two reads for a first interval
		}
		read++
		if rows["scsi1"].QueueDepth < 0.9*32 || rows["scsi2"].QueueDepth < 0.9*32 {
			continue // the fio jobs starting under TCG, the throttle's first burst
		}
		steady++
		if l.Verdict != layers.HeldIOLimit || l.Storage == nil {
			t.Errorf("sample %d: %q, want %q: %s", i, l.Verdict, layers.HeldIOLimit, l.Says)
			continue
		}
		if math.Abs(l.Guest.MsPerRequest-want)/want > 0.15 || math.Abs(l.QEMU.MsPerRequest-want)/want > 0.15 || *l.QEMU.AddsPct < 85 {
			t.Errorf("sample %d: guest %.1f, QEMU %.1f ms (adds %v %%), want %.0f within 15 %%", i, l.Guest.MsPerRequest, l.QEMU.MsPerRequest, *l.QEMU.AddsPct, want)
		}
		if l2 := rows["scsi2"].Layers; l2 == nil || l2.Verdict != layers.Storage || l2.Guest == nil ||
			math.Abs(l2.Storage.MsPerRequest-want)/want > 0.15 || *l2.Storage.AddsPct < 85 {
			t.Errorf("sample %d: scsi2 on the throttled device %+v, want storage at about %.0f ms", i, l2, want)
		}
		if l0 := rows["scsi0"].Layers; l0 == nil || l0.Guest == nil || l0.Verdict == layers.HeldIOLimit || l0.Verdict == layers.QueuedInGuest || l0.Verdict == layers.Idle {
			t.Errorf("sample %d: scsi0 at depth 1 with fsync %+v", i, l0)
		}
		if !strings.Contains(l.Says, "guest waits ") {
			t.Errorf("sample %d: %s", i, l.Says)
		}
	}
	if read < 6 || steady < 5 {
		t.Errorf("the guest layer read in %d of %d samples, %d of them at depth 32", read, len(samples), steady)
	}
}
