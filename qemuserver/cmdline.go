package qemuserver

import (
	"bytes"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// Cmdline is what a QEMU command line (running process or `qm showcmd`) says
// about a VM's disks.
type Cmdline struct {
	Argv      []string
	Machine   string // -machine type=..., e.g. pc-q35-10.0+pve0
	Pidfile   string
	QMPSocket string                   // the QMP -chardev's path as written; the tool dials node.Paths.QMPSocket
	Blockdev  bool                     // any disk uses the -blockdev generation
	Disks     map[string]*DiskSettings // keyed by config key (scsi1)
	// Devices maps qdev id to the -device options, for callers that need more.
	Devices map[string]map[string]string
}

// SplitNUL splits /proc/<pid>/cmdline.
func SplitNUL(b []byte) []string {
	b = bytes.TrimRight(b, "\x00")
	if len(b) == 0 {
		return nil
	}
	return strings.Split(string(b), "\x00")
}

// SplitShell splits the shell-quoted output of `qm showcmd [--pretty]`
// (single and double quotes, backslash-newline continuations).
func SplitShell(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && i+1 < len(s) && s[i+1] == '\n':
			i++
		case c == '\\' && i+1 < len(s):
			cur.WriteByte(s[i+1])
			inWord = true
			i++
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, fmt.Errorf("%w: unterminated single quote", ErrParse)
			}
			cur.WriteString(s[i+1 : i+1+j])
			inWord = true
			i += j + 1
		case c == '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) {
					j++
					cur.WriteByte(s[j])
					continue
				}
				cur.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("%w: unterminated double quote", ErrParse)
			}
			inWord = true
			i = j
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				out = append(out, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		out = append(out, cur.String())
	}
	return out, nil
}

// SplitQemuOpts splits a QEMU "a=b,c=d" option string (",," escapes a comma).
// A first element without "=" is returned under implied.
func SplitQemuOpts(s, implied string) (map[string]string, []string) {
	m := map[string]string{}
	var order []string
	var parts []string
	var cur strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == ',' {
			if i+1 < len(s) && s[i+1] == ',' {
				cur.WriteByte(',')
				i++
				continue
			}
			parts = append(parts, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteByte(s[i])
	}
	parts = append(parts, cur.String())
	for i, p := range parts {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			if i == 0 && implied != "" {
				k, v = implied, p
			} else {
				k, v = p, "on"
			}
		}
		m[k] = v
		order = append(order, k)
	}
	return m, order
}

