package qmp

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// recorded returns a recorded reply's "return" value (testdata/README.md).
func recorded(t testing.TB, version, gen, name string) gjson.Result {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "qemu-"+version, gen, name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	r := gjson.ParseBytes(b)
	if !r.Get("return").Exists() {
		t.Fatalf("%s/%s/%s has no return: %s", version, gen, name, b)
	}
	return r.Get("return")
}

var versions = []string{"7.2.22", "11.1.3"}

// The recorded VM's disks, as QMP names them: the empty CD-ROM has no
// medium; every other disk is inserted.
func TestParseQueryBlockRecorded(t *testing.T) {
	for _, v := range versions {
		for _, gen := range []string{"blockdev", "drive"} {
			devs := ParseQueryBlock(recorded(t, v, gen, "query-block"))
			var got []string
			for _, d := range devs {
				s := d.ID
				if !d.Inserted {
					s += "(empty)"
				}
				got = append(got, s)
				if gen == "drive" && d.Inserted && d.Device != "drive-"+d.ID {
					t.Errorf("%s %s: %s's BlockBackend is %q, want drive-%s", v, gen, d.ID, d.Device, d.ID)
				}
				if gen == "blockdev" && d.Device != "" {
					t.Errorf("%s %s: %s's BlockBackend is named %q under -blockdev", v, gen, d.ID, d.Device)
				}
			}
			sort.Strings(got)
			want := "ide2(empty) sata1 sata2 scsi0 scsi1 scsi2 virtio1"
			if strings.Join(got, " ") != want {
				t.Errorf("%s %s: disks %v, want %s", v, gen, got, want)
			}
			for _, d := range devs {
				if d.ID != "scsi1" {
					continue
				}
				// Limits live in the throttle group under -blockdev, on the
				// BlockBackend under -drive.
				wantWr := int64(0)
				if gen == "drive" {
					wantWr = 20 << 20
				}
				if d.BackendLimits["bps_wr"] != wantWr {
					t.Errorf("%s %s: scsi1 backend bps_wr = %d, want %d", v, gen, d.BackendLimits["bps_wr"], wantWr)
				}
			}
		}
	}
}

// Walking the graph down from the top node finds the format and protocol
// nodes with their real cache flags, with children (QEMU >= 10.1) or with the
// debug graph (7.2).
func TestChainRecorded(t *testing.T) {
	for _, v := range versions {
		for _, gen := range []string{"blockdev", "drive"} {
			g := ParseNamedBlockNodes(recorded(t, v, gen, "query-named-block-nodes"))
			if v == "7.2.22" && g.HasEdges() {
				t.Errorf("%s lists children: the debug-graph path is not exercised", v)
			}
			if !g.HasEdges() {
				g.AddDebugGraph(recorded(t, v, gen, "x-debug-query-block-graph"))
			}
			devs := ParseQueryBlock(recorded(t, v, gen, "query-block"))
			for _, d := range devs {
				if !d.Inserted {
					continue
				}
				c, ok := g.Chain(d.NodeName)
				if !ok {
					t.Errorf("%s %s %s: no chain from %q", v, gen, d.ID, d.NodeName)
					continue
				}
				wantTop := "raw"
				if gen == "blockdev" {
					wantTop = "throttle"
				}
				if c.Top.Driver != wantTop || c.Format.Driver != "raw" {
					t.Errorf("%s %s %s: top %s format %s, want %s raw", v, gen, d.ID, c.Top.Driver, c.Format.Driver, wantTop)
				}
				wantProto := "host_device"
				if d.ID == "sata2" {
					wantProto = "file" // the ISO image
				}
				if c.Protocol.Driver != wantProto {
					t.Errorf("%s %s %s: protocol %s, want %s", v, gen, d.ID, c.Protocol.Driver, wantProto)
				}
				// scsi2 runs cache=writeback, the CD-ROM has no O_DIRECT,
				// every other disk the default none.
				wantDirect := d.ID != "scsi2" && d.ID != "sata2"
				if c.Format.Direct != wantDirect || c.Protocol.Direct != wantDirect || c.Format.NoFlush {
					t.Errorf("%s %s %s: direct %v/%v no-flush %v, want direct %v", v, gen, d.ID, c.Format.Direct, c.Protocol.Direct, c.Format.NoFlush, wantDirect)
				}
			}
		}
	}
}

