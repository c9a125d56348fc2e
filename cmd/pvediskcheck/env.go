package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// env is what every command needs from the global flags.
type env struct {
	c       *cli.Context
	node    node.Node // what capabilities get: paths, runner, timeout
	paths   node.Paths
	runner  node.Runner
	timeout time.Duration
	json    bool
	// out and errOut are the command's stdout and stderr through textOut:
	// text from outside is printed escaped (render.go).
	out    io.Writer
	errOut io.Writer
	color  bool
	// onSample is runWith's hook, called after each sample of a window
	// (windowProgress); nil outside tests.
	onSample sampler.OnSample
	// files are the file flags' files, read once per run (readFileArg).
	files map[string]fileArg
}

func newEnv(c *cli.Context) *env {
	e := &env{
		c:       c,
		paths:   node.NewPaths(c.String("root"), c.String("proc"), c.String("sys")),
		timeout: c.Duration("timeout"),
		json:    c.Bool("json"),
		out:     newTextOut(c.App.Writer),
		errOut:  newTextOut(c.App.ErrWriter),
	}
	e.node = node.New(e.paths, e.timeout)
	configOnlyView(c, e)
	e.timeout, e.runner = e.node.Timeout, e.node.Runner
	e.color = !c.Bool("no-color") && isTerminal(e.out)
	e.onSample, _ = c.App.Metadata[onSampleMeta].(sampler.OnSample)
	return e
}

func (e *env) ctx() context.Context { return e.c.Context }

// printJSON writes v indented, with a trailing newline: JSON escapes what
// it holds itself (a control character is \u001b), so it is written as it
// is, not through textOut.
func (e *env) printJSON(v any) error {
	enc := json.NewEncoder(rawOut(e.out))
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// show is a command's answer: the capability's type as it is with --json
// (printJSON), else its text view.
func show[T any](e *env, v T, text func(*env, T)) error {
	if e.json {
		return e.printJSON(v)
	}
	text(e, v)
	return nil
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := rawOut(w).(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// vmidArg parses the first argument as a VMID (exit 2 when bad).
func vmidArg(c *cli.Context) (int, error) {
	if c.NArg() < 1 {
		return 0, exitcode.Usagef("%s: missing VMID (usage: pvediskcheck %s %s)", c.Command.Name, c.Command.Name, c.Command.ArgsUsage)
	}
	return qemuserver.ParseVMID(c.Args().First())
}

// loadVM loads a VM; its errors carry their exit codes (no config or a
// config that does not parse: 2; anything else: 3).
func loadVM(e *env, vmid int) (*vm.VM, error) {
	v, err := vm.LoadNode(e.ctx(), e.node, vmid)
	if err != nil && exitcode.Of(err) == exitcode.Unreachable {
		return nil, exitcode.Wrap(exitcode.Unreachable, fmt.Sprintf("VM %d", vmid), err)
	}
	return v, err
}

// qmpErrMsg says what went wrong talking to the VM's QEMU.
func qmpErrMsg(vmid int, err error) string { return vm.QMPError(vmid, err).Error() }
