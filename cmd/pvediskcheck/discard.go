package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/units"

	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

func init() { commands = append(commands, discardCommand()) }

const discardTrimTimeout = 10 * time.Minute

func discardCommand() *cli.Command {
	return &cli.Command{
		Name:      "discard",
		Usage:     "prove whether space the guest trims really goes back to the storage",
		ArgsUsage: "VMID [DISK...]",
		Description: `The guest cannot tell whether its trims free anything: every controller
advertises discard whatever the disk's setting, and fstrim reports what the
filesystem handed down, not what the storage freed. QEMU's device counters
(unmap_*) count discards even when QEMU drops them. Only the node can prove it:
the protocol block node's counters (what reached the storage) and the storage's
own allocation figure.

Without options (status), per disk: discard as configured and as the running
QEMU has it (and at the next start when pending), ssd emulation, whether the
controller passes discards, whether the storage is thin, the volume's virtual
size and allocated bytes, and since-start counters: discards the guest sent
(device unmap_*; VirtIO Block does not count them) and discards that reached
the storage (protocol node discard-nb-ok, discard-bytes-ok, discard-nb-failed).

Allocated bytes come from each storage's own tool:
   lvmthin                 lvs: data_percent x lv_size (0.01 % resolution),
                           plus the pool's size, use and discards mode
   dir, nfs, cifs, btrfs   raw: the file's allocated blocks (st_blocks);
                           qcow2: qemu-img info --force-share actual-size
   zfspool                 zfs get: referenced (usedbysnapshots, pool used)
   rbd                     rbd du: used_size
Other types (thick lvm, iscsi, ...) are reported as not measurable, with why.

--trim asks the guest to trim, through the guest agent (agent: 1 and
qemu-guest-agent running): everything above is measured, guest-fstrim runs
(up to --trim-timeout, with a progress line on a terminal), and everything is
measured again. Per disk: the guest says it trimmed X, QEMU received Y, the
storage accepted Z, the volume went from A to B bytes (returned = A - B), the
pool from P to Q, and a verdict:
   returned         the volume's allocation went down
   partly-returned  it went down, but snapshots held part back in the pool, or
                    the storage refused some discards
   not-returned     it did not go down (exit 1)
   not-trimmed      the guest trimmed nothing there (no mounted filesystem on
                    the disk, or no discards seen): nothing to prove
   unmeasured       the storage's allocation cannot be read here
with the reasons that apply: discard=ignore (and the qm set that fixes it,
applied at the next full stop and start), the guest sent nothing (ext4 re-trims
only what changed since its last trim), the storage refused the discards, the
LVM-thin pool ignores discards, snapshots still hold the blocks, discards
smaller than the pool's chunk size, ranges that held nothing.

--wait DURATION does the same without a guest agent: it measures, watches the
counters for DURATION while you run fstrim in the guest (e.g. fstrim -av), and
measures again. The guest's own figure is then unknown.

Changes: --trim runs guest-fstrim in the guest (it discards free space of
every mounted filesystem; the guest's data is untouched). Nothing else is
changed: no option, no config. Reads the config, storage.cfg, the running
QEMU's command line, the QMP socket (short exchanges), the guest agent socket
(--trim), and runs lvs / qemu-img / zfs / rbd with --timeout each.

EXAMPLES
   pvediskcheck discard 370
   pvediskcheck discard 370 scsi1 --trim
   pvediskcheck discard 370 --wait 2m        # run fstrim -av in the guest meanwhile
   pvediskcheck --json discard 370 --trim

` + exitcode.Help + `
   --trim/--wait: 1 when a disk's verdict is not-returned.
   3 also when a tool (lvs, qemu-img, zfs, rbd) times out or fails, or a volume
   is missing from its report (checked before the guest is asked to trim), when
   the guest agent does not answer, or guest-fstrim outlasts --trim-timeout.
   A stopped VM: the status shows the allocation without counters, exit 3.`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "trim", Usage: "ask the guest to trim (guest agent guest-fstrim) and prove what came back"},
			&cli.DurationFlag{Name: "wait", Usage: "watch for `DURATION` while fstrim runs in the guest (no guest agent needed), then prove what came back"},
			&cli.DurationFlag{Name: "trim-timeout", Value: discardTrimTimeout, Usage: "how long guest-fstrim may take"},
		},
		Action: discardAction,
	}
}

