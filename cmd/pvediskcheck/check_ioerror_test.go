package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/internal/e2e"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/volchain"
)

// TestCheckIOError (issue 14 #6): a real guest writes until its storage
// fails, and QEMU pauses the VM as it does on a Proxmox node. scsi1 lives on
// a 16 MiB tmpfs below the node's root (a dir storage that fills up: QEMU's
// default werror=enospc stops the VM, io-status nospace); scsi2 sits on
// QEMU's blkdebug filter returning EIO for every write, with werror=stop
// (io-status failed). check names the disk, its storage and that storage's
// use, and the fix, and nothing else; after the space is freed and the VM
// resumed, the finding is gone.
//
// PVEDISKCHECK_RECORD_CHECK=DIR writes what QEMU answered at each pause
// (check/testdata/real-ioerror-*.json, the check package's table tests).
func TestCheckIOError(t *testing.T) {
	fakenode.RequireQEMU(t)
	n := fakenode.NewT(t)
	small := filepath.Join(n.Root, "mnt/small")
	if err := os.MkdirAll(small, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", small).CombinedOutput(); err != nil {
		t.Fatalf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", small).Run() })
	if err := n.WriteStorageCfg("dir: small\n\tpath " + small + "\n\tcontent images\n"); err != nil {
		t.Fatal(err)
	}
	n.MustVolume(t, "small", "390/vm-390-disk-1.raw", 64<<20)
	n.MustVolume(t, "local", "390/vm-390-disk-2.raw", 64<<20)
	cfg := "agent: 1\nostype: l26\nscsihw: virtio-scsi-single\n" +
		"scsi1: small:390/vm-390-disk-1.raw,discard=on,iothread=1,size=64M\n" +
		"scsi2: local:390/vm-390-disk-2.raw,discard=on,iothread=1,werror=stop,size=64M\n"
	if err := n.WriteConfig(390, cfg); err != nil {
		t.Fatal(err)
	}
	// Guests boot on the host's QEMU (e2e.GuestQEMU: about 33 s faster
	// under TCG than 10/11), as the other guest scenarios do.
	n.QEMU = e2e.GuestQEMU(t)
	kernel, initrd := e2e.GuestImage(t)
	serial := filepath.Join(t.TempDir(), "serial.log")
	qga := n.Paths.QGASocket(390)
	vm := n.MustStart(t, 390, fakenode.ArgvOptions{
		Extra:    e2e.GuestArgs(kernel, initrd, qga, serial),
		Blkdebug: map[string]fakenode.Blkdebug{"scsi2": {Event: "write_aio", Errno: 5}},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := e2e.WaitAgent(ctx, qga); err != nil {
		t.Fatalf("%v\nserial:\n%s", err, e2e.SerialTail(serial))
	}
	agent := qmp.Agent{Path: qga, Timeout: time.Minute} // a guest busy writing under TCG answers slowly
	sock := n.Paths.QMPSocket(390)

	// The guest writes 32 MiB of non-zero data to a 16 MiB filesystem.
	dev1, err := e2e.FindSCSIDisk(ctx, agent, "drive-scsi1")
	if err != nil {
		t.Fatal(err)
	}
	dev2, err := e2e.FindSCSIDisk(ctx, agent, "drive-scsi2")
	if err != nil {
		t.Fatal(err)
	}
	// guest-exec without waiting for the exit: the VM pauses under it.
	if _, err := agent.Exec(ctx, "/bin/sh", []string{"-c", "yes | dd of=" + dev1 + " bs=1M count=32 iflag=fullblock oflag=direct"}, nil); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, sock, "io-error")
	recordQMP(t, sock, vm, n, "real-ioerror-nospace.json")
	var out check.Report
	errs, code := runJSON(t, n, &out, "check", "390")
	got := findingsByCode(out.VMs[0])
	io := got["io-error"]
	if code != exitProblem || len(out.VMs[0].Findings) != 1 || len(io) != 1 {
		t.Fatalf("exit %d (%s), findings %+v, notes %v", code, errs, out.VMs[0].Findings, out.VMs[0].Notes)
	}
	f := io[0]
	t.Logf("%s %s %s: %s\n  fix: %s", f.Severity, f.Code, f.Disk, f.Message, f.Fix)
	for _, want := range []string{"paused", "no space left", "io-status nospace", "storage small (dir)", "free of 16.0 MiB"} {
		if !strings.Contains(f.Message, want) {
			t.Errorf("io-error message lacks %q: %s", want, f.Message)
		}
	}
	if f.Severity != check.Error || f.Disk != "scsi1" || !strings.Contains(f.Fix, "free space on the storage or extend it, then qm resume 390") {
		t.Errorf("io-error finding %+v", f)
	}

	// Freed (the filesystem grows) and resumed, the guest's write completes
	// and the finding is gone.
	if out, err := exec.Command("mount", "-o", "remount,size=128m", small).CombinedOutput(); err != nil {
		t.Fatalf("remount: %v: %s", err, out)
	}
	if err := qmp.Do(ctx, sock, 5*time.Second, func(s qmp.Session) error { _, err := s.Exec("cont", nil); return err }); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, sock, "running")
	recordQMP(t, sock, vm, n, "real-ioerror-resumed.json")
	// QEMU keeps a -blockdev disk's io-status after the resume: an earlier
	// pause, worth an info, no longer an error.
	if errs, code := runJSON(t, n, &out, "check", "390"); code != exitOK || len(out.VMs[0].Findings) != 1 ||
		out.VMs[0].Findings[0].Severity != check.Info || out.VMs[0].Findings[0].Disk != "scsi1" || out.VMs[0].Findings[0].Code != check.CodeIOError {
		t.Errorf("resumed: exit %d (%s), findings %+v", code, errs, out.VMs[0].Findings)
	} else {
		t.Logf("resumed: %s", out.VMs[0].Findings[0].Message)
	}

	// The storage below scsi2 fails every write: werror=stop pauses the VM.
	if _, err := agent.Exec(ctx, "/bin/sh", []string{"-c", "yes | dd of=" + dev2 + " bs=64k count=1 iflag=fullblock oflag=direct"}, nil); err != nil {
		t.Fatalf("%v\nserial:\n%s", err, e2e.SerialTail(serial))
	}
	waitStatus(t, sock, "io-error")
	recordQMP(t, sock, vm, n, "real-ioerror-failed.json")
	errs, code = runJSON(t, n, &out, "check", "390")
	io = findingsByCode(out.VMs[0])["io-error"]
	// scsi1 still shows its earlier nospace (see above): both are named,
	// and a note says why.
	if code != exitProblem || len(out.VMs[0].Findings) != 2 || len(io) != 2 || io[1].Disk != "scsi2" || io[0].Disk != "scsi1" ||
		len(out.VMs[0].Notes) != 1 || !strings.Contains(out.VMs[0].Notes[0], "earlier pause") {
		t.Fatalf("exit %d (%s), findings %+v, notes %v", code, errs, out.VMs[0].Findings, out.VMs[0].Notes)
	}
	t.Logf("%s %s %s: %s\n  fix: %s", io[1].Severity, io[1].Code, io[1].Disk, io[1].Message, io[1].Fix)
	for _, want := range []string{"paused", "io-status failed", "storage local (dir)", "qm resume 390"} {
		if !strings.Contains(io[1].Message+io[1].Fix, want) {
			t.Errorf("io-error lacks %q: %+v", want, io[1])
		}
	}
	if io[0].Severity != check.Error || io[1].Severity != check.Error {
		t.Errorf("severities %s %s", io[0].Severity, io[1].Severity)
	}
}

// waitStatus polls query-status until QEMU reports status.
func waitStatus(t *testing.T, sock, status string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	last := ""
	for time.Now().Before(deadline) {
		_ = qmp.Do(context.Background(), sock, 5*time.Second, func(s qmp.Session) error {
			r, err := s.Exec("query-status", nil)
			last = r.Get("status").String()
			return err
		})
		if last == status {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("VM status %q, want %q", last, status)
}

// recordQMP writes, when PVEDISKCHECK_RECORD_CHECK names a directory, what
// the check package's replay needs: the config, storage.cfg, the running
// command line and QEMU's replies to FetchLive's queries.
func recordQMP(t *testing.T, sock string, vm *fakenode.VM, n *fakenode.Node, name string) {
	t.Helper()
	dir := os.Getenv("PVEDISKCHECK_RECORD_CHECK")
	if dir == "" {
		return
	}
	rec := map[string]any{"qemu": qemuName(t), "recorded": time.Now().UTC().Format("2006-01-02"), "by": "cmd/pvediskcheck TestCheckIOError"}
	cfg, _ := os.ReadFile(n.Paths.VMConfig(vm.VMID))
	st, _ := os.ReadFile(n.Paths.StorageCfg())
	rec["config"], rec["storage_cfg"], rec["root"] = string(cfg), string(st), n.Root
	argv, err := readCmdline(vm.Pid)
	if err != nil {
		t.Fatal(err)
	}
	rec["cmdline"] = argv
	replies := map[string]json.RawMessage{}
	qom := map[string]json.RawMessage{}
	err = qmp.Do(context.Background(), sock, 5*time.Second, func(s qmp.Session) error {
		for _, c := range []struct {
			name string
			args any
		}{{"query-status", nil}, {"query-block", nil}, {"query-named-block-nodes", map[string]any{"flat": true}}, {"x-debug-query-block-graph", nil}} {
			r, err := s.Exec(c.name, c.args)
			if err != nil {
				return err
			}
			replies[c.name] = json.RawMessage(r.Raw)
		}
		for _, b := range gjson.Parse(string(replies["query-block"])).Array() {
			path := b.Get("qdev").String()
			if !b.Get("inserted").Exists() || path == "" {
				continue
			}
			if !strings.HasPrefix(path, "/") {
				path = "/machine/peripheral/" + path // QEMU 7.2 prints the id
			}
			if r, err := s.Exec("qom-get", map[string]any{"path": path, "property": "write-cache"}); err == nil {
				qom[path] = json.RawMessage(r.Raw)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	rec["replies"], rec["qom_get_write_cache"] = replies, qom
	b, _ := json.MarshalIndent(rec, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, name), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %s", filepath.Join(dir, name))
}

func readCmdline(pid int) ([]string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", sf("%d", pid), "cmdline"))
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(strings.Split(string(b), "\x00"), func(s string) bool { return s == "" }), nil
}

// TestCheckIOErrorVolumeChain: a real guest writes past the end of a
// volume chain's current layer (Proxmox 9's qcow2 on a thick LV, here a
// 16 MiB loop device under a 64 MiB disk without preallocation, over one
// snapshot layer). The block device refuses the write with ENOSPC, QEMU's
// default werror=enospc pauses the VM, and check names the layer's LV as
// what is full and lvextend of it as the fix, not the storage; the chain's
// own findings stand beside it, and nothing else. Grown (the loop device's
// capacity raised, as lvextend does) and resumed, the write completes.
func TestCheckIOErrorVolumeChain(t *testing.T) {
	fakenode.RequireQEMU(t)
	n := fakenode.NewT(t)
	n.UseDoubles(t)
	if err := n.WriteStorageCfg(n.ChainStorageCfg()); err != nil {
		t.Fatal(err)
	}
	const vol = "vm-391-disk-0.qcow2"
	s1 := volchain.LayerName(vol, "s1")
	top, err := n.CreateChain(64<<20, "off", fakenode.ChainLayer{LV: s1}, fakenode.ChainLayer{LV: vol, LVSize: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}
	cfg := "agent: 1\nostype: l26\nscsihw: virtio-scsi-single\nparent: s1\nscsi1: chain:" + vol + ",iothread=1,size=64M\n\n[s1]\nscsi1: chain:" + vol + ",iothread=1,size=64M\n"
	if err := n.WriteConfig(391, cfg); err != nil {
		t.Fatal(err)
	}
	g := bootGuest(t, n, 391, e2e.GuestQEMU(t))
	g.agent.Timeout = time.Minute // a guest busy writing under TCG answers slowly
	dev := g.scsiDev(t, "scsi1")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// 32 MiB of non-zero data into a 16 MiB LV; guest-exec without waiting
	// for the exit: the VM pauses under it.
	pid, err := g.agent.Exec(ctx, "/bin/sh", []string{"-c", "yes | dd of=" + dev + " bs=1M count=32 iflag=fullblock oflag=direct"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	sock := n.Paths.QMPSocket(391)
	waitStatus(t, sock, "io-error")
	var out check.Report
	errs, code := runJSON(t, n, &out, "check", "391")
	got := findingsByCode(out.VMs[0])
	var codes []string
	for _, f := range out.VMs[0].Findings {
		codes = append(codes, string(f.Severity)+"/"+string(f.Code))
		t.Logf("%s %s %s: %s\n  fix: %s", f.Severity, f.Code, f.Disk, f.Message, f.Fix)
	}
	if code != exitProblem || len(got["io-error"]) != 1 || len(got["volume-chain"]) != 2 || len(out.VMs[0].Findings) != 3 {
		t.Fatalf("exit %d (%s), findings %v, notes %v", code, errs, codes, out.VMs[0].Notes)
	}
	f := got["io-error"][0]
	for _, want := range []string{"paused", "no space left in the LV of the current layer " + vol, "io-status nospace", "LV " + top + " of 16.0 MiB", "qemu-img check sees its qcow2 reach"} {
		if !strings.Contains(f.Message, want) {
			t.Errorf("io-error message lacks %q: %s", want, f.Message)
		}
	}
	if f.Severity != check.Error || f.Disk != "scsi1" || !strings.HasPrefix(f.Fix, "lvextend -L +") || !strings.Contains(f.Fix, top+" (the current layer's LV") || !strings.HasSuffix(f.Fix, "then qm resume 391") ||
		strings.Contains(f.Message+f.Fix, "free space on the storage") {
		t.Errorf("io-error finding %+v", f)
	}

	// lvextend: the LV (the loop device's file) grows to the disk's full
	// qcow2 size, and the VM resumes: the guest's write completes.
	loop, err := filepath.EvalSymlinks(top)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(n.ThinDir(), "chain-"+vol+".img"), 80<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("losetup", "-c", loop).CombinedOutput(); err != nil {
		t.Fatalf("losetup -c: %v: %s", err, out)
	}
	if err := qmp.Do(ctx, sock, 5*time.Second, func(s qmp.Session) error { _, err := s.Exec("cont", nil); return err }); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, sock, "running")
	for {
		st, err := g.agent.ExecStatus(ctx, pid)
		if err != nil {
			t.Fatal(err)
		}
		if st.Exited {
			if !st.OK() {
				t.Errorf("dd after the LV grew: %+v %s", st, st.Stderr)
			}
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	// No pause is left: at most the earlier one as an info (QEMU keeps a
	// -blockdev disk's io-status, resets a -drive one's).
	errs, code = runJSON(t, n, &out, "check", "391")
	for _, f := range findingsByCode(out.VMs[0])["io-error"] {
		if f.Severity != check.Info {
			t.Errorf("after lvextend and resume: %+v", f)
		}
	}
	if code == exitUnreachable {
		t.Errorf("after lvextend and resume: exit %d (%s)", code, errs)
	}
}
