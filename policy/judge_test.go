package policy

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// loadVM lays VM vmid out below a fresh root with testdata's storage.cfg
// and user.cfg and loads it as check does. running: the VM runs what
// testdata/started-100.conf said when Proxmox started it (its recorded
// command line), whatever conf says now.
func loadVM(t *testing.T, vmid int, conf string, running bool) *vm.VM {
	t.Helper()
	root := t.TempDir()
	write := func(p string, b []byte) {
		t.Helper()
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"storage.cfg", "user.cfg"} {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		write("etc/pve/"+f, b)
	}
	write("etc/pve/qemu-server/"+strconv.Itoa(vmid)+".conf", []byte(conf))
	if running {
		if vmid != 100 {
			t.Fatal("the recorded command line is VM 100's")
		}
		b, err := os.ReadFile(filepath.Join("testdata", "started-100.argv.json"))
		if err != nil {
			t.Fatal(err)
		}
		var argv []string
		if err := json.Unmarshal(b, &argv); err != nil {
			t.Fatal(err)
		}
		write("var/run/qemu-server/100.pid", []byte("4242\n"))
		write("proc/4242/cmdline", []byte(strings.Join(argv, "\x00")+"\x00"))
	}
	n := node.New(node.NewPaths(root, "", ""), 2*time.Second)
	v, err := vm.Load(context.Background(), n, vmid)
	if err != nil {
		t.Fatal(err)
	}
	if v.Running != running {
		t.Fatalf("running %v, want %v", v.Running, running)
	}
	return v
}

