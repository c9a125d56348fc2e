// Package e2e holds the helpers of the end-to-end tier: a real Linux guest
// (Debian's generic kernel, busybox, fio, qemu-guest-agent, e2fsprogs,
// util-linux; built by scripts/build-guest.sh) booted under TCG next to
// Proxmox-style disks, and driven only through the guest agent, as an admin's
// tool would drive a VM.
//
// A test boots a guest by adding GuestArgs to a guest-less Proxmox-style
// command line (for example fakenode.ArgvOptions.Extra), then:
//
//	kernel, initrd := e2e.GuestImage(t)
//	qga := filepath.Join(runDir, "100.qga")
//	extra := e2e.GuestArgs(kernel, initrd, qga, filepath.Join(t.TempDir(), "serial.log"))
//	... start QEMU 7.2 with extra ...
//	if err := e2e.WaitAgent(ctx, qga); err != nil { t.Fatal(err) }
//	agent := qmp.Agent{Path: qga}
//	dev, err := e2e.FindSCSIDisk(ctx, agent, "drive-scsi1") // "/dev/sdb"
//	out, err := e2e.Sh(ctx, agent, "mkfs.ext4 -q "+dev)
package e2e

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// GuestMemoryMiB is the guest's RAM: enough for fio and page-cache effects,
// and the tier's budget per guest.
const GuestMemoryMiB = 1024

// ReadyMarker is the line the guest's /init prints on the serial console once
// qemu-ga holds its port open (scripts/build-guest.sh).
const ReadyMarker = "PVEDISKCHECK-GUEST-READY"

var (
	imageOnce            sync.Once
	imageKernel, imageRD string
	imageErr             error
)

// GuestImage returns the guest kernel and initramfs, running
// scripts/build-guest.sh first (once per test process; it only rebuilds when
// the script or a package version changed, and otherwise answers in about
// two seconds). When the image cannot be built the test fails under CI=true
// and is skipped elsewhere, with the script's own message.
func GuestImage(t testing.TB) (kernel, initrd string) {
	t.Helper()
	kernel, initrd, err := Image()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("guest image: %v", err)
		}
		t.Skipf("guest image not available (run scripts/build-guest.sh as root; CI=true makes this a failure): %v", err)
	}
	return kernel, initrd
}

// GuestImageIn is GuestImage copied into dir (a t.TempDir() under /tmp):
// the QEMU 11.1 of scripts/qemu-11.1 runs in a chroot that sees the host's
// /tmp, /dev, /run, /proc and /sys only, not the image's cache folder.
// About 165 MB, a second or two; a hard link where dir is on the cache's
// filesystem and mount.
func GuestImageIn(t testing.TB, dir string) (kernel, initrd string) {
	t.Helper()
	k, rd := GuestImage(t)
	var out []string
	for _, src := range []string{k, rd} {
		dst := filepath.Join(dir, filepath.Base(src))
		if err := os.Link(src, dst); err != nil {
			if err := copyFile(src, dst); err != nil {
				t.Fatalf("guest image: %v", err)
			}
		}
		out = append(out, dst)
	}
	return out[0], out[1]
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Image is GuestImage for a program (make bench-overhead's driver): the
// kernel and initramfs, or why they could not be built.
func Image() (kernel, initrd string, err error) {
	imageOnce.Do(func() { imageKernel, imageRD, imageErr = buildGuest() })
	return imageKernel, imageRD, imageErr
}

func buildGuest() (kernel, initrd string, err error) {
	script, err := repoFile("scripts/build-guest.sh")
	if err != nil {
		return "", "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, script)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", "", fmt.Errorf("%s: %v: %s", script, err, tail(stderr.String(), 2000))
	}
	lines := strings.Fields(stdout.String())
	if len(lines) != 2 {
		return "", "", fmt.Errorf("%s printed %q, want the kernel and initrd paths", script, stdout.String())
	}
	for _, p := range lines {
		if _, err := os.Stat(p); err != nil {
			return "", "", fmt.Errorf("%s: %w", script, err)
		}
	}
	return lines[0], lines[1], nil
}

// repoFile finds rel in the repository that contains the working directory
// (go test runs in the package directory).
func repoFile(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil &&
			bytes.Contains(b, []byte("module github.com/pvediskcheck/pvediskcheck")) {
			return filepath.Join(dir, rel), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the pvediskcheck repository: cannot find " + rel)
		}
		dir = parent
	}
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// GuestQEMU is the QEMU that boots guests: $PVEDISKCHECK_GUEST_QEMU, else the
// host's qemu-system-x86_64 (Debian 12's 7.2). A -kernel guest takes about
// 33 s longer to reach its kernel under TCG on QEMU 10/11, so guests stay on
// 7.2 unless a scenario needs a newer QEMU. Fails under CI=true, skips
// elsewhere, when it is not installed.
func GuestQEMU(t testing.TB) string {
	t.Helper()
	q := os.Getenv("PVEDISKCHECK_GUEST_QEMU")
	if q == "" {
		q = "qemu-system-x86_64"
	}
	p, err := exec.LookPath(q)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required in CI: run `make test`, which installs it", q)
		}
		t.Skipf("%s not installed (make test installs it): %v", q, err)
	}
	return p
}

