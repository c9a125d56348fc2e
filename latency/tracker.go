package latency

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// Owner says whose histogram a disk's percentiles rest on.
type Owner string

const (
	// SetByUs: pvediskcheck set it (Boundaries) and clears it on exit.
	SetByUs Owner = "set"
	// Existing: a histogram was already set (another tool, an operator, an
	// earlier run that was killed: Note.Leftover): used as it is, with its
	// own boundaries, and left in place on exit. It is never replaced.
	Existing Owner = "existing"
	// Refused: QEMU refused block-latency-histogram-set (Error says why);
	// the disk has no percentiles.
	Refused Owner = "refused"
)

// Note is what was done about one disk's histogram (top's and metrics'
// output say it: the run changes QEMU's state).
type Note struct {
	VMID  int    `json:"vmid"`
	Disk  string `json:"disk"`
	Owner Owner  `json:"histogram"`
	// Boundaries is how many boundaries the histogram has (142 for
	// pvediskcheck's own); 0 when refused.
	Boundaries int    `json:"boundaries,omitempty"`
	Error      string `json:"error,omitempty"`
	// Leftover: an Existing histogram with pvediskcheck's own boundaries
	// (Leftover, the type, says what that means and how to clear it).
	Leftover bool `json:"leftover,omitempty"`
}

// Setter sends block-latency-histogram-set in the exchange under way
// (vm.Change.SetHistogram: nil boundaries clear).
type Setter interface {
	SetHistogram(disk string, boundaries []int64) error
}

// Asker runs fn in one exchange with a VM: its query-blockstats answer by
// disk id, then the histograms fn sets or clears in the same exchange
// (Hook builds it on vm.Ask, with the caller's patience bound in).
type Asker func(ctx context.Context, fn func(stats map[string]qmp.BlockStats, c Setter) error) error

// Tracker keeps, for one run, which disks' histograms it set, on which
// QEMU process, and the baseline each cumulative histogram counts from.
// Safe for concurrent use by the goroutines sampling different VMs.
type Tracker struct {
	mu  sync.Mutex
	vms map[int]*vmHist
	// timeout is the node's, which bounds End (Start).
	timeout time.Duration
}

type vmHist struct {
	pid   int
	ask   Asker
	disks map[string]*diskHist
	// sent are disks whose block-latency-histogram-set went out without
	// a reply (a deadline on a busy socket): QEMU may have set it, so a
	// histogram of pvediskcheck's boundaries found there next is ours.
	sent map[string]bool
}

type diskHist struct {
	note Note
	// base is the bins and summed latency at the moment the tracker first
	// knew the histogram (all zero bins for one it set): what the exported
	// cumulative histogram counts from, so _count and _sum cover the same
	// requests.
	base map[Kind]baseline
}

type baseline struct {
	bins    []int64
	totalNs int64
}

// NewTracker makes an empty tracker.
func NewTracker() *Tracker { return &Tracker{vms: map[int]*vmHist{}} }

// Ensure is called inside an exchange, after query-blockstats (stats: its
// answer by disk id; c sends the sets, ask is the VM's exchange Release
// uses): for each disk of disks not decided yet on this
// QEMU process it keeps a histogram found set, or sets pvediskcheck's
// (block-latency-histogram-set, once per disk and process); a disk missing
// from stats waits for a later sample. A new pid for vmid (the VM
// restarted) starts over: the new process has no histogram. For a
// histogram it sets, stats' entry gets zero bins, the state QEMU starts it
// in, so the next sample has a baseline. After the first call for a
// process, a call sends nothing unless a disk was hot-plugged.
func (t *Tracker) Ensure(c Setter, vmid, pid int, ask Asker, disks []string, stats map[string]qmp.BlockStats) error {
	t.mu.Lock()
	vh := t.vms[vmid]
	if vh == nil || vh.pid != pid {
		vh = &vmHist{pid: pid, ask: ask, disks: map[string]*diskHist{}, sent: map[string]bool{}}
		t.vms[vmid] = vh
	}
	t.mu.Unlock()
	for _, id := range disks {
		t.mu.Lock()
		_, done := vh.disks[id]
		t.mu.Unlock()
		if done {
			continue
		}
		b, ok := stats[id]
		if !ok {
			continue
		}
		dh := &diskHist{note: Note{VMID: vmid, Disk: id}, base: map[Kind]baseline{}}
		t.mu.Lock()
		sent := vh.sent[id]
		t.mu.Unlock()
		if h := firstOf(&b); h != nil && sent && Ours(h) {
			// The set whose reply was lost took: ours, cleared on exit;
			// its bins count from here.
			dh.note.Owner, dh.note.Boundaries = SetByUs, len(h.Boundaries)
		} else if h != nil {
			dh.note.Owner, dh.note.Boundaries, dh.note.Leftover = Existing, len(h.Boundaries), Ours(h)
		} else {
			err := c.SetHistogram(id, Boundaries)
			var qe *qmp.Error
			switch {
			case errors.As(err, &qe):
				dh.note.Owner, dh.note.Error = Refused, qe.Error()
			case err != nil:
				t.mu.Lock()
				vh.sent[id] = true
				t.mu.Unlock()
				return err
			default:
				dh.note.Owner, dh.note.Boundaries = SetByUs, len(Boundaries)
				b.RdLatency, b.WrLatency, b.FlushLatency = zero(), zero(), zero()
				stats[id] = b
			}
		}
		for _, k := range Kinds {
			if h := Of(&b, k); h != nil {
				dh.base[k] = baseline{bins: h.Bins, totalNs: TotalNs(&b, k)}
			}
		}
		t.mu.Lock()
		vh.disks[id] = dh
		t.mu.Unlock()
	}
	return nil
}