func testSite(t *testing.T) Site {
	b, err := os.ReadFile(filepath.Join("testdata", "user.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	return Site{Pools: ParsePools(b)}
}

// conf100 has a disk of each kind and bus on each kind of storage.
const conf100 = `boot: order=scsi0;ide2
name: web
ostype: l26
scsihw: virtio-scsi-single
tags: Prod;web
scsi0: local-lvm:vm-100-disk-0,iothread=1,discard=on,size=32G
scsi1: ceph-fast:vm-100-disk-1,iothread=1,size=64G
virtio0: nas:100/vm-100-disk-2.qcow2,iothread=1,size=16G
sata0: local-lvm:vm-100-disk-3,size=8G
ide2: local:iso/debian.iso,media=cdrom
efidisk0: local-lvm:vm-100-disk-4,efitype=4m,size=4M
tpmstate0: local-lvm:vm-100-disk-5,size=4M,version=v2.0
`

func mustParse(t *testing.T, yaml string) *Policy {
	t.Helper()
	p, err := Parse("t.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// oneRule is a policy of one rule with this match and require.
func oneRule(match, require string) string {
	s := "rules:\n  - name: r\n"
	if match != "" {
		s += "    match: {" + match + "}\n"
	}
	return s + "    require: {" + require + "}\n"
}

// TestSelectors: which disks each selector picks, its absence as much as
// its presence (a selector not given selects every disk; no kind given
// selects disks, not CD-ROMs, EFI vars or TPM state).
func TestSelectors(t *testing.T) {
	site := testSite(t)
	at := func(vmid int) string { return strings.Replace(conf100, "vm-100-", "vm-"+strconv.Itoa(vmid)+"-", -1) }
	for _, c := range []struct {
		vmid  int
		match string
		want  string
	}{
		{100, "", "scsi0 scsi1 virtio0 sata0"},
		{100, "storage: local-lvm", "scsi0 sata0"},
		{100, "storage: ceph-*", "scsi1"},
		{100, "storage: [nas, ceph-fast]", "scsi1 virtio0"},
		{100, "storage: local-lv", ""},
		{100, "storage: local", ""}, // the ISO's storage, but the ISO is a CD-ROM
		{100, "storage: local, kind: cdrom", "ide2"},
		{100, "storage_type: rbd", "scsi1"},
		{100, "storage_type: lvmthin", "scsi0 sata0"},
		{100, "storage_type: [nfs, zfspool]", "virtio0"},
		{100, "storage_type: lvm", ""},
		{100, "tag: prod", "scsi0 scsi1 virtio0 sata0"}, // Prod in the config: tags compare without case
		{100, "tag: PROD", "scsi0 scsi1 virtio0 sata0"},
		{100, "tag: \"we*\"", "scsi0 scsi1 virtio0 sata0"},
		{100, "tag: db", ""},
		{100, "pool: prod", "scsi0 scsi1 virtio0 sata0"},
		{100, "pool: lab", ""},
		{100, "pool: \"p*\"", "scsi0 scsi1 virtio0 sata0"},
		{101, "pool: prod", "scsi0 scsi1 virtio0 sata0"}, // also listed in pool dup, later: the first pool keeps it
		{101, "pool: dup", ""},
		{500, "pool: dup", "scsi0 scsi1 virtio0 sata0"},
		{300, "pool: lab/gpu", "scsi0 scsi1 virtio0 sata0"},
		{300, "pool: lab", ""}, // a nested pool's VM is its own pool's, not the parent's
		{300, "pool: lab/*", "scsi0 scsi1 virtio0 sata0"},
		{150, "pool: \"*\"", ""}, // in no pool
		{150, "vmid: 150", "scsi0 scsi1 virtio0 sata0"},
		{150, "vmid: 150-200", "scsi0 scsi1 virtio0 sata0"},
		{150, "vmid: 151-200", ""},
		{150, "vmid: 100-150", "scsi0 scsi1 virtio0 sata0"},
		{150, "vmid: 100-149", ""},
		{150, "vmid: [100-149, 151]", ""},
		{150, "vmid: [100-149, 150]", "scsi0 scsi1 virtio0 sata0"},
		{100, "kind: cdrom", "ide2"},
		{100, "kind: [disk, cdrom]", "scsi0 scsi1 virtio0 sata0 ide2"},
		{100, "bus: scsi", "scsi0 scsi1"},
		{100, "bus: [sata, ide]", "sata0"},
		{100, "bus: ide, kind: cdrom", "ide2"},
		{100, "bus: virtio", "virtio0"},
		{100, "storage: local-lvm, bus: scsi", "scsi0"},
		{100, "storage: local-lvm, bus: virtio", ""},
		{100, "storage_type: rbd, tag: web, pool: prod, vmid: 100-199, kind: disk, bus: scsi", "scsi1"},
	} {
		p := mustParse(t, oneRule(c.match, "cache: none"))
		v := loadVM(t, c.vmid, at(c.vmid), false)
		var got []string
		for _, d := range v.Disks {
			if len(p.Selects(v, site, d)) > 0 {
				got = append(got, d.ID)
			}
		}
		// Disks in config order as Proxmox lists them: ide, sata, scsi, virtio.
		want := strings.Fields(c.want)
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("VM %d, match {%s}: %v, want %v", c.vmid, c.match, got, want)
		}
		if n := p.Judge(v, site).Rules; len(want) == 0 && len(n) != 0 || len(want) > 0 && (len(n) != 1 || n[0].Disks != len(want)) {
			t.Errorf("VM %d, match {%s}: counts %+v", c.vmid, c.match, n)
		}
	}
}

// violations judges one rule over conf (VM 100) and lists each violation
// as "disk setting: found" (places joined with '+', e.g. "scsi0 cache:
// writeback config").
func violations(t *testing.T, p *Policy, v *vm.VM) []string {
	t.Helper()
	res := p.Judge(v, testSite(t))
	var out []string
	for _, d := range v.Disks {
		for _, x := range res.Disks[d.ID] {
			var where []string
			for _, f := range x.Found {
				where = append(where, f.Value+" "+string(f.In))
			}
			out = append(out, d.ID+" "+string(x.Setting)+": "+strings.Join(where, "+"))
		}
	}
	return out
}

// TestRequirements: each requirement on a stopped VM's config, at the
// edges of its values: what holds, what breaks and how it is reported.
func TestRequirements(t *testing.T) {
	base := "scsihw: virtio-scsi-single\n"
	for _, c := range []struct {
		name, conf, require string
		want                string // "" for none
	}{
		{"cache default holds none", "scsi0: local-lvm:vm-100-disk-0,size=8G", "cache: none", ""},
		{"cache explicit none", "scsi0: local-lvm:vm-100-disk-0,cache=none,size=8G", "cache: none", ""},
		{"cache writeback", "scsi0: local-lvm:vm-100-disk-0,cache=writeback,size=8G", "cache: none", "scsi0 cache: writeback config"},
		{"cache default breaks writeback", "scsi0: local-lvm:vm-100-disk-0,size=8G", "cache: writeback", "scsi0 cache: none (default) config"},
		{"cache one of", "scsi0: local-lvm:vm-100-disk-0,cache=directsync,size=8G", "cache: [none, directsync]", ""},
		{"cache unsafe", "scsi0: local-lvm:vm-100-disk-0,cache=unsafe,size=8G", "cache: [none, directsync]", "scsi0 cache: unsafe config"},
		{"aio default io_uring", "scsi0: local-lvm:vm-100-disk-0,size=8G", "aio: io_uring", ""},
		{"aio default native on thick lvm", "scsi0: san-lvm:vm-100-disk-0,size=8G", "aio: io_uring", "scsi0 aio: native (default) config"},
		{"aio explicit", "scsi0: local-lvm:vm-100-disk-0,aio=threads,size=8G", "aio: [native, io_uring]", "scsi0 aio: threads config"},
		{"aio on librbd: none to judge", "scsi0: ceph-fast:vm-100-disk-0,size=8G", "aio: threads", ""},
		{"discard on", "scsi0: local-lvm:vm-100-disk-0,discard=on,size=8G", "discard: on", ""},
		{"discard missing", "scsi0: local-lvm:vm-100-disk-0,size=8G", "discard: on", "scsi0 discard: off config"},
		{"discard off wanted", "scsi0: local-lvm:vm-100-disk-0,discard=on,size=8G", "discard: off", "scsi0 discard: on config"},
		{"discard on a CD-ROM: none", "ide2: local:iso/debian.iso,media=cdrom", "discard: on", ""},
		{"iothread", "scsi0: local-lvm:vm-100-disk-0,iothread=1,size=8G", "iothread: yes", ""},
		{"iothread missing", "scsi0: local-lvm:vm-100-disk-0,size=8G", "iothread: yes", "scsi0 iothread: off config"},
		{"iothread ignored under lsi", "scsihw: lsi\nscsi0: local-lvm:vm-100-disk-0,iothread=1,size=8G", "iothread: yes", "scsi0 iothread: off config"},
		{"iothread on SATA", "sata0: local-lvm:vm-100-disk-0,size=8G", "iothread: yes", "sata0 iothread: off (SATA has no IO thread) config"},
		{"iothread unwanted", "virtio0: local-lvm:vm-100-disk-0,iothread=1,size=8G", "iothread: no", "virtio0 iothread: on config"},
		{"ssd", "scsi0: local-lvm:vm-100-disk-0,ssd=1,size=8G", "ssd: on", ""},
		{"ssd missing", "sata0: local-lvm:vm-100-disk-0,size=8G", "ssd: on", "sata0 ssd: off config"},
		{"ssd on VirtIO Block", "virtio0: local-lvm:vm-100-disk-0,size=8G", "ssd: on", "virtio0 ssd: off (VirtIO Block has no ssd emulation) config"},
		{"ssd unwanted", "scsi0: local-lvm:vm-100-disk-0,ssd=1,size=8G", "ssd: off", "scsi0 ssd: on config"},
		{"controller", "scsi0: local-lvm:vm-100-disk-0,size=8G", "controller: virtio-scsi-single", ""},
		{"controller default lsi", "scsihw: lsi\nscsi0: local-lvm:vm-100-disk-0,size=8G", "controller: virtio-scsi-single", "scsi0 controller: lsi config"},
		{"controller SATA", "sata0: local-lvm:vm-100-disk-0,size=8G", "controller: [virtio-scsi-single, virtio-blk]", "sata0 controller: sata config"},
		{"controller VirtIO Block", "virtio0: local-lvm:vm-100-disk-0,size=8G", "controller: [virtio-scsi-single, virtio-blk]", ""},
		{"at most: equal holds", "scsi0: local-lvm:vm-100-disk-0,mbps_wr=200,size=8G", "limits: {mbps_wr: {at_most: 200}}", ""},
		{"at most: below QEMU's byte holds", "scsi0: local-lvm:vm-100-disk-0,mbps_wr=200.0000001,size=8G", "limits: {mbps_wr: {at_most: 200}}", ""},
		{"at most: one byte more breaks", "scsi0: local-lvm:vm-100-disk-0,mbps_wr=200.000001,size=8G", "limits: {mbps_wr: {at_most: 200}}", "scsi0 limits.mbps_wr: 200 MiB/s config"},
		{"at most: more breaks", "scsi0: local-lvm:vm-100-disk-0,mbps_wr=201,size=8G", "limits: {mbps_wr: {at_most: 200}}", "scsi0 limits.mbps_wr: 201 MiB/s config"},
		{"at most: no limit breaks", "scsi0: local-lvm:vm-100-disk-0,size=8G", "limits: {mbps_wr: {at_most: 200}}", "scsi0 limits.mbps_wr: no limit config"},
		{"at most: the other direction is no limit", "scsi0: local-lvm:vm-100-disk-0,mbps_rd=10,size=8G", "limits: {mbps_wr: {at_most: 200}}", "scsi0 limits.mbps_wr: no limit config"},
		{"at most: the total holds a direction", "scsi0: local-lvm:vm-100-disk-0,mbps=150,size=8G", "limits: {mbps_wr: {at_most: 200}}", ""},
		{"at most: a total above", "scsi0: local-lvm:vm-100-disk-0,mbps=250,size=8G", "limits: {mbps_wr: {at_most: 200}}", "scsi0 limits.mbps_wr: 250 MiB/s (the total) config"},
		{"at most total: both directions add up", "scsi0: local-lvm:vm-100-disk-0,mbps_rd=50,mbps_wr=50,size=8G", "limits: {mbps: {at_most: 100}}", ""},
		{"at most total: their sum above", "scsi0: local-lvm:vm-100-disk-0,mbps_rd=50,mbps_wr=51,size=8G", "limits: {mbps: {at_most: 100}}", "scsi0 limits.mbps: 101 MiB/s (the sum of read and write) config"},
		{"at most total: one direction is no total", "scsi0: local-lvm:vm-100-disk-0,mbps_rd=50,size=8G", "limits: {mbps: {at_most: 100}}", "scsi0 limits.mbps: no limit config"},
		{"at least: equal holds", "scsi0: local-lvm:vm-100-disk-0,iops_rd=100,size=8G", "limits: {iops_rd: {at_least: 100}}", ""},
		{"at least: below breaks", "scsi0: local-lvm:vm-100-disk-0,iops_rd=99,size=8G", "limits: {iops_rd: {at_least: 100}}", "scsi0 limits.iops_rd: 99 IOPS config"},
		{"at least: no limit holds", "scsi0: local-lvm:vm-100-disk-0,size=8G", "limits: {iops_rd: {at_least: 100}}", ""},
		{"at least: a total below breaks", "scsi0: local-lvm:vm-100-disk-0,iops=50,size=8G", "limits: {iops_rd: {at_least: 100}}", "scsi0 limits.iops_rd: 50 IOPS (the total) config"},
		{"between: in", "scsi0: local-lvm:vm-100-disk-0,iops=500,size=8G", "limits: {iops: {at_least: 100, at_most: 1000}}", ""},
		{"between: above", "scsi0: local-lvm:vm-100-disk-0,iops=1001,size=8G", "limits: {iops: {at_least: 100, at_most: 1000}}", "scsi0 limits.iops: 1001 IOPS config"},
		{"between: no limit is above", "scsi0: local-lvm:vm-100-disk-0,size=8G", "limits: {iops: {at_least: 100, at_most: 1000}}", "scsi0 limits.iops: no limit config"},
		{"limits of a passed-through SCSI disk: none", "scsi0: /dev/sdb,scsiblock=1", "limits: {iops: {at_most: 1000}}", ""},
		{"backup off", "scsi0: local-lvm:vm-100-disk-0,backup=0,size=8G", "backup: off", ""},
		{"backup default on", "scsi0: local-lvm:vm-100-disk-0,size=8G", "backup: off", "scsi0 backup: on config"},
		{"backup wanted", "scsi0: local-lvm:vm-100-disk-0,backup=0,size=8G", "backup: on", "scsi0 backup: off config"},
		{"replicate default on", "scsi0: local-lvm:vm-100-disk-0,size=8G", "replicate: on", ""},
		{"replicate off", "scsi0: local-lvm:vm-100-disk-0,replicate=0,size=8G", "replicate: on", "scsi0 replicate: off config"},
		{"two requirements", "scsi0: local-lvm:vm-100-disk-0,cache=writeback,size=8G", "cache: none, discard: on", "scsi0 cache: writeback config|scsi0 discard: off config"},
	} {
		p := mustParse(t, oneRule("kind: [disk, cdrom]", c.require))
		v := loadVM(t, 100, base+c.conf+"\n", false)
		got := strings.Join(violations(t, p, v), "|")
		if got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// runningConf is VM 100's config now; the VM runs testdata/started-100.conf.
const runningConf = `boot: order=scsi0;ide2
cores: 2
memory: 2048
name: web
ostype: l26
scsihw: virtio-scsi-single
tags: prod;web
scsi0: local-lvm:vm-100-disk-0,discard=on,iothread=1,size=32G
scsi1: ceph-fast:vm-100-disk-1,iothread=1,size=64G
virtio0: nas:100/vm-100-disk-2.qcow2,iothread=1,mbps_wr=300,size=16G
sata0: local-lvm:vm-100-disk-3,size=8G
ide2: local:iso/debian.iso,media=cdrom

[PENDING]
virtio0: nas:100/vm-100-disk-2.qcow2,iothread=1,mbps_wr=500,size=16G
sata0: local-lvm:vm-100-disk-3,size=8G,backup=0
`

// TestPlaces: config, running VM and next start judged apart.
func TestPlaces(t *testing.T) {
	v := loadVM(t, 100, runningConf, true)
	site := testSite(t)
	for _, c := range []struct {
		match, require string
		want           string // "found places | holds places | next start?"
	}{
		// Running only: edited by hand since the start; a restart mends it.
		{"storage: local-lvm, bus: scsi", "cache: none", "writeback running | none (default) config | false none (default)"},
		{"storage: ceph-fast", "ssd: off", "on running | off config | false off"},
		// The config and running VM hold; [PENDING] breaks it.
		{"bus: virtio", "limits: {mbps_wr: {at_most: 400}}", "500 MiB/s pending | 300 MiB/s config, 300 MiB/s running | true"},
		{"bus: sata", "backup: on", "off pending | on config | true"},
		// The config breaks it, the running VM holds it.
		{"storage: local-lvm, bus: scsi", "cache: writeback", "none (default) config | writeback running | true"},
		// Everywhere.
		{"bus: virtio", "limits: {mbps_wr: {at_most: 100}}", "300 MiB/s config, 500 MiB/s pending, 300 MiB/s running |  | true"},
		// Nowhere.
		{"bus: scsi", "iothread: yes", ""},
	} {
		p := mustParse(t, oneRule(c.match, c.require))
		res := p.Judge(v, site)
		var got []string
		for _, d := range v.Disks {
			for _, x := range res.Disks[d.ID] {
				f := func(fs []Found) string {
					var s []string
					for _, f := range fs {
						s = append(s, f.Value+" "+string(f.In))
					}
					return strings.Join(s, ", ")
				}
				s := f(x.Found) + " | " + f(x.Holds) + " | " + strconv.FormatBool(x.NextStart)
				if x.NextValue != "" {
					s += " " + x.NextValue
				}
				got = append(got, s)
			}
		}
		if strings.Join(got, "\n") != c.want {
			t.Errorf("{%s} {%s}:\n got %q\nwant %q", c.match, c.require, strings.Join(got, "\n"), c.want)
		}
	}
	// The message says it.
	p := mustParse(t, oneRule("bus: scsi, storage: local-lvm", "cache: none"))
	x := p.Judge(v, site).Disks["scsi0"][0]
	if m := x.Message("t.yaml"); m != "rule r (t.yaml line 4): cache must be none; it is writeback in the running VM; the next start runs none (default), as the config says" {
		t.Errorf("message %q", m)
	}
	p = mustParse(t, oneRule("bus: virtio", "limits: {mbps_wr: {at_most: 400}}"))
	x = p.Judge(v, site).Disks["virtio0"][0]
	if m := x.Message("t.yaml"); m != "rule r (t.yaml line 4): limits.mbps_wr must be at most 400 MiB/s; it is 500 MiB/s pending for the next start ([PENDING]) (300 MiB/s in the config and in the running VM)" {
		t.Errorf("message %q", m)
	}
}

// TestPendingMendsStopped: a stopped VM whose [PENDING] already gives what
// the rule wants breaks nothing (its next start is all there is); a
// running one does until it restarts.
func TestPendingMendsStopped(t *testing.T) {
	conf := "scsihw: virtio-scsi-single\nscsi0: local-lvm:vm-100-disk-0,cache=writeback,size=8G\n\n[PENDING]\nscsi0: local-lvm:vm-100-disk-0,size=8G\n"
	p := mustParse(t, oneRule("", "cache: none"))
	if got := violations(t, p, loadVM(t, 100, conf, false)); len(got) != 0 {
		t.Errorf("stopped: %v", got)
	}
	// Running (the recorded start ran scsi0 with cache=writeback).
	run := strings.Replace(runningConf, "scsi0: local-lvm:vm-100-disk-0,discard=on,iothread=1,size=32G", "scsi0: local-lvm:vm-100-disk-0,cache=writeback,discard=on,iothread=1,size=32G", 1) +
		"scsi0: local-lvm:vm-100-disk-0,discard=on,iothread=1,size=32G\n"
	p = mustParse(t, oneRule("bus: scsi, storage: local-lvm", "cache: none"))
	if got := violations(t, p, loadVM(t, 100, run, true)); !slices.Equal(got, []string{"scsi0 cache: writeback config+writeback running"}) {
		t.Errorf("running: %v", got)
	}
}
