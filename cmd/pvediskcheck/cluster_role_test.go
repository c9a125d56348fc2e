package main

import (
	"io"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

// roleProblem says what is wrong with a command's cluster declaration, ""
// when it declares exactly one thing, completely.
func roleProblem(r clusterRole) string {
	n := 0
	if r.Forward != nil {
		n++
	}
	if r.Local != "" {
		n++
	}
	if a := r.Ask; a != nil {
		n++
		if a.Usage == "" || a.Help == "" || a.Route == nil || a.Text == nil {
			return "asks nodes without --cluster's usage, its help section, its route or its text view"
		}
	}
	switch n {
	case 0:
		return "declares nothing: forwarded (Forward), asking nodes (Ask) or this node's alone (Local, why)"
	case 1:
		return ""
	}
	return "declares more than one of Forward, Ask and Local"
}

// The declaration check itself fails for what it exists for.
func TestRoleProblem(t *testing.T) {
	changes := func(*cli.Context) bool { return false }
	ask := &clusterAsk{Usage: "u", Help: "cluster-thin", Route: thinNodes, Text: printThinCluster}
	for _, c := range []struct {
		r  clusterRole
		ok bool
	}{
		{clusterRole{}, false},
		{clusterRole{Forward: changes}, true},
		{clusterRole{Local: "why"}, true},
		{clusterRole{Ask: ask}, true},
		{clusterRole{Ask: &clusterAsk{Usage: "u", Help: "cluster-thin", Route: thinNodes}}, false},
		{clusterRole{Forward: changes, Local: "why"}, false},
		{clusterRole{Forward: changes, Ask: ask}, false},
	} {
		if got := roleProblem(c.r); (got == "") != c.ok {
			t.Errorf("%+v: %q, want ok=%v", c.r, got, c.ok)
		}
	}
}

// Every command of the app declares what cluster mode does with it, and
// the app is wired from that declaration: a command that forgot would
// answer "no such VM" for a VM that runs on another node.
func TestEveryCommandDeclaresClusterRole(t *testing.T) {
	app := newApp(io.Discard, io.Discard)
	_, roles := newCommands()
	if len(app.Commands) < 8 || len(roles) != len(app.Commands) {
		t.Fatalf("%d commands, %d declarations", len(app.Commands), len(roles))
	}
	forwarded := map[string]bool{}
	for _, c := range app.Commands {
		r, ok := roles[c.Name]
		if p := roleProblem(r); !ok || p != "" {
			t.Errorf("%s: %s", c.Name, p)
			continue
		}
		// A command that needs a VMID first reads one VM: the node that
		// runs it must answer.
		if strings.HasPrefix(c.ArgsUsage, "VMID") && r.Forward == nil {
			t.Errorf("%s %s is not forwarded to the VM's node", c.Name, c.ArgsUsage)
		}
		forwarded[c.Name] = r.Forward != nil
		helped := strings.Contains(c.Description, helpText("cluster-vm"))
		if helped != (r.Forward != nil) {
			t.Errorf("%s: cluster-vm help %v, forwarded %v", c.Name, helped, r.Forward != nil)
		}
		if flagged := hasFlag(c.Flags, "--cluster"); flagged != (r.Ask != nil) {
			t.Errorf("%s: --cluster %v, asks nodes %v", c.Name, flagged, r.Ask != nil)
		}
	}
	// The VM commands as the README lists them under cluster mode.
	for _, name := range []string{"cache", "flush", "discard", "limit", "bench"} {
		if !forwarded[name] {
			t.Errorf("%s is not forwarded", name)
		}
	}
	for _, name := range []string{"check", "thin", "top", "metrics", "fio"} {
		if forwarded[name] {
			t.Errorf("%s is forwarded", name)
		}
	}
}
