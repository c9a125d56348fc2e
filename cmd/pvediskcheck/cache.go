package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/units"

	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

func init() { commands = append(commands, cacheCommand()) }

func cacheCommand() *cli.Command {
	return &cli.Command{
		Name:      "cache",
		Usage:     "show the cache mode each disk really runs with, and what a host crash loses",
		ArgsUsage: "VMID [DISK...]",
		Description: `For each disk of the VM: the controller, the storage and volume, the cache mode
in the config (and whether it is Proxmox's default), the mode the running QEMU
really uses (read from the format and protocol block nodes over QMP, not from
query-block's throttle node, plus the device's write-cache), the mode the next
start applies when [PENDING] changes it, aio and iothread as running, where a
write sits when the guest gets its acknowledgement and what a host crash loses.
A disk whose running mode differs from its config is marked DRIFT.

With --verify, disks whose mode keeps data in host RAM (writeback, unsafe) are
watched for the flush window (see 'pvediskcheck flush') and the verdict is added.

Changes nothing on the VM. Reads /etc/pve/qemu-server/VMID.conf, storage.cfg,
/proc/PID/cmdline and the QMP socket (one short exchange).

EXAMPLES
   pvediskcheck cache 370
   pvediskcheck cache 370 scsi1 --json

` + exitcode.Help + `
   A stopped VM prints its configured values and exits 3; with --verify, a disk
   whose flushes are ignored makes the exit code 1.`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "verify", Usage: "also measure whether flushes are honoured (writeback/unsafe disks; takes --for)"},
			&cli.DurationFlag{Name: "for", Value: flushDefaultWindow, Usage: "measurement window for --verify"},
			&cli.BoolFlag{Name: "trigger", Usage: "with --verify: run sync in the guest through the guest agent at the start"},
		},
		Action: cacheAction,
	}
}

// cacheJSON is the stable --json schema of `cache` (README "JSON schemas").
type cacheJSON struct {
	VMID     int             `json:"vmid"`
	Running  bool            `json:"running"`
	Blockdev bool            `json:"blockdev"`
	Disks    []cacheDiskJSON `json:"disks"`
	Notes    []string        `json:"notes,omitempty"`
}

type cacheDiskJSON struct {
	ID          string        `json:"id"`
	Media       string        `json:"media"` // disk or cdrom
	Controller  string        `json:"controller"`
	Volume      string        `json:"volume"`
	Storage     string        `json:"storage"`
	Cache       cacheModeJSON `json:"cache"`
	AIO         string        `json:"aio"`
	IOThread    bool          `json:"iothread"`
	AckedDataIn string        `json:"acked_data_in"`
	CrashLoses  string        `json:"crash_loses"`
	Drift       []string      `json:"drift"`
	Flush       *flushVerdict `json:"flush,omitempty"`
	// The disk as the guest sees it (cacheGuestNames).
	GuestByID   *string  `json:"guest_by_id"`
	GuestDevice *string  `json:"guest_device"`
	GuestMounts []string `json:"guest_mounts"`
}

type cacheModeJSON struct {
	Configured        string  `json:"configured"`
	ConfiguredDefault bool    `json:"configured_default"`
	Effective         *string `json:"effective"`
	Pending           *string `json:"pending"`
	Direct            *bool   `json:"direct"`
	NoFlush           *bool   `json:"no_flush"`
	WriteCache        *string `json:"write_cache"`
	GuestWriteCache   *bool   `json:"guest_write_cache"`
}

// modeFacts are the two sentences per mode from the lab's cache table.
var modeFacts = map[string][2]string{
	"none":         {"storage's own write cache (O_DIRECT, no node page cache) until the guest flushes", "what the guest has not flushed yet, as with a physical disk with a write cache"},
	"writethrough": {"on the storage: acknowledged only once stable (node page cache serves reads only)", "nothing that was acknowledged"},
	"writeback":    {"node RAM (page cache) until the guest flushes or the node writes it back", "everything the guest has not flushed: can be GiBs held in node RAM"},
	"directsync":   {"on the storage: acknowledged only once stable (O_DIRECT)", "nothing that was acknowledged"},
	"unsafe":       {"node RAM, and guest flushes are ignored", "even data the guest believes is safe (flushed): everything still dirty in node RAM"},
	"custom":       {"node RAM or storage, flushes ignored (not a Proxmox mode)", "data the guest believes is safe"},
}

