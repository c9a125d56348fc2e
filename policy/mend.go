package policy

import (
	"slices"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// Proposal is a disk's next start as a fix leaves it before the policy has
// its say: its line (under its present key), the VM's scsihw (Proxmox's
// name, lsi when the config sets none), and whether the fix moves the disk
// to a free SCSI slot (check's move off an emulated controller, which keeps
// the line's options).
type Proposal struct {
	Line   *qemuserver.Drive
	SCSIHW string
	Move   bool
	// Unmovable, when set, says why no fix may move the disk (qm set
	// refuses its line under any key).
	Unmovable string
}

// Mend is a Proposal as the policy leaves it: every requirement selecting
// the disk holds on it, but those Unfixed names.
type Mend struct {
	Proposal
	unfixed map[int]string
}

// Unfixed says why the mended line still breaks the violation's
// requirement; "" when it holds there.
func (m Mend) Unfixed(x Violation) string {
	if x.req == nil {
		return ""
	}
	return m.unfixed[x.req.id]
}

// Mend changes a proposed next start so that every requirement of the
// rules selecting the disk holds, each requirement in the file's order,
// with the least change: a key Proxmox's default satisfies is removed
// rather than set, and what is set is the first value the rule allows. A
// change that would break a requirement that held (another rule's), or
// give a line Proxmox refuses, is not made; that requirement is Unfixed,
// with why. Nothing changes for a disk no rule selects.
func (p *Policy) Mend(v *vm.VM, site Site, d *vm.Disk, pr Proposal) Mend {
	out := Mend{Proposal: pr, unfixed: map[int]string{}}
	out.Line = pr.Line.Clone()
	base := d.Pending
	if base == nil {
		base = d.Configured
	}
	rules := p.Selects(v, site, d)
	if base == nil || len(rules) == 0 {
		return out
	}
	m := &mender{v: v, vol: qemuserver.Volume{Path: base.Path, Driver: base.Driver, Format: base.Format}, st: &out.Proposal}
	var reqs []*Req
	for _, r := range rules {
		reqs = append(reqs, r.Require...)
	}
	held := map[*Req]bool{}
	for _, q := range reqs {
		if ok, _ := m.holds(q); ok {
			held[q] = true
		}
	}
	for _, q := range reqs {
		if held[q] {
			continue
		}
		before := out.Proposal
		before.Line = out.Line.Clone()
		why := m.fix(q)
		if why == "" {
			why = m.accept(q, reqs, held)
		}
		if why != "" {
			out.Proposal = before
			out.unfixed[q.id] = why
			continue
		}
		held[q] = true
	}
	return out
}

// mender works on one disk's proposal.
type mender struct {
	v   *vm.VM
	vol qemuserver.Volume // where the disk's next start finds its volume
	st  *Proposal
}

// line is the proposal's line as the next start has it: moved onto SCSI
// when it moves (model= is IDE/SATA only; check drops it too).
func (m *mender) line() *qemuserver.Drive {
	if !m.st.Move {
		return m.st.Line
	}
	l := m.st.Line.Clone()
	l.Bus, l.Key = "scsi", "scsi0"
	delete(l.Opts, "model")
	return l
}

// values predicts the proposal's settings as qemu-server would start them.
func (m *mender) values() values {
	l := m.line()
	defs := qemuserver.VMDefaultsFor(m.v.Config.Next())
	defs.SCSIHW = m.st.SCSIHW
	s := qemuserver.PredictVolume(l, m.vol, m.v.Storages.Of(l), defs)
	return settingValues(l, &s)
}

func (m *mender) holds(q *Req) (holds, applies bool) {
	holds, applies, _ = q.judge(m.values())
	return holds || !applies, applies
}

// accept says why a fix for q is not taken: it breaks a requirement that
// held, or Proxmox would refuse the line.
func (m *mender) accept(q *Req, reqs []*Req, held map[*Req]bool) string {
	l := m.line()
	if _, err := qemuserver.ParseDrive(l.Key, l.String()); err != nil {
		return "the line it would take, Proxmox refuses (" + err.Error() + ")"
	}
	if p := l.LimitProblems(); len(p) > 0 {
		return "the line it would take, Proxmox or QEMU refuses (" + strings.Join(p, "; ") + ")"
	}
	if ok, _ := m.holds(q); !ok {
		return "no change of the disk's line makes it hold"
	}
	for _, o := range reqs {
		if held[o] {
			if ok, _ := m.holds(o); !ok {
				return "it conflicts with rule " + o.rule.Name + "'s " + string(o.Setting) + " (line " + strconv.Itoa(o.Line) + "), which holds"
			}
		}
	}
	return ""
}

// unmovable says why a fix may not move the disk ("" when it may): only a
// disk moves (check's move), and only one whose line qm set takes.
func (m *mender) unmovable() string {
	if m.st.Line.Kind() != qemuserver.KindDisk {
		return "only a disk is moved, not a CD-ROM drive"
	}
	return m.st.Unmovable
}

// bus is the proposal's bus (scsi once it moves).
func (m *mender) bus() string { return m.line().Bus }

// fix changes the proposal for one requirement; why it cannot, else "".
func (m *mender) fix(q *Req) string {
	l := m.st.Line
	switch q.Setting {
	case Cache:
		delete(l.Opts, "cache")
		if slices.Contains(q.OneOf, m.values().cache) {
			return ""
		}
		l.Opts["cache"] = q.OneOf[0]
	case AIO:
		delete(l.Opts, "aio")
		x := m.values()
		if slices.Contains(q.OneOf, x.aio) {
			return ""
		}
		for _, a := range q.OneOf {
			if a == "native" && !qemuserver.CacheOf(x.cache).Direct {
				continue // QEMU refuses native without O_DIRECT
			}
			l.Opts["aio"] = a
			return ""
		}
		return "aio=native needs cache.direct, and the disk runs cache " + x.cache + " (QEMU refuses to start it): require cache none or directsync of it too"
	case Discard:
		delete(l.Opts, "discard")
		if q.Want {
			l.Opts["discard"] = "on"
		}
	case IOThread:
		return m.ioThread(q.Want)
	case SSD:
		delete(l.Opts, "ssd")
		if !q.Want {
			return ""
		}
		if m.bus() == "virtio" {
			return "VirtIO Block has no ssd emulation (Proxmox offers it on SCSI, SATA and IDE): only a move of the disk to SCSI gives it"
		}
		l.Opts["ssd"] = "1"
	case Controller:
		return m.controller(q.OneOf)
	case Backup, Replicate:
		k := string(q.Setting)
		delete(l.Opts, k)
		if !q.Want {
			l.Opts[k] = "0"
		}
	default:
		if q.Limit != nil {
			mendLimit(l, q.Limit)
		}
	}
	return ""
}

// ioThread gives the disk its own IO thread (or takes it away): VirtIO
// Block and SCSI under virtio-scsi-single have one with iothread=1; a
// SATA or IDE disk moves to SCSI for one.
func (m *mender) ioThread(want bool) string {
	l := m.st.Line
	delete(l.Opts, "iothread")
	if !want {
		return ""
	}
	switch m.bus() {
	case "virtio":
	case "scsi":
		m.st.SCSIHW = "virtio-scsi-single"
	default:
		if why := m.unmovable(); why != "" {
			return strings.ToUpper(l.Bus) + " has no IO thread, and the disk is not moved to SCSI: " + why
		}
		m.st.Move, m.st.SCSIHW = true, "virtio-scsi-single"
	}
	l.Opts["iothread"] = "1"
	return ""
}

// controller puts the disk on a controller the rule allows: a SCSI disk
// by the VM's scsihw (which every SCSI disk shares), a SATA or IDE disk
// by a move to SCSI. Other moves change the disk's key and are the
// admin's to make.
func (m *mender) controller(allowed []string) string {
	l := m.st.Line
	var scsi []string
	for _, c := range allowed {
		if slices.Contains(qemuserver.SCSIControllers, c) {
			scsi = append(scsi, c)
		}
	}
	// The SCSI controller a fix picks: virtio-scsi-single when allowed
	// (it gives each disk its own IO thread), else the VM's own, else the
	// first allowed.
	pick := func() string {
		switch {
		case slices.Contains(scsi, "virtio-scsi-single"):
			return "virtio-scsi-single"
		case slices.Contains(scsi, m.st.SCSIHW):
			return m.st.SCSIHW
		}
		return scsi[0]
	}
	own := qemuserver.Controller(l.Bus, m.st.SCSIHW)
	switch {
	case m.st.Move && slices.Contains(allowed, own):
		m.st.Move = false // the proposed move would leave the controller the rule wants
	case (l.Bus == "scsi" || m.st.Move) && len(scsi) > 0:
		m.st.SCSIHW = pick()
	case (l.Bus == "sata" || l.Bus == "ide") && len(scsi) > 0:
		if why := m.unmovable(); why != "" {
			return "the disk is on " + own + " and not moved to SCSI: " + why
		}
		m.st.Move, m.st.SCSIHW = true, pick()
	default:
		return "the disk is on " + own + ": a move to " + orList(allowed) + " changes its key, which only the admin does (qm set VMID --delete " + l.Key + " --<new key> <its line>, with the VM stopped and the guest's driver ready)"
	}
	return ""
}

// mendLimit sets the limit the bound wants, keeping the line one Proxmox
// takes: a total and a per-direction limit are never on one line (the
// total's rate moves to the other direction when a direction is set), a
// burst below its rate is dropped (QEMU refuses it).
func mendLimit(l *qemuserver.Drive, b *LimitReq) {
	k := b.Key.Proxmox
	kind, dir, _ := strings.Cut(k, "_") // mbps, wr
	setNum := func(key string, x float64) {
		l.Opts[key] = strconv.FormatFloat(x, 'f', -1, 64)
		dropLowBurst(l, key)
	}
	rate, _, ok := effective(l.Limits(), b.Key)
	if b.AtMost > 0 && (!ok || rate > scaled(b.AtMost, b.Key)) {
		if dir == "" {
			dropRate(l, kind+"_rd")
			dropRate(l, kind+"_wr")
		} else if tv, has := l.Opts[kind]; has {
			other := kind + "_" + map[string]string{"rd": "wr", "wr": "rd"}[dir]
			if _, set := l.Opts[other]; !set {
				l.Opts[other] = tv
				for i, src := range burstKeys(kind) {
					if x, has := l.Opts[src]; has {
						l.Opts[burstKeys(other)[i]] = x
					}
				}
			}
			dropRate(l, kind)
		}
		setNum(k, b.AtMost)
	}
	rate, _, ok = effective(l.Limits(), b.Key)
	if b.AtLeast > 0 && ok && rate < scaled(b.AtLeast, b.Key) {
		if dir == "" {
			if _, has := l.Opts[kind]; !has {
				dropRate(l, kind+"_rd")
				dropRate(l, kind+"_wr")
			}
			setNum(kind, b.AtLeast)
			return
		}
		for _, key := range []string{k, kind} {
			if x, has := l.Opts[key]; has {
				if f, err := strconv.ParseFloat(x, 64); err == nil && f < b.AtLeast {
					setNum(key, b.AtLeast)
				}
			}
		}
	}
}

// burstKeys are a rate's burst and burst length keys (mbps_rd:
// mbps_rd_max, bps_rd_max_length; Proxmox's names).
func burstKeys(rate string) [2]string {
	return [2]string{rate + "_max", strings.Replace(rate, "mbps", "bps", 1) + "_max_length"}
}

// dropRate removes a rate with its burst.
func dropRate(l *qemuserver.Drive, rate string) {
	delete(l.Opts, rate)
	for _, k := range burstKeys(rate) {
		delete(l.Opts, k)
	}
}

// dropLowBurst removes a rate's burst that is below the rate: QEMU
// refuses it ("bps_max/iops_max cannot be lower than bps/iops").
func dropLowBurst(l *qemuserver.Drive, rate string) {
	bk := burstKeys(rate)
	r, err1 := strconv.ParseFloat(l.Opts[rate], 64)
	mx, err2 := strconv.ParseFloat(l.Opts[bk[0]], 64)
	if err1 == nil && err2 == nil && mx < r {
		delete(l.Opts, bk[0])
		delete(l.Opts, bk[1])
	}
}
