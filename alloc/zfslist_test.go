package alloc

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestZFSList(t *testing.T) {
	if got := strings.Join(ZFSListArgv("rpool/data"), " "); got != "zfs list -Hp -r -t volume,snapshot -o name,volsize,referenced rpool/data" {
		t.Errorf("argv %s", got)
	}
	rows, err := ParseZFSList(read(t, "testdata/format-zfs-list.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want := []ZFSListRow{
		{"rpool/data", 0, 98304},
		{"rpool/data/vm-370-disk-0", 34359738368, 12884901888},
		{"rpool/data/vm-370-disk-0@before", 34359738368, 6442450944},
		{"rpool/data/vm-371-disk-0", 8589934592, 1073741824},
		{"rpool/data/vm-371-disk-0@old", 0, 1048576},
	}
	if !reflect.DeepEqual(rows, want) {
		t.Fatalf("rows\n got %+v\nwant %+v", rows, want)
	}
	if z, s, ok := rows[2].Snapshot(); !ok || z != "rpool/data/vm-370-disk-0" || s != "before" {
		t.Errorf("snapshot split %q %q %v", z, s, ok)
	}
	if _, _, ok := rows[1].Snapshot(); ok {
		t.Error("a zvol taken for a snapshot")
	}
	if rows, err := ParseZFSList([]byte("\n")); err != nil || len(rows) != 0 {
		t.Errorf("empty output: %v %v", rows, err)
	}
	for _, bad := range []string{
		"rpool/data/vm-1-disk-0\t8589934592",           // two fields
		"rpool/data/vm-1-disk-0\t8G\t1073741824",       // not -p
		"rpool/data/vm-1-disk-0\t8589934592\t1G",       // not -p
		"rpool/data/vm-1-disk-0 8589934592 1073741824", // spaces, not tabs
	} {
		if _, err := ParseZFSList([]byte(bad + "\n")); !errors.Is(err, ErrParse) {
			t.Errorf("%q: %v, want ErrParse", bad, err)
		}
	}
}
