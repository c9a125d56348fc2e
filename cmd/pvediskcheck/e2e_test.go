package main

// The end-to-end tier: a real Linux guest (internal/e2e) with Proxmox's disk
// layout, driven only through the guest agent, and the tool's JSON asserted
// against what the guest did. `make e2e` runs just these.

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/cache"
	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/flush"
	"github.com/pvediskcheck/pvediskcheck/internal/e2e"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/limit"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

type guestVM struct {
	n      *fakenode.Node
	vm     *fakenode.VM
	agent  qmp.Agent
	serial string
}

// bootGuest starts VM vmid (its config already written) with the test guest
// and the agent channel Proxmox adds for agent: 1, and waits for the agent.
func bootGuest(t *testing.T, n *fakenode.Node, vmid int, qemu string) *guestVM {
	t.Helper()
	kernel, initrd := e2e.GuestImage(t)
	if os.Getenv("PVEDISKCHECK_QEMU") != "" {
		// A QEMU in a chroot (scripts/qemu-11.1) sees the host's /tmp but
		// not the image cache: give it copies.
		dir := t.TempDir()
		kernel, initrd = copyInto(t, kernel, dir), copyInto(t, initrd, dir)
	}
	n.QEMU = qemu
	serial := filepath.Join(t.TempDir(), "serial.log")
	qga := n.Paths.QGASocket(vmid)
	t0 := time.Now()
	vm := n.MustStart(t, vmid, fakenode.ArgvOptions{Extra: e2e.GuestArgs(kernel, initrd, qga, serial)})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := e2e.WaitAgent(ctx, qga); err != nil {
		t.Fatalf("%v\nserial:\n%s", err, e2e.SerialTail(serial))
	}
	t.Logf("%s: guest agent ready %.1f s after start", qemuName(t), time.Since(t0).Seconds())
	return &guestVM{n: n, vm: vm, agent: qmp.Agent{Path: qga, Timeout: 10 * time.Second}, serial: serial}
}

func (g *guestVM) sh(t *testing.T, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	out, err := e2e.Sh(ctx, g.agent, script)
	if err != nil {
		t.Fatalf("%v\nserial:\n%s", err, e2e.SerialTail(g.serial))
	}
	return out
}

func (g *guestVM) scsiDev(t *testing.T, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dev, err := e2e.FindSCSIDisk(ctx, g.agent, "drive-"+id)
	if err != nil {
		t.Fatal(err)
	}
	return dev
}

// dirtyHost writes size bytes of non-zero data to a file on the node without
// syncing: another writer moving the node-wide Dirty counter.
func dirtyHost(t *testing.T, size int) {
	f, err := os.Create(filepath.Join(t.TempDir(), "other-writer"))
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i*7 + 1)
	}
	for i := 0; i < size>>20; i++ {
		f.Write(buf)
	}
}

