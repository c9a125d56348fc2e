package qemuserver

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Drive is one parsed disk line (`scsi1: local-lvm:vm-370-disk-1,cache=writeback`).
type Drive struct {
	Key    string // config key: scsi1, virtio0, sata2, efidisk0
	Bus    string // ide, sata, scsi, virtio, efidisk, tpmstate
	Index  int
	Volume string            // volume id, absolute path, "none" or "cdrom"
	Opts   map[string]string // normalised options (aliases resolved, booleans "1"/"0")
	Order  []string          // option keys in the order they appeared, for faithful rewriting
}

// Option kinds for validation.
const (
	kString = iota
	kBool
	kInt
	kNumber
)

type optSpec struct {
	kind   int
	enum   []string
	buses  string // "" = all disk buses, else space separated list
	min    float64
	hasMin bool
}

var driveOpts = map[string]optSpec{
	"media":         {kind: kString, enum: []string{"cdrom", "disk"}},
	"snapshot":      {kind: kBool},
	"cache":         {kind: kString, enum: []string{"none", "writethrough", "writeback", "unsafe", "directsync"}},
	"format":        {kind: kString, enum: []string{"raw", "qcow", "qed", "qcow2", "vmdk", "cloop"}},
	"size":          {kind: kString},
	"backup":        {kind: kBool},
	"replicate":     {kind: kBool},
	"rerror":        {kind: kString, enum: []string{"ignore", "report", "stop"}},
	"werror":        {kind: kString, enum: []string{"enospc", "ignore", "report", "stop"}},
	"aio":           {kind: kString, enum: []string{"native", "threads", "io_uring"}},
	"discard":       {kind: kString, enum: []string{"ignore", "on"}},
	"detect_zeroes": {kind: kBool},
	"serial":        {kind: kString},
	"shared":        {kind: kBool},
	"iothread":      {kind: kBool, buses: "scsi virtio"},
	"product":       {kind: kString, buses: "scsi"},
	"vendor":        {kind: kString, buses: "scsi"},
	"model":         {kind: kString, buses: "ide sata"},
	"queues":        {kind: kInt, buses: "scsi", min: 2, hasMin: true},
	"ro":            {kind: kBool, buses: "scsi virtio"},
	"scsiblock":     {kind: kBool, buses: "scsi"},
	"ssd":           {kind: kBool, buses: "ide sata scsi"},
	"wwn":           {kind: kString, buses: "ide sata scsi"},
	// EFI and TPM disks.
	"efitype":           {kind: kString, enum: []string{"2m", "4m"}, buses: "efidisk"},
	"pre-enrolled-keys": {kind: kBool, buses: "efidisk"},
	"ms-cert":           {kind: kString, buses: "efidisk"},
	"version":           {kind: kString, buses: "tpmstate"},
	"import-from":       {kind: kString},
}

// Aliases Proxmox accepts for drive options.
var driveAliases = map[string]string{
	"volume":         "file",
	"bps_rd_length":  "bps_rd_max_length",
	"bps_wr_length":  "bps_wr_max_length",
	"iops_rd_length": "iops_rd_max_length",
	"iops_wr_length": "iops_wr_max_length",
}

// Dropped properties Proxmox silently skips.
var droppedOpts = map[string]bool{"cyls": true, "heads": true, "secs": true, "trans": true}

func init() {
	for _, k := range []string{"bps", "bps_rd", "bps_wr", "iops", "iops_rd", "iops_wr", "iops_max", "iops_rd_max", "iops_wr_max"} {
		driveOpts[k] = optSpec{kind: kInt}
	}
	for _, k := range []string{"mbps", "mbps_rd", "mbps_wr", "mbps_max", "mbps_rd_max", "mbps_wr_max"} {
		driveOpts[k] = optSpec{kind: kNumber}
	}
	for _, k := range []string{"bps_max_length", "bps_rd_max_length", "bps_wr_max_length", "iops_max_length", "iops_rd_max_length", "iops_wr_max_length"} {
		driveOpts[k] = optSpec{kind: kInt, min: 1, hasMin: true}
	}
}

