package vm

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/node"
)

// Lock is the config's `lock:` (QemuServer.pm $confdesc lock: backup,
// clone, create, migrate, rollback, snapshot, snapshot-delete, suspending,
// suspended) and whether a task of this node still holds it. While it is
// set, qemu-server refuses qm set (API2/Qemu.pm update_vm) and qm start
// (vm_start; a suspended lock resumes) with "VM is locked (KIND)".
type Lock struct {
	Kind string
	// Task is the UPID of the running task that holds the lock, "" when
	// none runs.
	Task string
	// Known: the node's task list (/var/log/pve/tasks/active) was read;
	// when not (a copied tree), whether the lock is stale is unknown.
	Known bool
}

// Stale reports a lock no task holds: left by an interrupted operation,
// which `qm unlock` clears. A suspended lock is never stale: it is a
// hibernated VM, which qm start resumes.
func (l *Lock) Stale() bool { return l.Known && l.Task == "" && l.Kind != "suspended" }

// lockTasks are the task types (fork_worker's in API2/Qemu.pm, vzdump's)
// that set each lock. anyID: the task's id is not always this VM (a
// backup job of several VMs has none; a clone's is the source VM).
var lockTasks = map[string]struct {
	types []string
	anyID bool
}{
	"backup":          {[]string{"vzdump"}, true},
	"clone":           {[]string{"qmclone"}, true},
	"create":          {[]string{"qmcreate", "qmrestore"}, false},
	"migrate":         {[]string{"qmigrate", "hamigrate", "qmtunnel"}, false},
	"rollback":        {[]string{"qmrollback"}, false},
	"snapshot":        {[]string{"qmsnapshot"}, false},
	"snapshot-delete": {[]string{"qmdelsnapshot"}, false},
	"suspending":      {[]string{"qmsuspend"}, false},
}

// LockTasks names the task types that set a lock ("" for suspended).
func LockTasks(kind string) string { return strings.Join(lockTasks[kind].types, " or ") }

// upidRe is PVE::UPID::decode's pattern: node, pid, pstart, starttime,
// type, id, user.
var upidRe = regexp.MustCompile(`^UPID:[a-zA-Z0-9](?:[a-zA-Z0-9\-]*[a-zA-Z0-9])?:([0-9A-Fa-f]{8}):([0-9A-Fa-f]{8,9}):[0-9A-Fa-f]{8}:([^:\s/]+):([^:\s/]*):[^:\s/]+:$`)

// Lock returns the config's lock and the task holding it, as Load read
// them; nil when the config has none.
func (v *VM) Lock() *Lock { return v.lock }

// readLock reads the config's lock and, through the node's reader, the
// task holding it (Load calls it once).
func (v *VM) readLock(ctx context.Context, n node.Node) *Lock {
	return v.readLockOf(ctx, n, v.Config.Main["lock"])
}

// readLockOf is readLock for a lock of kind (a config read again: the
// backup hold).
func (v *VM) readLockOf(ctx context.Context, n node.Node, kind string) *Lock {
	if kind == "" {
		return nil
	}
	l := &Lock{Kind: kind}
	b, err := n.ReadFile(ctx, v.paths.Join("/var/log/pve/tasks/active"))
	if err != nil {
		return l
	}
	l.Known = true
	want := lockTasks[kind]
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		// A finished task has its end time and status after the UPID
		// (RESTEnvironment active_workers).
		if len(f) != 1 {
			continue
		}
		m := upidRe.FindStringSubmatch(f[0])
		if m == nil || !slices.Contains(want.types, m[3]) || !want.anyID && m[4] != strconv.Itoa(v.VMID) {
			continue
		}
		pid, _ := strconv.ParseInt(m[1], 16, 64)
		pstart, _ := strconv.ParseInt(m[2], 16, 64)
		if v.taskRuns(ctx, n, int(pid), pstart) {
			l.Task = f[0]
			break
		}
	}
	return l
}

// taskRuns is PVE::ProcFSTools::check_process_running: the pid is alive
// and started at pstart (/proc/PID/stat's starttime), not a reused pid.
func (v *VM) taskRuns(ctx context.Context, n node.Node, pid int, pstart int64) bool {
	b, err := n.ReadFile(ctx, v.paths.ProcPid(pid)+"/stat")
	if err != nil {
		return false
	}
	// The fields after the command name, which may hold blanks and ")".
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return false
	}
	f := strings.Fields(string(b[i+1:]))
	// starttime is field 22; f[0] is field 3 (state).
	if len(f) < 20 {
		return false
	}
	st, err := strconv.ParseInt(f[19], 10, 64)
	return err == nil && st == pstart
}
