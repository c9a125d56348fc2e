package main

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/cluster"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/node"
)

// A real cluster in miniature: three node roots sharing one pmxcfs-shaped
// /etc/pve, a real OpenSSH sshd per node on 127.0.0.2 and 127.0.0.3 (port
// 22 when free) whose sessions get the node's root through SetEnv, real
// QEMU VMs on every node, and the built binary on each node's PATH. pve1 is
// this test process (run in-process, as an admin's shell on pve1 would).
type sshCluster struct {
	*fakenode.Cluster
	ssh  *fakenode.SSH
	bins map[string]string // node -> the directory on its PATH holding "pvediskcheck"
	bin  string            // the built binary
}

// clusterVMs: VMID per node; each VM has one local-lvm disk.
var clusterVMs = map[string]int{"pve1": 371, "pve2": 372, "pve3": 373}

// oneVMEach gives every node its VM of clusterVMs, running.
func oneVMEach(t testing.TB, c *fakenode.Cluster) {
	for _, n := range c.Nodes {
		id := clusterVMs[n.Name]
		vol := sf("vm-%d-disk-0", id)
		n.MustVolume(t, "local-lvm", vol, 64<<20)
		conf := sf("ostype: l26\nscsihw: virtio-scsi-single\nscsi0: local-lvm:%s,iothread=1,cache=writeback,size=64M\n", vol)
		if err := c.WriteConfig(n.Name, id, conf); err != nil {
			t.Fatal(err)
		}
		n.MustStart(t, id, fakenode.ArgvOptions{Extra: []string{"-S"}})
	}
}

