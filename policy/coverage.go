package policy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/storage/storagetype"
)

// Seen is what a run saw, which Coverage holds the selectors against.
type Seen struct {
	// Storages is storage.cfg (the cluster's, the same on every node);
	// nil when it could not be read: storage selectors are then not held
	// against it.
	Storages qemuserver.Storages
	// Pools is user.cfg's (nil Names and PoolsRead false when not read).
	Pools     Pools
	PoolsRead bool
	// All: the run checked every VM of the node, whose VMIDs and tags are
	// these; only then are VMID and tag selectors, and whole rules, held
	// against the VMs (a run of one VM selects little by design).
	All   bool
	VMIDs []int
	Tags  []string // lower-cased
	// Rules is Sum's count of the run.
	Rules []RuleCount
}

// Sum adds the VMs' rule counts up: one per rule of the file, in its order
// (a rule selecting nothing has 0 disks).
func (p *Policy) Sum(vms [][]RuleCount) []RuleCount {
	if p == nil {
		return nil
	}
	out := make([]RuleCount, len(p.Rules))
	for i, r := range p.Rules {
		out[i] = RuleCount{Rule: r.Name, Line: r.Line}
	}
	for _, counts := range vms {
		for _, c := range counts {
			for i := range out {
				if out[i].Rule == c.Rule {
					out[i].Disks += c.Disks
					out[i].Violations += c.Violations
				}
			}
		}
	}
	return out
}

// Coverage lists the selector values that match nothing the run saw: a
// storage, type or pool the cluster does not have (a typo, or a storage
// gone), and, when the run covered the node, tags, VMIDs and rules that
// select none of its VMs. A warning, never an error: the policy may be
// written for more nodes than this one.
func (p *Policy) Coverage(s Seen) []Warning {
	if p == nil {
		return nil
	}
	var out []Warning
	warn := func(v Value, msg string) {
		out = append(out, Warning{File: p.File, Line: v.Line, Key: v.Key, Message: fmt.Sprintf("%q %s", v.Text, msg)})
	}
	for i, r := range p.Rules {
		m := &r.Match
		if s.Storages != nil {
			for _, v := range m.Storage {
				if !slices.ContainsFunc(qemuserver.SortedKeys(s.Storages), func(id string) bool { return glob(v.Text, id) }) {
					warn(v, "matches no storage of storage.cfg")
				}
			}
			for _, v := range m.StorageType {
				found := false
				for _, st := range s.Storages {
					found = found || st.Type == v.Text
				}
				if !found {
					msg := "is the type of no storage of storage.cfg"
					if storagetype.Of(v.Text, nil) == &storagetype.Plugin {
						msg += " (nor one pve-storage registers; a third-party plugin's type is its own name)"
					}
					warn(v, msg)
				}
			}
		}
		if s.PoolsRead {
			for _, v := range m.Pool {
				if !slices.ContainsFunc(s.Pools.Names, func(n string) bool { return glob(v.Text, n) }) {
					warn(v, "matches no pool of "+UserCfg)
				}
			}
		}
		if !s.All {
			continue
		}
		for _, v := range m.Tag {
			if !slices.ContainsFunc(s.Tags, func(t string) bool { return glob(strings.ToLower(v.Text), t) }) {
				warn(v, "matches no tag of this node's VMs")
			}
		}
		for _, v := range m.VMID {
			if !slices.ContainsFunc(s.VMIDs, func(id int) bool { return v.From <= id && id <= v.To }) {
				warn(v.Value, "holds no VM of this node")
			}
		}
		if i < len(s.Rules) && s.Rules[i].Disks == 0 {
			out = append(out, Warning{File: p.File, Line: r.Line, Key: fmt.Sprintf("rules[%d]", i), Message: fmt.Sprintf("rule %s selects no disk of this node's VMs", r.Name)})
		}
	}
	return out
}