// cdromFacts: a CD-ROM's medium is read-only, whatever its cache flags say.
var cdromFacts = [2]string{"nowhere: a CD-ROM medium is read-only", "nothing"}

func cacheAction(c *cli.Context) error {
	e := newEnv(c)
	vmid, err := vmidArg(c)
	if err != nil {
		return err
	}
	v, err := loadVM(e, vmid)
	if err != nil {
		return err
	}
	disks, err := v.Select(c.Args().Tail())
	if err != nil {
		return err
	}
	var liveErr error
	if v.Running {
		liveErr = v.FetchLive(e.ctx(), e.timeout)
	}
	out := cacheJSON{VMID: vmid, Running: v.Running, Blockdev: v.Blockdev, Disks: []cacheDiskJSON{}}
	if !v.Running {
		out.Notes = append(out.Notes, fmt.Sprintf("VM %d is not running: showing the configured values", vmid))
	} else if liveErr != nil {
		out.Notes = append(out.Notes, "QMP: "+liveErr.Error()+"; effective modes are taken from the command line")
	}
	for _, d := range disks {
		if d.Drive == nil && d.Running == nil && d.PendingDrive == nil {
			continue
		}
		if d.Drive != nil && d.Drive.IsCDROM() && d.Drive.IsNone() {
			continue // an empty CD-ROM drive
		}
		out.Disks = append(out.Disks, cacheDisk(v, d))
	}
	cacheGuestNames(e, v, out.Disks)
	if c.Bool("verify") && v.Running {
		if err := addFlushVerdicts(e, v, &out, c.Duration("for"), c.Bool("trigger")); err != nil {
			return err
		}
	}
	if e.json {
		if err := e.printJSON(out); err != nil {
			return err
		}
	} else {
		printCache(e, out)
	}
	if !v.Running {
		return exitcode.Unreachablef("VM %d is not running", vmid)
	}
	if liveErr != nil {
		return exitcode.Unreachablef("%s", qmpErrMsg(vmid, liveErr))
	}
	for _, d := range out.Disks {
		if d.Flush != nil && d.Flush.Verdict == "ignored" {
			return exitcode.ErrProblem
		}
	}
	return nil
}

