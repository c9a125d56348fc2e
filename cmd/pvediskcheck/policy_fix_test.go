package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/internal/pveoracle"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/policy"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
)

// fixPolicies require every setting a policy can, in ways that pull
// against each other and against check's own fixes (one policy at a time).
var fixPolicies = map[string]string{
	"safe": `rules:
  - name: safe
    severity: error
    require:
      cache: none
      discard: on
      iothread: on
      ssd: on
      backup: off
      limits:
        mbps_wr: {at_most: 100}
        iops_rd: {at_most: 5000}
`,
	"fast": `rules:
  - name: fast
    require:
      cache: writeback
      aio: threads
      controller: virtio-scsi-single
      replicate: off
      limits:
        mbps: {at_most: 500}
        iops_wr: {at_least: 100, at_most: 20000}
`,
	"odd": `rules:
  - name: odd
    match: {kind: [disk, cdrom]}
    require:
      cache: directsync
      aio: native
      discard: off
      iothread: off
      ssd: off
      backup: on
      replicate: on
      controller: [virtio-scsi-pci, virtio-blk]
      limits:
        mbps_rd: {at_least: 1000}
`,
	"by-storage": `rules:
  - name: thin
    match: {storage_type: [lvmthin, zfspool, rbd]}
    require: {discard: on, cache: [none, directsync]}
  - name: local
    match: {storage: "local*", bus: [sata, ide, scsi]}
    require: {iothread: on, limits: {iops: {at_most: 2000}}}
  - name: net
    match: {storage_type: [nfs, cifs, iscsi, iscsidirect, glusterfs], vmid: 100-999999999}
    require: {cache: writethrough, aio: io_uring}
`,
}

// explained are check's warnings a policy's fix may bring where the
// policy asks for them: what the site requires explicitly, check still
// advises against (cache=writeback, discard off, an explicit io_uring where
// qemu-server avoids it), and a controller a rule requires is the VM's
// scsihw, which every SCSI disk shares (virtio-scsi-pci ignores the others'
// iothread=1). Anything else new, and any new error, fails the test.
func explained(g check.Finding, policyText string, argv []string) bool {
	if g.Severity == check.Error {
		return false
	}
	switch g.Code {
	case check.CodeCacheWriteback:
		return strings.Contains(policyText, "cache: writeback")
	case check.CodeDiscardIgnoredOnThin:
		return strings.Contains(policyText, "discard: off")
	case check.CodeAIOIOUringRisk:
		return strings.Contains(policyText, "aio: io_uring")
	case check.CodeIOThreadIgnored:
		i := slices.Index(argv, "--scsihw")
		return i > 0 && argv[i+1] != "virtio-scsi-single"
	}
	return false
}

// policyKey names a policy finding for before/after: rule, setting, disk.
func policyKey(f check.Finding, disk string) string {
	return f.Policy.Rule + " " + string(f.Policy.Setting) + " " + disk
}