// discardJSON is the --json schema of `discard` (README "JSON schemas").
type discardJSON struct {
	VMID    int    `json:"vmid"`
	Running bool   `json:"running"`
	Mode    string `json:"mode"` // status, trim, wait
	// WindowSeconds is how long guest-fstrim took (trim) or the watch
	// window (wait).
	WindowSeconds *float64          `json:"window_seconds,omitempty"`
	GuestFstrim   []guestTrimPath   `json:"guest_fstrim,omitempty"`
	Disks         []discardDiskJSON `json:"disks"`
	Notes         []string          `json:"notes,omitempty"`
}

type discardDiskJSON struct {
	ID          string `json:"id"`
	Controller  string `json:"controller"`
	Volume      string `json:"volume"`
	Storage     string `json:"storage"`
	StorageType string `json:"storage_type"`
	Thin        bool   `json:"thin"`
	// Discard is on/ignore in Proxmox's words for each view.
	Discard discardOptJSON `json:"discard"`
	SSD     ssdJSON        `json:"ssd"`
	// ControllerDiscard: "yes", "guest kernel 5.0 or newer" (VirtIO Block),
	// or "no".
	ControllerDiscard string `json:"controller_discard"`
	// Allocation now (status) or after (trim/wait).
	Allocation alloc.Result `json:"allocation"`
	// SinceStart are the counters since QEMU started; nil when not running.
	SinceStart *discardCountersJSON `json:"since_start"`
	Warnings   []discardReason      `json:"warnings"`
	Result     *discardResultJSON   `json:"result,omitempty"`
}

type discardOptJSON struct {
	Configured string  `json:"configured"`
	Running    *string `json:"running"`
	Pending    *string `json:"pending"`
}

type ssdJSON struct {
	Configured bool  `json:"configured"`
	Running    *bool `json:"running"`
}

type discardCountersJSON struct {
	ProtocolNode string `json:"protocol_node"`
	// GuestSent* are the device's unmap_operations/unmap_bytes: counted
	// even when QEMU drops the discards; DeviceCounts is false on VirtIO
	// Block, where QEMU does not count them.
	GuestSentOps         int64 `json:"guest_sent_ops"`
	GuestSentBytes       int64 `json:"guest_sent_bytes"`
	DeviceCounts         bool  `json:"device_counts_discards"`
	StorageAcceptedOps   int64 `json:"storage_accepted_ops"`
	StorageAcceptedBytes int64 `json:"storage_accepted_bytes"`
	StorageFailedOps     int64 `json:"storage_failed_ops"`
}

type discardResultJSON struct {
	GuestTrimmedBytes    *int64          `json:"guest_trimmed_bytes"`
	QEMUReceivedOps      int64           `json:"qemu_received_ops"`
	QEMUReceivedBytes    int64           `json:"qemu_received_bytes"`
	StorageAcceptedOps   int64           `json:"storage_accepted_ops"`
	StorageAcceptedBytes int64           `json:"storage_accepted_bytes"`
	StorageFailedOps     int64           `json:"storage_failed_ops"`
	AllocatedBeforeBytes *int64          `json:"allocated_before_bytes"`
	AllocatedAfterBytes  *int64          `json:"allocated_after_bytes"`
	ReturnedBytes        *int64          `json:"returned_bytes"`
	ResolutionBytes      int64           `json:"resolution_bytes"`
	PoolBeforeBytes      *int64          `json:"pool_before_bytes"`
	PoolAfterBytes       *int64          `json:"pool_after_bytes"`
	PoolReturnedBytes    *int64          `json:"pool_returned_bytes"`
	Verdict              string          `json:"verdict"`
	Reasons              []discardReason `json:"reasons"`
}

// discardDisk is one disk being looked at, with what is needed to measure it.
type discardDisk struct {
	d       *vm.Disk
	drive   *qemuserver.Drive
	storage *qemuserver.Storage
	vol     alloc.Volume
	node    string // protocol node name, when known
	out     discardDiskJSON
}

// discardSnap is one measurement of every disk.
type discardSnap struct {
	at    time.Time
	dev   map[string]qmp.BlockStats // by disk id
	nodes map[string]qmp.BlockStats // by node name
	alloc map[string]alloc.Result   // by disk id
	pci   map[string]string
}

