package main

import (
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/cache"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/storage"
)

var fiveModes = []string{"none", "writethrough", "writeback", "directsync", "unsafe"}

// TestCacheAllModesControllersGenerations starts one real QEMU per command-line
// generation with the five cache modes on VirtIO SCSI, VirtIO Block and SATA,
// and checks that the effective mode read over QMP is the configured one.
func TestCacheAllModesControllersGenerations(t *testing.T) {
	for _, gen := range []string{"blockdev", "drive"} {
		t.Run(qemuName(t)+"/"+gen, func(t *testing.T) {
			n := fakenode.NewT(t)
			var cfg strings.Builder
			cfg.WriteString("scsihw: virtio-scsi-pci\n")
			for i, m := range fiveModes {
				for _, bus := range []string{"scsi", "virtio", "sata"} {
					vol := sf("vm-371-%s-%d", bus, i)
					storage := "local"
					if bus == "virtio" {
						storage = "local-lvm" // loop device: host_device
					} else {
						vol = "371/" + vol + ".raw"
					}
					n.MustVolume(t, storage, vol, 64<<20)
					cfg.WriteString(sf("%s%d: %s:%s,cache=%s,size=64M\n", bus, i+1, storage, vol, m))
				}
			}
			if err := n.WriteConfig(371, cfg.String()); err != nil {
				t.Fatal(err)
			}
			n.MustStart(t, 371, fakenode.ArgvOptions{Legacy: gen == "drive", Blockdev: gen == "blockdev"})
			var out cache.View
			errs, code := runJSON(t, n, &out, "cache", "371")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errs)
			}
			if !out.Running || out.Blockdev != (gen == "blockdev") {
				t.Fatalf("running=%v blockdev=%v", out.Running, out.Blockdev)
			}
			if len(out.Disks) != 15 {
				t.Fatalf("%d disks, want 15", len(out.Disks))
			}
			want := map[string]string{"scsi": "virtio-scsi-pci", "virtio": "virtio-blk", "sata": "sata"}
			for _, d := range out.Disks {
				bus, idx, _ := qemuserver.SplitDiskKey(d.ID)
				mode := fiveModes[idx-1]
				if d.Cache.Effective == nil || *d.Cache.Effective != mode {
					t.Errorf("%s: effective %v, want %s", d.ID, d.Cache.Effective, mode)
				}
				if d.Cache.Configured != mode || d.Cache.ConfiguredDefault {
					t.Errorf("%s: configured %q default=%v", d.ID, d.Cache.Configured, d.Cache.ConfiguredDefault)
				}
				direct, noFlush, wc := qemuserver.CacheFlags(mode)
				if *d.Cache.Direct != direct || *d.Cache.NoFlush != noFlush || *d.Cache.WriteCache != wc {
					t.Errorf("%s: flags direct=%v no_flush=%v write_cache=%v, want %v %v %v", d.ID, *d.Cache.Direct, *d.Cache.NoFlush, *d.Cache.WriteCache, direct, noFlush, wc)
				}
				if d.Controller != want[bus] {
					t.Errorf("%s: controller %q, want %q", d.ID, d.Controller, want[bus])
				}
				if len(d.Drift) != 0 {
					t.Errorf("%s: drift on a VM started from its own config: %v", d.ID, d.Drift)
				}
				if d.CrashLoses != storage.PageCacheFacts[mode][1] {
					t.Errorf("%s: crash sentence %q", d.ID, d.CrashLoses)
				}
			}
		})
	}
}

