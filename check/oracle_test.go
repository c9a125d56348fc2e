package check

import (
	"context"
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
