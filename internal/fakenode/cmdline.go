// Package fakenode builds a Proxmox VE node for tests and the demo: a root
// tree with /etc/pve (VM configs, storage.cfg) and /var/run/qemu-server, disks
// on sparse files and loop devices, and real QEMU processes started with the
// exact disk layout qemu-server generates for a config (both command-line
// generations). Only Proxmox's CLI and device-mapper are stood in for, by
// doubles that report the real state of those files.
package fakenode

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// ArgvOptions shape the generated command line.
type ArgvOptions struct {
	VMID     int
	RunDir   string // where the pid file and sockets go
	Legacy   bool   // force the -drive generation (machine < 10.0)
	Blockdev bool   // force the -blockdev generation
	Next     bool   // use the config as the next start applies it ([PENDING] applied)
	Memory   int    // MiB; 0 means 64 (no guest) or what the caller passes
	Extra    []string
	// Blkdebug injects I/O errors below the named disks (-blockdev only):
	// QEMU's blkdebug filter between the format and the protocol node, as
	// a failing storage would return them.
	Blkdebug map[string]Blkdebug
	// QEMUVersion is the version of the QEMU that runs the line ("7.2.22");
	// it decides -name as qemu-server does. Start fills it in.
	QEMUVersion string
	// CopiedBinary makes Start run QEMU from a copy of its binary in a
	// directory of its own (VM.Binary), which a test deletes to stand for
	// the binary a package upgrade replaced: the process runs on, and
	// /proc/PID/exe reads "PATH (deleted)". For the 11.1 wrapper the copy
	// is of the chroot's binary, below the /tmp it shares with the host.
	CopiedBinary bool
}

// Adaptation is one way the fake node's disk arguments differ from the
// ones Proxmox's config_to_command gives the same config, and why
// (TestArgvAgainstProxmox fails for any other difference).
type Adaptation struct {
	Arg, Option string // "-device", "bootindex"
	Why         string
}

// Adaptations lists every difference between the fake node's disk
// arguments and Proxmox's, in one place.
var Adaptations = []Adaptation{
	{"-device", "bootindex", "no firmware boots a disk: the tests run QEMU without a guest or with -kernel"},
	{"-device", "bus", "the device's place: every fake VM runs machine q35 (upstream QEMU has no +pveN machines, and one machine keeps the tests' PCI and IDE layout fixed), so a PCI device sits on QEMU's own bus and an IDE disk on the ICH9 AHCI's ide.N instead of i440fx's ide.N/2"},
	{"-device", "unit", "as bus: on q35's ICH9 AHCI each ide.N bus takes one unit"},
	{"-device", "addr", "as bus: QEMU places PCI devices itself"},
	{"-blockdev", "file.driver", "a device path (passthrough, scsiblock) is host_device only where it is a block device on this machine: the fake node stats the path it will open, Proxmox's stat is the node's"},
	{"-blockdev", "file.file.driver", "as file.driver, one node further down"},
}

// Adapted is the reason an option of an argument is one of Adaptations,
// "" if it is not.
func Adapted(arg, option, value string) string {
	for _, a := range Adaptations {
		if a.Arg == arg && a.Option == option {
			if option == "bus" && !strings.HasPrefix(value, "pci.") && !strings.HasPrefix(value, "ide.") {
				return "" // a SCSI or SATA controller's bus is the disk's own place
			}
			return a.Why
		}
	}
	return ""
}

// Blkdebug is one error injection rule of QEMU's blkdebug driver.
type Blkdebug struct {
	Event string // e.g. "write_aio": every write the raw format node sends down
	Errno int    // 5 (EIO) makes io-status "failed", 28 (ENOSPC) "nospace"
}

// NameArg is -name's value as qemu-server passes it (config_to_command):
// "NAME,debug-threads=on" before QEMU 11, plain NAME from 11 on, where
// QEMU names its threads always and deprecates the option. NAME is the
// config's name, else vm<VMID>. An unknown version counts as older: thread
// names are then asked for explicitly.
func NameArg(conf map[string]string, vmid int, qemuVersion string) string {
	name := conf["name"]
	if name == "" {
		name = "vm" + strconv.Itoa(vmid)
	}
	major, _, _ := strings.Cut(qemuVersion, ".")
	if n, err := strconv.Atoi(major); err == nil && n >= 11 {
		return name
	}
	return name + ",debug-threads=on"
}

func isBlockDevice(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode()&os.ModeDevice != 0 && st.Mode()&os.ModeCharDevice == 0
}

