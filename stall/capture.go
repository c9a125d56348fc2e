package stall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/latency"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/outfile"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
	"github.com/pvediskcheck/pvediskcheck/threads"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// Capture bounds: what one capture may write. A procfs or sysfs file is
// read up to MaxFile (a kernel stack is a few hundred bytes, a thread's
// stat under 1,200); the folder stops growing at MaxCapture, and says so.
// One stalled disk of 15 wrote 84 KiB (BenchmarkCapture15Disks).
const (
	MaxFile    = 64 << 10
	MaxCapture = 4 << 20
)

// What the captures kept in one folder may hold together: after each
// capture, the oldest captures there (stall-* folders this tool made) are
// removed until at most MaxKept remain, within MaxKeptBytes. A disk that
// stalled every 2 s under top --capture filled 0.8-1.4 MiB in 30 s, which
// nothing bounded (up to 3.9 GiB a day); now the last 100 captures stay, a
// few minutes of such flapping and the whole of a rarer stall's history.
const (
	MaxKept      = 100
	MaxKeptBytes = 64 << 20
)

// FolderPrefix begins every capture's folder name:
// stall-VMID[-DISKS]-TIME-RANDOM.
const FolderPrefix = "stall"

// ConfirmGap is how long check and `stall` wait before the second look
// that confirms a stall (see Detect).
const ConfirmGap = 500 * time.Millisecond

// CaptureOptions say what to capture.
type CaptureOptions struct {
	// Out is the folder under which the capture's own folder is made
	// (checked when the run starts: outfile.CheckParent).
	Out *outfile.Parent
	// After is --stall-after (DefaultAfter when 0).
	After time.Duration
	// Disks names the disks the capture is for (a stall top or metrics
	// saw); none: every disk of the VM.
	Disks []string
	// Samples are the last minute of samples the caller kept (top's rows
	// of these disks); nil when it kept none.
	Samples []json.RawMessage
	// Confirm is the gap of the second look (0: one look).
	Confirm time.Duration
}

// Captured is what a capture wrote.
type Captured struct {
	VMID     int       `json:"vmid"`
	Dir      string    `json:"dir"`
	Time     time.Time `json:"time"`
	Verdicts []Verdict `json:"verdicts"`
	Files    int       `json:"files"`
	Bytes    int64     `json:"bytes"`
	// NotRead lists what could not be read, and why.
	NotRead []string `json:"not_read"`
	// HistogramsLeft are the latency histograms of pvediskcheck's on the
	// VM's disks that no run cleared (latency.Leftover: one killed before
	// it could), each with the command that clears it; omitted when none.
	HistogramsLeft []latency.Leftover `json:"histograms_left,omitempty"`
	// Removed are the oldest captures removed from the folder to keep it
	// within MaxKept and MaxKeptBytes.
	Removed []string `json:"removed"`
	// GuestFreeze is the guest's freeze state (guest-fsfreeze-status, also
	// in guest-freeze.json): a frozen guest sends nothing, so no disk
	// stalls while every write in it hangs. Never asked while a backup
	// holds the VM (then not-asked, and why); omitted without an agent
	// socket.
	GuestFreeze *vm.Freeze `json:"guest_freeze,omitempty"`
}

