package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/cluster"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/policy"
	"github.com/pvediskcheck/pvediskcheck/units"
)

func init() {
	commands = append(commands, command{new: checkCommand, cluster: clusterRole{Ask: &clusterAsk{
		Usage:      "with --all: check every VM of the cluster, every node at the same time",
		Help:       "cluster-check",
		Args:       cluster.VMIDs,
		ConfigOnly: true,
		Route:      checkNodes,
		Text:       printCheckCluster,
	}}})
}

func checkCommand() *cli.Command {
	return &cli.Command{
		Name:        "check",
		Usage:       "find disk settings that will fail, are ignored, are risky, or differ from what runs",
		ArgsUsage:   "[VMID...]",
		Description: helpText("check"),
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "all", Usage: "check every VM config on this node"},
			&cli.StringFlag{Name: "fail-on", Value: "warning", Usage: "lowest severity that makes the exit code 1: warning or error"},
			&cli.BoolFlag{Name: "next-start", Usage: "also parse 'qm showcmd VMID' and list what changes at the next start"},
			maxInt(&cli.IntFlag{Name: "parallel", Value: 8, Usage: "VMs checked at once with --all"}, check.MaxParallel),
			stallAfterFlag(),
		}, policyFlags()...),
		Action: checkAction,
	}
}

func checkAction(c *cli.Context) error {
	e := newEnv(c)
	failOn, err := check.ParseSeverity(c.String("fail-on"))
	if err != nil {
		return err
	}
	pol, err := loadPolicy(c, e)
	if err != nil {
		return err
	}
	ids, err := check.Targets(e.paths, c.Args().Slice(), c.Bool("all"))
	if err != nil {
		return err
	}
	rep := check.Run(e.ctx(), e.node, ids, check.Options{NextStart: c.Bool("next-start"), Parallel: c.Int("parallel"), StallAfter: c.Duration("stall-after"),
		Policy: pol, All: c.Bool("all")})
	if err := show(e, rep, printCheck); err != nil {
		return err
	}
	if err := rep.Err(); err != nil {
		return err
	}
	if rep.Fails(failOn) {
		return exitcode.ErrProblem
	}
	return nil
}

func printCheck(e *env, rep *check.Report) {
	for i := range rep.VMs {
		printCheckVM(e, &rep.VMs[i], "", vmState(rep.VMs[i].Running))
	}
	s := rep.Summary
	fmt.Fprintf(e.out, "%d VM(s) checked: %d error(s), %d warning(s), %d info\n", s.VMs, s.Errors, s.Warnings, s.Infos)
	var warnings []string
	for _, w := range rep.PolicyWarnings {
		warnings = append(warnings, w.String())
	}
	printPolicy(e, rep.PolicyRules, warnings)
}

// printCheckVM prints one VM's findings, the checks that did not run and
// its notes; on is the node it was checked on (--cluster), else "".
func printCheckVM(e *env, v *check.VMResult, on, state string) {
	if on != "" {
		on = " on " + on
	}
	if v.Err != nil && !v.Running && len(v.Findings) == 0 {
		// Its config (or storage.cfg) could not be read: one line saying
		// which file and why, not "(stopped): 0 finding(s)".
		fmt.Fprintf(e.out, "VM %d%s: not checked: %s\n", v.VMID, on, strings.TrimPrefix(v.Err.Error(), fmt.Sprintf("VM %d: ", v.VMID)))
		return
	}
	fmt.Fprintf(e.out, "VM %d%s (%s): %d finding(s)\n", v.VMID, on, state, len(v.Findings))
	lastFix := ""
	for _, f := range v.Findings {
		color := ""
		switch f.Severity {
		case check.Error:
			color = red
		case check.Warning:
			color = yellow
		}
		fmt.Fprintf(e.out, "  %s %s %s: %s\n", e.paint(color, strings.ToUpper(string(f.Severity))), f.Code, units.OrDash(f.Disk), f.Message)
		switch {
		case f.Fix == "":
		case f.Fix == lastFix && f.Command != nil:
			fmt.Fprintf(e.out, "      fix: the same command as above\n")
		default:
			fmt.Fprintf(e.out, "      fix: %s\n", f.Fix)
		}
		lastFix = f.Fix
	}
	for _, b := range v.Backups {
		fl := "fleecing off (guest writes wait for the backup target while it runs)"
		if b.Fleecing {
			fl = "fleecing on storage " + units.OrDash(b.FleecingStorage)
		}
		fmt.Fprintf(e.out, "  backup job %s: %s (%s)\n", b.Job, fl, map[string]string{"job": "the job's own setting", "vzdump.conf": "/etc/vzdump.conf's default", "default": "vzdump's default"}[b.FleecingFrom])
	}
	if len(v.NotChecked) > 0 {
		names := make([]string, len(v.NotChecked))
		for i, c := range v.NotChecked {
			names[i] = string(c)
		}
		fmt.Fprintf(e.out, "  not checked: %s\n", strings.Join(names, ", "))
	}
	for _, n := range v.Notes {
		fmt.Fprintf(e.out, "  note: %s\n", n)
	}
}

