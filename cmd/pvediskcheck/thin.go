package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/cluster"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
	"github.com/pvediskcheck/pvediskcheck/units"
)

func init() {
	commands = append(commands, command{new: thinCommand, cluster: clusterRole{Ask: &clusterAsk{
		Usage: "report the pools of every node of the cluster",
		Help:  "cluster-thin",
		Args:  cluster.StorageIDs,
		Route: thinNodes,
		Text:  printThinCluster,
	}}})
}

func thinCommand() *cli.Command {
	return &cli.Command{
		Name:        "thin",
		Usage:       "report thin pools: use, overcommit, and which volumes hold the space",
		ArgsUsage:   "[STORAGE...]",
		Description: helpText("thin"),
		Action:      thinAction,
	}
}

func thinAction(c *cli.Context) error {
	e := newEnv(c)
	if err := e.paths.CheckNode(); err != nil {
		return err
	}
	rep, err := thinpool.Measure(e.ctx(), e.node, c.Args().Slice())
	if err != nil {
		return err
	}
	if err := show(e, rep, printThin); err != nil {
		return err
	}
	if rep.Failing() {
		return exitcode.ErrProblem
	}
	return nil
}

func printThin(e *env, rep *thinpool.Report) {
	for i, p := range rep.Pools {
		if i > 0 {
			fmt.Fprintln(e.out)
		}
		color := ""
		switch thinpool.UseLevel(p.DataPercent) {
		case thinpool.LevelFailure:
			color = red
		case thinpool.LevelWarning:
			color = yellow
		}
		fmt.Fprintf(e.out, "%s (%s %s): %s of %s used (%s)", p.Storage, p.Type, p.Pool, units.BytesPtr(p.AllocatedBytes), units.Bytes(p.SizeBytes), e.paint(color, units.PercentPtr(p.DataPercent)))
		if p.MetadataPercent != nil {
			fmt.Fprintf(e.out, ", metadata %s", units.PercentPtr(p.MetadataPercent))
		}
		if p.Discards != "" {
			fmt.Fprintf(e.out, ", discards %s", p.Discards)
		}
		snaps := ""
		if p.SnapshotVirtualBytes > 0 {
			snaps = fmt.Sprintf(" (%s of them thin snapshots)", units.Bytes(p.SnapshotVirtualBytes))
		}
		fmt.Fprintf(e.out, "\n  thin volumes: %d, virtual sizes %s%s, overcommit %.2fx\n", len(p.Volumes), units.Bytes(p.VirtualSumBytes), snaps, p.OvercommitRatio)
		t := newTable(e.out, "  VOLUME", "GUEST", "DISK", "VIRTUAL", "ALLOCATED", "USE", "DISCARD", "SNAPSHOTS")
		for _, v := range p.Volumes {
			snaps := "-"
			if len(v.Snapshots) > 0 {
				snaps = strings.Join(v.Snapshots, ",")
			}
			t.row(append(append([]string{"  " + v.Name}, thinVolumeCells(v)...), snaps)...)
		}
		t.flush()
		if f := p.Fill; f != nil {
			fmt.Fprintf(e.out, "  writes stop: %s\n  then: %s\n", f.Stops, f.Then)
		}
		for _, w := range p.Warnings {
			e.warning("  ", w.Text, w.Fix)
		}
	}
	e.notes(rep.Notes)
}

// thinVolumeCells are a volume's GUEST, DISK, VIRTUAL, ALLOCATED, USE and
// DISCARD.
func thinVolumeCells(v thinpool.Volume) []string {
	guest := v.Guest
	if v.VMID != 0 {
		guest = fmt.Sprintf("%s %d", v.Guest, v.VMID)
		if v.Guest == thinpool.GuestUnreferenced {
			guest = fmt.Sprintf("unreferenced (%d?)", v.VMID)
		}
	}
	return []string{guest, units.OrDash(v.Disk), units.Bytes(v.VirtualBytes), units.BytesPtr(v.AllocatedBytes), units.PercentPtr(v.DataPercent), v.Discard}
}

// thinNodes: thin --cluster asks every node, each for the storages named.
func thinNodes(c *cli.Context, e *env) (*cluster.View, []cluster.Member, func(string) []string, error) {
	if !c.Bool("cluster") {
		return nil, nil, nil, nil
	}
	view, err := loadCluster(e)
	if err != nil {
		return nil, nil, nil, err
	}
	storages := c.Args().Slice()
	return view, view.Nodes(), func(string) []string { return storages }, nil
}

// printThinCluster is thin --cluster's view: one table of every node's
// pools and one of their volumes, each row with its node, then the pools'
// warnings and the notes, and a table of the nodes.
func printThinCluster(e *env, doc *cluster.Object) error {
	var d struct {
		Pools []cluster.Tagged[thinpool.Pool] `json:"pools"`
		Notes []string                        `json:"notes"`
		Nodes []cluster.NodeReport            `json:"nodes"`
	}
	if err := cluster.Decode(doc, &d); err != nil {
		return exitcode.Unreachablef("cluster: %v", err)
	}
	pools := d.Pools
	volumes := 0
	if len(pools) > 0 {
		t := newTable(e.out, "NODE", "STORAGE", "TYPE", "POOL", "USED", "SIZE", "DATA", "METADATA", "VIRTUAL", "OVERCOMMIT")
		for _, tp := range pools {
			p := &tp.Item
			t.row(tp.Node, p.Storage, p.Type, p.Pool, units.BytesPtr(p.AllocatedBytes), units.Bytes(p.SizeBytes), units.PercentPtr(p.DataPercent),
				units.PercentPtr(p.MetadataPercent), units.Bytes(p.VirtualSumBytes), fmt.Sprintf("%.2fx", p.OvercommitRatio))
			volumes += len(p.Volumes)
		}
		t.flush()
	}
	if volumes > 0 {
		fmt.Fprintln(e.out)
		t := newTable(e.out, "NODE", "STORAGE", "VOLUME", "GUEST", "DISK", "VIRTUAL", "ALLOCATED", "USE", "DISCARD")
		for _, tp := range pools {
			for _, v := range tp.Item.Volumes {
				t.row(append([]string{tp.Node, tp.Item.Storage, v.Name}, thinVolumeCells(v)...)...)
			}
		}
		t.flush()
	}
	for _, tp := range pools {
		for _, w := range tp.Item.Warnings {
			e.warning("", tp.Node+" "+tp.Item.Storage+": "+w.Text, w.Fix)
		}
	}
	e.notes(d.Notes)
	t := newTable(e.out, "NODE", "STATUS", "VERSION", "TIME", "")
	for _, n := range d.Nodes {
		t.row(n.Node, string(n.Status), nodeVersion(n), nodeTime(n), nodeNote(n))
	}
	t.flush()
	return nil
}
