// Package backupcfg reads Proxmox's backup configuration: vzdump's
// node-wide defaults (/etc/vzdump.conf) and the cluster's backup jobs (the
// vzdump sections of /etc/pve/jobs.cfg), and says per VM which jobs back it
// up and whether they use backup fleecing, on which storage.
//
// Why fleecing matters: during a backup, QEMU's copy-before-write makes a
// guest write to a block not copied yet wait until the old data reached
// the backup target; with fleecing the old data goes to a fleecing image
// on a (fast, local) storage instead (pve-docs: "can help guest IO
// performance and even prevent hangs"). Proxmox advises a storage with thin
// provisioning and discard for it (pve-guest-common's backup-fleecing
// format: "it's best to use a local storage that supports discard and
// either thin provisioning or sparse files").
//
// The grammar is pve-manager's and pve-guest-common's
// (PVE::VZDump::read_vzdump_defaults, PVE::VZDump::Common's
// backup-fleecing format, PVE::Jobs' section config): vzdump.conf is
// "key: value" lines, # comments; jobs.cfg is "vzdump: <id>" followed by
// indented "key value" lines; fleecing is a property string
// "[enabled=]<bool>[,storage=<id>]". A job's own fleecing replaces
// vzdump.conf's (vzdump fills only options a job does not set).
package backupcfg

import (
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/node"
)

// Fleecing is a backup-fleecing property string.
type Fleecing struct {
	Enabled bool
	Storage string // "" when not given
}

// ParseFleecing reads "[enabled=]<bool>[,storage=<id>]"; ok is false for
// text Proxmox would refuse (an unknown key, a bad boolean, a key given
// twice: parse_property_string's "duplicate key").
func ParseFleecing(s string) (Fleecing, bool) {
	var f Fleecing
	seen := map[string]bool{}
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		k, v, has := strings.Cut(part, "=")
		if !has {
			k, v = "enabled", part // enabled is the default key
		}
		k = strings.TrimSpace(k)
		if seen[k] {
			return f, false
		}
		seen[k] = true
		switch k {
		case "enabled":
			b, ok := parseBool(v)
			if !ok {
				return f, false
			}
			f.Enabled = b
		case "storage":
			f.Storage = strings.TrimSpace(v)
		default:
			return f, false
		}
	}
	return f, true
}

// parseBool is PVE::JSONSchema's boolean: 1/0, yes/no, on/off, true/false.
func parseBool(s string) (bool, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "yes", "on", "true":
		return true, true
	case "0", "no", "off", "false":
		return false, true
	}
	return false, false
}

// Defaults are the vzdump.conf settings that matter here.
type Defaults struct {
	Fleecing *Fleecing // nil when not set (vzdump's default: off)
}

// ParseVzdumpConf reads /etc/vzdump.conf's text as
// PVE::JSONSchema::parse_config does: "key: value" lines, the last of a
// key given twice wins, and a value its schema refuses is then dropped
// ("parse error in '/etc/vzdump.conf'"), so the default applies: an
// earlier valid line does not come back.
func ParseVzdumpConf(text string) Defaults {
	var d Defaults
	last, set := "", false
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if ok && k == "fleecing" {
			last, set = v, true
		}
	}
	if f, ok := ParseFleecing(last); set && ok {
		d.Fleecing = &f
	}
	return d
}

// Job is one backup job of jobs.cfg.
type Job struct {
	ID      string
	Enabled bool     // "enabled" (default 1)
	All     bool     // all 1 (or exclude without pool: vzdump backs up all then)
	VMIDs   []int    // vmid list
	Exclude []int    // exclude list
	Pool    string   // pool: its members are in user.cfg, not read here
	Nodes   []string // node: the nodes it runs on; empty for every node
	// Fleecing is the job's own setting; nil when it sets none (then
	// vzdump.conf's applies).
	Fleecing *Fleecing
}

// sectionHeaderRe and sectionPropRe are PVE::SectionConfig's section
// header ("type: id") and property line (indented "key [value]").
var (
	sectionHeaderRe = regexp.MustCompile(`^(\S+):\s*(\S+)\s*$`)
	sectionPropRe   = regexp.MustCompile(`^\s+(\S+)(\s+(.*\S))?\s*$`)
	sectionComment  = regexp.MustCompile(`^\s*#`)
)

