package policy

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/units"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// Place is where a disk's setting is as found.
type Place string

// The places a setting is judged in.
const (
	// InConfig: the config's main section (what `qm config --current`
	// shows).
	InConfig Place = "config"
	// InRunning: what the running QEMU runs, read from its command line and
	// QMP (the effective cache from the live flags, the live limits).
	InRunning Place = "running"
	// InPending: [PENDING], what the next start applies.
	InPending Place = "pending"
)

// Found is a setting's value in one place.
type Found struct {
	In    Place  `json:"in"`
	Value string `json:"value"`
}

// Violation is one requirement a disk breaks (docs/json.md: check --json
// findings[].policy).
type Violation struct {
	Rule    string  `json:"rule"`
	Line    int     `json:"line"` // the requirement's line in the file
	Setting Setting `json:"setting"`
	Want    string  `json:"want"`
	// Found are the places that break it, with their value.
	Found []Found `json:"found"`
	// NextStart: the next start breaks it too, so the disk's line must
	// change (a qm set); false: only the running VM does, and a restart
	// applies the config, which holds (NextValue).
	NextStart bool   `json:"next_start"`
	NextValue string `json:"next_value,omitempty"`
	// Holds are the places that hold it (said for context).
	Holds    []Found  `json:"-"`
	Severity Severity `json:"-"`
	req      *Req
}

// Message is the finding's sentence; file names the policy.
func (x Violation) Message(file string) string {
	s := fmt.Sprintf("rule %s (%s line %d): %s must be %s; it is %s", x.Rule, file, x.Line, x.Setting, x.Want, places(x.Found))
	if len(x.Holds) > 0 {
		if x.NextStart {
			s += " (" + places(x.Holds) + ")"
		} else {
			s += "; the next start runs " + x.NextValue + ", as the config says"
		}
	}
	return s
}

// places says "writeback in the config and in the running VM".
func places(fs []Found) string {
	var out []string
	for i := 0; i < len(fs); {
		j := i
		var where []string
		for ; j < len(fs) && fs[j].Value == fs[i].Value; j++ {
			where = append(where, placeText[fs[j].In])
		}
		out = append(out, fs[i].Value+" "+strings.Join(where, " and "))
		i = j
	}
	return strings.Join(out, ", ")
}

var placeText = map[Place]string{
	InConfig:  "in the config",
	InRunning: "in the running VM",
	InPending: "pending for the next start ([PENDING])",
}

// Site is what rules select by beyond the VM's own config.
type Site struct {
	Pools Pools
}

// Result is one VM's judgement.
type Result struct {
	// Disks has each disk's violations, rule by rule in the file's order.
	Disks map[string][]Violation
	// Rules are the rules that select a disk of the VM, in the file's
	// order (metrics exports each, 0 where it holds).
	Rules []RuleCount
}

// RuleCount is one rule's part of a VM or of a run (docs/json.md: check --json
// policy_rules).
type RuleCount struct {
	Rule       string `json:"rule"`
	Line       int    `json:"line"`
	Disks      int    `json:"disks"`      // disks it selects
	Violations int    `json:"violations"` // requirements they break
}

// target is the drive a disk's next start has, which rules select by
// (nil: none to judge: a line Proxmox refuses, a disk [PENDING] deletes, a
// disk only attached to the running VM).
func target(d *vm.Disk) *qemuserver.Drive {
	switch {
	case d.ParseError != nil || d.PendingDelete:
		return nil
	case d.PendingDrive != nil:
		return d.PendingDrive
	}
	return d.Drive
}

// kindName is the drive kind as a rule's kind selector names it.
func kindName(k qemuserver.Kind) string {
	switch k {
	case qemuserver.KindDisk:
		return "disk"
	case qemuserver.KindCDROM:
		return "cdrom"
	}
	return ""
}

