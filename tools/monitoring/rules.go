package main

import (
	"fmt"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/metrics"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
	"github.com/pvediskcheck/pvediskcheck/top"
)

// RuleFile is a Prometheus rule file (rulefmt's layout: groups of rules).
type RuleFile struct {
	Groups []Group `yaml:"groups"`
}

// Group is one rule group.
type Group struct {
	Name  string `yaml:"name"`
	Rules []Rule `yaml:"rules"`
}

// Rule is one alerting rule. Annotations name the series by its labels
// only ({{ $labels.NAME }}), so each alert says which node, VM, disk or pool
// it is about and what to run.
type Rule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for,omitempty"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// Severities of the rules' severity label (Alertmanager routes on it).
const (
	Critical = "critical"
	Warning  = "warning"
)

// Thresholds of the rules, with what set them. The thin pool's and the
// limit's are the tool's own (thinpool, top), so an alert and `thin`/`top`
// never disagree.
const (
	// StallAlertSeconds: a disk that has completed no request while the
	// guest has some outstanding for 30 s. Linux guests' SCSI disks time a
	// command out after 30 s (/sys/block/sdX/device/timeout) and start
	// aborting and resetting: from there the guest notices, its
	// filesystems may go read-only. The tool reports a stall from
	// --stall-after (5 s); the alert waits until the guest is hurt.
	StallAlertSeconds = 30
	// LimitSaturatedRatio: top's at-limit (top.AtLimitPct): a disk held
	// at its limit measures 98.6-100.8 % of it per interval.
	LimitSaturatedRatio = top.AtLimitPct / 100
	// LimitSaturatedMinutes: saturated for 10 minutes is no burst or
	// backup run but the disk's normal load outgrowing its limit.
	LimitSaturatedMinutes = 10
	// RateWindow: the counters' rate window. The package's textfile timer
	// writes every minute, so 5 minutes hold 5 updates however often
	// node_exporter is scraped.
	RateWindow = "5m"
	// DriftMinutes: a change under way (limit applied live, then saved with
	// qm set; a migration) is over in minutes; one that stays 15 minutes
	// was left so.
	DriftMinutes = 15
	// GuestFrozenMinutes: vzdump freezes a guest's filesystems for the
	// moment it takes the backup's snapshot (seconds: it thaws them once
	// the backup job runs); frozen for 5 minutes is a freeze nobody thawed
	// (a backup that failed between the two, an fsfreeze by hand).
	GuestFrozenMinutes = 5
	// CollectFailingMinutes: a VM whose QMP socket a backup holds for a moment
	// counts one error in one collection; errors in every collection for 5
	// minutes are a blind spot.
	CollectFailingMinutes = 5
)

// Pool thresholds as ratios (the metrics export 0-1).
var (
	poolWarn = thinpool.WarnPercent / 100
	poolFail = thinpool.FailPercent / 100
)

// m names a metric of the tool.
func m(name string) string { return metrics.Namespace + "_" + name }

// minutes is a rule's for: duration.
func minutes(n int) string { return fmt.Sprintf("%dm", n) }

// num prints a threshold as PromQL reads it.
func num(f float64) string {
	return strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.4f", f), "0"), ".")
}

// LimitUse is the share of each running limit a disk uses, one series per
// limit (labels direction: total, read, write; limit: bytes, operations),
// as top's LimitUse compares them: a total limit with reads plus writes, a
// read limit with reads. sel is a selector's matchers ({...} or "").
func LimitUse(sel, window string) string {
	kind := func(unit, limit string) string {
		rate := func(dir string) string {
			return fmt.Sprintf("rate(%s%s[%s])", m("disk_"+dir+"_"+unit+"_total"), sel, window)
		}
		measured := fmt.Sprintf(`label_replace(%s, "direction", "read", "", "") or label_replace(%s, "direction", "write", "", "") or label_replace(%s + %s, "direction", "total", "", "")`,
			rate("read"), rate("write"), rate("read"), rate("write"))
		return fmt.Sprintf(`label_replace((%s) / %s%s, "limit", "%s", "", "")`, measured, m(limit), sel, unit)
	}
	return kind("bytes", "disk_limit_bytes_per_second") + " or " + kind("operations", "disk_limit_operations_per_second")
}

// findingsOf selects check's findings of a code (and severity, if not "").
func findingsOf(code check.Code, sev check.Severity) string {
	s := fmt.Sprintf(`%s{code="%s"`, m("check_findings"), code)
	if sev != "" {
		s += fmt.Sprintf(`,severity="%s"`, sev)
	}
	return s + "}"
}

// poolRules are a thin pool figure's two alerts: filling (warning, from
// thin's warning threshold up to its failure threshold) and full
// (critical, from the failure threshold). The warning stops where the
// critical starts, so one pool has one of them at a time without
// Alertmanager inhibit rules.
func poolRules(name, what, metric, consequence string) []Rule {
	sel := m(metric)
	summary := func(pct float64) string {
		return fmt.Sprintf("Thin pool {{ $labels.storage }} on {{ $labels.instance }}: %s %g %% or more in use", what, pct)
	}
	desc := "pvediskcheck thin on the node shows the pool and the volumes holding its space. " + consequence
	return []Rule{
		{Alert: "PveDiskCheckThinPool" + name + "Filling", Expr: fmt.Sprintf("%s >= %s < %s", sel, num(poolWarn), num(poolFail)),
			Labels:      map[string]string{"severity": Warning},
			Annotations: map[string]string{"summary": summary(thinpool.WarnPercent), "description": desc}},
		{Alert: "PveDiskCheckThinPool" + name + "Full", Expr: fmt.Sprintf("%s >= %s", sel, num(poolFail)),
			Labels:      map[string]string{"severity": Critical},
			Annotations: map[string]string{"summary": summary(thinpool.FailPercent), "description": desc}},
	}
}

