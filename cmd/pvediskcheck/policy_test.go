package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/policy"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// labPolicy is the policy of the real-QEMU test: no host page cache on
// local-lvm (an error), a write IOPS cap on VirtIO Block.
const labPolicy = `# the lab's policy
version: 1
rules:
  - name: no-host-cache
    severity: error
    match: {storage: local-lvm}
    require:
      cache: [none, directsync]
  - name: iops-cap
    match: {bus: virtio}
    require:
      limits:
        iops_wr: {at_most: 1000}
`

func writePolicy(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "site.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// policyFindings are a VM's policy findings by disk.
func policyFindings(v check.VMResult) map[string]check.Finding {
	out := map[string]check.Finding{}
	for _, f := range v.Findings {
		if f.Code == check.CodePolicy {
			out[f.Disk] = f
		}
	}
	return out
}

// TestCheckPolicyRealQEMU: a VM running on real QEMU whose config was
// edited since its start (scsi0 started with cache=writeback, its config
// says none now), a limit changed live (virtio1 runs iops_wr=5000, its
// config says 500) and a change pending for the next start (scsi1
// cache=unsafe in [PENDING]): each is judged where it is so, the running
// cache from QEMU's live flags, and fixed where it is fixed (a restart for
// what only runs, the disk's one qm set for what the next start would run).
func TestCheckPolicyRealQEMU(t *testing.T) {
	n := fakenode.NewT(t)
	lab370(t, n, "")
	started := strings.Replace(fakenode.Lab370Config, "scsi0: local-lvm:vm-370-disk-0,iothread=1,size=256M", "scsi0: local-lvm:vm-370-disk-0,cache=writeback,iothread=1,size=256M", 1)
	started = strings.Replace(started, "virtio1: local-lvm:vm-370-disk-2,iothread=1,size=256M", "virtio1: local-lvm:vm-370-disk-2,iops_wr=500,iothread=1,size=256M", 1)
	if err := n.WriteConfig(370, started); err != nil {
		t.Fatal(err)
	}
	n.MustStart(t, 370, fakenode.ArgvOptions{})
	full := qemuserver.Limits{"iops-write": 5000}.Full()
	err := qmp.Do(context.Background(), n.Paths.QMPSocket(370), 5*time.Second, func(s qmp.Session) error {
		return s.SetThrottleLimits("virtio1", true, full)
	})
	if err != nil {
		t.Fatal(err)
	}
	now := strings.Replace(started, "cache=writeback,", "", 1) +
		"\n[PENDING]\nscsi1: local-lvm:vm-370-disk-1,cache=unsafe,iothread=1,size=256M\n"
	if err := n.WriteConfig(370, now); err != nil {
		t.Fatal(err)
	}
	file := writePolicy(t, labPolicy)
	var out check.Report
	errs, code := runJSON(t, n, &out, "check", "370", "--policy", file)
	if code != exitProblem {
		t.Fatalf("exit %d: %s", code, errs)
	}
	got := policyFindings(out.VMs[0])
	if len(got) != 3 {
		t.Fatalf("policy findings %+v", out.VMs[0].Findings)
	}
	reboot := "qm reboot 370 (the next start runs what the config says) (a full stop and start; a reboot inside the guest is not enough)"
	for disk, want := range map[string]struct {
		sev       check.Severity
		found     string // "value place"
		nextStart bool
		fix       string
	}{
		"scsi0":   {check.Error, "writeback running", false, reboot},
		"scsi1":   {check.Error, "unsafe pending", true, "qm set 370 --scsi1 local-lvm:vm-370-disk-1,iothread=1,size=256M,discard=on, then qm reboot 370 (a full stop and start; a reboot inside the guest is not enough)"},
		"virtio1": {check.Warning, "5000 IOPS running", false, reboot},
	} {
		f := got[disk]
		x := f.Policy
		if x == nil || len(x.Found) != 1 || x.Found[0].Value+" "+string(x.Found[0].In) != want.found || x.NextStart != want.nextStart || f.Severity != want.sev || f.Fix != want.fix {
			t.Errorf("%s: %+v %+v, want %+v", disk, f, x, want)
		}
	}
	// The pending cache=unsafe is check's cache-unsafe too: the same command.
	if cu := findingsByCode(out.VMs[0])["cache-unsafe"]; len(cu) != 1 || cu[0].Fix != got["scsi1"].Fix {
		t.Errorf("cache-unsafe %+v", cu)
	}
	// Nothing breaks where it holds: sata1 (cache none) is not named.
	if _, bad := got["sata1"]; bad {
		t.Errorf("sata1: %+v", got["sata1"])
	}
	if len(out.PolicyRules) != 2 || out.PolicyRules[0] != (policy.RuleCount{Rule: "no-host-cache", Line: 4, Disks: 4, Violations: 2}) || out.PolicyRules[1] != (policy.RuleCount{Rule: "iops-cap", Line: 9, Disks: 1, Violations: 1}) {
		t.Errorf("policy_rules %+v", out.PolicyRules)
	}
	// The text: each finding with the rule, its line, what was found where.
	text, _, code := runCLI(t, "--root", n.Root, "check", "370", "--policy", file)
	for _, want := range []string{
		"ERROR policy scsi0: rule no-host-cache (" + file + " line 8): cache must be none or directsync; it is writeback in the running VM; the next start runs none (default), as the config says\n      fix: " + reboot,
		"ERROR policy scsi1: rule no-host-cache (" + file + " line 8): cache must be none or directsync; it is unsafe pending for the next start ([PENDING]) (none (default) in the config, none in the running VM)",
		"WARNING policy virtio1: rule iops-cap (" + file + " line 13): limits.iops_wr must be at most 1000 IOPS; it is 5000 IOPS in the running VM; the next start runs 500 IOPS, as the config says",
		"policy: 2 rule(s) selected 5 disk(s): 3 violation(s)\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("text lacks %q:\n%s", want, text)
		}
	}
	if code != exitProblem {
		t.Errorf("text: exit %d", code)
	}
	// metrics --policy exports the same, per VM and rule.
	prom, errs, code := runCLI(t, "--root", n.Root, "metrics", "--policy", file)
	for _, want := range []string{
		`pvediskcheck_policy_violations{rule="no-host-cache",vmid="370"} 2`,
		`pvediskcheck_policy_violations{rule="iops-cap",vmid="370"} 1`,
		`pvediskcheck_policy_rule_disks{rule="no-host-cache"} 4`,
		`pvediskcheck_policy_rule_disks{rule="iops-cap"} 1`,
		`pvediskcheck_check_findings{code="policy",severity="error",vmid="370"} 2`,
	} {
		if !strings.Contains(prom, want) {
			t.Errorf("metrics lack %s (exit %d, %s)", want, code, errs)
		}
	}
}