func discardAction(c *cli.Context) error {
	e := newEnv(c)
	vmid, err := vmidArg(c)
	if err != nil {
		return err
	}
	mode := "status"
	switch {
	case c.Bool("trim") && c.IsSet("wait"):
		return exitcode.Usagef("discard: --trim and --wait exclude each other (--trim uses the guest agent, --wait watches while you trim in the guest)")
	case c.Bool("trim"):
		mode = "trim"
	case c.IsSet("wait"):
		mode = "wait"
		if c.Duration("wait") <= 0 {
			return exitcode.Usagef("discard: --wait needs a positive duration, e.g. --wait 2m")
		}
	}
	v, err := loadVM(e, vmid)
	if err != nil {
		return err
	}
	sel, err := v.Select(c.Args().Tail())
	if err != nil {
		return err
	}
	if mode != "status" && !v.Running {
		return exitcode.Unreachablef("VM %d is not running: --%s needs the running QEMU (and the guest)", vmid, mode)
	}
	out := discardJSON{VMID: vmid, Running: v.Running, Mode: mode, Disks: []discardDiskJSON{}}
	disks := discardDisks(e, v, sel)
	out.Notes = append(out.Notes, v.Notes...)
	for _, d := range sel {
		if !slices.ContainsFunc(disks, func(dd *discardDisk) bool { return dd.d == d }) {
			out.Notes = append(out.Notes, d.NotListed())
		}
	}
	if v.Running {
		if err := v.FetchLive(e.ctx(), e.timeout); err != nil {
			return exitcode.Unreachablef("%s", qmpErrMsg(vmid, err))
		}
		for _, dd := range disks {
			if dd.d.Live != nil && dd.d.Live.Inserted {
				dd.node = dd.d.Live.Protocol.Name
			}
		}
	}

	// Measure first: a tool that fails stops everything before the guest is
	// asked to trim anything.
	before, err := discardMeasure(e, v, disks, mode == "trim")
	if err != nil {
		return err
	}
	var agent qmp.Agent
	var fsinfo []qmp.GuestFilesystem
	if mode == "trim" {
		if !agentEnabled(v) {
			return exitcode.Unreachablef("VM %d has no guest agent configured (agent: 1): use --wait and run fstrim in the guest instead", vmid)
		}
		agent = qmp.Agent{Path: v.QGASocket(), Timeout: e.timeout}
		if _, err := os.Stat(agent.Path); err != nil {
			return exitcode.Unreachablef("VM %d: no guest agent socket at %s (agent: 1 needs a VM restart to add it)", vmid, agent.Path)
		}
		// Also proves the agent answers before the trim is asked for.
		if fsinfo, err = agent.FsInfo(e.ctx()); err != nil {
			var ae *qmp.AgentError
			if !errors.As(err, &ae) || ae.Class != "CommandNotFound" && !strings.Contains(ae.Desc, "disabled") {
				return exitcode.Unreachablef("VM %d: %v", vmid, err)
			}
			fsinfo = nil // an old or restricted agent: trims cannot be placed on disks
		}
	}

	var after *discardSnap
	var guest *guestTrim
	switch mode {
	case "trim":
		start := time.Now()
		res, err := discardRunTrim(e, agent, c.Duration("trim-timeout"))
		if err != nil {
			return exitcode.Unreachablef("VM %d: %v", vmid, err)
		}
		w := time.Since(start).Seconds()
		out.WindowSeconds = &w
		g := attributeTrim(res, fsinfo, before.pci, qemuserver.SCSIHW(v.Config.Main))
		guest = &g
		out.GuestFstrim = g.Paths
		if !g.Mapped {
			out.Notes = append(out.Notes, "the guest's filesystems could not be placed on disks (guest-get-fsinfo or query-pci gave nothing): guest figures are per filesystem only")
		}
	case "wait":
		if err := discardWatch(e, v, disks, before, c.Duration("wait")); err != nil {
			return err
		}
		w := c.Duration("wait").Seconds()
		out.WindowSeconds = &w
	}
	if mode != "status" {
		if after, err = discardMeasure(e, v, disks, false); err != nil {
			return err
		}
	}

	exitNot := false
	for _, dd := range disks {
		dj := dd.out
		snap := before
		if after != nil {
			snap = after
		}
		dj.Allocation = snap.alloc[dd.d.ID]
		if v.Running {
			dj.SinceStart = discardCounters(dd, snap)
		}
		dj.Warnings = discardWarnings(v, dd, dj)
		if after != nil {
			dj.Result = discardResult(v, dd, mode, before, after, guest)
			if dj.Result.Verdict == verdictNot {
				exitNot = true
			}
		}
		out.Disks = append(out.Disks, dj)
	}
	if !v.Running {
		out.Notes = append(out.Notes, fmt.Sprintf("VM %d is not running: no counters; allocation as the storage reports it", vmid))
	}
	if e.json {
		if err := e.printJSON(out); err != nil {
			return err
		}
	} else {
		printDiscard(e, out)
	}
	if !v.Running {
		return exitcode.Unreachablef("VM %d is not running", vmid)
	}
	if exitNot {
		return exitcode.ErrProblem
	}
	return nil
}