func newSSHCluster(t testing.TB, vms func(testing.TB, *fakenode.Cluster)) *sshCluster {
	t.Helper()
	fakenode.RequireQEMU(t)
	if _, err := os.Stat(fakenode.SSHDBinary); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%v: run `make test`, which installs it", fakenode.ErrNoSSHD)
		}
		t.Skip(fakenode.ErrNoSSHD)
	}
	c, err := fakenode.NewCluster(t.TempDir(), []string{"pve1", "pve2", "pve3"}, []string{"127.0.0.1", "127.0.0.2", "127.0.0.3"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	vms(t, c)
	doubles, err := fakenode.BuildDoubles()
	if err != nil {
		t.Fatal(err)
	}
	sc := &sshCluster{Cluster: c, bins: map[string]string{}, bin: buildBinary(t)}
	for _, n := range c.Nodes {
		dir := filepath.Join(c.Dir, "bin-"+n.Name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		sc.bins[n.Name] = dir
		sc.install(t, n.Name, sc.bin)
	}
	sc.ssh, err = c.StartSSH(t.TempDir(), func(n *fakenode.ClusterNode) map[string]string {
		return map[string]string{
			"PVEDISKCHECK_ROOT":       n.Root,
			fakenode.EnvRoot:          n.Root,
			"PATH":                    sc.bins[n.Name] + ":" + doubles + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"PVEDISKCHECK_SSH_MARKER": n.Name, // nothing reads it: it shows in sshd's SetEnv line
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sc.ssh.Stop)
	for _, n := range c.Nodes[1:] {
		t.Logf("%s: sshd on %s", n.Name, sc.ssh.Addr(n.Name))
	}
	c.Nodes[0].UseDoubles(t)
	t.Setenv(envSSH, sc.ssh.Wrapper)
	return sc
}

// install makes prog the node's pvediskcheck.
func (sc *sshCluster) install(t testing.TB, node, prog string) {
	t.Helper()
	p := filepath.Join(sc.bins[node], "pvediskcheck")
	_ = os.Remove(p)
	if err := os.Symlink(prog, p); err != nil {
		t.Fatal(err)
	}
}

// script writes an executable shell script and returns its path.
func script(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pvediskcheck")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+text), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func (sc *sshCluster) run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	return runCLI(t, append([]string{"--root", sc.Nodes[0].Root}, args...)...)
}

func TestClusterSSH(t *testing.T) {
	sc := newSSHCluster(t, oneVMEach)

	t.Run("check-all-merged", func(t *testing.T) {
		out, errs, code := sc.run(t, "--json", "check", "--all", "--cluster")
		m := decodeMerged(t, out)
		if m.vmNodes() != "371@pve1 372@pve2 373@pve3" || m.statuses() != "pve1=ok pve2=ok pve3=ok" || code != exitProblem {
			t.Fatalf("%s / %s, exit %d, stderr %q\n%s", m.vmNodes(), m.statuses(), code, errs, out)
		}
		var running struct {
			VMs []struct {
				Running bool `json:"running"`
			} `json:"vms"`
		}
		_ = json.Unmarshal([]byte(out), &running)
		for i, v := range running.VMs {
			if !v.Running {
				t.Errorf("VM %d: not seen running by its node", m.VMs[i].VMID)
			}
		}
		if m.Summary.VMs != 3 || m.Summary.Warnings < 3 {
			t.Errorf("summary %+v (each VM has cache=writeback)", m.Summary)
		}
	})

	t.Run("check-all-policy", func(t *testing.T) {
		// A relative path: the nodes' sessions do not share this test's
		// directory, so each node judges by the content sent.
		out, errs, code := sc.run(t, "--json", "check", "--all", "--cluster", "--policy", "testdata/policy/cluster.yaml")
		var d struct {
			VMs []struct {
				Node     string `json:"node"`
				Findings []struct {
					Code string `json:"code"`
					Disk string `json:"disk"`
				} `json:"findings"`
			} `json:"vms"`
			PolicyRules []struct {
				Node       string `json:"node"`
				Violations int    `json:"violations"`
			} `json:"policy_rules"`
		}
		if err := json.Unmarshal([]byte(out), &d); err != nil || code != exitProblem || len(d.VMs) != 3 || len(d.PolicyRules) != 3 {
			t.Fatalf("exit %d %q %v\n%s", code, errs, err, out)
		}
		for i, v := range d.VMs {
			n := 0
			for _, f := range v.Findings {
				if f.Code == "policy" && f.Disk == "scsi0" {
					n++
				}
			}
			if n != 1 || d.PolicyRules[i].Violations != 1 || d.PolicyRules[i].Node != v.Node {
				t.Errorf("%s: %d policy findings, rules %+v", v.Node, n, d.PolicyRules[i])
			}
		}
	})

	t.Run("vm-on-another-node", func(t *testing.T) {
		out, errs, code := sc.run(t, "cache", "372")
		if !strings.HasPrefix(out, "VM 372 on pve2 (asked over SSH, root@127.0.0.2)\nVM 372: running") || code != exitOK {
			t.Errorf("cache 372: exit %d %q\n%s", code, errs, out)
		}
		out, _, code = sc.run(t, "--json", "cache", "372")
		var c struct {
			Node  string `json:"node"`
			Disks []struct {
				Cache struct {
					Effective *string `json:"effective"`
				} `json:"cache"`
			} `json:"disks"`
		}
		if err := json.Unmarshal([]byte(out), &c); err != nil || c.Node != "pve2" || len(c.Disks) != 1 || c.Disks[0].Cache.Effective == nil || *c.Disks[0].Cache.Effective != "writeback" || code != exitOK {
			t.Errorf("cache --json: %+v %v exit %d\n%s", c, err, code, out)
		}
		out, _, code = sc.run(t, "limit", "372", "scsi0", "--mbps-wr", "20", "--dry-run")
		if !strings.HasPrefix(out, "VM 372 on pve2 (asked over SSH, root@127.0.0.2)\n") || !strings.Contains(out, "qom-set") && !strings.Contains(out, "block_set_io_throttle") || code != exitOK {
			t.Errorf("limit --dry-run: exit %d\n%s", code, out)
		}
		out, errs, code = sc.run(t, "limit", "372", "scsi0", "--mbps-wr", "20")
		if !strings.HasPrefix(out, "VM 372 on pve2 (acted there, over SSH, root@127.0.0.2)\n") || !strings.Contains(out, "confirmed") || code != exitOK {
			t.Errorf("limit: exit %d %q\n%s", code, errs, out)
		}
		// pve2's QEMU runs the limit; pve1's VM does not.
		var l struct {
			Node   string `json:"node"`
			Limits struct {
				RunningQEMU map[string]float64 `json:"running_qemu"`
			} `json:"limits"`
		}
		out, _, _ = sc.run(t, "--json", "limit", "372", "scsi0")
		if err := json.Unmarshal([]byte(out), &l); err != nil || l.Node != "pve2" || l.Limits.RunningQEMU["bps-write"] != 20<<20 {
			t.Errorf("limit 372 after: %+v %v\n%s", l, err, out)
		}
		out, _, _ = sc.run(t, "--json", "limit", "371", "scsi0")
		if strings.Contains(out, `"node"`) || strings.Contains(out, "20971520") {
			t.Errorf("pve1's VM 371 was touched or forwarded:\n%s", out)
		}
	})

	t.Run("thin-cluster", func(t *testing.T) {
		out, errs, code := sc.run(t, "--json", "thin", "--cluster")
		var d struct {
			Pools []struct {
				Node    string `json:"node"`
				Volumes []struct {
					VMID int `json:"vmid"`
				} `json:"volumes"`
			} `json:"pools"`
		}
		if err := json.Unmarshal([]byte(out), &d); err != nil || len(d.Pools) != 3 || code > exitProblem {
			t.Fatalf("thin --cluster: %v exit %d %q\n%s", err, code, errs, out)
		}
		for _, p := range d.Pools {
			if len(p.Volumes) != 1 || p.Volumes[0].VMID != clusterVMs[p.Node] {
				t.Errorf("pool of %s: %+v (each node reports its own pool)", p.Node, p.Volumes)
			}
		}
	})

	t.Run("sshd-stopped", func(t *testing.T) {
		sc.ssh.StopNode("pve3")
		defer func() {
			if err := sc.ssh.StartNode("pve3"); err != nil {
				t.Fatal(err)
			}
		}()
		out, errs, code := sc.run(t, "--json", "check", "--all", "--cluster")
		m := decodeMerged(t, out)
		if code != exitUnreachable || !strings.Contains(errs, "pve3 unreachable (") || !strings.Contains(errs, "Connection refused") {
			t.Errorf("exit %d, stderr %q", code, errs)
		}
		if m.vmNodes() != "371@pve1 372@pve2 373@pve3(config-only)" || m.statuses() != "pve1=ok pve2=ok pve3=unreachable" {
			t.Errorf("%s / %s", m.vmNodes(), m.statuses())
		}
		_, errs, code = sc.run(t, "cache", "373")
		if code != exitUnreachable || !strings.Contains(errs, "VM 373 on pve3 (unreachable): ") {
			t.Errorf("cache 373: exit %d %q", code, errs)
		}
	})

	t.Run("node-offline", func(t *testing.T) {
		sc.run(t, "cache", "373") // one login at least, to count from
		sc.Node("pve3").Online = false
		if err := sc.Sync(); err != nil {
			t.Fatal(err)
		}
		defer func() {
			sc.Node("pve3").Online = true
			if err := sc.Sync(); err != nil {
				t.Fatal(err)
			}
		}()
		// sshd logs a session's end after the client has gone: wait until
		// every login so far has its "Disconnected" line (a loaded machine
		// wrote the last one after it was counted), then count.
		settle := time.Now().Add(10 * time.Second)
		for log := sc.ssh.Log("pve3"); strings.Count(log, "Accepted publickey for root") != strings.Count(log, "Disconnected from user root") && time.Now().Before(settle); log = sc.ssh.Log("pve3") {
			time.Sleep(20 * time.Millisecond)
		}
		logged := strings.Count(sc.ssh.Log("pve3"), "Disconnected from user root")
		out, errs, code := sc.run(t, "check", "--all", "--cluster")
		if code != exitUnreachable || !strings.Contains(errs, "pve3 offline") || !strings.Contains(out, "VM 373 on pve3 (config only: pve3 offline)") || !strings.Contains(out, "VM 372 on pve2 (running)") {
			t.Errorf("exit %d %q\n%s", code, errs, out)
		}
		if n := strings.Count(sc.ssh.Log("pve3"), "Disconnected from user root"); n != logged || n == 0 {
			t.Errorf("the offline node was asked (%d logins, %d before)", n, logged)
		}
	})

	t.Run("garbage", func(t *testing.T) {
		sc.install(t, "pve3", script(t, "echo 'Segmentation fault (core dumped)'\n"))
		defer sc.install(t, "pve3", sc.bin)
		out, errs, code := sc.run(t, "--json", "check", "--all", "--cluster")
		m := decodeMerged(t, out)
		if code != exitUnreachable || !strings.Contains(errs, `pve3 bad-reply (printed something that is not a pvediskcheck reply: "Segmentation fault (core dumped)")`) {
			t.Errorf("exit %d %q", code, errs)
		}
		if m.statuses() != "pve1=ok pve2=ok pve3=bad-reply" || m.vmNodes() != "371@pve1 372@pve2 373@pve3(config-only)" {
			t.Errorf("%s / %s", m.statuses(), m.vmNodes())
		}
	})

	t.Run("other-version", func(t *testing.T) {
		newer := filepath.Join(t.TempDir(), "pvediskcheck")
		if out, err := exec.Command("go", "build", "-ldflags", "-X main.version=9.9.9", "-o", newer, ".").CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		sc.install(t, "pve2", newer)
		defer sc.install(t, "pve2", sc.bin)
		out, _, code := sc.run(t, "check", "--all", "--cluster")
		if code != exitProblem || !strings.Contains(out, "\npve2  ok ") || !strings.Contains(out, "9.9.9 (this node dev)") {
			t.Errorf("newer: exit %d\n%s", code, out)
		}
		// A pvediskcheck from before cluster mode does not know
		// --cluster-reply (what commit a554f2b prints, recorded in
		// cluster/testdata): named with its version, the others reported.
		old, err := os.ReadFile("../../cluster/testdata/old-version-stderr.txt")
		if err != nil {
			t.Fatal(err)
		}
		sc.install(t, "pve2", script(t, `case "$1" in --version) echo "pvediskcheck version 0.1.0-1"; exit 0;; esac
printf '%s' '`+strings.TrimSpace(string(old))+`' >&2; echo >&2; exit 2
`))
		out, errs, code := sc.run(t, "check", "--all", "--cluster")
		if code != exitUnreachable || !strings.Contains(errs, "pve2 other-version (runs pvediskcheck 0.1.0-1, too old to answer another node") || !strings.Contains(out, "VM 372 on pve2 (config only: pve2 other-version)") {
			t.Errorf("older: exit %d %q\n%s", code, errs, out)
		}
	})

	t.Run("hostile-arguments", func(t *testing.T) {
		marker := filepath.Join(t.TempDir(), "pwned")
		for _, args := range [][]string{
			{"cache", "372", "scsi0;touch " + marker},
			{"limit", "372", "scsi0", "--mbps-wr", "$(touch " + marker + ")"},
			{"thin", "--cluster", "local-lvm'; touch " + marker + "; '"},
		} {
			if _, errs, code := sc.run(t, args...); code != exitUsage {
				t.Errorf("%q: exit %d %q", args, code, errs)
			}
		}
		// Below the CLI's validation, the quoting alone: arguments a shell
		// would act on reach the remote pvediskcheck as plain words
		// through the real sshd and root's login shell.
		s := cluster.SSH{Program: sc.ssh.Wrapper, View: mustView(t, sc.Nodes[0].Node), Runner: node.Exec{Timeout: 30 * time.Second}}
		hostile := []string{"--cluster-reply=pve2", "cache", "$(touch " + marker + ")", "`touch " + marker + "`", "x; touch " + marker, "it's", "*", "a  b"}
		r, err := s.Call(context.Background(), cluster.Member{Name: "pve2", IP: "127.0.0.2", Online: true}, hostile, 30*time.Second)
		if err != nil || r.Exit != exitUsage || !strings.Contains(r.Stderr, "$(touch") {
			t.Errorf("reply %+v, %v", r, err)
		}
		if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
			t.Error("a hostile argument ran in a shell")
		}
	})
}

func mustView(t *testing.T, n *fakenode.Node) *cluster.View {
	t.Helper()
	v, err := cluster.Load(context.Background(), node.New(n.Paths, 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// BenchmarkClusterCheckAll: the built binary's `check --all --cluster
// --json` on a cluster of 3 nodes x 30 running VMs (real QEMU, one disk
// each; pve1 in process, pve2 and pve3 over real sshd), next to the slowest
// node's own `check --all --json` run in the same iteration. Asking the
// nodes at the same time should cost little more than the slowest node.
func BenchmarkClusterCheckAll(b *testing.B) {
	const perNode = 30
	sc := newSSHCluster(b, func(tb testing.TB, c *fakenode.Cluster) {
		for i, n := range c.Nodes {
			for v := 0; v < perNode; v++ {
				id := 500 + i*perNode + v
				vol := sf("%d/vm-%d-disk-0.raw", id, id)
				n.MustVolume(tb, "local", vol, 16<<20)
				if err := n.WriteConfig(id, sf("ostype: l26\nscsihw: virtio-scsi-single\nscsi0: local:%s,iothread=1,discard=on,size=16M\n", vol)); err != nil {
					tb.Fatal(err)
				}
				n.MustStart(tb, id, fakenode.ArgvOptions{Extra: []string{"-S"}})
			}
		}
		if err := c.Sync(); err != nil {
			tb.Fatal(err)
		}
	})
	// A bare SSH round trip to a node, the way the tool connects: what every
	// remote node's answer costs before pvediskcheck starts there.
	bare := exec.Command(sc.ssh.Wrapper, "-e", "none", "-o", "BatchMode=yes", "-o", "HostKeyAlias=pve3",
		"-o", "UserKnownHostsFile="+filepath.Join(sc.Pmxcfs(), "nodes/pve3/ssh_known_hosts"), "root@127.0.0.3", "true")
	var tool, slowest, ssh []time.Duration
	for i := 0; i < b.N+2; i++ {
		t0 := time.Now()
		out, err := exec.Command(sc.bin, "--root", sc.Nodes[0].Root, "--json", "check", "--all", "--cluster").Output()
		if !strings.Contains(string(out), sf(`"vms": %d`, 3*perNode)) || !strings.Contains(string(out), `"status": "ok"`) {
			b.Fatalf("check --cluster: %v %.300s", err, out)
		}
		tool = append(tool, time.Since(t0))
		var worst time.Duration
		for _, n := range sc.Nodes {
			t0 := time.Now()
			out, err := exec.Command(sc.bin, "--root", n.Root, "--json", "check", "--all").Output()
			if !strings.Contains(string(out), sf(`"vms": %d`, perNode)) {
				b.Fatalf("%s check --all: %v %.300s", n.Name, err, out)
			}
			worst = max(worst, time.Since(t0))
		}
		slowest = append(slowest, worst)
		t0 = time.Now()
		if out, err := exec.Command(bare.Path, bare.Args[1:]...).CombinedOutput(); err != nil {
			b.Fatalf("ssh true: %v %s", err, out)
		}
		ssh = append(ssh, time.Since(t0))
	}
	mt, ms, mssh := median(tool[2:]), median(slowest[2:]), median(ssh[2:])
	b.ReportMetric(float64(mt.Microseconds())/1000, "cluster-ms")
	b.ReportMetric(float64(ms.Microseconds())/1000, "slowest-node-ms")
	b.ReportMetric(float64(mssh.Microseconds())/1000, "ssh-true-ms")
	b.Logf("%s: check --all --cluster --json over 3 nodes x %d VMs: median %s; the slowest node's own check --all: %s; a bare ssh NODE true: %s",
		qemuName(b), perNode, mt, ms, mssh)
}
