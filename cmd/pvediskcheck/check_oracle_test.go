package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/internal/pveoracle"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// oracleStorage is the storage.cfg Proxmox reads for a case: the cfg2cmd
// corpus's own is not one it accepts (its README: fsid, the zfs section's
// blocksize), so the oracle's copy as Proxmox reads it stands in.
func oracleStorage(t *testing.T, o *pveoracle.Oracle, c fixCase) string {
	t.Helper()
	files := c.storage
	if strings.HasPrefix(c.name, "cfg2cmd/") {
		files = []string{filepath.Join(o.Dir(), "cfg2cmd-corpus.storage.cfg")}
	}
	var st []byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		st = append(append(st, b...), '\n')
	}
	return string(st)
}

// cannotWhy names what the oracle could not stand in for, for the count
// (pveoracle.QmSetResult.Cannot decides that it could not).
func cannotWhy(res pveoracle.QmSetResult) string {
	msg := res.Refusal()
	switch {
	case strings.Contains(msg, "RADOS"):
		return "an external Ceph cluster's fsid is asked of its monitors (PVE::RADOS is a stand-in)"
	case strings.Contains(msg, "not running host command"):
		return "ZFS over iSCSI asks the target over ssh (the oracle runs no host command)"
	case strings.Contains(msg, "cluster fsid has invalid format"):
		return "a krbd path needs ceph.conf's fsid (the oracle's /etc/pve has no ceph.conf)"
	}
	return "a compiled module's stand-in was called"
}

// stoppedNodeWith is stoppedNode with the config's text given.
func stoppedNodeWith(t *testing.T, c fixCase, conf string) node.Node {
	t.Helper()
	n := stoppedNode(t, c)
	if err := os.WriteFile(n.Paths.VMConfig(8006), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return n
}

// fileEdit is check's fix text for an edit of the config file.
var fileEdit = regexp.MustCompile(`edit /etc/pve/qemu-server/\d+\.conf: the line '([^']*)' becomes '([^']*)'`)

// applyEdit replaces the main section's line from with to.
func applyEdit(conf, from, to string) (string, bool) {
	lines := strings.SplitAfter(conf, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "[") {
			break
		}
		if strings.TrimRight(l, "\r\n") == from {
			lines[i] = to + "\n"
			return strings.Join(lines, ""), true
		}
	}
	return conf, false
}

// fixOf splits a finding's fix into the qm set it runs (nil when none) and
// the file edit it asks for ("" when none).
func fixOf(t *testing.T, f check.Finding) (argv []string, from, to string) {
	if f.Command != nil {
		return f.Command, "", ""
	}
	m := fileEdit.FindStringSubmatch(f.Fix)
	if m == nil {
		return nil, "", ""
	}
	if before, _, ok := strings.Cut(f.Fix, ", and edit "); ok && strings.HasPrefix(before, "qm set ") {
		before, _, _ = strings.Cut(before, " (")
		var err error
		if argv, err = qemuserver.SplitShell(before); err != nil {
			t.Errorf("%s %s: %q: %v", f.Code, f.Disk, before, err)
		}
	}
	return argv, strings.TrimPrefix(m[1], f.Disk+": "), strings.TrimPrefix(m[2], f.Disk+": ")
}

