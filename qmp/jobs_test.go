package qmp

import (
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"
)

func fixture(t *testing.T, name string) gjson.Result {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return gjson.ParseBytes(b)
}

func TestParseBlockJobs(t *testing.T) {
	got := ParseBlockJobs(fixture(t, "query-block-jobs-backup-7.2.json"))
	want := []BlockJob{{ID: "backup-scsi1-test", Type: "backup", Status: "running", Len: 268435456, Offset: 0, Speed: 1048576}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ParseBlockJobs = %+v, want %+v", got, want)
	}
	if got := ParseBlockJobs(gjson.Parse(`[]`)); len(got) != 0 {
		t.Errorf("no jobs: %+v", got)
	}
}

func TestJobDisksRecordedBackup(t *testing.T) {
	// The job's own id names no disk; the graph leads from it through the
	// copy-before-write filter to scsi1's BlockBackend, and from its
	// target only back to the same filter: scsi1 alone.
	got := JobDisks(fixture(t, "x-debug-query-block-graph-backup-7.2.json"))
	want := map[string][]string{"backup-scsi1-test": {"scsi1"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("JobDisks = %v, want %v", got, want)
	}
}

// A backup with fleecing (QEMU 11.1.3, testdata/README.md): the job reads
// a snapshot-access node over the fleecing filter below drive-scsi1; only
// walking down from its main node and up again reaches scsi1, never the
// fleecing image or the target.
func TestJobDisksRecordedFleecing(t *testing.T) {
	got := JobDisks(fixture(t, "x-debug-query-block-graph-fleecing-11.1.json"))
	want := map[string][]string{"backup-scsi1-fleece": {"scsi1"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("JobDisks = %v, want %v", got, want)
	}
	if jobs := ParseBlockJobs(fixture(t, "query-block-jobs-fleecing-11.1.json")); len(jobs) != 1 || jobs[0].Type != "backup" {
		t.Errorf("jobs %+v", jobs)
	}
}

// Under -drive the BlockBackends carry their names, drive-<id>, and
// drive-backup's job takes the device's name as its id.
func TestJobDisksRecordedDriveBackup(t *testing.T) {
	got := JobDisks(fixture(t, "x-debug-query-block-graph-drive-backup-7.2.json"))
	want := map[string][]string{"drive-scsi1": {"scsi1"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("JobDisks = %v, want %v", got, want)
	}
	if jobs := ParseBlockJobs(fixture(t, "query-block-jobs-drive-backup-7.2.json")); len(jobs) != 1 || jobs[0].ID != "drive-scsi1" || jobs[0].Type != "backup" {
		t.Errorf("jobs %+v", jobs)
	}
}

func TestJobDisksShapes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		graph string
		want  map[string][]string
	}{
		{"no jobs", `{"nodes": [{"id": 1, "type": "block-backend", "name": "scsi0"}, {"id": 2, "type": "block-driver", "name": "drive-scsi0"}],
			"edges": [{"parent": 1, "child": 2, "name": "root"}]}`, map[string][]string{}},
		// A mirror: the job's nodes are the mirror_top filter under the
		// virtio-blk device's BlockBackend (named by its qdev path) and a
		// target whose only parent is the job's own, nameless, BlockBackend.
		{"mirror of virtio-blk", `{"nodes": [
			{"id": 1, "type": "block-backend", "name": "/machine/peripheral/virtio1/virtio-backend"},
			{"id": 2, "type": "block-driver", "name": "#block300"},
			{"id": 3, "type": "block-driver", "name": "drive-virtio1"},
			{"id": 4, "type": "block-driver", "name": "target"},
			{"id": 5, "type": "block-backend", "name": ""},
			{"id": 6, "type": "block-job", "name": "mirror-virtio1"}],
			"edges": [{"parent": 1, "child": 2, "name": "root"}, {"parent": 2, "child": 3, "name": "backing"},
			{"parent": 5, "child": 4, "name": "root"}, {"parent": 6, "child": 2, "name": "main node"}, {"parent": 6, "child": 4, "name": "target"}]}`,
			map[string][]string{"mirror-virtio1": {"virtio1"}}},
		// A stream over two disks' nodes (not a Proxmox shape, but the walk
		// must collect every disk, sorted, each once).
		{"job on two disks", `{"nodes": [
			{"id": 1, "type": "block-backend", "name": "scsi2"}, {"id": 2, "type": "block-driver", "name": "a"},
			{"id": 3, "type": "block-backend", "name": "scsi1"}, {"id": 4, "type": "block-driver", "name": "b"},
			{"id": 5, "type": "block-driver", "name": "shared"},
			{"id": 9, "type": "block-job", "name": "j"}],
			"edges": [{"parent": 1, "child": 2}, {"parent": 3, "child": 4}, {"parent": 2, "child": 5}, {"parent": 4, "child": 5},
			{"parent": 9, "child": 5}, {"parent": 9, "child": 2}]}`,
			map[string][]string{"j": {"scsi1", "scsi2"}}},
		// Another job's node above is not followed.
		{"job above job", `{"nodes": [
			{"id": 1, "type": "block-job", "name": "outer"}, {"id": 2, "type": "block-driver", "name": "n"},
			{"id": 3, "type": "block-job", "name": "inner"}],
			"edges": [{"parent": 1, "child": 2}, {"parent": 3, "child": 2}]}`,
			map[string][]string{"outer": {}, "inner": {}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := JobDisks(gjson.Parse(tc.graph)); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("JobDisks = %v, want %v", got, tc.want)
			}
		})
	}
}

