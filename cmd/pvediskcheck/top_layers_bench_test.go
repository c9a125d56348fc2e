package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// BenchmarkTopLayers50VMs: the built binary's own CPU per second while
// `top --json` samples 50 running VMs of 4 disks each at 1 Hz (real QEMU,
// VirtIO SCSI single with iothreads, agent: 1), with --layers and without
// it, in turn in the same run. Each VM's guest agent is a fake in this
// process (no guest: fakenode starts none) that places the four disks on
// sda-sdd through the VM's real query-pci and serves a /proc/diskstats
// whose counters move at every read; its CPU is this process's, not the
// tool's. Target: --layers at most 1.3x top without it; one agent exchange
// per VM and sample (counted: the fakes' connections).
func BenchmarkTopLayers50VMs(b *testing.B) {
	const vms = topBenchVMs
	var reads atomic.Int64
	conns := make([]*qmptest.Agent, 0, vms)
	n := topBenchNode(b, "agent: 1\n", func(n *fakenode.Node, id int) { conns = append(conns, fakeGuest(b, n, id, &reads)) })
	bin := buildBinary(b)
	samples := max(b.N, 10)
	b.ResetTimer()
	run := func(layers bool) (pct float64, cpu, wall time.Duration, exchanges int64) {
		args := []string{"--root", n.Root, "--json", "top", "--interval", "1s", "--count", sf("%d", samples)}
		if layers {
			args = append(args, "--layers")
		}
		var before int64
		for _, a := range conns {
			before += int64(a.Conns())
		}
		cmd := exec.Command(bin, args...)
		t0 := time.Now()
		out, err := cmd.Output()
		wall = time.Since(t0)
		if err != nil || strings.Count(string(out), "\n") != samples || !strings.Contains(string(out), `"vmid":649`) {
			b.Fatalf("top %v: %v %.300s", args, err, out)
		}
		if layers != strings.Contains(string(out), `"layers":{"verdict"`) {
			b.Fatalf("top %v: layers in the output: %v", args, !layers)
		}
		if layers && !strings.Contains(string(out), `"guest":{"requests":`) {
			b.Fatalf("top --layers: no guest layer read: %.2000s", out)
		}
		for _, a := range conns {
			exchanges += int64(a.Conns())
		}
		cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		return float64(cpu) / float64(wall) * 100, cpu, wall, exchanges - before
	}
	offPct, offCPU, offWall, offX := run(false)
	onPct, onCPU, onWall, onX := run(true)
	b.StopTimer()
	b.ReportMetric(offPct, "top-cpu-%")
	b.ReportMetric(onPct, "layers-cpu-%")
	b.ReportMetric(onPct/offPct, "layers/top")
	// Both runs ask each agent for its devices once (2 exchanges); what
	// --layers adds is the diskstats reads, one per VM and sample after.
	b.ReportMetric(float64(onX-offX)/float64(vms*samples), "diskstats-exchanges/VM/sample")
	b.Logf("%s: top --json at 1 Hz, %d VMs x 4 disks, %d samples: without --layers %.2f %% of one core (%s CPU in %s, %d agent exchanges: the device lookup), with --layers %.2f %% (%s in %s, %d agent exchanges for %d VM samples); layers/top %.2f (target <= 1.3)",
		qemuName(b), vms, samples, offPct, offCPU.Round(time.Millisecond), offWall.Round(time.Millisecond), offX,
		onPct, onCPU.Round(time.Millisecond), onWall.Round(time.Millisecond), onX, vms*(samples+1), onPct/offPct)
}

// fakeGuest puts a fake guest agent on VM id's agent socket: it places
// scsi0-3 on sda-sdd at the PCI addresses the VM's QEMU reports for
// virtioscsi0-3, and serves a /proc/diskstats whose counters move at each
// read (100 reads and 100 writes of 2 ms each per disk).
func fakeGuest(b *testing.B, n *fakenode.Node, id int, reads *atomic.Int64) *qmptest.Agent {
	b.Helper()
	var pci map[string]string
	err := qmp.Do(context.Background(), n.Paths.QMPSocket(id), 5*time.Second, func(s qmp.Session) error {
		r, err := s.Exec("query-pci", nil)
		pci = guestdisk.PCIDevices(r)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	var disks []string
	for addr, qdev := range pci {
		if !strings.HasPrefix(qdev, "virtioscsi") {
			continue
		}
		var bus, slot, fn int
		if _, err := fmt.Sscanf(addr, "%x:%x.%x", &bus, &slot, &fn); err != nil {
			b.Fatal(err)
		}
		k := strings.TrimPrefix(qdev, "virtioscsi")
		dev := "/dev/sd" + string(rune('a'+k[0]-'0'))
		disks = append(disks, sf(`{"name": %q, "partition": false, "address": {"bus-type": "scsi", "bus": 0, "target": 0, "unit": %s, "pci-controller": {"domain": 0, "bus": %d, "slot": %d, "function": %d}, "dev": %q}}`, dev, k, bus, slot, fn, dev))
	}
	a := qmptest.NewAgent(b)
	lookup := qmptest.AgentReplies(map[string]string{"guest-get-disks": "[" + strings.Join(disks, ",") + "]", "guest-get-fsinfo": "[]"})
	var k atomic.Int64
	a.Handle = func(w net.Conn, cmd string, req gjson.Result) {
		switch cmd {
		case "guest-file-open":
			fmt.Fprint(w, `{"return": 1000}`+"\n")
		case "guest-file-read":
			reads.Add(1)
			i := k.Add(1)
			var text strings.Builder
			for d := 0; d < 4; d++ {
				fmt.Fprintf(&text, "   8      %d sd%c %d 0 %d %d %d 0 %d %d 1 %d %d 0 0 0 0 %d %d\n", 16*d, 'a'+d, 100*i, 800*i, 200*i, 100*i, 800*i, 200*i, 400*i, 400*i, i, i)
			}
			fmt.Fprintf(w, `{"return": {"count": %d, "buf-b64": %q, "eof": true}}`+"\n", text.Len(), base64.StdEncoding.EncodeToString([]byte(text.String())))
		case "guest-file-close":
			fmt.Fprint(w, `{"return": {}}`+"\n")
		default:
			lookup(w, cmd, req)
		}
	}
	if err := os.Symlink(a.Sock(), n.Paths.QGASocket(id)); err != nil {
		b.Fatal(err)
	}
	return a
}