// discardDisks prepares the selected disks (CD-ROMs, EFI vars and empty
// drives have nothing to trim).
func discardDisks(e *env, v *vm.VM, sel []*vm.Disk) []*discardDisk {
	var out []*discardDisk
	for _, d := range sel {
		drv := d.Drive
		if drv == nil || drv.IsCDROM() || drv.IsNone() || drv.Bus == "efidisk" || drv.Bus == "tpmstate" {
			continue
		}
		dd := &discardDisk{d: d, drive: drv}
		dd.storage = v.Storages[drv.StorageID()]
		j := discardDiskJSON{ID: d.ID, Volume: drv.Volume, Storage: drv.StorageID(), Warnings: []discardReason{}}
		set := d.Configured
		if d.Running != nil {
			set = d.Running
		}
		if set != nil {
			j.Controller = set.Controller
			dd.vol = alloc.Volume{Storage: dd.storage, VolName: drv.VolName(), Path: v.HostPath(set.Path), Format: set.Format}
		}
		if dd.storage != nil {
			j.StorageType = dd.storage.Type
		}
		j.Thin = wastesThin(v, dd.storage, d)
		j.Discard.Configured = "ignore"
		if drv.Opts["discard"] == "on" {
			j.Discard.Configured = "on"
		}
		if d.Running != nil {
			r := proxmoxDiscard(d.Running.Discard)
			j.Discard.Running = &r
			if ro, ok := v.Cmdline.Devices[d.ID]["rotation_rate"]; ok {
				b := ro == "1"
				j.SSD.Running = &b
			} else {
				b := false
				j.SSD.Running = &b
			}
		}
		if d.PendingDrive != nil {
			p := "ignore"
			if d.PendingDrive.Opts["discard"] == "on" {
				p = "on"
			}
			if p != j.Discard.Configured {
				j.Discard.Pending = &p
			}
		}
		j.SSD.Configured = drv.Bool("ssd")
		switch drv.Bus {
		case "scsi", "sata", "ide":
			j.ControllerDiscard = "yes"
		case "virtio":
			j.ControllerDiscard = "guest kernel 5.0 or newer"
		default:
			j.ControllerDiscard = "no"
		}
		dd.out = j
		out = append(out, dd)
	}
	return out
}

func proxmoxDiscard(qemu string) string {
	if qemu == "unmap" || qemu == "on" {
		return "on"
	}
	return "ignore"
}

func agentEnabled(v *vm.VM) bool {
	a, ok := v.Config.Main["agent"]
	if !ok {
		return false
	}
	first, _, _ := strings.Cut(a, ",")
	first = strings.TrimPrefix(first, "enabled=")
	b, _ := qemuserver.ParseBool(first)
	return b
}

// discardMeasure takes one snapshot: QEMU's counters (and, for --trim, the
// PCI layout) in one QMP exchange, then every volume's allocation. Any tool
// failing is exit 3: nothing is guessed.
func discardMeasure(e *env, v *vm.VM, disks []*discardDisk, withPCI bool) (*discardSnap, error) {
	s := &discardSnap{at: time.Now(), alloc: map[string]alloc.Result{}}
	if v.Running {
		if err := discardReadCounters(e.ctx(), v, e.timeout, s, withPCI); err != nil {
			return nil, exitcode.Unreachablef("%s", qmpErrMsg(v.VMID, err))
		}
	}
	m := alloc.NewMeter(e.runner, e.timeout)
	for _, dd := range disks {
		r, err := m.Measure(e.ctx(), dd.vol)
		if err != nil {
			return nil, exitcode.Unreachablef("VM %d %s: cannot measure the allocation of %s: %v", v.VMID, dd.d.ID, dd.drive.Volume, err)
		}
		s.alloc[dd.d.ID] = r
	}
	return s, nil
}

