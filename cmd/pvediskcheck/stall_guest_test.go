//go:build integration

package main

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/internal/e2e"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// zeroesConfig is VM 100 of TestStallGuestZeroes: scsi0 on local (idle),
// scsi1 and scsi2 on the freezable storage, scsi2 with discard=on; each on
// its own iothread with qemu-server's defaults for a dir storage
// (aio=io_uring, cache.direct, detect-zeroes=on).
const zeroesConfig = `agent: 1
name: zeroes
ostype: l26
scsihw: virtio-scsi-single
scsi0: local:100/vm-100-disk-0.raw,iothread=1,size=16M
scsi1: frozen:100/vm-100-disk-1.raw,iothread=1,size=16M
scsi2: frozen:100/vm-100-disk-2.raw,discard=on,iothread=1,size=16M
`

// TestStallGuestZeroes (issue 31): a real guest writes zeroes to scsi1 and
// discards a MiB of scsi2 after the filesystem under both images froze.
// detect-zeroes=on makes the zero write a write_zeroes, which file-posix
// runs in QEMU's thread pool (fallocate ZERO_RANGE), and the discard runs
// there too (fallocate PUNCH_HOLE), though both disks are aio=io_uring:
// two "worker" threads wait in state D, no io_uring worker does, so the
// rule of before (pool workers for aio=threads disks only) saw nothing.
// top, check, metrics and stall now say scsi1 and scsi2 stalled, each
// with its own worker (the file its fallocate works on is its image), and
// never the idle scsi0; after the thaw both requests complete and nothing
// is stalled.
//
// PVEDISKCHECK_RECORD_STALL=DIR records the blocked VM for the stall
// package's unit tests (stall/testdata/README.md).
func TestStallGuestZeroes(t *testing.T) {
	n := fakenode.NewT(t)
	fz := n.FreezableStorage(t, "frozen")
	n.MustVolume(t, "local", "100/vm-100-disk-0.raw", 16<<20)
	n.MustVolume(t, "frozen", "100/vm-100-disk-1.raw", 16<<20)
	n.MustVolume(t, "frozen", "100/vm-100-disk-2.raw", 16<<20)
	if err := n.WriteConfig(100, zeroesConfig); err != nil {
		t.Fatal(err)
	}
	// The guest boots on the QEMU under test (PVEDISKCHECK_QEMU: 7.2 or
	// 11.1.3), not e2e.GuestQEMU's: from 8.2 a request runs in the thread
	// that issues it, and both must hold.
	kernel, initrd := e2e.GuestImage(t)
	if os.Getenv("PVEDISKCHECK_QEMU") != "" {
		kernel, initrd = e2e.GuestImageIn(t, t.TempDir())
	}
	serial := filepath.Join(t.TempDir(), "serial.log")
	qga := n.Paths.QGASocket(100)
	v := n.MustStart(t, 100, fakenode.ArgvOptions{Extra: e2e.GuestArgs(kernel, initrd, qga, serial)})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	// QEMU 11 reaches the guest's kernel ~33 s later than 7.2 under TCG.
	if err := e2e.WaitAgent(ctx, qga); err != nil {
		t.Fatalf("%v\nserial:\n%s", err, e2e.SerialTail(serial))
	}
	agent := qmp.Agent{Path: qga, Timeout: time.Minute}
	dev1, err := e2e.FindSCSIDisk(ctx, agent, "drive-scsi1")
	if err != nil {
		t.Fatal(err)
	}
	dev2, err := e2e.FindSCSIDisk(ctx, agent, "drive-scsi2")
	if err != nil {
		t.Fatal(err)
	}
	// One write of data completes on each frozen disk first: the stall
	// counts from the last completion.
	if _, err := e2e.Sh(ctx, agent, "for d in "+dev1+" "+dev2+"; do dd if=/dev/urandom of=$d bs=64k count=16 oflag=direct 2>/dev/null || exit 1; done"); err != nil {
		t.Fatal(err)
	}
	wr1, un2 := v.WriteOps(t, "scsi1"), unmapOps(t, n, "scsi2")
	fz.Freeze(t)
	frozeAt := time.Now()
	for _, script := range []string{"dd if=/dev/zero of=" + dev1 + " bs=64k count=1 oflag=direct", "blkdiscard -o 0 -l 1048576 " + dev2} {
		if _, err := agent.Exec(ctx, "/bin/sh", []string{"-c", script}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// Both requests reach the node: two pool workers in D, in fallocate.
	var workers, uring []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		workers, uring = blockedThreads(t, v.Pid)
		if len(workers) >= 2 || time.Now().After(deadline) {
			break
		}
	}
	if len(workers) != 2 || len(uring) != 0 {
		t.Fatalf("threads in D: pool workers %v, io_uring workers %v; want 2 workers, no io_uring worker", workers, uring)
	}
	t.Logf("blocked: %s", strings.Join(workers, "; "))
	for _, w := range workers {
		if !strings.Contains(w, "syscall 285 ") {
			t.Errorf("blocked worker %s: want fallocate (285)", w)
		}
	}
	for time.Since(frozeAt) < 2500*time.Millisecond {
		time.Sleep(100 * time.Millisecond)
	}
	if dir := os.Getenv("PVEDISKCHECK_RECORD_STALL"); dir != "" {
		fakenode.RecordStall(t, dir, n, v)
		t.Logf("recorded %s", dir)
	}
	img1 := filepath.Join(fz.Mount, "images/100/vm-100-disk-1.raw")
	img2 := filepath.Join(fz.Mount, "images/100/vm-100-disk-2.raw")
	const after, interval = 2 * time.Second, 500 * time.Millisecond

	// top, with a capture.
	capDir := t.TempDir()
	out, errs, code := runCLI(t, "--root", n.Root, "--json", "top", "100", "--count", "3", "--interval", interval.String(),
		"--stall-after", after.String(), "--capture", capDir)
	if code != exitOK {
		t.Fatalf("top: exit %d: %s", code, errs)
	}
	seen := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		s := gjson.Parse(sc.Text())
		if s0 := s.Get(`disks.#(disk=="scsi0").stalled_seconds`); s0.Float() != 0 {
			t.Errorf("idle scsi0 stalled %v at %s", s0, s.Get("time"))
		}
		for disk, img := range map[string]string{"scsi1": img1, "scsi2": img2} {
			if s.Get(`disks.#(disk=="`+disk+`").stalled_seconds`).Float() < after.Seconds() {
				continue
			}
			seen[disk] = true
			msg := ""
			for _, f := range s.Get(`findings.#(code=="disk-stalled")#`).Array() {
				if f.Get("disks.0").String() == disk {
					msg = f.Get("message").String()
				}
			}
			if !strings.Contains(msg, "1 thread(s) serving the disk") || !strings.Contains(msg, "worker") ||
				!strings.Contains(msg, "fallocate(fd ") || !strings.Contains(msg, img+")") {
				t.Errorf("top's %s finding: %s", disk, msg)
			}
		}
	}
	if !seen["scsi1"] || !seen["scsi2"] {
		t.Fatalf("top: stalled %v, want scsi1 and scsi2\n%s%s", seen, out, errs)
	}
	syscallsInCapture(t, capDir, 2)

	// check: disk-stalled errors on scsi1 and scsi2 only.
	out, errs, code = runCLI(t, "--root", n.Root, "--json", "check", "100", "--stall-after", after.String())
	var disks []string
	for _, f := range gjson.Get(out, `vms.0.findings.#(code=="disk-stalled")#`).Array() {
		disks = append(disks, f.Get("disk").String())
		if f.Get("severity").String() != "error" || !strings.Contains(f.Get("message").String(), "storage frozen") || !strings.Contains(f.Get("message").String(), "fallocate(fd ") {
			t.Errorf("check: %s", f.Raw)
		}
	}
	if code != exitProblem || strings.Join(disks, " ") != "scsi1 scsi2" {
		t.Errorf("check: exit %d, disk-stalled on %v, want scsi1 scsi2\n%s%s", code, disks, out, errs)
	}

	// metrics.
	out, errs, code = runCLI(t, "--root", n.Root, "metrics", "--stall-after", after.String())
	if code != exitOK || metricValue(t, out, "scsi1") < after.Seconds() || metricValue(t, out, "scsi2") < after.Seconds() || metricValue(t, out, "scsi0") != 0 {
		t.Errorf("metrics: exit %d, stalled scsi0 %v scsi1 %v scsi2 %v: %s", code, metricValue(t, out, "scsi0"), metricValue(t, out, "scsi1"), metricValue(t, out, "scsi2"), errs)
	}

	// stall: the verdicts carry each worker's system call and file.
	stallDir := t.TempDir()
	out, errs, code = runCLI(t, "--root", n.Root, "--json", "stall", "100", "--out", stallDir, "--stall-after", after.String())
	if code != exitOK || gjson.Get(out, `verdicts.#(disk=="scsi0").stalled`).Bool() {
		t.Errorf("stall: exit %d\n%s%s", code, out, errs)
	}
	for disk, img := range map[string]string{"scsi1": img1, "scsi2": img2} {
		v := gjson.Get(out, `verdicts.#(disk=="`+disk+`")`)
		b := v.Get("blocked_threads")
		if !v.Get("stalled").Bool() || len(b.Array()) != 1 || b.Get("0.comm").String() != "worker" || b.Get("0.call").String() != "fallocate" ||
			b.Get("0.fd_target").String() != img || !strings.HasPrefix(b.Get("0.syscall").String(), "285 0x") {
			t.Errorf("stall: %s: %s", disk, v.Raw)
		}
	}
	syscallsInCapture(t, stallDir, 2)

	// Thawed, both requests complete and nothing is stalled.
	fz.Thaw(t)
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if v.WriteOps(t, "scsi1") > wr1 && unmapOps(t, n, "scsi2") > un2 {
			break
		}
	}
	if w, u := v.WriteOps(t, "scsi1"), unmapOps(t, n, "scsi2"); w != wr1+1 || u <= un2 {
		t.Fatalf("after the thaw: scsi1 wr_operations %d (want %d), scsi2 unmap_operations %d (want more than %d)", w, wr1+1, u, un2)
	}
	out, errs, _ = runCLI(t, "--root", n.Root, "--json", "top", "100", "--count", "2", "--interval", interval.String(), "--stall-after", after.String())
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		for _, d := range []string{"scsi0", "scsi1", "scsi2"} {
			if s := gjson.Get(line, `disks.#(disk=="`+d+`").stalled_seconds`); !s.Exists() || s.Float() != 0 {
				t.Errorf("top after the thaw: %s: %s %s", d, line, errs)
			}
		}
	}
	out, _, _ = runCLI(t, "--root", n.Root, "--json", "check", "100", "--stall-after", after.String())
	if f := gjson.Get(out, `vms.0.findings.#(code=="disk-stalled")#`); len(f.Array()) != 0 {
		t.Errorf("check after the thaw: %s", f)
	}
	out, _, _ = runCLI(t, "--root", n.Root, "metrics", "--stall-after", after.String())
	if metricValue(t, out, "scsi1") != 0 || metricValue(t, out, "scsi2") != 0 {
		t.Errorf("metrics after the thaw: scsi1 %v scsi2 %v", metricValue(t, out, "scsi1"), metricValue(t, out, "scsi2"))
	}
}

