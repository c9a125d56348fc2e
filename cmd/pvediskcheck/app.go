package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// command is one subcommand as its file registers it in init(): its
// urfave/cli definition and what it declares about itself for cluster mode.
// new is a constructor: every run builds its commands afresh, so no parsed
// state is shared between runs (tests call run many times in one process).
type command struct {
	new     func() *cli.Command
	cluster clusterRole
}

// commands lists every subcommand; each file adds its own.
var commands []command

func newApp(stdout, stderr io.Writer) *cli.App {
	app := &cli.App{
		Name:                 "pvediskcheck",
		Usage:                "what a Proxmox VE VM's disks really run with, proven by measurement",
		Version:              version,
		Description:          helpText("pvediskcheck"),
		Writer:               stdout,
		ErrWriter:            stderr,
		EnableBashCompletion: true,
		HideHelpCommand:      true,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "root", Value: "/", EnvVars: []string{"PVEDISKCHECK_ROOT"}, Usage: "node filesystem root; every host path derives from it (a copied support bundle works)"},
			&cli.StringFlag{Name: "proc", Usage: "procfs mount (default ROOT/proc)"},
			&cli.StringFlag{Name: "sys", Usage: "sysfs mount (default ROOT/sys)"},
			maxDuration(&cli.DurationFlag{Name: "timeout", Value: 5 * time.Second, Usage: "deadline for every socket exchange and external command"}, node.MaxTimeout),
			&cli.BoolFlag{Name: "json", Usage: "print JSON instead of a table (schemas in /usr/share/doc/pvediskcheck/json.md.gz)"},
			&cli.BoolFlag{Name: "no-color", EnvVars: []string{"NO_COLOR"}, Usage: "never colour output (colour is only used on a terminal)"},
		},
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
	var roles map[string]clusterRole
	app.Commands, roles = newCommands()
	wireCluster(app, roles)
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
	return runApp(ctx, newApp(stdout, stderr), args, stdout, stderr)
}

func runApp(ctx context.Context, app *cli.App, args []string, stdout, stderr io.Writer) int {
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

// newCommands builds the commands and what each declares, by name.
func newCommands() ([]*cli.Command, map[string]clusterRole) {
	out := make([]*cli.Command, len(commands))
	roles := make(map[string]clusterRole, len(commands))
	for i, c := range commands {
		out[i] = c.new()
		roles[out[i].Name] = c.cluster
	}
	return out, roles
}
