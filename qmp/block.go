package qmp

import (
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tidwall/gjson"
)

// BlockNode is one node of the block graph as QEMU runs it.
type BlockNode struct {
	Name     string
	Driver   string // throttle, raw, qcow2, file, host_device, ...
	Filename string
	Direct   bool // cache.direct
	NoFlush  bool // cache.no-flush
	ReadOnly bool
}

// DriveChain is the live graph under drive-<id>: the top node (throttle under
// -blockdev, the format node under -drive), the format node and the protocol
// node. Throttle nodes carry no cache options, so the real flags are read from
// Format and Protocol.
type DriveChain struct {
	Top, Format, Protocol BlockNode
}

// BlockDevice is one query-block entry, keyed by the config disk id.
type BlockDevice struct {
	ID       string // config key: scsi1, virtio0 (from qdev)
	QdevPath string
	Device   string // BlockBackend name: empty under -blockdev, drive-<id> under -drive
	Inserted bool
	NodeName string // top node
	// GuestWriteCache is the write cache the guest negotiated at runtime
	// (inserted.cache.writeback), not the configuration.
	GuestWriteCache bool
	// IOStatus is query-block's io-status: ok, failed (an I/O error) or
	// nospace (ENOSPC); QEMU reports it only where an error can stop the VM
	// (werror or rerror stop/enospc, the default werror=enospc included),
	// "" elsewhere. Resuming the VM resets it to ok.
	IOStatus string
	// Legacy (BlockBackend) throttling, bytes/s and ops/s.
	BackendLimits map[string]int64
	Raw           gjson.Result
}

// QdevToDiskID maps a qdev path to the Proxmox disk key, as qemu-server's
// qdev_id_to_drive_id does.
func QdevToDiskID(qdev string) string {
	if strings.HasPrefix(qdev, "/machine/peripheral/") {
		rest := strings.TrimPrefix(qdev, "/machine/peripheral/")
		id, _, _ := strings.Cut(rest, "/")
		return id
	}
	switch qdev {
	case "/machine/system.flash1", "/machine/virt.flash1":
		return "efidisk0"
	}
	return qdev
}

// ParseQueryBlock parses query-block's return value.
func ParseQueryBlock(ret gjson.Result) []BlockDevice {
	var out []BlockDevice
	for _, b := range ret.Array() {
		d := BlockDevice{QdevPath: b.Get("qdev").String(), Device: b.Get("device").String(), Raw: b}
		d.ID = QdevToDiskID(d.QdevPath)
		d.IOStatus = b.Get("io-status").String()
		if d.ID == "" {
			d.ID = strings.TrimPrefix(d.Device, "drive-")
		}
		in := b.Get("inserted")
		d.Inserted = in.Exists()
		if d.Inserted {
			d.NodeName = in.Get("node-name").String()
			d.GuestWriteCache = in.Get("cache.writeback").Bool()
			d.BackendLimits = map[string]int64{}
			for _, k := range []string{"bps", "bps_rd", "bps_wr", "iops", "iops_rd", "iops_wr",
				"bps_max", "bps_rd_max", "bps_wr_max", "iops_max", "iops_rd_max", "iops_wr_max",
				"bps_max_length", "bps_rd_max_length", "bps_wr_max_length", "iops_max_length", "iops_rd_max_length", "iops_wr_max_length"} {
				if v := in.Get(k); v.Exists() {
					d.BackendLimits[k] = v.Int()
				}
			}
		}
		out = append(out, d)
	}
	return out
}

// BackendToQEMULimitName maps query-block's legacy limit field names (bps_wr)
// to ThrottleLimits names (bps-write).
func BackendToQEMULimitName(k string) string {
	k = strings.ReplaceAll(k, "_", "-")
	base, rest, _ := strings.Cut(k, "-")
	dir := "-total"
	switch {
	case strings.HasPrefix(rest, "rd"):
		dir, rest = "-read", strings.TrimPrefix(strings.TrimPrefix(rest, "rd"), "-")
	case strings.HasPrefix(rest, "wr"):
		dir, rest = "-write", strings.TrimPrefix(strings.TrimPrefix(rest, "wr"), "-")
	}
	if rest != "" {
		return base + dir + "-" + rest
	}
	return base + dir
}

// Graph is the node graph: nodes by name and each node's children by role.
type Graph struct {
	Nodes    map[string]BlockNode
	Children map[string]map[string]string // parent -> child role ("file", "backing") -> child node
}

// ParseNamedBlockNodes reads query-named-block-nodes (flat=false or true).
// From QEMU 10.1 each node lists its children; older versions need
// AddDebugGraph for the edges.
func ParseNamedBlockNodes(ret gjson.Result) *Graph {
	g := &Graph{Nodes: map[string]BlockNode{}, Children: map[string]map[string]string{}}
	for _, n := range ret.Array() {
		name := n.Get("node-name").String()
		g.Nodes[name] = BlockNode{
			Name:     name,
			Driver:   n.Get("drv").String(),
			Filename: n.Get("file").String(),
			Direct:   n.Get("cache.direct").Bool(),
			NoFlush:  n.Get("cache.no-flush").Bool(),
			ReadOnly: n.Get("ro").Bool(),
		}
		if ch := n.Get("children"); ch.Exists() {
			m := map[string]string{}
			for _, c := range ch.Array() {
				m[c.Get("child").String()] = c.Get("node-name").String()
			}
			g.Children[name] = m
		}
	}
	return g
}

