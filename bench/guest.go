package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// GuestOS is guest-get-osinfo's answer: id is os-release's ID on Linux
// ("debian", "ubuntu", "fedora", ...), "mswindows" on Windows; empty when
// the guest has no os-release (qemu-ga then gives only the kernel).
type GuestOS struct {
	ID      string `json:"id"`
	Pretty  string `json:"pretty_name,omitempty"`
	Kernel  string `json:"kernel_release,omitempty"`
	IDLikes string `json:"id_like,omitempty"`
}

// ParseOSInfo reads guest-get-osinfo's return value.
func ParseOSInfo(ret gjson.Result) GuestOS {
	var likes []string
	for _, l := range ret.Get("id-like").Array() {
		likes = append(likes, l.String())
	}
	return GuestOS{ID: ret.Get("id").String(), Pretty: ret.Get("pretty-name").String(),
		Kernel: ret.Get("kernel-release").String(), IDLikes: strings.Join(likes, " ")}
}

// Remedy is the exact command that installs fio in that guest.
func (g GuestOS) Remedy() string {
	ids := " " + g.ID + " " + g.IDLikes + " "
	has := func(s ...string) bool {
		for _, x := range s {
			if strings.Contains(ids, " "+x+" ") {
				return true
			}
		}
		return false
	}
	switch {
	case has("debian", "ubuntu"):
		return "apt install fio"
	case has("fedora", "rhel", "centos", "rocky", "almalinux"):
		return "dnf install fio"
	case has("suse", "opensuse", "sles"):
		return "zypper install fio"
	case has("arch"):
		return "pacman -S fio"
	case has("alpine"):
		return "apk add fio"
	}
	return "apt install fio (Debian, Ubuntu) or dnf install fio (Fedora, RHEL and its rebuilds)"
}

// Windows reports a Windows guest.
func (g GuestOS) Windows() bool { return g.ID == "mswindows" }

// ErrWindows: bench drives Linux guests only.
var ErrWindows = exitcode.New(exitcode.Unreachable,
	"the guest runs Windows: bench supports Linux guests only (fio on Windows has no libaio and no /dev devices, "+
		"and the guest checks use blkid); run fio there yourself and read the files with `pvediskcheck fio summary`")

// FindFio asks the guest what it runs (guest-get-osinfo) and for fio's
// version (guest-exec fio --version). A guest without a running agent, an
// agent that blocks guest-exec, a Windows guest or a guest without fio is
// exit 3, with the remedy; nothing is installed.
func FindFio(ctx context.Context, a qmp.Agent, vmid int) (version string, os GuestOS, err error) {
	ret, err := a.Call(ctx, "guest-get-osinfo", nil)
	var refused *qmp.AgentError
	switch {
	case errors.As(err, &refused):
		// An agent without (or blocking) guest-get-osinfo: the remedy
		// names both package managers.
	case err != nil:
		return "", os, agentErr(vmid, "guest-get-osinfo", err)
	default:
		os = ParseOSInfo(ret)
	}
	if os.Windows() {
		return "", os, ErrWindows
	}
	vctx, cancel := context.WithTimeout(ctx, ProbeTimeout)
	defer cancel()
	st, err := a.Run(vctx, "fio", []string{"--version"}, nil, 100*time.Millisecond)
	var ae *qmp.AgentError
	if errors.As(err, &ae) && strings.Contains(ae.Desc, "No such file") {
		return "", os, exitcode.Unreachablef("VM %d: fio is not installed in the guest%s: install it there (%s), then run bench again; bench installs nothing",
			vmid, osName(os), os.Remedy())
	}
	if err != nil {
		return "", os, agentErr(vmid, "guest-exec", err)
	}
	out := strings.TrimSpace(string(st.Stdout))
	if !st.OK() || !strings.HasPrefix(out, "fio-") {
		return "", os, exitcode.Unreachablef("VM %d: fio --version in the guest exited %d and printed %q: not a working fio (%s)",
			vmid, st.ExitCode, clip([]byte(out+string(st.Stderr))), os.Remedy())
	}
	return out, os, nil
}

func osName(g GuestOS) string {
	if g.Pretty != "" {
		return " (" + g.Pretty + ")"
	}
	return ""
}

// agentErr says what a failed agent exchange means for bench (exit 3).
func agentErr(vmid int, command string, err error) error {
	var ae *qmp.AgentError
	var te *qmp.AgentTimeoutError
	switch {
	case errors.As(err, &ae) && (ae.Class == "CommandNotFound" || strings.Contains(ae.Desc, "disabled")):
		return exitcode.Unreachablef("VM %d: the guest agent refuses %s (%s): bench runs fio through guest-exec and reads devices with guest-file-read; "+
			"allow them in qemu-ga (its --block-rpcs / --allow-rpcs, or block-rpcs in /etc/qemu/qemu-ga.conf)", vmid, command, ae.Desc)
	case errors.As(err, &te):
		return exitcode.Unreachablef("VM %d: %v: install and start qemu-guest-agent in the guest, and set agent: 1 on the VM", vmid, err)
	}
	return exitcode.Wrap(exitcode.Unreachable, fmt.Sprintf("VM %d: guest agent %s", vmid, command), err)
}
