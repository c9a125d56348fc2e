package qemuserver

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/internal/corpus"
	"github.com/pvediskcheck/pvediskcheck/internal/pveoracle"
)

// sectionHeaderRe finds a storage.cfg section's header and its type.
var sectionHeaderRe = regexp.MustCompile(`(?m)^(\S+):\s*(\S+)\s*$`)

// TestStorageSectionsAsProxmox: of every section of the corpora's
// storage.cfg files (../shared/real-world, ../shared/pve-cfg2cmd), the
// storages the tests add to them (check/testdata/realworld), the shapes'
// and every-type fixtures', and sections missing what their type
// requires, the tool keeps exactly the ones pve-storage's parse_config
// keeps (../shared/pve-oracle), and says of each one it drops for a
// missing option which option, as Proxmox's warning does. Sections of a
// type pve-storage does not register (a third-party plugin's, which a
// node with the plugin keeps) and the `local` Proxmox makes up where the
// file has none are not compared.
func TestStorageSectionsAsProxmox(t *testing.T) {
	var names, texts []string
	add := func(pattern string) {
		files, _ := filepath.Glob(pattern)
		if len(files) == 0 {
			t.Fatalf("no %s", pattern)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			names, texts = append(names, f), append(texts, string(b))
		}
	}
	add(filepath.Join(corpus.Dir(t, corpus.RealWorld), "storage", "*.storage.cfg"))
	add(filepath.Join(corpus.Dir(t, corpus.CFG2CMD), "storage.cfg"))
	add(filepath.Join("..", "check", "testdata", "realworld", "*.storage.cfg"))
	add(filepath.Join("..", "check", "testdata", "shapes", "storage.cfg"))
	add(filepath.Join("testdata", "shapes", "storage.cfg"))
	add(filepath.Join("..", "storage", "testdata", "every-type.cfg"))
	for _, s := range []string{
		"zfs: zz\n\tpool tank\n\tportal 192.0.2.1\n\ttarget iqn.x\n\tiscsiprovider LIO\n",
		"lvmthin: tt\n\tvgname pve\n\nlvmthin: t2\n\tthinpool data\n\nlvm: vv\n\tcontent images\n",
		"nfs: nn\n\tserver 192.0.2.2\n\texport /e\n\nnfs: n2\n\tserver 192.0.2.2\n\ncifs: cc\n\tserver 192.0.2.3\n\ncephfs: ce\n\tcontent iso\n",
		"iscsi: ii\n\tportal 192.0.2.4\n\niscsidirect: id\n\ttarget iqn.y\n\nzfspool: zp\n\tsparse 1\n\nrbd: rb\n\tcontent images\n",
		"btrfs: bt\n\tnocow 1\n\ndir: dd\n\tpath\n\npbs: pb\n\tserver 192.0.2.5\n\nesxi: es\n\tserver 192.0.2.6\n",
		"lvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n\nlvmthin: local-lvm\n\tvgname pve\n",
	} {
		names, texts = append(names, "inline:"+strings.SplitN(s, "\n", 2)[0]), append(texts, s)
	}
	res, err := pveoracle.For(t).Storages(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	kept, dropped := 0, 0
	for i, text := range texts {
		st, skipped, err := ParseStoragesSkipped(strings.NewReader(text), "storage.cfg")
		if err != nil {
			t.Errorf("%s: %v", names[i], err)
			continue
		}
		// The sections compared: those of a type pve-storage registers.
		asked := map[string]bool{}
		for _, m := range sectionHeaderRe.FindAllStringSubmatch(text, -1) {
			if _, registered := res.Required[strings.ToLower(m[1])]; registered {
				asked[m[2]] = true
			}
		}
		var tool, proxmox []string
		for id := range st {
			if asked[id] {
				tool = append(tool, id)
			}
		}
		for _, id := range res.Files[i].Kept {
			if asked[id] {
				proxmox = append(proxmox, id)
			}
		}
		slices.Sort(tool)
		if !slices.Equal(tool, proxmox) {
			t.Errorf("%s: the tool keeps %q, Proxmox %q (its warnings: %q)", names[i], tool, proxmox, res.Files[i].Warnings)
		}
		kept += len(proxmox)
		// Each section Proxmox drops for a missing option: the tool says
		// so, naming it.
		for _, w := range res.Files[i].Warnings {
			m := regexp.MustCompile(`skip section '([^']+)'\): missing value for required option '([^']+)'`).FindStringSubmatch(w)
			if m == nil {
				continue
			}
			dropped++
			if !slices.ContainsFunc(skipped, func(s string) bool {
				return strings.Contains(s, `section "`+m[1]+`" skipped: it lacks `) && strings.Contains(s, m[2])
			}) {
				t.Errorf("%s: Proxmox warns %q; the tool's notes %q", names[i], w, skipped)
			}
		}
	}
	if dropped < 10 {
		t.Errorf("only %d sections dropped for a missing option: the cases did not exercise the rule", dropped)
	}
	t.Logf("%d files: %d sections kept by both, %d dropped by both for a missing option", len(texts), kept, dropped)
}
