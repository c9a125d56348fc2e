package bench

import (
	"fmt"

	"github.com/pvediskcheck/pvediskcheck/fioreport"
)

// HTML renders the result as a self-contained page (fioreport): a chart
// per job with a bar per disk, the pairs' IOPS verdicts, the evidence,
// QEMU's percentiles (--histogram) and the settings as they ran.
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
				pj.Bars = append(pj.Bars, fioreport.Bar{Label: d.ID, IOPS: j.IOPS, P99: j.P99, Marks: m, Series: len(pj.Bars)})
				for _, l := range j.QEMULatencyLines() {
					pj.Notes = append(pj.Notes, d.ID+": QEMU's latency (histogram, at the node): "+l)
				}
			}
		}
		for _, c := range r.Comparisons {
			if c.Job == job && c.Metric == "iops" {
				pj.Pairs = append(pj.Pairs, fioreport.Pair{A: c.A, B: c.B, Metric: "IOPS", DiffPct: c.DiffPct, Verdict: c.Verdict, Better: c.Better})
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