func cacheDisk(v *vm.VM, d *vm.Disk) cacheDiskJSON {
	j := cacheDiskJSON{ID: d.ID, Media: "disk", Drift: []string{}}
	if d.Drive != nil && d.Drive.IsCDROM() {
		j.Media = "cdrom"
	}
	var base *qemuserver.DiskSettings
	switch {
	case d.Configured != nil:
		base = d.Configured
	case d.Running != nil:
		base = d.Running
	}
	if base != nil {
		j.Controller = base.Controller
	}
	if d.Drive != nil {
		j.Volume = d.Drive.Volume
		j.Storage = d.Drive.StorageID()
		j.Cache.Configured = d.Drive.Opts["cache"]
		if j.Cache.Configured == "" {
			j.Cache.ConfiguredDefault = true
			if d.Configured != nil {
				j.Cache.Configured = d.Configured.Mode()
			} else {
				j.Cache.Configured = "none"
			}
		}
	}
	if d.Pending != nil {
		m := d.Pending.Mode()
		if d.Drive == nil || m != j.Cache.Configured || d.PendingDrive.Opts["cache"] != d.Drive.Opts["cache"] {
			j.Cache.Pending = &m // a disk only in [PENDING] is added at the next start
		}
	}
	mode := j.Cache.Configured
	if mode == "" && j.Cache.Pending != nil {
		mode = *j.Cache.Pending
	}
	if d.Running != nil {
		j.AIO, j.IOThread, j.Controller = d.Running.AIO, d.Running.IOThread, d.Running.Controller
		direct, noFlush, wc := d.Running.CacheDirect, d.Running.CacheNoFlush, d.Running.WriteCache
		if d.Live != nil && d.Live.Inserted {
			direct, noFlush, wc = d.Live.Format.Direct, d.Live.Format.NoFlush, d.Live.WriteCache
			g := d.Live.GuestWriteCache
			j.Cache.GuestWriteCache = &g
		}
		mode = qemuserver.CacheMode(direct, noFlush, wc)
		j.Cache.Effective, j.Cache.Direct, j.Cache.NoFlush, j.Cache.WriteCache = &mode, &direct, &noFlush, &wc
		if d.Configured != nil {
			j.Drift = append(j.Drift, qemuserver.Diff(*d.Configured, *d.RunningNow())...)
		} else if d.Drive == nil {
			j.Drift = append(j.Drift, "disk is attached to the running VM but not in the config")
		}
	} else if d.Configured != nil {
		j.AIO, j.IOThread = d.Configured.AIO, d.Configured.IOThread
	}
	if v.Running && d.Running == nil && d.Drive != nil && !d.Drive.IsNone() {
		j.Drift = append(j.Drift, "disk is in the config but not attached to the running VM")
	}
	facts := modeFacts[mode]
	if j.Media == "cdrom" {
		facts = cdromFacts
	}
	j.AckedDataIn, j.CrashLoses = facts[0], facts[1]
	return j
}

func printCache(e *env, out cacheJSON) {
	state := e.paint(green, "running")
	if !out.Running {
		state = e.paint(yellow, "not running")
	}
	gen := "-blockdev"
	if !out.Blockdev {
		gen = "-drive (machine < 10.0)"
	}
	fmt.Fprintf(e.out, "VM %d: %s, %s\n", out.VMID, state, gen)
	t := newTable(e.out, "DISK", "CONTROLLER", "VOLUME", "CONFIG", "RUNNING", "NEXT START", "AIO", "IOTHREAD")
	for _, d := range out.Disks {
		cfg := units.OrDash(d.Cache.Configured)
		if d.Cache.ConfiguredDefault {
			cfg += " (default)"
		}
		run := "-"
		if d.Cache.Effective != nil {
			run = *d.Cache.Effective
			if *d.Cache.Effective == "unsafe" {
				run += " (ignores flushes)"
			}
		}
		next := "-"
		if d.Cache.Pending != nil {
			next = *d.Cache.Pending + " (pending)"
		}
		t.row(d.ID, units.OrDash(d.Controller), units.OrDash(d.Volume), cfg, run, next, units.OrDash(d.AIO), units.OnOff(d.IOThread))
	}
	t.flush()
	fmt.Fprintln(e.out)
	// The two sentences once per mode, then what is particular to a disk.
	byMode := map[string][]string{}
	var modes []string
	for _, d := range out.Disks {
		mode := d.Cache.Configured
		if d.Cache.Effective != nil {
			mode = *d.Cache.Effective
		}
		if d.Media == "cdrom" {
			mode = "cd-rom"
		}
		if byMode[mode] == nil {
			modes = append(modes, mode)
		}
		byMode[mode] = append(byMode[mode], d.ID)
	}
	for _, mode := range modes {
		color := ""
		switch mode {
		case "unsafe", "custom":
			color = red
		case "writeback":
			color = yellow
		}
		facts := modeFacts[mode]
		if mode == "cd-rom" {
			facts = cdromFacts
		}
		fmt.Fprintf(e.out, "%s (%s):\n", e.paint(color, mode), strings.Join(byMode[mode], ", "))
		fmt.Fprintf(e.out, "  acknowledged writes sit in: %s\n", facts[0])
		fmt.Fprintf(e.out, "  a host crash loses:         %s\n", facts[1])
	}
	for _, d := range out.Disks {
		var lines []string
		if d.Cache.GuestWriteCache != nil && d.Cache.WriteCache != nil && (*d.Cache.WriteCache == "on") != *d.Cache.GuestWriteCache {
			lines = append(lines, fmt.Sprintf("the guest has turned the write cache %s at runtime (configured %s)", units.OnOff(*d.Cache.GuestWriteCache), *d.Cache.WriteCache))
		}
		if g := cacheGuestLine(d); g != "" {
			lines = append(lines, g)
		}
		for _, dr := range d.Drift {
			lines = append(lines, e.paint(red, "DRIFT")+" "+dr)
		}
		if len(d.Drift) > 0 && d.Cache.Effective != nil && *d.Cache.Effective != d.Cache.Configured {
			lines = append(lines, fmt.Sprintf("config says %s, VM still runs %s: restart the VM to apply", d.Cache.Configured, *d.Cache.Effective))
		}
		if d.Cache.Pending != nil {
			lines = append(lines, "pending: the next start runs "+*d.Cache.Pending)
		}
		if len(lines) == 0 && d.Flush == nil {
			continue
		}
		fmt.Fprintf(e.out, "%s:\n", d.ID)
		for _, l := range lines {
			fmt.Fprintln(e.out, "  "+l)
		}
		if d.Flush != nil {
			printFlushVerdictLine(e, d.Flush)
		}
	}
	for _, n := range out.Notes {
		fmt.Fprintln(e.out, "note: "+n)
	}
}