func discardReadCounters(ctx context.Context, v *vm.VM, timeout time.Duration, s *discardSnap, withPCI bool) error {
	return qmp.DoRetry(ctx, v.QMPSocket(), timeout, timeout, func(q qmp.Session) error {
		s.dev, s.nodes = map[string]qmp.BlockStats{}, map[string]qmp.BlockStats{}
		r, err := q.Exec("query-blockstats", nil)
		if err != nil {
			return err
		}
		for _, b := range qmp.ParseBlockstats(r) {
			s.dev[b.ID] = b
		}
		r, err = q.Exec("query-blockstats", map[string]any{"query-nodes": true})
		if err != nil {
			return err
		}
		for _, b := range qmp.ParseBlockstats(r) {
			s.nodes[b.NodeName] = b
		}
		s.at = time.Now()
		if withPCI {
			r, err := q.Exec("query-pci", nil)
			if err != nil {
				return err
			}
			s.pci = pciDevices(r)
		}
		return nil
	})
}

// discardRunTrim runs guest-fstrim with a progress line on a terminal.
func discardRunTrim(e *env, a qmp.Agent, timeout time.Duration) ([]qmp.FstrimResult, error) {
	ctx, cancel := context.WithTimeout(e.ctx(), timeout)
	defer cancel()
	done := make(chan struct{})
	if isTerminal(e.errOut) {
		start := time.Now()
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				select {
				case <-done:
					fmt.Fprint(e.errOut, "\r\x1b[K")
					return
				case <-t.C:
					fmt.Fprintf(e.errOut, "\rguest-fstrim running in the guest: %s (gives up after %s)", time.Since(start).Round(time.Second), timeout)
				}
			}
		}()
	}
	res, err := a.Fstrim(ctx, 0)
	close(done)
	return res, err
}

// discardWatch samples the counters every second for the window, showing
// what arrives on a terminal.
func discardWatch(e *env, v *vm.VM, disks []*discardDisk, before *discardSnap, window time.Duration) error {
	ctx := e.ctx()
	end := time.Now().Add(window)
	tty := isTerminal(e.errOut)
	if tty {
		fmt.Fprintf(e.errOut, "watching for %s: run fstrim in the guest now (e.g. fstrim -av)\n", window)
	}
	for time.Now().Before(end) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(min(time.Second, time.Until(end))):
		}
		if !tty {
			continue
		}
		s := &discardSnap{}
		if err := discardReadCounters(ctx, v, e.timeout, s, false); err != nil {
			continue // a busy socket costs one progress tick, not the window
		}
		var sent, ok int64
		for _, dd := range disks {
			sent += s.dev[dd.d.ID].UnmapBytes - before.dev[dd.d.ID].UnmapBytes
			if dd.node != "" {
				ok += s.nodes[dd.node].DiscardBytesOK - before.nodes[dd.node].DiscardBytesOK
			}
		}
		fmt.Fprintf(e.errOut, "\r\x1b[K%s left: QEMU received %s, storage accepted %s", time.Until(end).Round(time.Second), units.Bytes(sent), units.Bytes(ok))
	}
	if tty {
		fmt.Fprint(e.errOut, "\r\x1b[K")
	}
	return nil
}

func discardCounters(dd *discardDisk, s *discardSnap) *discardCountersJSON {
	dev := s.dev[dd.d.ID]
	c := &discardCountersJSON{ProtocolNode: dd.node, GuestSentOps: dev.UnmapOps, GuestSentBytes: dev.UnmapBytes, DeviceCounts: dd.drive.Bus != "virtio"}
	if n, ok := s.nodes[dd.node]; ok && dd.node != "" {
		c.StorageAcceptedOps, c.StorageAcceptedBytes, c.StorageFailedOps = n.DiscardNbOK, n.DiscardBytesOK, n.DiscardNbFailed
	}
	return c
}