// TestE2EFlushFiveModes (issue 6): a guest writes 128 MiB of non-zero data
// with O_DIRECT and an fsync at the end on each of the five cache modes while
// `flush` watches; another process dirties node page cache meanwhile. Runs on
// the QEMU under test (7.2, and 11.1 in make test-qemu11).
func TestE2EFlushFiveModes(t *testing.T) {
	fakenode.RequireQEMU(t)
	n := fakenode.NewT(t)
	var cfg strings.Builder
	cfg.WriteString("agent: 1\nostype: l26\nscsihw: virtio-scsi-single\n")
	for i, m := range fiveModes {
		vol := sf("376/vm-376-disk-%d.raw", i+1)
		n.MustVolume(t, "local", vol, 512<<20)
		cfg.WriteString(sf("scsi%d: local:%s,iothread=1,cache=%s,size=512M\n", i+1, vol, m))
	}
	n.WriteConfig(376, cfg.String())
	g := bootGuest(t, n, 376, fakenode.QEMUBinary())
	want := map[string]flush.Verdict{"none": flush.NotApplicable, "writethrough": flush.NotApplicable, "writeback": flush.Honored, "directsync": flush.NotApplicable, "unsafe": flush.Ignored}
	for i, m := range fiveModes {
		id := sf("scsi%d", i+1)
		t.Run(qemuName(t)+"/"+m, func(t *testing.T) {
			dev := g.scsiDev(t, id)
			var out flush.Result
			var code int
			var errs string
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs, code = runJSON(t, n, &out, "flush", "376", id, "--for", "10s")
			}()
			time.Sleep(1500 * time.Millisecond)
			go dirtyHost(t, 256<<20) // another writer on the node
			g.sh(t, "fio --name=w --filename="+dev+" --rw=write --bs=1M --size=128M --direct=1 --ioengine=psync --end_fsync=1 --output-format=terse >/dev/null")
			wg.Wait()
			if len(out.Verdicts) != 1 {
				t.Fatalf("exit %d %s: %+v", code, errs, out)
			}
			v := out.Verdicts[0]
			t.Logf("%s: %s: %s", id, v.Verdict, v.Reason)
			if v.Verdict != want[m] {
				t.Fatalf("%s (%s): verdict %s, want %s: %s", id, m, v.Verdict, want[m], v.Reason)
			}
			if v.WrittenBytes < 64<<20 { // writethrough is slow under TCG: the window may end first
				t.Errorf("only %d bytes written seen", v.WrittenBytes)
			}
			switch m {
			case "unsafe":
				if code != 1 || v.Flushes < 1 || v.MeanFlushMs > 1 || v.CrashLosesBytes < 64<<20 {
					t.Errorf("unsafe: exit %d flushes %d mean %.3f ms, crash loses %d", code, v.Flushes, v.MeanFlushMs, v.CrashLosesBytes)
				}
			case "writeback":
				if code != 0 || v.Flushes < 1 || v.MeanFlushMs < 1 {
					t.Errorf("writeback: exit %d flushes %d mean %.3f ms", code, v.Flushes, v.MeanFlushMs)
				}
			}
		})
	}
	// Zeroes are not data: the same write with zero buffers on writeback.
	t.Run(qemuName(t)+"/writeback-zeroes", func(t *testing.T) {
		dev := g.scsiDev(t, "scsi3")
		g.sh(t, "blkdiscard "+dev+" 2>/dev/null; true")
		var out flush.Result
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); runJSON(t, n, &out, "flush", "376", "scsi3", "--for", "6s") }()
		time.Sleep(1500 * time.Millisecond)
		g.sh(t, "fio --name=z --filename="+dev+" --rw=write --bs=1M --offset=256M --size=128M --direct=1 --ioengine=psync --zero_buffers --end_fsync=1 --output-format=terse >/dev/null")
		wg.Wait()
		if len(out.Verdicts) != 1 || out.Verdicts[0].Verdict == flush.Honored {
			t.Fatalf("zero writes judged %+v", out.Verdicts)
		}
		t.Logf("zeroes: %s: %s", out.Verdicts[0].Verdict, out.Verdicts[0].Reason)
		if out.Verdicts[0].Verdict != flush.ZeroData {
			t.Errorf("verdict %s, want zero-data", out.Verdicts[0].Verdict)
		}
	})
	// --trigger: the guest wrote without flushing; the tool makes it flush.
	t.Run(qemuName(t)+"/trigger", func(t *testing.T) {
		d3, d5 := g.scsiDev(t, "scsi3"), g.scsiDev(t, "scsi5")
		g.sh(t, sf("fio --name=a --filename=%s --rw=write --bs=1M --offset=256M --size=64M --direct=1 --ioengine=psync --output-format=terse >/dev/null; "+
			"fio --name=b --filename=%s --rw=write --bs=1M --offset=256M --size=64M --direct=1 --ioengine=psync --output-format=terse >/dev/null", d3, d5))
		// The writes are done: without --trigger nothing flushes them.
		var out flush.Result
		runJSON(t, n, &out, "flush", "376", "scsi3", "scsi5", "--for", "3s")
		for _, v := range out.Verdicts {
			if v.Verdict != flush.NoFlushes {
				t.Errorf("without --trigger %s: %s (%s)", v.Disk, v.Verdict, v.Reason)
			}
		}
		g.sh(t, sf("fio --name=a --filename=%s --rw=write --bs=1M --offset=320M --size=64M --direct=1 --ioengine=psync --output-format=terse >/dev/null; "+
			"fio --name=b --filename=%s --rw=write --bs=1M --offset=320M --size=64M --direct=1 --ioengine=psync --output-format=terse >/dev/null", d3, d5))
		stdout, errs, code := runCLI(t, "--root", n.Root, "flush", "376", "scsi3", "scsi5", "--for", "4s", "--trigger")
		t.Logf("$ pvediskcheck flush 376 scsi3 scsi5 --for 4s --trigger\n%s%s(exit %d)", stdout, errs, code)
		if code != 1 || !strings.Contains(stdout, "scsi3 (writeback):\n  flushes: honored") || !strings.Contains(stdout, "scsi5 (unsafe):\n  flushes: ignored") {
			t.Errorf("--trigger: exit %d\n%s%s", code, stdout, errs)
		}
	})
	// cache --verify measures the disks that keep data in node RAM.
	t.Run(qemuName(t)+"/cache-verify", func(t *testing.T) {
		d3, d5 := g.scsiDev(t, "scsi3"), g.scsiDev(t, "scsi5")
		var out cache.View
		var code int
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); _, code = runJSON(t, n, &out, "cache", "376", "--verify", "--for", "8s") }()
		time.Sleep(1500 * time.Millisecond)
		g.sh(t, sf("fio --name=a --filename=%s --rw=write --bs=1M --offset=128M --size=96M --direct=1 --ioengine=psync --end_fsync=1 --output-format=terse >/dev/null; "+
			"fio --name=b --filename=%s --rw=write --bs=1M --offset=128M --size=96M --direct=1 --ioengine=psync --end_fsync=1 --output-format=terse >/dev/null", d3, d5))
		wg.Wait()
		got := map[string]flush.Verdict{}
		for _, d := range out.Disks {
			if d.Flush != nil {
				got[d.ID] = d.Flush.Verdict
			}
		}
		if code != 1 || got["scsi3"] != flush.Honored || got["scsi5"] != flush.Ignored || len(got) != 2 {
			t.Errorf("exit %d, verdicts %v", code, got)
		}
	})
}

