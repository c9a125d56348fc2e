package limit

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// Method is how a change reaches the disk.
type Method string

// The three ways qemu-server changes a disk's limits.
const (
	// QOMSet sets all 18 fields of the throttle group throttle-drive-DISK
	// (-blockdev, machine >= 10.0).
	QOMSet Method = "qom-set"
	// BlockSetIOThrottle sets the throttling of drive-DISK (-drive).
	BlockSetIOThrottle Method = "block_set_io_throttle"
	// QMSet runs qm set: Proxmox saves the line and applies it live.
	QMSet Method = "qm set"
)

// LiveCommand is the QMP command qemu-server sends to give a running disk
// the limits want: every one of the 18 fields (unset rates 0, unset burst
// lengths 1), so none keeps an old value. It is built from the numbers of
// want, never from what a user typed.
func LiveCommand(disk string, blockdev bool, want Set) (Method, map[string]any, error) {
	name, args, err := qmp.ThrottleCommand(disk, blockdev, want.QEMU().Full())
	return Method(name), args, err
}

// CommandJSON prints a QMP command as it goes over the socket.
func CommandJSON(m Method, args map[string]any) string {
	b, _ := json.Marshal(map[string]any{"execute": string(m), "arguments": args})
	return string(b)
}

// PersistArgv is the qm command that saves want as the limits of the disk's
// config line: the line as configured, its limit keys replaced by want's,
// each printed from its number, with --digest: the digest of the config the
// line was read from (qemuserver.Digest), so qm refuses it when the config
// changed since. The new line is parsed back: it must carry exactly want and
// every other option unchanged, or nothing runs.
func PersistArgv(vmid int, d *qemuserver.Drive, want Set, digest string) ([]string, error) {
	nd := d.Clone()
	for _, k := range qemuserver.LimitKeys {
		delete(nd.Opts, k.Proxmox)
	}
	for k, v := range want.Options() {
		nd.Opts[k] = v
	}
	line := nd.String()
	back, err := qemuserver.ParseDrive(d.Key, line)
	if err != nil {
		return nil, exitcode.Usagef("limit: the new line would not parse: %v (nothing was changed)", err)
	}
	got, err := FromOptions(back.Opts)
	if err != nil || !equalSets(got, want) {
		return nil, exitcode.Usagef("limit: the new line %s does not read back as the limits asked for (nothing was changed)", strconv.Quote(line))
	}
	for k, v := range d.Opts {
		if _, isLimit := Key(k); !isLimit && back.Opts[k] != v {
			return nil, exitcode.Usagef("limit: the new line would change %s (nothing was changed)", k)
		}
	}
	argv := []string{"qm", "set", strconv.Itoa(vmid), "--" + d.Key, line}
	if digest != "" {
		argv = append(argv, "--digest", digest)
	}
	return argv, nil
}

func equalSets(a, b Set) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// ArgvString prints a command line for the report.
func ArgvString(argv []string) string { return strings.Join(argv, " ") }
