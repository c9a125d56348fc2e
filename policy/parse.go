package policy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// The values a requirement or selector takes, listed in errors as they are
// here.
var (
	cacheModes = []string{"none", "writethrough", "writeback", "directsync", "unsafe"}
	aioModes   = []string{"native", "threads", "io_uring"}
	// controllers: qemu-server's SCSI controllers (scsihw) and the other
	// buses' (qemuserver.Controller).
	controllers = append(append([]string(nil), qemuserver.SCSIControllers...), "virtio-blk", "sata", "ide")
	kinds       = []string{"disk", "cdrom"}
	buses       = []string{"ide", "sata", "scsi", "virtio"}
	severities  = []string{string(SeverityWarning), string(SeverityError)}
	// limitKeys: the base rates a rule may bound (bursts and their
	// lengths ride on them).
	limitKeys = []string{"mbps", "mbps_rd", "mbps_wr", "iops", "iops_rd", "iops_wr"}
)

// Keys of each mapping, in the order errors list them.
var (
	topKeys     = []string{"version", "rules"}
	ruleKeys    = []string{"name", "severity", "match", "require"}
	matchKeys   = []string{"storage", "storage_type", "tag", "pool", "vmid", "kind", "bus"}
	requireKeys = []string{"cache", "aio", "discard", "iothread", "ssd", "controller", "limits", "backup", "replicate"}
	boundKeys   = []string{"at_most", "at_least"}
)

// Patterns of the names a selector takes (with shell pattern characters
// where a pattern is allowed): pve-storage-id, storage.cfg's types,
// pve-tag, pve-poolid (up to three levels).
var (
	ruleNameRe    = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
	storagePatRe  = regexp.MustCompile(`^[A-Za-z0-9_.*?\[\]-]+$`)
	storageTypeRe = regexp.MustCompile(`^[a-z][a-z0-9]*$`)
	tagPatRe      = regexp.MustCompile(`(?i)^[a-z0-9_*?\[\]][a-z0-9_+.*?\[\]-]*$`)
	poolPatRe     = regexp.MustCompile(`^[A-Za-z0-9._*?\[\]-]+(/[A-Za-z0-9._*?\[\]-]+){0,2}$`)
	yamlLineRe    = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)
)

// Version is the schema version this parser reads (version: 1, optional).
const Version = 1

// Parse reads a policy file (name is how messages name it). Anything it
// does not understand is an *Error; a file it returns is whole.
func Parse(name string, data []byte) (*Policy, error) {
	p := &parser{file: name}
	if len(data) > MaxBytes {
		return nil, p.err(0, "", fmt.Sprintf("is %d bytes, larger than %d KiB: not a policy", len(data), MaxBytes>>10))
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, p.err(0, "", "is empty: a policy has rules")
		}
		return nil, p.yamlErr(err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); err == nil {
		return nil, p.err(more.Line, "", "a second YAML document: a policy is one document")
	} else if !errors.Is(err, io.EOF) {
		return nil, p.yamlErr(err)
	}
	pol := &Policy{File: name}
	if err := p.top(&doc, pol); err != nil {
		return nil, err
	}
	return pol, nil
}

type parser struct {
	file string
	reqs int // requirements numbered so far
}

func (p *parser) err(line int, key, msg string) error {
	return &Error{File: p.file, Line: line, Key: key, Msg: msg}
}

// yamlErr makes the YAML library's message one of ours, with its line.
func (p *parser) yamlErr(err error) error {
	msg := err.Error()
	if m := yamlLineRe.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return p.err(line, "", "not YAML: "+m[2])
	}
	return p.err(0, "", "not YAML: "+strings.TrimPrefix(msg, "yaml: "))
}

