package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/cluster"
	"github.com/pvediskcheck/pvediskcheck/policy"
)

// policyFlags are --policy FILE (check, metrics) and the hidden flag that
// carries the file to another node.
func policyFlags() []cli.Flag {
	f := &fileFlag{
		StringFlag: &cli.StringFlag{Name: "policy", TakesFile: true,
			Usage: "judge every disk against the site's policy `FILE` too (YAML rules: which disks, which settings; see POLICY in check --help)"},
		max:   policy.MaxBytes,
		check: func(name string, b []byte) error { _, err := policy.Parse(name, b); return err },
	}
	return f.flags()
}

// loadPolicy reads --policy (here a file, on a node asked by another the
// content it sent); nil without one. A bad file is one line naming file,
// line and key, exit 2, before anything is checked.
func loadPolicy(c *cli.Context, e *env) (*policy.Policy, error) {
	name, data, ok, err := readFileArg(c, e, "policy")
	if err != nil || !ok {
		return nil, err
	}
	return policy.Parse(name, data)
}

// printPolicy says what the policy covered and warns of its selectors
// that matched nothing (stderr: the report on stdout stays the report).
func printPolicy(e *env, rules []policy.RuleCount, warnings []string) {
	if rules == nil {
		return
	}
	disks, viol := 0, 0
	for _, r := range rules {
		disks += r.Disks
		viol += r.Violations
	}
	fmt.Fprintf(e.out, "policy: %d rule(s) selected %d disk(s): %d violation(s)\n", len(rules), disks, viol)
	for _, w := range warnings {
		fmt.Fprintf(e.errOut, "pvediskcheck: warning: %s\n", w)
	}
}

// mergedPolicy adds the nodes' rule counts up by rule and gives each
// distinct warning once, with the nodes that said it (every node says
// those of storage.cfg and user.cfg, which are the cluster's).
func mergedPolicy(rules []cluster.Tagged[policy.RuleCount], warnings []cluster.Tagged[policy.Warning], nodes int) ([]policy.RuleCount, []string) {
	var out []policy.RuleCount
	for _, r := range rules {
		i := 0
		for i < len(out) && out[i].Rule != r.Item.Rule {
			i++
		}
		if i == len(out) {
			out = append(out, policy.RuleCount{Rule: r.Item.Rule, Line: r.Item.Line})
		}
		out[i].Disks += r.Item.Disks
		out[i].Violations += r.Item.Violations
	}
	var texts []string
	by := map[string][]string{}
	for _, w := range warnings {
		s := w.Item.String()
		if by[s] == nil {
			texts = append(texts, s)
		}
		by[s] = append(by[s], w.Node)
	}
	for i, s := range texts {
		if len(by[s]) == nodes {
			texts[i] += " (every node)"
		} else {
			texts[i] += " (" + strings.Join(by[s], ", ") + ")"
		}
	}
	return out, texts
}