// skipOnAlternateQEMU keeps the 7.2-only guest scenarios out of the QEMU 11.1
// run (guests boot ~30 s slower there; the flush scenario covers 11.1).
func skipOnAlternateQEMU(t *testing.T) {
	if os.Getenv("PVEDISKCHECK_QEMU") != "" && os.Getenv("PVEDISKCHECK_E2E_ALL") == "" {
		t.Skip("guest scenario runs on the host QEMU only (set PVEDISKCHECK_E2E_ALL=1 to run it on " + os.Getenv("PVEDISKCHECK_QEMU") + ")")
	}
}

// TestE2ELab370 (issue 4, scenarios 1 and 3): Lab 37's VM 370 with a real
// guest: the disk names the guest sees, cache and check on the running VM,
// then a limit applied live while fio runs in the guest, with fio's own
// figure and `limit --verify` compared.
func TestE2ELab370(t *testing.T) {
	skipOnAlternateQEMU(t)
	fakenode.RequireQEMU(t)
	n := fakenode.NewT(t)
	lab370(t, n, "agent: 1\n")
	g := bootGuest(t, n, 370, e2e.GuestQEMU(t))

	t.Run("layout", func(t *testing.T) {
		// SCSI disks carry device_id drive-scsiN (by-id scsi-0QEMU_QEMU_HARDDISK_drive-scsiN).
		d0, d1 := g.scsiDev(t, "scsi0"), g.scsiDev(t, "scsi1")
		if d0 == d1 {
			t.Fatalf("scsi0 and scsi1 both %s", d0)
		}
		// virtio-blk: no serial unless serial= is set, so no by-id link.
		vd := g.sh(t, `for d in /sys/block/vd*; do echo "${d##*/} serial=[$(cat $d/serial 2>/dev/null)]"; done`)
		if !strings.Contains(vd, "vda serial=[]") {
			t.Errorf("virtio disks: %q", vd)
		}
		// SATA: QEMU's default serial QM%05d (by-id ata-QEMU_HARDDISK_QM000NN).
		ata := g.sh(t, `for d in /sys/block/sd*; do [ -e $d/device/vpd_pg80 ] || continue; v=$(cat $d/device/vendor); echo "${d##*/} $v $(tr -dc 'A-Za-z0-9_' < $d/device/vpd_pg80)"; done`)
		if !strings.Contains(ata, "ATA") || !strings.Contains(ata, "QM000") {
			t.Errorf("no ATA disk with a QM000NN serial: %q", ata)
		}
		t.Logf("guest disks: scsi0=%s scsi1=%s; %s; %s", d0, d1, strings.TrimSpace(vd), strings.TrimSpace(ata))
		var out cache.View
		if _, code := runJSON(t, n, &out, "cache", "370"); code != 0 {
			t.Fatalf("cache exit %d", code)
		}
		for _, d := range out.Disks {
			if *d.Cache.Effective != "none" || d.Cache.GuestWriteCache == nil || !*d.Cache.GuestWriteCache || len(d.Drift) > 0 {
				t.Errorf("%s: %+v drift %v", d.ID, d.Cache, d.Drift)
			}
		}
		var chk check.Report
		runJSON(t, n, &chk, "check", "370")
		f := findingsByCode(chk.VMs[0])
		if len(f["drift"]) != 0 || len(f["emulated-controller"]) != 1 || f["emulated-controller"][0].Disk != "sata1" {
			t.Errorf("check: %+v", chk.VMs[0].Findings)
		}
	})

	t.Run("limit-with-fio", func(t *testing.T) {
		dev := g.scsiDev(t, "scsi1")
		if _, errs, code := runCLI(t, "--root", n.Root, "limit", "370", "scsi1", "--mbps-wr", "20", "--iops-rd", "500"); code != 0 {
			t.Fatalf("limit apply: exit %d %s", code, errs)
		}
		for _, tc := range []struct {
			name, fio, limit string
			want             float64
		}{
			{"write-1M-qd8", "--rw=write --bs=1M --iodepth=8", "mbps_wr", 20},
			{"randread-4k-qd32", "--rw=randread --bs=4k --iodepth=32", "iops_rd", 500},
		} {
			t.Run(tc.name, func(t *testing.T) {
				var out limit.Result
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					time.Sleep(time.Second)
					runJSON(t, n, &out, "limit", "370", "scsi1", "--verify", "--for", "12s")
				}()
				res := g.sh(t, "fio --name=l --filename="+dev+" "+tc.fio+" --size=200M --direct=1 --ioengine=libaio --runtime=16 --time_based --ramp_time=2 --output-format=json")
				wg.Wait()
				var fioFig float64
				if tc.limit == "mbps_wr" {
					fioFig = gjsonFloat(res, "jobs.0.write.bw") / 1024 // KiB/s -> MiB/s
				} else {
					fioFig = gjsonFloat(res, "jobs.0.read.iops")
				}
				if out.Verify == nil {
					t.Fatalf("no verify section: %+v", out)
				}
				var v *limit.Judgement
				for i := range out.Verify.Verdicts {
					if out.Verify.Verdicts[i].Limit == tc.limit {
						v = &out.Verify.Verdicts[i]
					}
				}
				if v == nil {
					t.Fatalf("no verdict for %s: %+v", tc.limit, out.Verify.Verdicts)
				}
				t.Logf("%s: fio %.1f, limit --verify %.1f (%s), limit %.0f", tc.name, fioFig, v.Measured, v.Verdict, tc.want)
				if v.Verdict != "holds" {
					t.Errorf("verdict %s: %s", v.Verdict, v.Reason)
				}
				for what, x := range map[string]float64{"fio": fioFig, "verify": v.Measured} {
					if x < tc.want*0.95 || x > tc.want*1.05 {
						t.Errorf("%s measured %.2f, not within 5%% of %.0f", what, x, tc.want)
					}
				}
				if d := (v.Measured - fioFig) / fioFig; d > 0.05 || d < -0.05 {
					t.Errorf("fio %.2f and limit --verify %.2f differ by %.1f%%", fioFig, v.Measured, d*100)
				}
			})
		}
	})
}

func copyInto(t *testing.T, src, dir string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, filepath.Base(src))
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}
