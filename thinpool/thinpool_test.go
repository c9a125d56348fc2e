package thinpool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/internal/fakerun"
	"github.com/pvediskcheck/pvediskcheck/lvm"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

func pct(f float64) *float64 { return &f }
func i64(n int64) *int64     { return &n }

func TestUseLevel(t *testing.T) {
	for _, c := range []struct {
		p    *float64
		want Level
	}{
		{nil, LevelOK}, {pct(0), LevelOK}, {pct(79.99), LevelOK}, {pct(80), LevelWarning},
		{pct(89.99), LevelWarning}, {pct(90), LevelFailure}, {pct(100), LevelFailure},
	} {
		if got := UseLevel(c.p); got != c.want {
			t.Errorf("%v: %s, want %s", c.p, got, c.want)
		}
	}
}

// codesLevels lists a pool's warnings as "code/level".
func codesLevels(ws []Warning) []string {
	out := []string{}
	for _, w := range ws {
		out = append(out, string(w.Code)+"/"+string(w.Level))
	}
	return out
}

// TestJudgeEdges: each threshold at the value below it, at it, and the
// exact set of warnings every time.
func TestJudgeEdges(t *testing.T) {
	const gib = 1 << 30
	base := func() Pool {
		return Pool{Storage: "local-lvm", Type: TypeLVMThin, Pool: "pve/data", SizeBytes: 100 * gib, Discards: "passdown",
			DataPercent: pct(10), MetadataPercent: pct(1), VirtualSumBytes: 50 * gib, OvercommitRatio: 0.5}
	}
	for _, c := range []struct {
		name string
		mod  func(*Pool)
		want []string
	}{
		{"nothing", func(*Pool) {}, []string{}},
		{"data 79.99", func(p *Pool) { p.DataPercent = pct(79.99) }, []string{}},
		{"data 80", func(p *Pool) { p.DataPercent = pct(80) }, []string{"pool-data-full/warning"}},
		{"data 89.99", func(p *Pool) { p.DataPercent = pct(89.99) }, []string{"pool-data-full/warning"}},
		{"data 90", func(p *Pool) { p.DataPercent = pct(90) }, []string{"pool-data-full/failure"}},
		{"metadata 79.99", func(p *Pool) { p.MetadataPercent = pct(79.99) }, []string{}},
		{"metadata 80", func(p *Pool) { p.MetadataPercent = pct(80) }, []string{"pool-metadata-full/warning"}},
		{"metadata 89.99", func(p *Pool) { p.MetadataPercent = pct(89.99) }, []string{"pool-metadata-full/warning"}},
		{"metadata 90", func(p *Pool) { p.MetadataPercent = pct(90) }, []string{"pool-metadata-full/failure"}},
		{"unknown use", func(p *Pool) { p.DataPercent, p.MetadataPercent = nil, nil }, []string{}},
		{"overcommit exactly 1.0", func(p *Pool) { p.VirtualSumBytes, p.OvercommitRatio = 100*gib, 1.0 }, []string{}},
		{"overcommit just above 1.0", func(p *Pool) { p.VirtualSumBytes, p.OvercommitRatio = 100*gib+1, 1.0000001 }, []string{"overcommit/warning"}},
		{"discards ignore", func(p *Pool) { p.Discards = "ignore" }, []string{"pool-ignores-discards/warning"}},
		{"discards nopassdown", func(p *Pool) { p.Discards = "nopassdown" }, []string{}},
		{"all at once, in order", func(p *Pool) {
			p.DataPercent, p.MetadataPercent, p.OvercommitRatio, p.Discards = pct(95), pct(85), 2, "ignore"
		}, []string{"overcommit/warning", "pool-data-full/failure", "pool-metadata-full/warning", "pool-ignores-discards/warning"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := base()
			c.mod(&p)
			if got := codesLevels(Judge(&p)); !reflect.DeepEqual(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestJudgeTexts(t *testing.T) {
	p := Pool{Type: TypeLVMThin, Pool: "pve/data", SizeBytes: 512 << 20, DataPercent: pct(91.5), MetadataPercent: pct(85),
		VirtualSumBytes: 1 << 30, SnapshotVirtualBytes: 256 << 20, OvercommitRatio: 2}
	ws := Judge(&p)
	want := []Warning{
		{CodeOvercommit, "its volumes total 1.0 GiB on a 0.5 GiB pool (2.0x), 0.2 GiB of it thin snapshots (each can come to hold its full size): writes fail for every guest on it once the pool fills",
			"lvextend -L +1G pve/data (or move disks to other storage, or delete old snapshots)", LevelWarning},
		{CodeDataFull, "data at 91.50 % (warning from 80 %, failure from 90 %): at 100 % the pool stops every write of every volume on it",
			"trim the guests (pvediskcheck discard VMID --trim), delete old snapshots, or grow the pool (lvextend -L +SIZE pve/data)", LevelFailure},
		{CodeMetadataFull, "metadata at 85.00 % (warning from 80 %, failure from 90 %): a pool whose metadata fills up can be damaged",
			"lvextend --poolmetadatasize +SIZE pve/data", LevelWarning},
	}
	if !reflect.DeepEqual(ws, want) {
		t.Errorf("got\n%+v\nwant\n%+v", ws, want)
	}
	// Without snapshots the share is not mentioned; a ZFS pool grows
	// differently.
	z := Pool{Type: TypeZFSPool, Pool: "rpool/data", SizeBytes: 10 << 30, VirtualSumBytes: 15 << 30, OvercommitRatio: 1.5, DataPercent: pct(95)}
	ws = Judge(&z)
	if len(ws) != 2 || strings.Contains(ws[0].Text, "snapshots") || ws[0].Fix != "add space to the ZFS pool (zpool add, or larger disks) holding rpool/data (or move disks to other storage, or delete old snapshots)" ||
		!strings.Contains(ws[1].Fix, "add space to the ZFS pool") {
		t.Errorf("zfs: %+v", ws)
	}
}

// TestJudgeDiscardOff: VMs' volumes with discard off from 1 GiB or from 10 %
// of the pool; not containers, unused disks or discard=on.
func TestJudgeDiscardOff(t *testing.T) {
	p := Pool{SizeBytes: 20 << 30, Volumes: []Volume{
		{Name: "big", VMID: 1, Guest: GuestVM, Disk: "scsi0", VirtualBytes: LargeVolumeBytes, AllocatedBytes: i64(1 << 20), Discard: DiscardIgnore},
		{Name: "under", VMID: 1, Guest: GuestVM, Disk: "scsi1", VirtualBytes: LargeVolumeBytes - 1, Discard: DiscardIgnore},
		{Name: "on", VMID: 1, Guest: GuestVM, Disk: "scsi2", VirtualBytes: 8 << 30, Discard: DiscardOn},
		{Name: "ct", VMID: 2, Guest: GuestCT, Disk: "rootfs", VirtualBytes: 8 << 30, Discard: DiscardNA},
		{Name: "left", Guest: GuestUnreferenced, VirtualBytes: 8 << 30, Discard: DiscardNA},
	}}
	ws := Judge(&p)
	if len(ws) != 1 || ws[0].Code != CodeDiscardOff || ws[0].Text != "VM 1 scsi0 (big, 1.0 MiB allocated of 1.00 GiB) has discard off: what its guest trims never returns to the pool" ||
		ws[0].Fix != "pvediskcheck discard 1 scsi0 (shows the qm set that turns it on)" {
		t.Errorf("%+v", ws)
	}
	// A small pool: 10 % of it is large, 1 byte less is not.
	small := Pool{SizeBytes: 1000, Volumes: []Volume{
		{Name: "a", Guest: GuestVM, VirtualBytes: 100, Discard: DiscardIgnore},
		{Name: "b", Guest: GuestVM, VirtualBytes: 99, Discard: DiscardIgnore},
	}}
	if ws := Judge(&small); len(ws) != 1 || !strings.Contains(ws[0].Text, "(a,") {
		t.Errorf("small pool: %+v", ws)
	}
}

func TestPoolLevelAndFailing(t *testing.T) {
	for _, c := range []struct {
		d, m *float64
		want Level
	}{
		{pct(10), pct(10), LevelOK}, {pct(85), pct(10), LevelWarning}, {pct(10), pct(85), LevelWarning},
		{pct(90), pct(10), LevelFailure}, {pct(10), pct(90), LevelFailure}, {pct(85), pct(95), LevelFailure}, {nil, nil, LevelOK},
	} {
		p := Pool{DataPercent: c.d, MetadataPercent: c.m}
		if got := p.Level(); got != c.want {
			t.Errorf("%v/%v: %s, want %s", c.d, c.m, got, c.want)
		}
		r := Report{Pools: []Pool{{}, p}}
		if r.Failing() != (c.want == LevelFailure) {
			t.Errorf("%v/%v: Failing %v", c.d, c.m, r.Failing())
		}
	}
}

func lvmthin(props ...string) *qemuserver.Storage {
	s := &qemuserver.Storage{ID: "local-lvm", Type: TypeLVMThin, Props: map[string]string{"vgname": "pve"}}
	for i := 0; i+1 < len(props); i += 2 {
		s.Props[props[i]] = props[i+1]
	}
	return s
}

// TestFromLVS on lvm's Lab 37 fixture (format-derived, see
// lvm/testdata/README.md): pool pve/data 14 GiB at 65.69 %, a read-only
// thin snapshot of vm-370-disk-0, and no thinpool line in storage.cfg (a
// default install: "data").
func TestFromLVS(t *testing.T) {
	b, err := os.ReadFile("../lvm/testdata/format-lab370-active.json")
	if err != nil {
		t.Fatal(err)
	}
	rep, err := lvm.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	uses := Uses{}
	uses.addVM(370, map[string]string{"scsi0": "local-lvm:vm-370-disk-0,discard=on,size=8G", "ide2": "local-lvm:vm-370-cloudinit,media=cdrom"})
	p, err := FromLVS(lvmthin(), rep, uses)
	if err != nil {
		t.Fatal(err)
	}
	var sum, snaps int64
	var names []string
	for _, l := range rep.Volumes("pve", "data") {
		sum += l.SizeBytes
		if l.IsSnapshot() {
			snaps += l.SizeBytes
		} else {
			names = append(names, l.Name)
		}
	}
	if p.Pool != "pve/data" || p.SizeBytes != 15032385536 || *p.DataPercent != 65.69 || p.Discards != "passdown" || p.ChunkSizeBytes != 65536 ||
		p.VirtualSumBytes != sum || p.SnapshotVirtualBytes != 8589934592 || snaps != p.SnapshotVirtualBytes || p.OvercommitRatio != float64(sum)/15032385536 {
		t.Errorf("pool %+v (sum %d)", p, sum)
	}
	if len(p.Volumes) != len(names) {
		t.Errorf("volumes %d, want %d (snapshots are not volumes)", len(p.Volumes), len(names))
	}
	byName := map[string]Volume{}
	for _, v := range p.Volumes {
		byName[v.Name] = v
	}
	if v := byName["vm-370-disk-0"]; v.Guest != GuestVM || v.VMID != 370 || v.Disk != "scsi0" || v.Discard != DiscardOn || !reflect.DeepEqual(v.Snapshots, []string{"snap_vm-370-disk-0_before"}) {
		t.Errorf("vm-370-disk-0 %+v", v)
	}
	if v := byName["vm-370-cloudinit"]; v.Discard != DiscardNA || v.Disk != "ide2" {
		t.Errorf("cloud-init %+v", v)
	}
	if v := byName["vm-100-disk-0"]; v.Guest != GuestUnreferenced || v.VMID != 100 || v.Discard != DiscardNA || v.Snapshots == nil || *v.AllocatedBytes != 4817235456 {
		t.Errorf("vm-100-disk-0 %+v %d", v, *v.AllocatedBytes)
	}
	for i := 1; i < len(p.Volumes); i++ {
		a, b := p.Volumes[i-1].AllocatedBytes, p.Volumes[i].AllocatedBytes
		if a != nil && b != nil && *a < *b || a == nil && b != nil {
			t.Errorf("not sorted by allocation at %d: %s before %s", i, p.Volumes[i-1].Name, p.Volumes[i].Name)
		}
	}
	if _, err := FromLVS(lvmthin("thinpool", "other"), rep, nil); err == nil || !strings.Contains(err.Error(), "pve/other of storage local-lvm is not in lvs's report") {
		t.Errorf("missing pool: %v", err)
	}
	if _, err := FromLVS(lvmthin("thinpool", "root"), rep, nil); err == nil {
		t.Error("a linear LV taken for a thin pool")
	}
}

// TestFromZFS: the zfspool report from zfs get/list output
// (alloc/testdata/format-zfs-*.txt, format-derived: no ZFS here). Both
// snapshots count toward overcommit, the one without a volsize with its
// zvol's.
func TestFromZFS(t *testing.T) {
	s := &qemuserver.Storage{ID: "local-zfs", Type: TypeZFSPool, Props: map[string]string{"pool": "rpool/data", "sparse": "1"}}
	b, err := os.ReadFile("../alloc/testdata/format-zfs-list.txt")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := alloc.ParseZFSList(b)
	if err != nil {
		t.Fatal(err)
	}
	uses := Uses{}
	uses.addVM(370, map[string]string{"scsi0": "local-zfs:vm-370-disk-0,size=32G"})
	p := FromZFS(s, 20<<30, 10<<30, rows, uses)
	if p.SizeBytes != 30<<30 || *p.AllocatedBytes != 20<<30 || *p.DataPercent != 200.0/3 || len(p.Volumes) != 2 {
		t.Fatalf("%+v", p)
	}
	if p.VirtualSumBytes != 2*(32<<30)+2*(8<<30) || p.SnapshotVirtualBytes != 40<<30 || p.OvercommitRatio != float64(80)/30 {
		t.Errorf("sum %d snapshots %d ratio %v", p.VirtualSumBytes, p.SnapshotVirtualBytes, p.OvercommitRatio)
	}
	v := p.Volumes[0]
	if v.Name != "vm-370-disk-0" || v.Guest != GuestVM || v.Discard != DiscardIgnore || !reflect.DeepEqual(v.Snapshots, []string{"before"}) || *v.DataPercent != 37.5 {
		t.Errorf("%+v", v)
	}
	if p.Volumes[1].Guest != GuestUnreferenced || p.Volumes[1].VMID != 371 {
		t.Errorf("%+v", p.Volumes[1])
	}
	if got := codesLevels(p.Warnings); !reflect.DeepEqual(got, []string{"overcommit/warning", "discard-off/warning"}) {
		t.Errorf("warnings %v", got)
	}
	// An empty pool: no percent, no ratio.
	e := FromZFS(s, 0, 0, nil, nil)
	if e.DataPercent != nil || e.OvercommitRatio != 0 || len(e.Volumes) != 0 || e.Volumes == nil {
		t.Errorf("empty %+v", e)
	}
}

func TestParseCTVolumes(t *testing.T) {
	got := ParseCTVolumes([]byte("arch: amd64\nrootfs: local-lvm:vm-101-disk-0,size=8G\nmp0: local-zfs:subvol-101-disk-1,mp=/srv,size=4G\nmp1: volume=local:101/vm-101-disk-2.raw,mp=/x\nmemory: 512\nunused0: local-lvm:vm-101-disk-3\nmpx: nope\n[snap]\nmp2: local-lvm:vm-101-disk-9\n"))
	want := []CTVolume{{"rootfs", "local-lvm:vm-101-disk-0"}, {"mp0", "local-zfs:subvol-101-disk-1"}, {"mp1", "local:101/vm-101-disk-2.raw"}, {"unused0", "local-lvm:vm-101-disk-3"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v", got)
	}
}

// tree writes a node root: files by path below it.
func tree(t *testing.T, files map[string]string) node.Paths {
	t.Helper()
	root := t.TempDir()
	for p, body := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return node.NewPaths(root, "", "")
}

func TestLoadUses(t *testing.T) {
	p := tree(t, map[string]string{
		"etc/pve/qemu-server/370.conf": "efidisk0: local-lvm:vm-370-disk-0,efitype=4m,size=4M\nscsi0: local-lvm:vm-370-disk-1,discard=on,size=8G\nscsi1: local-lvm:vm-370-disk-2,size=8G\nide2: local:iso/debian.iso,media=cdrom\nide0: local-lvm:vm-370-cloudinit,media=cdrom\nvirtio0: /dev/sdb\nsata0: local-lvm:vm-370-disk-5,iothread=1\nunused0: local-lvm:vm-370-disk-3\ntpmstate0: local-lvm:vm-370-disk-4,size=4M,version=v2.0\n[snap]\nscsi5: local-lvm:vm-370-disk-9\n",
		"etc/pve/qemu-server/371.conf": "this is not a config\n",
		"etc/pve/qemu-server/x.conf":   "scsi0: local-lvm:vm-1-disk-0\n",
		"etc/pve/lxc/101.conf":         "rootfs: local-lvm:vm-101-disk-0,size=8G\n",
		"etc/pve/lxc/bad.conf":         "rootfs: local-lvm:vm-999-disk-0\n",
	})
	u, notes := LoadUses(context.Background(), node.New(p, 0))
	want := map[string]Use{
		"vm-370-disk-0":    {370, GuestVM, "efidisk0", DiscardNA},
		"vm-370-disk-1":    {370, GuestVM, "scsi0", DiscardOn},
		"vm-370-disk-2":    {370, GuestVM, "scsi1", DiscardIgnore},
		"vm-370-cloudinit": {370, GuestVM, "ide0", DiscardNA},
		"vm-370-disk-3":    {370, GuestVM, "unused0", DiscardNA},
		"vm-370-disk-4":    {370, GuestVM, "tpmstate0", DiscardNA},
		"vm-101-disk-0":    {101, GuestCT, "rootfs", DiscardNA},
	}
	if !reflect.DeepEqual(u["local-lvm"], want) || len(u) != 1 {
		t.Errorf("uses\n got %+v\nwant %+v", u, want)
	}
	// 371's line is skipped as Proxmox skips it (issue 26 #3): said.
	if len(notes) != 1 || !strings.Contains(notes[0], `371.conf line 1: "this is not a config" is not a `) {
		t.Errorf("notes %v", notes)
	}
}

func fixture(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

const storageCfg = "dir: local\n\tpath /var/lib/vz\n\nlvmthin: local-lvm\n\tvgname pve\n\tthinpool data\n\nzfspool: local-zfs\n\tpool rpool/data\n\tsparse 1\n"

func TestMeasure(t *testing.T) {
	ctx := context.Background()
	lvs := fixture(t, "../lvm/testdata/format-lab370-active.json")
	zfsList := fixture(t, "../alloc/testdata/format-zfs-list.txt")
	lvmconfig := fixture(t, "../lvm/testdata/real-lvmconfig-default.txt")
	ok := func() *fakerun.Runner {
		return &fakerun.Runner{Out: map[string]string{"lvs": lvs, "lvmconfig": lvmconfig, "zfs get rpool/data": "used\t21474836480\navailable\t10737418240\n", "zfs list rpool/data": zfsList}}
	}
	p := tree(t, map[string]string{"etc/pve/storage.cfg": storageCfg, "etc/pve/qemu-server/370.conf": "scsi0: local-lvm:vm-370-disk-0,size=8G\n"})
	r := ok()
	rep, err := Measure(ctx, r.Node(node.New(p, 0)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Pools) != 2 || rep.Pools[0].Storage != "local-lvm" || rep.Pools[1].Storage != "local-zfs" || len(rep.Notes) != 0 {
		t.Fatalf("%+v", rep)
	}
	if r.Calls()[0] != strings.Join(lvm.Argv("pve"), " ") {
		t.Errorf("lvs not limited to the storages' volume groups: %s", r.Calls()[0])
	}
	if rep.Pools[0].Volumes[0].Guest == "" {
		t.Error("uses not loaded")
	}
	if rep, err := Measure(ctx, ok().Node(node.New(p, 0)), []string{"local-zfs"}); err != nil || len(rep.Pools) != 1 || rep.Pools[0].Type != TypeZFSPool {
		t.Errorf("named: %+v %v", rep, err)
	}
	for _, c := range []struct {
		name  string
		p     node.Paths
		r     *fakerun.Runner
		names []string
		code  exitcode.Code
		msg   string
	}{
		{"no storage.cfg", tree(t, map[string]string{"etc/pve/x": ""}), ok(), nil, exitcode.Usage, "storage.cfg: "},
		{"unknown storage", p, ok(), []string{"nope"}, exitcode.Usage, `no storage "nope"`},
		{"not a pool", p, ok(), []string{"local"}, exitcode.Usage, "is of type dir"},
		{"bad storage.cfg", tree(t, map[string]string{"etc/pve/storage.cfg": "garbage here\n"}), ok(), nil, exitcode.Usage, "cannot parse"},
		{"lvs fails", p, &fakerun.Runner{Err: map[string]error{"lvs": errors.New("boom")}}, nil, exitcode.Unreachable, "boom"},
		{"pool missing", tree(t, map[string]string{"etc/pve/storage.cfg": "lvmthin: thin\n\tvgname pve\n\tthinpool gone\n"}), ok(), nil, exitcode.Unreachable, "pve/gone"},
		{"zfs get fails", p, &fakerun.Runner{Out: map[string]string{"lvs": lvs}, Err: map[string]error{"zfs get rpool/data": errors.New("no zfs")}}, []string{"local-zfs"}, exitcode.Unreachable, "zfs get"},
		{"zfs list fails", p, &fakerun.Runner{Out: map[string]string{"zfs get rpool/data": "used\t1\navailable\t1\n"}, Err: map[string]error{"zfs list rpool/data": errors.New("no list")}}, []string{"local-zfs"}, exitcode.Unreachable, "zfs list"},
		{"zfs get garbage", p, &fakerun.Runner{Out: map[string]string{"zfs get rpool/data": "used 1\n"}}, []string{"local-zfs"}, exitcode.Unreachable, "cannot parse"},
		{"zfs list garbage", p, &fakerun.Runner{Out: map[string]string{"zfs get rpool/data": "used\t1\navailable\t1\n", "zfs list rpool/data": "x\n"}}, []string{"local-zfs"}, exitcode.Unreachable, "cannot parse"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Measure(ctx, c.r.Node(node.New(c.p, 0)), c.names)
			if exitcode.Of(err) != c.code || !strings.Contains(fmt.Sprint(err), c.msg) {
				t.Errorf("%v (exit %d), want exit %d with %q", err, exitcode.Of(err), c.code, c.msg)
			}
		})
	}
	// No pool storage at all: an empty report with a note, not an error.
	rep, err = Measure(ctx, ok().Node(node.New(tree(t, map[string]string{"etc/pve/storage.cfg": "dir: local\n\tpath /var/lib/vz\n"}), 0)), nil)
	if err != nil || len(rep.Pools) != 0 || rep.Pools == nil || len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "no lvmthin or zfspool storage") {
		t.Errorf("%+v %v", rep, err)
	}
	// The node's own runner: nothing run on an empty root.
	if _, err := Measure(ctx, node.New(node.NewPaths(t.TempDir(), "", ""), 0), nil); exitcode.Of(err) != exitcode.Usage {
		t.Errorf("Measure on an empty root: %v", err)
	}
}

// TestCache: one lvs run for every lvmthin storage however many VMs ask,
// at once; zfs per pool; errors are remembered, not retried.
func TestCache(t *testing.T) {
	ctx := context.Background()
	r := &fakerun.Runner{Out: map[string]string{"lvs": fixture(t, "../lvm/testdata/format-lab370-active.json"),
		"zfs get rpool/data": "used\t1073741824\navailable\t1073741824\n", "zfs list rpool/data": ""}}
	c := NewCache(r)
	s1, s2 := lvmthin(), lvmthin("thinpool", "data")
	s2.ID = "other"
	z := &qemuserver.Storage{ID: "local-zfs", Type: TypeZFSPool, Props: map[string]string{"pool": "rpool/data"}}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, s := range []*qemuserver.Storage{s1, s2, z} {
				if p, err := c.Pool(ctx, s); err != nil || p == nil {
					t.Errorf("%s: %v", s.ID, err)
				}
			}
		}()
	}
	wg.Wait()
	if n := len(r.Calls()); n != 3 {
		t.Errorf("%d commands, want lvs once and zfs get/list once: %v", n, r.Calls())
	}
	if r.Calls()[0] != strings.Join(lvm.Argv(), " ") && !strings.HasPrefix(strings.Join(r.Calls(), "|"), "zfs") {
		t.Errorf("check's lvs lists every volume group: %v", r.Calls())
	}
	if p, _ := c.Pool(ctx, s1); p.Pool != "pve/data" || len(p.Volumes) == 0 || p.Volumes[0].Guest != GuestUnreferenced {
		t.Errorf("%+v", p)
	}
	if _, err := c.Pool(ctx, &qemuserver.Storage{ID: "local", Type: "dir"}); err == nil {
		t.Error("a dir storage has no pool")
	}
	bad := &fakerun.Runner{Err: map[string]error{"lvs": errors.New("lvs broke")}}
	c = NewCache(bad)
	for i := 0; i < 2; i++ {
		if _, err := c.Pool(ctx, s1); err == nil || !strings.Contains(err.Error(), "lvs broke") {
			t.Errorf("lvs failing: %v", err)
		}
	}
	if _, err := c.Pool(ctx, s2); err == nil || len(bad.Calls()) != 1 {
		t.Errorf("lvs retried: %d calls, %v", len(bad.Calls()), err)
	}
	if _, err := NewCache(&fakerun.Runner{Out: map[string]string{"lvs": `{"report":[{"lv":[]}]}`}}).Pool(ctx, s1); err == nil || !strings.Contains(err.Error(), "not in lvs's report") {
		t.Errorf("missing pool: %v", err)
	}
}

func TestIsPool(t *testing.T) {
	for typ, want := range map[string]bool{"lvmthin": true, "zfspool": true, "lvm": false, "dir": false, "rbd": false, "zfs": false} {
		if got := IsPool(&qemuserver.Storage{Type: typ}); got != want {
			t.Errorf("%s: %v", typ, got)
		}
	}
	if IsPool(nil) {
		t.Error("nil storage is a pool")
	}
}

// TestEdges: equal allocations sort by name, unknown ones last; a zvol of
// size 0 has no percentage; a pool of size 0 makes no volume "large" by
// share; a line longer than bufio's default in an LXC config.
func TestEdges(t *testing.T) {
	p := Pool{Volumes: []Volume{
		{Name: "c", AllocatedBytes: i64(5)}, {Name: "z"}, {Name: "b", AllocatedBytes: i64(5)}, {Name: "a"}, {Name: "d", AllocatedBytes: i64(9)},
	}}
	p.finish()
	var names []string
	for _, v := range p.Volumes {
		names = append(names, v.Name)
	}
	if strings.Join(names, "") != "dbcaz" {
		t.Errorf("order %v", names)
	}
	s := &qemuserver.Storage{ID: "z", Type: TypeZFSPool, Props: map[string]string{"pool": "tank"}}
	z := FromZFS(s, 1, 1, []alloc.ZFSListRow{{Name: "tank/vm-1-disk-0", ReferencedBytes: 5}}, nil)
	if len(z.Volumes) != 1 || z.Volumes[0].DataPercent != nil {
		t.Errorf("%+v", z.Volumes)
	}
	empty := Pool{Volumes: []Volume{{Name: "small", Guest: GuestVM, VirtualBytes: 1 << 20, Discard: DiscardIgnore}}}
	if ws := Judge(&empty); len(ws) != 0 {
		t.Errorf("pool of size 0: %+v", ws)
	}
	long := "description: " + strings.Repeat("x", 100<<10) + "\nrootfs: local-lvm:vm-1-disk-0\n"
	if got := ParseCTVolumes([]byte(long)); len(got) != 1 {
		t.Errorf("after a long line: %+v", got)
	}
}
