package main

import (
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
)

// topBenchVMs is the size of the node top's and check --all's benchmarks
// sample: 50 running VMs (real QEMU) of 4 raw disks each on local, VirtIO
// SCSI single with iothreads.
const topBenchVMs = 50

// topBenchNode starts top's benchmark node: topBenchVMs VMs, VMIDs
// 600-649, each config with extra after its ostype line (agent: 1 for the
// guest agent's benchmarks); started, when non-nil, is called with the
// node and each VMID once it runs.
func topBenchNode(b *testing.B, extra string, started func(n *fakenode.Node, id int)) *fakenode.Node {
	return benchNode50(b, 600, extra, "", started)
}

// benchNode50 starts topBenchVMs VMs from VMID first on, each config with
// head after its ostype line and each drive line with drive before its
// size.
func benchNode50(b *testing.B, first int, head, drive string, started func(n *fakenode.Node, id int)) *fakenode.Node {
	b.Helper()
	n := fakenode.NewT(b)
	for i := 0; i < topBenchVMs; i++ {
		id := first + i
		var cfg strings.Builder
		cfg.WriteString("ostype: l26\n" + head + "scsihw: virtio-scsi-single\n")
		for d := 0; d < 4; d++ {
			vol := sf("%d/vm-%d-disk-%d.raw", id, id, d)
			n.MustVolume(b, "local", vol, 16<<20)
			cfg.WriteString(sf("scsi%d: local:%s,iothread=1,%ssize=16M\n", d, vol, drive))
		}
		n.WriteConfig(id, cfg.String())
		n.MustStart(b, id, fakenode.ArgvOptions{})
		if started != nil {
			started(n, id)
		}
	}
	return n
}
