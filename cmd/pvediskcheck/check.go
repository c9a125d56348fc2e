package main

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/urfave/cli/v2"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/storage"
	"github.com/pvediskcheck/pvediskcheck/units"

	"github.com/pvediskcheck/pvediskcheck/lvm"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

func init() { commands = append(commands, checkCommand()) }

func checkCommand() *cli.Command {
	return &cli.Command{
		Name:      "check",
		Usage:     "find disk settings that will fail, are ignored, are risky, or differ from what runs",
		ArgsUsage: "[VMID...]",
		Description: `Reads every named VM (or, with --all, every VM config on this node, running or
not) and reports, before the next restart:
   error    will fail to start, or loses data the guest believes safe
   warning  silently ignored, risky, slow or wasteful
   info     worth knowing (a pending change waiting for a restart)
Each finding has a stable code, the disk, one sentence of why, and the full
'qm set' command that fixes it while keeping every other option of the disk.

Codes: aio-native-needs-direct, iothread-ignored, ssd-unsupported,
config-invalid, discard-ignored-on-thin, cache-unsafe, cache-writeback,
emulated-controller, limit-invalid, thin-overcommit, pending-restart, drift.

Drift compares, per disk, what the running QEMU was started with (and what
QMP reports live) with what Proxmox's own rules derive from the config:
cache.direct, cache.no-flush, write-cache, aio, discard, detect-zeroes,
iothread and limits.

Works on a copied tree (a support bundle) with --root: without a QMP socket
it says which checks needed it. Changes nothing.

EXAMPLES
   pvediskcheck check 370
   pvediskcheck check --all --json
   pvediskcheck check 370 --next-start     # also compare with 'qm showcmd'

` + exitcode.Help + `
   (1 means any warning or error; --fail-on error only counts errors.)`,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "all", Usage: "check every VM config on this node"},
			&cli.StringFlag{Name: "fail-on", Value: "warning", Usage: "lowest severity that makes the exit code 1: warning or error"},
			&cli.BoolFlag{Name: "next-start", Usage: "also parse 'qm showcmd VMID' and list what changes at the next start"},
			&cli.IntFlag{Name: "parallel", Value: 8, Usage: "VMs checked at once with --all"},
		},
		Action: checkAction,
	}
}

// finding is one result of check (README "JSON schemas").
type finding struct {
	Severity string `json:"severity"` // error, warning, info
	Code     string `json:"code"`
	Disk     string `json:"disk,omitempty"`
	Message  string `json:"message"`
	Fix      string `json:"fix,omitempty"`
}

type checkDiskValues struct {
	CacheDirect  bool              `json:"cache_direct"`
	CacheNoFlush bool              `json:"cache_no_flush"`
	WriteCache   string            `json:"write_cache"`
	AIO          string            `json:"aio"`
	Discard      string            `json:"discard"`
	DetectZeroes string            `json:"detect_zeroes"`
	IOThread     bool              `json:"iothread"`
	Limits       qemuserver.Limits `json:"limits"`
}

type checkDisk struct {
	ID         string           `json:"id"`
	Configured *checkDiskValues `json:"configured"`
	Running    *checkDiskValues `json:"running"`
	NextStart  *checkDiskValues `json:"next_start,omitempty"`
}

type checkVM struct {
	VMID     int         `json:"vmid"`
	Running  bool        `json:"running"`
	Disks    []checkDisk `json:"disks"`
	Findings []finding   `json:"findings"`
	Notes    []string    `json:"notes,omitempty"`
}

type checkSummary struct {
	VMs      int `json:"vms"`
	Errors   int `json:"errors"`
	Warnings int `json:"warnings"`
	Infos    int `json:"infos"`
}

type checkJSON struct {
	VMs     []checkVM    `json:"vms"`
	Summary checkSummary `json:"summary"`
}

func values(s *qemuserver.DiskSettings) *checkDiskValues {
	if s == nil {
		return nil
	}
	l := s.Limits.Normal()
	return &checkDiskValues{s.CacheDirect, s.CacheNoFlush, s.WriteCache, s.AIO, s.Discard, s.DetectZeroes, s.IOThread, l}
}