// blockedThreads lists pid's threads in state D: pool workers ("worker")
// with their syscall line, and io_uring's workers.
func blockedThreads(t *testing.T, pid int) (workers, uring []string) {
	t.Helper()
	dir := filepath.Join("/proc", strconv.Itoa(pid), "task")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "stat"))
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if err != nil || i < 0 || !strings.HasPrefix(s[i+1:], " D ") {
			continue
		}
		comm := s[strings.IndexByte(s, '(')+1 : i]
		sc, _ := os.ReadFile(filepath.Join(dir, e.Name(), "syscall"))
		switch {
		case comm == "worker":
			workers = append(workers, e.Name()+" worker syscall "+strings.TrimSpace(string(sc)))
		case strings.HasPrefix(comm, "iou-wrk-"):
			uring = append(uring, e.Name()+" "+comm)
		}
	}
	return workers, uring
}

// unmapOps is a disk's unmap_operations now (SCSI counts the guest's
// discards there).
func unmapOps(t *testing.T, n *fakenode.Node, disk string) int64 {
	t.Helper()
	var ops int64
	err := qmp.Do(context.Background(), n.Paths.QMPSocket(100), 5*time.Second, func(s qmp.Session) error {
		ret, err := s.Exec("query-blockstats", nil)
		ops = ret.Get(`#(qdev=="` + disk + `").stats.unmap_operations`).Int()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

// syscallsInCapture: a capture under dir keeps the syscall line of want
// pool workers in state D.
func syscallsInCapture(t *testing.T, dir string, want int) {
	t.Helper()
	stats, _ := filepath.Glob(filepath.Join(dir, "*", "threads", "*", "stat"))
	found := 0
	for _, p := range stats {
		b, _ := os.ReadFile(p)
		if !strings.Contains(string(b), "(worker) D ") {
			continue
		}
		sc, err := os.ReadFile(filepath.Join(filepath.Dir(p), "syscall"))
		if err != nil || !strings.HasPrefix(string(sc), "285 ") {
			t.Errorf("capture %s: syscall %q %v", filepath.Dir(p), sc, err)
		}
		found++
	}
	if found < want {
		t.Errorf("captures under %s: %d pool workers in D with their syscall, want %d or more", dir, found, want)
	}
}
