package limit

import (
	"reflect"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// TestLiveCommand: the command qemu-server sends, for both generations,
// with all 18 fields from the numbers (the set Lab 37 runs: mbps_wr=20 with
// a 40 MiB/s burst of 5 s, iops_rd=500).
func TestLiveCommand(t *testing.T) {
	want := Set{"mbps_wr": 20, "mbps_wr_max": 40, "bps_wr_max_length": 5, "iops_rd": 500}
	for _, tc := range []struct {
		blockdev bool
		method   Method
		json     string
	}{
		{true, QOMSet, `{"arguments":{"path":"throttle-drive-scsi1","property":"limits","value":{"bps-read":0,"bps-read-max":0,"bps-read-max-length":1,"bps-total":0,"bps-total-max":0,"bps-total-max-length":1,"bps-write":20971520,"bps-write-max":41943040,"bps-write-max-length":5,"iops-read":500,"iops-read-max":0,"iops-read-max-length":1,"iops-total":0,"iops-total-max":0,"iops-total-max-length":1,"iops-write":0,"iops-write-max":0,"iops-write-max-length":1}},"execute":"qom-set"}`},
		{false, BlockSetIOThrottle, `{"arguments":{"bps":0,"bps_max":0,"bps_max_length":1,"bps_rd":0,"bps_rd_max":0,"bps_rd_max_length":1,"bps_wr":20971520,"bps_wr_max":41943040,"bps_wr_max_length":5,"device":"drive-scsi1","iops":0,"iops_max":0,"iops_max_length":1,"iops_rd":500,"iops_rd_max":0,"iops_rd_max_length":1,"iops_wr":0,"iops_wr_max":0,"iops_wr_max_length":1},"execute":"block_set_io_throttle"}`},
	} {
		m, args, err := LiveCommand("scsi1", tc.blockdev, want)
		if err != nil || m != tc.method {
			t.Fatalf("blockdev=%v: %s, %v", tc.blockdev, m, err)
		}
		if got := CommandJSON(m, args); got != tc.json {
			t.Errorf("blockdev=%v:\n%s\nwant\n%s", tc.blockdev, got, tc.json)
		}
		fields := args
		if tc.blockdev {
			fields = args["value"].(map[string]any)
		}
		if n := len(fields); n != 18+map[bool]int{true: 0, false: 1}[tc.blockdev] {
			t.Errorf("blockdev=%v: %d fields", tc.blockdev, n)
		}
	}
	// Clearing sends every field too: qom-set merges, an omitted field
	// would keep its old value.
	_, args, _ := LiveCommand("virtio1", true, Set{})
	v := args["value"].(map[string]any)
	if len(v) != 18 || v["bps-write"] != int64(0) || v["iops-read-max-length"] != int64(1) || args["path"] != "throttle-drive-virtio1" {
		t.Errorf("clear: %v", args)
	}
}

func TestPersistArgv(t *testing.T) {
	d, err := qemuserver.ParseDrive("scsi1", "local-lvm:vm-370-disk-1,iothread=1,size=256M,mbps_rd=10.000,discard=on")
	if err != nil {
		t.Fatal(err)
	}
	const digest = "2f0e474206e67c9980d0540033eb4538ac20eb59"
	argv, err := PersistArgv(370, d, Set{"mbps_wr": 20, "iops_rd": 500, "mbps_rd": 0.5}, digest)
	// A key the line had keeps its place; new ones follow, sorted; the
	// digest of the config the line was read from goes with it.
	want := []string{"qm", "set", "370", "--scsi1", "local-lvm:vm-370-disk-1,iothread=1,size=256M,mbps_rd=0.5,discard=on,iops_rd=500,mbps_wr=20", "--digest", digest}
	if err != nil || !reflect.DeepEqual(argv, want) {
		t.Errorf("argv %q, %v\nwant %q", argv, err, want)
	}
	if d.Opts["mbps_rd"] != "10.000" || d.Opts["mbps_wr"] != "" {
		t.Errorf("PersistArgv changed the drive: %v", d.Opts)
	}
	// No limits left: the line without them.
	argv, err = PersistArgv(370, d, Set{}, "")
	if err != nil || argv[4] != "local-lvm:vm-370-disk-1,iothread=1,size=256M,discard=on" || len(argv) != 5 {
		t.Errorf("argv %q, %v", argv, err)
	}
	// The numbers as decimals, whatever their size.
	argv, _ = PersistArgv(370, d, Set{"mbps_wr": 0.000001, "iops_wr": 1e15}, digest)
	if !strings.HasSuffix(argv[4], ",iops_wr=1000000000000000,mbps_wr=0.000001") {
		t.Errorf("argv %q", argv)
	}

	// A drive whose options were not parsed from a line (defence in
	// depth: nothing but the numbers may change in what qm gets).
	for _, tc := range []struct {
		opts map[string]string
		err  string
	}{
		{map[string]string{"iothread": "1,mbps_wr=5"}, "would not parse"},                            // a duplicate key
		{map[string]string{"iothread": "1,mbps_rd=5"}, "does not read back as the limits asked for"}, // a limit smuggled in
		{map[string]string{"iothread": "1,cache=unsafe"}, "would change iothread"},                   // another option smuggled in
		{map[string]string{"iothread": "1", "bogus": "x"}, "would not parse"},
	} {
		bad := &qemuserver.Drive{Key: "scsi1", Bus: "scsi", Index: 1, Volume: "local-lvm:vm-370-disk-1", Opts: tc.opts}
		argv, err := PersistArgv(370, bad, Set{"mbps_wr": 20}, digest)
		if err == nil || argv != nil || !strings.Contains(err.Error(), tc.err) || exitcode.Of(err) != exitcode.Usage {
			t.Errorf("%v: %q, %v; want a usage error with %q", tc.opts, argv, err, tc.err)
		}
	}
}