// TestCheckFixesAcceptedByProxmox (issue 32 item 3): every fix check
// prints for the cfg2cmd corpus, the real-world configs and check's
// shapes goes through Proxmox's own update_vm (pveoracle QmSet: the VM
// stopped, the caller root@pam): it is accepted; a fix that edits the file
// is applied, and Proxmox parses the result with no line dropped that was
// not dropped before. The config Proxmox writes, checked again, no longer
// carries the findings the fix names (on the disk, or the disk it moved
// to) and carries no error that was not there before.
func TestCheckFixesAcceptedByProxmox(t *testing.T) {
	o := pveoracle.For(t)
	ctx := context.Background()
	type applied struct {
		c        fixCase
		name     string
		before   check.VMResult
		fs       []check.Finding
		argv     []string
		conf     string // the config after the fix
		oldConf  string
		refusal  string
		editFrom string
	}
	var runs []*applied
	total, accepted := 0, 0
	unanswered := map[string]int{}
	start := time.Now()
	for _, c := range fixCorpus(t) {
		raw, err := os.ReadFile(c.conf)
		if err != nil {
			t.Fatal(err)
		}
		conf := string(raw)
		before := checkStopped(t, stoppedNode(t, c))
		byFix := map[string][]check.Finding{}
		var order []string
		for _, f := range before.Findings {
			argv, from, _ := fixOf(t, f)
			if argv == nil && from == "" {
				continue
			}
			k := f.Fix
			if byFix[k] == nil {
				order = append(order, k)
			}
			byFix[k] = append(byFix[k], f)
		}
		st := oracleStorage(t, o, c)
		for _, k := range order {
			fs := byFix[k]
			argv, from, to := fixOf(t, fs[0])
			total++
			a := &applied{c: c, name: c.name + ": " + k, before: before, fs: fs, argv: argv, conf: conf, oldConf: conf, editFrom: from}
			runs = append(runs, a)
			if argv != nil {
				res, err := o.QmSet(ctx, pveoracle.QmSetRequest{VMID: 8006, Args: argv[3:], Config: conf, StorageCfg: st})
				if err != nil {
					t.Fatal(err)
				}
				if !res.Accepted {
					a.refusal = res.Refusal()
					if res.Cannot() {
						unanswered[cannotWhy(res)]++
						continue
					}
					t.Errorf("%s: Proxmox refuses %q: %s", c.name, argv, a.refusal)
					continue
				}
				a.conf = res.NewConfig
			}
			if from != "" {
				var ok bool
				if a.conf, ok = applyEdit(a.conf, fs[0].Disk+": "+from, fs[0].Disk+": "+to); !ok {
					a.refusal = "no such line"
					t.Errorf("%s: the edit's line %q is not in the config", c.name, fs[0].Disk+": "+from)
					continue
				}
			}
			accepted++
		}
	}
	// The edited configs, before and after, parsed by Proxmox in one batch.
	var parse []pveoracle.Config
	var edited []*applied
	for _, a := range runs {
		if a.refusal == "" && a.editFrom != "" {
			edited = append(edited, a)
			parse = append(parse, pveoracle.Config{Name: a.name, VMID: 8006, Text: a.oldConf}, pveoracle.Config{Name: a.name + " (edited)", VMID: 8006, Text: a.conf})
		}
	}
	res, err := o.Parse(ctx, parse)
	if err != nil {
		t.Fatal(err)
	}
	dropped := func(r pveoracle.Result) map[string]bool {
		out := map[string]bool{}
		for _, l := range r.Parse.Lines {
			if l.Verdict == pveoracle.LineDropped || l.Verdict == pveoracle.LineError {
				out[l.Section+" "+l.Key] = true
			}
		}
		return out
	}
	for i, a := range edited {
		was := dropped(res[2*i])
		for k := range dropped(res[2*i+1]) {
			if !was[k] {
				t.Errorf("%s: Proxmox drops %s of the edited config: %+v", a.name, k, res[2*i+1].Parse.Lines)
			}
		}
	}
	// Checked again: the findings fixed, nothing new of severity error.
	codes := map[check.Code]int{}
	for _, a := range runs {
		if a.refusal != "" {
			continue
		}
		after := checkStopped(t, stoppedNodeWith(t, a.c, a.conf))
		moved := ""
		for i, x := range a.argv {
			if m := setKey.FindStringSubmatch(x); m != nil && i > 0 && a.argv[i-1] != "--delete" && slices.Contains(a.argv, "--delete") {
				moved = m[1]
			}
		}
		for _, f := range a.fs {
			codes[f.Code]++
			for _, g := range after.Findings {
				if g.Code == f.Code && (g.Disk == f.Disk || moved != "" && g.Disk == moved) {
					t.Errorf("%s: after the fix still %s %s: %s", a.name, g.Code, g.Disk, g.Message)
				}
			}
		}
		for _, g := range after.Findings {
			if g.Severity == check.Error && !slices.ContainsFunc(a.before.Findings, func(f check.Finding) bool { return f.Code == g.Code && f.Disk == g.Disk }) {
				t.Errorf("%s: after the fix a new error %s %s: %s", a.name, g.Code, g.Disk, g.Message)
			}
		}
	}
	n := 0
	for why, k := range unanswered {
		n += k
		t.Logf("%d fixes the oracle cannot judge: %s", k, why)
	}
	t.Logf("fixes accepted by Proxmox's update_vm %d/%d (%d more the oracle cannot judge; %d file edits parsed clean), fixing %v, in %s", accepted, total-n, n, len(edited), codes, time.Since(start).Round(time.Millisecond))
	if total < 50 {
		t.Errorf("only %d fixes: the corpora did not exercise them", total)
	}
}
