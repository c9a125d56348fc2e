package flush

import "math"

// Row is one row of a measurement's series as it is shown: a stretch
// without samples (Gap), or what changed since the row before it.
type Row struct {
	// TimeS is the row's second, or the sample's own time when it is off
	// the whole second (Whole false): the last sample before a gap, or the
	// one that closes the window.
	TimeS float64
	Whole bool
	// The disks' bytes written, flushes and flush time since the row
	// before, and the node's Dirty and Writeback at the sample.
	WrittenBytes, Flushes, FlushTimeNs int64
	DirtyBytes, WritebackBytes         int64
	Gap                                *Gap // a stretch without samples; nothing else is set
}

// earlyS is how early a sample may be read and still stand for its second.
const earlyS = 0.05

// Rows is the series one row per second of the window (the changes since
// the row before), the last sample before each stretch without samples,
// that stretch, and the sample that closes the window.
func (r *Result) Rows() []Row {
	var rows []Row
	gaps := r.Gaps
	if len(r.Samples) > 0 {
		prev := r.Samples[0]
		lastRow := 0.0 // the second of the row before
		for i, s := range r.Samples[1:] {
			for len(gaps) > 0 && gaps[0].ToS <= s.TimeS+earlyS {
				rows = append(rows, Row{Gap: &gaps[0]})
				gaps = gaps[1:]
			}
			sec := math.Floor(s.TimeS + earlyS)
			beforeGap := len(gaps) > 0 && math.Abs(gaps[0].FromS-s.TimeS) < earlyS
			closing := i == len(r.Samples)-2
			if sec <= lastRow && !beforeGap && !closing {
				continue // one row per second
			}
			row := Row{TimeS: sec, Whole: true, DirtyBytes: s.DirtyBytes, WritebackBytes: s.WritebackBytes}
			if (beforeGap || closing) && s.TimeS-sec > earlyS {
				row.TimeS, row.Whole = s.TimeS, false // a gap or the end is next
			}
			for id, d := range s.Disks {
				p := prev.Disks[id]
				row.WrittenBytes += d.WrBytes - p.WrBytes
				row.Flushes += d.FlushOps - p.FlushOps
				row.FlushTimeNs += d.FlushTotalTimeNs - p.FlushTotalTimeNs
			}
			rows = append(rows, row)
			prev, lastRow = s, math.Max(sec, lastRow)
		}
	}
	for i := range gaps {
		rows = append(rows, Row{Gap: &gaps[i]})
	}
	return rows
}
