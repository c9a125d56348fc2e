package qemuserver

import (
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// The property sets below are qemu-server's drive formats (Drive.pm,
// qemu-server 9.2): $ide_fmt, $sata_fmt, $scsi_fmt, $virtio_fmt,
// $efidisk_fmt, $tpmstate_fmt and $unused_fmt. A config line is checked
// against its own key's format (parse_vm_config -> check_type ->
// parse_property_string), never against the union of all of them
// ($alldrive_fmt is only used to print a drive back), so a key that
// another kind has is refused here.

type propType uint8

const (
	typeString propType = iota
	typeBoolean
	typeInteger
	typeNumber
)

// propSpec is one property of a drive format, as PVE::JSONSchema checks
// it (check_prop): type, then format, pattern, maxLength, minimum, enum.
type propSpec struct {
	typ    propType
	enum   []string
	format *regexp.Regexp // a registered format or a pattern, anchored
	what   string         // what format means, for the error
	maxLen int            // 0: no limit
	min    *float64
	// volume is the file property's format: pve-volume-id-or-qm-path for
	// disks, pve-volume-id for unused volumes.
	volume volumeFormat
}

type volumeFormat uint8

const (
	notVolume volumeFormat = iota
	volumeOrQMPath
	volumeIDOnly
)

// driveFormat is one kind's property set plus its aliases.
type driveFormat struct {
	props   map[string]*propSpec
	aliases map[string]string
}

var (
	// pve-volume-id (PVE::Storage::Plugin::parse_volume_id).
	volumeIDRe = regexp.MustCompile(`(?i)^([a-z][a-z0-9\-_.]*[a-z0-9]):(.+)$`)
	// disk-size (PVE::JSONSchema::parse_size).
	diskSizeRe = regexp.MustCompile(`^(\d+(\.\d+)?)([KMGT](?:iB)?)?$`)
	// urlencoded (pve_verify_urlencoded).
	urlencodedRe = regexp.MustCompile(`^[-%a-zA-Z0-9_.!~*'()]*$`)
	// Perl's \s is space, \t, \n, \r, \f and \v; RE2's lacks \v.
	productRe = regexp.MustCompile(`^[A-Za-z0-9\-_ \t\n\r\f\v]{0,16}$`)
	vendorRe  = regexp.MustCompile(`^[A-Za-z0-9\-_ \t\n\r\f\v]{0,8}$`)
	wwnRe     = regexp.MustCompile(`^0x[0-9a-fA-F]{16}$`)
	// is_integer and is_number of PVE::JSONSchema.
	integerRe = regexp.MustCompile(`^[+-]?\d+$`)
	numberRe  = regexp.MustCompile(`^[+-]?(\d+\.\d+|\d+\.|\.\d+|\d+)([eE][+-]?\d+)?$`)
)

func minimum(v float64) *float64 { return &v }

var imageFormats = []string{"raw", "qcow", "qed", "qcow2", "vmdk", "cloop"} // pve-qm-image-format

func fileProp(f volumeFormat) *propSpec { return &propSpec{typ: typeString, volume: f} }

func sizeProp() *propSpec {
	return &propSpec{typ: typeString, format: diskSizeRe, what: "a disk size (e.g. 32G, 4M, 528K)"}
}

// baseProps is %drivedesc_base: what every guest drive (ide, sata, scsi,
// virtio) accepts.
func baseProps() map[string]*propSpec {
	p := map[string]*propSpec{
		"file":          fileProp(volumeOrQMPath),
		"media":         {typ: typeString, enum: []string{"cdrom", "disk"}},
		"snapshot":      {typ: typeBoolean},
		"cache":         {typ: typeString, enum: []string{"none", "writethrough", "writeback", "unsafe", "directsync"}},
		"format":        {typ: typeString, enum: imageFormats},
		"size":          sizeProp(),
		"backup":        {typ: typeBoolean},
		"replicate":     {typ: typeBoolean},
		"rerror":        {typ: typeString, enum: []string{"ignore", "report", "stop"}},
		"werror":        {typ: typeString, enum: []string{"enospc", "ignore", "report", "stop"}},
		"aio":           {typ: typeString, enum: []string{"native", "threads", "io_uring"}},
		"discard":       {typ: typeString, enum: []string{"ignore", "on"}},
		"detect_zeroes": {typ: typeBoolean},
		"serial":        {typ: typeString, format: urlencodedRe, what: "url-encoded", maxLen: 20 * 3},
		"shared":        {typ: typeBoolean},
	}
	for _, k := range []string{"bps", "bps_rd", "bps_wr", "iops", "iops_rd", "iops_wr", "iops_max", "iops_rd_max", "iops_wr_max"} {
		p[k] = &propSpec{typ: typeInteger}
	}
	for _, k := range []string{"mbps", "mbps_rd", "mbps_wr", "mbps_max", "mbps_rd_max", "mbps_wr_max"} {
		p[k] = &propSpec{typ: typeNumber}
	}
	for _, k := range []string{"bps_max_length", "bps_rd_max_length", "bps_wr_max_length", "iops_max_length", "iops_rd_max_length", "iops_wr_max_length"} {
		p[k] = &propSpec{typ: typeInteger, min: minimum(1)}
	}
	return p
}

var baseAliases = map[string]string{
	"volume":         "file",
	"bps_rd_length":  "bps_rd_max_length",
	"bps_wr_length":  "bps_wr_max_length",
	"iops_rd_length": "iops_rd_max_length",
	"iops_wr_length": "iops_wr_max_length",
}

// The bus-specific additions of Drive.pm.
var (
	iothreadProps  = map[string]*propSpec{"iothread": {typ: typeBoolean}}
	productProps   = map[string]*propSpec{"product": {typ: typeString, format: productRe, what: "up to 16 of A-Z a-z 0-9 - _ and blanks"}}
	vendorProps    = map[string]*propSpec{"vendor": {typ: typeString, format: vendorRe, what: "up to 8 of A-Z a-z 0-9 - _ and blanks"}}
	modelProps     = map[string]*propSpec{"model": {typ: typeString, format: urlencodedRe, what: "url-encoded", maxLen: 40 * 3}}
	queuesProps    = map[string]*propSpec{"queues": {typ: typeInteger, min: minimum(2)}}
	readonlyProps  = map[string]*propSpec{"ro": {typ: typeBoolean}}
	scsiblockProps = map[string]*propSpec{"scsiblock": {typ: typeBoolean}}
	ssdProps       = map[string]*propSpec{"ssd": {typ: typeBoolean}}
	wwnProps       = map[string]*propSpec{"wwn": {typ: typeString, format: wwnRe, what: "0x and 16 hex digits"}}
	efitypeProps   = map[string]*propSpec{
		"efitype":           {typ: typeString, enum: []string{"2m", "4m"}},
		"pre-enrolled-keys": {typ: typeBoolean},
		"ms-cert":           {typ: typeString, enum: []string{"2011", "2023", "2023w", "2023k"}},
	}
)

func merge(sets ...map[string]*propSpec) map[string]*propSpec {
	out := map[string]*propSpec{}
	for _, s := range sets {
		for k, v := range s {
			out[k] = v
		}
	}
	return out
}

// driveFormats maps a drive bus to its format.
var driveFormats = map[string]driveFormat{
	"ide":    {merge(baseProps(), modelProps, ssdProps, wwnProps), baseAliases},
	"sata":   {merge(baseProps(), ssdProps, wwnProps), baseAliases},
	"scsi":   {merge(baseProps(), iothreadProps, productProps, queuesProps, readonlyProps, scsiblockProps, ssdProps, vendorProps, wwnProps), baseAliases},
	"virtio": {merge(baseProps(), iothreadProps, readonlyProps), baseAliases},
	// $efidisk_fmt: OVMF's variable store, attached as pflash. No cache,
	// discard, aio or limits: the disk is firmware's, not the guest's.
	"efidisk": {merge(map[string]*propSpec{
		"file":   fileProp(volumeOrQMPath),
		"format": {typ: typeString, enum: imageFormats},
		"size":   sizeProp(),
	}, efitypeProps), map[string]string{"volume": "file"}},
	// $tpmstate_fmt: swtpm's state; its format is pve-vm-image-format.
	"tpmstate": {map[string]*propSpec{
		"file":    fileProp(volumeOrQMPath),
		"format":  {typ: typeString, enum: []string{"raw", "qcow2", "vmdk"}},
		"size":    sizeProp(),
		"version": {typ: typeString, enum: []string{"v1.2", "v2.0"}},
	}, map[string]string{"volume": "file"}},
	// $unused_fmt: a volume the VM owns but does not attach.
	"unused": {map[string]*propSpec{"file": fileProp(volumeIDOnly)}, map[string]string{"volume": "file"}},
}

// Accepts reports whether Proxmox's format for a drive of bus (ide, sata,
// scsi, virtio, efidisk, tpmstate, unused) has the option: a fix that adds
// an option the kind lacks makes `qm set` fail and a hand edit makes
// Proxmox drop the whole line.
func Accepts(bus, option string) bool {
	f, ok := driveFormats[bus]
	if !ok {
		return false
	}
	if a, ok := f.aliases[option]; ok {
		option = a
	}
	_, ok = f.props[option]
	return ok
}

// Options lists the options of a bus's format, sorted ("file" included).
func Options(bus string) []string {
	f := driveFormats[bus]
	out := make([]string, 0, len(f.props))
	for k := range f.props {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// perlTrue is Perl's truth of a string: everything but "" and "0".
// parse_drive tests its options this way ("0.0" is true, "0" is not).
func perlTrue(s string) bool { return s != "" && s != "0" }

// checkValue is check_prop for one property: the type first, then the
// format or pattern, the length, the minimum and the enumeration.
func (p *propSpec) checkValue(v string) string {
	switch p.typ {
	case typeBoolean:
		if v != "0" && v != "1" {
			return "not a boolean (1/on/yes/true or 0/off/no/false)"
		}
	case typeInteger:
		if !integerRe.MatchString(v) {
			return "not an integer"
		}
	case typeNumber:
		if !numberRe.MatchString(v) {
			return "not a number"
		}
	}
	switch p.volume {
	case volumeOrQMPath:
		if v != "none" && v != "cdrom" && !strings.HasPrefix(v, "/") && !volumeIDRe.MatchString(v) {
			return "not a volume (STORAGE:VOLUME), an absolute path, none or cdrom"
		}
	case volumeIDOnly:
		if !volumeIDRe.MatchString(v) {
			return "not a volume id (STORAGE:VOLUME)"
		}
	}
	if p.format != nil && !p.format.MatchString(v) {
		return "not " + p.what
	}
	if p.maxLen > 0 && len(v) > p.maxLen {
		return "longer than " + strconv.Itoa(p.maxLen) + " characters"
	}
	if p.min != nil && numberRe.MatchString(v) {
		if f, err := strconv.ParseFloat(v, 64); err == nil && f < *p.min {
			return "below the minimum of " + strconv.FormatFloat(*p.min, 'f', -1, 64)
		}
	}
	if len(p.enum) > 0 {
		for _, e := range p.enum {
			if v == e {
				return ""
			}
		}
		return "not one of " + strings.Join(p.enum, ", ")
	}
	return ""
}
