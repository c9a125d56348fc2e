package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/units"

	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

func init() { commands = append(commands, flushCommand) }

const flushDefaultWindow = 15 * time.Second

// A flush that takes less than this on average did not reach storage: QEMU
// with cache.no-flush completes it at once (measured 0.006-0.1 ms on a loaded
// machine), while a real flush of written data took 32-218 ms here.
const ignoredFlushNs = 1_000_000

func flushCommand() *cli.Command {
	return &cli.Command{
		Name:      "flush",
		Usage:     "verify by measurement whether guest flushes are honoured or ignored",
		ArgsUsage: "VMID [DISK...]",
		Description: `Samples, over a window, each disk's bytes written, flush count and flush time
(QMP query-blockstats, one short exchange per sample), the node's Dirty and
Writeback memory, the QEMU process's write_bytes (/proc/PID/io: real data it
sent toward storage; zeroes turned into write-zeroes do not count) and, for
block-device volumes, the device's own write and flush counters. Verdict per
disk:
   honored         guest flushes took time: the data went to storage
   ignored         flushes counted but took ~0 time while the disk's data
                   stayed dirty in node RAM (cache=unsafe): exit 1, with what a
                   host crash would lose
   no-flushes      the guest did not flush in the window (try --trigger)
   zero-data       the guest wrote only zeroes: Proxmox's detect-zeroes turns
                   them into write-zeroes, nothing reached node RAM to judge
   not-applicable  none/writethrough/directsync keep nothing in node RAM

A guest flush is counted in every cache mode; under unsafe it takes no time.
Dirty is node-wide and other writers move it, so the verdict rests on the
flush timing and on this QEMU's own write_bytes.

--trigger runs 'sync' (and an fsync of each disk device) in the guest through
the guest agent at the start of the window: harmless, and the only change made.

EXAMPLES
   pvediskcheck flush 370                 # watch 15 s while the guest works
   pvediskcheck flush 370 scsi1 --trigger --for 10s --json

` + exitcode.Help,
		Flags: []cli.Flag{
			&cli.DurationFlag{Name: "for", Value: flushDefaultWindow, Usage: "measurement window"},
			&cli.Float64Flag{Name: "hz", Value: 4, Usage: "samples per second (2-10)"},
			&cli.BoolFlag{Name: "trigger", Usage: "run sync in the guest through the guest agent at the start of the window"},
		},
		Action: flushAction,
	}
}

// flushSample is one point of the time series (units in the names).
type flushSample struct {
	TimeS           float64                      `json:"t_s"`
	DirtyBytes      int64                        `json:"dirty_bytes"`
	WritebackBytes  int64                        `json:"writeback_bytes"`
	QEMUWriteBytes  int64                        `json:"qemu_write_bytes"`
	Disks           map[string]flushDiskStat     `json:"disks"`
	BusyRetries     int                          `json:"-"`
	Volumes         map[string]sampler.PageCache `json:"volume_page_cache,omitempty"`
	DeviceFlushIOs  map[string]int64             `json:"device_flush_ios,omitempty"`
	DeviceWriteSect map[string]int64             `json:"device_write_sectors,omitempty"`
}

type flushDiskStat struct {
	WrBytes          int64 `json:"wr_bytes"`
	FlushOps         int64 `json:"flush_operations"`
	FlushTotalTimeNs int64 `json:"flush_total_time_ns"`
}

type flushVerdict struct {
	Disk             string  `json:"disk"`
	Mode             string  `json:"mode"`
	Verdict          string  `json:"verdict"`
	Reason           string  `json:"reason"`
	WrittenBytes     int64   `json:"written_bytes"`
	Flushes          int64   `json:"flushes"`
	FlushTimeMs      float64 `json:"flush_time_ms"`
	MeanFlushMs      float64 `json:"mean_flush_ms"`
	CrashLosesBytes  int64   `json:"crash_loses_bytes,omitempty"`
	DeviceFlushes    *int64  `json:"device_flushes,omitempty"`
	DeviceWriteBytes *int64  `json:"device_write_bytes,omitempty"`
}