func zero() *qmp.LatencyHistogram {
	return &qmp.LatencyHistogram{Boundaries: Boundaries, Bins: make([]int64, len(Boundaries)+1)}
}

func firstOf(b *qmp.BlockStats) *qmp.LatencyHistogram {
	for _, k := range Kinds {
		if h := Of(b, k); h != nil {
			return h
		}
	}
	return nil
}

// Leftover is a latency histogram on a disk with pvediskcheck's own
// boundaries (Ours) that this run did not set: the one rule by which every
// command that reads a VM's query-blockstats knows it (Tracker.Leftovers),
// and by which a run with --histogram finds one set (Ensure: Existing,
// Note.Leftover). A run clears what it set when it ends, on Ctrl-C,
// SIGTERM and SIGHUP too; one killed with SIGKILL (the OOM killer, a
// timeout's kill -9) cannot, and QEMU keeps the histogram, counting every
// request of the disk, until it is cleared or the VM restarts. The same
// boundaries are also what another run holds while it runs (top or
// metrics --listen with --histogram on the VM): nothing on the node tells
// the two apart, so the message says both.
type Leftover struct {
	VMID int    `json:"vmid"`
	Disk string `json:"disk"`
	// Clear is the shell command that clears it on the node: QEMU's own
	// block-latency-histogram-set without boundaries, sent to the VM's QMP
	// socket with socat (qemu-server's `qm terminal` runs socat, so a
	// Proxmox VE node has it).
	Clear string `json:"clear"`
}

// Message is what a command says of it.
func (l Leftover) Message() string {
	return fmt.Sprintf("latency histogram of %s set by pvediskcheck and not cleared: a run was killed before it could clear it (SIGKILL, the OOM killer), unless one with --histogram still runs on VM %d; QEMU counts every request in it until it is cleared or the VM restarts. With no such run, clear it: %s", l.Disk, l.VMID, l.Clear)
}

// ClearCommand is the command that clears disk's latency histogram through
// the QMP socket at socket: the capabilities handshake, then
// block-latency-histogram-set with the disk's id alone (QEMU removes the
// histogram), socat's input held open a second so QEMU answers before the
// connection closes (a request still queued when its client hangs up is
// dropped).
func ClearCommand(socket, disk string) string {
	req := fmt.Sprintf(`{"execute":"block-latency-histogram-set","arguments":{"id":%q}}`, disk)
	return fmt.Sprintf(`(echo '{"execute":"qmp_capabilities"}'; echo '%s'; sleep 1) | socat - UNIX-CONNECT:%s`, req, socket)
}