// mapping checks that n is a mapping whose keys are known, each once, and
// calls each with its value, in the file's order.
func (p *parser) mapping(n *yaml.Node, key string, known []string, each func(k string, v *yaml.Node, key string) error) error {
	if err := p.plain(n, key); err != nil {
		return err
	}
	if n.Kind != yaml.MappingNode {
		return p.err(n.Line, key, "is "+nodeKind(n)+", not a mapping of "+strings.Join(known, ", "))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		kn, vn := n.Content[i], n.Content[i+1]
		sub := joinKey(key, kn.Value)
		if kn.Kind != yaml.ScalarNode || kn.Tag != "!!str" {
			return p.err(kn.Line, key, fmt.Sprintf("a key that is not a name (%s)", clip(kn.Value)))
		}
		if !slices.Contains(known, kn.Value) {
			return p.err(kn.Line, sub, "unknown key (known: "+strings.Join(known, ", ")+")")
		}
		if seen[kn.Value] {
			return p.err(kn.Line, sub, "given twice")
		}
		seen[kn.Value] = true
		if err := p.plain(vn, sub); err != nil {
			return err
		}
		if vn.Kind == yaml.ScalarNode && vn.Tag == "!!null" {
			return p.err(vn.Line, sub, "has no value")
		}
		if err := each(kn.Value, vn, sub); err != nil {
			return err
		}
	}
	return nil
}

// plain refuses what a policy has no use for and would make it hard to
// read: aliases, explicit tags.
func (p *parser) plain(n *yaml.Node, key string) error {
	if n.Kind == yaml.AliasNode {
		return p.err(n.Line, key, "is a YAML alias (*"+n.Value+"): write the value out")
	}
	if n.Style&yaml.TaggedStyle != 0 {
		return p.err(n.Line, key, "has an explicit YAML tag ("+n.Tag+"): write the value plainly")
	}
	return nil
}

func joinKey(parent, k string) string {
	if parent == "" {
		return k
	}
	return parent + "." + k
}

func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return "a single value (" + clip(n.Value) + ")"
	}
	return "empty"
}

func (p *parser) top(doc *yaml.Node, pol *Policy) error {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return p.err(doc.Line, "", "is not a YAML document")
	}
	root := doc.Content[0]
	var rules *yaml.Node
	err := p.mapping(root, "", topKeys, func(k string, v *yaml.Node, key string) error {
		switch k {
		case "version":
			if v.Kind != yaml.ScalarNode || v.Tag != "!!int" || v.Value != strconv.Itoa(Version) {
				return p.err(v.Line, key, fmt.Sprintf("%s: this pvediskcheck reads version %d", clip(v.Value), Version))
			}
		case "rules":
			rules = v
		}
		return nil
	})
	if err != nil {
		return err
	}
	if rules == nil {
		return p.err(root.Line, "rules", "missing: a policy is a list of rules")
	}
	if rules.Kind != yaml.SequenceNode || len(rules.Content) == 0 {
		return p.err(rules.Line, "rules", "is "+nodeKind(rules)+", not a list of rules")
	}
	names := map[string]int{}
	for i, rn := range rules.Content {
		key := fmt.Sprintf("rules[%d]", i)
		r, err := p.rule(rn, key)
		if err != nil {
			return err
		}
		if at, dup := names[r.Name]; dup {
			return p.err(r.Line, key+".name", fmt.Sprintf("%q is the name of the rule at line %d too: each rule has its own", r.Name, at))
		}
		names[r.Name] = r.Line
		r.index = len(pol.Rules)
		pol.Rules = append(pol.Rules, r)
	}
	return nil
}

