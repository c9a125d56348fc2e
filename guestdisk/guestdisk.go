// Package guestdisk names a VM disk as the guest sees it: the stable
// /dev/disk/by-id name that Proxmox's device layout gives it, and, when the
// guest agent answers, the guest's own device name and mount points.
//
// The by-id name follows from three layers: qemu-server's -device line
// (DriveDevice.pm: device_id=drive-<id> on SCSI under -blockdev, serial=,
// vendor=, product=, model=, wwn=), QEMU's defaults for what the line
// leaves out (SCSI vendor "QEMU" and product "QEMU HARDDISK", the ATA serial
// QM%05d numbered in the order QEMU creates IDE units), and the guest's udev
// rules (60-persistent-storage.rules: scsi-<ID_SERIAL>, ata-<model>_<serial>,
// virtio-<serial>, wwn-<wwn>).
package guestdisk

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// Name is the guest-visible name of one disk.
type Name struct {
	// ByID is the /dev/disk/by-id path the guest's udev creates; empty
	// when the layout gives the disk none.
	ByID string
	// Assigned is true when part of ByID is numbered by QEMU at start (the
	// default ATA serial QM%05d): stable while the VM's controllers stay as
	// they are, changed by adding an IDE/SATA controller before it.
	Assigned bool
	// Note says why there is no name, or what it depends on.
	Note string
}

// virtioSerialMax is VIRTIO_BLK_ID_BYTES: virtio-blk hands the guest at
// most 20 bytes of serial.
const virtioSerialMax = 20

// ByID names disk d as the guest's udev does. device is the QEMU device
// model that runs it (scsi-hd, scsi-cd, scsi-block, virtio-blk-pci, ide-hd,
// ide-cd; from the running or predicted settings), blockdev the
// command-line generation, q35 the machine type (it decides the default
// ATA serial).
func ByID(d *qemuserver.Drive, device string, blockdev, q35 bool) Name {
	opt := func(k string) string {
		v := d.Opts[k]
		if u, err := url.QueryUnescape(v); err == nil {
			v = u // qemu-server uri_unescape()s serial= and model=
		}
		return v
	}
	serial, wwn := opt("serial"), d.Opts["wwn"]
	switch {
	case device == "scsi-block" || device == "scsi-generic":
		return Name{Note: "SCSI passthrough: the guest sees the host device's own identifiers"}
	case strings.HasPrefix(device, "scsi-"):
		if wwn != "" {
			return Name{ByID: "/dev/disk/by-id/wwn-" + strings.ToLower(wwn)}
		}
		product := "QEMU HARDDISK"
		if device == "scsi-cd" {
			product = "QEMU CD-ROM"
		}
		if p := d.Opts["product"]; p != "" {
			product = p
		}
		vendor := "QEMU"
		if v := d.Opts["vendor"]; v != "" {
			vendor = v
		}
		// The VPD page 0x83 designator is the device_id: qemu-server sets it
		// to drive-<id> under -blockdev; under -drive QEMU takes the serial,
		// else the BlockBackend's name, which is drive-<id> there.
		devID := "drive-" + d.Key
		if !blockdev && serial != "" {
			devID = serial
		}
		return Name{ByID: "/dev/disk/by-id/scsi-" + udevString("0"+pad(vendor, 8)+pad(product, 16)+devID)}
	case strings.HasPrefix(device, "virtio-blk"):
		if serial == "" {
			return Name{Note: "VirtIO Block without serial=: no /dev/disk/by-id name in the guest (set serial= for one)"}
		}
		if len(serial) > virtioSerialMax {
			serial = serial[:virtioSerialMax]
		}
		return Name{ByID: "/dev/disk/by-id/virtio-" + udevString(serial)}
	case strings.HasPrefix(device, "ide-"):
		if wwn != "" {
			return Name{ByID: "/dev/disk/by-id/wwn-" + strings.ToLower(wwn)}
		}
		model := "QEMU HARDDISK"
		if device == "ide-cd" {
			model = "QEMU DVD-ROM"
		}
		if m := opt("model"); m != "" {
			model = m
		}
		n := Name{}
		if serial == "" {
			num, ok := ataSerialNumber(d, q35)
			if !ok {
				return Name{Note: "ATA serial numbered by QEMU from the controller layout, not known for " + d.Key}
			}
			serial, n.Assigned = fmt.Sprintf("QM%05d", num), true
			n.Note = "serial numbered by QEMU at start (set serial= for a name that survives controller changes)"
		}
		n.ByID = "/dev/disk/by-id/ata-" + udevString(model+"_"+serial)
		return n
	}
	return Name{Note: "no guest-visible name known for device " + device}
}

// ataSerialNumber is the number of QEMU's default ATA serial ("QM%05d") for
// an IDE or SATA disk. QEMU numbers IDE units from 1 in the order it creates
// them, two per IDE bus (hw/ide/core.c ide_init2), whether a disk sits there
// or not: first the machine's own controller (i440fx: PIIX with two buses;
// q35: ICH9 AHCI with six ports, one bus each), then the -device ahci
// controllers qemu-server adds for SATA, ahci0 first (six ports each).
// qemu-server puts ideN on bus ide.(N/2) unit N%2, or on q35, where AHCI
// ports take one unit, on ide.(N/2 + 2*(N%2)) unit 0.
func ataSerialNumber(d *qemuserver.Drive, q35 bool) (int, bool) {
	builtin := 4 // PIIX: 2 buses x 2 units
	if q35 {
		builtin = 12 // ICH9 AHCI: 6 ports x 2 units
	}
	switch d.Bus {
	case "sata":
		return builtin + (d.Index/6)*12 + (d.Index%6)*2 + 1, true
	case "ide":
		bus, unit := d.Index/2, d.Index%2
		if q35 {
			bus, unit = d.Index/2+2*(d.Index%2), 0
		}
		return bus*2 + unit + 1, true
	}
	return 0, false
}

// pad is s cut or space-padded to n bytes, as SCSI INQUIRY fields are.
func pad(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s + strings.Repeat(" ", n-len(s))
}

// udevString is udev's util_replace_whitespace: leading and trailing
// whitespace dropped, every run of whitespace inside one underscore.
func udevString(s string) string {
	return strings.Join(strings.Fields(s), "_")
}

// IsQ35 reports whether a machine type (the running -machine type=, or the
// config's machine:) is a q35 one.
func IsQ35(machine string) bool {
	return strings.Contains(machine, "q35")
}