type flushJSON struct {
	VMID     int            `json:"vmid"`
	WindowS  float64        `json:"window_s"`
	Trigger  bool           `json:"trigger"`
	Samples  []flushSample  `json:"samples"`
	Verdicts []flushVerdict `json:"verdicts"`
}

func flushAction(c *cli.Context) error {
	e := newEnv(c)
	vmid, err := vmidArg(c)
	if err != nil {
		return err
	}
	hz := c.Float64("hz")
	if hz < 2 || hz > 10 {
		return exitcode.Usagef("--hz %g: use 2 to 10 samples per second", hz)
	}
	window := c.Duration("for")
	if window < time.Second {
		return exitcode.Usagef("--for %s: the window must be at least 1s", window)
	}
	v, err := loadVM(e, vmid)
	if err != nil {
		return err
	}
	disks, err := v.Select(c.Args().Tail())
	if err != nil {
		return err
	}
	if !v.Running {
		return exitcode.Unreachablef("VM %d is not running: flushes can only be measured on a running VM", vmid)
	}
	if err := v.FetchLive(e.ctx(), e.timeout); err != nil {
		return exitcode.Unreachablef("%s", qmpErrMsg(vmid, err))
	}
	res, err := measureFlushes(e, v, disks, window, hz, c.Bool("trigger"))
	if err != nil {
		return err
	}
	if e.json {
		if err := e.printJSON(res); err != nil {
			return err
		}
	} else {
		printFlushSeries(e, res)
		for _, fv := range res.Verdicts {
			fmt.Fprintf(e.out, "%s (%s):\n", fv.Disk, fv.Mode)
			printFlushVerdictLine(e, &fv)
		}
	}
	for _, fv := range res.Verdicts {
		if fv.Verdict == "ignored" {
			return exitcode.ErrProblem
		}
	}
	return nil
}

