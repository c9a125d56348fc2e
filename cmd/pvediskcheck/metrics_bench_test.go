package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// BenchmarkMetrics50VMs: one collection of the built binary's `metrics`
// (stdout) on a node with 50 running VMs of 4 disks each (real QEMU
// processes, VirtIO SCSI single with iothreads, local-lvm through the lvs
// double), its wall time and CPU, next to the same QMP exchanges alone,
// done in this process one VM after another: FetchLive's (query-status,
// query-block, query-named-block-nodes, the debug graph before QEMU 10.1,
// the throttle groups' limits) and the counters' (query-blockstats for
// devices and nodes, query-iothreads, query-cpus-fast). Reported, never
// asserted.
func BenchmarkMetrics50VMs(b *testing.B) {
	n := fakenode.NewT(b)
	n.UseDoubles(b)
	const vms = 50
	for i := 0; i < vms; i++ {
		id := 700 + i
		var cfg strings.Builder
		cfg.WriteString("ostype: l26\nscsihw: virtio-scsi-single\n")
		for d := 0; d < 4; d++ {
			vol := sf("vm-%d-disk-%d", id, d)
			n.MustVolume(b, "local-lvm", vol, 16<<20)
			cfg.WriteString(sf("scsi%d: local-lvm:%s,iothread=1,size=16M\n", d, vol))
		}
		n.WriteConfig(id, cfg.String())
		n.MustStart(b, id, fakenode.ArgvOptions{})
	}
	bin := buildBinary(b)
	var tool, bare []time.Duration
	var toolCPU time.Duration
	for i := 0; i < b.N+2; i++ {
		cmd := exec.Command(bin, "--root", n.Root, "metrics")
		t0 := time.Now()
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), `pvediskcheck_disk_info{aio="io_uring",cache_configured="none",cache_effective="none",controller="virtio-scsi-single",discard="ignore",disk="scsi3",iothread="iothread-virtioscsi3",storage="local-lvm",vmid="749"} 1`) ||
			!strings.Contains(string(out), `pvediskcheck_collect_errors{source="qmp"} 0`) {
			b.Fatalf("metrics: %v %.300s", err, out)
		}
		tool = append(tool, time.Since(t0))
		if i >= 2 {
			toolCPU += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		t0 = time.Now()
		for v := 0; v < vms; v++ {
			sock := n.Paths.QMPSocket(700 + v)
			err := qmp.Do(context.Background(), sock, 5*time.Second, func(s qmp.Session) error {
				for _, c := range []string{"query-status", "query-block"} {
					if _, err := s.Exec(c, nil); err != nil {
						return err
					}
				}
				g, err := s.Exec("query-named-block-nodes", map[string]any{"flat": true})
				if err != nil {
					return err
				}
				if !strings.Contains(g.Raw, `"children"`) {
					if _, err := s.Exec("x-debug-query-block-graph", nil); err != nil {
						return err
					}
				}
				_, err = s.ReadDiskProps(nil, []string{"scsi0", "scsi1", "scsi2", "scsi3"})
				return err
			})
			if err != nil {
				b.Fatal(err)
			}
			err = qmp.Do(context.Background(), sock, 5*time.Second, func(s qmp.Session) error {
				if _, err := s.Exec("query-blockstats", nil); err != nil {
					return err
				}
				if _, err := s.Exec("query-blockstats", map[string]any{"query-nodes": true}); err != nil {
					return err
				}
				for _, c := range []string{"query-iothreads", "query-cpus-fast"} {
					if _, err := s.Exec(c, nil); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		bare = append(bare, time.Since(t0))
	}
	mt, mq := median(tool[2:]), median(bare[2:])
	cpu := toolCPU / time.Duration(len(tool)-2)
	b.ReportMetric(float64(mt.Microseconds())/1000, "tool-ms")
	b.ReportMetric(float64(cpu.Microseconds())/1000, "tool-cpu-ms")
	b.ReportMetric(float64(mq.Microseconds())/1000, "qmp-sum-ms")
	b.Logf("%s: metrics on %d VMs x 4 disks: one collection %s (median; %s CPU, lvs included); the QMP exchanges alone, one VM after another: %s",
		qemuName(b), vms, mt, cpu.Round(time.Millisecond), mq)
}