// HasEdges reports whether the graph knows any parent/child edge.
func (g *Graph) HasEdges() bool { return len(g.Children) > 0 }

// AddDebugGraph adds edges from x-debug-query-block-graph (QEMU < 10.1).
func (g *Graph) AddDebugGraph(ret gjson.Result) {
	names := map[int64]string{}
	for _, n := range ret.Get("nodes").Array() {
		if n.Get("type").String() == "block-driver" {
			names[n.Get("id").Int()] = n.Get("name").String()
		}
	}
	for _, e := range ret.Get("edges").Array() {
		p, okp := names[e.Get("parent").Int()]
		c, okc := names[e.Get("child").Int()]
		if !okp || !okc {
			continue
		}
		if g.Children[p] == nil {
			g.Children[p] = map[string]string{}
		}
		g.Children[p][e.Get("name").String()] = c
	}
}

// Chain walks down from the top node through "file" children to the
// protocol node, skipping filter nodes (throttle, zeroinit, alloc-track).
func (g *Graph) Chain(top string) (DriveChain, bool) {
	t, ok := g.Nodes[top]
	if !ok {
		return DriveChain{}, false
	}
	c := DriveChain{Top: t, Format: t, Protocol: t}
	cur := t
	formatSet := !isFilter(t.Driver)
	for i := 0; i < 8; i++ {
		child, ok := g.Children[cur.Name]["file"]
		if !ok {
			break
		}
		n, ok := g.Nodes[child]
		if !ok {
			break
		}
		if !formatSet && !isFilter(n.Driver) {
			c.Format = n
			formatSet = true
		}
		c.Protocol = n
		cur = n
	}
	return c, true
}

func isFilter(drv string) bool {
	return drv == "throttle" || drv == "zeroinit" || drv == "alloc-track" || drv == "copy-before-write"
}

// BlockStats is a device's or node's counters from query-blockstats.
type BlockStats struct {
	ID               string // config disk id (device entries) or node name (node entries)
	NodeName         string
	RdBytes, WrBytes int64
	RdOps, WrOps     int64
	FlushOps         int64
	FlushTotalTimeNs int64
	RdTotalTimeNs    int64
	WrTotalTimeNs    int64
	UnmapOps         int64
	UnmapBytes       int64
	UnmapTotalTimeNs int64
	// FailedOps counts requests that ended in an error (failed_rd, _wr,
	// _flush, _unmap); InvalidOps those QEMU refused before submitting them
	// (invalid_*: out of range, misaligned).
	FailedOps         int64
	InvalidOps        int64
	DiscardNbOK       int64 // protocol node driver-specific: discards the storage accepted
	DiscardNbFailed   int64
	DiscardBytesOK    int64
	HasDriverSpecific bool
	// IdleTimeNs is QEMU's idle_time_ns: nanoseconds since the device's
	// last completed request (block/accounting.c sets last_access_time_ns
	// when a request is accounted done or failed, never when one is
	// submitted). QEMU leaves it out until a first request completed:
	// HasIdleTime says whether it was there.
	IdleTimeNs  int64
	HasIdleTime bool
	Timestamp   int64 // caller-filled, ns
	// RdLatency, WrLatency and FlushLatency are the device's latency
	// histograms (rd_/wr_/flush_latency_histogram); nil unless one was set
	// with block-latency-histogram-set (package latency).
	RdLatency, WrLatency, FlushLatency *LatencyHistogram
}

// LatencyHistogram is one of QEMU's latency histograms: Bins[i] counts the
// requests whose latency fell in [Boundaries[i-1], Boundaries[i]) ns, the
// first from 0, the last (len(Boundaries)) from the last boundary on.
// Boundaries may be shared between entries of the same boundaries: never
// change them.
type LatencyHistogram struct {
	Boundaries []int64
	Bins       []int64
}

// HistogramCommand is block-latency-histogram-set for disk: its latency
// histograms of reads, writes and flushes set with boundaries (ns), or
// with none cleared (QEMU removes the histogram).
func HistogramCommand(disk string, boundaries []int64) (name string, args map[string]any) {
	args = map[string]any{"id": disk}
	if boundaries != nil {
		args["boundaries-read"], args["boundaries-write"], args["boundaries-flush"] = boundaries, boundaries, boundaries
	}
	return "block-latency-histogram-set", args
}

// boundaryCache keeps parsed boundaries by their JSON text: the same few
// lists come back with every sample, and parsing them again would double
// the cost of a histogram. Bounded: past maxCachedBoundaries lists, new
// ones are parsed each time.
var boundaryCache sync.Map

var cachedBoundaries atomic.Int32