// measureFlushes samples the window and judges each disk.
func measureFlushes(e *env, v *vm.VM, disks []*vm.Disk, window time.Duration, hz float64, trigger bool) (*flushJSON, error) {
	host := sampler.Host{Proc: e.paths.Proc, Sys: e.paths.Sys}
	ids := map[string]bool{}
	devs := map[string]string{} // disk -> block device path (as this process sees it)
	vols := map[string]string{} // disk -> volume file or device, for cachestat
	for _, d := range disks {
		if d.Running == nil || (d.Drive != nil && d.Drive.IsCDROM()) {
			continue
		}
		ids[d.ID] = true
		if p := d.Running.Path; d.Running.Driver == "host_device" && p != "" {
			devs[d.ID] = v.HostPath(p)
		}
		if p := d.Running.Path; (d.Running.Driver == "host_device" || d.Running.Driver == "file") && p != "" {
			vols[d.ID] = v.HostPath(p)
		}
	}
	res := &flushJSON{VMID: v.VMID, WindowS: window.Seconds(), Trigger: trigger, Samples: []flushSample{}, Verdicts: []flushVerdict{}}
	ctx := e.ctx()
	var diskIDs []string
	for id := range ids {
		diskIDs = append(diskIDs, id)
	}
	triggerDone := make(chan error, 1)
	if !trigger {
		triggerDone <- nil
	}
	progress := isTerminal(e.errOut) && !e.json
	var start time.Time
	// The shared sampler takes query-blockstats on a fixed schedule (one
	// exchange per tick, a briefly busy socket retried); the host counters
	// are read right after each of its samples.
	bs := &sampler.Blockstats{
		Socket: v.QMPSocket(), Disks: diskIDs, Timeout: e.timeout,
		Interval: time.Duration(float64(time.Second) / hz), Patience: 3 * time.Second,
		OnSample: func(q sampler.Sample, elapsed, window time.Duration) {
			if start.IsZero() {
				start = q.Time
			}
			s := flushSample{TimeS: q.Time.Sub(start).Seconds(), Disks: map[string]flushDiskStat{}, Volumes: map[string]sampler.PageCache{}, DeviceFlushIOs: map[string]int64{}, DeviceWriteSect: map[string]int64{}}
			for id, b := range q.Stats {
				s.Disks[id] = flushDiskStat{b.WrBytes, b.FlushOps, b.FlushTotalTimeNs}
			}
			if m, err := host.Memory(); err == nil {
				s.DirtyBytes, s.WritebackBytes = m.DirtyBytes, m.WritebackBytes
			}
			if wb, err := host.ProcessWriteBytes(v.Pid); err == nil {
				s.QEMUWriteBytes = wb
			}
			for id, p := range vols {
				if pc, err := sampler.VolumePageCache(p); err == nil {
					s.Volumes[id] = pc
				}
			}
			for id, dev := range devs {
				if st, err := host.BlockDeviceStat(dev); err == nil {
					s.DeviceFlushIOs[id], s.DeviceWriteSect[id] = st.FlushIOs, st.WriteSectors
				}
			}
			res.Samples = append(res.Samples, s)
			if trigger && len(res.Samples) == 1 {
				go func() { triggerDone <- guestSync(ctx, v, e.timeout) }()
			}
			if progress {
				fmt.Fprintf(e.errOut, "\rsampling %4.1f/%.0f s", elapsed.Seconds(), window.Seconds())
			}
		},
	}
	_, err := bs.Run(ctx, window)
	if progress {
		fmt.Fprint(e.errOut, "\r\x1b[K")
	}
	if trigger && len(res.Samples) == 0 {
		triggerDone <- nil // the trigger never started
	}
	if err != nil {
		<-triggerDone
		if ctx.Err() != nil {
			return nil, errors.New("interrupted")
		}
		return nil, exitcode.Unreachablef("%s", qmpErrMsg(v.VMID, err))
	}
	if err := <-triggerDone; err != nil {
		return nil, exitcode.Unreachablef("--trigger: %v", err)
	}
	for _, d := range disks {
		if ids[d.ID] {
			res.Verdicts = append(res.Verdicts, judgeFlush(d, res.Samples))
		}
	}
	return res, nil
}

// guestSync asks the guest to flush: sync, then fsync each disk device (a
// plain sync sends no flush for raw-device writes).
func guestSync(ctx context.Context, v *vm.VM, timeout time.Duration) error {
	a := qmp.Agent{Path: v.QGASocket(), Timeout: timeout}
	script := `sync; for d in /dev/sd? /dev/vd?; do [ -b "$d" ] || continue; sync "$d" 2>/dev/null || fsync "$d" 2>/dev/null; done; true`
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	st, err := a.Run(ctx, "/bin/sh", []string{"-c", script}, nil, 200*time.Millisecond)
	if err != nil {
		return err
	}
	if st.ExitCode != 0 {
		return fmt.Errorf("sync in the guest exited %d: %s", st.ExitCode, strings.TrimSpace(string(st.Stderr)))
	}
	return nil
}

