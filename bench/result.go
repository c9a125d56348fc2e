package bench

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/pvediskcheck/pvediskcheck/fio"
	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/layers"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// Result is bench's answer (--json encodes it as it is).
type Result struct {
	VMID        int          `json:"vmid"`
	Out         string       `json:"out"`
	Fio         string       `json:"fio_version"`
	Guest       GuestOS      `json:"guest_os"`
	Method      MethodInfo   `json:"method"`
	Disks       []DiskResult `json:"disks"`
	Comparisons []Comparison `json:"comparisons"`
	// Complete: every step of the plan ran; else Missing names the result
	// files not measured and Stopped says why.
	Complete bool     `json:"complete"`
	Missing  []string `json:"missing"`
	Stopped  string   `json:"stopped,omitempty"`
	// LeftInGuest is what the run may have left in the guest (a fio not
	// seen to stop, a test file not removed), each with the command that
	// finishes it.
	LeftInGuest []string `json:"left_in_guest,omitempty"`
	// Histograms says per disk what was done about its latency histogram
	// (--histogram: set for the bench and cleared after, or found set and
	// used as it is); omitted without.
	Histograms []latency.Note `json:"histograms,omitempty"`
	// HistogramsLeft are the latency histograms of pvediskcheck's on the
	// disks that this run did not set (latency.Leftover: a run killed
	// before it could clear them), each with the command that clears it;
	// with or without --histogram, omitted when none.
	HistogramsLeft []latency.Leftover `json:"histograms_left,omitempty"`
	// Summary is fio summary's view of the saved files (the text table).
	Summary *fio.Summary `json:"-"`
}

// MethodInfo is the method as it ran.
type MethodInfo struct {
	Jobs     []string `json:"jobs"`
	Runs     int      `json:"runs"`
	RuntimeS int      `json:"runtime_s"`
	RampS    int      `json:"ramp_s"`
	Size     string   `json:"size"`
}

// DiskResult is one disk's numbers.
type DiskResult struct {
	ID       string      `json:"id"`
	Settings Settings    `json:"settings"`
	Target   Target      `json:"target"`
	Jobs     []JobResult `json:"jobs"`
	// Evidence lists the kinds the node could not observe for this disk.
	Evidence []Evidence `json:"evidence"`
}

// JobResult is one job on one disk over its runs: mean and spread.
type JobResult struct {
	Name     string   `json:"name"`
	Workload string   `json:"workload"`
	Dir      string   `json:"direction"`
	Runs     []string `json:"runs"` // the result files
	IOPS     fio.Stat `json:"iops"`
	MiBps    fio.Stat `json:"mibps"`
	// Figure is what Lab 19's summary table reads the job by (fio.LabFigure),
	// the one its chart in --report shows and its pairs are judged on first.
	Figure   fio.Figure `json:"figure"`
	ClatMean *fio.Stat  `json:"clat_mean_ns,omitempty"`
	LatMean  *fio.Stat  `json:"lat_mean_ns,omitempty"`
	P99      *fio.Stat  `json:"p99_ns,omitempty"`
	P99Of    string     `json:"p99_of,omitempty"`
	Fsync    *fio.Stat  `json:"fsync_mean_ns,omitempty"`
	// QEMULatencyMs is QEMU's own latency percentiles of the job's
	// requests, from latency histograms (--histogram), by kind and
	// percentile ("write_p99"), each over the runs that have it: fio's p99
	// is the guest's, and the gap between the two is the path from the
	// guest's driver to QEMU's block layer. Omitted without --histogram;
	// QEMULatencyWhy says why a run had none.
	QEMULatencyMs  map[string]fio.Stat `json:"qemu_latency_ms,omitempty"`
	QEMULatencyWhy string              `json:"qemu_latency_why,omitempty"`
	// Evidence is what the node saw that taints these numbers.
	Evidence []Evidence    `json:"evidence"`
	Warnings []fio.Warning `json:"warnings"`
	// Layers are each run's latency split over QEMU and the node device
	// and the layer that adds most (package layers: a job limited by a
	// limit, by the storage, by QEMU), in run order; the guest's layer is
	// not read (fio's figures are the guest's).
	Layers []layers.Split `json:"layers"`
}

