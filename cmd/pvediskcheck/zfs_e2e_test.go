//go:build integration

package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/cache"
	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/flush"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/queues"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// TestZFSAndQueuesRealQEMU: a real QEMU with a zfspool disk (the zvol
// stand-in: a loop device at /dev/zvol/<pool>/<name>, reported by the zfs
// double in zfs's -Hp format from its real size and recorded properties)
// and VirtIO disks with and without queues=. cache shows the zvol's
// properties and the queue counts QEMU reports; check turns sync=disabled
// into its error and sync=always into its info, with the one zfs call; a
// zfs that fails leaves both unchecked with its words; a config queues=
// that differs from the running one is drift in cache and check.
func TestZFSAndQueuesRealQEMU(t *testing.T) {
	n := fakenode.NewT(t)
	n.UseDoubles(t)
	if err := n.WriteStorageCfg(n.ZFSStorage("local-zfs", false) + "\tblocksize 12k\n"); err != nil {
		t.Fatal(err)
	}
	ds := n.ZPool() + "/vm-380-disk-0"
	n.MustVolume(t, "local-zfs", "vm-380-disk-0", 64<<20)
	n.MustVolume(t, "local", "380/vm-380-disk-1.raw", 64<<20)
	conf := "name: zfs380\nscsihw: virtio-scsi-single\nscsi0: local-zfs:vm-380-disk-0,queues=2,size=64M\nvirtio0: local:380/vm-380-disk-1.raw,size=64M\n"
	if err := n.WriteConfig(380, conf); err != nil {
		t.Fatal(err)
	}
	n.MustStart(t, 380, fakenode.ArgvOptions{Extra: []string{"-smp", "3"}})

	// What the two additions cost per VM, measured (logged, not asserted):
	// the one zfs call (here the double, a Go program) and the one QMP
	// exchange of the queue counts.
	nd := node.New(n.Paths, 5*time.Second)
	v, err := vm.LoadNode(context.Background(), nd, 380)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		t0 := time.Now()
		disk.Of(v, v.Disks).Fill(context.Background(), nd, disk.ZFS, disk.Options{})
		t1 := time.Now()
		queues.ForVM(context.Background(), v, v.Disks, 5*time.Second, true)
		t.Logf("zfs get (1 call, 1 zvol): %s; queue counts (1 QMP exchange): %s", t1.Sub(t0), time.Since(t1))
	}

	var view cache.View
	start := time.Now()
	runJSON(t, n, &view, "cache", "380")
	t.Logf("cache 380 (zfs get + queues exchange included): %s", time.Since(start))
	disks := map[string]cache.Disk{}
	for _, d := range view.Disks {
		disks[d.ID] = d
	}
	s0, v0 := disks["scsi0"], disks["virtio0"]
	if z := s0.ZFS; z == nil || z.Dataset != ds || z.Unknown != "" || *z.VolsizeBytes != 64<<20 || *z.VolblocksizeBytes != 16384 || z.Sync != "standard" || *z.RefreservationBytes != 64<<20 {
		t.Errorf("scsi0 zfs %+v", s0.ZFS)
	}
	if v0.ZFS != nil {
		t.Errorf("virtio0 is no zvol: %+v", v0.ZFS)
	}
	// QEMU resolves the VirtIO Block default to one queue per vCPU (3);
	// the SCSI controller runs the config's 2.
	if q := s0.Queues; q == nil || *q.Configured != 2 || !q.Applied || *q.CommandLine != 2 || q.Running == nil || *q.Running != 2 {
		t.Errorf("scsi0 queues %+v", s0.Queues)
	}
	if q := v0.Queues; q == nil || q.Configured != nil || q.CommandLine != nil || q.Running == nil || *q.Running != 3 {
		t.Errorf("virtio0 queues %+v", v0.Queues)
	}
	if len(s0.Drift) != 0 || len(v0.Drift) != 0 {
		t.Errorf("drift %v %v", s0.Drift, v0.Drift)
	}
	out, _, _ := runCLI(t, "--root", n.Root, "cache", "380")
	for _, want := range []string{"zvol " + ds + ": volblocksize 16 KiB, sync standard, compression on, primarycache all, logbias latency, refreservation 64 MiB, volsize 64 MiB",
		"queues: running 2 (qom-get virtioscsi0 num_queues), command line 2, config 2", "queues: running 3 (qom-get virtio0 num-queues), command line default (one per vCPU), config not set"} {
		if !strings.Contains(out, want) {
			t.Errorf("cache text lacks %q:\n%s", want, out)
		}
	}

	// sync=disabled, as `zfs set` makes it: check's error with the fix;
	// the zfspool blocksize pve-storage refuses is named too.
	var rep check.Report
	mustZFS(t, n, ds, "sync", "disabled")
	runJSON(t, n, &rep, "check", "380")
	got := findingsByCode(rep.VMs[0])
	if f := got["zfs-sync-disabled"]; len(f) != 1 || f[0].Disk != "scsi0" || f[0].Fix != "zfs set sync=standard "+ds || f[0].Severity != check.Error {
		t.Errorf("zfs-sync-disabled %+v (notes %v)", f, rep.VMs[0].Notes)
	}
	if f := got["zfs-blocksize-invalid"]; len(f) != 1 || !strings.Contains(f[0].Message, `storage local-zfs (zfspool): blocksize "12k": pve-storage refuses it`) {
		t.Errorf("zfs-blocksize-invalid %+v", f)
	}
	runJSON(t, n, &view, "cache", "380")
	if d := view.Disks[0]; d.ID != "scsi0" || d.ZFS.Sync != "disabled" {
		t.Errorf("cache with sync=disabled: %+v", d.ZFS)
	}
	if out, _, _ := runCLI(t, "--root", n.Root, "cache", "380"); !strings.Contains(out, "sync=disabled: ZFS completes the guest's flushes without writing anything") {
		t.Errorf("cache text with sync=disabled:\n%s", out)
	}
	// flush knows it without measuring: ignored (exit 1), the reason naming
	// the property, with no flush in the window (no guest).
	var fr flush.Result
	if _, code := runJSON(t, n, &fr, "flush", "380", "scsi0", "--for", "1s"); code != 1 || len(fr.Verdicts) != 1 || fr.Verdicts[0].Verdict != flush.Ignored ||
		!strings.Contains(fr.Verdicts[0].Reason, "zfs get: the zvol "+ds+" has sync=disabled") || !strings.Contains(fr.Verdicts[0].Reason, "known from the property, not measured: 0 flush(es)") {
		t.Errorf("flush: exit %d %+v", code, fr.Verdicts)
	}
	mustZFS(t, n, ds, "sync", "always")
	runJSON(t, n, &rep, "check", "380")
	got = findingsByCode(rep.VMs[0])
	if len(got["zfs-sync-disabled"]) != 0 || len(got["zfs-sync-always"]) != 1 || got["zfs-sync-always"][0].Severity != check.Info {
		t.Errorf("sync=always: %+v", rep.VMs[0].Findings)
	}
	// zfs failing: unknown with zfs's words, both rules not checked.
	if err := n.SetZFSFault("exit 1 cannot open '" + ds + "': dataset does not exist"); err != nil {
		t.Fatal(err)
	}
	runJSON(t, n, &rep, "check", "380")
	nc := strings.Join(codes(rep.VMs[0].NotChecked), ",")
	if !strings.Contains(nc, "zfs-sync-disabled,zfs-sync-always") || !strings.Contains(strings.Join(rep.VMs[0].Notes, "\n"), "dataset does not exist") {
		t.Errorf("zfs failing: not checked %v notes %v", nc, rep.VMs[0].Notes)
	}
	runJSON(t, n, &view, "cache", "380")
	if z := view.Disks[0].ZFS; view.Disks[0].ID != "scsi0" || z == nil || !strings.Contains(z.Unknown, "dataset does not exist") || z.Sync != "" {
		t.Errorf("cache with zfs failing: %+v", view.Disks[0].ZFS)
	}
	n.SetZFSFault("")

	// queues=4 set behind the running VM's back: drift.
	os.WriteFile(n.Paths.VMConfig(380), []byte(strings.Replace(conf, "queues=2", "queues=4", 1)), 0o644)
	runJSON(t, n, &view, "cache", "380")
	if d := view.Disks[0]; d.ID != "scsi0" || strings.Join(d.Drift, ";") != "queues: config 4, running 2" || *d.Queues.Running != 2 {
		t.Errorf("drift %v queues %+v", d.Drift, d.Queues)
	}
	runJSON(t, n, &rep, "check", "380")
	if f := findingsByCode(rep.VMs[0])["drift"]; len(f) != 1 || !strings.Contains(f[0].Message, "queues: config 4, running 2") {
		t.Errorf("check drift %+v", f)
	}
}

func mustZFS(t *testing.T, n *fakenode.Node, ds, prop, value string) {
	t.Helper()
	if err := n.SetZvolProperty(ds, prop, value); err != nil {
		t.Fatal(err)
	}
}

func codes(cs []check.Code) []string {
	var out []string
	for _, c := range cs {
		out = append(out, string(c))
	}
	return out
}
