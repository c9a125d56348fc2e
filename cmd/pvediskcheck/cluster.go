package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/cluster"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// Cluster mode, wired around the commands from what each declares
// (clusterRole, in its own file): a VMID that lives on another node is
// answered by that node (Forward); a command that asks nodes (Ask: check,
// thin) gets --cluster, and prints the merged answers with its own view; a
// node asked by another answers with one cluster.Reply. What is decided
// (pmxcfs, which node answers, validation, quoting, SSH, the merge and
// reading it back, the exit codes) is package cluster's; this file reads
// flags, wires and prints what a node answered.

// configOnlyFlag makes this node answer for another node that did not
// answer, from that node's configs in pmxcfs (hidden, as --cluster-reply).
const configOnlyFlag = "cluster-config-only"

// envSSH names a program used instead of /usr/bin/ssh, with its arguments.
const envSSH = "PVEDISKCHECK_SSH"

// clusterRole is what a command declares about itself for cluster mode,
// in its own file next to its urfave/cli definition; wireCluster reads it
// and names no command. Every command declares exactly one of the three
// (TestEveryCommandDeclaresClusterRole): one that declares nothing would
// answer "no such VM" for a VM on another node.
type clusterRole struct {
	// Forward: a VM command (VMID, then disks) that the node running the
	// VM answers. It says whether a run with these flags changes something
	// (the answer then says the command acted there).
	Forward func(c *cli.Context) (changes bool)
	// Runs, when set, is how long a forwarded run with these flags may
	// take, where that is more than its duration flags add up to (bench:
	// every job of every disk, several times).
	Runs func(c *cli.Context) time.Duration
	// Ask: the command asks other nodes itself (--cluster, or VMIDs of
	// other nodes) and merges their answers.
	Ask *clusterAsk
	// Local: why the command answers for this node alone.
	Local string
}

// clusterAsk is a command that asks nodes and merges what they answer.
type clusterAsk struct {
	Usage string       // --cluster's usage line
	Help  string       // the help section cluster mode adds (help/NAME.txt)
	Args  cluster.Args // what its positional arguments are
	// ConfigOnly: the VMs of a node that did not answer are judged here
	// from that node's configs in pmxcfs.
	ConfigOnly bool
	// Route says which nodes to ask and each node's positional arguments;
	// a nil view: this node answers alone (the command runs as usual).
	Route func(c *cli.Context, e *env) (view *cluster.View, nodes []cluster.Member, pos func(node string) []string, err error)
	// Text prints the merged document (cluster.Merge) as the command's
	// view of the nodes' answers.
	Text func(e *env, doc *cluster.Object) error
}

// wireCluster adds cluster mode to the app's commands (called by newApp),
// from what each declares.
func wireCluster(app *cli.App, roles map[string]clusterRole) {
	app.Flags = append(app.Flags,
		&cli.StringFlag{Name: cluster.ReplyFlag, Hidden: true, Usage: "answer NODE's request with one JSON reply (used by cluster mode over SSH)"},
		&cli.StringFlag{Name: configOnlyFlag, Hidden: true, Usage: "answer for NODE from its configs in /etc/pve/nodes/NODE/qemu-server"},
	)
	for _, c := range app.Commands {
		switch r := roles[c.Name]; {
		case r.Forward != nil:
			c.Action = forwardVM(r.Forward, r.Runs, c.Action)
			c.Description = withHelp(c.Description, helpText("cluster-vm"))
		case r.Ask != nil:
			c.Flags = append(c.Flags, &cli.BoolFlag{Name: "cluster", Usage: r.Ask.Usage})
			c.Action = askNodes(r.Ask, c.Action)
			c.Description = withHelp(c.Description, helpText(r.Ask.Help))
		}
	}
}

// withHelp puts a section into a command's description before its
// examples (or before its exit codes, or at the end).
func withHelp(desc, section string) string {
	for _, at := range []string{"EXAMPLES\n", "EXIT CODES\n"} {
		if i := strings.Index(desc, at); i >= 0 {
			return desc[:i] + section + "\n\n" + desc[i:]
		}
	}
	return desc + "\n\n" + section + "\n"
}

// askedByNode: this run answers another node; it never asks further.
func askedByNode(c *cli.Context) bool {
	return c.String(cluster.ReplyFlag) != "" || c.String(configOnlyFlag) != ""
}