// Argv returns the QEMU command line qemu-server would generate for the
// config's disks (the rest of the VM is reduced to what a guest-less TCG VM
// needs). The disk part follows qemu-server 9.2 field by field.
func Argv(qemu string, cfg *qemuserver.Config, st qemuserver.Storages, o ArgvOptions) ([]string, error) {
	conf := cfg.Main
	if o.Next {
		conf = cfg.Next()
	}
	vm := qemuserver.VMDefaultsFor(conf)
	if o.Legacy {
		vm.Blockdev = false
	}
	if o.Blockdev {
		vm.Blockdev = true
	}
	mem := o.Memory
	if mem == 0 {
		mem = 64
	}
	id := strconv.Itoa(o.VMID)
	argv := []string{qemu,
		"-name", NameArg(conf, o.VMID, o.QEMUVersion),
		"-no-shutdown",
		"-chardev", "socket,id=qmp,path=" + o.RunDir + "/" + id + ".qmp,server=on,wait=off",
		"-mon", "chardev=qmp,mode=control",
		"-pidfile", o.RunDir + "/" + id + ".pid",
		"-daemonize",
		"-nodefaults",
		"-display", "none",
		"-accel", "tcg",
		"-m", strconv.Itoa(mem),
	}
	var objects, devices []string
	scsiCtrl := map[string]bool{}
	ahciCtrl := map[int]bool{}
	scsihw := qemuserver.SCSIHW(conf)
	for _, key := range qemuserver.DiskKeys(conf) {
		d, err := qemuserver.ParseDrive(key, conf[key])
		if err != nil {
			return nil, err
		}
		if d.Bus == "efidisk" || d.Bus == "tpmstate" {
			continue
		}
		s, err := qemuserver.Predict(d, st, vm, isBlockDevice)
		if err != nil {
			return nil, err
		}
		switch d.Bus {
		case "virtio":
			if d.Bool("iothread") {
				objects = append(objects, "-object", "iothread,id=iothread-"+key)
			}
		case "scsi":
			cid, _ := scsiController(scsihw, d.Index)
			if !scsiCtrl[cid] {
				scsiCtrl[cid] = true
				typ := scsihw
				if typ == "virtio-scsi-single" {
					typ = "virtio-scsi-pci"
				}
				dev := typ + ",id=" + cid
				if scsihw == "virtio-scsi-single" && d.Bool("iothread") {
					dev += ",iothread=iothread-" + cid
					objects = append(objects, "-object", "iothread,id=iothread-"+cid)
				}
				// QemuServer.pm: ",num_queues=$drive->{queues}" under
				// virtio-scsi-single only.
				if q := d.Opts["queues"]; scsihw == "virtio-scsi-single" && q != "" {
					dev += ",num_queues=" + q
				}
				devices = append(devices, "-device", dev)
			}
		case "sata":
			ctrl := d.Index / 6
			if !ahciCtrl[ctrl] {
				ahciCtrl[ctrl] = true
				devices = append(devices, "-device", fmt.Sprintf("ahci,id=ahci%d,multifunction=on", ctrl))
			}
		}
		if vm.Blockdev {
			if d.IsNone() {
				devices = append(devices, "-device", deviceLine(d, s, vm, scsihw))
				continue
			}
			tg := map[string]any{"id": "throttle-drive-" + key, "limits": s.Limits, "qom-type": "throttle-group"}
			if s.Limits == nil {
				tg["limits"] = map[string]int64{}
			}
			objects = append(objects, "-object", mustJSON(tg))
			bd := blockdev(d, s)
			if e, ok := o.Blkdebug[key]; ok {
				injectError(bd, e)
			}
			devices = append(devices, "-blockdev", mustJSON(bd))
		} else {
			devices = append(devices, "-drive", driveLine(d, s))
		}
		devices = append(devices, "-device", deviceLine(d, s, vm, scsihw))
	}
	argv = append(argv, objects...)
	argv = append(argv, devices...)
	machine := "type=q35"
	argv = append(argv, "-machine", machine)
	argv = append(argv, o.Extra...)
	return argv, nil
}

func mustJSON(v any) string {
	b, err := json.Marshal(v) // maps marshal with sorted keys, like Perl's canonical JSON
	if err != nil {
		panic(err)
	}
	return string(b)
}

func blockdev(d *qemuserver.Drive, s qemuserver.DiskSettings) map[string]any {
	common := func(m map[string]any) map[string]any {
		if !s.CDROM {
			m["discard"] = s.Discard
			m["detect-zeroes"] = s.DetectZeroes
		}
		m["read-only"] = s.ReadOnly
		return m
	}
	cache := map[string]any{"direct": s.CacheDirect, "no-flush": s.CacheNoFlush}
	file := common(map[string]any{"driver": s.Driver, "filename": s.Path, "node-name": s.NodeFile, "cache": cache})
	if s.AIO != "" {
		file["aio"] = s.AIO
	}
	format := common(map[string]any{"driver": s.Format, "file": file, "node-name": s.NodeFormat, "cache": cache})
	if d.Bool("scsiblock") {
		format["node-name"] = s.NodeTop
		return format
	}
	return common(map[string]any{"driver": "throttle", "file": format, "node-name": s.NodeTop, "throttle-group": "throttle-drive-" + d.Key})
}

