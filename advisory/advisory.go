// Package advisory is the table of known QEMU and Proxmox VE disk bugs
// (advisories.json, read from pve-qemu's debian/changelog and patches and
// the bugs they name), matched against the exact build a VM runs and the
// disks it runs: which builds a bug is in (Debian version ranges, dpkg's
// order), what it does to disks, which disk settings it needs, how it is
// fixed or avoided, and where that is written.
//
// The matcher is pure (Table.Match: a build and its running disks in,
// the advisories that apply out). What a VM runs is measured before
// (ReadBinary: the build QEMU's QMP greeting states, whether the binary
// was replaced since the start, the version installed now) and handed in.
package advisory

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/pvediskcheck/pvediskcheck/dpkg"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// Severity is how bad a bug is when it applies; check's severities by
// name.
type Severity string

// Severities, worst first.
const (
	// Error: data loss or corruption, or writes that fail.
	Error Severity = "error"
	// Warning: a hang, a crash, a busy loop.
	Warning Severity = "warning"
	// Info: what is reported is wrong, nothing on the disks is.
	Info Severity = "info"
)

// Range is builds of a package a bug is in: from Introduced (inclusive;
// "" for every earlier build) to Fixed (exclusive), in dpkg's order. A bug
// fixed on two branches has one range per branch (a stable branch's
// backport is lower than the main branch's first fixed build).
type Range struct {
	Introduced string `json:"introduced,omitempty"`
	Fixed      string `json:"fixed"`
}

// Needs are the settings of a running disk a bug needs (all of those set;
// a running disk as qemuserver.DiskSettings has them from the command
// line). AnyDisk says, where none is set, that every disk is exposed.
type Needs struct {
	// Controllers are DiskSettings.Controller values (virtio-scsi-single,
	// virtio-scsi-pci, virtio-blk, sata, ide, ...), one of which the disk
	// must be on.
	Controllers  []string `json:"controllers,omitempty"`
	Format       string   `json:"format,omitempty"`        // qcow2
	AIO          string   `json:"aio,omitempty"`           // io_uring
	Discard      bool     `json:"discard,omitempty"`       // discard=on: QEMU runs discard=unmap
	DetectZeroes string   `json:"detect_zeroes,omitempty"` // unmap
	IOThread     bool     `json:"iothread,omitempty"`
	AnyDisk      bool     `json:"any_disk,omitempty"`
}

// Source is where a fact of an entry is written: exactly one of its
// fields is set.
type Source struct {
	// Changelog is a pve-qemu debian/changelog entry (its version), Text
	// the line of it quoted.
	Changelog string `json:"changelog,omitempty"`
	Text      string `json:"text,omitempty"`
	// Bug is a Proxmox bugzilla number.
	Bug int `json:"bug,omitempty"`
	// Commit is a pve-qemu commit, File the patch it adds.
	Commit string `json:"commit,omitempty"`
	File   string `json:"file,omitempty"`
	// URL is a public page: the upstream patch, a forum thread, a QEMU
	// issue.
	URL string `json:"url,omitempty"`
}

// String names the source as the finding prints it.
func (s Source) String() string {
	if s.Changelog != "" {
		return "pve-qemu changelog " + s.Changelog
	}
	if s.Bug != 0 {
		return "Proxmox bug #" + strconv.Itoa(s.Bug)
	}
	if s.Commit != "" && s.File != "" {
		return "pve-qemu commit " + s.Commit + " (" + s.File + ")"
	}
	if s.Commit != "" {
		return "pve-qemu commit " + s.Commit
	}
	return s.URL
}

// Advisory is one known bug.
type Advisory struct {
	ID string `json:"id"`
	// Package is the Debian package whose builds the ranges are of
	// (pve-qemu-kvm).
	Package  string   `json:"package"`
	Affected []Range  `json:"affected"`
	Severity Severity `json:"severity"`
	Title    string   `json:"title"`
	// Effect is what the bug does to the VM's disks.
	Effect string `json:"effect"`
	// Trigger is what makes it happen on a disk that has what it needs.
	Trigger string `json:"trigger"`
	Needs   Needs  `json:"needs"`
	// Avoid is the setting that keeps it from happening until the fixed
	// build runs ("" where none does).
	Avoid string `json:"avoid,omitempty"`
	// Note is what else an admin must know (no build of a branch has the
	// fix; where a range's lower end comes from).
	Note    string   `json:"note,omitempty"`
	Sources []Source `json:"sources"`
}

