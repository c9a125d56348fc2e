package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/tidwall/gjson"
)

// TestGuestSmoke boots the test guest under TCG with one VirtIO SCSI disk in
// Proxmox's -blockdev layout and drives it only through the guest agent: find
// the disk by its device id, fio on it, ext4 + write + rm + guest-fstrim.
func TestGuestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a guest (about 15 s)")
	}
	testStart := time.Now()
	qemu := GuestQEMU(t)
	kernel, initrd := GuestImage(t)
	imageReady := time.Since(testStart)

	dir := t.TempDir()
	disk := filepath.Join(dir, "vm-100-disk-1.raw")
	if err := os.WriteFile(disk, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(disk, 256<<20); err != nil { // sparse
		t.Fatal(err)
	}
	qga := filepath.Join(dir, "100.qga")
	serial := filepath.Join(dir, "serial.log")
	pidfile := filepath.Join(dir, "100.pid")
	args := []string{
		"-machine", "q35", "-accel", "tcg", "-nodefaults", "-display", "none",
		"-pidfile", pidfile, "-daemonize",
		"-device", "virtio-scsi-pci,id=scsihw0",
		"-blockdev", `{"driver":"raw","node-name":"drive-scsi1","file":{"driver":"file","filename":"` + disk +
			`","cache":{"direct":true,"no-flush":false},"aio":"io_uring"}}`,
		"-device", "scsi-hd,bus=scsihw0.0,drive=drive-scsi1,id=scsi1,device_id=drive-scsi1",
	}
	args = append(args, GuestArgs(kernel, initrd, qga, serial)...)

	bootStart := time.Now()
	out, err := exec.Command(qemu, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("QEMU refused to start: %v: %s", err, out)
	}
	pid := readPid(t, pidfile)
	t.Cleanup(func() { kill(pid) })

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bootCtx, bootCancel := context.WithTimeout(ctx, 90*time.Second)
	defer bootCancel()
	if err := WaitAgent(bootCtx, qga); err != nil {
		t.Fatalf("%v\nserial console:\n%s", err, SerialTail(serial))
	}
	bootToAgent := time.Since(bootStart)
	// The agent may answer a moment before /init sees it hold the port and
	// prints the marker.
	for i := 0; ; i++ {
		b, _ := os.ReadFile(serial)
		if bytes.Contains(b, []byte(ReadyMarker)) {
			break
		}
		if i == 50 {
			t.Errorf("serial console lacks %s:\n%s", ReadyMarker, b)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	agent := qmp.Agent{Path: qga}

	dev, err := FindSCSIDisk(ctx, agent, "drive-scsi1")
	if err != nil {
		t.Fatalf("%v\nserial console:\n%s", err, SerialTail(serial))
	}
	t.Logf("drive-scsi1 is %s in the guest", dev)

	fioStart := time.Now()
	st, err := agent.Run(ctx, "fio", []string{"--name=t", "--filename=" + dev, "--rw=randread", "--bs=4k",
		"--iodepth=8", "--ioengine=libaio", "--direct=1", "--runtime=3", "--time_based",
		"--output-format=json"}, nil, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if !st.OK() {
		t.Fatalf("fio: exit %d: %s%s", st.ExitCode, st.Stderr, st.Stdout)
	}
	fio := gjson.ParseBytes(st.Stdout)
	job := fio.Get("jobs.0")
	iops, readBytes := job.Get("read.iops").Float(), job.Get("read.io_bytes").Int()
	if !fio.Get("fio version").Exists() || job.Get("error").Int() != 0 || iops <= 0 || readBytes <= 0 {
		t.Fatalf("fio JSON: error %d, read iops %.0f, %d bytes:\n%.2000s", job.Get("error").Int(), iops, readBytes, st.Stdout)
	}
	t.Logf("fio %s: 4k random read QD8 %.0f IOPS (%d MiB in %.1f s wall)",
		fio.Get("fio version").String(), iops, readBytes>>20, time.Since(fioStart).Seconds())

	fioTook := time.Since(fioStart)

	// Non-zero data: Proxmox-style detect-zeroes would turn zeroes into
	// write-zeroes requests that allocate nothing.
	fsStart := time.Now()
	if _, err := Sh(ctx, agent, "set -e; mkfs.ext4 -q -F "+dev+"; mkdir -p /mnt/t; mount -t ext4 "+dev+" /mnt/t; "+
		"yes pvediskcheck | dd of=/mnt/t/f bs=1M count=64 iflag=fullblock 2>/dev/null; sync; rm /mnt/t/f; sync"); err != nil {
		t.Fatal(err)
	}
	var mounted *qmp.GuestFilesystem
	fsinfo, err := agent.FsInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range fsinfo {
		if fsinfo[i].Mountpoint == "/mnt/t" {
			mounted = &fsinfo[i]
		}
	}
	if mounted == nil || mounted.Type != "ext4" || len(mounted.Disks) != 1 || mounted.Disks[0].Dev != dev {
		t.Errorf("guest-get-fsinfo has no ext4 on %s at /mnt/t: %+v", dev, fsinfo)
	}

	fsTook := time.Since(fsStart)

	trimStart := time.Now()
	trimCtx, trimCancel := context.WithTimeout(ctx, 2*time.Minute)
	defer trimCancel()
	res, err := agent.Fstrim(trimCtx, 0)
	if err != nil {
		t.Fatal(err)
	}
	var trimmed int64 = -1
	for _, r := range res {
		if r.Path == "/mnt/t" {
			if r.Error != "" {
				t.Fatalf("guest-fstrim /mnt/t: %s", r.Error)
			}
			trimmed = r.Trimmed
		}
	}
	if trimmed <= 0 {
		t.Fatalf("guest-fstrim trimmed %d bytes on /mnt/t, want > 0: %+v", trimmed, res)
	}
	t.Logf("guest-fstrim: %d bytes trimmed on /mnt/t", trimmed)
	t.Logf("timings: guest image %.1f s, QEMU start to guest agent %.1f s, fio %.1f s, "+
		"mkfs+write+rm %.1f s, guest-fstrim %.2f s, whole test %.1f s",
		imageReady.Seconds(), bootToAgent.Seconds(), fioTook.Seconds(), fsTook.Seconds(),
		time.Since(trimStart).Seconds(), time.Since(testStart).Seconds())
}

func readPid(t *testing.T, pidfile string) int {
	t.Helper()
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file %s: %v", pidfile, err)
	}
	return pid
}

// kill ends the daemonized QEMU and waits until it is gone.
func kill(pid int) {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(20 * time.Millisecond)
	}
}

func TestVPD83Designators(t *testing.T) {
	// `xxd -p /sys/block/sd*/device/vpd_pg83` in the test guest (QEMU 7.2,
	// scsi-hd with device_id=drive-scsi1 and =drive-scsi10, no serial or wwn):
	// one ASCII vendor-specific designator each.
	out := "== sda\n0083000f0200000b64726976652d7363736931\n== sdb\n008300100200000c64726976652d736373693130\n"
	pages := parseHexDumps(out)
	if got := vpd83Designators(pages["sda"]); len(got) != 1 || got[0] != "drive-scsi1" {
		t.Errorf("sda designators = %q", got)
	}
	if got := vpd83Designators(pages["sdb"]); len(got) != 1 || got[0] != "drive-scsi10" {
		t.Errorf("sdb designators = %q", got)
	}
	// Two designators (device id, then an NAA one as with wwn=...), and a
	// truncated page that must not panic.
	page, _ := hex.DecodeString("0083001b0200000b64726976652d736373693101030008" + "5000000000000001")
	if got := vpd83Designators(page); len(got) != 2 || got[0] != "drive-scsi1" {
		t.Errorf("designators = %q", got)
	}
	if got := vpd83Designators(page[:10]); len(got) != 0 {
		t.Errorf("truncated page designators = %q", got)
	}
}
