// Package lvm reads LVM-thin pools and volumes through `lvs`, the way
// pve-storage does, but as JSON: sizes in bytes, the pool's discards mode and
// each thin volume's fill (data_percent of its own virtual size).
package lvm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/units"
)

// Fields are the lvs columns asked for. All exist in lvm2 2.02.x and 2.03.x
// (Proxmox VE 8 ships 2.03.16, 9 ships 2.03.31). The last four say what
// happens when a pool fills: lv_when_full (queue|error, pools only), the
// VG's free space autoextend grows into (vg_free, on every row), dmeventd's
// monitoring of the pool (seg_monitor) and the devices below each LV
// (devices: a pool names its hidden _tdata LV, which names the PVs).
var Fields = []string{
	"vg_name", "lv_name", "lv_size", "lv_attr", "pool_lv", "origin",
	"data_percent", "metadata_percent", "lv_metadata_size", "chunk_size", "discards",
	"lv_when_full", "vg_free", "seg_monitor", "devices",
}

// Argv is the lvs command for the given volume groups (all when none).
// Whole VGs are listed rather than named LVs: naming a missing LV makes lvs
// exit 5 for the whole report, and a missing volume is better told apart.
// -a adds the hidden LVs ([data_tdata], [data_tmeta], [lvol0_pmspare]):
// the pool's data LV is the one whose devices are PVs.
func Argv(vgs ...string) []string {
	argv := []string{"lvs", "--reportformat", "json", "--units", "b", "--nosuffix", "-a",
		"-o", strings.Join(Fields, ",")}
	return append(argv, vgs...)
}

// ErrParse means lvs printed something that is not its JSON report.
var ErrParse = errors.New("cannot parse lvs output")

// LV is one row of the report.
type LV struct {
	VG   string
	Name string
	// SizeBytes is lv_size: a thin volume's virtual size, a pool's data size.
	SizeBytes int64
	// Attr is lv_attr, e.g. "Vwi-aotz--" (thin volume, active, open),
	// "twi-aotz--" (thin pool).
	Attr   string
	Pool   string // pool_lv: the thin pool of a thin volume
	Origin string // origin: set on thin snapshots
	// DataPercent is data_percent, 0.01 % resolution: for a pool the share of
	// its data space in use, for a thin volume the share of its own virtual
	// size that is mapped. Nil when lvs prints it empty (LV not active).
	DataPercent *float64
	// MetadataPercent is the pool's metadata use (pools only).
	MetadataPercent *float64
	// MetadataSizeBytes is the pool's metadata LV size (pools only).
	MetadataSizeBytes int64
	// ChunkSizeBytes is the pool's allocation unit (pools only): a discard
	// frees only whole chunks.
	ChunkSizeBytes int64
	// Discards is the pool's discards mode (ignore|nopassdown|passdown);
	// lvs prints the pool's mode on its thin volumes too.
	Discards string
	// WhenFull is lv_when_full: "queue" (dm-thin holds writes up to its
	// no_space_timeout) or "error" (fails them at once); pools only.
	WhenFull string
	// VGFreeBytes is vg_free, the VG's unallocated space (on every row).
	VGFreeBytes int64
	// Monitor is seg_monitor: "monitored", "not monitored", or "" (not
	// active, or dmeventd not asked).
	Monitor string
	// Devices is devices: "/dev/sda3(0)" per segment, comma separated; a
	// thin pool's names its hidden data LV ("data_tdata(0)").
	Devices string
}

// IsThinPool reports a thin pool row (lv_attr "t...").
func (l *LV) IsThinPool() bool { return strings.HasPrefix(l.Attr, "t") }

// IsThinVolume reports a thin volume or thin snapshot (lv_attr "V...").
func (l *LV) IsThinVolume() bool { return strings.HasPrefix(l.Attr, "V") }

// IsSnapshot reports a thin snapshot (it has an origin).
func (l *LV) IsSnapshot() bool { return l.Origin != "" }

// Active reports lv_attr's state letter 'a' (5th character).
func (l *LV) Active() bool { return len(l.Attr) > 4 && l.Attr[4] == 'a' }

// AllocatedBytes is data_percent x lv_size, rounded to 512-byte sectors; ok
// is false when lvs printed no percentage. The error of this figure is
// ResolutionBytes (lvs rounds the percentage to 0.01 %).
func (l *LV) AllocatedBytes() (int64, bool) {
	if l.DataPercent == nil {
		return 0, false
	}
	b := *l.DataPercent / 100 * float64(l.SizeBytes)
	return int64(math.Round(b/512)) * 512, true
}

// ResolutionBytes is how far AllocatedBytes can be off: half of 0.01 % of
// the size (lvs rounds data_percent to two decimals), plus the rounding to
// 512-byte sectors.
func (l *LV) ResolutionBytes() int64 { return l.SizeBytes/20000 + 512 }

// PVs are the devices (without their starting extents) below the LV: for a
// thin pool, those of its hidden data LV [<pool>_tdata] when the report has
// it (lvs -a), else those the row names that are devices (/dev/...).
func (r *Report) PVs(l *LV) []string {
	devs := l.Devices
	if l.IsThinPool() {
		if d := r.Find(l.VG, "["+l.Name+"_tdata]"); d != nil {
			devs = d.Devices
		}
	}
	var out []string
	for _, d := range strings.Split(devs, ",") {
		d = strings.TrimSpace(d)
		if i := strings.LastIndexByte(d, '('); i > 0 {
			d = d[:i]
		}
		if strings.HasPrefix(d, "/dev/") && !containsString(out, d) {
			out = append(out, d)
		}
	}
	return out
}