// A hostile graph (4,000 jobs on the bottom of a chain of 4,000 nodes: the
// walks took 4.8 s) is cut at maxGraphWork steps: bounded time, and the
// jobs walked before the cut keep their disks.
func TestJobDisksBounded(t *testing.T) {
	const n = 4000
	var nodes, edges []string
	for i := 0; i < n; i++ {
		nodes = append(nodes, fmt.Sprintf(`{"id": %d, "type": "block-driver", "name": "d%d"}`, i, i))
		if i > 0 {
			edges = append(edges, fmt.Sprintf(`{"parent": %d, "child": %d, "name": "file"}`, i, i-1))
		}
	}
	nodes = append(nodes, fmt.Sprintf(`{"id": %d, "type": "block-backend", "name": "drive-scsi1"}`, n))
	edges = append(edges, fmt.Sprintf(`{"parent": %d, "child": %d, "name": "root"}`, n, n-1))
	for j := 0; j < n; j++ {
		nodes = append(nodes, fmt.Sprintf(`{"id": %d, "type": "block-job", "name": "j%d"}`, n+1+j, j))
		edges = append(edges, fmt.Sprintf(`{"parent": %d, "child": 0, "name": "source"}`, n+1+j))
	}
	g := gjson.Parse(`{"nodes": [` + strings.Join(nodes, ",") + `], "edges": [` + strings.Join(edges, ",") + `]}`)
	start := time.Now()
	got := JobDisks(g)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("took %s", took)
	}
	if len(got) == 0 || len(got) >= n {
		t.Errorf("%d of %d jobs placed, want some but not all", len(got), n)
	}
	for job, disks := range got {
		if !reflect.DeepEqual(disks, []string{"scsi1"}) {
			t.Errorf("%s: %v", job, disks)
		}
	}
}