// ParseBool accepts Proxmox's boolean spellings.
func ParseBool(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "1", "on", "yes", "true":
		return true, true
	case "0", "off", "no", "false":
		return false, true
	}
	return false, false
}

// ParseDrive parses a disk property string for config key key. It rejects what
// Proxmox's schema rejects (unknown or duplicate keys, bad enum values, options
// the bus does not have); limit combinations are checked by LimitProblems.
func ParseDrive(key, value string) (*Drive, error) {
	bus, idx, ok := SplitDiskKey(key)
	if !ok {
		return nil, fmt.Errorf("%w: %s: not a disk key", ErrParse, key)
	}
	d := &Drive{Key: key, Bus: bus, Index: idx, Opts: map[string]string{}}
	for i, part := range splitProps(value) {
		k, v, hasEq := strings.Cut(part, "=")
		if !hasEq {
			if i == 0 {
				d.Volume = part
				continue
			}
			return nil, fmt.Errorf("%w: %s: value without key %q", ErrParse, key, part)
		}
		k = strings.TrimSpace(k)
		if a, ok := driveAliases[k]; ok {
			k = a
		}
		if droppedOpts[k] {
			continue
		}
		if k == "file" {
			if d.Volume != "" {
				return nil, fmt.Errorf("%w: %s: duplicate key %q", ErrParse, key, "file")
			}
			d.Volume = v
			continue
		}
		spec, known := driveOpts[k]
		if !known {
			return nil, fmt.Errorf("%w: %s: unknown option %q", ErrParse, key, k)
		}
		if spec.buses != "" && !strings.Contains(" "+spec.buses+" ", " "+bus+" ") {
			return nil, fmt.Errorf("%w: %s: option %q is not valid for %s disks", ErrParse, key, k, bus)
		}
		if _, dup := d.Opts[k]; dup {
			return nil, fmt.Errorf("%w: %s: duplicate key %q", ErrParse, key, k)
		}
		nv, err := checkOpt(k, v, spec)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrParse, key, err)
		}
		d.Opts[k] = nv
		d.Order = append(d.Order, k)
	}
	if d.Volume == "" {
		return nil, fmt.Errorf("%w: %s: no volume", ErrParse, key)
	}
	// bps* are stored as mbps* (Proxmox converts them at parse time).
	for _, o := range []string{"bps", "bps_rd", "bps_wr"} {
		if v, ok := d.Opts[o]; ok {
			if _, both := d.Opts["m"+o]; both {
				return nil, fmt.Errorf("%w: %s: both %s and m%s specified", ErrParse, key, o, o)
			}
			n, _ := strconv.ParseFloat(v, 64)
			d.Opts["m"+o] = strconv.FormatFloat(n/(1024*1024), 'f', 3, 64)
			delete(d.Opts, o)
			for i, k := range d.Order {
				if k == o {
					d.Order[i] = "m" + o
				}
			}
		}
	}
	if d.IsCDROM() && d.Bus == "virtio" {
		return nil, fmt.Errorf("%w: %s: virtio disks cannot be CD-ROMs", ErrParse, key)
	}
	return d, nil
}

func checkOpt(k, v string, spec optSpec) (string, error) {
	switch spec.kind {
	case kBool:
		b, ok := ParseBool(v)
		if !ok {
			return "", fmt.Errorf("option %q: %q is not a boolean", k, v)
		}
		if b {
			return "1", nil
		}
		return "0", nil
	case kInt:
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return "", fmt.Errorf("option %q: %q is not an integer", k, v)
		}
		if n < 0 || (spec.hasMin && float64(n) < spec.min) {
			return "", fmt.Errorf("option %q: %d is out of range", k, n)
		}
		return v, nil
	case kNumber:
		n, err := strconv.ParseFloat(v, 64)
		if err != nil || n < 0 {
			return "", fmt.Errorf("option %q: %q is not a non-negative number", k, v)
		}
		return v, nil
	}
	if len(spec.enum) > 0 {
		for _, e := range spec.enum {
			if v == e {
				return v, nil
			}
		}
		return "", fmt.Errorf("option %q: %q is not one of %s", k, v, strings.Join(spec.enum, ", "))
	}
	return v, nil
}

