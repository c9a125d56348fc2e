package qemuserver

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
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

// DriveError is a drive line Proxmox refuses: its config parser drops the
// line ("unable to parse value of 'efidisk0'") or parse_drive ignores the
// drive, so the VM starts without it. Option names the option at fault
// ("" when the line as a whole is).
type DriveError struct {
	Key    string
	Option string
	Value  string // the value refused, "" when the option itself is
	Reason string
}

func (e *DriveError) Error() string {
	key, opt := e.Key, e.Option
	if len(key) > 20 || strings.ContainsFunc(key, notPrintable) {
		key = clip(key)
	}
	if len(opt) > 40 || strings.ContainsFunc(opt, notPrintable) {
		opt = clip(opt)
	}
	switch {
	case opt == "":
		return key + ": " + e.Reason
	case e.Value == "":
		return key + ": " + opt + " " + e.Reason
	}
	return key + ": " + opt + "=" + clip(e.Value) + ": " + e.Reason
}

func notPrintable(r rune) bool { return r < 0x20 || r == 0x7f || r == utf8.RuneError }

// Unwrap makes every DriveError an ErrParse (bad input, exit 2).
func (e *DriveError) Unwrap() error { return ErrParse }

// droppedOpts are Drive.pm's $DROPPED_PROPERTIES: parse_drive skips them,
// but they are no longer in the drive schema, so parse_vm_config's check
// drops the whole line ("cyls: property is not defined in schema", asked
// of Proxmox: TestParseAsProxmox) and qm set refuses them: the disk is gone.
var droppedOpts = map[string]bool{"cyls": true, "heads": true, "secs": true, "trans": true}

// ParseBool accepts Proxmox's boolean spellings (PVE::JSONSchema
// parse_boolean).
func ParseBool(v string) (bool, bool) {
	switch strings.ToLower(v) {
	case "1", "on", "yes", "true":
		return true, true
	case "0", "off", "no", "false":
		return false, true
	}
	return false, false
}

// ParseDrive parses the value of a drive key (ide0-3, sata0-5, scsi0-30,
// virtio0-15, efidisk0, tpmstate0, unused0-255) exactly as Proxmox does,
// and refuses what Proxmox refuses, naming the option:
//
//   - the key's own format (parse_property_string): an option the kind
//     lacks (discard on efidisk0), a duplicate, a value its type, format,
//     pattern, length, minimum or enumeration refuses, no volume;
//   - then parse_drive's own rules: bps with mbps, a burst without its
//     rate (Perl truth: "0" is unset, "0.0" is set), mbps with mbps_rd or
//     mbps_wr (iops alike), a CD-ROM with snapshot or format, a VirtIO
//     CD-ROM.
//
// Booleans are stored as "1"/"0" and bps* as mbps*, as Proxmox stores
// them. Proxmox keeps parse_drive's conversion bug: any bps value becomes
// mbps "0.000" (it converts defined($bps), which is 1), so the limit is
// lost; Limits then says so (none).
func ParseDrive(key, value string) (*Drive, error) {
	d, err := ParseDriveSchema(key, value)
	if err != nil {
		return nil, err
	}
	if err := d.checkParseDrive(); err != nil {
		return nil, err
	}
	return d, nil
}

// ParseDriveSchema is the first half of ParseDrive alone: the line against
// its key's format, without parse_drive's rules on combinations (limits,
// CD-ROM options). It is for fixes: a line whose only fault is a limit
// combination is read here, then repaired.
func ParseDriveSchema(key, value string) (*Drive, error) {
	bus, idx, ok := splitDriveKey(key)
	if !ok {
		return nil, &DriveError{Key: key, Reason: "not a drive key (ide0-3, sata0-5, scsi0-30, virtio0-15, efidisk0, tpmstate0, unused0-255)"}
	}
	d, err := parsePropertyString(key, bus, value)
	if err != nil {
		return nil, err
	}
	d.Index = idx
	return d, nil
}