// TestCacheLab370 checks the lab VM's layout, default cache, aio and iothread.
func TestCacheLab370(t *testing.T) {
	n := fakenode.NewT(t)
	lab370(t, n, "")
	n.MustStart(t, 370, fakenode.ArgvOptions{})
	var out cache.View
	if errs, code := runJSON(t, n, &out, "cache", "370"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	want := map[string][3]string{ // controller, aio, iothread
		"scsi0":   {"virtio-scsi-single", "io_uring", "true"},
		"scsi1":   {"virtio-scsi-single", "io_uring", "true"},
		"virtio1": {"virtio-blk", "io_uring", "true"},
		"sata1":   {"sata", "io_uring", "false"},
	}
	if len(out.Disks) != len(want) {
		t.Fatalf("%d disks: %+v", len(out.Disks), out.Disks)
	}
	for _, d := range out.Disks {
		w := want[d.ID]
		if d.Controller != w[0] || d.AIO != w[1] || sf("%v", d.IOThread) != w[2] {
			t.Errorf("%s: controller=%s aio=%s iothread=%v, want %v", d.ID, d.Controller, d.AIO, d.IOThread, w)
		}
		if !d.Cache.ConfiguredDefault || d.Cache.Configured != "none" || *d.Cache.Effective != "none" {
			t.Errorf("%s: cache %+v", d.ID, d.Cache)
		}
		if d.Storage != "local-lvm" {
			t.Errorf("%s: storage %q", d.ID, d.Storage)
		}
	}
	// Human output: a table plus the two sentences per disk.
	stdout, _, code := runCLI(t, "--root", n.Root, "cache", "370")
	if code != 0 || !strings.Contains(stdout, "virtio-scsi-single") || !strings.Contains(stdout, "a host crash loses") || strings.Contains(stdout, "\x1b[") {
		t.Errorf("human output (exit %d):\n%s", code, stdout)
	}
}

// TestCachePendingAndDrift: a [PENDING] cache change is shown as next start,
// and a main-section edit the running VM never applied is drift.
func TestCachePendingAndDrift(t *testing.T) {
	n := fakenode.NewT(t)
	lab370(t, n, "")
	n.MustStart(t, 370, fakenode.ArgvOptions{})
	cfg, _ := os.ReadFile(n.Paths.VMConfig(370))
	edited := strings.Replace(string(cfg), "sata1: local-lvm:vm-370-disk-3,size=256M", "sata1: local-lvm:vm-370-disk-3,cache=writeback,size=256M", 1)
	edited += "\n[PENDING]\nscsi1: local-lvm:vm-370-disk-1,iothread=1,cache=unsafe,size=256M\n"
	if err := os.WriteFile(n.Paths.VMConfig(370), []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	var out cache.View
	if errs, code := runJSON(t, n, &out, "cache", "370"); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, d := range out.Disks {
		switch d.ID {
		case "scsi1":
			if d.Cache.Pending == nil || *d.Cache.Pending != "unsafe" || *d.Cache.Effective != "none" || len(d.Drift) != 0 {
				t.Errorf("scsi1: pending %v effective %v drift %v", d.Cache.Pending, *d.Cache.Effective, d.Drift)
			}
		case "sata1":
			if d.Cache.Configured != "writeback" || *d.Cache.Effective != "none" || len(d.Drift) == 0 {
				t.Errorf("sata1: configured %s effective %s drift %v", d.Cache.Configured, *d.Cache.Effective, d.Drift)
			}
		default:
			if d.Cache.Pending != nil || len(d.Drift) != 0 {
				t.Errorf("%s: pending %v drift %v", d.ID, d.Cache.Pending, d.Drift)
			}
		}
	}
	stdout, _, _ := runCLI(t, "--root", n.Root, "cache", "370")
	if !strings.Contains(stdout, "config says writeback, VM still runs none: restart") {
		t.Errorf("no restart advice:\n%s", stdout)
	}
}

// TestCacheStoppedBusyAndBadInput covers the exit codes 2 and 3.
func TestCacheStoppedBusyAndBadInput(t *testing.T) {
	n := fakenode.NewT(t)
	lab370(t, n, "")
	// Stopped: configured values, exit 3.
	var out cache.View
	errs, code := runJSON(t, n, &out, "cache", "370")
	if code != 3 || out.Running || len(out.Disks) != 4 || out.Disks[0].Cache.Effective != nil || !strings.Contains(errs, "not running") {
		t.Errorf("stopped: exit %d running=%v disks=%d stderr=%q", code, out.Running, len(out.Disks), errs)
	}
	// A stale pid file of a dead process is not a running VM.
	os.WriteFile(n.Paths.PidFile(370), []byte("999999\n"), 0o644)
	if _, code := runJSON(t, n, &out, "cache", "370"); code != 3 || out.Running {
		t.Errorf("stale pid: exit %d running %v", code, out.Running)
	}

	vm := n.MustStart(t, 370, fakenode.ArgvOptions{})
	_ = vm
	// Busy: another client holds the QMP socket; exit 3 within the timeout.
	c, err := net.Dial("unix", n.Paths.QMPSocket(370))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	c.Read(buf) // greeting: we now hold the socket
	start := time.Now()
	_, errs, code = runCLI(t, "--root", n.Root, "--timeout", "1s", "cache", "370")
	if code != 3 || !strings.Contains(errs, "busy") || time.Since(start) > 10*time.Second {
		t.Errorf("busy socket: exit %d after %s, stderr %q", code, time.Since(start), errs)
	}
	c.Close()
	if _, errs, code := runCLI(t, "--root", n.Root, "cache", "370"); code != 0 {
		t.Errorf("after release: exit %d %s", code, errs)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"cache", "abc"}, "invalid VMID"},
		{[]string{"cache", "99"}, "out of range"},
		{[]string{"cache", "1000000000"}, "out of range"},
		{[]string{"cache", "4242"}, "no such VM"},
		{[]string{"cache"}, "missing VMID"},
		{[]string{"cache", "370", "scsi9"}, "has no disk"},
		{[]string{"cache", "--bogus", "370"}, "flag provided but not defined"},
	} {
		_, errs, code := runCLI(t, append([]string{"--root", n.Root}, tc.args...)...)
		if code != 2 || !strings.Contains(errs, tc.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("%v: exit %d stderr %q, want exit 2 and one line with %q", tc.args, code, errs, tc.want)
		}
	}
	// Malformed config line: names file, line and key.
	os.WriteFile(n.Paths.VMConfig(372), []byte("name: x\nscsi0: local-lvm:vm-372-disk-0,cache=sometimes\n"), 0o644)
	_, errs, code = runCLI(t, "--root", n.Root, "cache", "372")
	if code != 2 || !strings.Contains(errs, "372.conf line 2") || !strings.Contains(errs, "cache") {
		t.Errorf("malformed: exit %d stderr %q", code, errs)
	}
	// A line Proxmox refuses beside good ones: qemu-server drops it and
	// starts the VM without it, so cache shows the others and says so;
	// named, it is bad input.
	os.WriteFile(n.Paths.VMConfig(374), []byte("bios: ovmf\nefidisk0: local-lvm:vm-374-disk-1,efitype=4m,discard=on,size=4M\nscsi0: local-lvm:vm-374-disk-0,size=1G\n"), 0o644)
	var view cache.View
	errs, code = runJSON(t, n, &view, "cache", "374")
	if code != 3 || len(view.Disks) != 1 || view.Disks[0].ID != "scsi0" || !slices.ContainsFunc(view.Notes, func(s string) bool {
		return strings.Contains(s, "374.conf line 2: efidisk0: discard is not an option of EFI disks") && strings.HasSuffix(s, "starts the VM without the disk: not listed")
	}) {
		t.Errorf("refused efidisk0 beside scsi0: exit %d %s %+v", code, errs, view)
	}
	if _, errs, code = runCLI(t, "--root", n.Root, "cache", "374", "efidisk0"); code != 2 || !strings.Contains(errs, "374.conf line 2") {
		t.Errorf("cache 374 efidisk0: exit %d stderr %q", code, errs)
	}
	// A line that is not `key: value`: Proxmox skips it with a warning and
	// starts the VM (issue 26 #3), so cache shows the disks (stopped: exit
	// 3) and a note names the line.
	os.WriteFile(n.Paths.VMConfig(373), []byte("name: x\nthis is not a config line\nscsi0: local-lvm:vm-373-disk-0,size=1G\n"), 0o644)
	view = cache.View{}
	errs, code = runJSON(t, n, &view, "cache", "373")
	if code != 3 || len(view.Disks) != 1 || view.Disks[0].ID != "scsi0" || !slices.ContainsFunc(view.Notes, func(s string) bool {
		return strings.HasSuffix(s, `373.conf line 2: "this is not a config line" is not a `+"`key: value`"+` line: Proxmox skips it ("unable to parse config") and starts the VM without it`)
	}) {
		t.Errorf("garbage line: exit %d stderr %q %+v", code, errs, view)
	}
}

