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
// text Proxmox would refuse (an unknown key, a bad boolean).
func ParseFleecing(s string) (Fleecing, bool) {
	var f Fleecing
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		k, v, has := strings.Cut(part, "=")
		if !has {
			k, v = "enabled", part // enabled is the default key
		}
		switch strings.TrimSpace(k) {
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

// ParseVzdumpConf reads /etc/vzdump.conf's text.
func ParseVzdumpConf(text string) Defaults {
	var d Defaults
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if ok && strings.TrimSpace(k) == "fleecing" {
			if f, ok := ParseFleecing(v); ok {
				d.Fleecing = &f
			}
		}
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

// ParseJobs reads the vzdump sections of jobs.cfg (other job types, and
// their lines, are skipped).
func ParseJobs(text string) []Job {
	var out []Job
	var cur *Job
	for _, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" || strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if line[0] != ' ' && line[0] != '\t' {
			cur = nil
			typ, id, ok := strings.Cut(line, ":")
			if ok && strings.TrimSpace(typ) == "vzdump" {
				out = append(out, Job{ID: strings.TrimSpace(id), Enabled: true})
				cur = &out[len(out)-1]
			}
			continue
		}
		if cur == nil {
			continue
		}
		k, v, _ := strings.Cut(strings.TrimSpace(line), " ")
		v = strings.TrimSpace(v)
		switch k {
		case "enabled":
			cur.Enabled, _ = parseBool(v)
		case "all":
			cur.All, _ = parseBool(v)
		case "vmid":
			cur.VMIDs = ids(v)
		case "exclude":
			cur.Exclude = ids(v)
		case "pool":
			cur.Pool = v
		case "node":
			cur.Nodes = strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == ';' || r == ' ' })
		case "fleecing":
			if f, ok := ParseFleecing(v); ok {
				cur.Fleecing = &f
			}
		}
	}
	for i := range out {
		if len(out[i].Exclude) > 0 && out[i].Pool == "" {
			out[i].All = true // PVE::VZDump: exclude without pool means all
		}
	}
	return out
}

// ids reads a pve-vmid-list ("100,101 102").
func ids(s string) []int {
	var out []int
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ';' || r == ' ' }) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// Covers says whether the job backs up vmid on node; pool is true when
// the job selects by pool, which this package cannot resolve.
func (j Job) Covers(vmid int, node string) (covers, pool bool) {
	if !j.Enabled || len(j.Nodes) > 0 && !slices.Contains(j.Nodes, node) {
		return false, false
	}
	switch {
	case j.Pool != "":
		return false, true
	case slices.Contains(j.VMIDs, vmid):
		return true, false
	case j.All:
		return !slices.Contains(j.Exclude, vmid), false
	}
	return false, false
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
// fleecing it runs with, and the jobs that select by pool (not resolved).
func (c Config) ForVM(vmid int, node string) (backups []Backup, byPool []string) {
	for _, j := range c.Jobs {
		covers, pool := j.Covers(vmid, node)
		if pool {
			byPool = append(byPool, j.ID)
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
	return backups, byPool
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
