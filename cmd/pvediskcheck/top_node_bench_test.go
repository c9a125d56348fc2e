package main

import (
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
)

// topBenchVMs is the node top's benchmarks sample: 50 running VMs (real
// QEMU) of 4 raw disks each on local, VirtIO SCSI single with iothreads.
const topBenchVMs = 50

// topBenchNode starts topBenchVMs VMs, VMIDs 600-649, each config with
// extra after its ostype line (agent: 1 for the guest agent's benchmarks);
// started, when non-nil, is called with the node and each VMID once it runs.
func topBenchNode(b *testing.B, extra string, started func(n *fakenode.Node, id int)) *fakenode.Node {
	b.Helper()
	n := fakenode.NewT(b)
	for i := 0; i < topBenchVMs; i++ {
		id := 600 + i
		var cfg strings.Builder
		cfg.WriteString("ostype: l26\n" + extra + "scsihw: virtio-scsi-single\n")
		for d := 0; d < 4; d++ {
			vol := sf("%d/vm-%d-disk-%d.raw", id, id, d)
			n.MustVolume(b, "local", vol, 16<<20)
			cfg.WriteString(sf("scsi%d: local:%s,iothread=1,size=16M\n", d, vol))
		}
		n.WriteConfig(id, cfg.String())
		n.MustStart(b, id, fakenode.ArgvOptions{})
		if started != nil {
			started(n, id)
		}
	}
	return n
}
