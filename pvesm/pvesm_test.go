package pvesm

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/internal/fakerun"
)

// statusOld and statusNew are `pvesm status` as PVE::CLI::pvesm prints it
// ($print_status: "%-${maxlen}s %10s %10s %15s %15s %15s %8s" for the header,
// "%15d" KiB and "% 7.2f%%" per row, "% 8s" N/A for a disabled storage):
// libpve-storage-perl before 9.0.14, and from 9.0.14 on, whose header says
// "(KiB)" (pve-storage commit 10e47fc). The rows are laid out as the printf
// formats lay them out; the storages are a drbd (LINSTOR) plugin storage,
// a TrueNAS-style NFS share, a thin pool, an unreachable NFS mount and a
// disabled one.
const statusOld = `Name              Type     Status           Total            Used       Available        %
drbdpool          drbd     active      1048576000       398458880       650117120   38.00%
local              dir     active        71017632        18229560        49134852   25.67%
local-lvm      lvmthin     active       164864000       106502144        58361856   64.60%
nas                nfs   inactive               0               0               0    0.00%
old-zfs        zfspool   disabled               0               0               0      N/A
`

const statusNew = `Name              Type     Status     Total (KiB)      Used (KiB) Available (KiB)        %
drbdpool          drbd     active      1048576000       398458880       650117120   38.00%
hdd-backup         dir     active       976727036       976727036               0  100.00%
`

func pct(f float64) *float64 { return &f }

func TestParseStatus(t *testing.T) {
	got, err := ParseStatus([]byte(statusOld))
	if err != nil {
		t.Fatal(err)
	}
	want := []Storage{
		{"drbdpool", "drbd", "active", 1048576000 * 1024, 398458880 * 1024, 650117120 * 1024, pct(38)},
		{"local", "dir", "active", 71017632 * 1024, 18229560 * 1024, 49134852 * 1024, pct(25.67)},
		{"local-lvm", "lvmthin", "active", 164864000 * 1024, 106502144 * 1024, 58361856 * 1024, pct(64.6)},
		{"nas", "nfs", "inactive", 0, 0, 0, pct(0)},
		{"old-zfs", "zfspool", "disabled", 0, 0, 0, nil},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("old header:\n got %+v\nwant %+v", got, want)
	}
	got, err = ParseStatus([]byte(statusNew))
	if err != nil || len(got) != 2 || got[0].UsedBytes != 398458880*1024 || *got[1].UsedPercent != 100 || got[1].AvailableBytes != 0 {
		t.Errorf("(KiB) header: %+v %v", got, err)
	}
	if got, err := ParseStatus([]byte("Name Type Status Total (KiB) Used (KiB) Available (KiB) %\n")); err != nil || len(got) != 0 {
		t.Errorf("header only: %+v %v", got, err)
	}
}

func TestParseStatusRefuses(t *testing.T) {
	for _, out := range []string{
		"",
		"storage 'x' does not exist\n",
		"Name Type Status Total Used %\n",
		"Name Type Status Total Used Available %\nlocal dir active 1 2 3\n",
		"Name Type Status Total Used Available %\nlocal dir active 1 2 x 3.00%\n",
		"Name Type Status Total Used Available %\nlocal dir active 1 -2 3 3.00%\n",
		"Name Type Status Total Used Available %\nlocal dir active 1 2 3 3.00\n",
		"Name Type Status Total Used Available %\nlocal dir active 1 2 3 -3.00%\n",
		"Name Type Status Total Used Available %\nlocal dir active 99999999999999999 2 3 3.00%\n",
	} {
		if got, err := ParseStatus([]byte(out)); err == nil || !errors.Is(err, ErrParse) {
			t.Errorf("%q: %+v %v", out, got, err)
		}
	}
}

func TestParsePath(t *testing.T) {
	if p, err := ParsePath([]byte("/dev/drbd/by-res/vm-100-disk-1/0\n")); err != nil || p != "/dev/drbd/by-res/vm-100-disk-1/0" {
		t.Errorf("%q %v", p, err)
	}
	for _, out := range []string{"", "\n", "/a\n/b\n", "/a\x00b"} {
		if _, err := ParsePath([]byte(out)); !errors.Is(err, ErrParse) {
			t.Errorf("%q: %v", out, err)
		}
	}
	if got := PathArgv("drbd:vm-1-disk-0"); !reflect.DeepEqual(got, []string{"pvesm", "path", "drbd:vm-1-disk-0"}) {
		t.Error(got)
	}
	if got := strings.Join(StatusArgv("drbdpool"), " "); got != "pvesm status --storage drbdpool" {
		t.Error(got)
	}
	if got := strings.Join(StatusArgv(""), " "); got != "pvesm status" {
		t.Error(got)
	}
}

