package bench

import (
	"fmt"

	"github.com/pvediskcheck/pvediskcheck/fio"
	"github.com/pvediskcheck/pvediskcheck/fioreport"
	"github.com/pvediskcheck/pvediskcheck/layers"
)

// HTML renders the result as a self-contained page (fioreport): a chart
// per job with a bar per disk by the figure Lab 19 reads the job by, the
// pairs' verdicts on that figure (then the others of Lab 19's table), the
// evidence, QEMU's percentiles (--histogram) and the settings as they ran.
func HTML(r *Result) []byte {
	p := fioreport.Page{Title: fmt.Sprintf("pvediskcheck bench VM %d", r.VMID),
		Heading: fmt.Sprintf("VM %d: %s in the guest, %d run(s) per job, %ds + %ds ramp, area %s",
			r.VMID, r.Fio, r.Method.Runs, r.Method.RuntimeS, r.Method.RampS, r.Method.Size),
		FooterTitle: "Settings as they ran", Last: "Raw fio JSON: " + r.Out}
	if !r.Complete {
		p.Alert = fmt.Sprintf("Incomplete: %d run(s) not measured: %s", len(r.Missing), r.Stopped)
	}
	for _, job := range r.jobNames() {
		pj := fioreport.Job{Name: job}
		for _, d := range r.Disks {
			for _, j := range d.Jobs {
				if j.Name != job {
					continue
				}
				var m []string
				for _, x := range j.Evidence {
					m = append(m, string(x.Kind))
					pj.Evidence = append(pj.Evidence, d.ID+": "+x.Text())
				}
				if len(pj.Bars) == 0 {
					pj.Figure = j.Figure
				}
				pj.Bars = append(pj.Bars, fioreport.Bar{Label: d.ID, Value: j.FigureStat(), P99: j.P99, Marks: m, Series: len(pj.Bars)})
				// Where the job's time went, per run (the layer verdict; a
				// run without one, idle or unknown, is in the JSON).
				for i, sp := range j.Layers {
					if sp.Says != "" && sp.Verdict != layers.Unknown && sp.Verdict != layers.Idle {
						pj.Notes = append(pj.Notes, fmt.Sprintf("%s run %d: where the time went: %s", d.ID, i+1, sp.Says))
					}
				}
				for _, l := range j.QEMULatencyLines() {
					pj.Notes = append(pj.Notes, d.ID+": QEMU's latency (histogram, at the node): "+l)
				}
			}
		}
		// The job's own figure first, then the rest of Lab 19's table.
		key := pj.Figure.Key
		if key == "" {
			key = "iops"
		}
		for _, first := range []bool{true, false} {
			for _, c := range r.Comparisons {
				if c.Job != job || (c.Metric == key) != first || !labTable[c.Metric] {
					continue
				}
				m, _ := fio.MetricByKey(c.Metric)
				pj.Pairs = append(pj.Pairs, fioreport.Pair{A: c.A, B: c.B, Metric: m.Title, DiffPct: c.DiffPct, Verdict: c.Verdict, Better: c.Better})
			}
		}
		p.Jobs = append(p.Jobs, pj)
	}
	for _, d := range r.Disks {
		p.Footer = append(p.Footer, fioreport.Line{Bold: d.ID, Text: d.Settings.Text()})
		for _, x := range d.Evidence {
			p.Footer = append(p.Footer, fioreport.Line{Bold: d.ID, Text: string(x.Kind) + " " + x.Message, Absent: true})
		}
	}
	return fioreport.HTML(p)
}

// labTable: the figures of Lab 19's summary table, which the report's
// pairs are judged on.
var labTable = map[string]bool{"iops": true, "bw": true, "clat": true, "fsync": true}

func (r *Result) jobNames() []string {
	var names []string
	seen := map[string]bool{}
	for _, d := range r.Disks {
		for _, j := range d.Jobs {
			if !seen[j.Name] {
				seen[j.Name] = true
				names = append(names, j.Name)
			}
		}
	}
	return names
}