// ParseCmdline reads the disks out of a QEMU argv of either generation.
func ParseCmdline(argv []string) (*Cmdline, error) {
	c := &Cmdline{Argv: argv, Disks: map[string]*DiskSettings{}, Devices: map[string]map[string]string{}}
	groups := map[string]Limits{}                 // throttle-group id -> limits
	controllers := map[string]map[string]string{} // controller id -> opts
	type devLine struct {
		opts map[string]string
	}
	var devices []devLine
	chardevs := map[string]string{}
	qmpChardev := ""
	for i := 0; i < len(argv); i++ {
		opt := argv[i]
		if !strings.HasPrefix(opt, "-") || i+1 >= len(argv) {
			continue
		}
		val := argv[i+1]
		switch strings.TrimPrefix(opt, "-") {
		case "object":
			if strings.HasPrefix(strings.TrimSpace(val), "{") {
				if !gjson.Valid(val) {
					return nil, fmt.Errorf("%w: -object %.60q is not valid JSON", ErrParse, val)
				}
				o := gjson.Parse(val)
				if o.Get("qom-type").String() == "throttle-group" {
					groups[o.Get("id").String()] = limitsFromJSON(o.Get("limits"))
				}
			} else {
				m, _ := SplitQemuOpts(val, "qom-type")
				if m["qom-type"] == "throttle-group" {
					l := Limits{}
					for k, v := range m {
						if n, err := strconv.ParseInt(v, 10, 64); err == nil && strings.HasPrefix(k, "x-") {
							l[strings.TrimPrefix(k, "x-")] = n
						} else if err == nil && k != "id" {
							l[strings.TrimPrefix(k, "limits.")] = n
						}
					}
					groups[m["id"]] = l
				}
			}
			i++
		case "blockdev":
			d, err := parseBlockdev(val)
			if err != nil {
				return nil, err
			}
			if d != nil {
				c.Disks[d.ID] = d
				c.Blockdev = true
			}
			i++
		case "drive":
			if d := parseDrive(val); d != nil {
				c.Disks[d.ID] = d
			}
			i++
		case "device":
			m, _ := SplitQemuOpts(val, "driver")
			if id := m["id"]; id != "" {
				c.Devices[id] = m
			}
			switch m["driver"] {
			case "virtio-scsi-pci", "lsi", "lsi53c810", "megasas", "megasas-gen2", "pvscsi", "ahci":
				controllers[m["id"]] = m
			}
			devices = append(devices, devLine{m})
			i++
		case "machine":
			m, _ := SplitQemuOpts(val, "type")
			c.Machine = m["type"]
			i++
		case "pidfile":
			c.Pidfile = val
			i++
		case "chardev":
			m, _ := SplitQemuOpts(val, "backend")
			chardevs[m["id"]] = m["path"]
			i++
		case "mon":
			m, _ := SplitQemuOpts(val, "chardev")
			if m["mode"] == "control" && qmpChardev == "" {
				qmpChardev = m["chardev"]
			}
			i++
		case "qmp":
			if c.QMPSocket == "" {
				p := strings.TrimPrefix(val, "unix:")
				p, _, _ = strings.Cut(p, ",")
				c.QMPSocket = p
			}
			i++
		}
	}
	if qmpChardev != "" && chardevs[qmpChardev] != "" {
		c.QMPSocket = chardevs[qmpChardev]
	}
	for _, dl := range devices {
		m := dl.opts
		drive := m["drive"]
		id := m["id"]
		if id == "" {
			continue
		}
		d, ok := c.Disks[id]
		if !ok {
			if !strings.HasPrefix(drive, "drive-") {
				continue
			}
			// a device whose drive we have under another id (should not happen)
			if d, ok = c.Disks[strings.TrimPrefix(drive, "drive-")]; !ok {
				continue
			}
		}
		d.Device = m["driver"]
		if d.Device == "ide-cd" || d.Device == "scsi-cd" {
			// A CD device lets the guest read only, whatever its drive
			// allows (a template's SATA disk under -drive is one).
			d.ReadOnly = true
		}
		if wc, ok := m["write-cache"]; ok && wc != "auto" {
			d.WriteCache = wc
		}
		bus := m["bus"]
		ctrlID, _, _ := strings.Cut(bus, ".")
		switch {
		case strings.HasPrefix(d.Device, "virtio-blk"):
			d.Controller = "virtio-blk"
			d.IOThread = m["iothread"] != ""
			d.Queues, _ = strconv.Atoi(m["num-queues"])
		case strings.HasPrefix(d.Device, "scsi-"):
			ctrl := controllers[ctrlID]
			d.Controller = "lsi"
			if ctrl != nil {
				d.Controller = ctrl["driver"]
				if ctrl["driver"] == "virtio-scsi-pci" {
					if strings.HasPrefix(ctrlID, "virtioscsi") {
						d.Controller = "virtio-scsi-single"
					}
					d.IOThread = ctrl["iothread"] != ""
					d.Queues, _ = strconv.Atoi(ctrl["num_queues"])
				}
			}
		case strings.HasPrefix(d.Device, "ide-"):
			if strings.HasPrefix(bus, "ahci") {
				d.Controller = "sata"
			} else {
				d.Controller = "ide"
			}
		}
	}
	for id, d := range c.Disks {
		if id == "efidisk0" && d.Blockdev {
			d.Controller = "efi"
		}
		if d.Blockdev {
			if l, ok := groups["throttle-"+d.NodeTop]; ok {
				d.Limits = l
			} else if l, ok := groups["throttle-drive-"+id]; ok {
				d.Limits = l
			}
		}
		if d.CDROM {
			d.Discard, d.DetectZeroes = "", ""
		}
	}
	// Drop pflash0 (firmware code) and anything that is not a config disk.
	for id := range c.Disks {
		if !IsDiskKey(id) {
			delete(c.Disks, id)
		}
	}
	return c, nil
}

// DiskIDs returns the disk ids sorted in Proxmox order.
func (c *Cmdline) DiskIDs() []string {
	m := map[string]string{}
	for id := range c.Disks {
		m[id] = ""
	}
	return DiskKeys(m)
}

func limitsFromJSON(r gjson.Result) Limits {
	l := Limits{}
	r.ForEach(func(k, v gjson.Result) bool {
		if n := v.Int(); n != 0 {
			l[k.String()] = n
		}
		return true
	})
	return l
}

