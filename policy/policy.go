// Package policy is the site's desired state for VM disks (`check --policy
// FILE`): a small YAML file of rules, each selecting disks (by storage,
// storage type, VM tag, pool, VMID range, drive kind, bus) and requiring
// settings of them (cache, aio, discard, iothread, ssd, controller, limits
// at most or at least, backup, replicate). docs/commands.md's "Policy" section is the
// file's schema.
//
// Parse reads a file strictly: an unknown key, a bad value or a YAML error
// is one error naming the file, the line and the key. Judge tells, for one
// VM of the vm model, which disk breaks which requirement and where: in the
// config, in the running VM, or pending for the next start; Mend says what
// a disk's next-start line (and the VM's scsihw) must become so that every
// requirement selecting it holds, for check to fold into its one `qm set`
// per disk. Coverage warns of selectors that match nothing. Everything here
// is a plain function over the vm model and recorded files: no I/O but
// ReadPools, which reads user.cfg through node.Node.ReadFile.
package policy

import (
	"fmt"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// MaxBytes bounds a policy file. A policy is a few dozen lines; cluster
// mode sends its content to every node as one argument of the remote
// command (base64: 4/3 of this), which sshd hands to the shell as part of
// one string, and Linux takes at most 128 KiB in one argument
// (MAX_ARG_STRLEN).
const MaxBytes = 64 << 10

// Severity is how bad a rule's violation is: check's severities of the
// same names, so --fail-on applies to them as to every finding.
type Severity string

// Severities a rule may have.
const (
	SeverityWarning Severity = "warning" // the default
	SeverityError   Severity = "error"
)

// Policy is one parsed file.
type Policy struct {
	// File is the file's name as the admin gave it (messages name it).
	File  string
	Rules []*Rule
}

// Rule selects disks and requires settings of them.
type Rule struct {
	Name     string
	Line     int // where the rule starts in the file
	Severity Severity
	Match    Match
	Require  []*Req // in the file's order
	index    int    // in Policy.Rules
}

// Match is what a rule selects: a disk is selected when it matches every
// selector given, and a selector when the disk matches any of its values.
// A rule without selectors selects every disk of kind disk.
type Match struct {
	Storage     []Value // storage IDs, shell patterns (ceph-*)
	StorageType []Value // storage.cfg types (rbd, lvmthin)
	Tag         []Value // VM tags, shell patterns, case-insensitive as Proxmox compares tags
	Pool        []Value // pools of user.cfg, shell patterns
	VMID        []Range
	// Kind is the drive kinds (disk, cdrom); none given means disk.
	Kind []Value
	Bus  []Value // ide, sata, scsi, virtio
}

// Value is one selector or requirement value with where it stands.
type Value struct {
	Text string
	Line int
	Key  string // rules[0].match.storage
}

// Range is a VMID or a range of them, both ends included.
type Range struct {
	From, To int
	Value
}

// Setting names what a requirement is about; a limit's is "limits." and
// the Proxmox key (limits.mbps_wr).
type Setting string

// The settings a rule can require.
const (
	Cache      Setting = "cache"
	AIO        Setting = "aio"
	Discard    Setting = "discard"
	IOThread   Setting = "iothread"
	SSD        Setting = "ssd"
	Controller Setting = "controller"
	Limits     Setting = "limits"
	Backup     Setting = "backup"
	Replicate  Setting = "replicate"
)

// Req is one requirement of a rule.
type Req struct {
	Setting Setting // for a limit: limits.<key>
	Line    int
	Key     string // rules[0].require.cache
	// OneOf are the values allowed (cache, aio, controller).
	OneOf []string
	// Want is the boolean wanted (discard, iothread, ssd, backup, replicate).
	Want bool
	// Limit is a limit's bounds (Setting limits.<key>).
	Limit *LimitReq
	rule  *Rule
	id    int // index over the whole policy
}

// LimitReq bounds one of a disk's I/O limits, in Proxmox's unit for the
// key (MiB/s for mbps*, operations/s for iops*). AtMost: the disk must
// have a limit and it must be at most this (no limit is more than any
// number). AtLeast: a limit the disk has must be at least this (no limit
// holds). Zero: not bounded that way.
type LimitReq struct {
	Key     qemuserver.LimitKey
	AtMost  float64
	AtLeast float64
}

// Rule is the rule the requirement belongs to.
func (q *Req) Rule() *Rule { return q.rule }

// Want says what the requirement wants, as a message says it.
func (q *Req) WantText() string {
	switch {
	case q.Limit != nil:
		return q.Limit.text()
	case q.OneOf != nil:
		return orList(q.OneOf)
	}
	return onOff(q.Want)
}

func (l *LimitReq) text() string {
	u := unitOf(l.Key)
	switch {
	case l.AtMost > 0 && l.AtLeast > 0:
		return fmt.Sprintf("between %s and %s%s", num(l.AtLeast), num(l.AtMost), u)
	case l.AtMost > 0:
		return "at most " + num(l.AtMost) + u
	}
	return "at least " + num(l.AtLeast) + u + " (or no limit)"
}

// Error is a policy file Parse refuses: one line naming the file, the line
// and the key. Bad input (exit 2).
type Error struct {
	File string
	Line int    // 0 when the file as a whole is at fault
	Key  string // "" when no key is
	Msg  string
}

func (e *Error) Error() string {
	s := "policy " + e.File
	if e.Line > 0 {
		s += fmt.Sprintf(" line %d", e.Line)
	}
	if e.Key != "" {
		s += ": " + e.Key
	}
	return s + ": " + e.Msg
}

// ExitCode implements exitcode.Coder: bad input.
func (e *Error) ExitCode() exitcode.Code { return exitcode.Usage }

// Warning is a selector value that matches nothing (Coverage): the run
// goes on, and says so.
type Warning struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Key     string `json:"key"`
	Message string `json:"message"`
}

func (w Warning) String() string {
	return fmt.Sprintf("policy %s line %d: %s: %s", w.File, w.Line, w.Key, w.Message)
}
