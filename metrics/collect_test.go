package metrics

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// manyDisks is a running VM 100 with disks VirtIO SCSI single disks, each
// with an iothread and a write limit, answering as QEMU greeting does
// (11.1: qom-list-get; 7.2: a qom-get per object).
func manyDisks(t *testing.T, disks int, greeting string) (*vmtest.Node, *qmptest.QEMU) {
	t.Helper()
	var cfg strings.Builder
	cfg.WriteString("scsihw: virtio-scsi-single\nmachine: pc-q35-10.1\n")
	var block, nodes, stats, nstats, iothreads []string
	for i := 0; i < disks; i++ {
		fmt.Fprintf(&cfg, "scsi%d: local:100/vm-100-disk-%d.raw,iothread=1,mbps_wr=10,size=16M\n", i, i)
		block = append(block, fmt.Sprintf(`{"device": "", "qdev": "scsi%d", "inserted": {"node-name": "drive-scsi%d", "cache": {"writeback": true}}}`, i, i))
		nodes = append(nodes, fmt.Sprintf(`{"node-name": "drive-scsi%d", "drv": "throttle", "children": [{"child": "file", "node-name": "f%d"}]}, {"node-name": "f%d", "drv": "raw", "cache": {"direct": true, "no-flush": false}, "children": [{"child": "file", "node-name": "e%d"}]}, {"node-name": "e%d", "drv": "file", "cache": {"direct": true, "no-flush": false}}`, i, i, i, i, i))
		stats = append(stats, fmt.Sprintf(`{"device": "", "qdev": "scsi%d", "node-name": "drive-scsi%d", "stats": {"wr_bytes": %d}}`, i, i, i*4096))
		nstats = append(nstats, fmt.Sprintf(`{"node-name": "e%d", "stats": {}, "driver-specific": {"driver": "file", "discard-nb-ok": %d, "discard-nb-failed": 0, "discard-bytes-ok": 0}}`, i, i))
		iothreads = append(iothreads, fmt.Sprintf(`{"id": "iothread-virtioscsi%d", "thread-id": %d}`, i, 5000+i))
	}
	conf, err := qemuserver.ParseConfig(strings.NewReader(cfg.String()), "100")
	if err != nil {
		t.Fatal(err)
	}
	n := vmtest.New(t, 100, cfg.String(), "dir: local\n\tpath /var/lib/vz\n\tcontent images\n", nil)
	st, _ := qemuserver.LoadStorages(n.Paths.StorageCfg())
	argv, err := fakenode.Argv("qemu-system-x86_64", conf, st, fakenode.ArgvOptions{VMID: 100, RunDir: "/var/run/qemu-server", Blockdev: true})
	if err != nil {
		t.Fatal(err)
	}
	n.Write(t, filepath.Join(n.Paths.ProcPid(vmtest.Pid), "cmdline"), strings.Join(argv, "\x00")+"\x00")
	n.Write(t, n.Paths.PidFile(100), fmt.Sprintf("%d\n", vmtest.Pid))
	for _, tid := range []int{vmtest.Pid, 6000} {
		writeThread(t, n, vmtest.Pid, tid, "1000000000 0 1\n")
	}
	for i := 0; i < disks; i++ {
		writeThread(t, n, vmtest.Pid, 5000+i, "2000000000 0 1\n")
	}
	limits := `{"bps-write": 10485760, "bps-write-max-length": 1, "iops-total": 0}`
	q := qmptest.NewQEMU(t, func(cmd string, args gjson.Result) string {
		switch cmd {
		case "query-status":
			return qmptest.Return(`{"status": "running", "running": true}`)
		case "query-block":
			return qmptest.Return("[" + strings.Join(block, ",") + "]")
		case "query-named-block-nodes":
			return qmptest.Return("[" + strings.Join(nodes, ",") + "]")
		case "query-blockstats":
			if args.Get("query-nodes").Bool() {
				return qmptest.Return("[" + strings.Join(nstats, ",") + "]")
			}
			return qmptest.Return("[" + strings.Join(stats, ",") + "]")
		case "query-iothreads":
			return qmptest.Return("[" + strings.Join(iothreads, ",") + "]")
		case "query-cpus-fast":
			return qmptest.Return(`[{"cpu-index": 0, "thread-id": 6000}]`)
		case "qom-get":
			if args.Get("property").String() == "write-cache" {
				return qmptest.Return(`"on"`)
			}
			return qmptest.Return(limits)
		case "qom-list-get":
			var objs []string
			for _, p := range args.Get("paths").Array() {
				if strings.HasPrefix(p.String(), "/objects/") {
					objs = append(objs, `{"properties": [{"name": "limits", "type": "ThrottleLimits", "value": `+limits+`}]}`)
				} else {
					objs = append(objs, `{"properties": [{"name": "write-cache", "type": "OnOffAuto", "value": "on"}]}`)
				}
			}
			return qmptest.Return("[" + strings.Join(objs, ",") + "]")
		}
		return qmptest.NotFound(cmd)
	})
	q.Greeting = greeting
	n.Serve(t, q)
	return n, q
}

