package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/cluster"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
)

// Cluster mode without root, QEMU or sshd: a three-node cluster tree
// (fakenode.NewCluster) whose "ssh" is this test binary (fakeSSH below): it
// does what ssh and the remote sshd do with the command line, joins the
// remote arguments with spaces and hands them to /bin/sh -c, where
// "pvediskcheck" is this test binary again, running main() below the
// node's root. The VMs are stopped; the real-QEMU, real-sshd tier is
// cluster_sshd_test.go.

const (
	envTestRole    = "PVEDISKCHECK_TEST_ROLE"    // ssh, pvediskcheck or qmp-floor: what this binary plays
	envTestVersion = "PVEDISKCHECK_TEST_VERSION" // the version the remote pvediskcheck reports
	envTestBin     = "PVEDISKCHECK_TEST_BIN"     // directory with a "pvediskcheck" link to this binary
	envTestSSHLog  = "PVEDISKCHECK_TEST_SSHLOG"  // where fakeSSH appends each command line it got
	envTestHost    = "PVEDISKCHECK_TEST_HOST_"   // + address with _ for . and :: a node root, or !refused, !escapes, !hostile-reply, !hostile-stdout, !garbage
)

func TestMain(m *testing.M) {
	switch os.Getenv(envTestRole) {
	case "ssh":
		os.Exit(fakeSSH(os.Args[1:]))
	case "qmp-floor":
		os.Exit(floorProcess(os.Args[1:]))
	case "pvediskcheck":
		if v := os.Getenv(envTestVersion); v != "" {
			version = v
		}
		main()
	}
	os.Exit(m.Run())
}

func hostEnv(addr string) string {
	return envTestHost + strings.NewReplacer(".", "_", ":", "_").Replace(addr)
}

// fakeSSH plays ssh and the remote sshd: the remote command is every
// argument after root@ADDRESS, joined with spaces, run by /bin/sh -c.
func fakeSSH(args []string) int {
	addr, at := "", -1
	for i, a := range args {
		if h, ok := strings.CutPrefix(a, "root@"); ok {
			addr, at = h, i
			break
		}
	}
	if at < 0 {
		fmt.Fprintln(os.Stderr, "usage: ssh ... root@host command")
		return 255
	}
	if log := os.Getenv(envTestSSHLog); log != "" {
		f, err := os.OpenFile(log, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err == nil {
			b, _ := json.Marshal(args)
			fmt.Fprintf(f, "%s\n", b)
			f.Close()
		}
	}
	target := os.Getenv(hostEnv(addr))
	switch target {
	case "", "!refused":
		fmt.Fprintf(os.Stderr, "ssh: connect to host %s port 22: Connection refused\n", addr)
		return 255
	case "!escapes":
		// What ssh passes on from a hostile or broken other end: a title
		// change, a screen clear, colours, a bell.
		fmt.Fprintf(os.Stderr, "\x1b]0;owned\x07\x1b[2J\x1b[31mssh: connect to host %s port 22: Connection refused\x1b[0m\x07\n", addr)
		return 255
	case "!hostile-reply":
		// A reply whose error line holds what a terminal acts on.
		os.Stdout.Write(cluster.Reply{Version: "dev", Node: "pve3", Exit: 3, Stderr: "pvediskcheck: \x1b[2J\x1b[31mVM 390: busy\x1b[0m\n"}.Encode())
		return 3
	case "!hostile-stdout":
		// A reply whose output holds what a terminal acts on.
		os.Stdout.Write(cluster.Reply{Version: "dev", Node: "pve2", Exit: 0, Stdout: "VM 380: " + hostile + "\n"}.Encode())
		return 0
	case "!foreign-vms", "!bad-counts", "!huge-counts", "!unasked", "!twice", "!other-vmid":
		// A node that answers as pve2 with what it cannot know or
		// cannot be (issue 31): VMs of other nodes, counts below 0 or
		// of 10^18, a VM it was not asked about, one VM twice, another
		// VM than the one forwarded.
		vms := map[string]string{"!foreign-vms": "380,370,390", "!bad-counts": "380", "!huge-counts": "380", "!unasked": "380,381", "!twice": "380,380", "!other-vmid": ""}[target]
		summary := map[string]string{"!bad-counts": `{"vms":-3,"errors":0,"warnings":0,"infos":0}`, "!huge-counts": `{"vms":1,"errors":1000000000000000000,"warnings":0,"infos":0}`}[target]
		if summary == "" {
			summary = `{"vms":1,"errors":0,"warnings":1,"infos":0}`
		}
		var items []string
		for _, id := range strings.Split(vms, ",") {
			if id != "" {
				items = append(items, `{"vmid":`+id+`,"running":false,"findings":[]}`)
			}
		}
		doc := `{"vms":[` + strings.Join(items, ",") + `],"summary":` + summary + `}`
		if target == "!other-vmid" {
			doc = `{"vmid":390,"running":false,"disks":[]}`
		}
		os.Stdout.Write(cluster.Reply{Version: "dev", Node: "pve2", Exit: 1, Stdout: doc}.Encode())
		return 1
	case "!garbage":
		fmt.Println("<html><body>502 Bad Gateway</body></html>")
		return 0
	}
	cmd := exec.Command("/bin/sh", "-c", strings.Join(args[at+1:], " "))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), envTestRole+"=pvediskcheck", "PVEDISKCHECK_ROOT="+target,
		"PATH="+os.Getenv(envTestBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		fmt.Fprintln(os.Stderr, err)
		return 255
	}
	return 0
}

