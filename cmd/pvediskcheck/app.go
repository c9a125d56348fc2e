package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// commands lists every subcommand; each file adds its own in init().
// Each is a constructor: every run builds its commands afresh, so no parsed
// state is shared between runs (tests call run many times in one process).
var commands []func() *cli.Command

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:    "pvediskcheck",
		Usage:   "what a Proxmox VE VM's disks really run with, proven by measurement",
		Version: version,
		Description: `pvediskcheck answers from the node, for one VM or all of them: which cache mode
each disk really runs with (cache), which settings will fail at the next start, are
silently ignored or differ from what runs (check), whether the guest's flushes are
honoured (flush), whether space the guest trims goes back to the storage (discard),
whether I/O limits hold (limit), how full and overcommitted thin pools are (thin), how
far fio results can be trusted (fio), live, which VM disk is busy, how slow it is and
which QEMU thread serves it (top), and all of it as Prometheus metrics for the
monitoring a fleet already runs (metrics).

It reads the VM config, the running QEMU's command line, its QMP and guest agent
sockets (one short exchange at a time: Proxmox's daemons share them), lvs/qm, and host
counters. No API token is needed. Nothing is changed on a VM unless the command's job
is to change it (limit with values, discard --trim, flush --trigger), and such a
command says what it changed. JSON schemas: /usr/share/doc/pvediskcheck/README.md.gz.

In a cluster, a VM of another node (/etc/pve/.vmlist) is answered by that node,
and check --all --cluster and thin --cluster ask every node at once. Nodes are
reached the way Proxmox's own tools reach them: /usr/bin/ssh -e none -o
BatchMode=yes -o HostKeyAlias=NODE root@IP (the IP from /etc/pve/.members), with
every argument validated and quoted; PVEDISKCHECK_SSH names another program that
takes the same arguments. Every node needs the same pvediskcheck.

EXAMPLES
   pvediskcheck cache 370
   pvediskcheck check --all
   pvediskcheck check --all --cluster
   pvediskcheck limit 370 scsi1 --mbps-wr 20 --verify
   pvediskcheck flush 370 --trigger
   pvediskcheck top
   pvediskcheck metrics --listen 127.0.0.1:9732

` + exitcode.Help,
		Writer:               stdout,
		ErrWriter:            stderr,
		EnableBashCompletion: true,
		HideHelpCommand:      true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "root", Value: "/", EnvVars: []string{"PVEDISKCHECK_ROOT"}, Usage: "node filesystem root; every host path derives from it (a copied support bundle works)"},
			&cli.StringFlag{Name: "proc", Usage: "procfs mount (default ROOT/proc)"},
			&cli.StringFlag{Name: "sys", Usage: "sysfs mount (default ROOT/sys)"},
			&cli.DurationFlag{Name: "timeout", Value: 5 * time.Second, Usage: "deadline for every socket exchange and external command"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON instead of a table (schemas in README)"},
			&cli.BoolFlag{Name: "no-color", EnvVars: []string{"NO_COLOR"}, Usage: "never colour output (colour is only used on a terminal)"},
		},
		Commands: newCommands(),
		Before: func(c *cli.Context) error {
			if d := c.Duration("timeout"); d <= 0 {
				return exitcode.Usagef("--timeout %s: give a positive duration, e.g. 5s", d)
			}
			return clusterBefore(c)
		},
		ExitErrHandler: func(*cli.Context, error) {},
		OnUsageError: func(c *cli.Context, err error, isSub bool) error {
			return exitcode.Usagef("%s", units.Line(err.Error(), 200))
		},
		// Reached only when the first argument is not a command.
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return exitcode.Usagef("unknown command %s (pvediskcheck --help lists the commands)", units.Clip(c.Args().First(), 40))
			}
			return cli.ShowAppHelp(c)
		},
	}
	wireCluster(app)
	for _, c := range app.Commands {
		if c.OnUsageError == nil {
			c.OnUsageError = app.OnUsageError
		}
		for _, s := range c.Subcommands {
			if s.OnUsageError == nil {
				s.OnUsageError = app.OnUsageError
			}
		}
	}
	return app
}

// maxErrorLine bounds the error line on stderr (whatever raised it).
const maxErrorLine = 500

// run is main without os.Exit, for tests: the one place where an error
// becomes an exit code and a line on stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	app := newApp(stdout, stderr)
	err := app.RunContext(ctx, interspersed(app, args))
	if err != nil && ctx.Err() != nil && exitcode.Of(err) != exitcode.Usage {
		err = exitcode.Wrap(exitcode.Unreachable, "interrupted", err)
	}
	if r := replying(app); r != nil {
		return r.finish(stdout, err)
	}
	if msg := exitcode.Message(err); msg != "" {
		// One line, and never kilobytes of echoed input.
		fmt.Fprintln(stderr, "pvediskcheck: "+units.Line(msg, maxErrorLine))
	}
	return int(exitcode.Of(err))
}

func newCommands() []*cli.Command {
	out := make([]*cli.Command, len(commands))
	for i, c := range commands {
		out[i] = c()
	}
	return out
}