// writeThread writes a thread's schedstat below the node's procfs.
func writeThread(t *testing.T, n *vmtest.Node, pid, tid int, schedstat string) {
	t.Helper()
	dir := filepath.Join(n.Paths.ProcPid(pid), "task", fmt.Sprint(tid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	n.Write(t, filepath.Join(dir, "schedstat"), schedstat)
	if tid == pid {
		n.Write(t, filepath.Join(dir, "stat"), fmt.Sprintf("%d (qemu-system-x86) S 1 1 1 0 -1 0 0 0 0 0 10 7 0 0 20 0 9 0 771930 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n", tid))
	}
}

// The commands a collection sends a VM are constant in its number of disks
// on QEMU >= 10.1 (8: FetchLive's 4, then 4), in two connections; QEMU 7.2
// reads each throttle group apart (FetchLive's contract). Every disk gets
// its series.
func TestCommandsPerVM(t *testing.T) {
	for _, c := range []struct {
		greeting string
		disks    int
		commands int64
	}{
		{qmptest.Greeting111, 1, 8},
		{qmptest.Greeting111, 15, 8},
		{qmptest.Greeting72, 1, 7 + 1},
		{qmptest.Greeting72, 15, 7 + 15},
	} {
		t.Run(fmt.Sprintf("%.40s/%d", c.greeting, c.disks), func(t *testing.T) {
			n, q := manyDisks(t, c.disks, c.greeting)
			s := Collect(context.Background(), bare(n.Paths, 2*time.Second), Options{})
			if q.Commands() != c.commands || q.Conns() != 2 {
				t.Errorf("%d commands in %d connections %v, want %d in 2", q.Commands(), q.Conns(), q.Seen(), c.commands)
			}
			v := s.VMs[0]
			if !v.Live || len(v.Disks) != c.disks || v.CPU == nil || len(v.CPU.IOThreads) != c.disks {
				t.Fatalf("%+v", v)
			}
			last := v.Disks[c.disks-1]
			if last.Stats.WrBytes != int64(c.disks-1)*4096 || last.Protocol.DiscardNbOK != int64(c.disks-1) ||
				last.IOThread != fmt.Sprintf("iothread-virtioscsi%d", c.disks-1) || last.Limits.String() != "bps-write=10485760" || last.LimitsDiffer() {
				t.Errorf("%+v", last)
			}
			if v.CPU.MainLoop != 1 || v.CPU.VCPUs != 1 || v.CPU.IOThreads["iothread-virtioscsi0"] != 2 {
				t.Errorf("CPU %+v", v.CPU)
			}
		})
	}
}

// What cannot be read is counted by source, and only that is missing.
func TestCollectErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("no lvs", func(t *testing.T) {
		n, _ := manyDisks(t, 1, qmptest.Greeting111)
		s := Collect(ctx, bare(n.Paths, time.Second), Options{})
		if fmt.Sprint(s.Errors) != "map[]" || s.Pools == nil || len(s.Pools) != 0 {
			t.Errorf("no pool storage: errors %v, pools %v", s.Errors, s.Pools)
		}
		n.Write(t, n.Paths.StorageCfg(), "dir: local\n\tpath /var/lib/vz\n\tcontent images\n\nlvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n")
		s = Collect(ctx, bare(n.Paths, time.Second), Options{})
		if fmt.Sprint(s.Errors) != "map[thinpool:1]" || s.Pools != nil || !s.VMs[0].Live {
			t.Errorf("errors %v, pools %v", s.Errors, s.Pools)
		}
	})
	t.Run("threads", func(t *testing.T) {
		n, _ := manyDisks(t, 2, qmptest.Greeting111)
		os.RemoveAll(filepath.Join(n.Paths.ProcPid(vmtest.Pid), "task"))
		s := Collect(ctx, bare(n.Paths, time.Second), Options{})
		v := s.VMs[0]
		if fmt.Sprint(s.Errors) != "map[threads:1]" || v.CPU != nil || !v.Live || len(v.Disks) != 2 {
			t.Errorf("errors %v, %+v", s.Errors, v)
		}
		if text := exposition(t, s); strings.Contains(text, "cpu_seconds_total{") || !strings.Contains(text, `pvediskcheck_collect_errors{source="threads"} 1`) {
			t.Errorf("CPU series without counters:\n%s", text)
		}
	})
	t.Run("a vCPU gone", func(t *testing.T) {
		n, _ := manyDisks(t, 1, qmptest.Greeting111)
		os.RemoveAll(filepath.Join(n.Paths.ProcPid(vmtest.Pid), "task", "6000"))
		os.RemoveAll(filepath.Join(n.Paths.ProcPid(vmtest.Pid), "task", "5000"))
		s := Collect(ctx, bare(n.Paths, time.Second), Options{})
		if c := s.VMs[0].CPU; len(s.Errors) != 0 || c == nil || c.MainLoop != 1 || c.VCPUs != 0 || len(c.IOThreads) != 0 {
			t.Errorf("errors %v, CPU %+v", s.Errors, c)
		}
	})
	t.Run("config", func(t *testing.T) {
		n, _ := manyDisks(t, 1, qmptest.Greeting111)
		// A line Proxmox skips (not key: value) is a note now, as in
		// parse_vm_config; a line no Proxmox wrote is a config error.
		n.Write(t, n.Paths.VMConfig(101), "boot: order=scsi0\n"+strings.Repeat("x", 5<<20)+"\n")
		os.Mkdir(n.Paths.VMConfig(102), 0o755)                                                                    // not a file
		n.Write(t, n.Paths.VMConfig(103), "this is no config line\nscsi0: local:103/vm-103-disk-0.raw,size=1G\n") // skipped as Proxmox skips it: no error
		s := Collect(ctx, bare(n.Paths, time.Second), Options{})
		if fmt.Sprint(s.Errors) != "map[config:2]" || len(s.VMs) != 4 {
			t.Fatalf("errors %v, %d VMs", s.Errors, len(s.VMs))
		}
		bad, stopped := s.VMs[1], s.VMs[3]
		if bad.VMID != 101 || len(bad.Findings) != 0 || bad.Running || bad.Live { // not checked: a config error, no findings
			t.Errorf("%+v", bad)
		}
		if stopped.VMID != 103 || stopped.Running || stopped.Live || stopped.Disks != nil || stopped.CPU != nil {
			t.Errorf("stopped: %+v", stopped)
		}
	})
	t.Run("not a node", func(t *testing.T) {
		s := Collect(ctx, bare(node.NewPaths(t.TempDir(), "", ""), time.Second), Options{})
		if fmt.Sprint(s.Errors) != "map[node:1 thinpool:1]" || len(s.VMs) != 0 || s.VMs == nil {
			t.Errorf("errors %v, VMs %v", s.Errors, s.VMs)
		}
	})
	t.Run("deadline", func(t *testing.T) {
		n, q := manyDisks(t, 1, qmptest.Greeting111)
		q.Pause()
		defer q.Resume()
		dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		s := Collect(dctx, bare(n.Paths, 5*time.Second), Options{})
		if fmt.Sprint(s.Errors) != "map[qmp:1]" || s.VMs[0].Live || time.Since(start) > 3*time.Second {
			t.Errorf("errors %v after %s", s.Errors, time.Since(start))
		}
		if s.Duration <= 0 || s.Duration > time.Since(start) {
			t.Errorf("duration %s", s.Duration)
		}
	})
}

func TestValidate(t *testing.T) {
	n := vmtest.New(t, 100, "", "", nil)
	if err := Validate(n.Paths, Options{}); err != nil {
		t.Error(err)
	}
	if err := Validate(n.Paths, Options{Parallel: -1}); err == nil || !strings.Contains(err.Error(), "--parallel -1") {
		t.Errorf("%v", err)
	}
	if err := Validate(n.Paths, Options{Parallel: MaxParallel}); err != nil {
		t.Errorf("--parallel %d: %v", MaxParallel, err)
	}
	if err := Validate(n.Paths, Options{Parallel: MaxParallel + 1}); err == nil || err.Error() != "--parallel 65: at most 64" {
		t.Errorf("%v", err)
	}
	if err := Validate(node.NewPaths(t.TempDir(), "", ""), Options{}); err == nil {
		t.Error("a tree without /etc/pve validated")
	}
}

// Options.Parallel bounds the VMs read at once: 1 reads one VM after the
// other, the default DefaultParallel.
func TestParallel(t *testing.T) {
	n, q := manyDisks(t, 1, qmptest.Greeting111)
	var mu sync.Mutex
	cur, peak := 0, 0
	slow := func(h func(string, gjson.Result) string) func(string, gjson.Result) string {
		return func(cmd string, args gjson.Result) string {
			if cmd == "query-status" {
				mu.Lock()
				cur++
				peak = max(peak, cur)
				mu.Unlock()
				time.Sleep(50 * time.Millisecond)
				mu.Lock()
				cur--
				mu.Unlock()
			}
			return h(cmd, args)
		}
	}
	q.Handler = slow(q.Handler)
	// Three more VMs like the first, each with its own socket.
	argv, _ := os.ReadFile(filepath.Join(n.Paths.ProcPid(vmtest.Pid), "cmdline"))
	conf, _ := os.ReadFile(n.Paths.VMConfig(100))
	for _, id := range []int{101, 102, 103} {
		pid := vmtest.Pid + id
		n.Write(t, n.Paths.VMConfig(id), string(conf))
		os.MkdirAll(n.Paths.ProcPid(pid), 0o755)
		n.Write(t, filepath.Join(n.Paths.ProcPid(pid), "cmdline"), strings.ReplaceAll(string(argv), "qemu-server/100.", fmt.Sprintf("qemu-server/%d.", id)))
		n.Write(t, n.Paths.PidFile(id), fmt.Sprintf("%d\n", pid))
		qi := qmptest.NewQEMU(t, slow(q.Handler))
		qi.Greeting = qmptest.Greeting111
		os.Symlink(qi.Sock(), n.Paths.QMPSocket(id))
	}
	for _, c := range []struct{ parallel, peak int }{{1, 1}, {2, 2}, {0, 4}} {
		peak = 0
		s := Collect(context.Background(), bare(n.Paths, 2*time.Second), Options{Parallel: c.parallel})
		if peak != c.peak || s.Errors[SourceQMP] != 0 || len(s.VMs) != 4 {
			t.Errorf("parallel %d: %d VMs read at once (want %d), errors %v", c.parallel, peak, c.peak, s.Errors)
		}
	}
}

// A collection of --listen ends before Prometheus' default scrape
// timeout (10 s) gives up on the scrape.
func TestDefaultDeadline(t *testing.T) {
	if DefaultDeadline <= 0 || DefaultDeadline >= 10*time.Second {
		t.Errorf("DefaultDeadline %s", DefaultDeadline)
	}
}