// TestCachePendingOnlyDisk: a disk that only [PENDING] adds is shown with the
// mode the next start gives it (no panic on a disk without a main line).
func TestCachePendingOnlyDisk(t *testing.T) {
	n := fakenode.NewT(t)
	lab370(t, n, "\n[PENDING]\nscsi2: local-lvm:vm-370-disk-9,cache=writeback,size=1G\n")
	var out cache.View
	errs, code := runJSON(t, n, &out, "cache", "370")
	if code != 3 {
		t.Fatalf("exit %d %s", code, errs)
	}
	var found bool
	for _, d := range out.Disks {
		if d.ID == "scsi2" {
			found = true
			if d.Cache.Configured != "" || d.Cache.Pending == nil || *d.Cache.Pending != "writeback" || d.CrashLoses != storage.PageCacheFacts["writeback"][1] {
				t.Errorf("scsi2: %+v", d)
			}
		}
	}
	if !found {
		t.Errorf("pending-only disk not listed: %+v", out.Disks)
	}
	// Issue 15 #9: its sentences were printed under an empty " (scsi2):".
	if stdout, _, _ := runCLI(t, "--root", n.Root, "cache", "370"); !strings.Contains(stdout, "writeback (pending)") ||
		!strings.Contains(stdout, "\nwriteback, at the next start (scsi2):\n") || strings.Contains(stdout, "\n (") {
		t.Errorf("human output:\n%s", stdout)
	}
}

