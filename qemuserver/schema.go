package qemuserver

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// SCSIControllers are the scsihw values Proxmox knows (QemuServer.pm
// $confdesc scsihw enum; the default is lsi).
var SCSIControllers = []string{"lsi", "lsi53c810", "virtio-scsi-pci", "virtio-scsi-single", "megasas", "pvscsi"}

// VirtIOSCSI reports a scsihw whose disks are VirtIO SCSI devices (not
// emulated: virtio-scsi-pci and virtio-scsi-single); "" is Proxmox's
// default, lsi.
func VirtIOSCSI(scsihw string) bool {
	return scsihw == "virtio-scsi-pci" || scsihw == "virtio-scsi-single"
}

// osTypes are the ostype values Proxmox knows (QemuServer.pm $confdesc
// ostype enum; the default is other).
var osTypes = []string{"other", "wxp", "w2k", "w2k3", "w2k8", "wvista", "win7", "win8", "win10", "win11", "l24", "l26", "solaris"}

// lockKinds are the lock values Proxmox knows (QemuServer.pm $confdesc lock
// enum).
var lockKinds = []string{"backup", "clone", "create", "migrate", "rollback", "snapshot", "snapshot-delete", "suspending", "suspended"}

// checkValue checks the value of a main-section key the way
// parse_vm_config's check_type does (PVE::JSONSchema against QemuServer.pm's
// $confdesc), for the VM-level keys this tool reads: scsihw, ostype, boot,
// template and lock. "" when Proxmox accepts it (and for every other key: disk
// lines are checked by ParseDrive, where a refused one is config-invalid).
func checkValue(key, val string) string {
	switch key {
	case "scsihw":
		if !slices.Contains(SCSIControllers, val) {
			return "value " + clip(val) + " is not one of " + strings.Join(SCSIControllers, ", ")
		}
	case "ostype":
		if !slices.Contains(osTypes, val) {
			return "value " + clip(val) + " is not one of " + strings.Join(osTypes, ", ")
		}
	case "lock":
		if !slices.Contains(lockKinds, val) {
			return "value " + clip(val) + " is not one of " + strings.Join(lockKinds, ", ")
		}
	case "template":
		if _, ok := ParseBool(val); !ok {
			return "value " + clip(val) + " is not a boolean"
		}
	case "boot":
		if err := CheckBoot(val); err != nil {
			return err.Error()
		}
	}
	return ""
}

// legacyBootRe is boot_fmt's legacy pattern (QemuServer.pm), anchored as
// PVE::JSONSchema anchors every pattern.
var legacyBootRe = regexp.MustCompile(`^(?:[acdn]{1,4})$`)

// CheckBoot checks a boot value as Proxmox's pve-qm-boot format does
// (QemuServer.pm $boot_fmt through PVE::JSONSchema parse_property_string):
// comma-separated parts, blank ones skipped; order=DEV;DEV... (split as
// PVE::Tools split_list does: ';', ',' and blanks) of boot devices
// (verify_bootdev: a disk key but efidisk/tpmstate, net0-31, usb0-13,
// hostpci0-15); a bare part is the deprecated legacy=[acdn]{1,4}.
func CheckBoot(v string) error {
	seen := map[string]bool{}
	for _, part := range strings.Split(v, ",") {
		if strings.TrimSpace(part) == "" {
			continue
		}
		k, val, hasEq := strings.Cut(part, "=")
		if !hasEq {
			k, val = "legacy", part
		} else if k == "" || val == "" {
			return fmt.Errorf("boot %s: %s is not key=value", clip(v), clip(part))
		}
		if seen[k] {
			return fmt.Errorf("boot %s: duplicate key %s", clip(v), k)
		}
		seen[k] = true
		switch k {
		case "legacy":
			if !legacyBootRe.MatchString(val) {
				return fmt.Errorf("boot %s: legacy %s does not match [acdn]{1,4}", clip(v), clip(val))
			}
		case "order":
			for _, dev := range strings.FieldsFunc(val, func(r rune) bool { return r == ';' || r == ' ' || r == '\t' || r == '\n' }) {
				if !IsBootDevice(dev) {
					return fmt.Errorf("boot %s: invalid boot device %s", clip(v), clip(dev))
				}
			}
		default:
			return fmt.Errorf("boot %s: invalid key %s", clip(v), clip(k))
		}
	}
	return nil
}

var bootDevRe = regexp.MustCompile(`^(net|usb|hostpci)(0|[1-9][0-9]*)$`)

// bootDevMax are the highest indexes of the non-disk boot devices
// (QemuServer.pm $MAX_NETS 32, USB.pm $MAX_USB_DEVICES 14, PCI.pm
// $MAX_HOSTPCI_DEVICES 16).
var bootDevMax = map[string]int{"net": 31, "usb": 13, "hostpci": 15}

// IsBootDevice is verify_bootdev (QemuServer.pm): a disk key other than
// efidisk0 and tpmstate0, or a net, usb or hostpci key Proxmox defines.
func IsBootDevice(dev string) bool {
	if bus, _, ok := SplitDiskKey(dev); ok {
		return bus != "efidisk" && bus != "tpmstate"
	}
	m := bootDevRe.FindStringSubmatch(dev)
	if m == nil {
		return false
	}
	n, err := strconv.Atoi(m[2])
	return err == nil && n <= bootDevMax[m[1]]
}

// AgentEnabled reads a VM config's agent option ("1", "enabled=1,..."):
// whether the VM has a guest agent channel to ask (QemuServer.pm
// $agent_fmt, enabled the default key).
func AgentEnabled(opt string) bool {
	first, _, _ := strings.Cut(opt, ",")
	b, _ := ParseBool(strings.TrimPrefix(first, "enabled="))
	return b
}
