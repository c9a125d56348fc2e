package vm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// A backup holds the VM: vzdump sets the config's `lock: backup` before it
// starts, freezes the guest's filesystems through the guest agent
// (guest-fsfreeze-freeze), starts the backup job in QEMU and thaws them
// (guest-fsfreeze-thaw) once the job runs. The agent's socket serves one
// client at a time (PVE-FACTS.md): a tool holding it while vzdump wants to
// thaw leaves the guest frozen (Pulse #2439). So while a backup holds the
// VM no command of this tool opens the `.qga` socket; BackupHolds is the one
// decision, and every agent exchange asks it first (Agent).

// BackupHold says that a backup holds the VM, and what shows it.
type BackupHold struct {
	// Lock is the config's `lock: backup` (read again just before the
	// agent would have been asked); Task the vzdump task holding it when
	// the node's task list says so.
	Lock bool   `json:"lock"`
	Task string `json:"task,omitempty"`
	// Jobs are the backup block jobs QEMU runs (query-block-jobs type
	// backup), with their progress.
	Jobs []BackupJob `json:"jobs,omitempty"`
	// Unknown is set when QEMU could not be asked for its block jobs: a
	// backup may run, so the agent is left alone all the same.
	Unknown string `json:"unknown,omitempty"`
}

// BackupJob is one backup block job and its progress.
type BackupJob struct {
	ID         string `json:"id"`
	Status     string `json:"status"`
	DoneBytes  int64  `json:"done_bytes"`
	TotalBytes int64  `json:"total_bytes"`
}

// What is the hold in a phrase: "a backup holds the VM (lock: backup,
// task UPID...; backup job drive-scsi0 running, 42% of 32.0 GiB)".
func (h *BackupHold) What() string {
	var parts []string
	if h.Lock {
		p := "lock: backup"
		if h.Task != "" {
			p += ", task " + h.Task
		}
		parts = append(parts, p)
	}
	for _, j := range h.Jobs {
		parts = append(parts, "backup job "+j.ID+" "+j.Status+", "+j.Progress())
	}
	if h.Unknown != "" {
		parts = append(parts, "whether a backup job runs is unknown: "+h.Unknown)
	}
	if h.Unknown != "" && !h.Lock && len(h.Jobs) == 0 {
		return "a backup may hold the VM (" + strings.Join(parts, "; ") + ")"
	}
	return "a backup holds the VM (" + strings.Join(parts, "; ") + ")"
}

// Why is why the agent is left alone: What, and vzdump's need.
func (h *BackupHold) Why() string {
	return h.What() + ", and vzdump needs the agent's one-client socket to thaw the guest"
}

// Progress is the job's done share: "42 % of 32 GiB".
func (j BackupJob) Progress() string {
	if j.TotalBytes <= 0 {
		return units.Bytes(j.DoneBytes) + " done"
	}
	return fmt.Sprintf("%s of %s", units.PercentWhole(float64(j.DoneBytes)*100/float64(j.TotalBytes)), units.Bytes(j.TotalBytes))
}

// BackupHolds is the one decision whether a backup holds the VM: the
// config's lock is backup and not stale (Lock.Stale: the node's task list
// shows no vzdump running, so none will thaw the guest either: a guest
// left frozen by a killed backup is just what the freeze state must then
// find), or QEMU runs a backup block job. jobsErr is why
// the jobs could not be read (nil when they were): then a backup may run
// unseen, and the VM counts as held. nil: no backup holds it.
func BackupHolds(lock *Lock, jobs []qmp.BlockJob, jobsErr error) *BackupHold {
	h := &BackupHold{}
	if lock != nil && lock.Kind == "backup" && !lock.Stale() {
		h.Lock, h.Task = true, lock.Task
	}
	for _, j := range jobs {
		if j.Type == "backup" {
			h.Jobs = append(h.Jobs, BackupJob{ID: j.ID, Status: j.Status, DoneBytes: j.Offset, TotalBytes: j.Len})
		}
	}
	if jobsErr != nil {
		h.Unknown = jobsErr.Error()
	}
	if !h.Lock && len(h.Jobs) == 0 && h.Unknown == "" {
		return nil
	}
	return h
}

// JobsFresh is how old a block job list read by another exchange of this
// run (top's sample) may be and still decide a hold: an older one is asked
// again (one query-block-jobs).
const JobsFresh = 2 * time.Second