// fixed is r.Fixed parsed (Load validated it).
func (r Range) fixed() dpkg.Version {
	v, _ := dpkg.ParseVersion(r.Fixed)
	return v
}

// Table is the advisories, in the file's order.
type Table []Advisory

//go:embed advisories.json
var advisoriesJSON []byte

// Known is the table shipped with the tool (advisories.json), loaded and
// validated once; a file that does not validate is a build error that
// TestTable reports (Known panics).
var Known = sync.OnceValue(func() Table {
	t, err := Load(advisoriesJSON)
	if err != nil {
		panic("advisory: advisories.json: " + err.Error())
	}
	return t
})

// Load reads a table and validates every entry (Validate).
func Load(b []byte) (Table, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var t Table
	if err := dec.Decode(&t); err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var errs []error
	for i := range t {
		a := &t[i]
		if seen[a.ID] {
			errs = append(errs, fmt.Errorf("%s: the id is used twice", a.ID))
		}
		seen[a.ID] = true
		if err := a.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return t, errors.Join(errs...)
}

// Validate refuses an entry that lacks what a finding needs: an id, a
// package, at least one range, each with a fixed build (and a lower one
// below it), ranges that do not overlap, a severity, what it does and
// when, which disks it needs, and at least one source, each naming exactly
// one place.
func (a *Advisory) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %s", a.ID, fmt.Sprintf(format, args...))
	}
	// A table of refusals rather than a switch: each is a plain expression
	// (and each one's mutants run under the tests).
	for _, c := range []struct {
		refused bool
		why     string
	}{
		{a.ID == "", "no id"},
		{a.Package == "", "no package"},
		{len(a.Affected) == 0, "no affected range"},
		{a.Severity != Error && a.Severity != Warning && a.Severity != Info, fmt.Sprintf("severity %q is not error, warning or info", a.Severity)},
		{a.Title == "" || a.Effect == "" || a.Trigger == "", "title, effect and trigger must all be set"},
		{len(a.Sources) == 0, "no source"},
	} {
		if c.refused {
			return bad("%s", c.why)
		}
	}
	if n := a.Needs; n.AnyDisk == (len(n.Controllers) > 0 || n.Format != "" || n.AIO != "" || n.Discard || n.DetectZeroes != "" || n.IOThread) {
		return bad("needs: name the disk settings the bug needs, or any_disk alone")
	}
	var ranges [][2]*dpkg.Version
	for _, r := range a.Affected {
		if r.Fixed == "" {
			return bad("a range without a fixed version")
		}
		fixed, err := dpkg.ParseVersion(r.Fixed)
		if err != nil {
			return bad("fixed: %v", err)
		}
		var lo *dpkg.Version
		if r.Introduced != "" {
			v, err := dpkg.ParseVersion(r.Introduced)
			if err != nil {
				return bad("introduced: %v", err)
			}
			if !v.Less(fixed) {
				return bad("introduced %s is not below fixed %s", r.Introduced, r.Fixed)
			}
			lo = &v
		}
		for _, o := range ranges {
			// [lo, fixed) and [o0, o1) overlap where each starts below
			// the other's end.
			if (lo == nil || lo.Less(*o[1])) && (o[0] == nil || o[0].Less(fixed)) {
				return bad("range up to %s overlaps another", r.Fixed)
			}
		}
		ranges = append(ranges, [2]*dpkg.Version{lo, &fixed})
	}
	for _, s := range a.Sources {
		set := 0
		for _, ok := range []bool{s.Changelog != "", s.Bug != 0, s.Commit != "", s.URL != ""} {
			if ok {
				set++
			}
		}
		if set != 1 {
			return bad("a source names %d places, not one", set)
		}
		if s.Changelog != "" {
			if _, err := dpkg.ParseVersion(s.Changelog); err != nil {
				return bad("source changelog: %v", err)
			}
		}
		if s.Bug < 0 {
			return bad("source bug %d", s.Bug)
		}
		if s.URL != "" && !strings.HasPrefix(s.URL, "https://") {
			return bad("source url %q is not https", s.URL)
		}
		if s.Commit != "" && !isHex(s.Commit) {
			return bad("source commit %q is not a commit id", s.Commit)
		}
	}
	return nil
}