// forwardVM runs a VM command on the node the VM lives on when it is not
// this one.
func forwardVM(changes func(*cli.Context) bool, runs func(*cli.Context) time.Duration, next cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		if askedByNode(c) || c.NArg() == 0 {
			return next(c)
		}
		vmid, err := qemuserver.ParseVMID(c.Args().First())
		if err != nil {
			return next(c)
		}
		e := newEnv(c)
		if _, err := os.Stat(e.paths.VMConfig(vmid)); !errors.Is(err, os.ErrNotExist) {
			return next(c)
		}
		view, err := cluster.Load(e.ctx(), e.node)
		g, ok := view.Locate(vmid)
		if err := view.Unknown(vmid, ok, err); err != nil {
			return err
		}
		if !ok || g.Node == view.Local {
			return next(c)
		}
		if g.Type != cluster.QEMU {
			return exitcode.Usagef("%s: pvediskcheck reads QEMU VMs, not containers", g)
		}
		m := view.Member(g.Node)
		args, err := remoteArgs(c, e, cluster.VMThenDisks, m, e.json, c.Args().Slice())
		if err != nil {
			return err
		}
		if !m.Online {
			return exitcode.Unreachablef("%s: %s is offline in %s; nothing was run", g, m.Name, cluster.MembersFile)
		}
		d := deadline(c, e)
		if runs != nil {
			d = max(d, runs(c)+d)
		}
		r, err := sshTo(e, view).Call(e.ctx(), m, args, d)
		var ne *cluster.NodeError
		if errors.As(err, &ne) {
			return exitcode.Unreachablef("%s (%s): %s", g, ne.Status, ne.Msg)
		} else if err != nil {
			return err
		}
		return printForwarded(e, g, m, r, changes(c))
	}
}

// printForwarded prints a node's answer for one VM, marked with the node.
func printForwarded(e *env, g cluster.Guest, m cluster.Member, r *cluster.Reply, changes bool) error {
	other := ""
	if r.Version != version {
		other = r.Version
	}
	if e.json {
		if strings.TrimSpace(r.Stdout) != "" {
			if err := cluster.VetForwarded([]byte(r.Stdout), g); err != nil {
				return exitcode.Unreachablef("%s (%s): %v", g, cluster.BadReply, err)
			}
			doc, err := cluster.TagDocument([]byte(r.Stdout), m.Name, other)
			if err != nil {
				return exitcode.Unreachablef("%s (%s): printed JSON that cannot be read: %v", g, cluster.BadReply, err)
			}
			if err := e.printJSON(doc); err != nil {
				return err
			}
		}
	} else {
		how := "asked over SSH"
		if changes {
			how = "acted there, over SSH"
		}
		fmt.Fprintf(e.out, "%s (%s, root@%s)\n", g, how, m.Address())
		if other != "" {
			fmt.Fprintf(e.out, "note: %s runs pvediskcheck %s, this node %s\n", m.Name, other, version)
		}
		io.WriteString(e.out, r.Stdout)
	}
	return r.Err(g)
}

// sshTo is how this node reaches the others.
func sshTo(e *env, view *cluster.View) cluster.SSH {
	return cluster.SSH{Program: os.Getenv(envSSH), View: view, Runner: e.runner}
}

// deadline bounds one node's answer: the command's windows (every duration
// flag, set or default) plus cluster.DeadlineTimeouts x --timeout.
func deadline(c *cli.Context, e *env) time.Duration {
	var windows []time.Duration
	for _, f := range c.Command.Flags {
		if _, ok := f.(*cli.DurationFlag); ok {
			windows = append(windows, c.Duration(f.Names()[0]))
		}
	}
	return cluster.Deadline(e.timeout, windows...)
}

