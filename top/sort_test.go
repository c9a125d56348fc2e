package top

import (
	"testing"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

func order(rows []Disk) string {
	out := ""
	for _, r := range rows {
		out += r.Disk + " "
	}
	return out
}

func TestSort(t *testing.T) {
	mk := func(vmid int, id string, ord int, mod func(d *Disk)) Disk {
		d := Disk{VMID: vmid, Disk: id, order: ord}
		mod(&d)
		return d
	}
	rows := []Disk{
		mk(371, "a", 0, func(d *Disk) { d.ReadBps, d.ReadIOPS, d.ReadLatencyMs, d.QueueDepth = 100, 1, 9, 0.5 }),
		mk(370, "b", 1, func(d *Disk) {
			d.WriteBps, d.WriteIOPS, d.WriteLatencyMs, d.QueueDepth, d.LimitPct, d.ThreadCPUPct = 300, 50, 2, 3, f(99), f(10)
		}),
		mk(370, "c", 0, func(d *Disk) { d.ReadBps, d.WriteBps, d.WriteIOPS, d.LimitPct = 50, 50, 5, f(10) }),
		mk(370, "d", 2, func(d *Disk) { d.ReadBps, d.WriteBps, d.ReadIOPS, d.ThreadCPUPct = 60, 40, 10, f(80) }),
		mk(369, "e", 0, func(d *Disk) { d.LimitPct = f(0.5) }), // throttled, nearly idle: still above the unthrottled
		mk(372, "f", 0, func(d *Disk) { d.ReadBps, d.WriteBps = 200, 200 }),
	}
	for _, tc := range []struct {
		key  SortKey
		want string
	}{
		{SortBusy, "f b d c a e "}, // reads and writes together, then three at 100 B/s by IOPS (10, 5, 1), then idle
		{"", "f b d c a e "},
		{SortIOPS, "b d c a e f "},
		{SortLatency, "a b e c d f "}, // ties by VMID, then config order
		{SortQueue, "b a e c d f "},
		{SortLimit, "b c e d a f "}, // unthrottled last, by VMID and config order
		{SortCPU, "d b e c a f "},
		{SortVMID, "e c b d a f "},
	} {
		r := append([]Disk(nil), rows...)
		Sort(r, tc.key)
		if got := order(r); got != tc.want {
			t.Errorf("Sort(%q) = %s, want %s", tc.key, got, tc.want)
		}
	}
}

func TestParseSortKey(t *testing.T) {
	for _, k := range SortKeys {
		if got, err := ParseSortKey(string(k)); err != nil || got != k {
			t.Errorf("%s: %v %v", k, got, err)
		}
	}
	_, err := ParseSortKey("speed")
	if exitcode.Of(err) != exitcode.Usage || err.Error() != `--sort "speed": not a sort key (one of busy, iops, latency, queue, limit, cpu, vmid)` {
		t.Errorf("err = %v", err)
	}
}