// splitProps splits a property string on commas.
func splitProps(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// Bool returns a boolean option (false when unset).
func (d *Drive) Bool(k string) bool { return d.Opts[k] == "1" }

// IsCDROM reports media=cdrom (or the special volume "cdrom").
func (d *Drive) IsCDROM() bool { return d.Opts["media"] == "cdrom" || d.Volume == "cdrom" }

// IsNone reports an empty CD-ROM drive.
func (d *Drive) IsNone() bool { return d.Volume == "none" }

// StorageID returns the storage of a volume id, or "" for paths and none/cdrom.
func (d *Drive) StorageID() string {
	if strings.HasPrefix(d.Volume, "/") || d.Volume == "none" || d.Volume == "cdrom" {
		return ""
	}
	if s, _, ok := strings.Cut(d.Volume, ":"); ok {
		return s
	}
	return ""
}

// VolName returns the part after "storage:".
func (d *Drive) VolName() string {
	_, v, _ := strings.Cut(d.Volume, ":")
	return v
}

// String prints the drive line back, keeping the original option order, with
// options added since parsing appended in sorted order.
func (d *Drive) String() string {
	parts := []string{d.Volume}
	seen := map[string]bool{}
	for _, k := range d.Order {
		if v, ok := d.Opts[k]; ok && !seen[k] {
			parts = append(parts, k+"="+v)
			seen[k] = true
		}
	}
	var rest []string
	for k := range d.Opts {
		if !seen[k] {
			rest = append(rest, k)
		}
	}
	sort.Strings(rest)
	for _, k := range rest {
		parts = append(parts, k+"="+d.Opts[k])
	}
	return strings.Join(parts, ",")
}

// Clone returns a deep copy.
func (d *Drive) Clone() *Drive {
	c := *d
	c.Opts = make(map[string]string, len(d.Opts))
	for k, v := range d.Opts {
		c.Opts[k] = v
	}
	c.Order = append([]string(nil), d.Order...)
	return &c
}

// Kind is what a drive slot is to the guest and to QEMU; it decides which
// of the tool's views and rules apply to it (one definition for every
// command).
type Kind int

// Drive kinds.
const (
	// KindDisk is a guest block device backed by a volume or a host path.
	KindDisk Kind = iota
	// KindCDROM is a CD-ROM drive with a medium: an ISO image, the host's
	// drive, or a cloud-init image. Read-only to the guest.
	KindCDROM
	// KindEmptyCDROM is a CD-ROM drive without a medium (volume "none"):
	// QEMU attaches an empty drive, with no block node below it.
	KindEmptyCDROM
	// KindEFIVars is efidisk0: OVMF's variable store, attached as pflash,
	// never a guest block device.
	KindEFIVars
	// KindTPMState is tpmstate0: swtpm's state volume. QEMU never opens it;
	// swtpm does.
	KindTPMState
)

var kindNames = [...]string{"disk", "cdrom", "empty-cdrom", "efivars", "tpmstate"}

func (k Kind) String() string { return kindNames[k] }

// Kind classifies the drive.
func (d *Drive) Kind() Kind {
	switch {
	case d.Bus == "efidisk":
		return KindEFIVars
	case d.Bus == "tpmstate":
		return KindTPMState
	case d.IsCDROM() && d.IsNone():
		return KindEmptyCDROM
	case d.IsCDROM():
		return KindCDROM
	}
	return KindDisk
}

var cloudInitRe = regexp.MustCompile(`[:/](?:vm-\d+-)?cloudinit(?:\.(?:raw|qcow|qcow2|qed|vmdk|cloop))?$`)

// IsCloudInit reports Proxmox's cloud-init drive (Drive.pm
// drive_is_cloudinit).
func (d *Drive) IsCloudInit() bool { return cloudInitRe.MatchString(d.Volume) }
