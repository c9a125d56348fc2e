package qemuserver

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

// TestParseSnapshotsHostile: the snapshot sections volchain reads the
// config's chain from, in the shapes a real config can take beside the
// ones it should not. Before, a line over 1 MiB (a long description in a
// snapshot; ParseConfig takes up to 4 MiB) ended the reading silently, so
// every later snapshot was missing and volchain said QEMU's chain had a
// layer "the config's snapshots do not name"; "[pending]" was a snapshot,
// and so was a section qemu-server does not take as one ("[vor-Übung]").
func TestParseSnapshotsHostile(t *testing.T) {
	long := "#" + strings.Repeat("x", 1536<<10) // 1.5 MiB description line
	for _, c := range []struct {
		name, text string
		want       map[string]string // snapshot -> its parent and virtio0, "parent|virtio0"
		lineage    []string          // from the main section's parent
	}{
		{"two snapshots", "parent: sb\nvirtio0: lvm:vm-1-disk-0.qcow2\n\n[sa]\nvirtio0: lvm:vm-1-disk-0.qcow2\n\n[sb]\nparent: sa\nvirtio0: lvm:vm-1-disk-0.qcow2\n",
			map[string]string{"sa": "|lvm:vm-1-disk-0.qcow2", "sb": "sa|lvm:vm-1-disk-0.qcow2"}, []string{"sb", "sa"}},
		{"CRLF", "parent: sb\r\n\r\n[sa]\r\nvirtio0: x\r\n\r\n[sb]\r\nparent: sa\r\n", map[string]string{"sa": "|x", "sb": "sa|"}, []string{"sb", "sa"}},
		{"a line over 1 MiB before the last snapshot", "parent: sb\n\n[sa]\n" + long + "\nvirtio0: x\n\n[sb]\nparent: sa\nvirtio0: y\n",
			map[string]string{"sa": "|x", "sb": "sa|y"}, []string{"sb", "sa"}},
		{"pending and special sections are no snapshots", "parent: sa\n[PENDING]\nvirtio0: p\n[pending]\nvirtio0: q\n[special:cloudinit]\nvirtio0: c\n[sa]\nvirtio0: x\n",
			map[string]string{"sa": "|x"}, []string{"sa"}},
		{"parent loop", "parent: sa\n[sa]\nparent: sb\n[sb]\nparent: sa\n", map[string]string{"sa": "sb|", "sb": "sa|"}, []string{"sa", "sb"}},
		{"parent with no section", "parent: gone\n[sa]\nvirtio0: x\n", map[string]string{"sa": "|x"}, nil},
		{"unicode snapshot name: no snapshot section", "parent: vor-Übung\n[vor-Übung]\nvirtio0: x\n", map[string]string{}, nil},
		{"snapshot names in any case", "parent: Before_Up-1\n[Before_Up-1]\nvirtio0: x\n", map[string]string{"Before_Up-1": "|x"}, []string{"Before_Up-1"}},
		{"truncated section header and line", "parent: sa\n[sa]\nvirtio0: x\n[sb\nvirt", map[string]string{"sa": "|x"}, []string{"sa"}},
		{"empty section name", "[]\nvirtio0: x\n", map[string]string{}, nil},
		{"one-letter name: no snapshot name", "parent: a\n[a]\nvirtio0: x\n", map[string]string{}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := ParseSnapshots([]byte(c.text))
			got := map[string]string{}
			for name, sec := range s {
				got[name] = sec["parent"] + "|" + sec["virtio0"]
			}
			cfg, err := ParseConfig(bytes.NewReader([]byte(c.text)), "t.conf")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, c.want) || !reflect.DeepEqual(s.Lineage(cfg.Main["parent"]), c.lineage) {
				t.Errorf("snapshots %q lineage %q, want %q %q", got, s.Lineage(cfg.Main["parent"]), c.want, c.lineage)
			}
		})
	}
}