// TestCacheCDROM: a CD-ROM with a medium is listed as read-only, an empty one
// is skipped, in both generations.
func TestCacheCDROM(t *testing.T) {
	for _, gen := range []string{"blockdev", "drive"} {
		t.Run(qemuName(t)+"/"+gen, func(t *testing.T) {
			n := fakenode.NewT(t)
			n.MustVolume(t, "local", "iso/test.iso", 1<<20)
			lab370(t, n, "ide2: local:iso/test.iso,media=cdrom\nide0: none,media=cdrom\n")
			n.MustStart(t, 370, fakenode.ArgvOptions{Legacy: gen == "drive", Blockdev: gen == "blockdev"})
			var out cache.View
			if errs, code := runJSON(t, n, &out, "cache", "370"); code != 0 {
				t.Fatalf("exit %d %s", code, errs)
			}
			var ids []string
			for _, d := range out.Disks {
				ids = append(ids, d.ID)
				if d.ID == "ide2" && (d.Media != "cdrom" || d.CrashLoses != "nothing" || len(d.Drift) != 0) {
					t.Errorf("ide2: %+v", d)
				}
				if d.ID != "ide2" && d.Media != "disk" {
					t.Errorf("%s media %q", d.ID, d.Media)
				}
			}
			if strings.Join(ids, " ") != "ide2 sata1 scsi0 scsi1 virtio1" {
				t.Errorf("disks %v", ids)
			}
			stdout, _, _ := runCLI(t, "--root", n.Root, "cache", "370")
			if !strings.Contains(stdout, "cd-rom (ide2):") {
				t.Errorf("human output:\n%s", stdout)
			}
		})
	}
}