// discardWarnings are the standing problems, visible without a trim.
func discardWarnings(v *vm.VM, dd *discardDisk, j discardDiskJSON) []discardReason {
	w := []discardReason{}
	running := j.Discard.Configured
	if j.Discard.Running != nil {
		running = *j.Discard.Running
	}
	fix := dd.drive.Clone()
	fix.Opts["discard"] = "on"
	if running == "ignore" && j.Thin {
		if j.Discard.Configured == "on" {
			w = append(w, discardReason{"discard-pending", "the config has discard=on but the running QEMU still drops discards: it applies at the next full stop and start",
				fmt.Sprintf("qm reboot %d (a reboot inside the guest is not enough)", v.VMID)})
		} else {
			text := fmt.Sprintf("discard=ignore on thin storage (%s): what the guest trims never returns to %s", j.StorageType, j.Storage)
			f := fmt.Sprintf("qm set %d --%s %s", v.VMID, dd.d.ID, fix.String())
			if v.Running {
				f += fmt.Sprintf(", then qm reboot %d (a full stop and start)", v.VMID)
			}
			w = append(w, discardReason{"discard-ignore", text, f})
		}
	}
	if j.Discard.Pending != nil && *j.Discard.Pending == "on" && j.Discard.Configured != "on" {
		w = append(w, discardReason{"discard-pending", "discard=on waits in [PENDING] for the next start", fmt.Sprintf("qm reboot %d", v.VMID)})
	}
	if dd.drive.Bus == "virtio" && running == "on" {
		w = append(w, discardReason{"virtio-blk-discard", "VirtIO Block passes discards only to guest kernels 5.0 or newer, and QEMU does not count them at the device: judge by the storage counters", ""})
	}
	if p := j.Allocation.Pool; p != nil && p.Discards == "ignore" {
		w = append(w, discardReason{"pool-ignores-discards", fmt.Sprintf("thin pool %s has discards=ignore: nothing a guest trims is freed", p.Name),
			fmt.Sprintf("with every volume of the pool inactive: lvchange --discards passdown %s", p.Name)})
	}
	if len(j.Allocation.Snapshots) > 0 {
		w = append(w, discardReason{"snapshots", fmt.Sprintf("snapshot(s) %s reference this volume's blocks: a trim cannot return to the pool what they hold", strings.Join(j.Allocation.Snapshots, ", ")), ""})
	}
	if running == "on" && !j.SSD.Configured && (dd.drive.Bus == "scsi" || dd.drive.Bus == "sata" || dd.drive.Bus == "ide") {
		w = append(w, discardReason{"ssd-off", "ssd=0: the guest sees a rotational disk; some guests (Windows among them) only trim disks they take for SSDs", fmt.Sprintf("qm set %d --%s %s,ssd=1", v.VMID, dd.d.ID, fix.String())})
	}
	return w
}