// A backup with fleecing reads through the copy-before-write filter below
// the disk's node, whose target is the fleecing image; without fleecing
// the job's own filter (its main node) is the only one with a target, and
// that is the backup target: no fleecing.
func TestJobFleecing(t *testing.T) {
	for _, tc := range []struct {
		name  string
		graph gjson.Result
		want  map[string]string
	}{
		{"fleecing, QEMU 11.1.3", fixture(t, "x-debug-query-block-graph-fleecing-11.1.json"), map[string]string{"backup-scsi1-fleece": "fleece"}},
		{"blockdev-backup, QEMU 7.2.22", fixture(t, "x-debug-query-block-graph-backup-7.2.json"), map[string]string{"backup-scsi1-test": ""}},
		{"drive-backup, QEMU 7.2.22", fixture(t, "x-debug-query-block-graph-drive-backup-7.2.json"), map[string]string{"drive-scsi1": ""}},
		{"no jobs", gjson.Parse(`{"nodes": [{"id": 1, "type": "block-driver", "name": "cbw"}, {"id": 2, "type": "block-driver", "name": "fleece"}],
			"edges": [{"parent": 1, "child": 2, "name": "target"}]}`), map[string]string{}},
		// A target beside the walk (on a node the job's file chain does not
		// reach) is no fleecing of this job; a loop of file edges ends.
		{"target elsewhere, a loop", gjson.Parse(`{"nodes": [
			{"id": 1, "type": "block-job", "name": "j"}, {"id": 2, "type": "block-driver", "name": "filter"},
			{"id": 3, "type": "block-driver", "name": "a"}, {"id": 4, "type": "block-driver", "name": "b"},
			{"id": 5, "type": "block-driver", "name": "other"}, {"id": 6, "type": "block-driver", "name": "img"}],
			"edges": [{"parent": 1, "child": 2, "name": "main node"}, {"parent": 2, "child": 3, "name": "file"},
			{"parent": 3, "child": 4, "name": "file"}, {"parent": 4, "child": 3, "name": "file"},
			{"parent": 5, "child": 6, "name": "target"}, {"parent": 5, "child": 3, "name": "file"}]}`), map[string]string{"j": ""}},
		// Two layers down, past a backing-less filter: found.
		{"deeper", gjson.Parse(`{"nodes": [
			{"id": 1, "type": "block-job", "name": "j"}, {"id": 2, "type": "block-driver", "name": "filter"},
			{"id": 3, "type": "block-driver", "name": "snap"}, {"id": 4, "type": "block-driver", "name": "cbw"},
			{"id": 5, "type": "block-driver", "name": "fl"}, {"id": 6, "type": "block-driver", "name": "backup-target"}],
			"edges": [{"parent": 1, "child": 2, "name": "main node"}, {"parent": 2, "child": 6, "name": "target"},
			{"parent": 2, "child": 3, "name": "file"}, {"parent": 3, "child": 4, "name": "file"}, {"parent": 4, "child": 5, "name": "target"}]}`), map[string]string{"j": "fl"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := JobFleecing(tc.graph); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("JobFleecing = %v, want %v", got, tc.want)
			}
		})
	}
}

// The hostile graph of TestJobDisksBounded with each job's main node at the
// top of the 4,000-node chain: each walk would go down all of it (16
// million steps); cut at maxGraphWork, the jobs walked keep their answer,
// the others are left out (unknown), not said to run without fleecing.
func TestJobFleecingBounded(t *testing.T) {
	const n = 4000
	var nodes, edges []string
	for i := 0; i < n; i++ {
		nodes = append(nodes, fmt.Sprintf(`{"id": %d, "type": "block-driver", "name": "d%d"}`, i, i))
		if i > 0 {
			edges = append(edges, fmt.Sprintf(`{"parent": %d, "child": %d, "name": "file"}`, i, i-1))
		}
	}
	for j := 0; j < n; j++ {
		nodes = append(nodes, fmt.Sprintf(`{"id": %d, "type": "block-job", "name": "j%d"}`, n+j, j))
		edges = append(edges, fmt.Sprintf(`{"parent": %d, "child": %d, "name": "main node"}`, n+j, n-1))
	}
	g := gjson.Parse(`{"nodes": [` + strings.Join(nodes, ",") + `], "edges": [` + strings.Join(edges, ",") + `]}`)
	start := time.Now()
	got := JobFleecing(g)
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("took %s", took)
	}
	if len(got) == 0 || len(got) >= n {
		t.Errorf("%d of %d jobs answered, want some but not all", len(got), n)
	}
	for job, f := range got {
		if f != "" {
			t.Errorf("%s: %q", job, f)
		}
	}
}