// TestPolicyFixesApply (issue 37 item 4): every qm set check prints for a
// policy's violations is accepted by Proxmox's own update_vm
// (../shared/pve-oracle's pve-qmset, through internal/pveoracle), and the
// config it writes, checked again, breaks none of the requirements that
// command fixed and brings no finding that was not there before. Over the
// cfg2cmd corpus, the real-world configs and check's shapes, under each of
// fixPolicies.
func TestPolicyFixesApply(t *testing.T) {
	o := pveoracle.For(t)
	ctx := context.Background()
	corpusStorage := filepath.Join(o.Dir(), "cfg2cmd-corpus.storage.cfg")
	total, accepted, fixed, unfixable, cannot := 0, 0, 0, 0, 0
	newWarnings := map[check.Code]int{}
	settings := map[policy.Setting]int{}
	cases := fixCorpus(t)
	shapes, _ := filepath.Glob(filepath.Join("testdata", "policy", "*.conf"))
	for _, c := range shapes {
		cases = append(cases, fixCase{"policy/" + filepath.Base(c), c, []string{filepath.Join("testdata", "policy", "storage.cfg")}, true})
	}
	for _, c := range cases {
		for pname, ptext := range fixPolicies {
			p, err := policy.Parse(pname+".yaml", []byte(ptext))
			if err != nil {
				t.Fatal(err)
			}
			t.Run(c.name+"/"+pname, func(t *testing.T) {
				n := stoppedNode(t, c)
				before := policyCheck(t, n, p)
				byCmd := map[string][]check.Finding{}
				for _, f := range before.Findings {
					if f.Code == check.CodePolicy && f.Policy.NextStart && f.Command == nil && f.Fix == "" {
						if !strings.Contains(f.Message, "no qm set fixes it: ") && !strings.Contains(f.Message, "not fixed by the command below") {
							t.Errorf("%s: no fix and no reason: %s", f.Disk, f.Message)
						}
						unfixable++
					}
					if f.Command != nil {
						k := strings.Join(f.Command, "\x00")
						byCmd[k] = append(byCmd[k], f)
					}
				}
				conf, err := os.ReadFile(n.Paths.VMConfig(8006))
				if err != nil {
					t.Fatal(err)
				}
				stcfg, err := os.ReadFile(n.Paths.StorageCfg())
				if err != nil {
					t.Fatal(err)
				}
				if strings.HasPrefix(c.name, "cfg2cmd/") {
					if stcfg, err = os.ReadFile(corpusStorage); err != nil {
						t.Fatal(err)
					}
				}
				for _, fs := range byCmd {
					if !slices.ContainsFunc(fs, func(f check.Finding) bool { return f.Code == check.CodePolicy }) {
						continue // check's own: TestCheckFixesApply
					}
					argv := fs[0].Command
					if err := check.ValidateCommand(argv); err != nil {
						t.Errorf("%q: %v", argv, err)
					}
					total++
					res, err := o.QmSet(ctx, pveoracle.QmSetRequest{VMID: 8006, Args: argv[3:], Config: string(conf), StorageCfg: string(stcfg)})
					if err != nil {
						t.Fatal(err)
					}
					if !res.Accepted && res.Cannot() {
						total--
						cannot++
						continue
					}
					if !res.Accepted {
						t.Errorf("Proxmox refuses %q: %s", argv, res.Refusal())
						continue
					}
					accepted++
					m := stoppedNode(t, c)
					if err := os.WriteFile(m.Paths.VMConfig(8006), []byte(res.NewConfig), 0o644); err != nil {
						t.Fatal(err)
					}
					after := policyCheck(t, m, p)
					moved := ""
					for i, a := range argv {
						if mm := setKey.FindStringSubmatch(a); mm != nil && i > 0 && argv[i-1] != "--delete" && slices.Contains(argv, "--delete") {
							moved = mm[1]
						}
					}
					for _, f := range fs {
						for _, g := range after.Findings {
							same := g.Disk == f.Disk || moved != "" && g.Disk == moved
							if !same || g.Code != f.Code {
								continue
							}
							if f.Code != check.CodePolicy || policyKey(g, f.Disk) == policyKey(f, f.Disk) || moved != "" && policyKey(g, moved) == policyKey(f, moved) {
								t.Errorf("after %q: still %s %s: %s", argv, g.Code, g.Disk, g.Message)
							}
						}
						if f.Code == check.CodePolicy {
							fixed++
							settings[f.Policy.Setting]++
						}
					}
					for _, g := range after.Findings {
						if !slices.ContainsFunc(before.Findings, func(f check.Finding) bool {
							if f.Code != g.Code || f.Disk != g.Disk && !(moved != "" && g.Disk == moved) {
								return false
							}
							return f.Code != check.CodePolicy || policyKey(f, "") == policyKey(g, "")
						}) {
							if explained(g, ptext, argv) {
								newWarnings[g.Code]++
								continue
							}
							t.Errorf("after %q: new %s %s: %s", argv, g.Code, g.Disk, g.Message)
						}
					}
				}
			})
		}
	}
	t.Logf("%d of %d policy fixes accepted by pve-qmset, clearing %d violations (%v); %d violations no qm set fixes (said so); %d commands the oracle cannot answer (Ceph, ZFS over iSCSI); check's warnings the policies asked for: %v", accepted, total, fixed, settings, unfixable, cannot, newWarnings)
	if total < 100 || accepted != total {
		t.Errorf("%d of %d accepted: the corpora did not exercise the policy's fixes, or Proxmox refused some", accepted, total)
	}
	for _, s := range []policy.Setting{policy.Cache, policy.AIO, policy.Discard, policy.IOThread, policy.SSD, policy.Controller, policy.Backup, policy.Replicate, "limits.mbps_wr", "limits.iops_rd", "limits.mbps", "limits.iops_wr", "limits.mbps_rd", "limits.iops"} {
		if settings[s] == 0 {
			t.Errorf("no %s violation was fixed over the corpora", s)
		}
	}
}

// policyCheck checks VM 8006 of n, stopped, with the policy.
func policyCheck(t *testing.T, n node.Node, p *policy.Policy) check.VMResult {
	t.Helper()
	v := check.VM(context.Background(), n, 8006, check.Options{Policy: p}, thinpool.NewCache(noPools()))
	if v.Err != nil {
		t.Fatalf("check: %v", v.Err)
	}
	return v
}
