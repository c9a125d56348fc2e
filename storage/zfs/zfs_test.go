package zfs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/internal/fakerun"
	"github.com/pvediskcheck/pvediskcheck/node"
)

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fakeRunner answers `zfs get` with what each dataset's recorded lines say,
// in the order the datasets are asked for, as zfs does; a dataset it does
// not know fails the whole call, as zfs does (exit 1, "dataset does not
// exist").
type fakeRunner struct {
	lines map[string]string // dataset -> its recorded lines
	err   error
	calls [][]string
}

func (f *fakeRunner) Run(_ context.Context, argv ...string) ([]byte, error) {
	f.calls = append(f.calls, argv)
	if f.err != nil {
		return nil, f.err
	}
	var out strings.Builder
	for _, ds := range argv[6:] {
		l, ok := f.lines[ds]
		if !ok {
			return nil, errors.New("exit status 1: cannot open '" + ds + "': dataset does not exist")
		}
		out.WriteString(l)
	}
	return []byte(out.String()), nil
}

// runner is f as the node's runner: the one fake runner, answering zfs
// with f.
func (f *fakeRunner) runner() *fakerun.Runner {
	return &fakerun.Runner{Do: map[string]func([]string) ([]byte, error){
		"zfs": func(argv []string) ([]byte, error) { return f.Run(context.Background(), argv...) }}}
}

func i64(n int64) *int64 { return &n }