// parsePropertyString is PVE::JSONSchema::parse_property_string followed
// by check_object, for the format of bus.
func parsePropertyString(key, bus, value string) (*Drive, error) {
	fail := func(opt, reason string) error { return &DriveError{Key: key, Option: opt, Reason: reason} }
	refuse := func(opt, val, reason string) error {
		return &DriveError{Key: key, Option: opt, Value: val, Reason: reason}
	}
	if strings.ContainsAny(value, "\n\r") {
		return nil, fail("", "contains a line feed")
	}
	f := driveFormats[bus]
	d := &Drive{Key: key, Bus: bus, Opts: map[string]string{}}
	fileSet, bare := false, false
	for _, part := range strings.Split(value, ",") {
		if strings.Trim(part, " \t\n\r\f\v") == "" {
			continue
		}
		k, v, hasEq := strings.Cut(part, "=")
		switch {
		case hasEq && k != "" && v != "":
			if droppedOpts[k] {
				return nil, fail(k, "is no longer an option of the drive schema (Proxmox VE 9 dropped it: the whole line is refused)")
			}
			if k == "file" && fileSet || d.Opts[k] != "" {
				return nil, fail(k, "is given twice")
			}
			if a, ok := f.aliases[k]; ok {
				if a == "file" && fileSet || a != "file" && d.Opts[a] != "" {
					return nil, fail(k, "is given twice (as "+a+")")
				}
				k = a
			}
			spec, known := f.props[k]
			if !known {
				return nil, fail(k, "is not an option of "+kindOf(bus))
			}
			if spec.typ == typeBoolean {
				if b, ok := ParseBool(v); ok {
					v = map[bool]string{true: "1", false: "0"}[b]
				}
			}
			if k == "file" {
				d.Volume, fileSet = v, true
				continue
			}
			d.Opts[k] = v
			d.Order = append(d.Order, k)
		case !hasEq:
			// A value without a key is the volume, wherever it stands;
			// a second one, or one after file= set it, is a duplicate.
			if bare || perlTrue(d.Volume) {
				return nil, fail("file", "is given twice")
			}
			bare, fileSet, d.Volume = true, true, part
		default:
			return nil, fail("", fmt.Sprintf("%s has no key or no value", clip(part)))
		}
	}
	if !fileSet {
		return nil, fail("", "has no volume")
	}
	if why := f.props["file"].checkValue(d.Volume); why != "" {
		return nil, refuse("file", d.Volume, why)
	}
	for _, k := range d.Order {
		if why := f.props[k].checkValue(d.Opts[k]); why != "" {
			return nil, refuse(k, d.Opts[k], why)
		}
	}
	return d, nil
}

// checkParseDrive is the rest of Drive.pm parse_drive, after the schema.
func (d *Drive) checkParseDrive() error {
	fail := func(opt, reason string) error { return &DriveError{Key: d.Key, Option: opt, Reason: reason} }
	for _, o := range []string{"bps", "bps_rd", "bps_wr"} {
		if _, ok := d.Opts[o]; !ok {
			continue
		}
		if _, both := d.Opts["m"+o]; both {
			return fail(o, "cannot be combined with m"+o)
		}
		delete(d.Opts, o)
		d.Opts["m"+o] = "0.000" // sprintf("%.3f", defined(...) / (1024 * 1024))
		for i, k := range d.Order {
			if k == o {
				d.Order[i] = "m" + o
			}
		}
	}
	// Drive.pm also lists miops_max => miops (and _rd, _wr): keys that do
	// not exist, so iops_max without iops passes here (QEMU refuses it at
	// start; LimitProblems says so).
	for _, r := range [][2]string{
		{"mbps_max", "mbps"}, {"mbps_rd_max", "mbps_rd"}, {"mbps_wr_max", "mbps_wr"},
		{"bps_max_length", "mbps_max"}, {"bps_rd_max_length", "mbps_rd_max"}, {"bps_wr_max_length", "mbps_wr_max"},
		{"iops_max_length", "iops_max"}, {"iops_rd_max_length", "iops_rd_max"}, {"iops_wr_max_length", "iops_wr_max"},
	} {
		if perlTrue(d.Opts[r[0]]) && !perlTrue(d.Opts[r[1]]) {
			return fail(r[0], "requires "+r[1])
		}
	}
	for _, p := range [][2]string{{"mbps_rd", "mbps"}, {"mbps_wr", "mbps"}, {"iops_rd", "iops"}, {"iops_wr", "iops"}} {
		if perlTrue(d.Opts[p[0]]) && perlTrue(d.Opts[p[1]]) {
			return fail(p[1], "cannot be combined with "+p[0])
		}
	}
	if d.Opts["media"] == "cdrom" {
		for _, o := range []string{"snapshot", "format"} {
			if perlTrue(d.Opts[o]) {
				return fail(o, "is not allowed on a CD-ROM (media=cdrom)")
			}
		}
		if d.Bus == "virtio" {
			return &DriveError{Key: d.Key, Option: "media", Value: "cdrom", Reason: "VirtIO Block drives cannot be CD-ROMs"}
		}
	}
	return nil
}

