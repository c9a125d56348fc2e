package fio

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

func TestWarningUses(t *testing.T) {
	w := func(file, code, msg string) Warning { return Warning{File: file, Code: code, Message: msg} }
	s := &Summary{Groups: []Group{
		{Label: "zfs", Job: "rr4k", Dir: "read", Files: []string{"1", "2", "3"},
			Warnings: []Warning{w("1", WarnNoRamp, "no ramp"), w("2", WarnNoRamp, "no ramp"), w("3", WarnNoRamp, "no ramp"), w("1", WarnBuffered, "buffered")}},
		{Label: "zfs", Job: "mixed", Dir: "read", Files: []string{"4"},
			Warnings: []Warning{w("4", WarnNoRamp, "no ramp"), w("4", WarnBuffered, "buffered")}},
		{Label: "zfs", Job: "mixed", Dir: "write", Files: []string{"4"},
			Warnings: []Warning{w("4", WarnNoRamp, "no ramp"), w("4", WarnBuffered, "buffered other")}},
		{Job: "", Dir: "read", Files: []string{"5", "6"},
			Warnings: []Warning{w("5", WarnNoRamp, "no ramp"), w("6", WarnNoRamp, "no ramp"), w("5", WarnShortRuntime, "short")}},
	}}
	got := ""
	for _, u := range s.WarningUses() {
		got += u.Code + ": " + u.Message + " @ " + u.Where + "\n"
	}
	want := "buffered: buffered @ zfs/rr4k (1 of 3 runs), zfs/mixed (read)\n" +
		"buffered: buffered other @ zfs/mixed (write)\n" +
		"no-ramp: no ramp @ all runs\n" +
		"short-runtime: short @ - (1 of 2 runs)\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	// One group: named, not "all runs"; no warnings: none.
	one := &Summary{Groups: []Group{{Label: "a", Job: "b", Files: []string{"1"}, Warnings: []Warning{w("1", WarnSingleRun, "one run")}}}}
	if u := one.WarningUses(); len(u) != 1 || u[0].Where != "a/b" {
		t.Errorf("one group: %+v", u)
	}
	// One job with several workloads in a direction (real-world brahiam-*:
	// every run's job is "test"): each group named with its workload, not
	// "fio/test (read)" three times over.
	several := &Summary{Groups: []Group{
		{Label: "fio", Job: "test", Dir: "read", Workload: "randread 128k QD1 filesize=100M", Files: []string{"1"}, Warnings: []Warning{w("1", WarnShortRuntime, "short")}},
		{Label: "fio", Job: "test", Dir: "read", Workload: "read 128k QD1 filesize=100M", Files: []string{"2"}, Warnings: []Warning{w("2", WarnShortRuntime, "short")}},
		{Label: "fio", Job: "test", Dir: "write", Workload: "randrw 128k QD1 filesize=100M", Files: []string{"3"}},
	}}
	if u := several.WarningUses(); len(u) != 1 || u[0].Where != "fio/test (read, randread 128k QD1 filesize=100M), fio/test (read, read 128k QD1 filesize=100M)" {
		t.Errorf("several workloads: %+v", u)
	}
	if u := (&Summary{Groups: []Group{{Job: "x", Files: []string{"1"}}}}).WarningUses(); len(u) != 0 {
		t.Errorf("no warnings: %+v", u)
	}
}

func TestCompareSides(t *testing.T) {
	lab37 := filepath.Join(labDir, "lab37")
	sides, err := LoadSides("io_uring", "native", lab37, Options{GroupBy: GroupAuto})
	if err != nil {
		t.Fatal(err)
	}
	all := CompareSides("io_uring", "native", sides, nil)
	if all.A != "io_uring" || all.B != "native" || all.Metrics == nil || len(all.Metrics) != 0 || !all.Different || len(all.Rows) == 0 {
		t.Fatalf("all metrics: %+v", all)
	}
	b, _ := json.Marshal(all)
	if !strings.Contains(string(b), `"metrics_of_interest":[]`) || !strings.Contains(string(b), `"different":true`) || !strings.Contains(string(b), `"comparisons":[`) {
		t.Errorf("JSON: %s", b)
	}
	// VirtIO SCSI vs Block: IOPS and bandwidth within the noise, the mean
	// clat of random writes beyond it (Lab 37).
	scsi, err := LoadSides("scsi", "virtio-blk", lab37, Options{GroupBy: GroupAuto})
	if err != nil {
		t.Fatal(err)
	}
	if r := CompareSides("scsi", "virtio-blk", scsi, []string{"iops", "bw"}); r.Different || len(r.Rows) == 0 {
		t.Errorf("iops, bw: different %v, %d rows", r.Different, len(r.Rows))
	}
	if r := CompareSides("scsi", "virtio-blk", scsi, nil); !r.Different {
		t.Errorf("all metrics: clat differs")
	}
	iops := CompareSides("io_uring", "native", sides, []string{"iops"})
	if !iops.Different {
		t.Errorf("io_uring vs native IOPS: Lab 37 found them different: %+v", iops.Rows)
	}
}
