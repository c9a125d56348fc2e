package limit

import (
	"path/filepath"
	"strings"
	"time"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// ArgsUsage is the limit command's positional arguments.
const ArgsUsage = "VMID [DISK]"

// FlagName is the command-line flag of a limit key: mbps_wr -> mbps-wr.
func FlagName(proxmoxKey string) string { return strings.ReplaceAll(proxmoxKey, "_", "-") }

// Input is a limit command as typed, before anything is read from the
// node: its arguments and flags as given.
type Input struct {
	Args                           []string          // VMID [DISK]
	Values                         map[string]string // the limit flags given: Proxmox key -> value as typed
	Clear, Persist, DryRun, Verify bool
	Histogram                      bool           // --histogram: latency percentiles for --verify
	For                            *time.Duration // --for; nil when not given (DefaultWindow)
	Root                           string         // --root, as node.Paths holds it
	// RootEnv is PVEDISKCHECK_ROOT: a root qm serves when it is the one
	// --root names.
	RootEnv string
}

// Changes reports whether a run changes the disk's limits: a limit value
// or --clear, without --dry-run.
func (in Input) Changes() bool {
	return !in.DryRun && (in.Clear || len(in.Values) > 0)
}

// Valid is an Input that passed Validate: the VM, the disk ("" for every
// disk) and what Run is asked to do (OnSample is the caller's).
type Valid struct {
	VMID int
	Disk string
	Request
}

// Validate checks a limit command's request rules before anything is read:
// a VMID and at most one disk; each value as the number it is (ParseValue);
// a change names its disk; --persist and --dry-run need a change; --for
// needs --verify, --verify a disk and a window of at least MinWindow, and
// no --dry-run; --persist runs this node's qm, so it refuses a --root qm
// does not serve. Every error is a usage error (exit 2), the first rule
// broken in that order.
func (in Input) Validate() (Valid, error) {
	var out Valid
	if len(in.Args) == 0 {
		return out, exitcode.Usagef("limit: missing VMID (usage: pvediskcheck limit %s)", ArgsUsage)
	}
	vmid, err := qemuserver.ParseVMID(in.Args[0])
	if err != nil {
		return out, err
	}
	if len(in.Args) > 2 {
		return out, exitcode.Usagef("limit: too many arguments %s (usage: pvediskcheck limit %s)", units.Clip(strings.Join(in.Args[2:], " "), 40), ArgsUsage)
	}
	out.VMID = vmid
	if len(in.Args) == 2 {
		out.Disk = in.Args[1]
	}
	// Each value as the number it is, before anything else: a value that
	// is not one never goes further.
	values := Set{}
	for _, k := range qemuserver.LimitKeys {
		raw, ok := in.Values[k.Proxmox]
		if !ok {
			continue
		}
		v, err := ParseValue(k.Proxmox, raw)
		if err != nil {
			return out, exitcode.Usagef("limit: --%s %s: %v", FlagName(k.Proxmox), units.Clip(raw, 40), err)
		}
		values[k.Proxmox] = v
	}
	out.Persist, out.DryRun = in.Persist, in.DryRun
	if in.Clear || len(values) > 0 {
		out.Change = &Change{Values: values, Clear: in.Clear}
	}
	window := DefaultWindow
	if in.For != nil {
		window = *in.For
	}
	switch {
	case out.Change != nil && out.Disk == "":
		return out, exitcode.Usagef("limit: name the disk to change (pvediskcheck limit %d DISK --mbps-wr 20)", vmid)
	case (in.Persist || in.DryRun) && out.Change == nil:
		return out, exitcode.Usagef("limit: --persist and --dry-run need limit flags or --clear")
	case in.For != nil && !in.Verify:
		return out, exitcode.Usagef("limit: --for needs --verify")
	case in.Verify && out.Disk == "":
		return out, exitcode.Usagef("limit: --verify needs DISK")
	case in.Verify && window < MinWindow:
		return out, exitcode.Usagef("limit: --for %s is too short: the first %s are not judged and a verdict needs %s more", window, Skip, MinSteady)
	case window > MaxWindow:
		return out, exitcode.Usagef("limit: --for %s: at most %s", window, units.Short(MaxWindow))
	case in.Histogram && !in.Verify:
		return out, exitcode.Usagef("limit: --histogram needs --verify")
	case in.Verify && in.DryRun:
		return out, exitcode.Usagef("limit: --verify cannot be combined with --dry-run")
	case in.Persist && filepath.Clean(in.Root) != "/" && filepath.Clean(in.RootEnv) != filepath.Clean(in.Root):
		return out, exitcode.Usagef("limit: --persist runs this node's qm, which does not know --root %s; refusing (set PVEDISKCHECK_ROOT to that root when its qm serves it)", in.Root)
	}
	if in.Verify {
		out.Verify, out.Histogram = window, in.Histogram
	}
	return out, nil
}