func TestParseRecorded(t *testing.T) {
	got, err := Parse([]byte(fixture(t, "get-sparse-512.txt") + fixture(t, "get-sync-always.txt")))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]*Zvol{
		"pool/test": {Dataset: "pool/test", VolblocksizeBytes: i64(512), Sync: "standard", Compression: "on", PrimaryCache: "all", Logbias: "latency", RefreservationBytes: i64(0), VolsizeBytes: i64(5497558138880)},
		"tank/vol":  {Dataset: "tank/vol", VolblocksizeBytes: i64(131072), Sync: "always", Compression: "lz4", PrimaryCache: "all", Logbias: "latency", RefreservationBytes: i64(0), VolsizeBytes: i64(214748364800)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if got["pool/test"].FlushesDropped() || got["pool/test"].CommitsEveryWrite() {
		t.Error("sync=standard: neither rule applies")
	}
	if got["tank/vol"].FlushesDropped() || !got["tank/vol"].CommitsEveryWrite() {
		t.Error("sync=always: every write commits, flushes are not dropped")
	}
}

func TestParseRefuses(t *testing.T) {
	for name, in := range map[string]string{
		"human-readable sizes (no -p)": "pool/test\tvolsize\t5T\n",
		"with the source column":       "pool/test\tvolsize\t5497558138880\tlocal\n",
		"spaces, not tabs":             "pool/test  volsize  5497558138880\n",
		"negative":                     "pool/test\tvolblocksize\t-512\n",
	} {
		if _, err := Parse([]byte(in)); !errors.Is(err, ErrParse) {
			t.Errorf("%s: err %v, want ErrParse", name, err)
		}
	}
	// A refreservation of 0 is how -p prints a sparse zvol's (libzfs
	// zfs_prop_get, literal); "none" is how it prints without -p: both are 0.
	for _, v := range []string{"0", "none"} {
		got, err := Parse([]byte("pool/test\trefreservation\t" + v + "\n"))
		if err != nil || got["pool/test"].RefreservationBytes == nil || *got["pool/test"].RefreservationBytes != 0 {
			t.Errorf("refreservation %s: got %+v, %v; want 0", v, got["pool/test"], err)
		}
	}
	// "-" is a property the dataset does not have: no number, no error.
	got, err := Parse([]byte("rpool/data\tvolsize\t-\n"))
	if err != nil || got["rpool/data"].VolsizeBytes != nil {
		t.Errorf("-: got %+v, %v", got["rpool/data"], err)
	}
}

func TestReadOneCallAndUnknown(t *testing.T) {
	disabled := strings.ReplaceAll(fixture(t, "get-sparse-512.txt"), "\tstandard", "\tdisabled") // as `zfs set sync=disabled pool/test` leaves it
	r := &fakeRunner{lines: map[string]string{"pool/test": disabled, "tank/vol": fixture(t, "get-sync-always.txt")}}
	got := Read(context.Background(), r.runner(), []string{"tank/vol", "pool/test"})
	if len(r.calls) != 1 {
		t.Fatalf("%d calls, want one for all zvols", len(r.calls))
	}
	if want := "zfs get -Hp -o name,property,value volblocksize,sync,compression,primarycache,logbias,refreservation,volsize tank/vol pool/test"; strings.Join(r.calls[0], " ") != want {
		t.Errorf("argv %q\nwant %q", strings.Join(r.calls[0], " "), want)
	}
	if got[0].Dataset != "tank/vol" || !got[0].CommitsEveryWrite() || got[1].Dataset != "pool/test" || !got[1].FlushesDropped() || got[1].Unknown != "" {
		t.Errorf("got %+v %+v", got[0], got[1])
	}

	// A zvol that is gone fails the call: every zvol is unknown, with zfs's
	// words, and no rule applies.
	r = &fakeRunner{lines: map[string]string{"pool/test": disabled}}
	got = Read(context.Background(), r.runner(), []string{"pool/test", "rpool/data/vm-100-disk-9"})
	for _, z := range got {
		if !strings.Contains(z.Unknown, "dataset does not exist") || z.FlushesDropped() || z.Sync != "" || z.VolblocksizeBytes != nil {
			t.Errorf("%+v: want unknown with the reason and nothing else", z)
		}
	}
	// zfs not installed.
	r = &fakeRunner{err: errors.New(`exec: "zfs": executable file not found in $PATH`)}
	if z := Read(context.Background(), r.runner(), []string{"pool/test"})[0]; !strings.Contains(z.Unknown, "executable file not found") || !strings.HasPrefix(z.Summary(), "zvol pool/test: properties unknown: `zfs get -Hp") {
		t.Errorf("%+v / %s", z, z.Summary())
	}
	// zfs answers but leaves one out.
	r = &fakeRunner{lines: map[string]string{"pool/test": disabled, "tank/vol": ""}}
	got = Read(context.Background(), r.runner(), []string{"pool/test", "tank/vol"})
	if got[0].Unknown != "" || got[1].Unknown != "`zfs get` printed nothing for tank/vol" {
		t.Errorf("%+v %+v", got[0], got[1])
	}
	if n := len(Read(context.Background(), r.runner(), nil)); n != 0 || len(r.calls) != 1 {
		t.Errorf("no zvols: %d results, %d calls; want nothing run", n, len(r.calls))
	}
}

// SyncFix is the command the cache view and check print for sync=disabled.
func TestSyncFix(t *testing.T) {
	if got, want := SyncFix("rpool/data/vm-100-disk-5"), "zfs set sync=standard rpool/data/vm-100-disk-5"; got != want {
		t.Errorf("%q, want %q", got, want)
	}
}

func TestSummary(t *testing.T) {
	got, _ := Parse([]byte(fixture(t, "get-sync-always.txt")))
	if s, want := got["tank/vol"].Summary(), "zvol tank/vol: volblocksize 128 KiB, sync always, compression lz4, primarycache all, logbias latency, refreservation none, volsize 200 GiB"; s != want {
		t.Errorf("%q\nwant %q", s, want)
	}
}

// pve-storage 9.1.4 verify_zfs_blocksize: the values its own error text
// names, the edges of its range and of its syntax.
func TestCheckBlocksize(t *testing.T) {
	for _, ok := range []string{"", "4k", "8k", "16k", "64k", "1m", "512", "16M", "16384", "128K", "16384k", "1024", "2097152", "16777216", "1024K"} {
		if err := CheckBlocksize(ok); err != nil {
			t.Errorf("%q: %v, want accepted", ok, err)
		}
	}
	for _, bad := range []string{"256", "511", "32m", "16385k", "3k", "12k", "0", "08k", "4kb", "4 k", "k", "-4k", "4g", "1.5m", "99999999999999999999k"} {
		if err := CheckBlocksize(bad); err == nil || !strings.Contains(err.Error(), "pve-storage refuses it") {
			t.Errorf("%q: %v, want refused", bad, err)
		}
	}
	// Which of the two rules refuses: the syntax, or the size of a number.
	for v, why := range map[string]string{
		"96k": "not a power of 2", "9": "not a power of 2", "1090k": "not a power of 2", "16777217": "not a power of 2",
		"08k": "not a positive number", "0": "not a positive number", "4kb": "not a positive number", "1.5m": "not a positive number", "/4k": "not a positive number", ":4k": "not a positive number",
	} {
		if err := CheckBlocksize(v); err == nil || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v, want %q", v, err, why)
		}
	}
}

