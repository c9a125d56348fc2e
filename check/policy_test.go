package check

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/policy"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
)

func mustPolicy(t *testing.T, yaml string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse("site.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestPolicyFindings: a policy's violations are findings of code policy
// with the rule's severity, and their fix is the disk's one command,
// joined with check's own (cache-writeback drops cache=, the emulated
// controller becomes VirtIO SCSI single, the policy adds iothread=1 and
// backup=0, and discard=on both want).
func TestPolicyFindings(t *testing.T) {
	tn := newNode(t)
	tn.conf(100, "ostype: l26\nscsihw: lsi\nscsi0: local-lvm:vm-100-disk-0,cache=writeback,size=32G\nvirtio0: ceph:vm-100-disk-1,discard=on,size=8G\n")
	p := mustPolicy(t, `rules:
  - name: thin
    severity: error
    match: {storage: local-lvm}
    require: {discard: on, iothread: on, backup: off}
  - name: all-none
    require: {cache: none}
`)
	v := tn.check(100, quietRunner(), Options{Policy: p})
	want := []string{"error policy scsi0", "error policy scsi0", "error policy scsi0", "warning cache-writeback scsi0", "warning discard-ignored-on-thin scsi0", "warning emulated-controller scsi0", "warning policy scsi0"}
	if got := summary(v); !slices.Equal(got, want) {
		t.Fatalf("findings %v, want %v", got, want)
	}
	cmd := "qm set 100 --scsihw virtio-scsi-single --scsi0 local-lvm:vm-100-disk-0,size=32G,backup=0,discard=on,iothread=1"
	for _, f := range v.Findings {
		if !strings.HasPrefix(f.Fix, cmd) || len(f.Command) == 0 {
			t.Errorf("%s %s: fix %q, want %q", f.Code, f.Disk, f.Fix, cmd)
		}
		if f.Code == CodePolicy && (f.Policy == nil || !strings.Contains(f.Message, "(site.yaml line ")) {
			t.Errorf("policy finding %+v", f)
		}
	}
	if m := find(v, CodePolicy, "scsi0").Message; m != "rule thin (site.yaml line 5): discard must be on; it is off in the config" {
		t.Errorf("message %q", m)
	}
	if got := v.PolicyRules; len(got) != 2 || got[0] != (policy.RuleCount{Rule: "thin", Line: 2, Disks: 1, Violations: 3}) || got[1] != (policy.RuleCount{Rule: "all-none", Line: 6, Disks: 2, Violations: 1}) {
		t.Errorf("rules %+v", got)
	}
	// The virtio0 disk holds cache none: no finding for it.
	if find(v, CodePolicy, "virtio0") != nil {
		t.Errorf("virtio0: %+v", find(v, CodePolicy, "virtio0"))
	}
}

// TestPolicyOverrules: where the policy wants what a check rule would
// change (cache=writeback), the command keeps the policy's value and the
// check finding says it is not fixed by it; a held requirement is never
// broken by check's fix.
func TestPolicyOverrules(t *testing.T) {
	tn := newNode(t)
	tn.conf(100, "ostype: l26\nscsihw: virtio-scsi-single\nscsi0: local-lvm:vm-100-disk-0,cache=writeback,size=32G\n")
	p := mustPolicy(t, "rules:\n  - name: fast\n    require: {cache: writeback, discard: on}\n")
	v := tn.check(100, quietRunner(), Options{Policy: p})
	cw := find(v, CodeCacheWriteback, "scsi0")
	if cw == nil || cw.Fix != "" || !strings.HasSuffix(cw.Message, "(not fixed by the command below: the policy wants cache=writeback)") {
		t.Errorf("cache-writeback %+v", cw)
	}
	pf := find(v, CodePolicy, "scsi0")
	if pf == nil || pf.Fix != "qm set 100 --scsi0 local-lvm:vm-100-disk-0,cache=writeback,size=32G,discard=on" {
		t.Errorf("policy %+v", pf)
	}
	// Without the policy, check's own fix.
	v = tn.check(100, quietRunner(), Options{})
	if cw := find(v, CodeCacheWriteback, "scsi0"); cw == nil || cw.Fix != "qm set 100 --scsi0 local-lvm:vm-100-disk-0,size=32G,discard=on" {
		t.Errorf("without a policy %+v", cw)
	}
}

// TestPolicyRunning: what only the running VM breaks is fixed by a
// restart, not a qm set; a running VM's qm set of the next start is
// followed by one.
func TestPolicyRunning(t *testing.T) {
	tn := newNode(t)
	// Started with scsi0 cache=writeback,discard=on (policy/testdata: the
	// command line Proxmox's own code gave started-100.conf); the config
	// says neither now.
	b, err := os.ReadFile("../policy/testdata/started-100.argv.json")
	if err != nil {
		t.Fatal(err)
	}
	var argv []string
	if err := json.Unmarshal(b, &argv); err != nil {
		t.Fatal(err)
	}
	tn.conf(100, "scsihw: virtio-scsi-single\nscsi0: local-lvm:vm-100-disk-0,iothread=1,size=32G\n")
	tn.running(100, argv)
	p := mustPolicy(t, "rules:\n  - name: r\n    require: {cache: none, discard: on}\n")
	v := tn.check(100, quietRunner(), Options{Policy: p})
	var cache, discard *Finding
	for i, f := range v.Findings {
		if f.Code == CodePolicy && f.Policy.Setting == policy.Cache {
			cache = &v.Findings[i]
		}
		if f.Code == CodePolicy && f.Policy.Setting == policy.Discard {
			discard = &v.Findings[i]
		}
	}
	if cache == nil || cache.Command != nil || cache.Fix != "qm reboot 100 (the next start runs what the config says) (a full stop and start; a reboot inside the guest is not enough)" || cache.Policy.NextStart {
		t.Errorf("cache: %+v", cache)
	}
	if discard == nil || len(discard.Policy.Found) != 1 || !strings.HasSuffix(discard.Message, "it is off in the config (on in the running VM)") || discard.Fix != "qm set 100 --scsi0 local-lvm:vm-100-disk-0,iothread=1,size=32G,discard=on, then qm reboot 100 (a full stop and start; a reboot inside the guest is not enough)" {
		t.Errorf("discard: %+v", discard)
	}
}

// TestPolicyRun: the run's counts per rule and its warnings; a user.cfg
// that cannot be read leaves the policy unchecked (said, exit 3), and
// every other rule still runs.
func TestPolicyRun(t *testing.T) {
	tn := newNode(t)
	tn.conf(100, "tags: web\nscsihw: virtio-scsi-single\nscsi0: local-lvm:vm-100-disk-0,size=32G\n")
	tn.conf(101, "scsihw: virtio-scsi-single\nscsi0: local-zfs:vm-101-disk-0,size=32G\n")
	tn.write("etc/pve/user.cfg", "pool:web::100::\n")
	p := mustPolicy(t, `rules:
  - name: thin
    match: {storage: [local-lvm, locl-zfs]}
    require: {discard: on}
  - name: web
    match: {pool: [web, www], tag: [web, db]}
    require: {iothread: on}
  - name: none
    match: {vmid: 900-999}
    require: {cache: none}
`)
	r := quietRunner()
	for _, all := range []bool{false, true} {
		rep := Run(context.Background(), r.Node(tn.n), []int{100, 101}, Options{Policy: p, All: all})
		if rep.Err() != nil {
			t.Fatal(rep.Err())
		}
		want := []policy.RuleCount{{Rule: "thin", Line: 2, Disks: 1, Violations: 1}, {Rule: "web", Line: 5, Disks: 1, Violations: 1}, {Rule: "none", Line: 8}}
		if !slices.Equal(rep.PolicyRules, want) {
			t.Errorf("rules %+v", rep.PolicyRules)
		}
		var got []string
		for _, w := range rep.PolicyWarnings {
			got = append(got, w.String())
		}
		ws := []string{`policy site.yaml line 3: rules[0].match.storage: "locl-zfs" matches no storage of storage.cfg`,
			`policy site.yaml line 6: rules[1].match.pool: "www" matches no pool of /etc/pve/user.cfg`}
		if all {
			ws = append(ws, `policy site.yaml line 6: rules[1].match.tag: "db" matches no tag of this node's VMs`,
				`policy site.yaml line 9: rules[2].match.vmid: "900-999" holds no VM of this node`,
				`policy site.yaml line 8: rules[2]: rule none selects no disk of this node's VMs`)
		}
		if !slices.Equal(got, ws) {
			t.Errorf("all %v: warnings\n %s", all, strings.Join(got, "\n "))
		}
		// The policy's two and check's discard-ignored-on-thin on both;
		// the policy file's own warnings are not findings.
		if rep.Summary.Warnings != 4 {
			t.Errorf("summary %+v", rep.Summary)
		}
	}
	// user.cfg unreadable: not checked, exit 3 (a directory: exit 2).
	os.Remove(filepath.Join(tn.root, "etc/pve/user.cfg"))
	tn.mkdir("etc/pve/user.cfg")
	v := VM(context.Background(), r.Node(tn.n), 100, Options{Policy: p}, thinpool.NewCache(r))
	if !slices.Contains(v.NotChecked, CodePolicy) || exitcode.Of(v.Err) != exitcode.Usage || find(v, CodePolicy, "scsi0") != nil {
		t.Errorf("user.cfg a directory: %v %v %v", v.NotChecked, v.Err, summary(v))
	}
	// A policy without pool selectors never reads it.
	v = VM(context.Background(), r.Node(tn.n), 100, Options{Policy: mustPolicy(t, "rules:\n  - name: r\n    require: {discard: on}\n")}, thinpool.NewCache(r))
	if v.Err != nil || len(v.NotChecked) != 0 || find(v, CodePolicy, "scsi0") == nil {
		t.Errorf("no pools: %v %v %v", v.NotChecked, v.Err, summary(v))
	}
}