func TestParseBlockstatsRecorded(t *testing.T) {
	for _, v := range versions {
		for _, gen := range []string{"blockdev", "drive"} {
			var ids []string
			for _, b := range ParseBlockstats(recorded(t, v, gen, "query-blockstats")) {
				ids = append(ids, b.ID)
			}
			sort.Strings(ids)
			if got := strings.Join(ids, " "); got != "ide2 sata1 sata2 scsi0 scsi1 scsi2 virtio1" {
				t.Errorf("%s %s: blockstats ids %s", v, gen, got)
			}
			nodes := ParseBlockstats(recorded(t, v, gen, "query-blockstats-nodes"))
			protocols := 0
			for _, n := range nodes {
				if n.HasDriverSpecific {
					protocols++
				}
			}
			// One file or host_device node per inserted medium.
			if protocols != 6 {
				t.Errorf("%s %s: %d nodes with driver-specific counters, want 6", v, gen, protocols)
			}
		}
	}
}

func TestParseThrottleGroupLimitsRecorded(t *testing.T) {
	for _, v := range versions {
		l := parseThrottleGroupLimits(recorded(t, v, "blockdev", "qom-get-limits-scsi1"))
		if l["bps-write"] != 20<<20 || l["bps-write-max"] != 40<<20 || l["iops-read"] != 500 || l["bps-read"] != 0 {
			t.Errorf("%s: limits %v", v, l)
		}
	}
}

// FuzzParseReplies feeds any bytes to every QMP reply parser: none may panic,
// and walking a graph always ends.
func FuzzParseReplies(f *testing.F) {
	for _, v := range versions {
		for _, gen := range []string{"blockdev", "drive"} {
			files, _ := filepath.Glob(filepath.Join("testdata", "qemu-"+v, gen, "*.json"))
			for _, p := range files {
				if b, err := os.ReadFile(p); err == nil {
					f.Add(b)
				}
			}
		}
	}
	f.Add([]byte(`{"return": [{"qdev": 7, "inserted": "x", "stats": [1]}]}`))
	f.Add([]byte(`{"return": {"nodes": [{"id": 1, "type": "block-driver", "name": "a"}], "edges": [{"parent": 1, "child": 1, "name": "file"}]}}`))
	for _, b := range deepSeeds() {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r := gjson.GetBytes(b, "return")
		devs := ParseQueryBlock(r)
		g := ParseNamedBlockNodes(r)
		g.AddDebugGraph(r)
		for _, d := range devs {
			g.Chain(d.NodeName)
		}
		for name := range g.Nodes {
			g.Chain(name)
		}
		ParseBlockstats(r)
		parseThrottleGroupLimits(r)
		parseFsInfo(r)
		parseFstrim(r)
		_, _ = parseExecStatus(r)
	})
}

// FuzzAgentReply feeds any bytes to the guest agent's reply readers: no
// panic, and a reader never returns success for a line that is not JSON.
func FuzzAgentReply(f *testing.F) {
	f.Add([]byte("\xff{\"return\": 42}\n{\"return\": {\"paths\": []}}\n"))
	f.Add([]byte("{\"error\": {\"class\": \"GenericError\", \"desc\": \"guest-sync-delimited\"}}\n"))
	f.Add([]byte("\xff\xff\n{]\n"))
	for _, b := range deepSeeds() {
		f.Add(append(b, '\n'))
		f.Add(append([]byte("\xff{\"return\": 42}\n"), append(b, '\n')...))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = qgaReadSync(bufio.NewReader(bytes.NewReader(b)), 42)
		ret, err := qgaReadReply(bufio.NewReader(bytes.NewReader(b)), "guest-ping")
		if err == nil && !ret.Exists() {
			t.Errorf("success without a return value for %q", b)
		}
	})
}
