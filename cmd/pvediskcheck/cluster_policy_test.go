package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// clusterPolicy selects every VM's local disks (cache none), and pve2's
// VMs only by VMID; "nosuch" is no storage anywhere.
const clusterPolicy = `rules:
  - name: no-host-cache
    match: {storage: [local, nosuch]}
    require: {cache: none}
  - name: pve2-discard
    match: {vmid: 380-381}
    require: {discard: on}
`

// TestClusterPolicy (issue 37 item 3): --cluster applies the one file to
// every node. The file is read and checked here and its content sent, not
// its path (a path of this node means nothing there); each node judges
// its own VMs; the merged report carries each node's rule counts, and the
// text view says each warning once with the nodes that said it. A bad
// file asks no node. A node that does not answer has its VMs judged here
// from their configs, the policy included.
func TestClusterPolicy(t *testing.T) {
	fc := newFakeCluster(t)
	file := filepath.Join(t.TempDir(), "site.yaml")
	if err := os.WriteFile(file, []byte(clusterPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, code := fc.run(t, "--json", "check", "--all", "--cluster", "--policy", file)
	var m struct {
		VMs []struct {
			Node     string `json:"node"`
			VMID     int    `json:"vmid"`
			Findings []struct {
				Code   string `json:"code"`
				Disk   string `json:"disk"`
				Policy *struct {
					Rule string `json:"rule"`
				} `json:"policy"`
			} `json:"findings"`
		} `json:"vms"`
		PolicyRules []struct {
			Node       string `json:"node"`
			Rule       string `json:"rule"`
			Disks      int    `json:"disks"`
			Violations int    `json:"violations"`
		} `json:"policy_rules"`
		PolicyWarnings []struct {
			Node string `json:"node"`
			Line int    `json:"line"`
		} `json:"policy_warnings"`
	}
	if err := json.Unmarshal([]byte(out), &m); err != nil || code != exitProblem {
		t.Fatalf("exit %d %q %v\n%s", code, errs, err, out)
	}
	var got []string
	for _, v := range m.VMs {
		for _, f := range v.Findings {
			if f.Code == "policy" {
				got = append(got, v.Node+"/"+f.Policy.Rule)
			}
		}
	}
	// 370 (writeback) and 390 (unsafe) break no-host-cache; 380 and 381
	// have no discard=on.
	if strings.Join(got, " ") != "pve1/no-host-cache pve2/pve2-discard pve2/pve2-discard pve3/no-host-cache" {
		t.Errorf("policy findings %v", got)
	}
	var counts []string
	for _, r := range m.PolicyRules {
		counts = append(counts, r.Node+":"+r.Rule+"="+itoa(r.Disks)+"/"+itoa(r.Violations))
	}
	if strings.Join(counts, " ") != "pve1:no-host-cache=1/1 pve1:pve2-discard=0/0 pve2:no-host-cache=2/0 pve2:pve2-discard=2/2 pve3:no-host-cache=1/1 pve3:pve2-discard=0/0" {
		t.Errorf("policy_rules %v", counts)
	}
	// Every node warns of nosuch (storage.cfg is the cluster's); pve1 and
	// pve3 of the VMID range and the rule that select none of theirs.
	if len(m.PolicyWarnings) != 7 {
		t.Errorf("policy_warnings %+v", m.PolicyWarnings)
	}
	calls := fc.sshCalls(t)
	assertQuoted(t, calls)
	if len(calls) != 2 {
		t.Fatalf("ssh ran %d times", len(calls))
	}
	for _, c := range calls {
		line := strings.Join(c, " ")
		if strings.Contains(line, file) || !strings.Contains(line, "'--policy-content=") || strings.Contains(line, "'--policy=") {
			t.Errorf("the remote command names the path, or carries no content: %s", line)
		}
	}

	out, errs, code = fc.run(t, "check", "--all", "--cluster", "--policy", file)
	for _, want := range []string{
		`pvediskcheck: warning: policy ` + file + ` line 3: rules[0].match.storage: "nosuch" matches no storage of storage.cfg (every node)` + "\n",
		`pvediskcheck: warning: policy ` + file + ` line 6: rules[1].match.vmid: "380-381" holds no VM of this node (pve1, pve3)` + "\n",
		`pvediskcheck: warning: policy ` + file + ` line 5: rules[1]: rule pve2-discard selects no disk of this node's VMs (pve1, pve3)` + "\n",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if !strings.Contains(out, "policy: 2 rule(s) selected 6 disk(s): 4 violation(s)\n") || code != exitProblem {
		t.Errorf("text: exit %d\n%s", code, out)
	}

	// A bad file: one line, exit 2, no node asked.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	os.WriteFile(bad, []byte(strings.Replace(clusterPolicy, "cache: none", "cache: nope", 1)), 0o644)
	before := len(fc.sshCalls(t))
	out, errs, code = fc.run(t, "check", "--all", "--cluster", "--policy", bad)
	if code != exitUsage || out != "" || !strings.Contains(errs, bad+" line 4: rules[0].require.cache") || len(fc.sshCalls(t)) != before {
		t.Errorf("bad file: exit %d %q %q, %d ssh calls", code, out, errs, len(fc.sshCalls(t))-before)
	}

	// pve3 down: its VM is judged here from its config, policy included.
	t.Setenv(hostEnv("127.0.0.3"), "!refused")
	out, _, code = fc.run(t, "--json", "check", "--all", "--cluster", "--policy", file)
	var down struct {
		VMs []struct {
			VMID       int  `json:"vmid"`
			ConfigOnly bool `json:"config_only"`
			Findings   []struct {
				Code string `json:"code"`
			} `json:"findings"`
		} `json:"vms"`
	}
	if err := json.Unmarshal([]byte(out), &down); err != nil || code != exitUnreachable || len(down.VMs) != 4 {
		t.Fatalf("node down: exit %d %v\n%s", code, err, out)
	}
	if v := down.VMs[3]; v.VMID != 390 || !v.ConfigOnly || len(v.Findings) != 2 || v.Findings[0].Code != "cache-unsafe" || v.Findings[1].Code != "policy" {
		t.Errorf("390 judged here: %+v", v)
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}
