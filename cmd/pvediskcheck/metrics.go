package main

import (
	"net"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/metrics"
	"github.com/pvediskcheck/pvediskcheck/units"
)

func init() { commands = append(commands, metricsCommand) }

func metricsCommand() *cli.Command {
	return &cli.Command{
		Name:  "metrics",
		Usage: "what every disk of the node's VMs runs with, its counters, limits and check findings, as Prometheus metrics",
		Description: `Collects, for every VM of the node, what the other commands decide, and prints
it in Prometheus' text exposition format: per running disk QEMU's counters
(bytes, requests, time spent, failed requests, discards, discards the storage
accepted), an info series with the cache mode configured and in effect, aio,
the iothread serving the disk and discard, the running I/O limits and whether
they differ from the config; per VM the findings of check (counted by code and
severity) and the CPU time of its QEMU threads by role (main loop, iothreads,
vCPUs, told apart by thread id as top does); the node's thin pools (size,
allocation, metadata, overcommit: the figures of thin). Metric names, labels
and PromQL examples: README, section "metrics".

Without --textfile or --listen the exposition goes to stdout.
--textfile DIR writes DIR/pvediskcheck.prom for node_exporter's textfile
collector (Debian: /var/lib/prometheus/node-exporter) atomically (a temporary
file in DIR, then renamed), and exits; the package's pvediskcheck-metrics.timer
(disabled by default) does this every minute:
   systemctl enable --now pvediskcheck-metrics.timer
--listen ADDR serves /metrics over HTTP and nothing else (nothing it serves
changes anything), collecting anew on each scrape within --deadline (or the
scrape's own timeout, when shorter); scrapes arriving during a collection
share it. No timestamps are exported.

Load: per running VM and collection two short QMP exchanges, one after the
other (the block graph, write caches and limits, as cache does; then the
counters and thread ids), a constant number of commands whatever the number
of disks; lvs (or zfs) once for the thin pools. A VM whose QMP socket stays
busy beyond --timeout (another client holds it) is counted in
pvediskcheck_collect_errors{source="qmp"} and has no disk or CPU series in
that collection: a missing sample, never a zero.

EXAMPLES
   pvediskcheck metrics
   pvediskcheck metrics --textfile /var/lib/prometheus/node-exporter
   pvediskcheck metrics --listen 127.0.0.1:9732

` + exitcode.Help + `
   metrics exits 0 once the exposition is written (or, with --listen, when
   interrupted), whatever it holds: what could not be read is counted in
   pvediskcheck_collect_errors. 2: bad flags, a DIR that is not a directory,
   an ADDR it cannot listen on, a root that is not a Proxmox VE node.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "textfile", Usage: "write DIR/" + metrics.TextfileName + " (atomically) for node_exporter's textfile collector, then exit", TakesFile: true},
			&cli.StringFlag{Name: "listen", Usage: "serve /metrics on ADDR (host:port) until interrupted"},
			&cli.DurationFlag{Name: "deadline", Value: metrics.DefaultDeadline, Usage: "with --listen: the most one collection may take"},
			&cli.IntFlag{Name: "parallel", Value: metrics.DefaultParallel, Usage: "VMs read at once"},
		},
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
	if dir != "" && addr != "" {
		return exitcode.Usagef("metrics: give --textfile or --listen, not both")
	}
	if d := c.Duration("deadline"); d <= 0 {
		return exitcode.Usagef("--deadline %s: give a positive duration, e.g. 8s", d)
	}
	o := metrics.Options{Parallel: c.Int("parallel")}
	if err := metrics.Validate(e.paths, o); err != nil {
		return err
	}
	switch {
	case dir != "":
		if err := metrics.CheckTextfileDir(dir); err != nil {
			return err
		}
		_, err := metrics.WriteTextfile(dir, metrics.Collect(e.ctx(), e.node, o))
		return err
	case addr != "":
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return exitcode.Usagef("--listen %s: %v", units.Clip(addr, 80), err)
		}
		return metrics.Serve(e.ctx(), ln, metrics.Handler(e.node, o, c.Duration("deadline")))
	}
	return metrics.WriteText(e.out, metrics.Collect(e.ctx(), e.node, o))
}
