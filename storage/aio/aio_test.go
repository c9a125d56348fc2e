package aio

import "testing"

// TestIOUringHazard follows Drive.pm storage_allows_io_uring_default case by
// case, including the storages next to each hazard that have none.
func TestIOUringHazard(t *testing.T) {
	for _, c := range []struct {
		typ          string
		krbd, direct bool
		want         string
	}{
		{"rbd", true, false, "io_uring with cache mode writeback or writethrough on krbd will hang"},
		{"rbd", true, true, ""},
		{"rbd", false, false, ""},
		{"lvm", false, true, "io_uring with cache mode writeback or writethrough on LVM will hang, without cache only sometimes"},
		{"lvm", false, false, "io_uring with cache mode writeback or writethrough on LVM will hang, without cache only sometimes"},
		{"lvmthin", false, false, ""},
		{"cifs", false, true, "io_uring causes problems when used with CIFS since kernel 5.15"},
		{"nfs", false, true, ""},
		{"dir", false, false, ""},
		{"", false, false, ""},
	} {
		if got := IOUringHazard(c.typ, c.krbd, c.direct); got != c.want {
			t.Errorf("%s krbd=%v direct=%v: %q, want %q", c.typ, c.krbd, c.direct, got, c.want)
		}
	}
}