// fakeCluster is pve1 (this process), pve2 and pve3, with stopped VMs:
// 370 on pve1, 380 and 381 on pve2, 390 on pve3, each with one finding or
// more; every node reachable through fakeSSH.
type fakeCluster struct {
	*fakenode.Cluster
	sshLog string
}

const (
	conf370 = "ostype: l26\nscsihw: virtio-scsi-single\nscsi0: local:370/vm-370-disk-0.raw,cache=writeback,size=1G\n"
	conf380 = "ostype: l26\nsata0: local:380/vm-380-disk-0.raw,size=1G\n"
	conf381 = "ostype: l26\nscsihw: virtio-scsi-single\nscsi0: local:381/vm-381-disk-0.raw,size=1G\n"
	conf390 = "ostype: l26\nscsihw: virtio-scsi-single\nscsi0: local:390/vm-390-disk-0.raw,cache=unsafe,size=1G\n"
)

func newFakeCluster(t *testing.T) *fakeCluster {
	t.Helper()
	c, err := fakenode.NewCluster(t.TempDir(), []string{"pve1", "pve2", "pve3"}, []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	for _, v := range []struct {
		node string
		id   int
		conf string
	}{{"pve1", 370, conf370}, {"pve2", 380, conf380}, {"pve2", 381, conf381}, {"pve3", 390, conf390}} {
		if err := c.WriteConfig(v.node, v.id, v.conf); err != nil {
			t.Fatal(err)
		}
	}
	// No thin pool: the nodes' lvs is not needed here.
	if err := os.WriteFile(filepath.Join(c.Pmxcfs(), "storage.cfg"), []byte("dir: local\n\tpath "+filepath.Join(c.Dir, "vz")+"\n\tcontent images\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	if err := os.Symlink(exe, filepath.Join(bin, "pvediskcheck")); err != nil {
		t.Fatal(err)
	}
	fc := &fakeCluster{Cluster: c, sshLog: filepath.Join(t.TempDir(), "ssh.log")}
	t.Setenv(envSSH, exe)
	t.Setenv(envTestRole, "ssh") // for the "ssh" children only: this process has already dispatched
	t.Setenv(envTestBin, bin)
	t.Setenv(envTestSSHLog, fc.sshLog)
	for _, n := range c.Nodes[1:] {
		t.Setenv(hostEnv(n.IP), n.Root)
	}
	return fc
}

// run runs pvediskcheck on pve1.
func (fc *fakeCluster) run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runCLI(t, append([]string{"--root", fc.Nodes[0].Root}, args...)...)
}

// sshCalls lists the command lines "ssh" was given.
func (fc *fakeCluster) sshCalls(t *testing.T) [][]string {
	t.Helper()
	return fakenode.ArgvLog(t, fc.sshLog)
}

// mergedCheck is what the tests read of check --cluster --json.
type mergedCheck struct {
	VMs []struct {
		Node       string `json:"node"`
		ConfigOnly bool   `json:"config_only"`
		VMID       int    `json:"vmid"`
		Findings   []struct {
			Code string `json:"code"`
		} `json:"findings"`
	} `json:"vms"`
	Summary struct {
		VMs, Errors, Warnings, Infos int
	} `json:"summary"`
	Nodes []cluster.NodeReport `json:"nodes"`
}

func (m mergedCheck) vmNodes() string {
	var s []string
	for _, v := range m.VMs {
		x := fmt.Sprintf("%d@%s", v.VMID, v.Node)
		if v.ConfigOnly {
			x += "(config-only)"
		}
		s = append(s, x)
	}
	return strings.Join(s, " ")
}

func (m mergedCheck) statuses() string {
	var s []string
	for _, n := range m.Nodes {
		s = append(s, n.Node+"="+string(n.Status))
	}
	return strings.Join(s, " ")
}

func decodeMerged(t *testing.T, out string) mergedCheck {
	t.Helper()
	var m mergedCheck
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	return m
}

// Every argument of every remote command line is one single-quoted word.
func assertQuoted(t *testing.T, calls [][]string) {
	t.Helper()
	for _, c := range calls {
		at := -1
		for i, a := range c {
			if strings.HasPrefix(a, "root@") {
				at = i
			}
		}
		if at < 0 || at+1 >= len(c) || c[at+1] != "'pvediskcheck'" {
			t.Errorf("remote command line %q", c)
			continue
		}
		for _, a := range c[at+1:] {
			if len(a) < 2 || a[0] != '\'' || a[len(a)-1] != '\'' || strings.Contains(a[1:len(a)-1], "'") {
				t.Errorf("argument %q of %q is not one quoted word", a, c)
			}
		}
	}
}

func TestClusterCheckAllMerged(t *testing.T) {
	fc := newFakeCluster(t)
	out, errs, code := fc.run(t, "--json", "check", "--all", "--cluster")
	m := decodeMerged(t, out)
	if code != exitProblem || errs != "" {
		t.Errorf("exit %d (want 1: warnings), stderr %q", code, errs)
	}
	if got := m.vmNodes(); got != "370@pve1 380@pve2 381@pve2 390@pve3" {
		t.Errorf("VMs: %s", got)
	}
	if got := m.statuses(); got != "pve1=ok pve2=ok pve3=ok" {
		t.Errorf("nodes: %s", got)
	}
	// The summary is the sum of the nodes' own.
	if m.Summary.VMs != 4 || m.Summary.Errors != 1 || m.Summary.Warnings != 2 {
		t.Errorf("summary %+v", m.Summary)
	}
	for _, n := range m.Nodes {
		if n.Version != "dev" || n.VersionDiffers || n.Exit == nil || *n.Exit != 1 {
			t.Errorf("node %+v", n)
		}
	}
	calls := fc.sshCalls(t)
	if len(calls) != 2 {
		t.Errorf("ssh ran %d times, want 2 (pve2, pve3; pve1 is this process)", len(calls))
	}
	assertQuoted(t, calls)
	want := []string{"-e", "none", "-o", "BatchMode=yes", "-o", "HostKeyAlias=pve2", "-o", "UserKnownHostsFile=" + filepath.Join(fc.Pmxcfs(), "nodes/pve2/ssh_known_hosts")}
	for _, c := range calls {
		if strings.Contains(strings.Join(c, " "), "HostKeyAlias=pve2") && strings.Join(c[:6], " ") != strings.Join(want[:6], " ") {
			t.Errorf("ssh options %q", c)
		}
	}

	// The text view: each VM marked with its node, a NODE table.
	out, _, code = fc.run(t, "check", "--all", "--cluster")
	for _, want := range []string{"VM 380 on pve2 (stopped): 1 finding(s)", "VM 390 on pve3 (stopped): 1 finding(s)", "\nNODE  ", "\npve3  ok ", "3 node(s), 4 VM(s) checked: 1 error(s), 2 warning(s), 0 info"} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	if code != exitProblem {
		t.Errorf("text: exit %d", code)
	}
}

// A node that does not answer is named, the others are reported, its VMs
// are checked from their configs only, and the exit code is 3; the same
// for a node offline in .members, which is not even asked.
func TestClusterNodeDown(t *testing.T) {
	fc := newFakeCluster(t)
	t.Setenv(hostEnv("127.0.0.3"), "!refused")
	out, errs, code := fc.run(t, "--json", "check", "--all", "--cluster")
	m := decodeMerged(t, out)
	if code != exitUnreachable || !strings.Contains(errs, "pve3 unreachable (ssh: connect to host 127.0.0.3 port 22: Connection refused)") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	if got := m.vmNodes(); got != "370@pve1 380@pve2 381@pve2 390@pve3(config-only)" {
		t.Errorf("VMs: %s", got)
	}
	if got := m.statuses(); got != "pve1=ok pve2=ok pve3=unreachable" {
		t.Errorf("nodes: %s", got)
	}
	if n := m.Nodes[2]; !n.ConfigOnly || n.Exit != nil || n.Error == "" {
		t.Errorf("pve3: %+v", n)
	}
	// Config rules still find cache=unsafe on 390.
	if f := m.VMs[3].Findings; len(f) != 1 || f[0].Code != "cache-unsafe" {
		t.Errorf("390 config-only findings %+v", f)
	}

	fc.Node("pve3").Online = false
	if err := fc.Sync(); err != nil {
		t.Fatal(err)
	}
	before := len(fc.sshCalls(t))
	out, errs, code = fc.run(t, "check", "--all", "--cluster")
	if code != exitUnreachable || !strings.Contains(errs, "pve3 offline (offline in /etc/pve/.members: not asked)") {
		t.Errorf("offline: exit %d, stderr %q", code, errs)
	}
	for _, want := range []string{"VM 390 on pve3 (config only: pve3 offline): 1 finding(s)", "\npve3  offline  1 ", "config rules only, from /etc/pve/nodes/pve3/qemu-server", "VM 381 on pve2 (stopped)"} {
		if !strings.Contains(out, want) {
			t.Errorf("offline: text lacks %q:\n%s", want, out)
		}
	}
	for _, c := range fc.sshCalls(t)[before:] {
		if strings.Contains(strings.Join(c, " "), "127.0.0.3") {
			t.Errorf("the offline node was asked: %q", c)
		}
	}
}

// What ssh printed on its way out (exit 255) reaches the admin's terminal
// with its control characters escaped: no escape sequence of the other end
// is acted on, in the error line or in the nodes' table.
func TestClusterSSHStderrEscaped(t *testing.T) {
	fc := newFakeCluster(t)
	t.Setenv(hostEnv("127.0.0.3"), "!escapes")
	out, errs, code := fc.run(t, "check", "--all", "--cluster")
	want := `\x1b]0;owned\a\x1b[2J\x1b[31mssh: connect to host 127.0.0.3 port 22: Connection refused\x1b[0m\a`
	if code != exitUnreachable || !strings.Contains(errs, "pve3 unreachable ("+want+")") || !strings.Contains(out, "\npve3  unreachable ") || !strings.Contains(out, want) {
		t.Errorf("exit %d, stderr %q\n%s", code, errs, out)
	}
	for name, s := range map[string]string{"stdout": out, "stderr": errs} {
		if strings.ContainsAny(s, "\x1b\x07") {
			t.Errorf("%s holds a control character: %q", name, s)
		}
	}
	// JSON escapes them anyway; the message is the same text.
	out, _, _ = fc.run(t, "--json", "check", "--all", "--cluster")
	if m := decodeMerged(t, out); len(m.Nodes) != 3 || m.Nodes[2].Error != want {
		t.Errorf("JSON: %+v", m.Nodes)
	}
	// So does a node's own error line, in a reply.
	t.Setenv(hostEnv("127.0.0.3"), "!hostile-reply")
	out, errs, code = fc.run(t, "check", "--all", "--cluster")
	want = `\x1b[2J\x1b[31mVM 390: busy\x1b[0m`
	if code != exitUnreachable || !strings.Contains(errs, "pve3 failed ("+want+")") || !strings.Contains(out, "\npve3  failed ") || !strings.Contains(out, want) || strings.Contains(out+errs, "\x1b") {
		t.Errorf("a reply's error line: exit %d, stderr %q\n%q", code, errs, out)
	}
}

// Output that is not a reply, or a reply whose JSON cannot be read, is an
// error of that node only.
func TestClusterGarbage(t *testing.T) {
	fc := newFakeCluster(t)
	t.Setenv(hostEnv("127.0.0.2"), "!garbage")
	out, errs, code := fc.run(t, "--json", "check", "--all", "--cluster")
	m := decodeMerged(t, out)
	if code != exitUnreachable || !strings.Contains(errs, `pve2 bad-reply (printed something that is not a pvediskcheck reply: "<html><body>502 Bad Gateway</body></html>")`) {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
	if got := m.statuses(); got != "pve1=ok pve2=bad-reply pve3=ok" {
		t.Errorf("nodes: %s", got)
	}
	if got := m.vmNodes(); got != "370@pve1 380@pve2(config-only) 381@pve2(config-only) 390@pve3" {
		t.Errorf("VMs: %s", got)
	}
}

// A node running another pvediskcheck version is named, and still used.
func TestClusterOtherVersion(t *testing.T) {
	fc := newFakeCluster(t)
	t.Setenv(envTestVersion, "9.9.9")
	out, _, code := fc.run(t, "check", "--all", "--cluster")
	if code != exitProblem || !strings.Contains(out, "9.9.9 (this node dev)") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	out, _, _ = fc.run(t, "--json", "cache", "380")
	var doc map[string]any
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc["node"] != "pve2" || doc["node_version"] != "9.9.9" {
		t.Errorf("cache --json: %v %v", doc, err)
	}
}

// A VM of another node is answered there, marked with the node; what
// changes says where it acted.
func TestClusterForwardVM(t *testing.T) {
	fc := newFakeCluster(t)
	out, errs, code := fc.run(t, "cache", "380")
	if !strings.HasPrefix(out, "VM 380 on pve2 (asked over SSH, root@127.0.0.2)\nVM 380: not running") || code != exitUnreachable ||
		!strings.HasPrefix(errs, "pvediskcheck: VM 380 on pve2: ") {
		t.Errorf("cache 380: exit %d\n%s\nstderr %q", code, out, errs)
	}
	out, _, code = fc.run(t, "--json", "cache", "380", "sata0")
	var doc struct {
		Node  string `json:"node"`
		VMID  int    `json:"vmid"`
		Disks []struct{ ID string }
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Node != "pve2" || doc.VMID != 380 || len(doc.Disks) != 1 || code != exitUnreachable {
		t.Errorf("cache --json: %+v %v exit %d\n%s", doc, err, code, out)
	}
	// A change that is only printed acts nowhere; one that is made says
	// where (the VM is stopped: --persist would run qm set there).
	out, _, code = fc.run(t, "limit", "380", "sata0", "--mbps-wr", "20", "--persist", "--dry-run")
	if !strings.HasPrefix(out, "VM 380 on pve2 (asked over SSH, root@127.0.0.2)\n") || !strings.Contains(out, "qm set 380 --sata0 local:380/vm-380-disk-0.raw,size=1G,mbps_wr=20") || code != exitOK {
		t.Errorf("limit --dry-run: exit %d\n%s", code, out)
	}
	out, _, _ = fc.run(t, "flush", "380", "--trigger", "--for", "1s")
	if !strings.HasPrefix(out, "VM 380 on pve2 (acted there, over SSH, root@127.0.0.2)\n") {
		t.Errorf("flush --trigger:\n%s", out)
	}
	// check with VMIDs of several nodes asks each of them.
	out, _, code = fc.run(t, "--json", "check", "390", "370", "380")
	if m := decodeMerged(t, out); m.vmNodes() != "370@pve1 380@pve2 390@pve3" || m.statuses() != "pve1=ok pve2=ok pve3=ok" || code != exitProblem {
		t.Errorf("check 390 370 380: %s / %s, exit %d", m.vmNodes(), m.statuses(), code)
	}
	// The remote lines carry the flags as parsed values.
	calls := fc.sshCalls(t)
	assertQuoted(t, calls)
	want := map[string]bool{
		"'pvediskcheck' '--cluster-reply=pve2' '--timeout=5s' 'limit' '--mbps-wr=20' '--persist=true' '--dry-run=true' '380' 'sata0'": false,
		"'pvediskcheck' '--cluster-reply=pve2' '--timeout=5s' 'flush' '--for=1s' '--trigger=true' '380'":                              false,
		"'pvediskcheck' '--cluster-reply=pve3' '--timeout=5s' '--json' 'check' '390'":                                                 false,
	}
	for _, c := range calls {
		for i, a := range c {
			if strings.HasPrefix(a, "root@") {
				want[strings.Join(c[i+1:], " ")] = true
			}
		}
	}
	for line, seen := range want {
		if !seen {
			t.Errorf("no remote command line %s", line)
		}
	}
}

// Nothing typed reaches a remote shell unvalidated: hostile arguments end
// here with exit 2, before ssh runs.
func TestClusterHostileArguments(t *testing.T) {
	fc := newFakeCluster(t)
	marker := filepath.Join(t.TempDir(), "pwned")
	for _, args := range [][]string{
		{"cache", "380", "sata0;touch " + marker},
		{"cache", "380", "$(touch " + marker + ")"},
		{"limit", "380", "sata0", "--mbps-wr", "20;touch " + marker},
		{"limit", "380", "sata0", "--mbps-wr", "`touch " + marker + "`"},
		{"discard", "380", "sata0'; touch " + marker + "; '"},
		{"thin", "--cluster", "local;touch " + marker},
		{"check", "380", "381\ntouch " + marker},
	} {
		_, errs, code := fc.run(t, args...)
		if code != exitUsage {
			t.Errorf("%q: exit %d, stderr %q", args, code, errs)
		}
	}
	if calls := fc.sshCalls(t); len(calls) != 0 {
		t.Errorf("ssh ran: %q", calls)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("a hostile argument ran on a node")
	}
}

// A run that answers another node prints one reply, never forwards, and
// refuses when it is not the node that was meant.
func TestClusterReplyMode(t *testing.T) {
	fc := newFakeCluster(t)
	read := func(out string) cluster.Reply {
		t.Helper()
		var r cluster.Reply
		if strings.Count(out, "\n") != 1 || json.Unmarshal([]byte(out), &r) != nil || r.Format != cluster.ReplyFormat {
			t.Fatalf("not one reply line: %q", out)
		}
		return r
	}
	out, errs, code := runCLI(t, "--root", fc.Node("pve2").Root, "--cluster-reply=pve3", "--json", "check", "--all")
	r := read(out)
	if code != exitUnreachable || errs != "" || r.Node != "pve2" || r.Exit != 3 || r.Stdout != "" || !strings.Contains(r.Stderr, "this is node pve2, not pve3: nothing was run") {
		t.Errorf("wrong node: exit %d %+v %q", code, r, errs)
	}
	out, _, code = fc.run(t, "--cluster-reply=pve1", "cache", "380")
	if r := read(out); code != exitUsage || r.Exit != 2 || r.Node != "pve1" || r.Version != "dev" || !strings.Contains(r.Stderr, "no such VM") {
		t.Errorf("reply mode forwarded, or said %+v (exit %d)", r, code)
	}
	out, _, code = fc.run(t, "--cluster-reply=pve1", "--json", "check", "--all", "--cluster")
	if r := read(out); code != exitProblem || !strings.Contains(r.Stdout, `"vmid": 370`) || strings.Contains(r.Stdout, "380") {
		t.Errorf("reply mode asked other nodes: %+v", r)
	}
	if calls := fc.sshCalls(t); len(calls) != 0 {
		t.Errorf("ssh ran: %q", calls)
	}
	if _, errs, code := fc.run(t, "--cluster-config-only=-x", "check", "--all"); code != exitUsage {
		t.Errorf("bad config-only node: exit %d %q", code, errs)
	}
}

// What cluster mode does not change: a VM nobody has, a container, --cluster
// without --all, thin --cluster on pools of every node.
func TestClusterEdges(t *testing.T) {
	fc := newFakeCluster(t)
	if _, errs, code := fc.run(t, "cache", "999"); code != exitUsage || !strings.Contains(errs, "VM 999: no such VM on this node") {
		t.Errorf("unknown VM: exit %d %q", code, errs)
	}
	vmlist := filepath.Join(fc.Pmxcfs(), ".vmlist")
	b, _ := os.ReadFile(vmlist)
	ct := strings.Replace(string(b), `"381": { "node": "pve2", "type": "qemu"`, `"381": { "node": "pve2", "type": "lxc"`, 1)
	if err := os.WriteFile(vmlist, []byte(ct), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, errs, code := fc.run(t, "flush", "381"); code != exitUsage || !strings.Contains(errs, "guest (lxc) 381 on pve2: pvediskcheck reads QEMU VMs, not containers") {
		t.Errorf("container: exit %d %q", code, errs)
	}
	if _, errs, code := fc.run(t, "check", "--cluster", "370"); code != exitUsage || !strings.Contains(errs, "--cluster goes with --all") {
		t.Errorf("--cluster without --all: exit %d %q", code, errs)
	}
	if _, errs, code := fc.run(t, "check", "--cluster", "--all", "370"); code != exitUsage || !strings.Contains(errs, "not both") {
		t.Errorf("--cluster --all VMID: exit %d %q", code, errs)
	}
	out, errs, code := fc.run(t, "thin", "--cluster")
	if code != exitOK || !strings.Contains(out, "note: pve3: no lvmthin or zfspool storage in ") || !strings.Contains(out, "\npve2  ok ") {
		t.Errorf("thin --cluster: exit %d %q\n%s", code, errs, out)
	}
	out, _, _ = fc.run(t, "--json", "thin", "--cluster")
	var thin struct {
		Pools []any                `json:"pools"`
		Notes []string             `json:"notes"`
		Nodes []cluster.NodeReport `json:"nodes"`
	}
	if err := json.Unmarshal([]byte(out), &thin); err != nil || thin.Pools == nil || len(thin.Notes) != 3 || len(thin.Nodes) != 3 {
		t.Errorf("thin --cluster --json: %+v %v\n%s", thin, err, out)
	}
}

// top watches this node's VMs: a VMID of another node is not "no such VM"
// but named with its node and how to watch it there; nothing goes over SSH.
func TestClusterTopNamesTheNode(t *testing.T) {
	fc := newFakeCluster(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"top", "380", "--count", "1"}, "pvediskcheck: VM 380 runs on pve2: top watches the VMs of the node it runs on; there: ssh -t root@127.0.0.2 pvediskcheck top 380\n"},
		{[]string{"top", "381", "380", "--count", "1"}, "pvediskcheck: VM 381 runs on pve2: top watches the VMs of the node it runs on; there: ssh -t root@127.0.0.2 pvediskcheck top 381 380\n"},
		{[]string{"top", "370", "390", "--count", "1"}, "pvediskcheck: VM 390 runs on pve3: top watches the VMs of the node it runs on; there: ssh -t root@127.0.0.3 pvediskcheck top 390\n"},
		{[]string{"top", "999", "--count", "1"}, "pvediskcheck: VM 999: no such VM on this node (no " + filepath.Join(fc.Nodes[0].Root, "etc/pve/qemu-server/999.conf") + ")\n"},
	} {
		out, errs, code := fc.run(t, tc.args...)
		if code != exitUsage || errs != tc.want || out != "" {
			t.Errorf("%v: exit %d, stdout %q\nstderr %q\nwant   %q", tc.args, code, out, errs, tc.want)
		}
	}
	if calls := fc.sshCalls(t); len(calls) != 0 {
		t.Errorf("top went over SSH: %v", calls)
	}
}

// A node's answer is checked against .vmlist and bounded before it is
// believed (issue 31, cluster): VMs of other nodes, counts below 0 or of
// 10^18, a VM it was not asked about, one VM twice, another VM than the
// one forwarded. The node is bad-reply naming what is wrong, its VMs are
// judged from their configs here, the summary holds none of it, exit 3.
func TestClusterAnswerVetted(t *testing.T) {
	for _, c := range []struct {
		host, why string
		args      []string
		vms       string
	}{
		{"!foreign-vms", "VM 370, which /etc/pve/.vmlist places on pve1", nil, "370@pve1 380@pve2(config-only) 381@pve2(config-only) 390@pve3"},
		{"!bad-counts", "summary.vms is -3, not a count from 0 to 1000000", nil, "370@pve1 380@pve2(config-only) 381@pve2(config-only) 390@pve3"},
		{"!huge-counts", "summary.errors is 1000000000000000000, not a count from 0 to 1000000", nil, "370@pve1 380@pve2(config-only) 381@pve2(config-only) 390@pve3"},
		{"!twice", "VM 380 twice", nil, "370@pve1 380@pve2(config-only) 381@pve2(config-only) 390@pve3"},
		{"!unasked", "VM 381, which it was not asked about", []string{"--json", "check", "380", "370"}, "370@pve1 380@pve2(config-only)"},
	} {
		t.Run(c.host, func(t *testing.T) {
			fc := newFakeCluster(t)
			t.Setenv(hostEnv("127.0.0.2"), c.host)
			args := c.args
			if args == nil {
				args = []string{"--json", "check", "--all", "--cluster"}
			}
			out, errs, code := fc.run(t, args...)
			m := decodeMerged(t, out)
			want := "pve2 bad-reply (answered what cannot be believed: " + c.why + ")"
			if code != exitUnreachable || !strings.Contains(errs, want) {
				t.Errorf("exit %d, stderr %q\nwant %q", code, errs, want)
			}
			if got := m.vmNodes(); got != c.vms {
				t.Errorf("VMs: %s, want %s", got, c.vms)
			}
			if m.Summary.VMs < 0 || m.Summary.Errors >= 1000000 || m.Summary.VMs > 4 {
				t.Errorf("summary believed: %+v", m.Summary)
			}
			// The text view says the same.
			txt, _, _ := fc.run(t, args[1:]...)
			if !strings.Contains(txt, "pve2  bad-reply ") || !strings.Contains(txt, "VM(s) checked: ") || strings.Contains(txt, "VM(s) checked: -") || strings.Contains(txt, "checked: 1000000000000000000") || strings.Contains(txt, "-3 VM(s)") {
				t.Errorf("text:\n%s", txt)
			}
		})
	}
	// A forwarded command answered for another VM.
	fc := newFakeCluster(t)
	t.Setenv(hostEnv("127.0.0.2"), "!other-vmid")
	out, errs, code := fc.run(t, "--json", "cache", "380")
	if code != exitUnreachable || out != "" || !strings.Contains(errs, "VM 380 on pve2 (bad-reply): answered for VM 390 when asked about VM 380: not believed") {
		t.Errorf("forwarded: exit %d %q %q", code, out, errs)
	}
}

// A path this node writes, given for a VM of another node (bench --out,
// --report, stall --out), is refused, saying where to run the command: the
// other node would write a path of its own (issue 31: --help said they
// worked, and a path that looked like a word, --out results, was sent).
// bench --jobs, a file this node reads, travels as its content, checked
// here first. Nothing runs over SSH for a refusal.
func TestClusterPathFlagsRefused(t *testing.T) {
	fc := newFakeCluster(t)
	for _, args := range [][]string{
		{"bench", "380", "sata0", "--report", "/root/r.html"},
		{"bench", "380", "sata0", "--out", "results"},
		{"stall", "380", "--out", "/var/tmp"},
	} {
		out, errs, code := fc.run(t, args...)
		flag := args[len(args)-2]
		want := "pvediskcheck: " + flag + " names a file of this node, and the VM is on node pve2, which would read or write its own: run the command there, where the path is that node's (ssh -t root@127.0.0.2 pvediskcheck " + args[0] + " ...)\n"
		if code != exitUsage || errs != want || out != "" {
			t.Errorf("%q: exit %d %q\nwant %q", args, code, out+errs, want)
		}
	}
	if calls := fc.sshCalls(t); len(calls) != 0 {
		t.Errorf("ssh ran: %q", calls)
	}
	dir := t.TempDir()
	bad, good := filepath.Join(dir, "bad.fio"), filepath.Join(dir, "good.fio")
	os.WriteFile(bad, []byte("[a]\nexec_prer=touch /tmp/x\n"), 0o644)
	os.WriteFile(good, []byte("[mine]\nrw=randread\nbs=4k\n"), 0o644)
	if _, errs, code := fc.run(t, "bench", "380", "sata0", "--jobs", bad); code != exitUsage || !strings.Contains(errs, "exec_prer is not a whole option name") {
		t.Errorf("a bad --jobs file for another node: exit %d %q", code, errs)
	}
	if calls := fc.sshCalls(t); len(calls) != 0 {
		t.Errorf("ssh ran for a bad file: %q", calls)
	}
	fc.run(t, "bench", "380", "sata0", "--jobs", good, "--dry-run")
	calls := fc.sshCalls(t)
	if len(calls) != 1 || !strings.Contains(strings.Join(calls[0], " "), "'--jobs-content=") || strings.Contains(strings.Join(calls[0], " "), "'--jobs=") {
		t.Errorf("--jobs sent as: %q", calls)
	}
}