func checkAction(c *cli.Context) error {
	e := newEnv(c)
	failOn := c.String("fail-on")
	if failOn != "warning" && failOn != "error" {
		return exitcode.Usagef("--fail-on: %q is not warning or error", failOn)
	}
	var ids []int
	if c.Bool("all") {
		if c.NArg() > 0 {
			return exitcode.Usagef("check: give VMIDs or --all, not both")
		}
		files, err := filepath.Glob(filepath.Join(e.paths.QemuServerDir(), "*.conf"))
		if err != nil {
			return exitcode.Unreachablef("%v", err)
		}
		for _, f := range files {
			if id, err := qemuserver.ParseVMID(strings.TrimSuffix(filepath.Base(f), ".conf")); err == nil {
				ids = append(ids, id)
			}
		}
		sort.Ints(ids)
	} else {
		if c.NArg() == 0 {
			return exitcode.Usagef("check: missing VMID (or --all)")
		}
		for _, a := range c.Args().Slice() {
			id, err := qemuserver.ParseVMID(a)
			if err != nil {
				return exitcode.Usagef("%v", err)
			}
			if _, err := os.Stat(e.paths.VMConfig(id)); err != nil {
				return exitcode.Usagef("VM %d: %v (no %s)", id, vm.ErrNoConfig, e.paths.VMConfig(id))
			}
			ids = append(ids, id)
		}
	}
	thin := &thinCache{}
	res := make([]checkVM, len(ids))
	par := c.Int("parallel")
	if par < 1 {
		par = 1
	}
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func(i, id int) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			res[i] = checkOne(e, id, c.Bool("next-start"), thin)
		}(i, id)
	}
	wg.Wait()
	out := checkJSON{VMs: res, Summary: checkSummary{VMs: len(res)}}
	for _, v := range res {
		for _, f := range v.Findings {
			switch f.Severity {
			case "error":
				out.Summary.Errors++
			case "warning":
				out.Summary.Warnings++
			default:
				out.Summary.Infos++
			}
		}
	}
	if e.json {
		if err := e.printJSON(out); err != nil {
			return err
		}
	} else {
		printCheck(e, out)
	}
	if out.Summary.Errors > 0 || (failOn == "warning" && out.Summary.Warnings > 0) {
		return exitcode.ErrProblem
	}
	return nil
}

func printCheck(e *env, out checkJSON) {
	for _, v := range out.VMs {
		state := "stopped"
		if v.Running {
			state = "running"
		}
		fmt.Fprintf(e.out, "VM %d (%s): %d finding(s)\n", v.VMID, state, len(v.Findings))
		for _, f := range v.Findings {
			color := ""
			switch f.Severity {
			case "error":
				color = red
			case "warning":
				color = yellow
			}
			disk := f.Disk
			if disk == "" {
				disk = "-"
			}
			fmt.Fprintf(e.out, "  %s %s %s: %s\n", e.paint(color, strings.ToUpper(f.Severity)), f.Code, disk, f.Message)
			if f.Fix != "" {
				fmt.Fprintf(e.out, "      fix: %s\n", f.Fix)
			}
		}
		for _, n := range v.Notes {
			fmt.Fprintf(e.out, "  note: %s\n", n)
		}
	}
	s := out.Summary
	fmt.Fprintf(e.out, "%d VM(s) checked: %d error(s), %d warning(s), %d info\n", s.VMs, s.Errors, s.Warnings, s.Infos)
}

const qemuNativeMsg = "aio=native was specified, but it requires cache.direct=on, which was not specified."