func parseBlockdev(val string) (*DiskSettings, error) {
	if !strings.HasPrefix(strings.TrimSpace(val), "{") {
		// key=value -blockdev (not generated by Proxmox for disks): ignore
		return nil, nil
	}
	if !gjson.Valid(val) {
		return nil, fmt.Errorf("%w: -blockdev %.60q is not valid JSON", ErrParse, val)
	}
	top := gjson.Parse(val)
	name := top.Get("node-name").String()
	if !strings.HasPrefix(name, "drive-") {
		return nil, nil
	}
	id := strings.TrimPrefix(name, "drive-")
	d := &DiskSettings{ID: id, Blockdev: true, NodeTop: name, WriteCache: "on", AIO: "", Discard: "ignore", DetectZeroes: "off"}
	// Walk down: throttle -> format -> protocol (file/host_device/rbd/...).
	node := top
	var chain []gjson.Result
	for node.Exists() && node.IsObject() {
		chain = append(chain, node)
		if node.Get("driver").String() == "blkdebug" {
			// QEMU's error-injection filter (tests of a failing storage)
			// names its child "image".
			chain = chain[:len(chain)-1]
			node = node.Get("image")
			continue
		}
		node = node.Get("file")
	}
	protocol := chain[len(chain)-1]
	format := protocol
	for _, n := range chain {
		drv := n.Get("driver").String()
		if drv != "throttle" && drv != "zeroinit" && drv != "alloc-track" {
			format = n
			break
		}
	}
	d.Driver = protocol.Get("driver").String()
	d.Format = format.Get("driver").String()
	d.NodeFormat = format.Get("node-name").String()
	d.NodeFile = protocol.Get("node-name").String()
	if format.Get("node-name").String() == protocol.Get("node-name").String() {
		d.Format = "raw" // nbd: no format node
	}
	switch d.Driver {
	case "rbd":
		d.Path = protocol.Get("pool").String() + "/" + protocol.Get("image").String()
	case "nbd":
		d.Path = protocol.Get("server.path").String()
	default:
		d.Path = protocol.Get("filename").String()
	}
	d.CacheDirect = protocol.Get("cache.direct").Bool()
	d.CacheNoFlush = protocol.Get("cache.no-flush").Bool()
	if a := protocol.Get("aio"); a.Exists() {
		d.AIO = a.String()
	} else if d.Driver == "file" || d.Driver == "host_device" || d.Driver == "host_cdrom" {
		d.AIO = "threads" // QEMU's default
	}
	if v := top.Get("discard"); v.Exists() {
		d.Discard = v.String()
	} else {
		d.CDROM = true // qemu-server sets discard on every node except CD-ROMs
	}
	if v := top.Get("detect-zeroes"); v.Exists() {
		d.DetectZeroes = v.String()
	}
	if d.Discard == "on" {
		d.Discard = "unmap"
	} else if d.Discard == "off" {
		d.Discard = "ignore"
	}
	d.ReadOnly = top.Get("read-only").Bool()
	if d.Driver == "host_cdrom" {
		d.CDROM = true
	}
	return d, nil
}

func parseDrive(val string) *DiskSettings {
	m, _ := SplitQemuOpts(val, "file")
	id := strings.TrimPrefix(m["id"], "drive-")
	if id == "" || m["if"] == "pflash" && id != "efidisk0" {
		// The OVMF code on pflash unit 0 has no id: firmware, no disk.
		// The EFI vars (unit 1, id drive-efidisk0) are the VM's efidisk0,
		// with QEMU's -drive defaults where OVMF.pm sets nothing.
		return nil
	}
	d := &DiskSettings{ID: id, NodeTop: m["id"], Path: m["file"], Format: m["format"], WriteCache: "on", Discard: "ignore", DetectZeroes: "off"}
	d.Driver = "file"
	if strings.HasPrefix(d.Path, "/dev/") {
		d.Driver = "host_device"
	} else if strings.HasPrefix(d.Path, "rbd:") {
		d.Driver = "rbd"
	} else if strings.HasPrefix(d.Path, "iscsi:") {
		d.Driver = "iscsi"
	} else if strings.HasPrefix(d.Path, "nbd:") {
		d.Driver = "nbd"
	}
	if d.Format == "" {
		d.Format = "raw"
	}
	cache := m["cache"]
	if cache == "" {
		cache = "writeback" // QEMU's default for -drive
	}
	d.CacheDirect, d.CacheNoFlush, d.WriteCache = CacheFlags(cache)
	if cache == "off" {
		d.CacheDirect, d.WriteCache = true, "on"
	}
	if v, ok := m["cache.direct"]; ok {
		d.CacheDirect, _ = ParseBool(v)
	}
	if v, ok := m["cache.no-flush"]; ok {
		d.CacheNoFlush, _ = ParseBool(v)
	}
	if v, ok := m["cache.writeback"]; ok {
		if b, _ := ParseBool(v); b {
			d.WriteCache = "on"
		} else {
			d.WriteCache = "off"
		}
	}
	d.AIO = m["aio"]
	if d.AIO == "" {
		d.AIO = "threads"
	}
	if v := m["discard"]; v == "on" || v == "unmap" {
		d.Discard = "unmap"
	}
	if v := m["detect-zeroes"]; v != "" {
		d.DetectZeroes = v
	}
	if m["media"] == "cdrom" {
		// QEMU opens a -drive media=cdrom read-only (query-block "ro": true
		// on 7.2.22 and 11.1.3, measured with no readonly= given).
		d.CDROM, d.ReadOnly = true, true
	}
	if v, ok := m["readonly"]; ok {
		d.ReadOnly, _ = ParseBool(v)
	}
	d.Limits = Limits{}
	for k, v := range m {
		if strings.HasPrefix(k, "throttling.") {
			if n, err := strconv.ParseInt(v, 10, 64); err == nil && n != 0 {
				d.Limits[strings.TrimPrefix(k, "throttling.")] = n
			}
		}
	}
	return d
}

// SortedKeys is a small helper for stable output.
func SortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
