package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/bench"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
)

// TestBenchTrustE2E is issue 31's bench cases on a real guest (VM 370,
// QEMU 7.2, Debian's fio 3.33 and qemu-ga 7.2): a job file's prefixes of
// options fio would run or write with, a test file's name planted as a
// symlink to another disk, a size larger than the filesystem, a disk
// formatted and mounted between bench's check and its next run, and
// Ctrl-C while the guest agent hangs. Each case is counted; a case that
// fails is an error naming it.
func TestBenchTrustE2E(t *testing.T) {
	if testing.Short() {
		t.Skip("boots a guest and runs fio")
	}
	skipOnAlternateQEMU(t)
	n := fakenode.NewT(t)
	n.UseDoubles(t)
	lab370(t, n, "agent: 1\n")
	g := bootGuest(t, n, 370, n.QEMU)
	hash := func(id string) string { return fileHash(t, lab370Volume(n, id)) }
	short := []string{"--runtime", "2s", "--ramp", "1s", "--size", "32M", "--runs", "1"}
	tried, held := 0, 0
	holds := func(name string, ok bool, detail ...any) {
		tried++
		if ok {
			held++
			return
		}
		t.Errorf("%s: %v", name, detail)
	}
	scsi1 := g.scsiDev(t, "scsi1")
	sata := strings.TrimSpace(g.sh(t, `for f in /sys/block/sd*; do case "$(readlink -f $f)" in *ata*) echo /dev/${f##*/};; esac; done`))
	vda := strings.TrimSpace(g.sh(t, `for f in /sys/block/vd*; do echo /dev/${f##*/}; done`))
	t.Logf("scsi1 %s, sata1 %s, virtio1 %s", scsi1, sata, vda)
	jobs := func(name, text string) string {
		p := filepath.Join(t.TempDir(), name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// 1. Job files: prefixes fio's command line takes, and fio's own
	// options; nothing runs in the guest, nothing is written.
	g.sh(t, "mkdir -p /tmp/data && echo keep > /tmp/data/f && rm -f /tmp/PWNED*")
	before := hash("scsi1")
	for _, c := range []struct{ name, text string }{
		{"exec_prer", "[a]\nrw=read\nexec_prer=touch /tmp/PWNED1\n"},
		{"exec_po", "[a]\nrw=write\nexec_po=touch /tmp/PWNED2\n"},
		{"opendi", "[a]\nrw=write\nopendi=/tmp/data\n"},
		{"trigger", "[a]\nrw=read\ntrigger=touch /tmp/PWNED3\n"},
		{"ioengine=exec", "[a]\nioengine=exec\nprogram=touch\narguments=/tmp/PWNED4\n"},
		{"nam", "[a]\nrw=write\nnam=/tmp/data/f\n"},
	} {
		_, errs, code := runCLI(t, append([]string{"--root", n.Root, "bench", "370", "scsi1", "--jobs", jobs(c.name+".fio", c.text)}, short...)...)
		holds("job file "+c.name, code == 2 && strings.Contains(errs, ".fio:"), code, errs)
	}
	left := g.sh(t, "ls /tmp/PWNED* 2>/dev/null; cat /tmp/data/f; ls /tmp/data")
	holds("job files ran nothing", strings.Fields(left) != nil && strings.Join(strings.Fields(left), " ") == "keep f", left)
	holds("job files wrote nothing", hash("scsi1") == before)

	// 2. File mode: the test folder's name planted as a symlink to a
	// folder whose test.fio leads to scsi1's device; the old test file
	// name planted too.
	g.sh(t, "mkfs.ext4 -q -F "+sata+" && mkdir -p /mnt/a /mnt/evil && mount -t ext4 "+sata+" /mnt/a && "+
		"ln -s "+scsi1+" /mnt/evil/"+bench.TestFileName+" && ln -s /mnt/evil /mnt/a/"+bench.TestDirName+" && ln -s "+scsi1+" /mnt/a/.pvediskcheck-bench.fio && sync")
	before = hash("scsi1")
	_, errs, code := runCLI(t, append([]string{"--root", n.Root, "bench", "370", "sata1", "--job", "rw4k", "--out", filepath.Join(t.TempDir(), "out")}, short...)...)
	holds("planted folder symlink refused", code == 2 && strings.Contains(errs, "is already there"), code, errs)
	holds("planted folder symlink: scsi1 untouched", hash("scsi1") == before)
	g.sh(t, "rm /mnt/a/"+bench.TestDirName)
	out, errs, code := runCLI(t, append([]string{"--root", n.Root, "bench", "370", "sata1", "--job", "rw4k", "--out", filepath.Join(t.TempDir(), "out")}, short...)...)
	holds("file mode beside the old name's symlink runs", code == 0, code, out, errs)
	holds("the old name's symlink: scsi1 untouched", hash("scsi1") == before)
	after := g.sh(t, "ls -a /mnt/a; readlink /mnt/a/.pvediskcheck-bench.fio")
	holds("the test folder removed, the planted link left as it was", !strings.Contains(after, bench.TestDirName+"\n") && strings.Contains(after, scsi1), after)

	// 3. More than the filesystem holds (ext4 on a 256 MiB disk).
	df := g.sh(t, "df -k /mnt/a | tail -1")
	_, errs, code = runCLI(t, "--root", n.Root, "bench", "370", "sata1", "--job", "rw4k", "--size", "1G", "--runtime", "2s", "--ramp", "1s", "--out", filepath.Join(t.TempDir(), "out"))
	holds("--size 1G on 250 MiB refused", code == 2 && strings.Contains(errs, "MiB free"), code, errs)
	_, errs, code = runCLI(t, append([]string{"--root", n.Root, "bench", "370", "sata1", "--jobs", jobs("big.fio", "[a]\nrw=write\nsize=1G\n")}, short...)...)
	holds("a job file's size=1G refused", code == 2 && strings.Contains(errs, "use --size"), code, errs)
	holds("the filesystem's use unchanged", g.sh(t, "df -k /mnt/a | tail -1") == df, df)
	g.sh(t, "umount /mnt/a")

	// 4. scsi1 formatted and mounted after the check, during the first
	// timed run (a read): the next run's guard refuses, the filesystem is
	// whole.
	wipe := g.sh(t, "head -c 1048576 "+scsi1+" | tr -d '\\000' | wc -c")
	if strings.TrimSpace(wipe) != "0" {
		t.Fatalf("scsi1 is not blank: %s", wipe)
	}
	dir := filepath.Join(t.TempDir(), "toctou")
	done := make(chan string, 1)
	go func() {
		for i := 0; i < 1200; i++ {
			if _, err := os.Stat(filepath.Join(dir, "scsi1-fill.json")); err == nil {
				done <- g.sh(t, "mkfs.ext4 -q -F "+scsi1+" && mkdir -p /mnt/t && mount -t ext4 "+scsi1+" /mnt/t && echo precious > /mnt/t/f && sync && echo MOUNTED")
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		done <- "no fill"
	}()
	_, errs, code = runCLI(t, "--root", n.Root, "bench", "370", "scsi1", "--job", "rr4k", "--job", "rw4k", "--runs", "2", "--runtime", "8s", "--ramp", "1s", "--size", "32M", "--out", dir)
	mounted := <-done
	t.Logf("TOCTOU: %s; exit %d\n%s", strings.TrimSpace(mounted), code, errs)
	holds("formatted and mounted between check and run: refused", code == 2 && strings.Contains(errs, "changed since bench checked it") && strings.Contains(errs, "mounted"), code, errs)
	fsck := g.sh(t, "cat /mnt/t/f; umount /mnt/t; e2fsck -fn "+scsi1+" >/dev/null 2>&1; echo fsck=$?")
	holds("the filesystem made meanwhile is whole", strings.Contains(fsck, "precious") && strings.Contains(fsck, "fsck=0"), fsck)
	if files, _ := filepath.Glob(filepath.Join(dir, "scsi1-rw4k-*.json")); len(files) != 0 {
		holds("no write run after the mount", false, files)
	}

	// 5. Ctrl-C while the guest agent hangs (qemu-ga stopped for 20 s):
	// bench ends within InterruptGrace, saying fio may still run and how
	// to stop it (it waited 40 s).
	idir := filepath.Join(t.TempDir(), "int")
	ctx, cancel := context.WithCancel(context.Background())
	var stoppedAt time.Time
	go func() {
		defer cancel()
		for i := 0; i < 1200; i++ {
			if _, err := os.Stat(filepath.Join(idir, "virtio1-fill.json")); err == nil {
				time.Sleep(3 * time.Second) // inside rr4k (1 s ramp + 30 s)
				g.sh(t, `a=$(pidof qemu-ga); (sleep 1; kill -STOP $a; sleep 20; kill -CONT $a) </dev/null >/dev/null 2>&1 &`)
				time.Sleep(3 * time.Second)
				stoppedAt = time.Now()
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	out, errs, code, _ = runCLICtx(t, ctx, "--root", n.Root, "bench", "370", "virtio1", "--job", "rr4k", "--runs", "1", "--runtime", "30s", "--ramp", "1s", "--size", "32M", "--out", idir)
	took := time.Since(stoppedAt)
	t.Logf("Ctrl-C with the agent stopped: exit %d %.2f s after\n%s\n%s", code, took.Seconds(), out, errs)
	holds("Ctrl-C with the agent hung ends at once", code == 3 && took < 2*time.Second+time.Second, code, took) // 2 s, and a second for a loaded machine
	m := regexp.MustCompile(`fio \(guest pid (\d+)\) may still be running.*qm guest exec 370 -- kill -TERM (\d+)`).FindStringSubmatch(out)
	holds("Ctrl-C says fio may still run and how to stop it", m != nil && m[1] == m[2], out)
	// The agent back: stop fio as the message says, and nothing is left.
	if m != nil {
		actx, acancel := context.WithTimeout(context.Background(), 2*time.Minute)
		for actx.Err() == nil && g.agent.Ping(actx) != nil {
			time.Sleep(time.Second)
		}
		acancel()
		g.sh(t, "kill -TERM "+m[1]+"; i=0; while pidof fio >/dev/null && [ $i -lt 30 ]; do sleep 1; i=$((i+1)); done; exit 0")
		holds("stopped as told, no fio left", strings.TrimSpace(g.sh(t, "pidof fio; exit 0")) == "", "fio still running")
	}
	t.Logf("bench safety on the real guest: %d of %d cases held", held, tried)
}