// checkOne never fails: what cannot be read becomes a finding or a note.
func checkOne(e *env, vmid int, nextStart bool, thin *thinCache) checkVM {
	out := checkVM{VMID: vmid, Disks: []checkDisk{}, Findings: []finding{}}
	add := func(sev, code, disk, msg, fix string) {
		out.Findings = append(out.Findings, finding{sev, code, disk, msg, fix})
	}
	v, err := vm.LoadNode(e.ctx(), e.node, vmid)
	if err != nil {
		if errors.Is(err, qemuserver.ErrParse) {
			add("error", "config-invalid", "", err.Error(), "edit "+e.paths.VMConfig(vmid)+" (or 'qm set') so Proxmox can parse it")
		} else {
			out.Notes = append(out.Notes, err.Error())
		}
		return out
	}
	out.Running = v.Running
	if v.Running {
		if err := v.FetchLive(e.ctx(), e.timeout); err != nil {
			out.Notes = append(out.Notes, "QMP not reachable ("+err.Error()+"): drift was judged from the command line only; live cache flags and write-cache were not read")
		}
	}
	next := v.Config.Next()
	ostype := next["ostype"]
	scsihw := qemuserver.SCSIHW(next)
	qmSet := func(d *qemuserver.Drive) string {
		return fmt.Sprintf("qm set %d --%s %s", vmid, d.Key, d.String())
	}
	restart := func(s string) string {
		if v.Running {
			return s + " (then restart the VM: qm reboot " + strconv.Itoa(vmid) + ")"
		}
		return s
	}
	out.Notes = append(out.Notes, v.Notes...)
	for _, d := range v.Disks {
		if d.ParseError == nil && d.Kind() == qemuserver.KindTPMState {
			out.Notes = append(out.Notes, d.NotListed())
			continue
		}
		if d.ResolveError != nil {
			out.Notes = append(out.Notes, d.ResolveError.Error())
		}
		cd := checkDisk{ID: d.ID, Configured: values(d.Configured), Running: values(d.RunningNow())}
		if d.Pending != nil {
			cd.NextStart = values(d.Pending)
		}
		out.Disks = append(out.Disks, cd)
		drv := d.Drive
		if d.ParseError != nil {
			line := v.Config.Main[d.ID]
			if bus, _, _ := qemuserver.SplitDiskKey(d.ID); bus == "virtio" && strings.Contains(","+line, ",ssd=") {
				drv, _ := qemuserver.ParseDrive(d.ID, removeOpt(line, "ssd"))
				fix := ""
				if drv != nil {
					fix = qmSet(drv)
				}
				add("warning", "ssd-unsupported", d.ID, "ssd emulation is not available on VirtIO Block (Proxmox offers it for SCSI, SATA and IDE only); this hand-edited line is rejected", fix)
				continue
			}
			// Refused only for its limit combination: limit-invalid below,
			// with a fix, and the other rules still apply.
			if drv, _ = qemuserver.ParseDriveSchema(d.ID, line); drv == nil || len(drv.LimitProblems()) == 0 {
				add("error", "config-invalid", d.ID, d.ParseError.Error()+": Proxmox ignores this disk", "")
				continue
			}
		}
		// The drive the next start uses (pending wins).
		if d.PendingDrive != nil {
			drv = d.PendingDrive
		}
		if drv == nil || d.PendingDelete {
			continue
		}
		if p := drv.LimitProblems(); len(p) > 0 {
			add("error", "limit-invalid", d.ID, strings.Join(p, "; ")+": Proxmox rejects the whole disk line", qmSet(fixLimits(drv)))
		}
		if drv.IsCDROM() || drv.IsNone() {
			continue
		}
		var stor *qemuserver.Storage
		if sid := drv.StorageID(); sid != "" {
			stor = v.Storages[sid]
		}
		direct := qemuserver.UsesCacheDirect(drv, stor)
		if drv.Opts["aio"] == "native" && !direct {
			f := drv.Clone()
			delete(f.Opts, "aio")
			add("error", "aio-native-needs-direct", d.ID,
				fmt.Sprintf("aio=native with cache=%s: the VM will not start; QEMU says: %q", cacheName(drv, stor), qemuNativeMsg),
				restart(qmSet(f)+"   (or keep aio=native with cache=none)"))
		}
		if drv.Bus == "scsi" && drv.Bool("iothread") && scsihw != "virtio-scsi-single" {
			add("warning", "iothread-ignored", d.ID,
				fmt.Sprintf("iothread=1 is ignored with scsihw %s: only VirtIO SCSI single gives each disk its own controller and IO thread", scsihw),
				restart(fmt.Sprintf("qm set %d --scsihw virtio-scsi-single", vmid)))
		}
		switch drv.Opts["cache"] {
		case "unsafe":
			f := drv.Clone()
			delete(f.Opts, "cache")
			add("error", "cache-unsafe", d.ID, "cache=unsafe ignores the guest's flushes: data the guest believes safe stays in node RAM (lab: 1,050,036 kB still dirty after fsync) and a host crash loses it", restart(qmSet(f)))
		case "writeback":
			f := drv.Clone()
			delete(f.Opts, "cache")
			add("warning", "cache-writeback", d.ID, "cache=writeback keeps everything the guest has not flushed in node RAM: safe only if the guest flushes and the node has power-loss protection (UPS)", restart(qmSet(f)))
		}
		if (drv.Bus == "sata" || drv.Bus == "ide") && virtioCapable(ostype) {
			f := drv.Clone()
			add("warning", "emulated-controller", d.ID,
				fmt.Sprintf("%s is an emulated controller; the lab measured SATA at 25-30%% of VirtIO random reads at 3-4 times the latency, and this %s guest has VirtIO drivers", strings.ToUpper(drv.Bus), ostype),
				fmt.Sprintf("with the VM stopped: qm set %d --delete %s --scsi%d %s (adjust the guest's fstab/boot device)", vmid, d.ID, freeSlot(next, "scsi"), f.String()))
		}
		if drv.Opts["discard"] != "on" && qemuserver.Accepts(drv.Bus, "discard") && wastesThin(v, stor, d) {
			f := drv.Clone()
			f.Opts["discard"] = "on"
			kind := "thin storage"
			if stor != nil {
				kind = stor.Type + " storage " + stor.ID
			}
			add("warning", "discard-ignored-on-thin", d.ID,
				"discard is off on "+kind+": space the guest frees (fstrim) never returns to the pool (lab: fstrim reported 2.9 GiB, lvs unchanged at 50.79 %)",
				restart(qmSet(f)))
		}
	}
	// Pending changes that wait for a restart.
	if v.Running {
		var keys []string
		for k := range v.Config.Pending {
			keys = append(keys, k)
		}
		keys = append(keys, v.Config.PendingDelete...)
		sort.Strings(keys)
		for _, k := range keys {
			disk := ""
			if qemuserver.IsDiskKey(k) {
				disk = k
			}
			add("info", "pending-restart", disk, fmt.Sprintf("%s is changed in [PENDING]: it applies at the next restart", k), "qm reboot "+strconv.Itoa(vmid))
		}
		for _, d := range v.Disks {
			if d.Configured == nil || d.Running == nil {
				continue
			}
			if diffs := qemuserver.Diff(*d.Configured, *d.RunningNow()); len(diffs) > 0 {
				add("warning", "drift", d.ID, "the running VM differs from its config: "+strings.Join(diffs, "; "), "qm reboot "+strconv.Itoa(vmid)+" (applies the config)")
			}
		}
	}
	checkThinPools(e, v, thin, &out)
	if nextStart {
		checkNextStart(e, v, &out)
	}
	return out
}