// checkNodes: check --all --cluster asks every node; check VMID... asks
// the nodes the VMs live on when any is not this one.
func checkNodes(c *cli.Context, e *env) (*cluster.View, []cluster.Member, func(string) []string, error) {
	if c.Bool("cluster") {
		if !c.Bool("all") {
			return nil, nil, nil, exitcode.Usagef("check: --cluster goes with --all (a VMID that lives on another node is checked there without it)")
		}
		if c.NArg() > 0 {
			return nil, nil, nil, nil // VMIDs and --all: check's own usage error
		}
		view, err := loadCluster(e)
		if err != nil {
			return nil, nil, nil, err
		}
		return view, view.Nodes(), func(string) []string { return nil }, nil
	}
	if c.Bool("all") || c.NArg() == 0 {
		return nil, nil, nil, nil
	}
	view, nodes, groups, ok, err := cluster.Route(e.ctx(), e.node, c.Args().Slice())
	if err != nil {
		return nil, nil, nil, err
	}
	if !ok {
		return nil, nil, nil, nil // all here, or check says what is wrong with one
	}
	return view, nodes, func(n string) []string { return groups[n] }, nil
}

// printCheckCluster prints the nodes' merged answers: each VM marked with
// its node, then a table of the nodes and the summary added up.
func printCheckCluster(e *env, doc *cluster.Object) error {
	var d struct {
		VMs     []cluster.Tagged[check.VMResult] `json:"vms"`
		Summary check.Summary                    `json:"summary"` // the nodes' own, added up
		// The policy's counts and warnings, node by node.
		PolicyRules    []cluster.Tagged[policy.RuleCount] `json:"policy_rules"`
		PolicyWarnings []cluster.Tagged[policy.Warning]   `json:"policy_warnings"`
		Nodes          []struct {
			cluster.NodeReport
			Summary *check.Summary `json:"summary"`
		} `json:"nodes"`
	}
	if err := cluster.Decode(doc, &d); err != nil {
		return exitcode.Unreachablef("cluster: %v", err)
	}
	status := map[string]cluster.Status{}
	for _, n := range d.Nodes {
		status[n.Node] = n.Status
	}
	for i := range d.VMs {
		v := &d.VMs[i]
		state := vmState(v.Item.Running)
		if v.ConfigOnly {
			state = "config only: " + v.Node + " " + string(status[v.Node])
		}
		printCheckVM(e, &v.Item, v.Node, state)
	}
	t := newTable(e.out, "NODE", "STATUS", "VMS", "ERRORS", "WARNINGS", "INFO", "VERSION", "TIME", "")
	for _, n := range d.Nodes {
		c := []string{"-", "-", "-", "-"}
		if s := n.Summary; s != nil {
			c = []string{strconv.Itoa(s.VMs), strconv.Itoa(s.Errors), strconv.Itoa(s.Warnings), strconv.Itoa(s.Infos)}
		}
		t.row(append(append([]string{n.Node, string(n.Status)}, c...), nodeVersion(n.NodeReport), nodeTime(n.NodeReport), nodeNote(n.NodeReport))...)
	}
	t.flush()
	s := d.Summary
	fmt.Fprintf(e.out, "%d node(s), %d VM(s) checked: %d error(s), %d warning(s), %d info\n", len(d.Nodes), s.VMs, s.Errors, s.Warnings, s.Infos)
	answered := 0
	for _, n := range d.Nodes {
		if n.Summary != nil {
			answered++
		}
	}
	if d.PolicyRules != nil {
		rules, warnings := mergedPolicy(d.PolicyRules, d.PolicyWarnings, answered)
		printPolicy(e, rules, warnings)
	}
	return nil
}