func isHex(s string) bool {
	if len(s) < 7 {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// Affects is the range the build is in, if any. A build that names no
// revision (pve-qemu-kvm before 7.0.0-4 stated its upstream version only,
// pve-qemu commit 2b259b7) is in a range only where every build of its
// upstream version is: from its first revision (-1) on, and below a fixed
// build of a later upstream version.
func (a *Advisory) Affects(b Build) (Range, bool) {
	if b.Package != a.Package || b.Version == nil {
		return Range{}, false
	}
	lowest, highest := *b.Version, *b.Version
	if !b.Exact {
		lowest.Revision = "1"
	}
	for _, r := range a.Affected {
		if r.Introduced != "" {
			lo, _ := dpkg.ParseVersion(r.Introduced)
			if lowest.Less(lo) {
				continue
			}
		}
		fixed := r.fixed()
		if !b.Exact {
			fixed.Revision = ""
			if dpkg.Compare(highest, fixed) >= 0 {
				continue
			}
		}
		if highest.Less(fixed) {
			return r, true
		}
	}
	return Range{}, false
}

// Later are the ranges of the bug that start at or after r's fixed build,
// lowest first: a regression after the fix (8.1.2-5's fix reverted in
// 8.1.2-6), or a later branch that had the bug again (8.0.x after 7.2's
// stable fix). The upgrade that fixes r's builds for good is past them.
func (a *Advisory) Later(r Range) []Range {
	end := r.fixed()
	var out []Range
	for _, o := range a.Affected {
		if o.Introduced == "" {
			continue
		}
		if lo, _ := dpkg.ParseVersion(o.Introduced); !lo.Less(end) {
			out = append(out, o)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		x, _ := dpkg.ParseVersion(out[i].Introduced)
		y, _ := dpkg.ParseVersion(out[j].Introduced)
		return x.Less(y)
	})
	return out
}

// Fixes reports whether version v has the fix of r's builds: it is r's
// fixed build or later and in no range of the bug.
func (a *Advisory) Fixes(r Range, v dpkg.Version) bool {
	if v.Less(r.fixed()) {
		return false
	}
	_, affected := a.Affects(Build{Package: a.Package, Version: &v, Exact: true})
	return !affected
}

// Fits reports whether a running disk has everything the bug needs. A
// CD-ROM drive never does: none of these bugs is about reading an ISO, and
// a drive with no medium runs nothing. Nor does the EFI vars drive (a
// pflash device): the firmware writes its variables there, not a guest's
// disk driver, and no bug of the table is about it.
func (n Needs) Fits(d qemuserver.DiskSettings) bool {
	for _, misses := range []bool{
		d.CDROM || d.Controller == "efi",
		len(n.Controllers) > 0 && !slices.Contains(n.Controllers, d.Controller),
		n.Format != "" && d.Format != n.Format,
		n.AIO != "" && d.AIO != n.AIO,
		n.Discard && d.Discard != "unmap",
		n.DetectZeroes != "" && d.DetectZeroes != n.DetectZeroes,
		n.IOThread && !d.IOThread,
	} {
		if misses {
			return false
		}
	}
	return true
}

// String says what the bug needs of a disk, as the finding names it.
func (n Needs) String() string {
	if n.AnyDisk {
		return "any disk"
	}
	var parts []string
	if len(n.Controllers) > 0 {
		parts = append(parts, "on "+strings.Join(n.Controllers, " or "))
	}
	if n.Format != "" {
		parts = append(parts, n.Format)
	}
	if n.AIO != "" {
		parts = append(parts, "aio="+n.AIO)
	}
	if n.Discard {
		parts = append(parts, "discard=on")
	}
	if n.DetectZeroes != "" {
		parts = append(parts, "detect-zeroes="+n.DetectZeroes)
	}
	if n.IOThread {
		parts = append(parts, "iothread=1")
	}
	return strings.Join(parts, ", ")
}

// Hit is an advisory that applies to a VM: its build is in Range and
// Disks have what the bug needs.
type Hit struct {
	Advisory *Advisory
	Range    Range
	Disks    []string
}

// Match is every advisory of the table that applies to a VM running build
// b with the running disks given, in the table's order. A build whose
// version is not known exactly matches nothing.
func (t Table) Match(b Build, disks []qemuserver.DiskSettings) []Hit {
	var out []Hit
	for i := range t {
		a := &t[i]
		r, ok := a.Affects(b)
		if !ok {
			continue
		}
		var ids []string
		for _, d := range disks {
			if a.Needs.Fits(d) {
				ids = append(ids, d.ID)
			}
		}
		if len(ids) > 0 {
			out = append(out, Hit{Advisory: a, Range: r, Disks: ids})
		}
	}
	return out
}