// ParseJobs reads the vzdump sections of jobs.cfg (other job types, and
// their lines, are skipped) as PVE::SectionConfig::parse_config does: only
// an empty line ends a section (with CRLF line ends a blank line is "\r",
// so the section goes on and a header inside it is ignored), a line
// inside a section that is no indented "key value" is ignored, a key given
// twice keeps its first value ("duplicate attribute"), and a value its
// format refuses is dropped ("unable to parse value"), so the key's
// default applies (enabled stays 1).
func ParseJobs(text string) []Job {
	var out []Job
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		m := sectionHeaderRe.FindStringSubmatch(lines[i])
		if lines[i] == "" || sectionComment.MatchString(lines[i]) || m == nil {
			continue // "ignore config line"
		}
		var cur *Job
		if m[1] == "vzdump" {
			out = append(out, Job{ID: m[2], Enabled: true})
			cur = &out[len(out)-1]
		}
		set := map[string]bool{}
		for i+1 < len(lines) && lines[i+1] != "" {
			i++
			p := sectionPropRe.FindStringSubmatch(lines[i])
			if cur == nil || p == nil || sectionComment.MatchString(lines[i]) || set[p[1]] {
				continue
			}
			set[p[1]] = setJobKey(cur, p[1], p[3])
		}
	}
	for i := range out {
		if len(out[i].Exclude) > 0 && out[i].Pool == "" {
			out[i].All = true // PVE::VZDump: exclude without pool means all
		}
	}
	return out
}

// setJobKey sets one property of a job; false when its value is one
// Proxmox refuses (the key stays unset, at its default).
func setJobKey(j *Job, k, v string) bool {
	ok := true
	switch k {
	case "enabled":
		var b bool
		if b, ok = parseBool(v); ok {
			j.Enabled = b
		}
	case "all":
		var b bool
		if b, ok = parseBool(v); ok {
			j.All = b
		}
	case "vmid":
		j.VMIDs, ok = ids(v)
	case "exclude":
		j.Exclude, ok = ids(v)
	case "pool":
		j.Pool = v
	case "node":
		j.Nodes = strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ';' || r == ' ' })
	case "fleecing":
		var f Fleecing
		if f, ok = ParseFleecing(v); ok {
			j.Fleecing = &f
		}
	}
	return ok
}

// vmidRe is pve-vmid: 100 to 999999999, no sign, no leading zero.
var vmidRe = regexp.MustCompile(`^[1-9][0-9]{2,8}$`)

// ids reads a pve-vmid-list ("100,101 102"); ok is false when an entry
// is no VMID (Proxmox then refuses the whole list).
func ids(s string) ([]int, bool) {
	var out []int
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' || r == ' ' || r == '\t' }) {
		n, err := strconv.Atoi(f)
		if err != nil || !vmidRe.MatchString(f) {
			return nil, false
		}
		out = append(out, n)
	}
	return out, len(out) > 0
}

// Covers says whether the job backs up vmid on node; unknown says why
// that cannot be told ("" when it can): a job that selects by pool (its
// members are in user.cfg, not read here), or one that runs on some
// nodes only while this node's name is unknown (node "").
func (j Job) Covers(vmid int, node string) (covers bool, unknown string) {
	if !j.Enabled || len(j.Nodes) > 0 && node != "" && !slices.Contains(j.Nodes, node) {
		return false, ""
	}
	var would bool
	switch {
	case j.Pool != "":
		return false, "selects VMs by pool (user.cfg, not read)"
	case slices.Contains(j.VMIDs, vmid):
		would = true
	case j.All:
		would = !slices.Contains(j.Exclude, vmid)
	}
	if would && len(j.Nodes) > 0 && node == "" {
		return false, "runs on node " + strings.Join(j.Nodes, ",") + " only, and this node's name is unknown (no /etc/pve/local or /etc/hostname below the root)"
	}
	return would, ""
}

// Backup is one job backing up a VM and the fleecing it runs with.
type Backup struct {
	Job      string   `json:"job"`
	Fleecing Fleecing `json:"-"`
	// From says where the fleecing setting comes from: "job", the job's
	// own, or "vzdump.conf", the node's default, or "default" (off).
	From string `json:"fleecing_from"`
}