// judgeFlush turns a disk's series into a verdict. The decision rests on
// the flush timing and on this QEMU's own write_bytes, not on node-wide
// Dirty, which other writers move.
func judgeFlush(d *vm.Disk, samples []flushSample) flushVerdict {
	first, last := samples[0], samples[len(samples)-1]
	a, b := first.Disks[d.ID], last.Disks[d.ID]
	fv := flushVerdict{Disk: d.ID, WrittenBytes: b.WrBytes - a.WrBytes, Flushes: b.FlushOps - a.FlushOps}
	fv.FlushTimeMs = float64(b.FlushTotalTimeNs-a.FlushTotalTimeNs) / 1e6
	if fv.Flushes > 0 {
		fv.MeanFlushMs = fv.FlushTimeMs / float64(fv.Flushes)
	}
	if f, ok := last.DeviceFlushIOs[d.ID]; ok {
		df := f - first.DeviceFlushIOs[d.ID]
		dw := (last.DeviceWriteSect[d.ID] - first.DeviceWriteSect[d.ID]) * 512
		fv.DeviceFlushes, fv.DeviceWriteBytes = &df, &dw
	}
	noFlush, direct := false, true
	if d.Live != nil && d.Live.Inserted {
		fv.Mode = d.Live.Mode
		noFlush, direct = d.Live.Format.NoFlush, d.Live.Format.Direct
	} else if d.Running != nil {
		fv.Mode = d.Running.Mode()
		noFlush, direct = d.Running.CacheNoFlush, d.Running.CacheDirect
	}
	// Did real data reach node RAM? Best evidence: the volume's own page
	// cache (cachestat) grew or held dirty pages. Without it, this QEMU's
	// write_bytes (buffered writes only) less what its other disks wrote.
	_, hasPC := first.Volumes[d.ID]
	var cacheGrowth, maxHeld, endHeld int64
	if hasPC {
		cacheGrowth = last.Volumes[d.ID].CachedBytes - first.Volumes[d.ID].CachedBytes
		base := first.Volumes[d.ID].DirtyBytes + first.Volumes[d.ID].WritebackBytes
		for _, s := range samples {
			if h := s.Volumes[d.ID].DirtyBytes + s.Volumes[d.ID].WritebackBytes - base; h > maxHeld {
				maxHeld = h
			}
		}
		endHeld = last.Volumes[d.ID].DirtyBytes + last.Volumes[d.ID].WritebackBytes
	} else {
		endHeld = last.DirtyBytes + last.WritebackBytes
	}
	qemuWritten := last.QEMUWriteBytes - first.QEMUWriteBytes
	for id, st := range last.Disks {
		if id != d.ID {
			qemuWritten -= st.WrBytes - first.Disks[id].WrBytes
		}
	}
	realData := qemuWritten >= fv.WrittenBytes/10
	if hasPC {
		realData = cacheGrowth >= fv.WrittenBytes/10 || maxHeld >= fv.WrittenBytes/10 || endHeld >= fv.WrittenBytes/10
	}
	switch {
	case fv.Mode == "writethrough":
		fv.Verdict = "not-applicable"
		fv.Reason = fmt.Sprintf("cache=writethrough: QEMU writes every write through to storage before acknowledging it, so nothing acknowledged waits in node RAM (%s written)", units.MiBf(float64(fv.WrittenBytes)))
	case direct && !noFlush:
		fv.Verdict = "not-applicable"
		fv.Reason = fmt.Sprintf("cache=%s opens the volume with O_DIRECT: nothing is held in node RAM (%s written, %d flushes taking %.1f ms)", fv.Mode, units.MiBf(float64(fv.WrittenBytes)), fv.Flushes, fv.FlushTimeMs)
		if fv.Mode == "none" {
			fv.Reason += "; flushes reach the storage's own cache"
		}
	case fv.WrittenBytes >= 1<<20 && !realData:
		fv.Verdict = "zero-data"
		fv.Reason = fmt.Sprintf("the guest wrote %s but none of it entered node RAM: the writes were zeroes, which detect-zeroes turns into write-zeroes, so there is nothing to judge; write non-zero data (e.g. yes | dd ... oflag=direct conv=fsync)", units.MiBf(float64(fv.WrittenBytes)))
	case fv.Flushes == 0:
		fv.Verdict = "no-flushes"
		fv.Reason = fmt.Sprintf("the guest sent no flush in the window (%s written): run a workload that fsyncs, or use --trigger to run sync in the guest", units.MiBf(float64(fv.WrittenBytes)))
	case fv.MeanFlushMs*1e6 < ignoredFlushNs && (noFlush || (realData && endHeld > 0)):
		fv.Verdict = "ignored"
		// What a crash loses is what this volume holds in node RAM now
		// (whenever the guest wrote it); without cachestat, at most what
		// the guest wrote in the window.
		fv.CrashLosesBytes = endHeld
		if !hasPC && fv.WrittenBytes < endHeld {
			fv.CrashLosesBytes = fv.WrittenBytes
		}
		held := "this volume's dirty+writeback pages"
		if !hasPC {
			held = "node Dirty+Writeback"
		}
		fv.Reason = fmt.Sprintf("%d flush(es) counted but took %.3f ms in all: the data the guest believes safe is still in node RAM (%s now %s, %s written in the window); a host crash would lose up to %s",
			fv.Flushes, fv.FlushTimeMs, held, units.MiBf(float64(endHeld)), units.MiBf(float64(fv.WrittenBytes)), units.MiBf(float64(fv.CrashLosesBytes)))
		if noFlush {
			fv.Reason += " (QEMU runs this disk with cache.no-flush: cache=unsafe)"
		}
	default:
		fv.Verdict = "honored"
		fv.Reason = fmt.Sprintf("%d flush(es) took %.1f ms (%.2f ms each): the node wrote the guest's data to storage before acknowledging (%s written in the window)", fv.Flushes, fv.FlushTimeMs, fv.MeanFlushMs, units.MiBf(float64(fv.WrittenBytes)))
		if fv.MeanFlushMs*1e6 < ignoredFlushNs {
			fv.Reason = fmt.Sprintf("%d flush(es), %.3f ms each: nothing of this disk was waiting in node RAM to be written", fv.Flushes, fv.MeanFlushMs)
		}
	}
	return fv
}