func FuzzParseStatus(f *testing.F) {
	f.Add([]byte(statusOld))
	f.Add([]byte(statusNew))
	f.Fuzz(func(t *testing.T, out []byte) {
		rows, err := ParseStatus(out)
		if err != nil {
			if !errors.Is(err, ErrParse) {
				t.Fatalf("%v is no ErrParse", err)
			}
			return
		}
		for _, r := range rows {
			if r.Name == "" || r.TotalBytes < 0 || r.UsedBytes < 0 || r.AvailableBytes < 0 || r.UsedPercent != nil && *r.UsedPercent < 0 {
				t.Fatalf("%+v", r)
			}
		}
	})
}

// TestParseErrorsSayWhere: each refusal names the line of pvesm's output it
// stopped at (the header is line 1) and what was wrong, exactly; the KiB
// bound is 2^53-1, the largest whose bytes fit an int64 (2^53 KiB once
// overflowed to a negative size: the bound was 2^53 inclusive).
func TestParseErrorsSayWhere(t *testing.T) {
	const h = "Name Type Status Total Used Available %\n"
	for _, c := range []struct{ out, want string }{
		{h + "local dir active 1 2 3\n", "pvesm status line 2 has 6 fields, want 7"},
		{h + "local dir active 1 2 3 3.00%\nnas nfs active 1 x 3 3.00%\n", "pvesm status line 3: \"x\" is not a KiB count"},
		{h + "\nnas nfs active 1 2 3 3\n", "pvesm status line 3: \"3\" is not a percentage"},
		{h + "a dir active 9007199254740992 2 3 3.00%\n", "pvesm status line 2: \"9007199254740992\" is not a KiB count"},
		{h + "a dir active 1 2 3 -0.01%\n", "pvesm status line 2: \"-0.01%\" is not a percentage"},
	} {
		if _, err := ParseStatus([]byte(c.out)); err == nil || err.Error() != ErrParse.Error()+": "+c.want {
			t.Errorf("%q: %v, want %q", c.out, err, c.want)
		}
	}
	got, err := ParseStatus([]byte(h + "a dir active 9007199254740991 0 0 0.00%\n"))
	if err != nil || got[0].TotalBytes != 9007199254740991*1024 || got[0].UsedBytes != 0 || *got[0].UsedPercent != 0 {
		t.Errorf("2^53-1 KiB, 0 used, 0.00%%: %+v %v", got, err)
	}
	for _, c := range []struct{ out, want string }{
		{"/a\n/b\n", "pvesm path printed 2 line(s), want one"},
		{"/a\n/b\n/c", "pvesm path printed 3 line(s), want one"},
		{"", "pvesm path printed 1 line(s), want one"},
	} {
		if _, err := ParsePath([]byte(c.out)); err == nil || err.Error() != ErrParse.Error()+": "+c.want {
			t.Errorf("%q: %v, want %q", c.out, err, c.want)
		}
	}
}

// TestRunsThroughTheRunner: Path and Status ask the runner with their
// argv, parse what it printed, and pass its failure on unchanged.
func TestRunsThroughTheRunner(t *testing.T) {
	r := &fakerun.Runner{Out: map[string]string{"pvesm path": "/dev/pve/vm-100-disk-0\n", "pvesm status": statusNew}}
	ctx := context.Background()
	if p, err := Path(ctx, r, "local-lvm:vm-100-disk-0"); err != nil || p != "/dev/pve/vm-100-disk-0" {
		t.Errorf("path: %q %v", p, err)
	}
	if s, err := Status(ctx, r, "drbdpool"); err != nil || len(s) != 2 {
		t.Errorf("status: %+v %v", s, err)
	}
	if got := strings.Join(r.Calls(), " | "); got != "pvesm path local-lvm:vm-100-disk-0 | pvesm status --storage drbdpool" {
		t.Errorf("calls %s", got)
	}
	gone := errors.New("exit status 255")
	fail := &fakerun.Runner{Err: map[string]error{"pvesm": gone}}
	if p, err := Path(ctx, fail, "x:y"); !errors.Is(err, gone) || p != "" {
		t.Errorf("path of a failing pvesm: %q %v", p, err)
	}
	if s, err := Status(ctx, fail, ""); !errors.Is(err, gone) || s != nil {
		t.Errorf("status of a failing pvesm: %+v %v", s, err)
	}
}