// Leftovers are the disks of VM vmid (QEMU process pid) whose histogram in
// stats (one query-blockstats answer, by disk id) is a Leftover, in disk
// order; socket is the VM's QMP socket on this node (Clear's). A nil
// tracker is a run that sets none: every histogram of pvediskcheck's is
// then left by another.
func (t *Tracker) Leftovers(vmid, pid int, socket string, stats map[string]qmp.BlockStats) []Leftover {
	var out []Leftover
	for id, b := range stats {
		if Ours(firstOf(&b)) && !t.setHere(vmid, pid, id) {
			out = append(out, Leftover{VMID: vmid, Disk: id, Clear: ClearCommand(socket, id)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Disk < out[j].Disk })
	return out
}

// LeftoversOf is Leftovers for a run that sets no histogram.
func LeftoversOf(vmid, pid int, socket string, stats map[string]qmp.BlockStats) []Leftover {
	return (*Tracker)(nil).Leftovers(vmid, pid, socket, stats)
}

// setHere says whether this tracker set disk's histogram on process pid.
func (t *Tracker) setHere(vmid, pid int, disk string) bool {
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	vh := t.vms[vmid]
	if vh == nil || vh.pid != pid {
		return false
	}
	if vh.sent[disk] {
		return true // a set whose reply was lost: one of ours found there is this run's (Ensure)
	}
	dh := vh.disks[disk]
	return dh != nil && dh.note.Owner == SetByUs
}

// Notes lists what was done per disk, by VMID and disk (none for a nil
// tracker: a run that sets none).
func (t *Tracker) Notes() []Note {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Note
	for _, vh := range t.vms {
		for _, dh := range vh.disks {
			out = append(out, dh.note)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].VMID != out[j].VMID {
			return out[i].VMID < out[j].VMID
		}
		return out[i].Disk < out[j].Disk
	})
	return out
}

// Forget drops a VM that is no longer running (its process and its
// histograms are gone).
func (t *Tracker) Forget(vmid int) {
	t.mu.Lock()
	delete(t.vms, vmid)
	t.mu.Unlock()
}

// Bucketed is one disk's cumulative histogram of one kind, as Prometheus
// wants it: requests at or below each upper bound (seconds), their count
// and summed latency (seconds), counted from when the tracker first knew
// the histogram.
type Bucketed struct {
	Buckets map[float64]uint64
	Count   uint64
	SumS    float64
}

// Cumulative is the disk's histogram of kind k in b (its current entry)
// against the tracker's baseline; false when the disk has no histogram of
// that kind known to the tracker, or it was reset since (bins went
// backwards: the baseline then moves to b, and the next call counts from
// there).
func (t *Tracker) Cumulative(vmid, pid int, disk string, k Kind, b *qmp.BlockStats) (Bucketed, bool) {
	h := Of(b, k)
	if h == nil {
		return Bucketed{}, false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	vh := t.vms[vmid]
	if vh == nil || vh.pid != pid {
		return Bucketed{}, false
	}
	dh := vh.disks[disk]
	if dh == nil {
		return Bucketed{}, false
	}
	base, ok := dh.base[k]
	d, same := Delta(&qmp.LatencyHistogram{Boundaries: h.Boundaries, Bins: base.bins}, h)
	if !ok || !same {
		dh.base[k] = baseline{bins: h.Bins, totalNs: TotalNs(b, k)}
		return Bucketed{}, false
	}
	at := ExportBounds(h)
	buckets, count := Cumulative(h.Boundaries, d, at)
	return Bucketed{Buckets: buckets, Count: count, SumS: float64(TotalNs(b, k)-base.totalNs) / 1e9}, true
}

// Release clears every histogram the tracker set and that is still
// pvediskcheck's (same boundaries): one exchange per VM, query-blockstats
// first. A histogram someone replaced meanwhile, or one found set, is left
// alone. It returns what could not be cleared (a VM gone is not an error:
// its histograms went with it).
func (t *Tracker) Release(ctx context.Context) error {
	t.mu.Lock()
	vms := make(map[int]*vmHist, len(t.vms))
	for id, vh := range t.vms {
		vms[id] = vh
	}
	t.mu.Unlock()
	var errs []error
	ids := make([]int, 0, len(vms))
	for id := range vms {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	for _, id := range ids {
		vh := vms[id]
		var ours []string
		for d, dh := range vh.disks {
			if dh.note.Owner == SetByUs {
				ours = append(ours, d)
			}
		}
		if len(ours) == 0 {
			continue
		}
		sort.Strings(ours)
		err := vh.ask(ctx, func(now map[string]qmp.BlockStats, c Setter) error {
			for _, d := range ours {
				b, ok := now[d]
				if !ok || !Ours(firstOf(&b)) {
					continue // unplugged, or someone else's now
				}
				if err := c.SetHistogram(d, nil); err != nil {
					return fmt.Errorf("%s: %w", d, err)
				}
			}
			return nil
		})
		if err != nil && !errors.Is(err, qmp.ErrNoSocket) {
			errs = append(errs, fmt.Errorf("VM %d: clearing latency histograms: %w", id, err))
		}
	}
	t.mu.Lock()
	for id := range vms {
		if t.vms[id] == vms[id] {
			delete(t.vms, id)
		}
	}
	t.mu.Unlock()
	return errors.Join(errs...)
}
