package alloc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/fakerun"
	"github.com/pvediskcheck/pvediskcheck/lvm"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

func read(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func lvmthin() *qemuserver.Storage {
	return &qemuserver.Storage{ID: "local-lvm", Type: "lvmthin", Props: map[string]string{"vgname": "pve", "thinpool": "data"}}
}

func TestLVMThin(t *testing.T) {
	m := NewMeter((&fakerun.Runner{}).Record(t, "lvs", "../lvm/testdata/format-lab370-active.json"), 0)
	r, err := m.Measure(context.Background(), Volume{Storage: lvmthin(), VolName: "vm-370-disk-0"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Method != "lvs" || *r.VirtualBytes != 8<<30 || r.AllocatedBytes == nil || r.Pool == nil {
		t.Fatalf("%+v", r)
	}
	if r.Pool.Name != "pve/data" || r.Pool.Discards != "passdown" || r.Pool.ChunkSizeBytes != 65536 || *r.Pool.DataPercent != 65.69 {
		t.Errorf("pool %+v", r.Pool)
	}
	if len(r.Snapshots) != 1 || r.Snapshots[0] != "snap_vm-370-disk-0_before" {
		t.Errorf("snapshots %v", r.Snapshots)
	}
	// Missing volume: a clear error naming it, not a guess.
	_, err = m.Measure(context.Background(), Volume{Storage: lvmthin(), VolName: "vm-370-disk-9"})
	var ae *Error
	if !errors.As(err, &ae) || !errors.Is(err, ErrNotInReport) || !strings.Contains(err.Error(), "pve/vm-370-disk-9 (storage local-lvm) is not in lvs's report") {
		t.Errorf("missing volume: %v", err)
	}
	// lvs failing: the meter does not hide it.
	m = NewMeter(&fakerun.Runner{Err: map[string]error{"lvs": &node.CommandError{Argv: []string{"lvs"}, Status: 5, Stderr: "  Volume group \"pve\" not found\n"}}}, 0)
	_, err = m.Measure(context.Background(), Volume{Storage: lvmthin(), VolName: "vm-370-disk-0"})
	var le *lvm.Error
	if !errors.As(err, &le) || !strings.Contains(err.Error(), "status 5") {
		t.Errorf("lvs exit 5: %v", err)
	}
}

// TestRawFile measures a real sparse file: st_blocks, not its size.
func TestRawFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "vm-370-disk-1.raw")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 20); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(strings.Repeat("Z", 1<<20)), 8<<20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	dir := &qemuserver.Storage{ID: "local", Type: "dir", Props: map[string]string{"path": "/var/lib/vz"}}
	r, err := NewMeter(&fakerun.Runner{}, time.Second).Measure(context.Background(), Volume{Storage: dir, Path: p, Format: "raw"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Method != "st_blocks" || *r.VirtualBytes != 64<<20 || *r.AllocatedBytes != 1<<20 {
		t.Errorf("%+v virtual %d allocated %d", r, *r.VirtualBytes, *r.AllocatedBytes)
	}
	_, err = NewMeter(&fakerun.Runner{}, time.Second).Measure(context.Background(), Volume{Storage: dir, Path: p + ".gone", Format: "raw"})
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestZFS(t *testing.T) {
	st := &qemuserver.Storage{ID: "local-zfs", Type: "zfspool", Props: map[string]string{"pool": "rpool/data", "sparse": "1"}}
	m := NewMeter((&fakerun.Runner{}).
		Record(t, "zfs rpool/data/vm-370-disk-1", "testdata/format-zfs-get-zvol.txt").
		Record(t, "zfs rpool/data", "testdata/format-zfs-get-pool.txt"), 0)
	r, err := m.Measure(context.Background(), Volume{Storage: st, VolName: "vm-370-disk-1"})
	if err != nil {
		t.Fatal(err)
	}
	if *r.AllocatedBytes != 2147876864 || *r.VirtualBytes != 4<<30 || *r.SnapshotBytes != 1<<30 {
		t.Errorf("%+v", r)
	}
	if r.Pool.Name != "rpool/data" || r.Pool.SizeBytes != 100<<30 || *r.Pool.AllocatedBytes != 20<<30 || *r.Pool.DataPercent != 20 {
		t.Errorf("pool %+v", r.Pool)
	}
	if got := strings.Join(ZFSArgv("rpool/data/vm-370-disk-1", "volsize", "referenced"), " "); got != "zfs get -Hp -o property,value volsize,referenced rpool/data/vm-370-disk-1" {
		t.Errorf("argv %s", got)
	}
	if _, err := ParseZFSGet([]byte("referenced\t2.00G\n")); !errors.Is(err, ErrParse) {
		t.Errorf("human units: %v", err)
	}
}

func TestRBD(t *testing.T) {
	st := &qemuserver.Storage{ID: "ceph-ext", Type: "rbd", Props: map[string]string{"pool": "vms", "monhost": "10.0.0.1;10.0.0.2", "username": "pve"}}
	got := strings.Join(RBDArgv(st.ID, st.Props, "vm-370-disk-1"), " ")
	want := "rbd du --format json -p vms -m 10.0.0.1,10.0.0.2 --auth_supported cephx -n client.pve --keyring /etc/pve/priv/ceph/ceph-ext.keyring vm-370-disk-1"
	if got != want {
		t.Errorf("argv\n got %s\nwant %s", got, want)
	}
	m := NewMeter((&fakerun.Runner{}).Record(t, "rbd", "testdata/format-rbd-du.json"), 0)
	r, err := m.Measure(context.Background(), Volume{Storage: st, VolName: "vm-370-disk-1"})
	if err != nil {
		t.Fatal(err)
	}
	if *r.AllocatedBytes != 2155872256 || *r.VirtualBytes != 4<<30 || len(r.Snapshots) != 1 || r.Snapshots[0] != "before" || r.ResolutionBytes != 4<<20 {
		t.Errorf("%+v", r)
	}
	if _, err := m.Measure(context.Background(), Volume{Storage: st, VolName: "vm-371-disk-0"}); !errors.Is(err, ErrNotInReport) {
		t.Errorf("missing image: %v", err)
	}
	// A linked clone's volume names its base first (RBDPlugin.pm
	// parse_volname): rbd du is asked for the image, never the whole name.
	rec := (&fakerun.Runner{}).Record(t, "rbd", "testdata/format-rbd-du.json")
	r, err = NewMeter(rec, 0).Measure(context.Background(), Volume{Storage: st, VolName: "base-300-disk-0/vm-370-disk-1"})
	if err != nil {
		t.Fatalf("linked clone: %v", err)
	}
	calls := rec.Calls()
	if *r.AllocatedBytes != 2155872256 || len(calls) != 1 || !strings.HasSuffix(calls[0], " vm-370-disk-1") || strings.Contains(calls[0], "base-300") {
		t.Errorf("linked clone: %+v, calls %q", r, calls)
	}
}

// TestUnmeasured: types without a tool say so instead of guessing; thick
// LVM says why there is nothing to measure, with qcow2 volume chains
// (snapshot-as-volume-chain 1) what the chain adds.
func TestUnmeasured(t *testing.T) {
	for _, c := range []struct {
		typ   string
		props map[string]string
		want  string
	}{
		{"lvm", map[string]string{}, "thick LVM: the volume is fully allocated when created, and a trim returns nothing to the volume group (it may still reach the disk below)"},
		{"lvm", map[string]string{"snapshot-as-volume-chain": "1"}, "thick LVM with qcow2 volume chains: each volume and each snapshot is an LV allocated in full when created (sized by qemu-img measure), and a trim returns nothing to the volume group (qemu-server opens the qcow2 with discard-no-unref, so it keeps its clusters too; the trim may still reach the disk below)"},
		{"lvm", map[string]string{"snapshot-as-volume-chain": "0"}, "thick LVM: the volume is fully allocated when created, and a trim returns nothing to the volume group (it may still reach the disk below)"},
		{"iscsi", map[string]string{}, "storage type iscsi: no tool on this node reports a volume's allocation"},
		{"zfs", map[string]string{}, "storage type zfs: no tool on this node reports a volume's allocation"},
		{"drbd", map[string]string{}, "storage type drbd: no tool on this node reports a volume's allocation"},
	} {
		st := &qemuserver.Storage{ID: "s", Type: c.typ, Props: c.props}
		r, err := NewMeter(&fakerun.Runner{}, 0).Measure(context.Background(), Volume{Storage: st, VolName: "vm-100-disk-0.qcow2", Format: "qcow2"})
		if err != nil || r.AllocatedBytes != nil || r.Method != "none" || r.Unmeasured != c.want {
			t.Errorf("%s %v: %+v %v", c.typ, c.props, r, err)
		}
	}
}

// TestParseEdges: zero sizes are sizes, one below is refused, in each
// tool's reader; an empty pool has no fill percentage; a meter without a
// timeout stats with its default (it does not time out at once); qcow2's
// qemu-img failing or printing garbage is the tool's error.
func TestParseEdges(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{`{"virtual-size": 0, "actual-size": 0}`, true},
		{`{"virtual-size": -1, "actual-size": 0}`, false},
		{`{"virtual-size": 0, "actual-size": -1}`, false},
		{`{"virtual-size": 1}`, false},
	} {
		if _, _, err := ParseQemuImgInfo([]byte(c.in)); c.ok != (err == nil) {
			t.Errorf("qemu-img %s: %v", c.in, err)
		}
	}
	if p, err := ParseZFSGet([]byte("referenced\t0\nvolsize\t-\nrefreservation\tnone\n")); err != nil || len(p) != 1 || p["referenced"] != 0 {
		t.Errorf("zfs 0, -, none: %v %v", p, err)
	}
	if _, err := ParseZFSGet([]byte("referenced\t-1\n")); !errors.Is(err, ErrParse) {
		t.Errorf("zfs -1: %v", err)
	}
	for _, c := range []struct {
		prov, used string
		ok         bool
	}{{"0", "0", true}, {"-1", "0", false}, {"0", "-1", false}} {
		in := `{"images":[{"name":"vm-1-disk-0","provisioned_size":` + c.prov + `,"used_size":` + c.used + `}]}`
		if _, _, _, err := ParseRBDDu([]byte(in), "vm-1-disk-0"); c.ok != (err == nil) {
			t.Errorf("rbd %s/%s: %v", c.prov, c.used, err)
		}
	}
	st := &qemuserver.Storage{ID: "local-zfs", Type: "zfspool", Props: map[string]string{"pool": "rpool/data"}}
	empty := NewMeter(&fakerun.Runner{Out: map[string]string{
		"zfs rpool/data/vm-1-disk-0": "referenced\t0\n", "zfs rpool/data": "used\t0\navailable\t0\n"}}, 0)
	if r, err := empty.Measure(context.Background(), Volume{Storage: st, VolName: "vm-1-disk-0"}); err != nil || r.Pool == nil || r.Pool.SizeBytes != 0 || r.Pool.DataPercent != nil {
		t.Errorf("empty pool: %+v %v", r.Pool, err)
	}
	p := filepath.Join(t.TempDir(), "f.raw")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if st, err := NewMeter(&fakerun.Runner{}, 0).stat(p); err != nil || st.Size != 1 {
		t.Errorf("stat without a timeout: %+v %v", st, err)
	}
	dir := &qemuserver.Storage{ID: "local", Type: "dir", Props: map[string]string{"path": "/var/lib/vz"}}
	for name, r := range map[string]*fakerun.Runner{
		"fails":   {Err: map[string]error{"qemu-img": errors.New("exit status 1")}},
		"garbage": {Out: map[string]string{"qemu-img": "qemu-img: Could not open\n"}},
	} {
		_, err := NewMeter(r, time.Second).Measure(context.Background(), Volume{Storage: dir, Path: p, Format: "qcow2"})
		var ae *Error
		if !errors.As(err, &ae) || ae.What != "qemu-img" {
			t.Errorf("qemu-img %s: %v", name, err)
		}
	}
}