const maxCachedBoundaries = 64

func parseLatencyHistogram(v gjson.Result) *LatencyHistogram {
	h := &LatencyHistogram{}
	// {"bins": [...], "boundaries": [...]}, read from its text: the arrays
	// hold no strings or objects, so each ends at its first ']'.
	raw := v.Raw
	for {
		q := strings.IndexByte(raw, '"')
		if q < 0 {
			return h
		}
		raw = raw[q+1:]
		q = strings.IndexByte(raw, '"')
		if q < 0 {
			return h
		}
		key := raw[:q]
		raw = raw[q+1:]
		open, end := strings.IndexByte(raw, '['), strings.IndexByte(raw, ']')
		if open < 0 || end < open {
			return h
		}
		arr := raw[open : end+1]
		raw = raw[end+1:]
		switch key {
		case "boundaries":
			if c, ok := boundaryCache.Load(arr); ok {
				h.Boundaries = c.([]int64)
				continue
			}
			h.Boundaries = parseInts(arr, nil)
			if cachedBoundaries.Add(1) <= maxCachedBoundaries {
				boundaryCache.Store(strings.Clone(arr), h.Boundaries) // not the reply's own bytes: they would be kept
			}
		case "bins":
			h.Bins = parseInts(arr, make([]int64, 0, 160))
		}
	}
}

// parseInts reads a JSON array of non-negative integers (QEMU's uint64
// bins and boundaries) straight from its text: a gjson value per element
// cost three times as much, and top parses 429 of them per disk and
// sample. Anything else in the array (a sign, a fraction) ends the list
// there.
func parseInts(raw string, out []int64) []int64 {
	var n int64
	digits := false
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		switch {
		case c >= '0' && c <= '9':
			n = n*10 + int64(c-'0')
			digits = true
		case c == ',' || c == ']':
			if digits {
				out = append(out, n)
			}
			n, digits = 0, false
		case c == '[' || c == ' ' || c == '\n' || c == '\t' || c == '\r':
		default:
			return out
		}
	}
	return out
}

// ParseBlockstats parses query-blockstats (device entries, or node entries
// with query-nodes=true). Entries nest their children under "parent"/"backing"
// only for device queries; node queries are flat.
func ParseBlockstats(ret gjson.Result) []BlockStats {
	var out []BlockStats
	for _, e := range ret.Array() {
		// One pass over the entry's keys and one over its ~30 counters (top
		// parses every VM's answer every second): a Get per key would scan
		// the entry, nested parent and backing included, each time.
		var b BlockStats
		var stats, qdev, device, ds gjson.Result
		e.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "node-name":
				b.NodeName = v.String()
			case "stats":
				stats = v
			case "qdev":
				qdev = v
			case "device":
				device = v
			case "driver-specific":
				ds = v
			}
			return true
		})
		stats.ForEach(func(k, v gjson.Result) bool {
			switch k.Str {
			case "rd_bytes":
				b.RdBytes = v.Int()
			case "wr_bytes":
				b.WrBytes = v.Int()
			case "rd_operations":
				b.RdOps = v.Int()
			case "wr_operations":
				b.WrOps = v.Int()
			case "flush_operations":
				b.FlushOps = v.Int()
			case "flush_total_time_ns":
				b.FlushTotalTimeNs = v.Int()
			case "rd_total_time_ns":
				b.RdTotalTimeNs = v.Int()
			case "wr_total_time_ns":
				b.WrTotalTimeNs = v.Int()
			case "unmap_operations":
				b.UnmapOps = v.Int()
			case "unmap_bytes":
				b.UnmapBytes = v.Int()
			case "unmap_total_time_ns":
				b.UnmapTotalTimeNs = v.Int()
			case "failed_rd_operations", "failed_wr_operations", "failed_flush_operations", "failed_unmap_operations":
				b.FailedOps += v.Int()
			case "invalid_rd_operations", "invalid_wr_operations", "invalid_flush_operations", "invalid_unmap_operations":
				b.InvalidOps += v.Int()
			case "idle_time_ns":
				b.IdleTimeNs, b.HasIdleTime = v.Int(), true
			case "rd_latency_histogram":
				b.RdLatency = parseLatencyHistogram(v)
			case "wr_latency_histogram":
				b.WrLatency = parseLatencyHistogram(v)
			case "flush_latency_histogram":
				b.FlushLatency = parseLatencyHistogram(v)
			}
			return true
		})
		if q := qdev.String(); q != "" {
			b.ID = QdevToDiskID(q)
		} else if dev := device.String(); dev != "" {
			b.ID = strings.TrimPrefix(dev, "drive-")
		} else {
			b.ID = b.NodeName
		}
		if ds.Exists() {
			b.HasDriverSpecific = true
			b.DiscardNbOK = ds.Get("discard-nb-ok").Int()
			b.DiscardNbFailed = ds.Get("discard-nb-failed").Int()
			b.DiscardBytesOK = ds.Get("discard-bytes-ok").Int()
		}
		out = append(out, b)
	}
	return out
}
