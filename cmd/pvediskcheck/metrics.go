package main

import (
	"fmt"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/metrics"
	"github.com/pvediskcheck/pvediskcheck/outfile"
	"github.com/pvediskcheck/pvediskcheck/units"
)

func init() {
	commands = append(commands, command{new: metricsCommand, cluster: clusterRole{
		Local: "each node's exporter (or textfile) reports its own VMs; the scraper joins the nodes",
	}})
}

func metricsCommand() *cli.Command {
	return &cli.Command{
		Name:        "metrics",
		Usage:       "what every disk of the node's VMs runs with, its counters, limits and check findings, as Prometheus metrics",
		Description: helpText("metrics"),
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "textfile", Usage: "write `DIR`/" + metrics.TextfileName + " (atomically) for node_exporter's textfile collector, then exit", TakesFile: true},
			&cli.StringFlag{Name: "listen", Usage: "serve /metrics on ADDR (host:port) until interrupted"},
			maxDuration(&cli.DurationFlag{Name: "deadline", Value: metrics.DefaultDeadline, Usage: "with --listen: the most one collection may take"}, metrics.MaxDeadline),
			maxInt(&cli.IntFlag{Name: "parallel", Value: metrics.DefaultParallel, Usage: "VMs read at once"}, metrics.MaxParallel),
			stallAfterFlag(),
			captureFlag(),
			&cli.BoolFlag{Name: "guest", Usage: "ask each running VM's guest agent (agent: 1) once per collection for its filesystems (guest-get-disks, guest-get-fsinfo: read-only): their use per disk and what a trim would give back"},
			&cli.BoolFlag{Name: "histogram", Usage: "with --listen, CHANGES QEMU STATE: set latency histograms on every running disk and export them (one found set is used as it is); cleared on exit"},
		}, policyFlags()...),
		Action: metricsAction,
	}
}

func metricsAction(c *cli.Context) error {
	e := newEnv(c)
	if c.NArg() > 0 {
		return exitcode.Usagef("metrics takes no arguments (it covers every VM of the node): %s", units.Clip(c.Args().First(), 40))
	}
	if e.json {
		return exitcode.Usagef("metrics prints Prometheus' text format; --json does not apply")
	}
	dir, addr := c.String("textfile"), c.String("listen")
	if c.IsSet("textfile") && c.IsSet("listen") {
		return exitcode.Usagef("metrics: give --textfile or --listen, not both")
	}
	if d := c.Duration("deadline"); d <= 0 {
		return exitcode.Usagef("--deadline %s: give a positive duration, e.g. 8s", d)
	}
	pol, err := loadPolicy(c, e)
	if err != nil {
		return err
	}
	o := metrics.Options{Parallel: c.Int("parallel"), StallAfter: c.Duration("stall-after"), Policy: pol, Guest: c.Bool("guest")}
	if err := metrics.Validate(e.paths, o); err != nil {
		return err
	}
	if c.Bool("histogram") && !c.IsSet("listen") {
		return exitcode.Usagef("--histogram needs --listen: a histogram counts from when it is set, so a one-shot run would set it and clear it again with nothing counted")
	}
	var textfile *outfile.File
	if c.IsSet("textfile") {
		if textfile, err = metrics.CheckTextfile(dir); err != nil {
			return err
		}
	}
	k, err := stallKeeper(c, e)
	if err != nil {
		return err
	}
	if k != nil {
		var mu sync.Mutex // scrapes may overlap
		o.OnSnapshot = func(s *metrics.Snapshot) {
			mu.Lock()
			defer mu.Unlock()
			now := time.Now()
			for _, v := range s.VMs {
				for _, d := range v.Disks {
					k.Sample(e.ctx(), e.node, now, v.VMID, d.ID, d.Stats, d.Stall.Stalled)
				}
			}
			k.Forget(now)
		}
	}
	o.OnSnapshot = sayHistogramsLeft(e, o.OnSnapshot)
	switch {
	case textfile != nil:
		return metrics.WriteTextfile(textfile, metrics.Collect(e.ctx(), e.node, o))
	case c.IsSet("listen"):
		ln, note, err := metrics.Listen(addr)
		if err != nil {
			return err
		}
		if note != "" {
			fmt.Fprintln(e.errOut, "pvediskcheck: "+note)
		}
		d := c.Duration("deadline")
		if !c.Bool("histogram") {
			return metrics.Serve(e.ctx(), ln, metrics.Handler(e.node, o, d), metrics.ServerTimeouts(d))
		}
		fmt.Fprintln(e.errOut, "pvediskcheck: --histogram: setting QEMU latency histograms on the running disks at the first scrape (one found set is used as it is and left in place); those set are cleared on exit")
		return latency.With(e.ctx(), e.node.Timeout, func(h *latency.Tracker) error {
			o.Histograms = h
			return metrics.Serve(e.ctx(), ln, metrics.Handler(e.node, o, d), metrics.ServerTimeouts(d))
		})
	}
	// The exposition escapes its label values itself (and refuses what
	// cannot be one): written as it is.
	return metrics.WriteText(rawOut(e.out), metrics.Collect(e.ctx(), e.node, o))
}

// sayHistogramsLeft chains to then (nil: nothing) a note on stderr for
// each latency histogram a killed run left (metrics.VM.HistogramsLeft),
// once per VM, disk and clear command for the process: the exposition has
// it as check's latency-histogram-left finding at every scrape, the
// journal of a --listen service gets it once.
func sayHistogramsLeft(e *env, then func(*metrics.Snapshot)) func(*metrics.Snapshot) {
	var mu sync.Mutex
	said := map[latency.Leftover]bool{}
	return func(s *metrics.Snapshot) {
		if then != nil {
			then(s)
		}
		mu.Lock()
		defer mu.Unlock()
		for _, v := range s.VMs {
			for _, l := range v.HistogramsLeft {
				if !said[l] {
					said[l] = true
					fmt.Fprintf(e.errOut, "pvediskcheck: VM %d: %s\n", l.VMID, l.Message())
				}
			}
		}
	}
}
