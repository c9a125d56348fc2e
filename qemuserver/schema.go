package qemuserver

import (
	"fmt"
	"regexp"
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

// checkValue checks the value of a main-section key the way
// parse_vm_config's check_type does (PVE::JSONSchema against QemuServer.pm's
// $confdesc), for the VM-level keys this tool reads (VMKeysRead): their
// types and formats (boolean, a DNS name, a property string's keys). An
// enum is not checked there (check_type checks types and formats, not
// enumerations: scsihw, ostype and lock keep any value, as the oracle
// shows), so it is not here either. "" when Proxmox accepts it (and for
// every other key: disk lines are checked by ParseDrive, where a refused
// one is config-invalid).
func checkValue(key, val string) string {
	switch key {
	case "template", "protection":
		if _, ok := ParseBool(val); !ok {
			return "value " + clip(val) + " is not a boolean"
		}
	case "boot":
		if err := CheckBoot(val); err != nil {
			return err.Error()
		}
	case "bootdisk":
		// pve-qm-bootdisk (Drive.pm verify_bootdisk: is_valid_drivename;
		// the key's pattern is the API's, not check_type's).
		if !IsDiskKey(val) {
			return "invalid boot disk " + clip(val)
		}
	case "name":
		if !dnsNameRe.MatchString(val) {
			return "value " + clip(val) + " does not look like a valid DNS name"
		}
	case "tags":
		// pve-tag-list: tags split by ; , or blanks, each $PVE_TAG_RE.
		for _, tag := range splitList(val) {
			if !tagRe.MatchString(tag) {
				return "invalid characters in tag " + clip(tag)
			}
		}
	case "agent":
		// Agent.pm $agent_fmt: enabled (the default key), booleans, type.
		return checkPropString(val, "enabled", map[string]func(string) bool{
			"enabled": isBool, "fstrim_cloned_disks": isBool, "freeze-fs": isBool, "freeze-fs-on-backup": isBool, "guest-fsfreeze": isBool,
			"type": func(v string) bool { return v == "virtio" || v == "isa" },
		}, "enabled")
	case "machine":
		// Machine.pm's pve-qemu-machine format.
		return checkPropString(val, "type", map[string]func(string) bool{
			"type":      machineTypeRe.MatchString,
			"viommu":    func(v string) bool { return v == "intel" || v == "virtio" },
			"aw-bits":   func(v string) bool { _, err := strconv.ParseFloat(v, 64); return err == nil },
			"enable-s3": isBool, "enable-s4": isBool,
		}, "")
	case "meta":
		// MetaInfo.pm $meta_info_fmt: no default key.
		return checkPropString(val, "", map[string]func(string) bool{
			"ctime":         func(v string) bool { _, err := strconv.ParseUint(v, 10, 64); return err == nil },
			"creation-qemu": regexp.MustCompile(`^\d+(\.\d+)+$`).MatchString,
		}, "")
	}
	return ""
}

var (
	// pve_verify_dns_name (PVE::JSONSchema).
	dnsNameRe = regexp.MustCompile(`^([a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?\.)*[a-zA-Z0-9]([a-zA-Z0-9\-]*[a-zA-Z0-9])?$`)
	// $PVE_TAG_RE (PVE::JSONSchema), case-insensitive.
	tagRe = regexp.MustCompile(`(?i)^[a-z0-9_][a-z0-9_\-+.]*$`)
	// pve-qemu-machine's type pattern (Machine.pm).
	machineTypeRe = regexp.MustCompile(`^(pc|pc(-i440fx)?-\d+(\.\d+)+(\+pve\d+)?(\.pxe)?|q35|pc-q35-\d+(\.\d+)+(\+pve\d+)?(\.pxe)?|virt(?:-\d+(\.\d+)+)?(\+pve\d+)?)$`)
)

func isBool(v string) bool { _, ok := ParseBool(v); return ok }

// checkPropString is parse_property_string against a format: every key
// known and its value valid, none twice, a bare value only as the default
// key's, the required key present; "" when it is accepted.
func checkPropString(val, defaultKey string, keys map[string]func(string) bool, required string) string {
	seen := map[string]bool{}
	for _, part := range strings.Split(val, ",") {
		if strings.TrimSpace(part) == "" {
			continue // parse_property_string skips blank parts
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			if defaultKey == "" || seen[defaultKey] {
				return "value without key, but schema does not define a default key"
			}
			k, v = defaultKey, part
		}
		check, known := keys[k]
		switch {
		case !known:
			return k + ": property is not defined in schema"
		case seen[k]:
			return "duplicate key in comma-separated list property: " + k
		case !check(v):
			return k + ": value " + clip(v) + " is not valid"
		}
		seen[k] = true
	}
	if required != "" && !seen[required] {
		return required + ": property is missing and it is not optional"
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
