package fio

import "strconv"

// Figure is the number Lab 19's summary table reads a job by: random 4k
// at depth in IOPS, 4k writes at QD1 by their mean completion latency,
// sequential 1M in MB/s (MiB/s, as the lab's tables print fio's bw), the
// sync job by its fsync latency. Key is one of Metrics' keys.
type Figure struct {
	Key   string `json:"metric"`
	Title string `json:"title"` // the chart's axis, e.g. "MiB/s"
	// Scale turns the metric's value into the unit of Title (ns to ms).
	Scale        float64 `json:"-"`
	HigherBetter bool    `json:"higher_is_better"`
}

// Figures by key.
var (
	FigureIOPS  = Figure{"iops", "IOPS", 1, true}
	FigureBW    = Figure{"bw", "MiB/s", 1, true}
	FigureClat  = Figure{"clat", "mean completion latency, ms", 1e-6, false}
	FigureFsync = Figure{"fsync", "fsync latency, ms", 1e-6, false}
)

// seqFrom is the block size from which a job is read by its bandwidth, as
// Lab 19's 1M sequential jobs are.
const seqFrom = 128 << 10

// LabFigure is the figure a group is read by, from its options (of the
// first run): a job that flushes by its fsync latency; one at depth 1 by
// its mean completion latency; large blocks by bandwidth; the rest by
// IOPS. A figure the files lack (a latency a lab's table did not carry)
// falls back to IOPS, which every group has.
func LabFigure(g *Group) Figure {
	o := g.Options
	switch {
	case (o["fsync"] != "" && o["fsync"] != "0" || o["fdatasync"] != "" && o["fdatasync"] != "0") && g.FsyncMeanNs != nil:
		return FigureFsync
	case depth(o) == 1 && g.ClatMeanNs != nil:
		return FigureClat
	}
	if bs, ok := ParseSize(o["bs"]); ok && bs >= seqFrom && o["bssplit"] == "" && o["bsrange"] == "" {
		return FigureBW
	}
	return FigureIOPS
}

// depth is the job's iodepth (fio's default 1).
func depth(o map[string]string) int {
	if o["iodepth"] == "" {
		return 1
	}
	n, err := strconv.Atoi(o["iodepth"])
	if err != nil {
		return 0
	}
	return n
}

// Of is the group's stat for the figure (nil when the group lacks it).
func (f Figure) Of(g *Group) *Stat {
	m, ok := MetricByKey(f.Key)
	if !ok {
		return nil
	}
	return m.Of(g)
}
