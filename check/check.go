// Package check owns every rule of `pvediskcheck check`: what in a VM's disk
// configuration will fail, is ignored, is risky or wasteful, differs from what
// runs, or has stopped the VM. Each rule has a stable code, a severity, one
// sentence of why and, where a command fixes it, that command: one `qm set`
// per disk that fixes everything found on it.
//
// VM checks one VM from what the node shows (its config, storage.cfg, the
// running QEMU's command line and QMP, lvs/zfs for its thin pools, `qm
// showcmd` on request); the rules themselves are plain functions over that
// model: everything they read is measured before they run (measure), and
// each is one entry of the list rules.
package check

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/pvediskcheck/pvediskcheck/advisory"
	"github.com/pvediskcheck/pvediskcheck/backupcfg"
	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/dpkg"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/policy"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/storage/storagetype"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// Severity is how bad a finding is.
type Severity string

// Severities, worst first.
const (
	// Error: the VM will not start, loses data the guest believes safe, or
	// is stopped.
	Error Severity = "error"
	// Warning: silently ignored, risky, slow or wasteful.
	Warning Severity = "warning"
	// Info: worth knowing (a change waiting for a restart).
	Info Severity = "info"
)

// ParseSeverity reads --fail-on: the lowest severity that fails a run.
func ParseSeverity(s string) (Severity, error) {
	switch Severity(s) {
	case Warning, Error:
		return Severity(s), nil
	}
	return "", exitcode.Usagef("--fail-on: %q is not warning or error", s)
}

// Code is a finding's stable name (README: check's codes).
type Code string

// The codes, in the order the help text lists them.
const (
	CodeAIONativeNeedsDirect Code = "aio-native-needs-direct"
	CodeIOThreadIgnored      Code = "iothread-ignored"
	CodeSSDUnsupported       Code = "ssd-unsupported"
	CodeConfigInvalid        Code = "config-invalid"
	CodeDiscardIgnoredOnThin Code = "discard-ignored-on-thin"
	CodeCacheUnsafe          Code = "cache-unsafe"
	CodeCacheWriteback       Code = "cache-writeback"
	CodeEmulatedController   Code = "emulated-controller"
	CodeLimitInvalid         Code = "limit-invalid"
	CodeAIOIOUringRisk       Code = "aio-io-uring-risk"
	CodeIOError              Code = "io-error"
	CodeThinOvercommit       Code = "thin-overcommit"
	CodeThinFull             Code = "thin-full"
	CodeVolumeChain          Code = "volume-chain"
	CodePendingRestart       Code = "pending-restart"
	CodeDrift                Code = "drift"
	CodeLocked               Code = "locked"
	CodeZFSSyncDisabled      Code = "zfs-sync-disabled"
	CodeZFSSyncAlways        Code = "zfs-sync-always"
	CodeZFSBlocksizeInvalid  Code = "zfs-blocksize-invalid"
	CodeDiskStalled          Code = "disk-stalled"
	// CodeStorageUnavailable: a volume on a storage disabled or not
	// available on this node; the next start fails.
	CodeStorageUnavailable Code = "storage-unavailable"
	// CodeQueuesInvalid: a queues= over QEMU's maximum; the next start fails.
	CodeQueuesInvalid Code = "queues-invalid"
	// CodeFleecingStorage: a backup job backs the VM up with fleecing on a
	// storage that goes against Proxmox's advice (not thin, no discard,
	// none set, not in storage.cfg); package backupcfg decides.
	CodeFleecingStorage Code = "fleecing-storage"
	// CodeFleecingLeftover: fleecing images the config records while no
	// backup holds the VM: space left behind by a failed clean-up.
	CodeFleecingLeftover Code = "fleecing-leftover"
	// CodeQEMUAdvisory: the QEMU build the VM runs has a known disk bug
	// (package advisory's table) that one of its running disks is exposed
	// to; the severity is the table's.
	CodeQEMUAdvisory Code = "qemu-advisory"
	// CodeQEMUOutdated: the VM runs a QEMU binary an upgrade has replaced
	// since it started, or another version than the installed one.
	CodeQEMUOutdated Code = "qemu-outdated"
	// CodePolicy: a disk breaks a requirement of the --policy file (package
	// policy): in the config, the running VM or [PENDING].
	CodePolicy Code = "policy"
	// CodeHistogramLeft: a latency histogram pvediskcheck set and did not
	// clear (package latency's Leftover).
	CodeHistogramLeft Code = "latency-histogram-left"
	// CodeGuestFrozen: the guest agent says the guest's filesystems are
	// frozen (guest-fsfreeze-status): an error while no backup holds the
	// VM (its writes hang in the guest), info during a backup.
	CodeGuestFrozen Code = "guest-frozen"
)

