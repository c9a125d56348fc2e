package check

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/policy"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// How check folds a --policy file in (package policy decides): each
// requirement a disk breaks is a finding of code policy, judged where it
// is so (config, running VM, [PENDING]); one the next start breaks is
// fixed by the disk's one `qm set`, whose line policy.Mend adjusts after
// check's own edits, so that the command fixes both and undoes neither.
// A check finding whose edit the policy overrules (it wants cache=writeback
// where cache-writeback would drop it) keeps no fix.

// policyRun is one VM's policy judgement, shared by its disks' runs.
type policyRun struct {
	p    *policy.Policy
	site policy.Site
	res  policy.Result
	used map[string]bool // disks whose violations a disk run took
}

// judgePolicy judges the VM against o.Policy (nil without one). user.cfg
// is read only when a rule selects by pool; a user.cfg that cannot be read
// leaves the policy unchecked for the VM, said, and the run's exit 3 (or
// 2 for a file that is not one).
func judgePolicy(ctx context.Context, n node.Node, v *vm.VM, o Options, out *VMResult) *policyRun {
	if o.Policy == nil {
		return nil
	}
	pr := &policyRun{p: o.Policy, used: map[string]bool{}}
	if o.Policy.UsesPools() {
		pools, err := policy.ReadPools(ctx, n)
		if err != nil {
			out.Notes = append(out.Notes, "policy not checked: its pool selectors need "+policy.UserCfg+": "+err.Error())
			out.NotChecked = append(out.NotChecked, CodePolicy)
			if out.Err == nil {
				code := exitcode.Unreachable
				if exitcode.Of(err) == exitcode.Usage {
					code = exitcode.Usage
				}
				out.Err = exitcode.Wrap(code, fmt.Sprintf("VM %d: policy not checked", v.VMID), err)
			}
			return nil
		}
		pr.site.Pools = pools
	}
	pr.res = o.Policy.Judge(v, pr.site)
	out.PolicyRules = pr.res.Rules
	out.tags = policy.Tags(v.Config.Next()["tags"])
	return pr
}

// restartFix is the fix of what only the running VM breaks: the config
// (or [PENDING]) holds, and a restart applies it.
func restartFix(vmid int) string {
	return "qm reboot " + strconv.Itoa(vmid) + " (the next start runs what the config says) " + restartHint
}

// policyFindings adds the disk's violations to its run: those the next
// start breaks are fixed by the disk's command (r.fixed marks them).
func policyFindings(in *Input, r *diskRun) {
	pr := in.pol
	if pr == nil {
		return
	}
	pr.used[r.d.ID] = true
	for _, x := range pr.res.Disks[r.d.ID] {
		f := policyFinding(pr, r.d.ID, x)
		r.findings = append(r.findings, f)
		r.fixed = append(r.fixed, x.NextStart)
		if x.NextStart {
			r.edits[editPolicy] = true
		} else {
			r.findings[len(r.findings)-1].Fix = restartFix(in.v.VMID)
		}
	}
}

func policyFinding(pr *policyRun, disk string, x policy.Violation) Finding {
	return Finding{Severity: Severity(x.Severity), Code: CodePolicy, Disk: disk, Message: x.Message(pr.p.File), Policy: &x}
}

// policyLeftover is the rule of pr.leftover.
func policyLeftover(in *Input, out *VMResult) { in.pol.leftover(in.v, out) }

// leftover adds the violations of disks no disk run took (a line check
// leaves alone: an ISO image without media=, which Proxmox refuses to
// start): said, without a command.
func (pr *policyRun) leftover(v *vm.VM, out *VMResult) {
	if pr == nil {
		return
	}
	for _, d := range v.Disks {
		if pr.used[d.ID] {
			continue
		}
		for _, x := range pr.res.Disks[d.ID] {
			f := policyFinding(pr, d.ID, x)
			if !x.NextStart {
				f.Fix = restartFix(v.VMID)
			}
			out.add(f)
		}
	}
}

