package qmp

import (
	"sort"
	"strings"

	"github.com/tidwall/gjson"
)

// maxGraphWork bounds the steps of JobDisks' walks, about 50 ms.
const maxGraphWork = 1 << 20

// BlockJob is one query-block-jobs entry: a backup, mirror, stream or
// commit running on the VM's block graph.
type BlockJob struct {
	ID     string // the job id (query-block-jobs calls it "device")
	Type   string // backup, mirror, stream, commit
	Status string // running, paused, ready, ...
	Len    int64  // bytes the job will process (an estimate)
	Offset int64  // bytes done
	Speed  int64  // the job's own rate limit, bytes/s; 0 for none
}

// ParseBlockJobs reads query-block-jobs' return value.
func ParseBlockJobs(ret gjson.Result) []BlockJob {
	var out []BlockJob
	for _, j := range ret.Array() {
		out = append(out, BlockJob{
			ID:     j.Get("device").String(),
			Type:   j.Get("type").String(),
			Status: j.Get("status").String(),
			Len:    j.Get("len").Int(),
			Offset: j.Get("offset").Int(),
			Speed:  j.Get("speed").Int(),
		})
	}
	return out
}

// JobDisks maps each block job of x-debug-query-block-graph to the disks it
// works on. A job's id says nothing reliable about its disk (blockdev-backup
// takes any job-id, qemu-server names mirrors mirror-<id>), but the graph
// links the job to the nodes it uses; walking up from those nodes reaches
// the guest device's BlockBackend, named drive-<id> under -drive and by the
// device id (scsi1) or its qdev path (virtio-blk) under -blockdev. A job's own BlockBackends have no name and lead to
// no disk, so a backup target does not count as the disk being backed up.
// Disk ids come out sorted.
//
// Each job walks the graph on its own, so the work grows with jobs times
// nodes: a real graph has a job or two and a few nodes per disk, a hostile
// reply tens of thousands of each (4,000 and 4,000 took 4.8 s). Past
// maxGraphWork steps in all, the jobs not yet walked are left out (top
// then places them by their names).
func JobDisks(graph gjson.Result) map[string][]string {
	type node struct{ name, typ string }
	nodes := map[int64]node{}
	for _, n := range graph.Get("nodes").Array() {
		nodes[n.Get("id").Int()] = node{n.Get("name").String(), n.Get("type").String()}
	}
	parents := map[int64][]int64{}
	children := map[int64][]int64{}
	files := map[int64][]int64{} // parent -> its "file" children
	mains := map[int64][]int64{} // job -> its "main node"
	for _, e := range graph.Get("edges").Array() {
		p, c := e.Get("parent").Int(), e.Get("child").Int()
		parents[c] = append(parents[c], p)
		children[p] = append(children[p], c)
		switch e.Get("name").String() {
		case "file":
			files[p] = append(files[p], c)
		case "main node":
			mains[p] = append(mains[p], c)
		}
	}
	out := map[string][]string{}
	budget := maxGraphWork
	for id, n := range nodes {
		if n.typ != "block-job" {
			continue
		}
		seen := map[int64]bool{id: true}
		disks := map[string]bool{}
		queue := append([]int64(nil), children[id]...)
		for len(queue) > 0 {
			if budget--; budget < 0 {
				return out // the jobs not placed yet are placed by name
			}
			cur := queue[0]
			queue = queue[1:]
			if seen[cur] {
				continue
			}
			seen[cur] = true
			switch nodes[cur].typ {
			case "block-backend":
				// Named drive-<id> under -drive; anonymous under -blockdev,
				// where QEMU names it by the device (scsi1, or a qdev path).
				name := strings.TrimPrefix(nodes[cur].name, "drive-")
				if d := QdevToDiskID(name); d != "" {
					disks[d] = true
				}
			case "block-driver":
				queue = append(queue, parents[cur]...)
			}
		}
		if len(disks) == 0 {
			// A backup with fleecing reads a snapshot-access node over a
			// copy-before-write filter that sits below the disk's own
			// node (QEMU 11.1: job -main node-> its filter -file->
			// snapshot-access -file-> the fleecing filter, a child of
			// drive-scsi1): nothing above the job's nodes is a disk, so
			// walk down their file children and up from each.
			down := append([]int64(nil), mains[id]...)
			for len(down) > 0 {
				if budget--; budget < 0 {
					return out
				}
				cur := down[0]
				down = down[1:]
				for _, p := range parents[cur] {
					if seen[p] {
						continue
					}
					for up := []int64{p}; len(up) > 0; {
						if budget--; budget < 0 {
							return out
						}
						u := up[0]
						up = up[1:]
						if seen[u] {
							continue
						}
						seen[u] = true
						switch nodes[u].typ {
						case "block-backend":
							if d := QdevToDiskID(strings.TrimPrefix(nodes[u].name, "drive-")); d != "" {
								disks[d] = true
							}
						case "block-driver":
							up = append(up, parents[u]...)
						}
					}
				}
				seen[cur] = true
				down = append(down, files[cur]...)
			}
		}
		ids := make([]string, 0, len(disks))
		for d := range disks {
			ids = append(ids, d)
		}
		sort.Strings(ids)
		out[n.name] = ids
	}
	return out
}
