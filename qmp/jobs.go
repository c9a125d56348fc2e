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
	// Fleecing is the node of the fleecing image the job reads through
	// (JobFleecing), "" for none; Graphed says whether the block graph was
	// read for it (vm.Ask): without the graph Fleecing says nothing.
	Fleecing string
	Graphed  bool
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

// jobGraph is x-debug-query-block-graph indexed by node id.
type jobGraph struct {
	nodes    map[int64]graphNode
	parents  map[int64][]int64
	children map[int64][]int64
	files    map[int64][]int64 // parent -> its "file" children
	mains    map[int64][]int64 // job -> its "main node"
	targets  map[int64][]int64 // parent -> its "target" children
}

type graphNode struct{ name, typ string }

func indexJobGraph(graph gjson.Result) jobGraph {
	g := jobGraph{nodes: map[int64]graphNode{}, parents: map[int64][]int64{}, children: map[int64][]int64{},
		files: map[int64][]int64{}, mains: map[int64][]int64{}, targets: map[int64][]int64{}}
	for _, n := range graph.Get("nodes").Array() {
		g.nodes[n.Get("id").Int()] = graphNode{n.Get("name").String(), n.Get("type").String()}
	}
	for _, e := range graph.Get("edges").Array() {
		p, c := e.Get("parent").Int(), e.Get("child").Int()
		g.parents[c] = append(g.parents[c], p)
		g.children[p] = append(g.children[p], c)
		switch e.Get("name").String() {
		case "file":
			g.files[p] = append(g.files[p], c)
		case "main node":
			g.mains[p] = append(g.mains[p], c)
		case "target":
			g.targets[p] = append(g.targets[p], c)
		}
	}
	return g
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
	g := indexJobGraph(graph)
	nodes, parents, children, files, mains := g.nodes, g.parents, g.children, g.files, g.mains
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

// JobFleecing maps each block job of x-debug-query-block-graph to the
// fleecing image its source is read through: the "target" child of a node
// with one below the job's main node along "file" children. That node is
// the copy-before-write filter of a backup with fleecing (pve-qemu's "PVE
// backup: add fleecing option", QEMU's image fleecing: the guest's writes
// go through the filter, which first copies the old data to its target,
// the fleecing image; the job reads a snapshot-access node over the
// filter). A job without fleecing has its own copy-before-write filter as
// its main node, whose target is the backup target, over the disk's nodes,
// none with a target: "". Recorded on QEMU 11.1.3 and 7.2.22
// (testdata/README.md). Each job's walk visits a node once; past
// maxGraphWork steps in all, as in JobDisks, the jobs not yet walked are
// left out (their fleecing unknown).
func JobFleecing(graph gjson.Result) map[string]string {
	g := indexJobGraph(graph)
	out := map[string]string{}
	budget := maxGraphWork
	for id, n := range g.nodes {
		if n.typ != "block-job" {
			continue
		}
		seen := map[int64]bool{}
		var down []int64
		for _, m := range g.mains[id] {
			seen[m] = true
			down = append(down, g.files[m]...)
		}
		found := ""
		for len(down) > 0 && found == "" {
			if budget--; budget < 0 {
				return out
			}
			cur := down[0]
			down = down[1:]
			if seen[cur] {
				continue
			}
			seen[cur] = true
			if t := g.targets[cur]; len(t) > 0 {
				found = g.nodes[t[0]].name
				break
			}
			down = append(down, g.files[cur]...)
		}
		out[n.name] = found
	}
	return out
}
