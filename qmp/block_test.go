package qmp

import (
	"testing"

	"github.com/tidwall/gjson"
)

func TestParseBlockstatsFailedOps(t *testing.T) {
	// The counters of a recorded QEMU 7.2 device entry, with failures set.
	ret := gjson.Parse(`[{"device": "", "node-name": "drive-scsi1", "qdev": "scsi1", "stats": {
		"failed_rd_operations": 1, "failed_wr_operations": 2, "failed_flush_operations": 3, "failed_unmap_operations": 4,
		"invalid_rd_operations": 10, "invalid_wr_operations": 20, "invalid_flush_operations": 30, "invalid_unmap_operations": 40,
		"unmap_total_time_ns": 777, "wr_operations": 5}}]`)
	b := ParseBlockstats(ret)[0]
	if b.FailedOps != 10 || b.InvalidOps != 100 || b.UnmapTotalTimeNs != 777 || b.WrOps != 5 || b.ID != "scsi1" {
		t.Errorf("%+v", b)
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
