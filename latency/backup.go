package latency

import (
	"strings"
	"time"

	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// BaselineWindow is how far back before a backup job started a disk's
// write latency is taken as its baseline: the minute before.
const BaselineWindow = time.Minute

// Watch follows one disk's write counters between samples so that, while a
// backup job runs on it, the guest's write latency during the job can be
// set against the same disk's in the minute before the job started. A
// backup's copy-before-write makes a guest write to a block not copied yet
// wait until the old data reached the backup target (or, with fleecing,
// the fleecing image): a slow target shows in the guest's write latency.
// Not safe for concurrent use (one per disk, fed by the one goroutine
// sampling its VM).
type Watch struct {
	pts []point // samples of the last BaselineWindow without a backup job
	job *jobRun
}

type point struct {
	t        time.Time
	ops, ns  int64
	hasStats bool
}

type jobRun struct {
	id       string
	start    point // the last sample before the job was seen
	base     *float64
	baseS    float64
	lastOff  int64
	lastTime time.Time
}

// Impact is a backup job on a disk and what it costs the guest's writes
// (top's rows: backup).
type Impact struct {
	Job  string `json:"job"`  // the job id (query-block-jobs "device")
	Type string `json:"type"` // backup
	// ProgressPct is the job's offset over its length; SpeedBps the bytes
	// it copied per second since the last sample (nil on the first sample
	// of the job).
	ProgressPct *float64 `json:"progress_pct"`
	SpeedBps    *float64 `json:"speed_bps"`
	// WriteLatencyMs is the mean latency of the guest's writes completed
	// since the job started (from the last sample before it); nil when
	// none completed.
	WriteLatencyMs *float64 `json:"write_latency_ms"`
	// BaselineWriteLatencyMs is the mean over the minute before the job
	// started, as far as this run saw it (BaselineS seconds of it); nil
	// when the run did not see the disk before the job, or the guest wrote
	// nothing then.
	BaselineWriteLatencyMs *float64 `json:"baseline_write_latency_ms"`
	BaselineS              float64  `json:"baseline_s"`
	// Fleecing says whether the backup copies the old data of a block the
	// guest overwrites to a fleecing image (FleecingNode, its node in the
	// block graph) instead of waiting for the backup target: true with
	// one, false when the graph shows the job reading the disk itself,
	// null when no block graph was read (the job placed by its name).
	Fleecing     *bool   `json:"fleecing"`
	FleecingNode *string `json:"fleecing_node"`
	// FleecingImages are the volumes the VM's config records as the
	// backup's fleecing images ([special:fleecing], vzdump's; one per
	// disk backed up), which tell the fleecing storage; omitted when none
	// are recorded.
	FleecingImages []string `json:"fleecing_images,omitempty"`
}

// FleecingText is the fleecing part of top's backup line.
func (im *Impact) FleecingText() string {
	switch {
	case im.Fleecing == nil:
		return "fleecing unknown (no block graph)"
	case *im.Fleecing && len(im.FleecingImages) > 0:
		return "fleecing on " + *im.FleecingNode + " (the backup's fleecing images: " + strings.Join(im.FleecingImages, ", ") + ")"
	case *im.Fleecing:
		return "fleecing on " + *im.FleecingNode
	}
	return "no fleecing (guest writes wait for the backup target)"
}

// fleecingOf is a backup job's fleecing as the block graph shows it
// (qmp.JobFleecing): a copy-before-write filter below the job's source
// with a fleecing image as its target.
func fleecingOf(job *qmp.BlockJob) (*bool, *string) {
	if !job.Graphed {
		return nil, nil
	}
	on := job.Fleecing != ""
	if !on {
		return &on, nil
	}
	node := job.Fleecing
	return &on, &node
}

// IsBackup reports whether a block job copies the disk for a backup:
// Proxmox's own backup job and QEMU's blockdev-backup and drive-backup
// (with or without a fleecing image: the job is the same) are all of type
// backup.
func IsBackup(j qmp.BlockJob) bool { return j.Type == "backup" }

// Observe adds the disk's counters at t and the backup job running on it
// (nil when none). It returns the job's impact, nil without a job.
func (w *Watch) Observe(t time.Time, st qmp.BlockStats, job *qmp.BlockJob) *Impact {
	p := point{t: t, ops: st.WrOps, ns: st.WrTotalTimeNs, hasStats: true}
	if job == nil {
		w.job = nil
		if n := len(w.pts); n > 0 && (p.ops < w.pts[n-1].ops || p.ns < w.pts[n-1].ns) {
			w.pts = nil // counters went backwards: another process
		}
		w.pts = append(w.pts, p)
		cut := 0
		for cut < len(w.pts)-1 && t.Sub(w.pts[cut+1].t) >= BaselineWindow {
			cut++
		}
		w.pts = w.pts[cut:]
		return nil
	}
	if w.job == nil || w.job.id != job.ID {
		r := &jobRun{id: job.ID, start: p}
		if n := len(w.pts); n > 0 {
			first, last := w.pts[0], w.pts[n-1]
			r.start = last
			if n > 1 {
				r.baseS = units.Round(last.t.Sub(first.t).Seconds(), 1)
				r.base = meanMs(first, last)
			}
		}
		w.job = r
		w.pts = nil
	}
	r := w.job
	im := &Impact{Job: job.ID, Type: job.Type, BaselineWriteLatencyMs: r.base, BaselineS: r.baseS,
		WriteLatencyMs: meanMs(r.start, p)}
	im.Fleecing, im.FleecingNode = fleecingOf(job)
	if job.Len > 0 {
		v := units.Round(100*float64(job.Offset)/float64(job.Len), 1)
		im.ProgressPct = &v
	}
	if !r.lastTime.IsZero() {
		if sec := t.Sub(r.lastTime).Seconds(); sec > 0 && job.Offset >= r.lastOff {
			v := units.Round(float64(job.Offset-r.lastOff)/sec, 0)
			im.SpeedBps = &v
		}
	}
	r.lastOff, r.lastTime = job.Offset, t
	return im
}

// meanMs is the mean write latency between two points; nil when no write
// completed (or the counters went backwards).
func meanMs(a, b point) *float64 {
	d := b.ops - a.ops
	if d <= 0 || b.ns < a.ns {
		return nil
	}
	v := units.Round(float64(b.ns-a.ns)/float64(d)/1e6, 3)
	return &v
}
