package policy

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

const coverageYAML = `rules:
  - name: a
    match:
      storage: [local-lvm, ceph-*, cehp-fast]
      storage_type: [rbd, rdb, purestorage, lvm]
      pool: [prod, lab/*, nosuch]
    require: {cache: none}
  - name: b
    match:
      tag: [web, db]
      vmid: [100-199, 900-999]
    require: {discard: on}
`

// TestCoverage: each selector value that matches nothing the run saw is
// one warning naming its line and key; values that match are not.
func TestCoverage(t *testing.T) {
	p := mustParse(t, coverageYAML)
	st, err := qemuserver.LoadStorages(filepath.Join("testdata", "storage.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join("testdata", "user.cfg"))
	seen := Seen{Storages: st, Pools: ParsePools(b), PoolsRead: true}
	cluster := []string{
		`policy t.yaml line 4: rules[0].match.storage: "cehp-fast" matches no storage of storage.cfg`,
		`policy t.yaml line 5: rules[0].match.storage_type: "rdb" is the type of no storage of storage.cfg (nor one pve-storage registers; a third-party plugin's type is its own name)`,
		`policy t.yaml line 5: rules[0].match.storage_type: "purestorage" is the type of no storage of storage.cfg (nor one pve-storage registers; a third-party plugin's type is its own name)`,
		`policy t.yaml line 6: rules[0].match.pool: "nosuch" matches no pool of /etc/pve/user.cfg`,
	}
	check := func(s Seen, want []string) {
		t.Helper()
		var got []string
		for _, w := range p.Coverage(s) {
			got = append(got, w.String())
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("\n got %s\nwant %s", strings.Join(got, "\n     "), strings.Join(want, "\n     "))
		}
	}
	// VMIDs given: the cluster's facts only.
	check(seen, cluster)
	// Nothing read: nothing to hold them against.
	check(Seen{}, nil)
	// --all: the node's VMs too; rule a selected disks, b none.
	seen.All, seen.VMIDs, seen.Tags = true, []int{150, 1000}, []string{"prod", "web"}
	seen.Rules = p.Sum([][]RuleCount{{{Rule: "a", Line: 2, Disks: 3, Violations: 1}}, {{Rule: "a", Line: 2, Disks: 1}}})
	check(seen, append(cluster,
		`policy t.yaml line 10: rules[1].match.tag: "db" matches no tag of this node's VMs`,
		`policy t.yaml line 11: rules[1].match.vmid: "900-999" holds no VM of this node`,
		`policy t.yaml line 8: rules[1]: rule b selects no disk of this node's VMs`))
	if got := seen.Rules; len(got) != 2 || got[0] != (RuleCount{"a", 2, 4, 1}) || got[1] != (RuleCount{"b", 8, 0, 0}) {
		t.Errorf("sum %+v", got)
	}
	var none *Policy
	if none.Coverage(seen) != nil || none.Sum(nil) != nil || none.Judge(nil, Site{}).Rules != nil {
		t.Error("no policy: nothing")
	}
}