// editKeys are the drive options each of check's edits sets or drops:
// where the policy's mend leaves one of them otherwise, the finding that
// edit fixes is not fixed by the command.
var editKeys = map[Code][]string{
	CodeCacheUnsafe:          {"cache"},
	CodeCacheWriteback:       {"cache"},
	CodeDiscardIgnoredOnThin: {"discard"},
	CodeAIONativeNeedsDirect: {"aio", "cache"},
	CodeAIOIOUringRisk:       {"aio", "cache"},
	CodeQueuesInvalid:        {"queues"},
	CodeSSDUnsupported:       {"ssd"},
	CodeLimitInvalid:         limitOptions(),
}

func limitOptions() []string {
	var out []string
	for _, k := range qemuserver.LimitKeys {
		out = append(out, k.Proxmox)
	}
	return out
}

// mendPolicy has the policy adjust the disk's fixed line (f), move and
// scsihw as check's edits leave them, then marks what the command no
// longer fixes: a check finding whose edit the policy overruled, a
// violation no line mends (policy.Mend says why).
func (r *diskRun) mendPolicy(f *qemuserver.Drive, move bool, hw string) (*qemuserver.Drive, bool, string) {
	pr := r.in.pol
	if pr == nil || len(pr.p.Selects(r.in.v, pr.site, r.d.Disk)) == 0 {
		return f, move, hw
	}
	pp := policy.Proposal{Line: f, SCSIHW: hw, Move: move}
	if why, _ := r.unsettable(); why != "" {
		pp.Unmovable = why
	}
	m := pr.p.Mend(r.in.v, pr.site, r.d.Disk, pp)
	for i := range r.findings {
		fd := &r.findings[i]
		if !r.fixed[i] {
			continue
		}
		why := ""
		switch fd.Code {
		case CodePolicy:
			if w := m.Unfixed(*fd.Policy); w != "" {
				why = "no qm set fixes it: " + w
			}
		case CodeEmulatedController:
			if !qemuserver.VirtIOSCSI(m.SCSIHW) || r.drv.Bus != "scsi" && !m.Move {
				why = "not fixed by the command below: the policy keeps the controller"
			}
		case CodeIOThreadIgnored:
			if m.SCSIHW != "virtio-scsi-single" {
				why = "not fixed by the command below: the policy wants scsihw " + m.SCSIHW
			}
		default:
			for _, k := range editKeys[fd.Code] {
				if m.Line.Opts[k] != f.Opts[k] {
					why = "not fixed by the command below: the policy wants " + k + "=" + m.Line.Opts[k]
					if m.Line.Opts[k] == "" {
						why = "not fixed by the command below: the policy wants no " + k + "="
					}
					break
				}
			}
		}
		if why != "" {
			r.fixed[i] = false
			fd.Message += " (" + why + ")"
		}
	}
	return m.Line, m.Move, m.SCSIHW
}

// policySummary adds the run's rule counts and the policy's selectors
// that matched nothing it saw (storage.cfg and user.cfg, and with --all
// the node's VMs).
func (rep *Report) policySummary(ctx context.Context, n node.Node, o Options) {
	p := o.Policy
	if p == nil {
		return
	}
	var per [][]policy.RuleCount
	seen := policy.Seen{All: o.All}
	for _, v := range rep.VMs {
		per = append(per, v.PolicyRules)
		seen.VMIDs = append(seen.VMIDs, v.VMID)
		for _, t := range v.tags {
			if !slices.Contains(seen.Tags, t) {
				seen.Tags = append(seen.Tags, t)
			}
		}
	}
	rep.PolicyRules = p.Sum(per)
	seen.Rules = rep.PolicyRules
	if st, _, err := vm.ReadStorages(ctx, n); err == nil {
		seen.Storages = st
	}
	if p.UsesPools() {
		if pools, err := policy.ReadPools(ctx, n); err == nil {
			seen.Pools, seen.PoolsRead = pools, true
		}
	}
	rep.PolicyWarnings = p.Coverage(seen)
}