// Codes lists every code (help text, README).
var Codes = []Code{CodeAIONativeNeedsDirect, CodeIOThreadIgnored, CodeSSDUnsupported, CodeConfigInvalid,
	CodeDiscardIgnoredOnThin, CodeCacheUnsafe, CodeCacheWriteback, CodeEmulatedController, CodeLimitInvalid,
	CodeAIOIOUringRisk, CodeIOError, CodeThinOvercommit, CodeThinFull, CodeVolumeChain, CodePendingRestart, CodeDrift, CodeLocked,
	CodeZFSSyncDisabled, CodeZFSSyncAlways, CodeZFSBlocksizeInvalid, CodeDiskStalled, CodeFleecingStorage, CodeStorageUnavailable, CodeQueuesInvalid, CodeFleecingLeftover,
	CodeQEMUAdvisory, CodeQEMUOutdated, CodePolicy, CodeHistogramLeft, CodeGuestFrozen}

// Finding is one result (README: `check --json` findings[]).
type Finding struct {
	Severity Severity `json:"severity"`
	Code     Code     `json:"code"`
	Disk     string   `json:"disk,omitempty"`
	Message  string   `json:"message"`
	// Fix is what to do, as the admin types it.
	Fix string `json:"fix,omitempty"`
	// Command is the fix's one command (`qm set ...`), when it is one; Fix
	// starts with it, shell-quoted, or with "with the VM stopped: " and it.
	Command []string `json:"-"`
	// Policy is a policy finding's rule, requirement and what was found
	// where (code policy only).
	Policy *policy.Violation `json:"policy,omitempty"`
}

// DiskValues are the settings check compares (README: `check --json`).
type DiskValues struct {
	CacheDirect  bool              `json:"cache_direct"`
	CacheNoFlush bool              `json:"cache_no_flush"`
	WriteCache   string            `json:"write_cache"`
	AIO          string            `json:"aio"`
	Discard      string            `json:"discard"`
	DetectZeroes string            `json:"detect_zeroes"`
	IOThread     bool              `json:"iothread"`
	Limits       qemuserver.Limits `json:"limits"`
}

// Disk is one disk's configured, running and next-start values.
type Disk struct {
	ID         string      `json:"id"`
	Configured *DiskValues `json:"configured"`
	Running    *DiskValues `json:"running"`
	NextStart  *DiskValues `json:"next_start,omitempty"`
}

// VMResult is one VM's check (README: `check --json` vms[]).
type VMResult struct {
	VMID     int       `json:"vmid"`
	Running  bool      `json:"running"`
	Disks    []Disk    `json:"disks"`
	Findings []Finding `json:"findings"`
	Notes    []string  `json:"notes,omitempty"`
	// NotChecked names the checks that did not run, or ran on part of
	// their inputs (the notes say why): a running VM whose QMP socket could
	// not be read, thin pools whose tool failed.
	NotChecked []Code `json:"not_checked,omitempty"`
	// Backups are the backup jobs (jobs.cfg) that back the VM up on this
	// node and the fleecing each runs with (vzdump.conf's default where the
	// job sets none); omitted when none does.
	Backups []backupcfg.VMBackup `json:"backups,omitempty"`
	// QEMU is the binary a running VM's QEMU runs: the build it states,
	// whether it was replaced since the start, the version installed now
	// (qemu-advisory and qemu-outdated judge it); omitted for a VM that
	// does not run.
	QEMU *advisory.Binary `json:"qemu,omitempty"`
	// GuestFreeze is the guest's freeze state (guest-fsfreeze-status, asked
	// once per run, never while a backup holds the VM: then not-asked);
	// omitted for a VM that does not run or has no agent.
	GuestFreeze *vm.Freeze `json:"guest_freeze,omitempty"`
	// AgentNotAsked are the guest agent answers check did not ask for
	// because a backup holds the VM, and why; omitted when none.
	AgentNotAsked []vm.AgentSkip `json:"agent_not_asked,omitempty"`
	// PolicyRules are the --policy rules that select a disk of the VM:
	// how many of its disks, and how many requirements they break.
	PolicyRules []policy.RuleCount `json:"policy_rules,omitempty"`
	tags        []string           // the VM's tags, for the policy's coverage
	// Err is why this VM could not be checked at all (an unreadable
	// config: exit 2), or why its running state could not be read (exit 3).
	Err error `json:"-"`
}

// Summary counts the findings of a run.
type Summary struct {
	VMs      int `json:"vms"`
	Errors   int `json:"errors"`
	Warnings int `json:"warnings"`
	Infos    int `json:"infos"`
}

// Report is one run (README: `check --json`).
type Report struct {
	VMs     []VMResult `json:"vms"`
	Summary Summary    `json:"summary"`
	// PolicyRules are each rule of --policy over the run (0 disks: it
	// selected none); PolicyWarnings its selector values that match
	// nothing the run saw. Both omitted without --policy.
	PolicyRules    []policy.RuleCount `json:"policy_rules,omitempty"`
	PolicyWarnings []policy.Warning   `json:"policy_warnings,omitempty"`
}

