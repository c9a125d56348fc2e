package vm

import (
	"context"
	"os"
	"time"

	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// The guest's freeze state. vzdump freezes the guest's filesystems for a
// snapshot backup and thaws them once the job runs; a guest left frozen
// (Pulse #2439) sends no I/O, so no request is outstanding and the stall
// rule never sees it: only the agent says so (guest-fsfreeze-status,
// answered while frozen: qemu-ga allows it, with guest-fsfreeze-thaw, in
// the frozen state).

// FreezeState is what guest-fsfreeze-status said.
type FreezeState string

const (
	// Thawed: the guest's filesystems take writes.
	Thawed FreezeState = "thawed"
	// Frozen: the guest's writes hang until guest-fsfreeze-thaw.
	Frozen FreezeState = "frozen"
	// FreezeNotAsked: the agent was not asked (a backup holds the VM, the
	// VM has no agent or does not run): Freeze.Why says which.
	FreezeNotAsked FreezeState = "not-asked"
	// FreezeUnknown: asked, no answer (Freeze.Why: the agent's error).
	FreezeUnknown FreezeState = "unknown"
)

// FreezeTimeout bounds the agent's answer to guest-fsfreeze-status: it
// reads a flag in qemu-ga, answered at once by an agent that runs; one
// that does not would only cost the wait.
const FreezeTimeout = time.Second

// Freeze is the guest's freeze state as a command found it (JSON:
// guest_freeze).
type Freeze struct {
	State FreezeState `json:"state"`
	// Why is why the state is not-asked or unknown.
	Why string `json:"why,omitempty"`
	// Backup is the backup holding the VM: for not-asked, the hold that
	// kept the agent alone; for frozen, the backup found right after the
	// answer (a snapshot backup freezes the guest while its job starts).
	Backup *BackupHold `json:"backup,omitempty"`
	// At is when the agent answered (zero when not asked).
	At time.Time `json:"-"`
}

// Skip is the agent answer not asked for, when the state is not-asked
// because of a backup; nil otherwise.
func (f *Freeze) Skip() *AgentSkip {
	if f == nil || f.State != FreezeNotAsked || f.Backup == nil {
		return nil
	}
	return &AgentSkip{Command: FreezeCommand, For: FreezeFor, Why: f.Backup.Why(), Backup: f.Backup}
}

// FreezeCommand is the agent command that reads the state.
const FreezeCommand = "guest-fsfreeze-status"

// FreezeFor is what its answer is for, in AgentSkip.For.
const FreezeFor = "the guest's freeze state"

// AskFreeze asks a running VM's guest agent (agent: 1) for its freeze
// state, unless a backup holds the VM (BackupHold, asked first); a frozen
// answer asks BackupHold again, as the backup that froze it starts its job
// after the freeze. timeout bounds the agent (0: FreezeTimeout). nil for a
// VM that does not run, has no agent or no agent socket (agent: 1 set
// after the start): nothing was there to ask.
func (v *VM) AskFreeze(ctx context.Context, n node.Node, timeout time.Duration) *Freeze {
	agent, f := v.FreezeAgent(timeout, func() *BackupHold { return v.BackupHold(ctx, n) })
	if agent == nil {
		return f
	}
	f = ReadFreeze(ctx, *agent)
	if f.State == Frozen {
		v.jobs.forget() // the jobs as they are now, not as a sample saw them
		f.Backup = v.BackupHold(ctx, n)
	}
	return f
}

// FreezeAgent is the agent to ask for the freeze state, or, when it is not
// to be asked, nil and the state that says why (nil too where there is
// nothing to ask: AskFreeze), hold deciding (BackupHold) once the rest
// leaves something to ask. A caller that asks in the background (top)
// decides here, then reads with ReadFreeze.
func (v *VM) FreezeAgent(timeout time.Duration, hold func() *BackupHold) (*qmp.Agent, *Freeze) {
	if !v.Running || !qemuserver.AgentEnabled(v.Config.Main["agent"]) {
		return nil, nil
	}
	if fi, err := os.Stat(v.QGASocket()); err != nil || fi.Mode()&os.ModeSocket == 0 {
		// agent: 1 set since the VM started: QEMU has no channel to it
		// until the next start.
		return nil, nil
	}
	if v.Status != "" && v.Status != "running" {
		// A paused guest (io-error, paused, a migration's postmigrate)
		// runs no qemu-ga: asking would only cost the wait.
		return nil, &Freeze{State: FreezeNotAsked, Why: "QEMU does not run the guest (status " + v.Status + "): its agent cannot answer"}
	}
	if timeout <= 0 || timeout > FreezeTimeout {
		timeout = FreezeTimeout
	}
	agent, skip := v.AgentUnless(hold(), timeout, FreezeCommand, FreezeFor)
	if skip != nil {
		return nil, &Freeze{State: FreezeNotAsked, Why: skip.Why, Backup: skip.Backup}
	}
	return agent, nil
}

// ReadFreeze is one guest-fsfreeze-status exchange, within twice the
// agent's timeout: thawed, frozen (Backup unset: the caller asks
// BackupHold), or unknown and why.
func ReadFreeze(ctx context.Context, agent qmp.Agent) *Freeze {
	actx, cancel := context.WithTimeout(ctx, 2*agent.Timeout)
	defer cancel()
	ret, err := agent.Call(actx, FreezeCommand, nil)
	if err != nil {
		return &Freeze{State: FreezeUnknown, Why: err.Error()}
	}
	switch st := FreezeState(ret.String()); st {
	case Thawed, Frozen:
		return &Freeze{State: st, At: time.Now()}
	}
	return &Freeze{State: FreezeUnknown, Why: "guest-fsfreeze-status answered " + units.Clip(ret.Raw, 80)}
}

// HasAgent reports agent: 1 in the config: a guest agent channel to ask
// (from the next start, where it was set since).
func (v *VM) HasAgent() bool { return qemuserver.AgentEnabled(v.Config.Main["agent"]) }