func discardResult(v *vm.VM, dd *discardDisk, mode string, before, after *discardSnap, guest *guestTrim) *discardResultJSON {
	id := dd.d.ID
	r := &discardResultJSON{}
	db, da := before.dev[id], after.dev[id]
	r.QEMUReceivedOps, r.QEMUReceivedBytes = da.UnmapOps-db.UnmapOps, da.UnmapBytes-db.UnmapBytes
	if dd.node != "" {
		nb, na := before.nodes[dd.node], after.nodes[dd.node]
		r.StorageAcceptedOps, r.StorageAcceptedBytes = na.DiscardNbOK-nb.DiscardNbOK, na.DiscardBytesOK-nb.DiscardBytesOK
		r.StorageFailedOps = na.DiscardNbFailed - nb.DiscardNbFailed
	}
	ab, aa := before.alloc[id], after.alloc[id]
	r.AllocatedBeforeBytes, r.AllocatedAfterBytes = ab.AllocatedBytes, aa.AllocatedBytes
	r.ResolutionBytes = aa.ResolutionBytes
	if ab.AllocatedBytes != nil && aa.AllocatedBytes != nil {
		d := *ab.AllocatedBytes - *aa.AllocatedBytes
		r.ReturnedBytes = &d
	}
	in := verdictIn{
		VMID: v.VMID, DiskID: id, Bus: dd.drive.Bus, ConfiguredDiscard: dd.out.Discard.Configured,
		StorageType: dd.out.StorageType, Thin: dd.out.Thin, Mode: mode,
		DevOps: r.QEMUReceivedOps, DevBytes: r.QEMUReceivedBytes, DevCounts: dd.drive.Bus != "virtio",
		OKOps: r.StorageAcceptedOps, OKBytes: r.StorageAcceptedBytes, FailedOps: r.StorageFailedOps,
		Unmeasured: aa.Unmeasured, Before: ab.AllocatedBytes, After: aa.AllocatedBytes, Resolution: aa.ResolutionBytes,
		Snapshots: aa.Snapshots, SnapshotHeldBytes: aa.SnapshotBytes,
	}
	if dd.d.Running != nil {
		in.RunningDiscard = dd.d.Running.Discard
	}
	fix := dd.drive.Clone()
	fix.Opts["discard"] = "on"
	in.FixDrive = fix.String()
	if ab.Pool != nil && aa.Pool != nil {
		in.PoolName, in.PoolDiscards, in.ChunkBytes = aa.Pool.Name, aa.Pool.Discards, aa.Pool.ChunkSizeBytes
		in.PoolBefore, in.PoolAfter, in.PoolResolution = ab.Pool.AllocatedBytes, aa.Pool.AllocatedBytes, aa.Pool.ResolutionBytes
		r.PoolBeforeBytes, r.PoolAfterBytes = ab.Pool.AllocatedBytes, aa.Pool.AllocatedBytes
		if in.PoolBefore != nil && in.PoolAfter != nil {
			d := *in.PoolBefore - *in.PoolAfter
			r.PoolReturnedBytes = &d
		}
	}
	if guest != nil {
		in.GuestMapped = guest.Mapped
		in.GuestShared = guest.Shared[id]
		if t, ok := guest.PerDisk[id]; ok {
			t := t
			in.GuestTrimmed = &t
			r.GuestTrimmedBytes = &t
		}
	}
	r.Verdict, r.Reasons = decideDiscard(in)
	if r.Reasons == nil {
		r.Reasons = []discardReason{}
	}
	return r
}