func printFlushSeries(e *env, r *flushJSON) {
	t := newTable(e.out, "T(s)", "GUEST MiB W", "FLUSHES", "FLUSH ms", "DIRTY MiB", "WRITEBACK MiB")
	prev := r.Samples[0]
	nextT := 1.0
	for i, s := range r.Samples[1:] {
		if s.TimeS < nextT && i != len(r.Samples)-2 {
			continue
		}
		var wr, fl, ft int64
		for id, d := range s.Disks {
			p := prev.Disks[id]
			wr += d.WrBytes - p.WrBytes
			fl += d.FlushOps - p.FlushOps
			ft += d.FlushTotalTimeNs - p.FlushTotalTimeNs
		}
		t.row(fmt.Sprintf("%.0f", math.Round(s.TimeS)), fmt.Sprintf("%.1f", float64(wr)/(1<<20)), fmt.Sprint(fl), fmt.Sprintf("%.2f", float64(ft)/1e6),
			fmt.Sprintf("%.1f", float64(s.DirtyBytes)/(1<<20)), fmt.Sprintf("%.1f", float64(s.WritebackBytes)/(1<<20)))
		prev = s
		nextT = math.Floor(s.TimeS) + 1
	}
	t.flush()
}

func printFlushVerdictLine(e *env, f *flushVerdict) {
	color := green
	switch f.Verdict {
	case "ignored":
		color = red
	case "no-flushes", "zero-data":
		color = yellow
	case "not-applicable":
		color = ""
	}
	fmt.Fprintf(e.out, "  flushes: %s: %s\n", e.paint(color, f.Verdict), f.Reason)
}

// addFlushVerdicts is cache --verify: measure the disks whose mode keeps
// data in node RAM and attach the verdicts.
func addFlushVerdicts(e *env, v *vm.VM, out *cacheJSON, window time.Duration, trigger bool) error {
	var disks []*vm.Disk
	for _, d := range out.Disks {
		if d.Media == "disk" && d.Cache.Effective != nil && (*d.Cache.Effective == "writeback" || *d.Cache.Effective == "unsafe") {
			disks = append(disks, v.Disk(d.ID))
		}
	}
	if len(disks) == 0 {
		return nil
	}
	res, err := measureFlushes(e, v, disks, window, 4, trigger)
	if err != nil {
		return err
	}
	for i := range out.Disks {
		for j := range res.Verdicts {
			if res.Verdicts[j].Disk == out.Disks[i].ID {
				out.Disks[i].Flush = &res.Verdicts[j]
			}
		}
	}
	return nil
}