// GuestArgs returns what to add to a guest-less Proxmox-style QEMU command
// line (one without -kernel, -serial, -smp) to boot the test guest: the
// kernel and initramfs, the serial console into serialLog, 1 CPU, 1 GiB, and
// the guest agent channel exactly as qemu-server adds it for `agent: 1` on
// qgaSocket (Proxmox: /var/run/qemu-server/<vmid>.qga). A later -m or -smp on
// the same command line wins; fakenode's Memory option can stay 0.
func GuestArgs(kernel, initrd, qgaSocket, serialLog string) []string {
	args := []string{
		"-kernel", kernel,
		"-initrd", initrd,
		"-append", "console=ttyS0 panic=-1 quiet",
		"-serial", "file:" + serialLog,
		"-smp", "1",
		"-m", fmt.Sprint(GuestMemoryMiB),
	}
	return append(args, GuestAgentArgs(qgaSocket, "")...)
}

// GuestAgentArgs is the guest agent channel of qemu-server's config_to_command
// (src/PVE/QemuServer.pm, `agent: 1`, type virtio):
//
//	-chardev socket,path=/var/run/qemu-server/<vmid>.qga,server=on,wait=off,id=qga0
//	-device virtio-serial,id=qga0,bus=pci.0,addr=0x8
//	-device virtserialport,chardev=qga0,name=org.qemu.guest_agent.0
//
// pciAddr is appended to the virtio-serial device: Proxmox's is
// ",bus=pci.0,addr=0x8", which needs the pci.0 bridge its
// /usr/share/qemu-server/pve-q35-4.0.cfg defines; "" lets QEMU place it.
func GuestAgentArgs(qgaSocket, pciAddr string) []string {
	return []string{
		"-chardev", "socket,path=" + qgaSocket + ",server=on,wait=off,id=qga0",
		"-device", "virtio-serial,id=qga0" + pciAddr,
		"-device", "virtserialport,chardev=qga0,name=org.qemu.guest_agent.0",
	}
}

// WaitAgent polls guest-ping until the agent answers or ctx ends. Under TCG
// the test guest answers 10-15 s after QEMU starts.
func WaitAgent(ctx context.Context, qgaPath string) error {
	a := qmp.Agent{Path: qgaPath, Timeout: 2 * time.Second}
	var last error
	for {
		err := a.Ping(ctx)
		if err == nil {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("guest agent at %s not ready: %w (last try: %v)", qgaPath, ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// SerialTail is the end of a guest's serial log, for failure messages.
func SerialTail(serialLog string) string {
	b, err := os.ReadFile(serialLog)
	if err != nil {
		return "(no serial log: " + err.Error() + ")"
	}
	return tail(string(b), 3000)
}

// Sh runs a busybox sh script in the guest and returns its standard output;
// a non-zero exit is an error carrying stderr. Give ctx the deadline the
// script needs.
func Sh(ctx context.Context, a qmp.Agent, script string) (string, error) {
	st, err := a.Run(ctx, "/bin/sh", []string{"-c", script}, nil, 50*time.Millisecond)
	if err != nil {
		return "", err
	}
	if !st.OK() {
		return string(st.Stdout), fmt.Errorf("guest: sh -c %q: exit %d signal %d: %s",
			script, st.ExitCode, st.Signal, tail(string(st.Stderr)+string(st.Stdout), 2000))
	}
	return string(st.Stdout), nil
}

// FindSCSIDisk returns the guest device (/dev/sdX) of a SCSI disk by the
// device_id Proxmox gives it (scsi-hd ...,device_id=drive-scsi1). The guest
// has no udev, so no /dev/disk/by-id, and sdX order is not stable: the id is
// read from each disk's VPD page 0x83 (what `grep -a drive-scsi1
// /sys/block/sd*/device/vpd_pg83` finds, but matching whole designators, so
// drive-scsi1 is not drive-scsi10).
func FindSCSIDisk(ctx context.Context, a qmp.Agent, deviceID string) (string, error) {
	out, err := Sh(ctx, a, `for f in /sys/block/sd*; do [ -e "$f/device/vpd_pg83" ] || continue; `+
		`echo "== ${f##*/}"; xxd -p "$f/device/vpd_pg83"; done`)
	if err != nil {
		return "", fmt.Errorf("reading the guest's SCSI disk ids: %w", err)
	}
	var found []string
	for dev, page := range parseHexDumps(out) {
		for _, id := range vpd83Designators(page) {
			if id == deviceID {
				found = append(found, "/dev/"+dev)
			}
		}
	}
	if len(found) != 1 {
		return "", fmt.Errorf("guest disks with device id %s: %q, want exactly one", deviceID, found)
	}
	return found[0], nil
}

// parseHexDumps reads "== name" lines each followed by `xxd -p` output.
func parseHexDumps(out string) map[string][]byte {
	pages := map[string][]byte{}
	var name string
	var hexText strings.Builder
	flush := func() {
		if name != "" {
			b, err := hex.DecodeString(hexText.String())
			if err == nil {
				pages[name] = b
			}
		}
		hexText.Reset()
	}
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if n, ok := strings.CutPrefix(line, "== "); ok {
			flush()
			name = n
			continue
		}
		hexText.WriteString(line)
	}
	flush()
	return pages
}

// vpd83Designators returns the designators of a SCSI Device Identification
// VPD page (SPC-4 7.8.6) as strings: 4-byte page header, then per designator
// a 4-byte header whose last byte is the designator's length.
func vpd83Designators(page []byte) []string {
	if len(page) < 4 || page[1] != 0x83 {
		return nil
	}
	end := min(4+(int(page[2])<<8|int(page[3])), len(page))
	var ids []string
	for off := 4; off+4 <= end; {
		n := int(page[off+3])
		if off+4+n > end {
			break
		}
		ids = append(ids, string(page[off+4:off+4+n]))
		off += 4 + n
	}
	return ids
}