// Comparison is one pair of disks on one job and metric, with fio
// compare's verdict.
type Comparison struct {
	A       string      `json:"a"`
	B       string      `json:"b"`
	Job     string      `json:"job"`
	Dir     string      `json:"direction"`
	Metric  string      `json:"metric"`
	Verdict fio.Verdict `json:"verdict"`
	DiffPct float64     `json:"diff_pct"`
	Better  string      `json:"better,omitempty"` // the disk id, when different
}

// Summarise turns what ran into the result: fio's statistics per disk and
// job (the files' own, as fio summary reads them), the evidence per run
// folded per job, every pair of disks compared.
func Summarise(m Method, disks []Disk, out *Outcome, hostRAM int64) *Result {
	r := &Result{Disks: []DiskResult{}, Comparisons: []Comparison{}, Missing: []string{}, Complete: out.Err == nil && len(out.Missing) == 0}
	r.Method = MethodInfo{Runs: m.Runs, RuntimeS: int(m.Runtime / time.Second), RampS: int(m.Ramp / time.Second), Size: m.Size}
	for _, j := range m.Jobs {
		r.Method.Jobs = append(r.Method.Jobs, j.Name)
	}
	for _, s := range out.Missing {
		r.Missing = append(r.Missing, s.File())
	}
	if out.Err != nil {
		r.Stopped = out.Err.Error()
	}
	r.LeftInGuest = out.Left
	var results []*fio.Result
	for _, d := range out.Done {
		results = append(results, d.Res)
	}
	sum := fio.Summarize(results, fio.Options{GroupBy: fio.GroupName, HostRAMBytes: hostRAM})
	r.Summary = sum
	groups := map[string][]fio.Group{}
	for _, d := range disks {
		dr := DiskResult{ID: d.ID, Settings: d.Settings, Target: d.Target, Jobs: []JobResult{}}
		var obs []Observed
		for i := range sum.Groups {
			g := &sum.Groups[i]
			if g.Label != d.ID {
				continue
			}
			groups[d.ID] = append(groups[d.ID], *g)
			var runs []Observation
			jr := JobResult{Name: g.Job, Workload: g.Workload, Dir: g.Dir, Runs: g.Files, IOPS: g.IOPS, MiBps: g.BandwidthMiBps,
				Figure: fio.LabFigure(g), ClatMean: g.ClatMeanNs, LatMean: g.LatMeanNs, P99: g.P99Ns, P99Of: g.P99Of, Fsync: g.FsyncMeanNs, Evidence: []Evidence{}, Warnings: g.Warnings, Layers: []layers.Split{}}
			for _, sr := range out.Done {
				if sr.Step.Disk != d.ID || sr.Step.Job.Name != g.Job || !hasFile(g.Files, sr.File) {
					continue
				}
				obs = append(obs, Observed{sr.Step.Job, sr.Obs})
				runs = append(runs, sr.Obs)
				jr.Evidence = merge(jr.Evidence, sr.Step.Run, Judge(sr.Step.Job, d.Facts, sr.Obs, measured(sr.Res)))
				jr.Layers = append(jr.Layers, Layers(d.Facts, sr.Obs, measured(sr.Res)))
			}
			jr.QEMULatencyMs, jr.QEMULatencyWhy = qemuLatency(runs, jobKinds(m, g.Job))
			dr.Jobs = append(dr.Jobs, jr)
		}
		dr.Evidence = Unseen(d.Facts, obs)
		r.Disks = append(r.Disks, dr)
	}
	for i := range disks {
		for j := i + 1; j < len(disks); j++ {
			a, b := disks[i].ID, disks[j].ID
			for _, c := range fio.Compare(groups[a], groups[b], nil).Rows {
				pc := Comparison{A: a, B: b, Job: c.Job, Dir: c.Dir, Metric: c.Metric, Verdict: c.Verdict, DiffPct: c.DiffPct}
				switch c.Better {
				case "A":
					pc.Better = a
				case "B":
					pc.Better = b
				}
				r.Comparisons = append(r.Comparisons, pc)
			}
		}
	}
	return r
}