// cacheAgentTimeout bounds the guest agent's answer for cache's guest
// names: a guest without a running agent must not slow cache down.
const cacheAgentTimeout = 500 * time.Millisecond

// cacheGuestNames names each disk as the guest sees it (issue 16): the
// /dev/disk/by-id name from Proxmox's layout and, for a running VM with
// agent: 1 whose agent answers within cacheAgentTimeout, the guest's device
// and mount points (query-pci in its own short exchange places them).
// Nothing found is no error: the fields stay null.
func cacheGuestNames(e *env, v *vm.VM, disks []cacheDiskJSON) {
	machine := v.Config.Main["machine"]
	if v.Cmdline != nil {
		machine = v.Cmdline.Machine
	}
	for i := range disks {
		j := &disks[i]
		j.GuestMounts = []string{}
		d := v.Disk(j.ID)
		s := d.Running
		if s == nil {
			s = d.Configured
		}
		if d.Drive == nil || s == nil {
			continue
		}
		if n := guestdisk.ByID(d.Drive, s.Device, v.Blockdev, guestdisk.IsQ35(machine)); n.ByID != "" {
			j.GuestByID = &n.ByID
		}
	}
	if !v.Running || !guestdisk.AgentEnabled(v.Config.Main["agent"]) {
		return
	}
	var pci map[string]string
	if err := v.Exchange(e.ctx(), e.timeout, func(s qmp.Session) error {
		ret, err := s.Exec("query-pci", nil)
		pci = guestdisk.PCIDevices(ret)
		return err
	}); err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(e.ctx(), 2*cacheAgentTimeout)
	defer cancel()
	seen, err := guestdisk.Ask(ctx, qmp.Agent{Path: v.QGASocket(), Timeout: cacheAgentTimeout}, pci, qemuserver.SCSIHW(v.Config.Main))
	if err != nil {
		return
	}
	for i := range disks {
		if g, ok := seen[disks[i].ID]; ok {
			dev := g.Device
			disks[i].GuestDevice = &dev
			disks[i].GuestMounts = append(disks[i].GuestMounts, g.Mounts...)
		}
	}
}

// cacheGuestLine is the disk's guest name for the text output.
func cacheGuestLine(d cacheDiskJSON) string {
	var parts []string
	if d.GuestDevice != nil {
		parts = append(parts, strings.TrimSpace(*d.GuestDevice+" "+strings.Join(d.GuestMounts, " ")))
	}
	if d.GuestByID != nil {
		parts = append(parts, *d.GuestByID)
	}
	if len(parts) == 0 {
		return ""
	}
	return "in the guest: " + strings.Join(parts, ", ")
}