// Fails reports whether the findings fail the run at failOn (Warning: any
// warning or error; Error: errors only).
func (r *Report) Fails(failOn Severity) bool {
	return r.Summary.Errors > 0 || failOn == Warning && r.Summary.Warnings > 0
}

// Err is what kept the run from checking everything: an unreadable config
// is bad input (exit 2) and outranks a running state that could not be read
// (exit 3). nil when every VM was checked.
func (r *Report) Err() error {
	var msgs []string
	code := exitcode.OK
	for _, v := range r.VMs {
		if v.Err == nil {
			continue
		}
		msgs = append(msgs, v.Err.Error())
		if c := exitcode.Of(v.Err); code == exitcode.OK || c == exitcode.Usage {
			code = c
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	return &exitcode.Error{Code: code, Msg: strings.Join(msgs, "; ")}
}

// Options are what a run checks beyond the defaults.
type Options struct {
	// NextStart also compares with `qm showcmd VMID` (what the next start
	// runs, [PENDING] applied).
	NextStart bool
	// Parallel is how many VMs Run checks at once (< 1 means 1, at most
	// MaxParallel: --parallel).
	Parallel int
	// StallAfter, when set, runs disk-stalled (package stall) on a running
	// VM with this --stall-after: one more QMP exchange and a look at the
	// node's threads. 0 (metrics, which judges stalls from its own
	// counters) leaves it out.
	StallAfter time.Duration
	// Packages is the run's one reader of the node's dpkg status (the
	// installed QEMU an unpinned machine starts with, the version
	// qemu-outdated compares with): Run sets one for its VMs; nil reads the
	// file once per VM.
	Packages *dpkg.Packages
	// Policy, when set, judges every disk against the site's policy file
	// (check --policy): findings of code policy.
	Policy *policy.Policy
	// All: the run checks every VM of the node (--all), so a policy
	// selector matching none of them is said.
	All bool
}

// Targets returns the VMIDs to check: the ones given (each with a config on
// this node) or, with all, every VM config of the node, sorted. A tree that
// is not a Proxmox VE node is bad input naming the path.
func Targets(p node.Paths, args []string, all bool) ([]int, error) {
	if all && len(args) > 0 {
		return nil, exitcode.Usagef("check: give VMIDs or --all, not both")
	}
	if !all && len(args) == 0 {
		return nil, exitcode.Usagef("check: missing VMID (or --all)")
	}
	if all {
		return vm.List(p)
	}
	if err := p.CheckNode(); err != nil {
		return nil, err
	}
	var ids []int
	for _, a := range args {
		id, err := qemuserver.ParseVMID(a)
		if err != nil {
			return nil, err
		}
		if _, err := os.Lstat(p.VMConfig(id)); err != nil {
			return nil, exitcode.Usagef("VM %d: %v (no %s)", id, vm.ErrNoConfig, p.VMConfig(id))
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// MaxParallel bounds check --parallel (as metrics': more only queues).
const MaxParallel = 64

// Run checks the VMs, o.Parallel at a time, with one thin-pool cache for
// the run, and sums the findings up.
func Run(ctx context.Context, n node.Node, ids []int, o Options) *Report {
	pools := thinpool.NewNodeCache(n)
	if o.Packages == nil {
		o.Packages = dpkg.NewPackages(n)
	}
	res := make([]VMResult, len(ids))
	node.Each(len(ids), o.Parallel, func(i int) { res[i] = VM(ctx, n, ids[i], o, pools) })
	rep := Summarize(res)
	rep.policySummary(ctx, n, o)
	return rep
}

// Summarize wraps results into a report with its counts.
func Summarize(res []VMResult) *Report {
	out := &Report{VMs: res, Summary: Summary{VMs: len(res)}}
	for _, v := range res {
		for _, f := range v.Findings {
			switch f.Severity {
			case Error:
				out.Summary.Errors++
			case Warning:
				out.Summary.Warnings++
			default:
				out.Summary.Infos++
			}
		}
	}
	return out
}

// VM checks one VM. It never fails as a whole: what cannot be read becomes
// a finding, a note, a check named in NotChecked, or Err.
func VM(ctx context.Context, n node.Node, vmid int, o Options, pools *thinpool.Cache) VMResult {
	out, _ := VMLoaded(ctx, n, vmid, o, pools)
	return out
}

// VMLoaded is VM that also returns the VM's disks as it resolved them
// (package disk: after QEMU was asked, when the VM runs; set.AskErr is why
// it could not be), so a caller that reads more of it (metrics) neither
// loads it nor asks its QEMU again. set is nil for a VM whose config could
// not be loaded. The rules only read the set.
func VMLoaded(ctx context.Context, n node.Node, vmid int, o Options, pools *thinpool.Cache) (out VMResult, set *disk.Set) {
	out = VMResult{VMID: vmid, Disks: []Disk{}, Findings: []Finding{}}
	v, err := vm.LoadNodeWith(ctx, n, vmid, o.Packages)
	if err != nil {
		if errors.Is(err, qemuserver.ErrParse) {
			// storage.cfg: a VM config's lines Proxmox cannot parse are
			// skipped, as Proxmox skips them (vm.VM.Notes), never this.
			out.add(Finding{Severity: Error, Code: CodeConfigInvalid, Message: err.Error(),
				Fix: "edit " + n.Paths.StorageCfg() + " so Proxmox can parse it"})
			return out, nil
		}
		out.Notes = append(out.Notes, err.Error())
		out.Err = err
		return out, nil
	}
	out.Running = v.Running
	for _, n := range v.Notes {
		if !slices.Contains(v.Config.DroppedDisks, n) {
			out.Notes = append(out.Notes, n)
		}
	}
	// One exchange with QEMU: its live view, and for disk-stalled the
	// counters and the threads too.
	layers := disk.Live | disk.Chains
	if o.StallAfter > 0 && v.Running {
		layers |= stallLayers
	}
	set = disk.Resolve(ctx, n, v, v.Disks, layers, disk.Options{})
	if v.Running && set.AskErr != nil {
		set.AskErr = v.SocketGone(set.AskErr)
		out.liveUnread(v, set.AskErr)
	}
	judge(measure(ctx, n, set, o, pools, &out), &out)
	return out, set
}

// liveUnread says which checks a running VM's unread QMP state costs. A
// socket nobody answers on in a copied tree (a support bundle: its proc/
// is copied files) is a note. A socket that is busy, silent or failing, or
// missing, refusing or not a socket while the process is alive (as cache
// sees it), is a VM whose running state could not be read: exit 3.
func (out *VMResult) liveUnread(v *vm.VM, err error) {
	vmid := v.VMID
	out.Notes = append(out.Notes, "QMP not reachable ("+err.Error()+"): not checked: io-error (needs query-status and query-block), qemu-advisory (needs the build QMP's greeting states); drift was judged from the command line only (live cache flags, write-cache and limits need QMP)")
	out.NotChecked = append(out.NotChecked, CodeIOError, CodeDrift, CodeQEMUAdvisory)
	if v.Alive || !errors.Is(err, qmp.ErrNoSocket) {
		out.Err = exitcode.Wrap(exitcode.Unreachable, fmt.Sprintf("VM %d: running state not read, io-error, live drift and qemu-advisory not checked", vmid), err)
	}
}

func (out *VMResult) add(f Finding) { out.Findings = append(out.Findings, f) }

// fleecingStorage says per backup job backing the VM up whether fleecing
// is on and where (the backup configuration measure read), with a
// fleecing-storage warning for a storage against Proxmox's advice.
func fleecingStorage(in *Input, out *VMResult) {
	if in.backupsErr != nil {
		out.Notes = append(out.Notes, "backup configuration not read: "+in.backupsErr.Error())
		out.NotChecked = append(out.NotChecked, CodeFleecingStorage)
		return
	}
	v := in.v
	backups, unknown := in.backups.ForVM(v.VMID, in.here)
	for _, why := range unknown {
		out.Notes = append(out.Notes, "backup job "+why+": whether it backs this VM up is not checked")
	}
	out.Backups = backupcfg.Judge(backups, func(id string) (thin, discard, ok bool) {
		st, ok := v.Storages[id]
		if !ok {
			return false, false, false
		}
		f := st.Facts()
		return f.Provision == storagetype.Thin || f.Provision == storagetype.PerImage,
			f.Discard == storagetype.DiscardReturns || f.Discard == storagetype.DiscardPerImage, true
	})
	for _, b := range out.Backups {
		if b.Unsuitable != "" {
			out.add(Finding{Severity: Warning, Code: CodeFleecingStorage,
				Message: fmt.Sprintf("backup job %s uses fleecing, but %s (Proxmox advises a fast local storage with thin provisioning or sparse files, and discard)", b.Job, b.Unsuitable),
				Fix:     "pvesh set /cluster/backup/" + b.Job + " --fleecing enabled=1,storage=<a thin, discard-capable local storage, e.g. local-lvm>"})
		}
	}
}

func values(s *qemuserver.DiskSettings) *DiskValues {
	if s == nil {
		return nil
	}
	return &DiskValues{s.CacheDirect, s.CacheNoFlush, s.WriteCache, s.AIO, s.Discard, s.DetectZeroes, s.IOThread, s.Limits.Normal()}
}