// remoteArgs is the command line a node runs for this one: the global
// options that apply there, this command, its flags written anew from their
// parsed values (a number travels as the number it was read as), and the
// positional arguments, each validated as what it is. Every argument is
// quoted for the remote shell when it is sent (cluster.SSH.Argv).
func remoteArgs(c *cli.Context, e *env, kind cluster.Args, m cluster.Member, asJSON bool, pos []string) ([]string, error) {
	nodeName, nodeAddr := m.Name, m.Address()
	args := []string{"--" + cluster.ReplyFlag + "=" + nodeName, "--timeout=" + e.timeout.String()}
	if asJSON {
		args = append(args, "--json")
	}
	args = append(args, c.Command.Name)
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if name == "cluster" || !c.IsSet(name) {
			continue
		}
		var v string
		switch ff := f.(type) {
		case *fileFlag:
			a, err := remoteFileArg(c, e, ff)
			if err != nil {
				return nil, err
			}
			args = append(args, a)
			continue
		case *cli.BoolFlag:
			v = strconv.FormatBool(c.Bool(name))
		case *cli.DurationFlag:
			v = c.Duration(name).String()
		case *cli.IntFlag:
			v = strconv.Itoa(c.Int(name))
		case *cli.Float64Flag:
			x := c.Float64(name)
			if math.IsInf(x, 0) || math.IsNaN(x) {
				return nil, exitcode.Usagef("--%s: not a finite number", name)
			}
			v = strconv.FormatFloat(x, 'g', -1, 64)
		case *cli.StringFlag:
			v = c.String(name)
			if ff.TakesFile {
				// A file or folder the command writes (bench --out,
				// --report; stall --out), which the other node would
				// write as its own (a file it reads is a fileFlag, sent
				// as its content): run it there instead.
				return nil, exitcode.Usagef("--%s names a file of this node, and the VM is on node %s, which would read or write its own: run the command there, where the path is that node's (ssh -t root@%s pvediskcheck %s ...)", name, nodeName, nodeAddr, c.Command.Name)
			}
			if err := cluster.ValidateValue(v); err != nil {
				return nil, exitcode.Usagef("--%s: %v", name, err)
			}
		default:
			return nil, exitcode.Usagef("--%s cannot be sent to another node", name)
		}
		args = append(args, "--"+name+"="+v)
	}
	if err := cluster.ValidateArgs(kind, pos); err != nil {
		return nil, err
	}
	return append(args, pos...), nil
}

// runHere answers as a node from this process: the command line another
// node would get, run by run() below this node's root.
func runHere(ctx context.Context, e *env, want string, args []string) (*cluster.Reply, error) {
	argv := append([]string{"pvediskcheck", "--root=" + e.paths.Root, "--proc=" + e.paths.Proc, "--sys=" + e.paths.Sys}, args...)
	var out, errb bytes.Buffer
	run(ctx, argv, &out, &errb)
	return cluster.ParseReply(want, out.Bytes(), nil)
}

// askNodes runs a command that asks nodes: those its Route names, at the
// same time; with none, the command runs here as usual.
func askNodes(a *clusterAsk, next cli.ActionFunc) cli.ActionFunc {
	return func(c *cli.Context) error {
		if askedByNode(c) {
			return next(c)
		}
		e := newEnv(c)
		view, nodes, pos, err := a.Route(c, e)
		if err != nil {
			return err
		}
		if view == nil {
			return next(c)
		}
		return askCluster(c, e, a, view, nodes, pos)
	}
}

// loadCluster reads pmxcfs for --cluster; a node outside a cluster is a
// cluster of one.
func loadCluster(e *env) (*cluster.View, error) {
	view, err := cluster.Load(e.ctx(), e.node)
	if err != nil && !errors.Is(err, cluster.ErrNotCluster) && view.Members == nil {
		return nil, exitcode.Wrap(exitcode.Unreachable, "--cluster", err)
	}
	return view, nil
}