func (p *parser) rule(n *yaml.Node, key string) (*Rule, error) {
	r := &Rule{Line: n.Line, Severity: SeverityWarning}
	var require *yaml.Node
	err := p.mapping(n, key, ruleKeys, func(k string, v *yaml.Node, sub string) error {
		switch k {
		case "name":
			s, err := p.scalar(v, sub)
			if err != nil {
				return err
			}
			if !ruleNameRe.MatchString(s) {
				return p.err(v.Line, sub, fmt.Sprintf("%s: a rule's name is letters, digits, '_', '.' and '-', at most 63 (it names the rule in findings and metrics)", clip(s)))
			}
			r.Name = s
		case "severity":
			s, err := p.oneOf(v, sub, severities)
			if err != nil {
				return err
			}
			r.Severity = Severity(s)
		case "match":
			return p.match(v, sub, &r.Match)
		case "require":
			require = v
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if r.Name == "" {
		return nil, p.err(n.Line, key+".name", "missing: every rule has a name")
	}
	if require == nil {
		return nil, p.err(n.Line, key+".require", "missing: a rule that requires nothing checks nothing")
	}
	if err := p.require(require, key+".require", r); err != nil {
		return nil, err
	}
	return r, nil
}

// scalar is a single text value.
func (p *parser) scalar(v *yaml.Node, key string) (string, error) {
	if v.Kind != yaml.ScalarNode {
		return "", p.err(v.Line, key, "is "+nodeKind(v)+", not a single value")
	}
	return v.Value, nil
}

// oneOf is a single value of a list of names.
func (p *parser) oneOf(v *yaml.Node, key string, allowed []string) (string, error) {
	s, err := p.scalar(v, key)
	if err != nil {
		return "", err
	}
	if !slices.Contains(allowed, s) {
		return "", p.err(v.Line, key, fmt.Sprintf("%s is not one of %s", clip(s), strings.Join(allowed, ", ")))
	}
	return s, nil
}

// values is a single value or a non-empty list of them, each checked.
func (p *parser) values(v *yaml.Node, key string, check func(s string) string) ([]Value, error) {
	items := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		if len(v.Content) == 0 {
			return nil, p.err(v.Line, key, "is an empty list: give a value, or leave the key out")
		}
		items = v.Content
	}
	var out []Value
	for _, it := range items {
		if err := p.plain(it, key); err != nil {
			return nil, err
		}
		if it.Kind == yaml.ScalarNode && it.Tag == "!!null" {
			return nil, p.err(it.Line, key, "is empty, not a value or a list of values")
		}
		if it.Kind != yaml.ScalarNode {
			return nil, p.err(it.Line, key, "is "+nodeKind(it)+", not a value or a list of values")
		}
		if why := check(it.Value); why != "" {
			return nil, p.err(it.Line, key, clip(it.Value)+": "+why)
		}
		out = append(out, Value{Text: it.Value, Line: it.Line, Key: key})
	}
	return out, nil
}

// in checks a value against a list of names.
func in(allowed []string, what string) func(string) string {
	return func(s string) string {
		if slices.Contains(allowed, s) {
			return ""
		}
		return "not " + what + " (" + strings.Join(allowed, ", ") + ")"
	}
}

// pattern checks a shell pattern of names re describes.
func pattern(re *regexp.Regexp, what string) func(string) string {
	return func(s string) string {
		if !re.MatchString(s) {
			return "not " + what
		}
		if _, err := path.Match(s, ""); err != nil {
			return "not a valid pattern (" + err.Error() + ")"
		}
		return ""
	}
}

func (p *parser) match(n *yaml.Node, key string, m *Match) error {
	return p.mapping(n, key, matchKeys, func(k string, v *yaml.Node, sub string) error {
		var err error
		switch k {
		case "storage":
			m.Storage, err = p.values(v, sub, pattern(storagePatRe, "a storage ID or a pattern of them (ceph-*)"))
		case "storage_type":
			m.StorageType, err = p.values(v, sub, pattern(storageTypeRe, "a storage type as storage.cfg names it (rbd, lvmthin, zfspool, dir, nfs, ...)"))
		case "tag":
			m.Tag, err = p.values(v, sub, pattern(tagPatRe, "a Proxmox tag (letters, digits, '_', '-', '+', '.') or a pattern of them"))
		case "pool":
			m.Pool, err = p.values(v, sub, pattern(poolPatRe, "a Proxmox pool name (up to three levels a/b/c) or a pattern of them"))
		case "vmid":
			m.VMID, err = p.vmids(v, sub)
		case "kind":
			m.Kind, err = p.values(v, sub, in(kinds, "a drive kind a rule can require settings of"))
		case "bus":
			m.Bus, err = p.values(v, sub, in(buses, "a bus"))
		}
		return err
	})
}

// vmids reads VMIDs and ranges: 100, "100-199", or a list of them.
func (p *parser) vmids(v *yaml.Node, key string) ([]Range, error) {
	var out []Range
	_, err := p.values(v, key, func(s string) string {
		a, b, isRange := strings.Cut(s, "-")
		from, err := qemuserver.ParseVMID(strings.TrimSpace(a))
		if err != nil {
			return "not a VMID or a range of them (100, 100-199)"
		}
		to := from
		if isRange {
			if to, err = qemuserver.ParseVMID(strings.TrimSpace(b)); err != nil {
				return "not a range of VMIDs (100-199)"
			}
			if to < from {
				return "the range ends before it starts"
			}
		}
		out = append(out, Range{From: from, To: to, Value: Value{Text: s, Key: key}})
		return ""
	})
	if err != nil {
		return nil, err
	}
	// values checked every item in order: give each range its line.
	items := []*yaml.Node{v}
	if v.Kind == yaml.SequenceNode {
		items = v.Content
	}
	for i := range out {
		out[i].Line = items[i].Line
	}
	return out, nil
}

func (p *parser) require(n *yaml.Node, key string, r *Rule) error {
	add := func(q *Req) {
		q.rule, q.id = r, p.reqs
		p.reqs++
		r.Require = append(r.Require, q)
	}
	err := p.mapping(n, key, requireKeys, func(k string, v *yaml.Node, sub string) error {
		q := &Req{Setting: Setting(k), Line: v.Line, Key: sub}
		switch k {
		case "cache", "aio", "controller":
			allowed := map[string][]string{"cache": cacheModes, "aio": aioModes, "controller": controllers}[k]
			vals, err := p.values(v, sub, in(allowed, "a "+map[string]string{"cache": "cache mode", "aio": "aio mode", "controller": "controller"}[k]))
			if err != nil {
				return err
			}
			for _, x := range vals {
				if !slices.Contains(q.OneOf, x.Text) {
					q.OneOf = append(q.OneOf, x.Text)
				}
			}
		case "discard", "iothread", "ssd", "backup", "replicate":
			b, err := p.boolean(v, sub)
			if err != nil {
				return err
			}
			q.Want = b
		case "limits":
			return p.limits(v, sub, add)
		}
		add(q)
		return nil
	})
	if err != nil {
		return err
	}
	if len(r.Require) == 0 {
		return p.err(n.Line, key, "requires nothing: give at least one setting")
	}
	return p.coherent(r, key)
}

// boolean reads a yes/no value as Proxmox reads one (1/on/yes/true,
// 0/off/no/false).
func (p *parser) boolean(v *yaml.Node, key string) (bool, error) {
	s, err := p.scalar(v, key)
	if err != nil {
		return false, err
	}
	b, ok := qemuserver.ParseBool(strings.ToLower(s))
	if !ok {
		return false, p.err(v.Line, key, clip(s)+" is not yes or no (true/false, on/off, 1/0)")
	}
	return b, nil
}

func (p *parser) limits(n *yaml.Node, key string, add func(*Req)) error {
	count := 0
	err := p.mapping(n, key, limitKeys, func(k string, v *yaml.Node, sub string) error {
		var lk qemuserver.LimitKey
		for _, x := range qemuserver.LimitKeys {
			if x.Proxmox == k {
				lk = x
			}
		}
		l := &LimitReq{Key: lk}
		err := p.mapping(v, sub, boundKeys, func(b string, bv *yaml.Node, bsub string) error {
			x, err := p.bound(bv, bsub, lk)
			if err != nil {
				return err
			}
			if b == "at_most" {
				l.AtMost = x
			} else {
				l.AtLeast = x
			}
			return nil
		})
		if err != nil {
			return err
		}
		if l.AtMost == 0 && l.AtLeast == 0 {
			return p.err(v.Line, sub, "no bound: give at_most, at_least or both")
		}
		if l.AtMost > 0 && l.AtLeast > l.AtMost {
			return p.err(v.Line, sub, fmt.Sprintf("at_least %s is more than at_most %s", num(l.AtLeast), num(l.AtMost)))
		}
		add(&Req{Setting: Setting("limits." + k), Line: v.Line, Key: sub, Limit: l})
		count++
		return nil
	})
	if err == nil && count == 0 {
		err = p.err(n.Line, key, "no limit given")
	}
	return err
}

// bound reads one limit bound: a positive number (an integer for iops*)
// that QEMU takes (at most 10^15 bytes or operations a second).
func (p *parser) bound(v *yaml.Node, key string, lk qemuserver.LimitKey) (float64, error) {
	if v.Kind != yaml.ScalarNode || v.Tag != "!!int" && v.Tag != "!!float" {
		return 0, p.err(v.Line, key, clip(v.Value)+" is not a number")
	}
	x, err := strconv.ParseFloat(strings.ReplaceAll(v.Value, "_", ""), 64)
	if err != nil || math.IsInf(x, 0) || math.IsNaN(x) || x <= 0 {
		return 0, p.err(v.Line, key, clip(v.Value)+" is not a positive number")
	}
	if strings.HasPrefix(lk.Proxmox, "iops") && x != math.Trunc(x) {
		return 0, p.err(v.Line, key, clip(v.Value)+" is not a whole number of operations")
	}
	if x*lk.Scale > qemuserver.ThrottleValueMax {
		return 0, p.err(v.Line, key, clip(v.Value)+" is beyond what QEMU takes ("+qemuserver.QEMUThrottleRangeMsg+")")
	}
	return x, nil
}

// coherent refuses a rule whose requirements no disk can meet together:
// what QEMU refuses to start with, or what no controller gives.
func (p *parser) coherent(r *Rule, key string) error {
	get := func(s Setting) *Req {
		for _, q := range r.Require {
			if q.Setting == s {
				return q
			}
		}
		return nil
	}
	if a, c := get(AIO), get(Cache); a != nil && c != nil && slices.Equal(a.OneOf, []string{"native"}) {
		for _, m := range c.OneOf {
			if !qemuserver.CacheOf(m).Direct {
				return p.err(a.Line, a.Key, "native with cache "+m+": QEMU refuses to start (aio=native needs cache.direct, which only none and directsync give)")
			}
		}
	}
	if c := get(Controller); c != nil {
		if t := get(IOThread); t != nil && t.Want && !slices.Contains(c.OneOf, "virtio-scsi-single") && !slices.Contains(c.OneOf, "virtio-blk") {
			return p.err(t.Line, t.Key, "an IO thread needs controller virtio-scsi-single or virtio-blk, which "+c.Key+" does not allow")
		}
		if s := get(SSD); s != nil && s.Want && slices.Equal(c.OneOf, []string{"virtio-blk"}) {
			return p.err(s.Line, s.Key, "VirtIO Block has no ssd emulation (Proxmox offers it on SCSI, SATA and IDE)")
		}
	}
	for _, dir := range []string{"rd", "wr"} {
		for _, kind := range []string{"mbps", "iops"} {
			t, d := get(Setting("limits."+kind)), get(Setting("limits."+kind+"_"+dir))
			if t != nil && d != nil && t.Limit.AtMost > 0 && d.Limit.AtMost > 0 {
				return p.err(d.Line, d.Key, "at_most with "+kind+" at_most too: a disk has either a total or per-direction limits (Proxmox refuses both on one disk)")
			}
		}
	}
	return nil
}

// clip keeps an echoed value short and printable.
func clip(s string) string {
	if len(s) > 40 {
		s = s[:40] + "..."
	}
	return strconv.Quote(s)
}
