package zfs

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/node"
)

// ARC is the ZFS adaptive replacement cache as /proc/spl/kstat/zfs/arcstats
// reports it: counters since the module was loaded, not over a window.
type ARC struct {
	Hits   int64 `json:"hits"`
	Misses int64 `json:"misses"`
	// HitPercent is hits / (hits + misses); nil before any read.
	HitPercent *float64 `json:"hit_percent"`
	SizeBytes  int64    `json:"size_bytes"`
	MaxBytes   int64    `json:"max_bytes"` // c_max: what the ARC may grow to
	// DemandDataHits and DemandDataMisses count the reads of data a
	// consumer asked for (a zvol's reads among them), without prefetch
	// and metadata; HasDemandData is false when arcstats lacks them.
	DemandDataHits   int64 `json:"demand_data_hits"`
	DemandDataMisses int64 `json:"demand_data_misses"`
	HasDemandData    bool  `json:"-"`
}

// DataReads are the demand data hits and misses from a to b (b read
// after a); ok is false when either lacks them or a counter went
// backwards (the zfs module reloaded).
func DataReads(a, b ARC) (hits, misses int64, ok bool) {
	hits, misses = b.DemandDataHits-a.DemandDataHits, b.DemandDataMisses-a.DemandDataMisses
	if !a.HasDemandData || !b.HasDemandData || hits < 0 || misses < 0 {
		return 0, 0, false
	}
	return hits, misses, true
}

// ArcstatsPath is the kstat file below a procfs mount.
func ArcstatsPath(proc string) string { return filepath.Join(proc, "spl/kstat/zfs/arcstats") }

// ParseArcstats reads a kstat file: a header line, a "name type data"
// line, then one "<name> <type> <value>" line per counter.
func ParseArcstats(b []byte) (ARC, error) {
	var a ARC
	vals := map[string]int64{}
	for i, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if i < 2 || len(f) != 3 {
			continue
		}
		n, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			continue // not a number counter (kstat type 7 strings, none here)
		}
		vals[f[0]] = n
	}
	for _, k := range []string{"hits", "misses", "size", "c_max"} {
		if _, ok := vals[k]; !ok {
			return a, fmt.Errorf("%w: arcstats has no %s", ErrParse, k)
		}
	}
	a.Hits, a.Misses, a.SizeBytes, a.MaxBytes = vals["hits"], vals["misses"], vals["size"], vals["c_max"]
	dh, okH := vals["demand_data_hits"]
	dm, okM := vals["demand_data_misses"]
	if okH && okM {
		a.DemandDataHits, a.DemandDataMisses, a.HasDemandData = dh, dm, true
	}
	if t := a.Hits + a.Misses; t > 0 {
		p := float64(a.Hits) * 100 / float64(t)
		a.HitPercent = &p
	}
	return a, nil
}

// ReadARC reads the node's arcstats (n.ReadFile, below --proc). A node
// without the ZFS module has no such file: the error says so.
func ReadARC(ctx context.Context, n node.Node) (ARC, error) {
	b, err := n.ReadFile(ctx, ArcstatsPath(n.Paths.Proc))
	if err != nil {
		return ARC{}, err
	}
	return ParseArcstats(b)
}
