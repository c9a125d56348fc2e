package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/cluster"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/layers"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/stall"
	"github.com/pvediskcheck/pvediskcheck/top"
	"github.com/pvediskcheck/pvediskcheck/units"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

func init() {
	commands = append(commands, command{new: topCommand, cluster: clusterRole{
		Local: "I/O wait and CPU are a node's: top watches this node's VMs and names the node (and the command) for a VMID that runs on another",
	}})
}

func topCommand() *cli.Command {
	return &cli.Command{
		Name:        "top",
		Usage:       "live per-disk I/O of the node's VMs: which disk is busy, how slow, which QEMU thread serves it",
		ArgsUsage:   "[VMID...]",
		Description: helpText("top"),
		Flags: []cli.Flag{
			maxDuration(&cli.DurationFlag{Name: "interval", Value: top.DefaultInterval, Usage: "time between samples (at least 100ms)"}, top.MaxInterval),
			maxInt(&cli.IntFlag{Name: "count", Usage: "batch mode: print this many samples one after another, then exit (0: until q or Ctrl-C)"}, top.MaxCount),
			&cli.StringFlag{Name: "sort", Value: string(top.SortBusy), Usage: "row order: " + top.SortKeyNames()},
			&cli.BoolFlag{Name: "no-agent", Usage: "do not ask guest agents for the guest's device names and mount points"},
			stallAfterFlag(),
			captureFlag(),
			&cli.BoolFlag{Name: "layers", Usage: "split each disk's latency over the guest (its diskstats through the guest agent), QEMU and the node device, and name the layer that adds most"},
			&cli.BoolFlag{Name: "histogram", Usage: "CHANGES QEMU STATE: set latency histograms on the watched disks for p50/p95/p99 (one found set is used as it is); cleared on exit"},
		},
		Action: topAction,
	}
}

// topKeys maps a key pressed on the terminal to a sort order.
var topKeys = map[byte]top.SortKey{
	'b': top.SortBusy, 'i': top.SortIOPS, 'l': top.SortLatency, 'd': top.SortQueue,
	'p': top.SortLimit, 'c': top.SortCPU, 'v': top.SortVMID,
}