// Rules are the alert rules the package ships.
func Rules() RuleFile {
	rules := []Rule{
		{
			Alert:  "PveDiskCheckDiskStalled",
			Expr:   fmt.Sprintf("%s >= %d", m("disk_stalled_seconds"), StallAlertSeconds),
			Labels: map[string]string{"severity": Critical},
			Annotations: map[string]string{
				"summary": fmt.Sprintf("Disk {{ $labels.disk }} of VM {{ $labels.vmid }} on {{ $labels.instance }} has completed no request for %d s or more while the guest waits for some", StallAlertSeconds),
				"description": "The guest has requests outstanding and none completes: its I/O hangs. Keep the evidence before anyone kills QEMU " +
					"(pvediskcheck top and check {{ $labels.vmid }} on the node say what the disk waits on); killing QEMU destroys every trace.",
			},
		},
		{
			Alert:  "PveDiskCheckVMPausedByIOError",
			Expr:   findingsOf(check.CodeIOError, check.Error) + " > 0",
			Labels: map[string]string{"severity": Critical},
			Annotations: map[string]string{
				"summary":     "VM {{ $labels.vmid }} on {{ $labels.instance }} is paused by an I/O error",
				"description": "QEMU stopped the VM when a disk's request failed (no space left, or the storage failed it) and keeps it paused until qm resume. pvediskcheck check {{ $labels.vmid }} names the disk, its storage and how full it is.",
			},
		},
		{
			Alert:  "PveDiskCheckGuestFrozen",
			Expr:   m("vm_guest_frozen") + " == 1",
			For:    minutes(GuestFrozenMinutes),
			Labels: map[string]string{"severity": Critical},
			Annotations: map[string]string{
				"summary": fmt.Sprintf("VM {{ $labels.vmid }} on {{ $labels.instance }} has had its filesystems frozen for %d minutes", GuestFrozenMinutes),
				"description": "The guest agent says the guest's filesystems are frozen (guest-fsfreeze-status): every write in the guest hangs until they are thawed, and a frozen guest sends no I/O, so PveDiskCheckDiskStalled does not see it. " +
					"pvediskcheck check {{ $labels.vmid }} on the node says whether a backup holds the VM; if none does, qm guest cmd {{ $labels.vmid }} fsfreeze-thaw thaws them.",
			},
		},
	}
	rules = append(rules, poolRules("Data", "data", "thinpool_data_used_ratio", "At 100 % dm-thin stops every write of every volume on the pool.")...)
	rules = append(rules, poolRules("Metadata", "metadata", "thinpool_metadata_used_ratio", "A pool whose metadata fills up can be damaged.")...)
	rules = append(rules,
		Rule{
			Alert:  "PveDiskCheckLimitSaturated",
			Expr:   fmt.Sprintf("(%s) >= %s", LimitUse("", RateWindow), num(LimitSaturatedRatio)),
			For:    minutes(LimitSaturatedMinutes),
			Labels: map[string]string{"severity": Warning},
			Annotations: map[string]string{
				"summary":     fmt.Sprintf("Disk {{ $labels.disk }} of VM {{ $labels.vmid }} on {{ $labels.instance }} has used %g %% or more of its {{ $labels.direction }} {{ $labels.limit }} limit for %d minutes", top.AtLimitPct, LimitSaturatedMinutes),
				"description": "The throttle, not the storage, decides this disk's latency. pvediskcheck limit {{ $labels.vmid }} shows the limits in effect; raise the limit or move the load.",
			},
		},
		Rule{
			Alert:  "PveDiskCheckSettingsDrift",
			Expr:   findingsOf(check.CodeDrift, "") + " > 0",
			For:    minutes(DriftMinutes),
			Labels: map[string]string{"severity": Warning},
			Annotations: map[string]string{
				"summary":     "VM {{ $labels.vmid }} on {{ $labels.instance }} runs with disk settings its config does not have",
				"description": "A disk's cache mode, aio, discard, detect_zeroes, iothread or I/O limits differ between the running QEMU and the config (a limit set live and not saved, a config change not applied): the next restart changes them. pvediskcheck check {{ $labels.vmid }} lists what differs, per disk.",
			},
		},
		Rule{
			Alert:  "PveDiskCheckCacheUnsafe",
			Expr:   m("disk_info") + `{cache_effective="unsafe"} == 1`,
			Labels: map[string]string{"severity": Warning},
			Annotations: map[string]string{
				"summary":     "Disk {{ $labels.disk }} of VM {{ $labels.vmid }} on {{ $labels.instance }} runs with cache=unsafe",
				"description": "QEMU ignores the guest's flushes on this disk: a crash of the node loses writes the guest believes safe. pvediskcheck cache {{ $labels.vmid }} shows where acknowledged writes sit.",
			},
		},
		Rule{
			Alert:  "PveDiskCheckCollectionFailing",
			Expr:   m("collect_errors") + " > 0",
			For:    minutes(CollectFailingMinutes),
			Labels: map[string]string{"severity": Warning},
			Annotations: map[string]string{
				"summary":     "pvediskcheck metrics on {{ $labels.instance }} fails to read {{ $labels.source }} in every collection",
				"description": "What could not be read has no series (a VM whose QMP socket stays busy has no disk series): the other alerts are blind there. Run pvediskcheck metrics on the node and read its errors.",
			},
		},
	)
	return RuleFile{Groups: []Group{{Name: "pvediskcheck", Rules: rules}}}
}
