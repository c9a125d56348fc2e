package check

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/latency/latencytest"
	"github.com/pvediskcheck/pvediskcheck/vm"
	"github.com/pvediskcheck/pvediskcheck/volchain"
)

// TestRuleList lists every rule with what it declares: its scope, codes,
// the drive kinds a disk rule judges, whether it judges read-only drives
// (ro), reads the next start's line (line) or ends the disk's judgement
// (ends). Adding a rule or changing what one judges fails here until the
// table says so.
func TestRuleList(t *testing.T) {
	want := []string{
		"dropped-line vm config-invalid",
		"guest-os vm -",
		"unknown-scsihw vm config-invalid",
		"resolve-error disk config-invalid kinds=disk,cdrom,empty-cdrom,efivars,tpmstate ro",
		"storage-unavailable disk storage-unavailable kinds=disk,cdrom,empty-cdrom,efivars,tpmstate ro",
		"line-ignored disk config-invalid kinds=disk,cdrom,empty-cdrom,efivars,tpmstate ro",
		"ssd-unsupported disk ssd-unsupported kinds=disk,cdrom,empty-cdrom,efivars,tpmstate ro line",
		"iso-without-media disk config-invalid kinds=disk,cdrom,empty-cdrom,efivars,tpmstate ro line ends",
		"limit-invalid disk limit-invalid kinds=disk,cdrom,empty-cdrom ro line",
		"queues-invalid disk queues-invalid kinds=disk,cdrom,empty-cdrom,efivars,tpmstate ro line",
		"aio disk aio-native-needs-direct,aio-io-uring-risk kinds=disk,cdrom ro line",
		"iothread-ignored disk iothread-ignored kinds=disk,cdrom ro line",
		"cache disk cache-unsafe,cache-writeback kinds=disk line",
		"emulated-controller disk emulated-controller kinds=disk line",
		"discard-ignored-on-thin disk discard-ignored-on-thin kinds=disk line",
		"policy disk policy kinds=disk,cdrom,empty-cdrom,efivars,tpmstate ro line",
		"policy-leftover vm policy",
		"pending-restart vm pending-restart",
		"drift vm drift",
		"io-error vm io-error",
		"thin-pool vm thin-overcommit,thin-full",
		"locked vm locked",
		"fleecing-leftover vm fleecing-leftover",
		"guest-frozen vm guest-frozen",
		"qemu-advisory vm qemu-advisory",
		"qemu-outdated vm qemu-outdated",
		"zfs-blocksize-invalid vm zfs-blocksize-invalid",
		"zfs-sync vm zfs-sync-disabled,zfs-sync-always",
		"volume-chain vm volume-chain",
		"disk-stalled vm disk-stalled,latency-histogram-left",
		"fleecing-storage vm fleecing-storage",
		"next-start vm pending-restart",
	}
	var got []string
	for _, ru := range rules {
		got = append(got, describeRule(ru))
	}
	if !slices.Equal(got, want) {
		t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func describeRule(ru Rule) string {
	scope := map[Scope]string{PerVM: "vm", PerDisk: "disk"}[ru.Scope]
	codes := "-"
	if len(ru.Codes) > 0 {
		var cs []string
		for _, c := range ru.Codes {
			cs = append(cs, string(c))
		}
		codes = strings.Join(cs, ",")
	}
	s := ru.Name + " " + scope + " " + codes
	if len(ru.Kinds) > 0 {
		var ks []string
		for _, k := range ru.Kinds {
			ks = append(ks, k.String())
		}
		s += " kinds=" + strings.Join(ks, ",")
	}
	for _, f := range []struct {
		on   bool
		word string
	}{{ru.ReadOnly, "ro"}, {ru.Line, "line"}, {ru.Ends, "ends"}} {
		if f.on {
			s += " " + f.word
		}
	}
	return s
}

// TestRuleDeclarations: each rule is what its scope says (a disk rule a
// Disk function and kinds, a VM rule a VM function and nothing a disk
// rule declares), the names are unique, and the disk rules are one block
// (judge runs them disk by disk).
func TestRuleDeclarations(t *testing.T) {
	seen := map[string]bool{}
	first, last := -1, -1
	for i, ru := range rules {
		if seen[ru.Name] || ru.Name == "" {
			t.Errorf("rule %d: name %q empty or given twice", i, ru.Name)
		}
		seen[ru.Name] = true
		switch ru.Scope {
		case PerDisk:
			if ru.Disk == nil || ru.VM != nil || len(ru.Kinds) == 0 {
				t.Errorf("%s: a disk rule has a Disk function, no VM function, and kinds", ru.Name)
			}
			if first < 0 {
				first = i
			}
			if last >= 0 && last != i-1 {
				t.Errorf("%s: the disk rules are not one block", ru.Name)
			}
			last = i
		case PerVM:
			if ru.VM == nil || ru.Disk != nil || len(ru.Kinds) > 0 || ru.ReadOnly || ru.Line || ru.Ends {
				t.Errorf("%s: a VM rule has a VM function and no disk declarations", ru.Name)
			}
		default:
			t.Errorf("%s: scope %d", ru.Name, ru.Scope)
		}
	}
	if first < 0 {
		t.Error("no disk rule")
	}
}

// TestRuleCodes: every code a rule declares is one of Codes, and every one
// of Codes is declared by a rule or produced outside the list for the
// reason outsideRules gives (and then is one of Codes too).
func TestRuleCodes(t *testing.T) {
	declared := map[Code]bool{}
	for _, ru := range rules {
		for _, c := range ru.Codes {
			if !slices.Contains(Codes, c) {
				t.Errorf("%s declares %s, which is not in Codes", ru.Name, c)
			}
			declared[c] = true
		}
	}
	for _, c := range Codes {
		if !declared[c] && outsideRules[c] == "" {
			t.Errorf("%s: no rule declares it and outsideRules gives no reason", c)
		}
	}
	for c, why := range outsideRules {
		if !slices.Contains(Codes, c) || why == "" {
			t.Errorf("outsideRules: %s not in Codes, or without a reason", c)
		}
	}
}

// produced records, over the package's tests, which codes each rule call
// added (ruleRan), and each code a rule added without declaring it.
var produced = struct {
	sync.Mutex
	by         map[string]map[Code]bool
	undeclared []string
}{by: map[string]map[Code]bool{}}

func recordRule(ru *Rule, before, after []Finding) {
	n := map[Code]int{}
	for _, f := range after {
		n[f.Code]++
	}
	for _, f := range before {
		n[f.Code]--
	}
	produced.Lock()
	defer produced.Unlock()
	for c, k := range n {
		if k <= 0 {
			continue
		}
		if !slices.Contains(ru.Codes, c) {
			produced.undeclared = append(produced.undeclared, ru.Name+" produced "+string(c))
		}
		if produced.by[ru.Name] == nil {
			produced.by[ru.Name] = map[Code]bool{}
		}
		produced.by[ru.Name][c] = true
	}
}

// TestMain has every rule call of the package's tests checked: a finding
// whose code its rule does not declare fails the run. Where the whole
// package runs (no -run), each code a rule declares must also have been
// produced by it in some test.
func TestMain(m *testing.M) {
	ruleRan = recordRule
	code := m.Run()
	var bad []string
	bad = append(bad, produced.undeclared...)
	if f := flag.Lookup("test.run"); code == 0 && f != nil && f.Value.String() == "" {
		for _, ru := range rules {
			for _, c := range ru.Codes {
				if !produced.by[ru.Name][c] {
					bad = append(bad, fmt.Sprintf("%s declares %s, which no test saw it produce", ru.Name, c))
				}
			}
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		fmt.Fprintln(os.Stderr, "rule codes:\n\t"+strings.Join(slices.Compact(bad), "\n\t"))
		code = 1
	}
	os.Exit(code)
}

// runRule calls the VM rule name of the list as judge does (ruleRan sees
// it).
func runRule(t *testing.T, name string, in *Input, out *VMResult) {
	t.Helper()
	for i := range rules {
		if ru := &rules[i]; ru.Name == name && ru.Scope == PerVM {
			judged(ru, out.Findings, func() { ru.VM(in, out) }, func() []Finding { return out.Findings })
			return
		}
	}
	t.Fatalf("no VM rule %s", name)
}

// TestStallRule: disk-stalled's rule reports what the stall look measured
// (Input.verdicts) and the leftover histograms of the same
// query-blockstats, and nothing where the look was not made.
func TestStallRule(t *testing.T) {
	_, ours, _ := latencytest.Recorded(t)
	for _, c := range []struct {
		name, stats string
		stalled     bool
		after       time.Duration
		want        []string
	}{
		{"stalled", "", true, 2 * time.Second, []string{"error disk-stalled scsi1"}},
		{"histogram left", ours, true, time.Hour, []string{"info latency-histogram-left scsi1"}},
		{"not looked at", ours, false, time.Hour, []string{}},
	} {
		n, _ := stallNodeWith(t, c.stats)
		v, err := vm.Load(context.Background(), n, 100)
		if err != nil {
			t.Fatal(err)
		}
		set := disk.Resolve(context.Background(), n, v, v.Disks, stallLayers, disk.Options{})
		in := &Input{set: set, v: v, stalled: c.stalled, verdicts: detectStalls(context.Background(), n, set, c.after)}
		out := VMResult{}
		runRule(t, "disk-stalled", in, &out)
		if got := summary(out); !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// TestVolumeChainRule: a stopped VM's chain of two layers is said (info),
// a disagreement with the config's snapshots warned about, a chain of one
// layer that agrees said by nothing.
func TestVolumeChainRule(t *testing.T) {
	v := &vm.VM{VMID: 100}
	chain := func(id string, c volchain.Chain) *disk.Disk {
		c.Disk = id
		return &disk.Disk{Disk: &vm.Disk{ID: id}, Chain: &c}
	}
	set := &disk.Set{VM: v, Disks: []*disk.Disk{
		chain("scsi0", volchain.Chain{Config: []string{"vm-100-disk-0.qcow2", "snap_vm-100-disk-0_a.qcow2"}, Depth: 2}),
		chain("scsi1", volchain.Chain{Config: []string{"vm-100-disk-1.qcow2"}, Depth: 1, Disagreements: []string{"QEMU runs a layer the config has no snapshot for"}}),
		chain("scsi2", volchain.Chain{Config: []string{"vm-100-disk-2.qcow2"}, Depth: 1}),
		{Disk: &vm.Disk{ID: "scsi3"}},
	}}
	out := VMResult{}
	runRule(t, "volume-chain", &Input{set: set, v: v}, &out)
	want := []string{"info volume-chain scsi0", "info volume-chain scsi1", "warning volume-chain scsi1"}
	if got := summary(out); !slices.Equal(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
	if m := out.Findings[0].Message; m != "volume chain (config, VM not running): 2 layers: vm-100-disk-0.qcow2 <- snap_vm-100-disk-0_a.qcow2" {
		t.Errorf("message %q", m)
	}
}

// TestPolicyLeftover: a disk no disk run takes (an ISO image without
// media=, which iso-without-media ends) keeps its policy violation, said
// by policy-leftover without a command.
func TestPolicyLeftover(t *testing.T) {
	tn := newNode(t)
	tn.conf(100, "ostype: l26\nscsi0: local:iso/opencore.iso,size=1G\n")
	p := mustPolicy(t, "rules:\n  - name: all\n    require: {discard: on}\n")
	v := tn.check(100, quietRunner(), Options{Policy: p})
	want := []string{"error config-invalid scsi0", "warning policy scsi0"}
	if got := summary(v); !slices.Equal(got, want) {
		t.Fatalf("%v, want %v", got, want)
	}
	if f := find(v, CodePolicy, "scsi0"); f.Command != nil || f.Policy == nil {
		t.Errorf("policy finding %+v", f)
	}
}