func containsString(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// Report is one lvs run.
type Report struct {
	LVs []LV
}

// Find returns the LV vg/name, or nil.
func (r *Report) Find(vg, name string) *LV {
	for i := range r.LVs {
		if r.LVs[i].VG == vg && r.LVs[i].Name == name {
			return &r.LVs[i]
		}
	}
	return nil
}

// Volumes returns the thin volumes (and thin snapshots) of pool vg/pool,
// sorted by name.
func (r *Report) Volumes(vg, pool string) []*LV {
	var out []*LV
	for i := range r.LVs {
		l := &r.LVs[i]
		if l.VG == vg && l.Pool == pool && l.IsThinVolume() {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Snapshots returns the thin snapshots whose origin is vg/name.
func (r *Report) Snapshots(vg, name string) []*LV {
	var out []*LV
	for i := range r.LVs {
		l := &r.LVs[i]
		if l.VG == vg && l.Origin == name {
			out = append(out, l)
		}
	}
	return out
}

// Parse reads `lvs --reportformat json --units b --nosuffix` output. Values
// may be strings (the default "json" format) or numbers ("json_std").
func Parse(b []byte) (*Report, error) {
	if !gjson.ValidBytes(b) {
		return nil, fmt.Errorf("%w: not JSON: %.120q", ErrParse, strings.TrimSpace(string(b)))
	}
	root := gjson.ParseBytes(b)
	reports := root.Get("report")
	if !reports.IsArray() {
		return nil, fmt.Errorf("%w: no \"report\" array", ErrParse)
	}
	r := &Report{}
	for _, rep := range reports.Array() {
		rows := rep.Get("lv")
		if !rows.Exists() {
			continue
		}
		for _, row := range rows.Array() {
			l, err := parseRow(row)
			if err != nil {
				return nil, err
			}
			r.LVs = append(r.LVs, l)
		}
	}
	return r, nil
}

func parseRow(row gjson.Result) (LV, error) {
	l := LV{
		VG:       row.Get("vg_name").String(),
		Name:     row.Get("lv_name").String(),
		Attr:     row.Get("lv_attr").String(),
		Pool:     row.Get("pool_lv").String(),
		Origin:   row.Get("origin").String(),
		Discards: row.Get("discards").String(),
		WhenFull: row.Get("lv_when_full").String(),
		Monitor:  row.Get("seg_monitor").String(),
		Devices:  row.Get("devices").String(),
	}
	if l.VG == "" || l.Name == "" {
		return l, fmt.Errorf("%w: row without vg_name/lv_name: %s", ErrParse, row.Raw)
	}
	var err error
	if l.SizeBytes, err = bytesField(row, "lv_size"); err != nil {
		return l, err
	}
	if l.MetadataSizeBytes, err = bytesField(row, "lv_metadata_size"); err != nil {
		return l, err
	}
	if l.ChunkSizeBytes, err = bytesField(row, "chunk_size"); err != nil {
		return l, err
	}
	if l.VGFreeBytes, err = bytesField(row, "vg_free"); err != nil {
		return l, err
	}
	if l.DataPercent, err = percentField(row, "data_percent"); err != nil {
		return l, err
	}
	if l.MetadataPercent, err = percentField(row, "metadata_percent"); err != nil {
		return l, err
	}
	return l, nil
}

// bytesField reads a --units b --nosuffix size; "" is 0.
func bytesField(row gjson.Result, k string) (int64, error) {
	v := row.Get(k)
	s := strings.TrimSpace(v.String())
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		// Sizes with a unit suffix mean --units b --nosuffix were not honoured.
		return 0, fmt.Errorf("%w: %s of %s/%s is %s, want bytes", ErrParse, k, units.Clip(row.Get("vg_name").String(), 40), units.Clip(row.Get("lv_name").String(), 40), units.Clip(s, 40))
	}
	return n, nil
}

// percentField reads a percentage; "" (not active) is nil.
func percentField(row gjson.Result, k string) (*float64, error) {
	s := strings.TrimSpace(row.Get(k).String())
	if s == "" {
		return nil, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > 100.0001 {
		return nil, fmt.Errorf("%w: %s of %s/%s is %s", ErrParse, k, units.Clip(row.Get("vg_name").String(), 40), units.Clip(row.Get("lv_name").String(), 40), units.Clip(s, 40))
	}
	return &f, nil
}

// Error is lvs failing: timed out, exited non-zero, or printed no report.
type Error struct {
	Argv []string
	Err  error
}

func (e *Error) Error() string {
	var ce *node.CommandError
	if errors.As(e.Err, &ce) {
		msg := strings.Join(strings.Fields(ce.Stderr), " ")
		if msg == "" {
			msg = "no message"
		}
		return fmt.Sprintf("`%s` exited with status %d: %s", strings.Join(e.Argv, " "), ce.Status, msg)
	}
	return fmt.Sprintf("`%s`: %v", strings.Join(e.Argv, " "), e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// List runs lvs for the given volume groups and parses its report. A
// timeout wraps node.ErrTimeout; a non-zero exit is an error even when lvs
// printed a partial report, because rows would be missing silently.
func List(ctx context.Context, r node.Runner, vgs ...string) (*Report, error) {
	argv := Argv(vgs...)
	out, err := r.Run(ctx, argv...)
	if err != nil {
		return nil, &Error{Argv: argv, Err: err}
	}
	rep, err := Parse(out)
	if err != nil {
		return nil, &Error{Argv: argv, Err: err}
	}
	return rep, nil
}