// Selects lists the rules that select the disk (none for a disk with
// nothing to judge).
func (p *Policy) Selects(v *vm.VM, site Site, d *vm.Disk) []*Rule {
	drv := target(d)
	if p == nil || drv == nil {
		return nil
	}
	var out []*Rule
	for _, r := range p.Rules {
		if r.Match.selects(v, site, drv) {
			out = append(out, r)
		}
	}
	return out
}

func (m *Match) selects(v *vm.VM, site Site, drv *qemuserver.Drive) bool {
	kind := kindName(drv.Kind())
	switch {
	case kind == "":
		return false
	case len(m.Kind) == 0 && kind != "disk":
		return false // no kind given: disks only
	case !anyText(m.Kind, func(s string) bool { return s == kind }):
		return false
	}
	if !anyText(m.Bus, func(s string) bool { return s == drv.Bus }) {
		return false
	}
	sid := drv.StorageID()
	st := v.Storages.Of(drv)
	if !anyText(m.Storage, func(s string) bool { return sid != "" && glob(s, sid) }) {
		return false
	}
	if !anyText(m.StorageType, func(s string) bool { return st != nil && st.Type == s }) {
		return false
	}
	if len(m.VMID) > 0 && !slices.ContainsFunc(m.VMID, func(r Range) bool { return r.From <= v.VMID && v.VMID <= r.To }) {
		return false
	}
	if len(m.Tag) > 0 {
		tags := Tags(v.Config.Next()["tags"])
		if !anyText(m.Tag, func(s string) bool {
			return slices.ContainsFunc(tags, func(t string) bool { return glob(strings.ToLower(s), t) })
		}) {
			return false
		}
	}
	if len(m.Pool) > 0 {
		pool, ok := site.Pools.ByVM[v.VMID]
		if !anyText(m.Pool, func(s string) bool { return ok && glob(s, pool) }) {
			return false
		}
	}
	return true
}

// anyText: no values (the selector is not given), or one of them matches.
func anyText(vals []Value, match func(string) bool) bool {
	return len(vals) == 0 || slices.ContainsFunc(vals, func(x Value) bool { return match(x.Text) })
}

// glob matches a shell pattern (Parse checked it).
func glob(pattern, name string) bool {
	ok, _ := path.Match(pattern, name)
	return ok
}