func printDiscard(e *env, out discardJSON) {
	state := e.paint(green, "running")
	if !out.Running {
		state = e.paint(yellow, "not running")
	}
	switch out.Mode {
	case "trim":
		fmt.Fprintf(e.out, "VM %d: %s; guest-fstrim took %.1f s\n", out.VMID, state, *out.WindowSeconds)
		for _, p := range out.GuestFstrim {
			on := "disks unknown"
			if len(p.Disks) > 0 {
				on = "on " + strings.Join(p.Disks, "+")
			}
			line := fmt.Sprintf("  guest %s: trimmed %s (%s)", p.Path, units.Bytes(p.TrimmedBytes), on)
			if p.Error != "" {
				line += ": error: " + p.Error
			}
			fmt.Fprintln(e.out, line)
		}
	case "wait":
		fmt.Fprintf(e.out, "VM %d: %s; watched %.0f s\n", out.VMID, state, *out.WindowSeconds)
	default:
		fmt.Fprintf(e.out, "VM %d: %s\n", out.VMID, state)
	}
	if out.Mode == "status" {
		t := newTable(e.out, "DISK", "CONTROLLER", "STORAGE", "DISCARD", "SSD", "VIRTUAL", "ALLOCATED", "GUEST SENT", "STORAGE ACCEPTED", "REFUSED")
		for _, d := range out.Disks {
			disc := d.Discard.Configured
			if d.Discard.Running != nil && *d.Discard.Running != d.Discard.Configured {
				disc += " (running " + *d.Discard.Running + ")"
			}
			sent, acc, ref := "-", "-", "-"
			if c := d.SinceStart; c != nil {
				sent = units.Bytes(c.GuestSentBytes)
				if !c.DeviceCounts {
					sent = "not counted"
				}
				acc, ref = units.Bytes(c.StorageAcceptedBytes), fmt.Sprint(c.StorageFailedOps)
			}
			stor := d.Storage + " (" + d.StorageType
			if d.Thin {
				stor += ", thin"
			}
			stor += ")"
			t.row(d.ID, units.OrDash(d.Controller), stor, disc, units.OnOff(d.SSD.Configured), units.BytesPtr(d.Allocation.VirtualBytes), allocText(d.Allocation), sent, acc, ref)
		}
		t.flush()
	}
	for _, d := range out.Disks {
		if out.Mode != "status" && d.Result != nil {
			r := d.Result
			color := green
			switch r.Verdict {
			case verdictNot:
				color = red
			case verdictPartly, verdictUnmeasured:
				color = yellow
			case verdictNotTrimmed:
				color = ""
			}
			run := d.Discard.Configured
			if d.Discard.Running != nil {
				run = *d.Discard.Running
			}
			fmt.Fprintf(e.out, "\n%s (%s, %s, discard=%s): %s\n", d.ID, d.Volume, units.OrDash(d.Controller), run, e.paint(color, r.Verdict))
			guest := "unknown (no guest agent figure for this disk)"
			if r.GuestTrimmedBytes != nil {
				guest = units.Bytes(*r.GuestTrimmedBytes)
			} else if out.Mode == "trim" {
				guest = "nothing (no mounted filesystem on this disk alone)"
			}
			fmt.Fprintf(e.out, "  guest trimmed     %s\n", guest)
			recv := fmt.Sprintf("%s in %d requests", units.Bytes(r.QEMUReceivedBytes), r.QEMUReceivedOps)
			if d.SinceStart != nil && !d.SinceStart.DeviceCounts {
				recv = "not counted (VirtIO Block)"
			}
			fmt.Fprintf(e.out, "  QEMU received     %s\n", recv)
			fmt.Fprintf(e.out, "  storage accepted  %s in %d requests, refused %d\n", units.Bytes(r.StorageAcceptedBytes), r.StorageAcceptedOps, r.StorageFailedOps)
			if r.ReturnedBytes != nil {
				res := ""
				if r.ResolutionBytes > 0 {
					res = ", +-" + units.Bytes(r.ResolutionBytes)
				}
				fmt.Fprintf(e.out, "  volume            %s -> %s allocated (returned %s%s, %s)\n", units.Bytes(*r.AllocatedBeforeBytes), units.Bytes(*r.AllocatedAfterBytes), units.Bytes(*r.ReturnedBytes), res, d.Allocation.Method)
			} else {
				fmt.Fprintf(e.out, "  volume            not measurable: %s\n", d.Allocation.Unmeasured)
			}
			if r.PoolReturnedBytes != nil {
				fmt.Fprintf(e.out, "  pool              %s -> %s allocated (returned %s, %s, all its volumes)\n", units.Bytes(*r.PoolBeforeBytes), units.Bytes(*r.PoolAfterBytes), units.Bytes(*r.PoolReturnedBytes), d.Allocation.Pool.Name)
			}
			for _, rs := range r.Reasons {
				fmt.Fprintf(e.out, "  - %s\n", rs.Text)
				if rs.Fix != "" {
					fmt.Fprintf(e.out, "    fix: %s\n", rs.Fix)
				}
			}
			continue
		}
		if len(d.Warnings) == 0 && d.Allocation.Pool == nil && d.Allocation.Unmeasured == "" {
			continue
		}
		fmt.Fprintf(e.out, "\n%s:\n", d.ID)
		if p := d.Allocation.Pool; p != nil {
			fmt.Fprintf(e.out, "  pool %s: %s of %s used (%s), discards %s\n", p.Name, units.BytesPtr(p.AllocatedBytes), units.Bytes(p.SizeBytes), units.PercentPtr(p.DataPercent), units.OrDash(p.Discards))
		}
		if d.Allocation.Unmeasured != "" {
			fmt.Fprintf(e.out, "  allocation not measurable: %s\n", d.Allocation.Unmeasured)
		}
		for _, w := range d.Warnings {
			fmt.Fprintf(e.out, "  %s %s\n", e.paint(yellow, "warning:"), w.Text)
			if w.Fix != "" {
				fmt.Fprintf(e.out, "    fix: %s\n", w.Fix)
			}
		}
	}
	for _, n := range out.Notes {
		fmt.Fprintln(e.out, "note: "+n)
	}
}

func allocText(r alloc.Result) string {
	if r.AllocatedBytes == nil {
		return "unmeasured"
	}
	return units.Bytes(*r.AllocatedBytes)
}