// injectError puts a blkdebug filter above the protocol node of a
// -blockdev tree.
func injectError(top map[string]any, e Blkdebug) {
	format := top
	if format["driver"] == "throttle" {
		format = top["file"].(map[string]any)
	}
	file := format["file"].(map[string]any)
	format["file"] = map[string]any{
		"driver": "blkdebug", "image": file, "node-name": "k" + strings.TrimPrefix(file["node-name"].(string), "e"),
		"inject-error": []map[string]any{{"event": e.Event, "errno": e.Errno}},
	}
}

func driveLine(d *qemuserver.Drive, s qemuserver.DiskSettings) string {
	var b strings.Builder
	if s.Path != "" {
		b.WriteString("file=" + strings.ReplaceAll(s.Path, ",", ",,") + ",")
	}
	b.WriteString("if=none,id=drive-" + d.Key)
	for _, o := range []string{"media", "cache", "rerror", "werror", "discard"} {
		if v, ok := d.Opts[o]; ok {
			b.WriteString("," + o + "=" + v)
		}
	}
	if v, ok := d.Opts["ro"]; ok {
		if v == "1" {
			b.WriteString(",readonly=on")
		} else {
			b.WriteString(",readonly=off")
		}
	}
	for _, k := range qemuserver.LimitKeys {
		if v := s.Limits[k.QEMU]; v != 0 {
			b.WriteString(",throttling." + k.QEMU + "=" + strconv.FormatInt(v, 10))
		}
	}
	if s.Format != "" && s.Path != "" {
		b.WriteString(",format=" + s.Format)
	}
	if d.Opts["cache"] == "" && s.CacheDirect {
		b.WriteString(",cache=none")
	}
	b.WriteString(",aio=" + s.AIO)
	if !s.CDROM {
		b.WriteString(",detect-zeroes=" + s.DetectZeroes)
	}
	return b.String()
}

func deviceLine(d *qemuserver.Drive, s qemuserver.DiskSettings, vm qemuserver.VMDefaults, scsihw string) string {
	var dev string
	drive := ""
	if !vm.Blockdev || !d.IsNone() {
		drive = ",drive=drive-" + d.Key
	}
	switch d.Bus {
	case "virtio":
		dev = "virtio-blk-pci" + drive + ",id=" + d.Key
		if d.Bool("iothread") {
			dev += ",iothread=iothread-" + d.Key
		}
	case "scsi":
		typ := "hd"
		if s.CDROM {
			typ = "cd"
		}
		cid, unit := scsiController(scsihw, d.Index)
		if scsihw == "lsi" || scsihw == "lsi53c810" || scsihw == "pvscsi" {
			dev = fmt.Sprintf("scsi-%s,bus=%s.0,scsi-id=%d", typ, cid, unit)
		} else {
			dev = fmt.Sprintf("scsi-%s,bus=%s.0,channel=0,scsi-id=0,lun=%d", typ, cid, d.Index)
		}
		dev += drive + ",id=" + d.Key
		if vm.Blockdev {
			dev += ",device_id=drive-" + d.Key
		}
		if d.Bool("ssd") && !s.CDROM {
			dev += ",rotation_rate=1"
		}
	case "sata", "ide":
		typ := "hd"
		if s.CDROM {
			typ = "cd"
		}
		dev = "ide-" + typ
		if d.Bus == "ide" {
			dev += fmt.Sprintf(",bus=ide.%d", d.Index)
		} else {
			dev += fmt.Sprintf(",bus=ahci%d.%d", d.Index/6, d.Index%6)
		}
		dev += drive + ",id=" + d.Key
		if d.Bool("ssd") && typ == "hd" {
			dev += ",rotation_rate=1"
		}
	}
	if serial := d.Opts["serial"]; serial != "" {
		dev += ",serial=" + serial
	}
	if vm.Blockdev && !s.CDROM {
		dev += ",write-cache=" + s.WriteCache
	}
	if vm.Blockdev {
		// DriveDevice.pm: from machine 10.0 the error actions are
		// device options.
		for _, o := range []string{"rerror", "werror"} {
			if v, ok := d.Opts[o]; ok {
				dev += "," + o + "=" + v
			}
		}
	}
	return dev
}

// scsiController is qemu-server's scsihw_infos: which controller (id) a SCSI
// disk index sits on and its unit there. Only lsi* (and no scsihw) hold 7
// disks per controller; pvscsi, like virtio-scsi-pci and megasas, 256.
func scsiController(scsihw string, index int) (id string, unit int) {
	maxdev, prefix := 7, "scsihw"
	switch scsihw {
	case "virtio-scsi-single":
		maxdev, prefix = 1, "virtioscsi"
	case "virtio-scsi-pci", "megasas", "pvscsi":
		maxdev = 256
	}
	return prefix + strconv.Itoa(index/maxdev), index % maxdev
}