// Capture keeps the evidence of VM vmid's disks in a new folder below
// o.Out before anyone restarts it: the disks' settings, query-block,
// query-blockstats, query-block-jobs, the throttle groups' limits, every
// QEMU thread's stat, wchan, stack and syscall (stack and syscall need
// root), the guest's freeze state (not while a backup holds the VM), the threads in state D with the file each works on, the node
// devices' inflight and stat (the volume's device, or the filesystem's that holds
// it), the thin pools' state and the samples the caller kept. It changes
// nothing: QMP queries, reads of procfs and sysfs, lvs. The folder is new
// (mode 0700, a random part in its name), its files new files (0600); a
// disk the VM does not have is refused before anything is written; after
// it, the oldest captures below o.Out are removed beyond MaxKept and
// MaxKeptBytes.
func Capture(ctx context.Context, n node.Node, vmid int, o CaptureOptions) (*Captured, error) {
	after := o.After
	if after <= 0 {
		after = DefaultAfter
	}
	v, err := vm.Load(ctx, n, vmid)
	if err != nil {
		return nil, err
	}
	if len(o.Disks) > 0 {
		if _, err := v.Select(o.Disks); err != nil {
			return nil, err
		}
	}
	if !v.Running {
		return nil, exitcode.Usagef("VM %d is not running: no stall to capture", vmid)
	}
	now := time.Now()
	folder, err := o.Out.New(folderName(vmid, o.Disks, now))
	if err != nil {
		return nil, err
	}
	defer folder.Close()
	w := &writer{dir: folder}
	c := &Captured{VMID: vmid, Dir: folder.Path, Time: now.UTC(), Verdicts: []Verdict{}, Removed: []string{}}
	wanted := func(id string) bool {
		if len(o.Disks) == 0 {
			return true
		}
		for _, d := range o.Disks {
			if d == id {
				return true
			}
		}
		return false
	}
	set := disk.Of(v, v.Disks)
	// One exchange: what QEMU says of the disks, and the thread ids.
	var groups []string
	for _, d := range set.Disks {
		if wanted(d.ID) && d.Graph != nil && d.Graph.ThrottleGroup {
			groups = append(groups, d.ID)
		}
	}
	a, err := v.Ask(ctx, n.Timeout, vm.Query{Need: vm.NeedEvidence, LimitDisks: groups})
	var m threads.Map
	stats := map[string]qmp.BlockStats{}
	limits := map[string]json.RawMessage{}
	if a != nil {
		for _, r := range a.Evidence {
			switch {
			case r.Disk != "" && r.Err != nil:
				w.notRead("throttle group of " + r.Disk + ": " + r.Err.Error())
			case r.Disk != "":
				limits[qmp.ThrottleGroupID(r.Disk)] = json.RawMessage(r.Raw)
			case r.Err != nil:
				w.notRead(r.Command + ": " + r.Err.Error())
			default:
				w.file(r.Command+".json", []byte(r.Raw))
			}
		}
	}
	if err != nil {
		w.notRead("QMP: " + err.Error())
	} else {
		m, stats = a.Threads, a.Stats
		if v.Blockdev {
			w.json("throttle-groups.json", limits)
		}
	}
	set.PlaceThreads(m)
	set.Fill(ctx, n, disk.Devices, disk.Options{})
	disks := []Disk{}
	for _, d := range Disks(set) {
		if wanted(d.ID) {
			disks = append(disks, d)
		}
	}
	c.HistogramsLeft = latency.LeftoversOf(vmid, v.Pid, v.QMPSocket(), stats)
	w.json("settings.json", settings(v, wanted))
	c.Verdicts = Detect(ctx, n, v.Pid, disks, stats, after, o.Confirm)
	w.json("verdicts.json", c.Verdicts)
	// Every thread in D with what it works on (its syscall line and the
	// file of its descriptor), placed on a disk or not.
	if bl, err := blocked(ctx, n, v.Pid); err == nil {
		w.json("blocked.json", bl)
	}
	w.threads(ctx, n, v.Pid)
	c.GuestFreeze = v.AskFreeze(ctx, n, n.Timeout)
	if f := c.GuestFreeze; f == nil {
		if v.HasAgent() {
			w.notRead("guest freeze state: the VM has no guest agent socket (agent: 1 and a start since)")
		}
	} else {
		if f.State == vm.FreezeNotAsked || f.State == vm.FreezeUnknown {
			w.notRead("guest freeze state: " + string(f.State) + ": " + f.Why)
		}
		w.json("guest-freeze.json", f)
	}
	w.devices(ctx, n, set, disks)
	w.pools(ctx, n, set, wanted)
	if o.Samples != nil {
		w.json("samples.json", o.Samples)
	} else {
		w.notRead("samples: none kept (top or metrics with --capture keep the last minute)")
	}
	sort.Strings(w.missing)
	c.NotRead = append([]string{}, w.missing...)
	w.json("not-read.json", c.NotRead)
	c.Files, c.Bytes = w.files, w.bytes
	removed, err := o.Out.Prune(FolderPrefix, MaxKept, MaxKeptBytes, folder.Path)
	c.Removed = append(c.Removed, removed...)
	if err != nil {
		c.NotRead = append(c.NotRead, "removing the oldest captures: "+err.Error())
	}
	return c, nil
}

// folderName is a capture's folder name before its random part:
// stall-VMID[-DISKS]-TIME, the disks named when at most three (more are
// counted: a name stays well under the 255 bytes a filesystem allows).
func folderName(vmid int, disks []string, t time.Time) string {
	at := t.UTC().Format("20060102T150405.000Z")
	switch {
	case len(disks) == 0:
		return fmt.Sprintf("%s-%d-%s", FolderPrefix, vmid, at)
	case len(disks) <= 3:
		return fmt.Sprintf("%s-%d-%s-%s", FolderPrefix, vmid, strings.Join(disks, "+"), at)
	}
	return fmt.Sprintf("%s-%d-%ddisks-%s", FolderPrefix, vmid, len(disks), at)
}

// settings are the disks' config lines and what the running QEMU has.
func settings(v *vm.VM, wanted func(string) bool) any {
	type disk struct {
		ID      string `json:"disk"`
		Config  string `json:"config"`
		Running any    `json:"running"`
	}
	out := []disk{}
	for _, d := range v.Disks {
		if !wanted(d.ID) {
			continue
		}
		e := disk{ID: d.ID, Config: v.Config.Main[d.ID], Running: d.Running}
		out = append(out, e)
	}
	return out
}