func TestParseArcstats(t *testing.T) {
	a, err := ParseArcstats([]byte(fixture(t, "arcstats-openzfs2.txt")))
	if err != nil {
		t.Fatal(err)
	}
	if a.Hits != 174896434 || a.Misses != 18851609 || a.SizeBytes != 33743421984 || a.MaxBytes != 33676691456 {
		t.Errorf("%+v", a)
	}
	if a.HitPercent == nil || *a.HitPercent < 90.26 || *a.HitPercent > 90.28 {
		t.Errorf("hit percent %v, want 90.27", a.HitPercent)
	}
	if !a.HasDemandData || a.DemandDataHits != 94794984 || a.DemandDataMisses != 2513667 {
		t.Errorf("demand data %+v", a)
	}
	// No reads yet: no ratio. A file without the counters is refused; one
	// without the demand data counters has none.
	a, err = ParseArcstats([]byte("13 1 0x01 123 33456 7402060102 66478716886640\nname type data\nhits 4 0\nmisses 4 0\nsize 4 0\nc_max 4 1\n"))
	if err != nil || a.HitPercent != nil || a.HasDemandData {
		t.Errorf("%+v %v", a, err)
	}
	if _, err := ParseArcstats([]byte("name type data\nhits 4 1\n")); !errors.Is(err, ErrParse) {
		t.Errorf("err %v", err)
	}
}

// DataReads: the demand data reads between two reads of arcstats; none
// when either lacks the counters or they went backwards.
func TestDataReads(t *testing.T) {
	a := ARC{DemandDataHits: 100, DemandDataMisses: 10, HasDemandData: true}
	b := ARC{DemandDataHits: 900, DemandDataMisses: 10, HasDemandData: true}
	if h, m, ok := DataReads(a, b); !ok || h != 800 || m != 0 {
		t.Errorf("%d %d %v", h, m, ok)
	}
	if _, _, ok := DataReads(a, a); !ok {
		t.Error("no reads is a reading")
	}
	for name, c := range map[string][2]ARC{
		"reloaded":       {b, a},
		"misses back":    {{DemandDataMisses: 11, HasDemandData: true}, {DemandDataMisses: 10, HasDemandData: true}},
		"first without":  {{}, b},
		"second without": {a, {DemandDataHits: 900}},
	} {
		if _, _, ok := DataReads(c[0], c[1]); ok {
			t.Errorf("%s: read", name)
		}
	}
}

// ReadARC reads arcstats below the node's procfs; a node without the ZFS
// module (no such file) is an error, not a zero ARC.
func TestReadARC(t *testing.T) {
	root := t.TempDir()
	p := node.NewPaths(root, filepath.Join(root, "proc"), filepath.Join(root, "sys"))
	n := node.New(p, 0)
	if _, err := ReadARC(context.Background(), n); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("no zfs module: err %v, want not exist", err)
	}
	if err := os.MkdirAll(filepath.Dir(ArcstatsPath(p.Proc)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ArcstatsPath(p.Proc), []byte(fixture(t, "arcstats-openzfs2.txt")), 0o644); err != nil {
		t.Fatal(err)
	}
	a, err := ReadARC(context.Background(), n)
	if err != nil || a.Hits != 174896434 || a.MaxBytes != 33676691456 {
		t.Errorf("%+v %v", a, err)
	}
}