// thinCache runs lvs once per check run, whatever the number of VMs.
type thinCache struct {
	once sync.Once
	rep  *lvm.Report
	err  error
}

func (c *thinCache) get(e *env) (*lvm.Report, error) {
	c.once.Do(func() { c.rep, c.err = lvm.List(e.ctx(), e.runner) })
	return c.rep, c.err
}

// checkThinPools reports overcommitted or nearly full LVM-thin pools that
// this VM's disks live on.
func checkThinPools(e *env, v *vm.VM, thin *thinCache, out *checkVM) {
	pools := map[string]*qemuserver.Storage{}
	for _, d := range v.Disks {
		if d.Drive == nil {
			continue
		}
		if s := v.Storages[d.Drive.StorageID()]; s != nil && s.Type == "lvmthin" {
			pools[s.Props["vgname"]+"/"+s.Props["thinpool"]] = s
		}
	}
	if len(pools) == 0 {
		return
	}
	rep, err := thin.get(e)
	if err != nil {
		out.Notes = append(out.Notes, "thin-overcommit not checked: "+err.Error())
		return
	}
	for _, key := range qemuserver.SortedKeys(pools) {
		s := pools[key]
		vg, name := s.Props["vgname"], s.Props["thinpool"]
		pool := rep.Find(vg, name)
		if pool == nil {
			out.Notes = append(out.Notes, fmt.Sprintf("thin pool %s of storage %s is not in lvs output", key, s.ID))
			continue
		}
		var virt int64
		for _, lv := range rep.Volumes(vg, name) {
			virt += lv.SizeBytes
		}
		if pool.SizeBytes > 0 && virt > pool.SizeBytes {
			out.Findings = append(out.Findings, finding{"warning", "thin-overcommit", "",
				fmt.Sprintf("thin pool %s (storage %s): its volumes total %.1f GiB on a %.1f GiB pool (%.1fx): writes fail for every VM on it once the pool fills", key, s.ID, units.GiBf(virt), units.GiBf(pool.SizeBytes), float64(virt)/float64(pool.SizeBytes)),
				fmt.Sprintf("lvextend -L +%.0fG %s (or move disks to other storage)", math.Ceil(units.GiBf(virt-pool.SizeBytes)), key)})
		}
		for _, p := range []struct {
			what string
			pct  *float64
		}{{"data", pool.DataPercent}, {"metadata", pool.MetadataPercent}} {
			if p.pct != nil && *p.pct >= 80 {
				out.Findings = append(out.Findings, finding{"warning", "thin-overcommit", "",
					fmt.Sprintf("thin pool %s (storage %s): %s at %.2f %% (warning from 80 %%)", key, s.ID, p.what, *p.pct),
					fmt.Sprintf("lvextend --poolmetadatasize/-L %s, or fstrim guests with discard=on", key)})
			}
		}
	}
}

