package qmp

import (
	"testing"

	"github.com/tidwall/gjson"
)

func TestParseBlockstatsFailedOps(t *testing.T) {
	// The counters of a recorded QEMU 7.2 device entry, with failures set.
	ret := gjson.Parse(`[{"device": "", "parent": {"stats": {"rd_bytes": 999}}, "node-name": "drive-scsi1", "qdev": "scsi1", "stats": {
		"failed_rd_operations": 1, "failed_wr_operations": 2, "failed_flush_operations": 3, "failed_unmap_operations": 4,
		"invalid_rd_operations": 10, "invalid_wr_operations": 20, "invalid_flush_operations": 30, "invalid_unmap_operations": 40,
		"unmap_total_time_ns": 777, "wr_operations": 5, "rd_bytes": 11, "wr_bytes": 12, "rd_operations": 13, "flush_operations": 14,
		"flush_total_time_ns": 15, "rd_total_time_ns": 16, "wr_total_time_ns": 17, "unmap_operations": 18, "unmap_bytes": 19,
		"wr_highest_offset": 1000, "timed_stats": []}},
		{"device": "drive-virtio0", "node-name": "#block1", "stats": {}},
		{"device": "", "node-name": "e1", "stats": {}, "driver-specific": {"driver": "file", "discard-nb-ok": 2, "discard-nb-failed": 1, "discard-bytes-ok": 4096}}]`)
	all := ParseBlockstats(ret)
	want := BlockStats{ID: "scsi1", NodeName: "drive-scsi1", RdBytes: 11, WrBytes: 12, RdOps: 13, WrOps: 5, FlushOps: 14, FlushTotalTimeNs: 15,
		RdTotalTimeNs: 16, WrTotalTimeNs: 17, UnmapOps: 18, UnmapBytes: 19, UnmapTotalTimeNs: 777, FailedOps: 10, InvalidOps: 100}
	if all[0] != want {
		t.Errorf("ParseBlockstats =\n%+v\nwant\n%+v", all[0], want)
	}
	if all[1].ID != "virtio0" || all[2].ID != "e1" || !all[2].HasDriverSpecific || all[2].DiscardNbOK != 2 || all[2].DiscardNbFailed != 1 || all[2].DiscardBytesOK != 4096 {
		t.Errorf("%+v %+v", all[1], all[2])
	}
}

func TestParseDisks(t *testing.T) {
	// guest-get-disks as qemu-ga 7.2 answers it (QAPI GuestDiskInfo): a
	// disk with its address, its partition, a dm device without address.
	ret := gjson.Parse(`[{"name": "/dev/sda", "partition": false, "address": {"bus-type": "scsi", "bus": 0, "unit": 1,
		"pci-controller": {"bus": 0, "slot": 5, "domain": 0, "function": 0}, "dev": "/dev/sda", "target": 0}},
		{"name": "/dev/sda1", "partition": true, "dependencies": ["/dev/sda"]},
		{"name": "/dev/dm-0", "partition": false, "dependencies": ["/dev/sda1", "/dev/vda"]}]`)
	got := parseDisks(ret)
	if len(got) != 3 {
		t.Fatalf("%d disks", len(got))
	}
	if a := got[0].Address; got[0].Name != "/dev/sda" || got[0].Partition || a == nil || a.PCI != "0000:00:05.0" || a.Unit != 1 || a.BusType != "scsi" {
		t.Errorf("disk = %+v %+v", got[0], got[0].Address)
	}
	if !got[1].Partition || got[1].Address != nil || len(got[1].Dependencies) != 1 {
		t.Errorf("partition = %+v", got[1])
	}
	if got[2].Address != nil || len(got[2].Dependencies) != 2 || got[2].Dependencies[1] != "/dev/vda" {
		t.Errorf("dm = %+v", got[2])
	}
}