// Config is the node's backup configuration.
type Config struct {
	Defaults Defaults
	Jobs     []Job
	// Read says which files were there (a node without backup jobs has no
	// jobs.cfg).
	HasVzdumpConf, HasJobs bool
}

// Read reads vzdump.conf and jobs.cfg through the node reader; a file that
// does not exist is no error.
func Read(ctx context.Context, n node.Node) (Config, error) {
	var c Config
	b, err := n.ReadFile(ctx, n.Paths.VzdumpConf())
	switch {
	case err == nil:
		c.Defaults, c.HasVzdumpConf = ParseVzdumpConf(string(b)), true
	case !errors.Is(err, os.ErrNotExist):
		return c, err
	}
	b, err = n.ReadFile(ctx, n.Paths.JobsCfg())
	switch {
	case err == nil:
		c.Jobs, c.HasJobs = ParseJobs(string(b)), true
	case !errors.Is(err, os.ErrNotExist):
		return c, err
	}
	return c, nil
}

// ForVM lists the enabled jobs that back up vmid on node, each with the
// fleecing it runs with, and the jobs of which that cannot be told, each
// as "<job> <why>" (Covers).
func (c Config) ForVM(vmid int, node string) (backups []Backup, unknown []string) {
	for _, j := range c.Jobs {
		covers, why := j.Covers(vmid, node)
		if why != "" {
			unknown = append(unknown, j.ID+" "+why)
		}
		if !covers {
			continue
		}
		b := Backup{Job: j.ID, From: "default"}
		switch {
		case j.Fleecing != nil:
			b.Fleecing, b.From = *j.Fleecing, "job"
		case c.Defaults.Fleecing != nil:
			b.Fleecing, b.From = *c.Defaults.Fleecing, "vzdump.conf"
		}
		backups = append(backups, b)
	}
	return backups, unknown
}

// VMBackup is what check reports per VM (check --json: backups[]).
type VMBackup struct {
	Job             string `json:"job"`
	Fleecing        bool   `json:"fleecing"`
	FleecingStorage string `json:"fleecing_storage,omitempty"`
	FleecingFrom    string `json:"fleecing_from"` // job, vzdump.conf or default (off)
	// Unsuitable says why the fleecing storage goes against Proxmox's
	// advice (thin provisioning or sparse files, and discard); "" when it
	// follows it or fleecing is off.
	Unsuitable string `json:"fleecing_storage_unsuitable,omitempty"`
}

// StorageFacts is what Judge needs to know of a storage: whether its
// volumes are thin (or sparse files) and whether a discard returns space.
// ok is false for a storage storage.cfg does not have.
type StorageFacts func(id string) (thin, discard, ok bool)

// Judge turns a VM's backups into check's view of them.
func Judge(backups []Backup, facts StorageFacts) []VMBackup {
	var out []VMBackup
	for _, b := range backups {
		vb := VMBackup{Job: b.Job, Fleecing: b.Fleecing.Enabled, FleecingFrom: b.From}
		if b.Fleecing.Enabled {
			vb.FleecingStorage = b.Fleecing.Storage
			thin, discard, ok := facts(b.Fleecing.Storage)
			switch {
			case b.Fleecing.Storage == "":
				vb.Unsuitable = "no fleecing storage is set (vzdump refuses: 'storage' parameter is required when 'enabled' is set)"
			case !ok:
				vb.Unsuitable = "storage " + b.Fleecing.Storage + " is not in storage.cfg"
			case !thin && !discard:
				vb.Unsuitable = "storage " + b.Fleecing.Storage + " is neither thin nor does a discard return space: each fleecing image takes the disk's full size while the backup runs"
			case !thin:
				vb.Unsuitable = "storage " + b.Fleecing.Storage + " is not thin: each fleecing image takes the disk's full size while the backup runs"
			case !discard:
				vb.Unsuitable = "a discard on storage " + b.Fleecing.Storage + " does not return space: the fleecing image keeps what the backup already copied"
			}
		}
		out = append(out, vb)
	}
	return out
}