func cacheName(d *qemuserver.Drive, s *qemuserver.Storage) string {
	if c := d.Opts["cache"]; c != "" {
		return c
	}
	if s != nil && s.Type == "btrfs" {
		return "default (btrfs storage: no O_DIRECT)"
	}
	return "default"
}

func removeOpt(line, key string) string {
	parts := strings.Split(line, ",")
	var keep []string
	for _, p := range parts {
		if !strings.HasPrefix(p, key+"=") {
			keep = append(keep, p)
		}
	}
	return strings.Join(keep, ",")
}

// fixLimits drops the limit keys Proxmox rejects.
func fixLimits(d *qemuserver.Drive) *qemuserver.Drive {
	f := d.Clone()
	for i := 0; i < 4 && len(f.LimitProblems()) > 0; i++ {
		for _, p := range f.LimitProblems() {
			// "X requires Y" drops X; "mbps cannot be combined with
			// mbps_rd" drops the total and keeps the per-direction limit.
			k, _, _ := strings.Cut(p, " ")
			delete(f.Opts, k)
		}
	}
	return f
}

// virtioCapable: guest OS types that ship VirtIO drivers out of the box.
func virtioCapable(ostype string) bool { return ostype == "l26" || ostype == "l24" }

func freeSlot(conf map[string]string, bus string) int {
	for i := 0; i <= 30; i++ {
		if _, used := conf[bus+strconv.Itoa(i)]; !used {
			return i
		}
	}
	return 0
}

// wastesThin: discard would return space on this disk's storage.
func wastesThin(v *vm.VM, s *qemuserver.Storage, disk *vm.Disk) bool {
	if disk.Configured == nil {
		return false
	}
	return storage.ReturnsSpace(s, disk.Configured.Format, v.HostPath(disk.Configured.Path))
}

func checkNextStart(e *env, v *vm.VM, out *checkVM) {
	raw, err := e.runner.Run(e.ctx(), "qm", "showcmd", strconv.Itoa(v.VMID), "--pretty")
	if err != nil {
		out.Notes = append(out.Notes, "--next-start: qm showcmd failed: "+err.Error())
		return
	}
	argv, err := qemuserver.SplitShell(string(raw))
	if err != nil {
		out.Notes = append(out.Notes, "--next-start: cannot split qm showcmd output: "+err.Error())
		return
	}
	cl, err := qemuserver.ParseCmdline(argv)
	if err != nil {
		out.Notes = append(out.Notes, "--next-start: "+err.Error())
		return
	}
	for i := range out.Disks {
		d := &out.Disks[i]
		if n, ok := cl.Disks[d.ID]; ok {
			d.NextStart = values(n)
		}
	}
	if !v.Running || v.Cmdline == nil {
		return
	}
	for _, id := range cl.DiskIDs() {
		run, ok := v.Cmdline.Disks[id]
		if !ok {
			out.Findings = append(out.Findings, finding{"info", "pending-restart", id, "the next start attaches this disk", ""})
			continue
		}
		next := *cl.Disks[id]
		if diffs := qemuserver.Diff(*run, next); len(diffs) > 0 {
			msg := strings.NewReplacer("config ", "now ", "running ", "next start ").Replace(strings.Join(diffs, "; "))
			out.Findings = append(out.Findings, finding{"info", "pending-restart", id, "changes at the next start: " + msg, "qm reboot " + strconv.Itoa(v.VMID)})
		}
	}
	for _, id := range v.Cmdline.DiskIDs() {
		if _, ok := cl.Disks[id]; !ok {
			out.Findings = append(out.Findings, finding{"info", "pending-restart", id, "the next start no longer attaches this disk", ""})
		}
	}
}