// TestCacheVirtioWithoutGuest (issue 14 #9): a VirtIO Block disk of a VM
// without a guest OS. Held at -S no driver has touched it: the configured
// write cache is in force. Running, SeaBIOS sets the device up without
// negotiating flushes, QEMU turns the write cache off, and cache says so
// instead of "the guest has turned the write cache off". (The negotiated
// case, a Linux guest's virtio_blk with VIRTIO_BLK_F_FLUSH and CONFIG_WCE,
// belongs to the guest tier: there `cache` shows guest_write_cache true,
// negotiated "guest" and no runtime line; after `echo "write through" >
// /sys/block/vda/queue/write_cache` in the guest, "the guest has turned the
// write cache off".)
func TestCacheVirtioWithoutGuest(t *testing.T) {
	for _, held := range []bool{true, false} {
		name := "seabios"
		if held {
			name = "held-at-S"
		}
		t.Run(qemuName(t)+"/"+name, func(t *testing.T) {
			n := fakenode.NewT(t)
			n.MustVolume(t, "local-lvm", "vm-378-disk-1", 64<<20)
			n.WriteConfig(378, "virtio1: local-lvm:vm-378-disk-1,size=64M\n")
			o := fakenode.ArgvOptions{}
			if held {
				o.Extra = []string{"-S"}
			}
			n.MustStart(t, 378, o)
			var out cache.View
			// SeaBIOS reaches the disk within a second or two under TCG.
			deadline := time.Now().Add(20 * time.Second)
			for {
				if errs, code := runJSON(t, n, &out, "cache", "378"); code != 0 {
					t.Fatalf("exit %d %s", code, errs)
				}
				if held || !*out.Disks[0].Cache.GuestWriteCache || time.Now().After(deadline) {
					break
				}
				time.Sleep(200 * time.Millisecond)
			}
			d := out.Disks[0]
			stdout, _, _ := runCLI(t, "--root", n.Root, "cache", "378")
			t.Logf("%s\n%s", name, stdout)
			if held {
				// The write cache is on at runtime, as configured: nothing
				// to explain.
				if !*d.Cache.GuestWriteCache || strings.Contains(stdout, "write cache is off") || strings.Contains(stdout, "has turned") {
					t.Errorf("held at -S: guest_write_cache %v\n%s", *d.Cache.GuestWriteCache, stdout)
				}
				return
			}
			if *d.Cache.GuestWriteCache || *d.Cache.WriteCache != "on" {
				t.Errorf("SeaBIOS: guest_write_cache %v write_cache %s", *d.Cache.GuestWriteCache, *d.Cache.WriteCache)
			}
			// No guest OS runs: the tool must not claim a guest chose it.
			if strings.Contains(stdout, "guest has turned") || !strings.Contains(stdout, "no guest OS driver has negotiated it yet") || !strings.Contains(stdout, "nothing acknowledged waits") {
				t.Errorf("SeaBIOS: human output:\n%s", stdout)
			}
		})
	}
}

// TestCacheQcow2Metadata proves what cache says about qcow2 with
// cache=none (issue 14 #4): a completed write's data is in the image file,
// but the new cluster's mapping reaches the file only at a flush, so until
// the guest flushes a host crash loses the write although its data blocks
// are on disk. qemu-img map -U reads the image as it is on disk.
func TestCacheQcow2Metadata(t *testing.T) {
	n := fakenode.NewT(t)
	img := n.MustVolume(t, "local", "379/vm-379-disk-1.qcow2", 64<<20)
	n.WriteConfig(379, "scsihw: virtio-scsi-single\nscsi1: local:379/vm-379-disk-1.qcow2,size=64M\n")
	vm := n.MustStart(t, 379, fakenode.ArgvOptions{})
	mapped := func() string {
		out, err := exec.Command("qemu-img", "map", "-U", "--output=json", img).Output()
		if err != nil {
			t.Fatal(err)
		}
		return string(out)
	}
	vm.MustQemuIO(t, "scsi1", "write -P 0x5a 0 4M")
	before := mapped()
	size := fakenode.MustAllocated(t, img)
	vm.MustQemuIO(t, "scsi1", "flush")
	after := mapped()
	t.Logf("image allocates %d bytes after the write\nbefore the flush: %safter: %s", size, before, after)
	if size < 4<<20 || !strings.Contains(before, `"data": false`) || strings.Contains(before, `"data": true`) || !strings.Contains(after, `"start": 0, "length": 4194304, "depth": 0, "present": true, "zero": false, "data": true`) {
		t.Errorf("want the data in the file but unmapped until the flush")
	}
	var out cache.View
	if errs, code := runJSON(t, n, &out, "cache", "379"); code != 0 {
		t.Fatalf("exit %d %s", code, errs)
	}
	d := out.Disks[0]
	if d.Backend != "file" || !strings.Contains(d.AckedDataIn, "qcow2 metadata cache") || !strings.Contains(d.Unmeasured, "qcow2 metadata cache") {
		t.Errorf("cache view %+v", d)
	}
	if stdout, _, _ := runCLI(t, "--root", n.Root, "cache", "379"); !strings.Contains(stdout, "none, qcow2 (scsi1):") {
		t.Errorf("human output:\n%s", stdout)
	}
}
