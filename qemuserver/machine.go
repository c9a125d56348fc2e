package qemuserver

import (
	"regexp"
	"strconv"
	"strings"
)

var machineVersionRe = regexp.MustCompile(`^(?:pc|pc-i440fx|pc-q35|q35|virt)-(\d+)\.(\d+)`)

// MachineVersion extracts "major.minor" from a machine type such as
// pc-q35-6.0+pve0 or pc-i440fx-9.2.pxe; ok is false when unpinned ("q35").
func MachineVersion(machine string) (major, minor int, ok bool) {
	m := machineVersionRe.FindStringSubmatch(machine)
	if m == nil {
		return 0, 0, false
	}
	major, _ = strconv.Atoi(m[1])
	minor, _ = strconv.Atoi(m[2])
	return major, minor, true
}

// UsesBlockdev reports whether qemu-server starts this config with the
// -blockdev generation: machine version 10.0 or newer. An unpinned machine
// runs the installed QEMU's latest version (>= 10 on PVE 9), except Windows
// guests, which pin the version they were created with (meta creation-qemu).
func UsesBlockdev(conf map[string]string) bool {
	if t, _ := ParseBool(conf["template"]); t {
		// config_to_command starts a template (for a backup only) from a
		// minimal config: the latest machine, whatever the config pins.
		return true
	}
	mtype := conf["machine"]
	if mtype != "" {
		opts, _ := SplitQemuOpts(mtype, "type")
		mtype = opts["type"]
	}
	if maj, _, ok := MachineVersion(mtype); ok {
		return maj >= 10
	}
	if strings.HasPrefix(conf["ostype"], "win") {
		// Windows guests run the machine version they were created with.
		// Proxmox records it in meta; a config without meta predates that
		// (PVE < 7), so its version is far below 10.0.
		meta, _ := SplitQemuOpts(conf["meta"], "")
		if v := meta["creation-qemu"]; v != "" {
			if maj, err := strconv.Atoi(strings.SplitN(v, ".", 2)[0]); err == nil {
				return maj >= 10
			}
		}
		return false
	}
	return true
}

// VMDefaultsFor collects the VM-level settings Predict needs from a config
// key set (main section or the next-start view).
func VMDefaultsFor(conf map[string]string) VMDefaults {
	t, _ := ParseBool(conf["template"])
	return VMDefaults{SCSIHW: SCSIHW(conf), Blockdev: UsesBlockdev(conf), Template: t}
}

// VMDefaultsAt is VMDefaultsFor on a node whose installed QEMU is
// qemuVersion (X.Y[.Z], "" unknown): an unpinned machine runs that
// version's machine type, so before QEMU 10 it starts with -drive.
func VMDefaultsAt(conf map[string]string, qemuVersion string) VMDefaults {
	v := VMDefaultsFor(conf)
	if v.Blockdev && !MachinePinned(conf) {
		if maj, err := strconv.Atoi(strings.SplitN(qemuVersion, ".", 2)[0]); err == nil && maj < 10 {
			v.Blockdev = false
		}
	}
	return v
}

// MachinePinned: the config names its machine's version (a template's is
// ignored: UsesBlockdev), so the installed QEMU does not decide it.
func MachinePinned(conf map[string]string) bool {
	if t, _ := ParseBool(conf["template"]); t {
		return false
	}
	opts, _ := SplitQemuOpts(conf["machine"], "type")
	_, _, ok := MachineVersion(opts["type"])
	return ok
}