// TestCheckPolicyRefused: a bad policy file is one line naming file, line
// and key, exit 2, and nothing is checked (nothing on stdout); so is a
// file that is not one to read. A policy file outside --root is read as
// named (the admin's, not the node's).
func TestCheckPolicyRefused(t *testing.T) {
	n := fakenode.NewT(t)
	lab370(t, n, "")
	bad := writePolicy(t, strings.Replace(labPolicy, "cache: [none, directsync]", "cache: [none, drectsync]", 1))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"check", "370", "--policy", bad}, "pvediskcheck: policy " + bad + " line 8: rules[0].require.cache: \"drectsync\": not a cache mode (none, writethrough, writeback, directsync, unsafe)\n"},
		{[]string{"check", "--all", "--json", "--policy", bad}, "line 8: rules[0].require.cache"},
		{[]string{"metrics", "--policy", bad}, "line 8: rules[0].require.cache"},
		{[]string{"check", "370", "--policy", filepath.Join(t.TempDir(), "none.yaml")}, "none.yaml: no such file\n"},
		{[]string{"check", "370", "--policy", t.TempDir()}, "is a directory, not a regular file\n"},
		{[]string{"check", "370", "--policy", "/dev/zero"}, "/dev/zero: is a character device, not a regular file\n"},
		{[]string{"check", "370", "--policy", ""}, "--policy: give a file\n"},
	} {
		out, errs, code := runCLI(t, append([]string{"--root", n.Root}, c.args...)...)
		if code != exitUsage || out != "" || !strings.Contains(errs, c.want) || strings.Count(errs, "\n") != 1 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q, want %q", c.args, code, out, errs, c.want)
		}
	}
	// A warning is not a refusal: the run goes on, the warning on stderr
	// (JSON: policy_warnings), and the exit code is the findings'.
	typo := writePolicy(t, "rules:\n  - name: r\n    match: {storage: [local-lvm, locl-lvm]}\n    require: {cache: none}\n")
	out, errs, code := runCLI(t, "--root", n.Root, "check", "--all", "--policy", typo)
	if !regexp.MustCompile(`(?m)^pvediskcheck: warning: policy .*site.yaml line 3: rules\[0\].match.storage: "locl-lvm" matches no storage of storage.cfg$`).MatchString(errs) ||
		!strings.Contains(out, "policy: 1 rule(s) selected 4 disk(s): 0 violation(s)") || code != exitProblem {
		t.Errorf("warning: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestPolicyExamplesParse: the policies the docs show are policies: the
// the manual's (docs/commands.md), check --help's (its indented block under POLICY) and the
// shipped example (/usr/share/doc/pvediskcheck/examples/policy.yaml).
func TestPolicyExamplesParse(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "commands.md"))
	if err != nil {
		t.Fatal(err)
	}
	sec := string(readme)[strings.Index(string(readme), "### Policy: how every disk should be"):]
	_, block, _ := strings.Cut(sec, "```yaml\n")
	block, _, _ = strings.Cut(block, "```")
	help := helpText("check")
	_, hb, _ := strings.Cut(help, "POLICY\n")
	var lines []string
	for _, l := range strings.Split(hb, "\n")[3:] {
		if !strings.HasPrefix(l, "   ") {
			break
		}
		lines = append(lines, strings.TrimPrefix(l, "   "))
	}
	shipped, err := os.ReadFile(filepath.Join("..", "..", "share", "examples", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for name, text := range map[string]string{"README": block, "check --help": strings.Join(lines, "\n"), "shipped": string(shipped)} {
		p, err := policy.Parse(name, []byte(text))
		if err != nil || len(p.Rules) == 0 {
			t.Errorf("%s's example: %v\n%s", name, err, text)
		}
	}
}
