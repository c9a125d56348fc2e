package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// buildBinary builds the CLI once into a temp dir (what admins run).
func buildBinary(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "pvediskcheck")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		tb.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func median(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// BenchmarkCache15Disks: the built binary's `cache --json` on a running VM
// with 15 disks, next to the bare QMP exchange it makes (FetchLive's
// commands, in this process) and to the floor (the same commands read as
// lines only, rawQMP), measured side by side in the same run. Target:
// within 1.5x the QMP exchange and under 25 ms.
func BenchmarkCache15Disks(b *testing.B) {
	n := fakenode.NewT(b)
	var cfg strings.Builder
	cfg.WriteString("scsihw: virtio-scsi-single\n")
	for i := 0; i < 15; i++ {
		bus, idx := "scsi", i
		if i >= 10 {
			bus, idx = "virtio", i-10
		}
		vol := sf("vm-390-disk-%d", i)
		n.MustVolume(b, "local-lvm", vol, 16<<20)
		cfg.WriteString(sf("%s%d: local-lvm:%s,iothread=1,size=16M\n", bus, idx, vol))
	}
	n.WriteConfig(390, cfg.String())
	n.MustStart(b, 390, fakenode.ArgvOptions{})
	bin := buildBinary(b)
	sock := n.Paths.QMPSocket(390)
	var ids []string
	for j := 0; j < 15; j++ {
		if j < 10 {
			ids = append(ids, sf("scsi%d", j))
		} else {
			ids = append(ids, sf("virtio%d", j-10))
		}
	}
	var tool, bare, floor []time.Duration
	// The floor: the same commands read as lines and nothing more (rawQMP).
	floorCmds := func(debugGraph, listGet bool) []string {
		cmds := []string{`{"execute":"query-status"}`, `{"execute":"query-block"}`, `{"execute":"query-named-block-nodes","arguments":{"flat":true}}`}
		if debugGraph {
			cmds = append(cmds, `{"execute":"x-debug-query-block-graph"}`)
		}
		if listGet {
			var paths []string
			for _, id := range ids {
				paths = append(paths, sf("%q", qmp.DevicePath(id)))
			}
			for _, id := range ids {
				paths = append(paths, sf("%q", qmp.ThrottleGroupPath(id)))
			}
			return append(cmds, `{"execute":"qom-list-get","arguments":{"paths":[`+strings.Join(paths, ",")+`]}}`)
		}
		for _, id := range ids {
			cmds = append(cmds, qomGet(qmp.DevicePath(id), "write-cache"))
		}
		for _, id := range ids {
			cmds = append(cmds, qomGet(qmp.ThrottleGroupID(id), "limits"))
		}
		return cmds
	}
	debugGraph, listGet := false, false
	for i := 0; i < b.N+5; i++ {
		t0 := time.Now()
		out, err := exec.Command(bin, "--root", n.Root, "--json", "cache", "390").Output()
		if err != nil || !strings.Contains(string(out), `"effective": "none"`) {
			b.Fatalf("cache: %v %s", err, out)
		}
		tool = append(tool, time.Since(t0))
		// FetchLive's exchange: the run state, the devices, the graph
		// (and its edges before QEMU 10.1), each device's write-cache and
		// each throttle group's limits (-blockdev).
		t0 = time.Now()
		err = qmp.Do(context.Background(), sock, 5*time.Second, func(s qmp.Session) error {
			for _, c := range []string{"query-status", "query-block"} {
				if _, err := s.Exec(c, nil); err != nil {
					return err
				}
			}
			g, err := s.Exec("query-named-block-nodes", map[string]any{"flat": true})
			if err != nil {
				return err
			}
			if debugGraph = !strings.Contains(g.Raw, `"children"`); debugGraph {
				if _, err := s.Exec("x-debug-query-block-graph", nil); err != nil {
					return err
				}
			}
			listGet = s.HasQOMListGet()
			p, err := s.ReadDiskProps(ids, ids)
			if err == nil && (len(p.WriteCache) != 15 || len(p.Limits) != 15) {
				err = fmt.Errorf("%d write-cache and %d limits read, want 15 each", len(p.WriteCache), len(p.Limits))
			}
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
		bare = append(bare, time.Since(t0))
		t0 = time.Now()
		if err := rawQMP(sock, floorCmds(debugGraph, listGet)...); err != nil {
			b.Fatal(err)
		}
		floor = append(floor, time.Since(t0))
	}
	mt, mq, mf := median(tool[5:]), median(bare[5:]), median(floor[5:])
	b.ReportMetric(float64(mt.Microseconds())/1000, "tool-ms")
	b.ReportMetric(float64(mq.Microseconds())/1000, "qmp-ms")
	b.ReportMetric(float64(mf.Microseconds())/1000, "floor-ms")
	b.ReportMetric(float64(mt)/float64(mq), "ratio")
	b.ReportMetric(float64(mt)/float64(mf), "tool/floor")
	b.Logf("%s: cache --json median %s, its QMP exchange alone %s (ratio %.2f, target <= 1.5, < 25 ms), the same commands read as lines only %s (tool/floor %.2f)",
		qemuName(b), mt, mq, float64(mt)/float64(mq), mf, float64(mt)/float64(mf))
}

// BenchmarkCheckAll50VMs: `check --all --json` on a node with 50 running VMs
// of 4 disks each (real QEMU processes), next to the sum of the QMP
// exchanges it makes done one after another. Target: under 1 s.
func BenchmarkCheckAll50VMs(b *testing.B) {
	const vms = topBenchVMs
	n := benchNode50(b, 500, "", "discard=on,", nil)
	bin := buildBinary(b)
	var tool, bare []time.Duration
	for i := 0; i < b.N+2; i++ {
		t0 := time.Now()
		out, err := exec.Command(bin, "--root", n.Root, "--json", "check", "--all").Output()
		if err != nil || !strings.Contains(string(out), `"vms": 50`) {
			b.Fatalf("check: %v %.300s", err, out)
		}
		tool = append(tool, time.Since(t0))
		var sum time.Duration
		for v := 0; v < vms; v++ {
			t0 := time.Now()
			err := qmp.Do(context.Background(), n.Paths.QMPSocket(500+v), 5*time.Second, func(s qmp.Session) error {
				for _, c := range []string{"query-block", "x-debug-query-block-graph"} {
					if _, err := s.Exec(c, nil); err != nil {
						return err
					}
				}
				if _, err := s.Exec("query-named-block-nodes", map[string]any{"flat": true}); err != nil {
					return err
				}
				for d := 0; d < 4; d++ {
					if _, err := s.Exec("qom-get", map[string]any{"path": sf("/machine/peripheral/scsi%d", d), "property": "write-cache"}); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			sum += time.Since(t0)
		}
		bare = append(bare, sum)
	}
	mt, mq := median(tool[2:]), median(bare[2:])
	b.ReportMetric(float64(mt.Microseconds())/1000, "tool-ms")
	b.ReportMetric(float64(mq.Microseconds())/1000, "qmp-sum-ms")
	b.Logf("%s: check --all --json on %d VMs x 4 disks: median %s; the QMP exchanges one after another: %s (target < 1 s)", qemuName(b), vms, mt, mq)
}