// writer writes the capture's files within MaxCapture.
type writer struct {
	dir     *outfile.Folder
	files   int
	bytes   int64
	missing []string
	full    bool
}

func (w *writer) notRead(s string) { w.missing = append(w.missing, s) }

func (w *writer) file(rel string, b []byte) {
	if w.bytes+int64(len(b)) > MaxCapture {
		if !w.full {
			w.notRead(fmt.Sprintf("the rest: the capture reached its bound of %d bytes at %s", MaxCapture, rel))
		}
		w.full = true
		return
	}
	if err := w.dir.WriteFile(rel, b); err != nil {
		w.notRead(err.Error())
		return
	}
	w.files++
	w.bytes += int64(len(b))
}

func (w *writer) json(rel string, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		w.notRead(rel + ": " + err.Error())
		return
	}
	w.file(rel, append(b, '\n'))
}

// threads copies every thread's stat, wchan, stack and syscall (stack
// and syscall need root).
func (w *writer) threads(ctx context.Context, n node.Node, pid int) {
	taskDir := filepath.Join(n.Paths.ProcPid(pid), "task")
	ents, err := os.ReadDir(taskDir)
	if err != nil {
		w.notRead("threads: " + err.Error())
		return
	}
	task := n.OpenProcDir(taskDir)
	defer task.Close()
	buf := make([]byte, MaxFile)
	unread := map[string]int{}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		for _, f := range []string{"stat", "wchan", "stack", "syscall"} {
			m, err := task.ReadSmall(ctx, e.Name()+"/"+f, buf)
			if err != nil {
				unread[f+": "+errText(err)]++
				continue
			}
			w.file(filepath.Join("threads", e.Name(), f), append([]byte{}, buf[:m]...))
		}
	}
	for k, c := range unread {
		w.notRead(fmt.Sprintf("threads' %s (%d threads)", k, c))
	}
}

// errText is an error without its path (the same for every thread).
func errText(err error) string {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// devices copies the inflight and stat files of each disk's node device,
// or, for a file volume, of the device of the filesystem holding it (a
// frozen or hung filesystem's requests wait there, or before it).
func (w *writer) devices(ctx context.Context, n node.Node, set *disk.Set, disks []Disk) {
	done := map[string]bool{}
	for _, d := range disks {
		dir := ""
		if d.Dev != "" {
			dir = filepath.Join(n.Paths.Sys, "class", "block", d.Dev)
		} else if vd := set.Disk(d.ID); vd != nil && vd.Running != nil && vd.Path != "" {
			var st unix.Stat_t
			if err := statTimeout(vd.Path, &st); err != nil {
				w.notRead("device under " + d.ID + ": " + err.Error())
				continue
			}
			dir = filepath.Join(n.Paths.Sys, "dev", "block", fmt.Sprintf("%d:%d", unix.Major(st.Dev), unix.Minor(st.Dev)))
		}
		if dir == "" || done[dir] {
			continue
		}
		done[dir] = true
		name := filepath.Base(dir)
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			name = filepath.Base(real)
		}
		for _, f := range []string{"inflight", "stat"} {
			b, err := n.ReadFile(ctx, filepath.Join(dir, f))
			if err != nil {
				w.notRead(fmt.Sprintf("device %s of %s: %s: %s", name, d.ID, f, errText(err)))
				continue
			}
			w.file(filepath.Join("devices", name, f), b)
		}
	}
}

// statTimeout is stat on a volume's path within 2 s: a hung NFS mount
// must not hang the capture.
func statTimeout(path string, st *unix.Stat_t) error {
	got, err := node.Within(context.Background(), 2*time.Second, func() (st unix.Stat_t, err error) {
		err = unix.Stat(path, &st)
		return st, err
	})
	switch {
	case node.GaveUp(err):
		return fmt.Errorf("stat %s: no answer within 2s", path)
	case err != nil:
		*st = got
		return fmt.Errorf("stat %s: %w", path, err)
	}
	*st = got
	return nil
}

// pools writes the state of the thin pools the disks live on.
func (w *writer) pools(ctx context.Context, n node.Node, set *disk.Set, wanted func(string) bool) {
	cache := thinpool.NewCache(n.Runner)
	out := map[string]any{}
	for _, d := range set.Disks {
		if !wanted(d.ID) || d.Drive == nil {
			continue
		}
		s := d.Storage
		if !thinpool.IsPool(s) {
			continue
		}
		if _, ok := out[s.ID]; ok {
			continue
		}
		p, err := cache.Pool(ctx, s)
		if err != nil {
			w.notRead("thin pool of storage " + s.ID + ": " + err.Error())
			continue
		}
		out[s.ID] = p
	}
	if len(out) > 0 {
		w.json("thinpool.json", out)
	}
}