// askCluster asks nodes (each its own positional arguments from pos) at
// the same time, runs the config rules for the VMs of nodes that did not
// answer when a.ConfigOnly, merges and prints.
func askCluster(c *cli.Context, e *env, a *clusterAsk, view *cluster.View, nodes []cluster.Member, pos func(string) []string) error {
	args := map[string][]string{}
	for _, m := range nodes {
		r, err := remoteArgs(c, e, a.Args, m, true, pos(m.Name))
		if err != nil {
			return err
		}
		args[m.Name] = r
	}
	limit := deadline(c, e)
	answers := cluster.Ask(e.ctx(), nodes, limit, func(ctx context.Context, m cluster.Member) (*cluster.Reply, error) {
		if m.Name == view.Local {
			return runHere(ctx, e, m.Name, args[m.Name])
		}
		return sshTo(e, view).Call(ctx, m, args[m.Name], limit)
	})
	// A node's answer is checked against pmxcfs before it is believed:
	// its VMs only (and only those asked), its counts bounded.
	var asked func(string) []string
	if a.Args == cluster.VMIDs {
		asked = pos
	}
	cluster.Vet(answers, view.Local, view.VMs, asked)
	if a.ConfigOnly {
		cluster.FromConfigs(e.ctx(), answers, view.Local, limit, func(ctx context.Context, m cluster.Member) (*cluster.Reply, error) {
			own, _ := remoteArgs(c, e, a.Args, cluster.Member{Name: view.Local}, true, pos(m.Name))
			return runHere(ctx, e, view.Local, append([]string{"--" + configOnlyFlag + "=" + m.Name}, own...))
		})
	}
	doc := cluster.Merge(answers, version)
	var err error
	if e.json {
		err = e.printJSON(doc)
	} else {
		err = a.Text(e, doc)
	}
	if err != nil {
		return err
	}
	return cluster.Err(answers)
}

func nodeVersion(n cluster.NodeReport) string {
	if n.VersionDiffers {
		return n.Version + " (this node " + version + ")"
	}
	return units.OrDash(n.Version)
}

func nodeTime(n cluster.NodeReport) string {
	if n.Status == cluster.Offline {
		return "-"
	}
	return fmt.Sprintf("%.2f s", n.Elapsed)
}

// nodeNote is why a node did not take part, as one line a terminal shows
// as it is: a remote node's error line is its text (units.Printable).
func nodeNote(n cluster.NodeReport) string {
	note := units.Printable(n.Error)
	if n.ConfigOnly {
		note += " (its VMs: config rules only, from " + cluster.NodesDir + "/" + n.Node + "/qemu-server)"
	}
	return note
}

// replyCapture is what a run that answers another node printed.
type replyCapture struct {
	node           string
	stdout, stderr bytes.Buffer
}

// replyKey is where the capture lives in the app's metadata.
const replyKey = "cluster-reply"

// clusterBefore runs before every command. A run that answers another node
// prints into buffers (run sends them as one cluster.Reply) and refuses,
// before anything else, when this is not the node the caller meant.
func clusterBefore(c *cli.Context) error {
	if n := c.String(configOnlyFlag); n != "" {
		if err := cluster.ValidateNodeName(n); err != nil {
			return exitcode.Usagef("--%s: %v", configOnlyFlag, err)
		}
	}
	want := c.String(cluster.ReplyFlag)
	if want == "" {
		return nil
	}
	if err := cluster.ValidateNodeName(want); err != nil {
		return exitcode.Usagef("--%s: %v", cluster.ReplyFlag, err)
	}
	r := &replyCapture{node: want}
	c.App.Writer, c.App.ErrWriter = &r.stdout, &r.stderr
	c.App.Metadata[replyKey] = r
	view, _ := cluster.Load(c.Context, node.New(node.NewPaths(c.String("root"), c.String("proc"), c.String("sys")), c.Duration("timeout")))
	r.node = view.Local
	if view.Local != want {
		return exitcode.Unreachablef("this is node %s, not %s: nothing was run", view.Local, want)
	}
	return nil
}

// replying returns the capture of a run that answers another node.
func replying(app *cli.App) *replyCapture {
	r, _ := app.Metadata[replyKey].(*replyCapture)
	return r
}

// finish prints the reply and returns the exit code (the process exits
// with it as well).
func (r *replyCapture) finish(stdout io.Writer, err error) int {
	code := exitcode.Of(err)
	msg := r.stderr.String()
	if m := exitcode.Message(err); m != "" {
		msg += "pvediskcheck: " + units.Line(m, maxErrorLine) + "\n"
	}
	stdout.Write(cluster.Reply{Version: version, Node: r.node, Exit: int(code), Stdout: r.stdout.String(), Stderr: msg}.Encode())
	return int(code)
}

// configOnlyView makes newEnv's node a view of another node's configs
// (--cluster-config-only NODE): its VM configs from pmxcfs, and no command
// run here, since nothing this node runs (lvs, qm) describes that node.
func configOnlyView(c *cli.Context, e *env) {
	if n := c.String(configOnlyFlag); n != "" {
		e.node = cluster.ForConfigsOf(e.node, n)
		e.paths = e.node.Paths
	}
}
