//go:build record

package metrics

// TestRecordFixtures records testdata/lab370-<generation>.json from real
// QEMU (as root, with loop devices):
//
//	go test -tags record -run TestRecordFixtures -count=1 ./metrics/
//
// It starts Lab 37's VM 370 (fakenode.CreateLab370 with the disks of
// internal/fakenode/record: an ISO CD-ROM, an empty CD-ROM, a writeback disk
// with discard, limits on scsi1) on each command-line generation, writes to
// scsi1 through qemu-io, discards on scsi2, sets a limit on virtio1 live
// (not in the config), then runs one collection against it through a proxy
// on the QMP socket that keeps every command the collection sent with
// QEMU's reply, and saves the thread counters of the process and what the
// harness' lvs double printed.

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/lvm"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

const recordExtra = `ide2: none,media=cdrom
sata2: local:iso/boot.iso,media=cdrom
scsi2: local-lvm:vm-370-disk-4,cache=writeback,discard=on,size=64M
`

func TestRecordFixtures(t *testing.T) {
	for _, gen := range []string{"blockdev", "drive"} {
		t.Run(gen, func(t *testing.T) { record(t, gen) })
	}
}

func record(t *testing.T, gen string) {
	n := fakenode.NewT(t)
	n.UseDoubles(t)
	for i := 0; i < 5; i++ {
		n.MustVolume(t, "local-lvm", "vm-370-disk-"+strconv.Itoa(i), 64<<20)
	}
	n.MustVolume(t, "local", "iso/boot.iso", 1<<20)
	limited := "scsi1: local-lvm:vm-370-disk-1,iothread=1,size=256M,mbps_wr=20,mbps_wr_max=40,iops_rd=500\n"
	conf := strings.Replace(fakenode.Lab370Config, "scsi1: local-lvm:vm-370-disk-1,iothread=1,size=256M\n", limited, 1) + recordExtra
	if err := n.WriteConfig(370, conf); err != nil {
		t.Fatal(err)
	}
	vmq := n.MustStart(t, 370, fakenode.ArgvOptions{Legacy: gen == "drive", Blockdev: gen == "blockdev"})
	sock := n.Paths.QMPSocket(370)
	full := map[string]int64{}
	for _, k := range qmp.ThrottleLimitNames {
		full[k] = 0
		if strings.HasSuffix(k, "-max-length") {
			full[k] = 1
		}
	}
	full["iops-write"] = 1000
	if err := qmp.Do(context.Background(), sock, 5*time.Second, func(s qmp.Session) error {
		return s.SetThrottleLimits("virtio1", gen == "blockdev", full)
	}); err != nil {
		t.Fatal(err)
	}
	vmq.MustQemuIO(t, "scsi2", "write -P 0x5a 0 1M")
	vmq.MustQemuIO(t, "scsi2", "discard 0 1M")
	load := vmq.StartLoad(fakenode.LoadSpec{Disk: "scsi1", Write: true, Size: 256 << 10, Depth: 16})
	time.Sleep(3 * time.Second)
	load.Stop()

	qv, err := fakenode.QEMUVersion(fakenode.QEMUBinary())
	if err != nil {
		t.Fatal(err)
	}
	f := fixture{Fixture: vmtest.Fixture{VMID: 370, QEMU: qv, Conf: conf, Argv: vmq.Argv, Replies: map[string]json.RawMessage{}}, Pid: vmq.Pid, Threads: map[string]map[string]string{}}
	b, _ := os.ReadFile(n.Paths.StorageCfg())
	f.StorageCfg = string(b)
	stop := proxy(t, sock, f.Replies)
	snap := Collect(context.Background(), node.New(n.Paths, 5*time.Second), Options{})
	stop()
	if len(snap.Errors) > 0 {
		t.Fatalf("collection errors: %v", snap.Errors)
	}
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(vmq.Pid), "task", "*"))
	for _, dir := range tasks {
		files := map[string]string{}
		for _, name := range []string{"stat", "schedstat"} {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			files[name] = string(b)
		}
		f.Threads[filepath.Base(dir)] = files
	}
	out, err := node.New(n.Paths, 5*time.Second).Runner.Run(context.Background(), lvm.Argv()...)
	if err != nil {
		t.Fatal(err)
	}
	f.LVS = string(out)
	js, _ := json.MarshalIndent(f, "", "  ")
	// The scratch node's root names nothing the replay has.
	js = []byte(strings.ReplaceAll(string(js), n.Root, "/ROOT"))
	if err := os.WriteFile(filepath.Join("testdata", "lab370-"+gen+".json"), append(js, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("recorded %d replies, %d threads (QEMU %s, -%s)", len(f.Replies), len(f.Threads), qv, gen)
}

// proxy puts itself on the QMP socket: each client is passed to QEMU
// (moved aside) line by line, and every command's "return" is kept in
// replies by vmtest.Key. stop puts QEMU's socket back.
func proxy(t *testing.T, sock string, replies map[string]json.RawMessage) (stop func()) {
	t.Helper()
	real := sock + ".real"
	if err := os.Rename(sock, real); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			serveProxy(c, real, func(cmd string, args map[string]any, ret json.RawMessage) {
				mu.Lock()
				replies[vmtest.Key(cmd, args)] = ret
				mu.Unlock()
			})
		}
	}()
	return func() {
		ln.Close()
		wg.Wait()
		os.Remove(sock)
		os.Rename(real, sock)
	}
}

func serveProxy(c net.Conn, real string, keep func(string, map[string]any, json.RawMessage)) {
	defer c.Close()
	u, err := net.Dial("unix", real)
	if err != nil {
		return
	}
	defer u.Close()
	ur, cr := bufio.NewReader(u), bufio.NewReader(c)
	greeting, err := ur.ReadString('\n')
	if err != nil {
		return
	}
	c.Write([]byte(greeting))
	for {
		line, err := cr.ReadString('\n')
		if err != nil {
			return
		}
		u.Write([]byte(line))
		req := gjson.Parse(line)
		for {
			reply, err := ur.ReadString('\n')
			if err != nil {
				return
			}
			c.Write([]byte(reply))
			r := gjson.Parse(reply)
			if r.Get("event").Exists() {
				continue
			}
			cmd := req.Get("execute").String()
			if ret := r.Get("return"); ret.Exists() && cmd != "qmp_capabilities" {
				var args map[string]any
				if a := req.Get("arguments"); a.Exists() {
					json.Unmarshal([]byte(a.Raw), &args)
				}
				keep(cmd, args, json.RawMessage(ret.Raw))
			}
			break
		}
	}
}