func topAction(c *cli.Context) error {
	e := newEnv(c)
	var ids []int
	for _, a := range c.Args().Slice() {
		id, err := qemuserver.ParseVMID(a)
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	key, err := top.ParseSortKey(c.String("sort"))
	if err != nil {
		return err
	}
	o := top.Options{VMIDs: ids, Interval: c.Duration("interval"), Count: c.Int("count"), Sort: key, Guest: !c.Bool("no-agent"), StallAfter: c.Duration("stall-after"), Histogram: c.Bool("histogram"), Layers: c.Bool("layers")}
	if err := top.Validate(e.paths, o); err != nil {
		return topElsewhere(e, c.Args().Slice(), err)
	}
	keeper, err := stallKeeper(c, e)
	if err != nil {
		return err
	}
	switch {
	case e.json:
		enc := json.NewEncoder(rawOut(e.out)) // JSON escapes itself
		o.OnSample = func(s top.Sample) error { return enc.Encode(s) }
	case isTerminal(e.out) && o.Count == 0:
		return topTerminal(e, c.App.Reader, o, keeper)
	default:
		first := true
		o.OnSample = func(s top.Sample) error {
			if !first {
				fmt.Fprintln(e.out)
			}
			first = false
			_, err := io.WriteString(e.out, strings.Join(topLines(e, s, key, 0), "\n")+"\n")
			return err
		}
	}
	return top.Run(e.ctx(), e.node, topCapture(e, keeper, o))
}

// topCapture hands every disk row to --capture's keeper before the
// sample is shown.
func topCapture(e *env, k *stall.Keeper, o top.Options) top.Options {
	if k == nil {
		return o
	}
	next := o.OnSample
	o.OnSample = func(s top.Sample) error {
		for _, d := range s.Disks {
			k.Sample(e.ctx(), e.node, s.Time, d.VMID, d.Disk, d, d.StalledSeconds > 0)
		}
		k.Forget(s.Time)
		return next(s)
	}
	return o
}

// topElsewhere names the node a VMID runs on when it is another node's
// (pmxcfs's .vmlist): top watches the VMs of the node it runs on, so it
// says where to run it instead of only "no such VM on this node".
func topElsewhere(e *env, args []string, err error) error {
	if !errors.Is(err, vm.ErrNoConfig) {
		return err
	}
	view, nodes, byNode, ok, rerr := cluster.Route(e.ctx(), e.node, args)
	if rerr != nil {
		return rerr
	}
	if !ok {
		return err
	}
	for _, m := range nodes {
		if m.Name == view.Local {
			continue
		}
		return exitcode.Usagef("VM %s runs on %s: top watches the VMs of the node it runs on; there: ssh -t root@%s pvediskcheck top %s",
			byNode[m.Name][0], m.Name, m.Address(), strings.Join(byNode[m.Name], " "))
	}
	return err
}

// topTerminal redraws the screen in place at every sample and on every key
// that changes the sort; q ends the run.
func topTerminal(e *env, in io.Reader, o top.Options, k *stall.Keeper) error {
	ctx, cancel := context.WithCancel(e.ctx())
	defer cancel()
	scr := newScreen(e.out)
	defer scr.close()
	kb := newKeyboard(in)
	defer kb.close()
	var mu sync.Mutex
	key := o.Sort
	var last *top.Sample
	redraw := func() {
		cols, _ := scr.size()
		if last == nil {
			scr.draw([]string{topTitle(time.Now(), o.Interval, key), "", "waiting for the first interval..."})
			return
		}
		s := *last
		s.Disks = append([]top.Disk(nil), s.Disks...)
		top.Sort(s.Disks, key)
		scr.draw(topLines(e, s, key, cols))
	}
	mu.Lock()
	redraw()
	mu.Unlock()
	if kb != nil {
		go func() {
			b := make([]byte, 1)
			for {
				if n, err := in.Read(b); err != nil || n == 0 {
					return
				}
				if b[0] == 'q' || b[0] == 'Q' {
					cancel()
					return
				}
				if k, ok := topKeys[b[0]]; ok {
					mu.Lock()
					key = k
					redraw()
					mu.Unlock()
				}
			}
		}()
	}
	o.OnSample = func(s top.Sample) error {
		mu.Lock()
		defer mu.Unlock()
		last = &s
		redraw()
		return nil
	}
	return top.Run(ctx, e.node, topCapture(e, k, o))
}

func topTitle(t time.Time, interval time.Duration, key top.SortKey) string {
	if interval <= 0 {
		interval = top.DefaultInterval
	}
	return fmt.Sprintf("pvediskcheck top  %s  every %s  sort %s  (b i l d p c v: sort, q: quit)", t.Format("15:04:05"), units.Duration(interval), key)
}

// topLines renders one sample: a title, the disks, the VMs, the findings.
// cols > 0 means a terminal (the title names the keys).
func topLines(e *env, s top.Sample, key top.SortKey, cols int) []string {
	var b strings.Builder
	if cols > 0 {
		b.WriteString(topTitle(s.Time, time.Duration(s.IntervalS*float64(time.Second)), key) + "\n\n")
	} else {
		fmt.Fprintf(&b, "%s  interval %s  %d VMs  %d disks\n", s.Time.Format(time.RFC3339), units.Duration(time.Duration(s.IntervalS*float64(time.Second))), len(s.VMs), len(s.Disks))
	}
	t := newTable(&b, "VMID", "NAME", "DISK", "STORAGE", "RD/s", "WR/s", "RD MiB/s", "WR MiB/s", "RD ms", "WR ms", "FL ms", "QD", "FAIL", "STALLED", "LIM%", "JOB", "THREAD", "CPU%", "DEV ms", "GUEST")
	for _, d := range s.Disks {
		t.row(fmt.Sprint(d.VMID), units.OrDash(d.Name), d.Disk, units.OrDash(d.Storage),
			fmt.Sprintf("%.0f", d.ReadIOPS), fmt.Sprintf("%.0f", d.WriteIOPS),
			fmt.Sprintf("%.1f", d.ReadBps/units.MiB), fmt.Sprintf("%.1f", d.WriteBps/units.MiB),
			units.Grouped(d.ReadLatencyMs), units.Grouped(d.WriteLatencyMs), units.Grouped(d.FlushLatencyMs),
			units.Grouped(d.QueueDepth), fmt.Sprint(d.FailedOps), topStalled(d), topLimit(d), topOrDash(d.BlockJob),
			strings.TrimPrefix(d.Thread, "iothread-"), topPct(d.ThreadCPUPct), topMs(d.DeviceLatencyMs), d.Guest())
	}
	t.flush()
	b.WriteString("\n")
	t = newTable(&b, "VMID", "NAME", "STATUS", "MAIN%", "WAIT%", "VCPU%", "DIRTY MiB", "IO PSI%", "IOTHREADS (CPU%)")
	for _, v := range s.VMs {
		var its []string
		for _, it := range v.IOThreads {
			its = append(its, strings.TrimPrefix(it.ID, "iothread-")+" "+topPct(it.CPUPct))
		}
		status := string(v.Status)
		if v.Error != "" {
			status += ": " + v.Error
		}
		t.row(fmt.Sprint(v.VMID), units.OrDash(v.Name), status, topPct(v.MainLoopCPUPct), topPct(v.MainLoopWaitPct),
			topPct(v.VCPUCPUPct), topDirty(v), topPSI(v), units.OrDash(strings.Join(its, ", ")))
	}
	t.flush()
	topBackups(&b, s)
	topPercentiles(&b, s)
	topLayers(&b, s)
	for _, f := range s.Findings {
		b.WriteString("\n" + e.paint(yellow, string(f.Code)) + ": " + f.Message)
	}
	for _, v := range s.VMs {
		for _, sk := range v.AgentNotAsked {
			fmt.Fprintf(&b, "\nnote: VM %d: %s", v.VMID, sk)
		}
	}
	return strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
}

// topDirty is the DIRTY MiB column: the VM's dirty and writeback page
// cache (its cgroup), "-" when not measured.
func topDirty(v top.VM) string {
	if v.DirtyBytes == nil {
		return "-"
	}
	return fmt.Sprintf("%.1f", float64(*v.DirtyBytes+*v.WritebackBytes)/units.MiB)
}

// topPSI is the IO PSI% column: io.pressure's some and full avg10.
func topPSI(v top.VM) string {
	if v.IOPressure == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f/%.0f", v.IOPressure.SomeAvg10, v.IOPressure.FullAvg10)
}

// topStalled is the STALLED column: the seconds without a completion of a
// stalled disk, "-" for every other.
func topStalled(d top.Disk) string {
	if d.StalledSeconds <= 0 {
		return "-"
	}
	return units.Number(d.StalledSeconds) + " s"
}

// topBackups adds a line per disk with a backup job running: its progress
// and speed, the guest's write latency during it against the minute
// before it started, and whether it runs with fleecing.
func topBackups(b *strings.Builder, s top.Sample) {
	for _, d := range s.Disks {
		im := d.Backup
		if im == nil {
			continue
		}
		progress, speed := "-", "-"
		if im.ProgressPct != nil {
			progress = fmt.Sprintf("%.1f %%", *im.ProgressPct)
		}
		if im.SpeedBps != nil {
			speed = fmt.Sprintf("%.1f MiB/s", *im.SpeedBps/units.MiB)
		}
		base := "not seen before the job"
		if im.BaselineWriteLatencyMs != nil {
			base = fmt.Sprintf("%s ms in the %.0f s before it", units.Grouped(*im.BaselineWriteLatencyMs), im.BaselineS)
		}
		fmt.Fprintf(b, "\nbackup %s on %d/%s: %s at %s; guest writes %s ms during the job, %s; %s", im.Job, d.VMID, d.Disk, progress, speed, topMs(im.WriteLatencyMs), base, im.FleecingText())
	}
}

// topLayers adds, with --layers, a line per disk that did I/O: where its
// time goes and the layer that adds most.
func topLayers(b *strings.Builder, s top.Sample) {
	first := true
	for _, d := range s.Disks {
		l := d.Layers
		if l == nil || l.Verdict == layers.Idle {
			continue
		}
		if first {
			b.WriteString("\n")
			first = false
		}
		fmt.Fprintf(b, "\nlayers %d/%s: %s", d.VMID, d.Disk, l.Says)
	}
}

// topPercentiles adds, with --histogram, what was done about the disks'
// histograms and a table of each disk's latency percentiles.
func topPercentiles(b *strings.Builder, s top.Sample) {
	if len(s.Histograms) == 0 {
		return
	}
	counts := map[latency.Owner][]string{}
	for _, n := range s.Histograms {
		counts[n.Owner] = append(counts[n.Owner], fmt.Sprintf("%d/%s", n.VMID, n.Disk))
	}
	var parts []string
	for _, o := range []struct {
		owner latency.Owner
		say   string
	}{{latency.SetByUs, "set by pvediskcheck (cleared on exit)"}, {latency.Existing, "found set, used as they are and left in place"}, {latency.Refused, "refused by QEMU"}} {
		if ds := counts[o.owner]; len(ds) > 0 {
			parts = append(parts, fmt.Sprintf("%s: %s", o.say, strings.Join(ds, " ")))
		}
	}
	b.WriteString("\nlatency histograms " + strings.Join(parts, "; ") + "\n")
	t := newTable(b, "VMID", "DISK", "RD p50", "p95", "p99", "WR p50", "p95", "p99", "FL p50", "p99")
	for _, d := range s.Disks {
		if !d.Percentiles.Any() {
			continue
		}
		t.row(fmt.Sprint(d.VMID), d.Disk, topMs(d.ReadP50Ms), topMs(d.ReadP95Ms), topMs(d.ReadP99Ms),
			topMs(d.WriteP50Ms), topMs(d.WriteP95Ms), topMs(d.WriteP99Ms), topMs(d.FlushP50Ms), topMs(d.FlushP99Ms))
	}
	t.flush()
}

func topLimit(d top.Disk) string {
	if d.LimitPct == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f %s", *d.LimitPct, topOrDash(d.Limit))
}

func topPct(p *float64) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f", *p)
}

func topMs(p *float64) string {
	if p == nil {
		return "-"
	}
	return units.Grouped(*p)
}

func topOrDash(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}