// jobsSeen is the last block job list an exchange of this VM read.
type jobsSeen struct {
	mu   sync.Mutex
	jobs []qmp.BlockJob
	at   time.Time
}

func (v *VM) sawJobs(jobs []qmp.BlockJob) {
	v.jobs.mu.Lock()
	defer v.jobs.mu.Unlock()
	v.jobs.jobs, v.jobs.at = jobs, time.Now()
}

func (v *VM) recentJobs() ([]qmp.BlockJob, bool) {
	v.jobs.mu.Lock()
	defer v.jobs.mu.Unlock()
	return v.jobs.jobs, !v.jobs.at.IsZero() && time.Since(v.jobs.at) < JobsFresh
}

// BackupHold decides, just before the guest agent would be asked, whether
// a backup holds the VM: the config's lock read again (a backup that
// started since Load set it) and the block jobs of an exchange younger
// than JobsFresh, or one query-block-jobs. nil: none holds it.
func (v *VM) BackupHold(ctx context.Context, n node.Node) *BackupHold {
	lock := v.freshLock(ctx, n)
	jobs, fresh := v.recentJobs()
	var err error
	if !fresh && v.Running {
		var a *Answer
		if a, err = v.Ask(ctx, n.Timeout, Query{Need: NeedJobs}); err == nil {
			jobs = a.AllJobs
		} else {
			var qe *qmp.Error
			if errors.As(err, &qe) && qe.Class == "CommandNotFound" {
				err = nil // a QEMU without block jobs runs no backup either
			} else {
				err = fmt.Errorf("query-block-jobs: %w", err)
			}
		}
	}
	return BackupHolds(lock, jobs, err)
}

// BackupHoldWith is BackupHold on the block jobs the caller's exchange just
// read (top's sample: no QMP command of its own).
func (v *VM) BackupHoldWith(ctx context.Context, n node.Node, jobs []qmp.BlockJob) *BackupHold {
	return BackupHolds(v.freshLock(ctx, n), jobs, nil)
}

// freshLock is the config's lock as the file says now (vzdump sets it
// while this run may have started before); Load's when the file cannot be
// read again.
func (v *VM) freshLock(ctx context.Context, n node.Node) *Lock {
	b, err := n.ReadFile(ctx, v.paths.VMConfig(v.VMID))
	if err != nil {
		return v.lock
	}
	kind := mainLock(b)
	if v.lock != nil && v.lock.Kind == kind {
		return v.lock
	}
	return v.readLockOf(ctx, n, kind)
}

// mainLock is the `lock:` of a config's main section ("" for none).
func mainLock(b []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			break // a snapshot's or [PENDING]'s lines
		}
		if k, val, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "lock" {
			return strings.TrimSpace(val)
		}
	}
	return ""
}

// AgentSkip is an answer a command did not ask the guest agent for, and
// why (JSON: agent_not_asked[]).
type AgentSkip struct {
	// Command is the agent command not sent (guest-fsfreeze-status).
	Command string `json:"command"`
	// For is what the answer was for ("the guest's freeze state").
	For string `json:"for"`
	// Why is the reason (BackupHold.Why).
	Why    string      `json:"why"`
	Backup *BackupHold `json:"backup,omitempty"`
}

// String is the skip in a sentence.
func (s AgentSkip) String() string {
	return "guest agent not asked for " + s.For + " (" + s.Command + "): " + s.Why
}

// Agent is the VM's guest agent client, or, while a backup holds the VM
// (BackupHold), nil and the skip that says so for the answer of command
// asked for want. Every exchange of the tool with a guest agent starts
// here.
func (v *VM) Agent(ctx context.Context, n node.Node, timeout time.Duration, command, want string) (*qmp.Agent, *AgentSkip) {
	return v.AgentUnless(v.BackupHold(ctx, n), timeout, command, want)
}

// AgentUnless is Agent on a hold the caller decided (BackupHold) just
// before: nil, the client.
func (v *VM) AgentUnless(h *BackupHold, timeout time.Duration, command, want string) (*qmp.Agent, *AgentSkip) {
	if h != nil {
		return nil, &AgentSkip{Command: command, For: want, Why: h.Why(), Backup: h}
	}
	return &qmp.Agent{Path: v.QGASocket(), Timeout: timeout}, nil
}

func (s *jobsSeen) forget() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.at = time.Time{}
}