// Tags splits a config's tags as Proxmox does (pve-tag-list, split_list:
// commas, semicolons and spaces), lower-cased: Proxmox compares tags
// without case unless datacenter.cfg says otherwise.
func Tags(s string) []string {
	f := strings.FieldsFunc(strings.ToLower(s), func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\t' })
	return f
}

// Judge tells which of the VM's disks break which requirement, and where.
func (p *Policy) Judge(v *vm.VM, site Site) Result {
	res := Result{Disks: map[string][]Violation{}}
	if p == nil {
		return res
	}
	counts := make([]RuleCount, len(p.Rules))
	for _, d := range v.Disks {
		for _, r := range p.Selects(v, site, d) {
			c := &counts[r.index]
			c.Disks++
			for _, q := range r.Require {
				if x, bad := judgeDisk(v, d, q); bad {
					res.Disks[d.ID] = append(res.Disks[d.ID], x)
					c.Violations++
				}
			}
		}
	}
	for i, r := range p.Rules {
		if counts[i].Disks > 0 {
			counts[i].Rule, counts[i].Line = r.Name, r.Line
			res.Rules = append(res.Rules, counts[i])
		}
	}
	return res
}

// judgeDisk judges one requirement in the places the disk has.
func judgeDisk(v *vm.VM, d *vm.Disk, q *Req) (Violation, bool) {
	type place struct {
		in   Place
		vals values
	}
	var all []place
	var next *values
	if d.Drive != nil && d.Configured != nil {
		all = append(all, place{InConfig, settingValues(d.Drive, d.Configured)})
		next = &all[len(all)-1].vals
	}
	if d.PendingDrive != nil && d.Pending != nil {
		all = append(all, place{InPending, settingValues(d.PendingDrive, d.Pending)})
		next = &all[len(all)-1].vals
	}
	if r := d.RunningNow(); r != nil && d.Drive != nil {
		all = append(all, place{InRunning, runningValues(v, d, r)})
	}
	x := Violation{Rule: q.rule.Name, Line: q.Line, Setting: q.Setting, Want: q.WantText(), Severity: q.rule.Severity, req: q}
	runBad := false
	for _, p := range all {
		holds, applies, found := q.judge(p.vals)
		if !applies {
			continue
		}
		f := Found{In: p.in, Value: found}
		if holds {
			x.Holds = append(x.Holds, f)
			continue
		}
		x.Found = append(x.Found, f)
		runBad = runBad || p.in == InRunning
	}
	if next == nil {
		return x, false
	}
	nextHolds, applies, nextValue := q.judge(*next)
	x.NextStart = applies && !nextHolds
	// A stopped VM's config that [PENDING] already mends is no violation:
	// the next start runs what the policy wants.
	if !x.NextStart && !runBad {
		return x, false
	}
	if !x.NextStart {
		x.NextValue = nextValue
	}
	return x, len(x.Found) > 0
}

// values are a disk's settings in one place, as requirements compare them.
type values struct {
	kind       qemuserver.Kind
	bus        string
	cache      string // a Proxmox cache mode (CacheMode)
	cacheSet   bool   // the line sets cache= (else Proxmox's default)
	aio        string // "" where the protocol driver has none (librbd, iSCSI under -blockdev)
	aioSet     bool
	discard    string // on, off; "" for a CD-ROM (no discard)
	iothread   bool
	ssd        bool
	controller string
	limits     qemuserver.Limits // QEMU's names and units
	noLimits   bool              // no throttling applies (scsiblock under -blockdev)
	line       bool              // the drive line's own options are known (backup, replicate)
	backup     bool
	replicate  bool
}

// settingValues are a config or [PENDING] line's values as qemu-server
// would start them (s is the line's predicted settings).
func settingValues(drv *qemuserver.Drive, s *qemuserver.DiskSettings) values {
	x := values{kind: drv.Kind(), bus: drv.Bus, line: true, controller: s.Controller, iothread: s.IOThread, aio: s.AIO, limits: s.Limits.Normal()}
	x.cache = s.Cache().Mode
	_, x.cacheSet = drv.Opts["cache"]
	_, x.aioSet = drv.Opts["aio"]
	if !s.CDROM {
		x.discard = map[bool]string{true: "on", false: "off"}[s.Discard == "unmap"]
	}
	x.ssd = drv.Bool("ssd") && drv.Bus != "virtio"
	x.noLimits = s.Blockdev && drv.Bool("scsiblock")
	x.backup = drv.Opts["backup"] != "0"
	x.replicate = drv.Opts["replicate"] != "0"
	return x
}

// runningValues are what the running QEMU runs: RunningNow's settings
// (the live cache flags and limits QMP reported, else the command line's),
// ssd as the device's rotation_rate (qemu-server sets rotation_rate=1 for
// ssd=1).
func runningValues(v *vm.VM, d *vm.Disk, r *qemuserver.DiskSettings) values {
	x := values{kind: d.Kind(), bus: d.Drive.Bus, controller: r.Controller, iothread: r.IOThread, aio: r.AIO, aioSet: true, cacheSet: true, limits: r.Limits.Normal()}
	x.cache = d.Effective().Mode
	if !r.CDROM {
		x.discard = map[bool]string{true: "on", false: "off"}[r.Discard == "unmap"]
	}
	if v.Cmdline != nil {
		x.ssd = v.Cmdline.Devices[d.ID]["rotation_rate"] == "1"
	}
	x.noLimits = r.Blockdev && d.Drive.Bool("scsiblock")
	return x
}

// judge compares the requirement with one place's values: whether it
// holds, whether it applies at all there, and the value as found.
func (q *Req) judge(x values) (holds, applies bool, found string) {
	switch q.Setting {
	case Cache:
		found = x.cache
		if !x.cacheSet {
			found += " (default)"
		}
		return slices.Contains(q.OneOf, x.cache), true, found
	case AIO:
		if x.aio == "" {
			return true, false, ""
		}
		found = x.aio
		if !x.aioSet {
			found += " (default)"
		}
		return slices.Contains(q.OneOf, x.aio), true, found
	case Discard:
		if x.discard == "" || x.kind != qemuserver.KindDisk {
			return true, false, ""
		}
		return (x.discard == "on") == q.Want, true, x.discard
	case IOThread:
		found = units.OnOff(x.iothread)
		if !x.iothread && (x.bus == "sata" || x.bus == "ide") {
			found += " (" + strings.ToUpper(x.bus) + " has no IO thread)"
		}
		return x.iothread == q.Want, true, found
	case SSD:
		found = units.OnOff(x.ssd)
		if !x.ssd && x.bus == "virtio" {
			found += " (VirtIO Block has no ssd emulation)"
		}
		return x.ssd == q.Want, true, found
	case Controller:
		return slices.Contains(q.OneOf, x.controller), true, x.controller
	case Backup, Replicate:
		if !x.line || x.kind != qemuserver.KindDisk {
			return true, false, ""
		}
		b := x.backup
		if q.Setting == Replicate {
			b = x.replicate
		}
		return b == q.Want, true, units.OnOff(b)
	}
	if q.Limit == nil || x.noLimits {
		return true, false, ""
	}
	return q.Limit.judge(x.limits)
}

// The QEMU names of a limit key's family: total, read, write.
func family(k qemuserver.LimitKey) (total, read, write string) {
	kind, _, _ := strings.Cut(k.QEMU, "-") // bps, iops
	return kind + "-total", kind + "-read", kind + "-write"
}

// effective is the rate a disk is held to for the key: a direction is held
// by its own limit and by the total (QEMU applies both buckets), the total
// by its own, or by both directions' when each has one (their sum).
// ok false: unlimited.
func effective(l qemuserver.Limits, k qemuserver.LimitKey) (rate int64, from string, ok bool) {
	total, read, write := family(k)
	if k.QEMU == total {
		if t, ok := l[total]; ok {
			return t, "", true
		}
		r, okr := l[read]
		w, okw := l[write]
		if okr && okw {
			return r + w, "the sum of read and write", true
		}
		return 0, "", false
	}
	own, okOwn := l[k.QEMU]
	t, okTotal := l[total]
	switch {
	case okOwn && okTotal:
		return min(own, t), "", true
	case okOwn:
		return own, "", true
	case okTotal:
		return t, "the total", true
	}
	return 0, "", false
}

// judge compares a disk's limits (QEMU's names and units) with the bounds,
// as QEMU holds them: Proxmox turns mbps_wr=20 into int(20*1024*1024).
func (l *LimitReq) judge(lim qemuserver.Limits) (holds, applies bool, found string) {
	rate, from, ok := effective(lim, l.Key)
	found = "no limit"
	if ok {
		found = units.Number(float64(rate)/l.Key.Scale) + unitOf(l.Key)
		if from != "" {
			found += " (" + from + ")"
		}
	}
	holds = true
	if l.AtMost > 0 && (!ok || rate > scaled(l.AtMost, l.Key)) {
		holds = false
	}
	if l.AtLeast > 0 && ok && rate < scaled(l.AtLeast, l.Key) {
		holds = false
	}
	return holds, true, found
}

// scaled is a bound in QEMU's units, truncated as qemu-server truncates.
func scaled(x float64, k qemuserver.LimitKey) int64 { return int64(math.Trunc(x * k.Scale)) }

func unitOf(k qemuserver.LimitKey) string {
	if strings.HasPrefix(k.Proxmox, "mbps") {
		return " MiB/s"
	}
	return " IOPS"
}

func num(x float64) string { return units.Number(x) }

func onOff(b bool) string { return units.OnOff(b) }

// orList says "none" or "none or directsync".
func orList(s []string) string {
	switch len(s) {
	case 0:
		return ""
	case 1:
		return s[0]
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