// FigureStat is the job's figure over its runs (IOPS when it lacks it).
func (j JobResult) FigureStat() fio.Stat {
	var st *fio.Stat
	switch j.Figure.Key {
	case "bw":
		st = &j.MiBps
	case "clat":
		st = j.ClatMean
	case "fsync":
		st = j.Fsync
	}
	if st == nil {
		return j.IOPS
	}
	return *st
}

// MsText is a latency in ms over runs: "1.2ms (±4%)", "-" without runs.
func MsText(s fio.Stat) string {
	if s.N == 0 {
		return "-"
	}
	v := units.Duration(time.Duration(s.Mean * float64(time.Millisecond)))
	if s.N > 1 {
		v += fmt.Sprintf(" (±%.0f%%)", s.SpreadPct)
	}
	return v
}

// QEMULatencyLines is the job's QEMU percentiles, a line per kind ("write
// p50 328ms (±0%), p95 343ms (±0%), p99 344ms (±0%)"), reads first; none
// without --histogram.
func (j JobResult) QEMULatencyLines() []string {
	var out []string
	for _, k := range latency.Kinds {
		p50, ok := j.QEMULatencyMs[string(k)+"_p50"]
		if !ok {
			continue
		}
		out = append(out, fmt.Sprintf("%s p50 %s, p95 %s, p99 %s", k, MsText(p50), MsText(j.QEMULatencyMs[string(k)+"_p95"]), MsText(j.QEMULatencyMs[string(k)+"_p99"])))
	}
	return out
}

// jobKinds are the request kinds a job makes (a read job reads, a write
// job writes, an fsync job writes and flushes): QEMU's percentiles of
// another kind during it are another's requests (the guard's probe before
// fio, the guest's own), not the job's.
func jobKinds(m Method, name string) []latency.Kind {
	i := slices.IndexFunc(m.Jobs, func(j Job) bool { return j.Name == name })
	if i < 0 {
		return latency.Kinds
	}
	j := m.Jobs[i]
	var k []latency.Kind
	if j.Read() {
		k = append(k, latency.Read)
	}
	if j.Write() || j.Fsync() {
		k = append(k, latency.Write)
	}
	if j.Fsync() {
		k = append(k, latency.Flush)
	}
	return k
}

// qemuLatency folds the runs' percentiles of kinds by kind and percentile
// ("read_p50" ... "flush_p99"), each over the runs that have it; the first
// reason a run had none; nil and "" when no run was observed for them.
func qemuLatency(runs []Observation, kinds []latency.Kind) (map[string]fio.Stat, string) {
	vals := map[string][]float64{}
	why := ""
	for _, o := range runs {
		if o.Latency == nil {
			if why == "" {
				why = o.LatencyWhy
			}
			continue
		}
		for _, k := range kinds {
			p50, p95, p99 := o.Latency.Of(k)
			for _, q := range []struct {
				name string
				v    *float64
			}{{"p50", p50}, {"p95", p95}, {"p99", p99}} {
				if q.v != nil {
					vals[string(k)+"_"+q.name] = append(vals[string(k)+"_"+q.name], *q.v)
				}
			}
		}
	}
	if len(vals) == 0 {
		return nil, why
	}
	out := map[string]fio.Stat{}
	for k, v := range vals {
		out[k] = fio.NewStat(v)
	}
	return out, why
}

func hasFile(files []string, f string) bool {
	for _, x := range files {
		if filepath.Clean(x) == filepath.Clean(f) {
			return true
		}
	}
	return false
}

// measured is a run's rates summed over its jobs, for the limit rule.
func measured(res *fio.Result) Measured {
	var m Measured
	if res == nil {
		return m
	}
	for _, j := range res.Jobs {
		if qd, err := strconv.ParseFloat(j.Options["iodepth"], 64); err == nil && qd > 0 {
			if ms := max(j.Read.RuntimeMs, j.Write.RuntimeMs); ms > 0 {
				m.InFlightIOPS += qd / (float64(ms) / 1000)
			}
		}
		m.ReadIOPS += j.Read.IOPS
		m.WriteIOPS += j.Write.IOPS
		m.ReadBytes += j.Read.BandwidthBps
		m.WriteBytes += j.Write.BandwidthBps
	}
	return m
}
