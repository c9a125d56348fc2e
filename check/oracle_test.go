package check

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/internal/pveoracle"
)

// TestSSDOnVirtIOAsProxmox: ssd-unsupported is an error because Proxmox
// (parse_vm_config, asked through the oracle) drops such a line, so the VM
// starts without the disk; and its fix, asked of update_vm, is accepted
// and writes a line Proxmox keeps. The parses go in one batch each.
func TestSSDOnVirtIOAsProxmox(t *testing.T) {
	o := pveoracle.For(t)
	ctx := context.Background()
	var before, after []pveoracle.Config
	var fixes [][]string
	for _, c := range ruleCases() {
		if !strings.Contains(strings.Join(c.want, "\n"), "ssd-unsupported") {
			continue
		}
		tn := newNode(t)
		tn.conf(100, c.conf)
		f := find(tn.check(100, quietRunner(), Options{}), CodeSSDUnsupported, "virtio0")
		if f == nil || f.Severity != Error || f.Command == nil {
			t.Fatalf("%s: ssd-unsupported: %+v", c.name, f)
		}
		qs, err := o.QmSet(ctx, pveoracle.QmSetRequest{VMID: 100, Args: f.Command[3:], Config: c.conf, StorageCfg: storageCfg})
		if err != nil {
			t.Fatal(err)
		}
		if !qs.Accepted {
			t.Errorf("%s: %q refused: %s", c.name, f.Command, qs.Refusal())
			continue
		}
		before = append(before, pveoracle.Config{Name: c.name, VMID: 100, Text: c.conf})
		after = append(after, pveoracle.Config{Name: c.name + " fixed", VMID: 100, Text: qs.NewConfig})
		fixes = append(fixes, f.Command)
	}
	if len(before) < 3 {
		t.Fatalf("%d ssd cases accepted", len(before))
	}
	res, err := o.Parse(ctx, append(before, after...))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		want, wantMsg := pveoracle.LineDropped, "ssd: property is not defined in schema"
		if i >= len(before) {
			want, wantMsg = pveoracle.LineOK, ""
		}
		for _, l := range r.Parse.Lines {
			if l.Key == "virtio0" && (l.Verdict != want || !strings.Contains(strings.Join(l.Messages, " "), wantMsg)) {
				t.Errorf("%s: Proxmox's verdict on %q: %s %q, want %s (fix %q)", r.Config.Name, l.Text, l.Verdict, l.Messages, want, fixes[i%len(before)])
			}
		}
	}
}

// lineEdit is a fix that edits the config file.
var lineEdit = regexp.MustCompile(`edit /etc/pve/qemu-server/100\.conf: the line '([^']*)' becomes '([^']*)'`)

// TestRuleFixesAcceptedByProxmox: every fix of every rule case, asked of
// Proxmox: each qm set through update_vm is accepted (protection: 1 and
// ISO volumes included: no move and no media=cdrom beside format= is
// printed), and each file edit gives a config Proxmox builds a command
// line for (an ISO volume with media=disk starts; without media= it did
// not). Where the oracle cannot answer (a krbd path needs ceph.conf's
// fsid) the case is counted, not judged.
func TestRuleFixesAcceptedByProxmox(t *testing.T) {
	o := pveoracle.For(t)
	ctx := context.Background()
	asked, accepted, unanswered := 0, 0, 0
	var edited, refusedBefore []pveoracle.Config
	for _, c := range ruleCases() {
		if c.images != nil {
			continue // a node's image files: the oracle has every volume
		}
		tn := newNode(t)
		tn.conf(100, c.conf)
		seen := map[string]bool{}
		for _, f := range tn.check(100, quietRunner(), Options{}).Findings {
			if seen[f.Fix] {
				continue
			}
			seen[f.Fix] = true
			if f.Command != nil {
				asked++
				res, err := o.QmSet(ctx, pveoracle.QmSetRequest{VMID: 100, Args: f.Command[3:], Config: c.conf, StorageCfg: storageCfg})
				if err != nil {
					t.Fatal(err)
				}
				switch {
				case res.Accepted:
					accepted++
				case res.Cannot():
					unanswered++
				default:
					t.Errorf("%s: %s %s: Proxmox refuses %q: %s", c.name, f.Code, f.Disk, f.Command, res.Refusal())
				}
			}
			if m := lineEdit.FindStringSubmatch(f.Fix); m != nil && f.Command == nil && !strings.HasPrefix(f.Fix, "qm set") {
				fixed := strings.Replace(c.conf, m[1]+"\n", m[2]+"\n", 1)
				if fixed == c.conf {
					t.Errorf("%s: the edit's line %q is not in the config", c.name, m[1])
					continue
				}
				edited = append(edited, pveoracle.Config{Name: c.name + ": " + f.Fix, VMID: 100, Text: fixed})
				if f.Code == CodeConfigInvalid {
					refusedBefore = append(refusedBefore, pveoracle.Config{Name: c.name, VMID: 100, Text: c.conf})
				}
			}
		}
	}
	res, err := o.Cmdline(ctx, pveoracle.CmdOptions{StorageCfg: storageCfg}, append(append([]pveoracle.Config{}, edited...), refusedBefore...))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if i < len(edited) && (r.Cmd == nil || !r.Cmd.OK) {
			t.Errorf("%s: Proxmox builds no command line for the edited config: %+v", r.Config.Name, r.Cmd)
		}
		if i >= len(edited) && (r.Cmd == nil || r.Cmd.OK) {
			t.Errorf("%s: config-invalid, but Proxmox builds a command line for it", r.Config.Name)
		}
	}
	t.Logf("rule cases: %d/%d qm set fixes accepted (%d the oracle cannot judge: krbd without ceph.conf), %d file edits start", accepted, asked-unanswered, unanswered, len(edited))
	if len(edited) < 3 || accepted < 40 {
		t.Errorf("only %d edits and %d accepted fixes", len(edited), accepted)
	}
}