// kindOf names a bus's format for messages.
func kindOf(bus string) string {
	switch bus {
	case "efidisk":
		return "EFI disks (OVMF's variable store, attached as pflash: " + strings.Join(Options(bus), ", ") + ")"
	case "tpmstate":
		return "TPM state volumes (swtpm's: " + strings.Join(Options(bus), ", ") + ")"
	case "unused":
		return "unused volumes (a volume id only)"
	case "virtio":
		return "VirtIO Block disks"
	}
	return strings.ToUpper(bus) + " disks"
}

// clip quotes at most 40 bytes of input for an error line.
func clip(s string) string {
	const max = 40
	if len(s) <= max {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:max]) + fmt.Sprintf("... (%d bytes)", len(s))
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
//
// A volume with "=" in it is printed as file=VOLUME: as a bare value it
// would read as an option.
func (d *Drive) String() string {
	parts := []string{d.Volume}
	if strings.Contains(d.Volume, "=") {
		parts[0] = "file=" + d.Volume
	}
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
	// KindUnused is unusedN: a volume the VM owns (a detached disk, a
	// leftover of a move) but does not attach.
	KindUnused
)

var kindNames = [...]string{"disk", "cdrom", "empty-cdrom", "efivars", "tpmstate", "unused"}

func (k Kind) String() string { return kindNames[k] }

// GuestDisk reports the kinds the guest sees as a drive: disks and CD-ROM
// drives (empty or not). EFI vars are firmware's, TPM state is swtpm's, an
// unused volume is attached to nothing.
func (k Kind) GuestDisk() bool { return k <= KindEmptyCDROM }

// BlockNode reports the kinds QEMU opens as a block node (what query-block,
// blockstats and throttle groups can show): disks, CD-ROMs with a medium
// and the EFI vars disk.
func (k Kind) BlockNode() bool { return k == KindDisk || k == KindCDROM || k == KindEFIVars }

// Describe says what a drive of this kind is, for a note that explains why
// a command leaves it out.
func (k Kind) Describe() string {
	return [...]string{
		"a disk",
		"a CD-ROM drive with a medium (read-only to the guest)",
		"an empty CD-ROM drive (no medium: QEMU opens nothing)",
		"the EFI vars disk (OVMF's variable store, attached as pflash: firmware's, not a guest disk)",
		"the TPM state volume (swtpm keeps the vTPM's state there; QEMU never opens it), not a guest disk",
		"an unused volume (the VM owns it but does not attach it)",
	}[k]
}

// NotListed is the note a command prints for a drive it leaves out on
// purpose: "tpmstate0 is the TPM state volume (...): not listed, on purpose".
func (k Kind) NotListed(key string) string {
	return key + " is " + k.Describe() + ": not listed, on purpose"
}

// Kind classifies the drive.
func (d *Drive) Kind() Kind {
	switch {
	case d.Bus == "efidisk":
		return KindEFIVars
	case d.Bus == "tpmstate":
		return KindTPMState
	case d.Bus == "unused":
		return KindUnused
	case d.IsCDROM() && d.IsNone():
		return KindEmptyCDROM
	case d.IsCDROM():
		return KindCDROM
	}
	return KindDisk
}

var cloudInitRe = regexp.MustCompile(`[:/](?:vm-\d+-)?cloudinit(?:\.(?:raw|qcow|qcow2|qed|vmdk|cloop))?$`)

// IsCloudInit reports Proxmox's cloud-init drive (Drive.pm
// drive_is_cloudinit): a CD-ROM qemu-server writes at every start.
func (d *Drive) IsCloudInit() bool { return cloudInitRe.MatchString(d.Volume) }
