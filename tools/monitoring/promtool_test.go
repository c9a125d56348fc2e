package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The rules' unit tests, run by Prometheus' own `promtool test rules` on
// the committed rule file: each alert fires and stays silent at the edges
// its threshold exists for (79.9 % and 80 %, 9m59s and 10m), and a series
// that must never fire is there beside the one that does. An eval lists
// every alert of that name firing then: none listed asserts none fires.

// labelRefRe is an annotation's one template form, {{ $labels.NAME }}.
var labelRefRe = regexp.MustCompile(`\{\{ \$labels\.(\w+) \}\}`)

// in is one input series of a case: promtool's series notation.
type in struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

// at is what fires at one time: the alert's name and, per firing alert,
// its series' labels (the rule's severity and annotations are added).
type at struct {
	time   string
	alert  string
	firing []map[string]string
}

type ruleCase struct {
	name     string
	interval string // of the input series
	series   []in
	evals    []at
}

// node is the target labels of every series of the cases.
const node = `instance="pve1:9732",job="pvediskcheck"`

func lbl(kv ...string) map[string]string {
	out := map[string]string{"instance": "pve1:9732", "job": "pvediskcheck"}
	for i := 0; i < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

var ruleCases = []ruleCase{
	{
		name: "stalled from 30 s (29.9 s is not), an idle disk never", interval: "1m",
		series: []in{
			{`pvediskcheck_disk_stalled_seconds{` + node + `,vmid="370",disk="scsi1"}`, "0 5 29.9 30 90 0"},
			{`pvediskcheck_disk_stalled_seconds{` + node + `,vmid="370",disk="scsi2"}`, "0x5"},
		},
		evals: []at{
			{"0m", "PveDiskCheckDiskStalled", nil},
			{"2m", "PveDiskCheckDiskStalled", nil},
			{"3m", "PveDiskCheckDiskStalled", []map[string]string{lbl("vmid", "370", "disk", "scsi1")}},
			{"4m", "PveDiskCheckDiskStalled", []map[string]string{lbl("vmid", "370", "disk", "scsi1")}},
			{"5m", "PveDiskCheckDiskStalled", nil},
		},
	},
	{
		name: "paused by an I/O error: check's io-error error, until resumed; the info of an earlier, resumed pause and other findings do not", interval: "1m",
		series: []in{
			{`pvediskcheck_check_findings{` + node + `,vmid="370",code="io-error",severity="error"}`, "1 1 1 0"},
			{`pvediskcheck_check_findings{` + node + `,vmid="371",code="io-error",severity="info"}`, "1x3"},
			{`pvediskcheck_check_findings{` + node + `,vmid="372",code="drift",severity="warning"}`, "1x3"},
		},
		evals: []at{
			{"0m", "PveDiskCheckVMPausedByIOError", []map[string]string{lbl("vmid", "370", "code", "io-error", "severity", "error")}},
			{"2m", "PveDiskCheckVMPausedByIOError", []map[string]string{lbl("vmid", "370", "code", "io-error", "severity", "error")}},
			{"3m", "PveDiskCheckVMPausedByIOError", nil},
		},
	},
	{
		name: "guest frozen for 5m (4m59s not); thawed, frozen 4 minutes (vzdump's moment) and no answer of the agent (a backup holds the VM) never", interval: "1m",
		series: []in{
			{`pvediskcheck_vm_guest_frozen{` + node + `,vmid="370"}`, "0 1x10"},
			{`pvediskcheck_vm_guest_frozen{` + node + `,vmid="371"}`, "0x10"},
			{`pvediskcheck_vm_guest_frozen{` + node + `,vmid="373"}`, "1x3 0x7"},
			{`pvediskcheck_vm_backup_holds{` + node + `,vmid="372"}`, "1x10"},
		},
		evals: []at{
			{"0m", "PveDiskCheckGuestFrozen", nil},
			{"5m59s", "PveDiskCheckGuestFrozen", nil},
			{"6m", "PveDiskCheckGuestFrozen", []map[string]string{lbl("vmid", "370")}},
			{"10m", "PveDiskCheckGuestFrozen", []map[string]string{lbl("vmid", "370")}},
		},
	},
	{
		name: "thin pool data: filling from 80 % (79.9 % not), full from 90 % (89.9 % only filling), one of them at a time", interval: "1m",
		series: []in{
			{`pvediskcheck_thinpool_data_used_ratio{` + node + `,storage="local-lvm"}`, "0.799 0.8 0.899 0.9 1 0.5"},
			{`pvediskcheck_thinpool_data_used_ratio{` + node + `,storage="tank"}`, "0.1x5"},
		},
		evals: poolEvals("Data", "local-lvm"),
	},
	{
		name: "thin pool metadata, likewise; a ZFS pool has no metadata series and no alert", interval: "1m",
		series: []in{
			{`pvediskcheck_thinpool_metadata_used_ratio{` + node + `,storage="local-lvm"}`, "0.799 0.8 0.899 0.9 1 0.5"},
			{`pvediskcheck_thinpool_data_used_ratio{` + node + `,storage="tank"}`, "0.85x5"},
		},
		evals: poolEvals("Metadata", "local-lvm"),
	},
	{
		// The counters start at 0 with the limits set: the 5m rate reaches
		// 95 % when its window is full, at 300 s, and the alert fires 10
		// minutes later, at 900 s. A rate is a float (95 % of the limit
		// computes as 0.9500000000000001 here): the edges are 95 % and 94.99 %.
		name: "limit saturated: 95 % of a write bytes limit and of a total operations limit for 10m (9m59s not); 94.99 % and unthrottled disks never", interval: "1s",
		series: []in{
			{`pvediskcheck_disk_write_bytes_total{` + node + `,vmid="370",disk="scsi1"}`, "0+950000x1300"},
			{`pvediskcheck_disk_limit_bytes_per_second{` + node + `,vmid="370",disk="scsi1",direction="write"}`, "1000000x1300"},
			{`pvediskcheck_disk_write_bytes_total{` + node + `,vmid="370",disk="scsi2"}`, "0+949900x1300"},
			{`pvediskcheck_disk_limit_bytes_per_second{` + node + `,vmid="370",disk="scsi2",direction="write"}`, "1000000x1300"},
			{`pvediskcheck_disk_read_operations_total{` + node + `,vmid="371",disk="virtio1"}`, "0+500x1300"},
			{`pvediskcheck_disk_write_operations_total{` + node + `,vmid="371",disk="virtio1"}`, "0+450x1300"},
			{`pvediskcheck_disk_limit_operations_per_second{` + node + `,vmid="371",disk="virtio1",direction="total"}`, "1000x1300"},
			{`pvediskcheck_disk_limit_operations_per_second{` + node + `,vmid="371",disk="virtio1",direction="write"}`, "1000x1300"},
			{`pvediskcheck_disk_write_bytes_total{` + node + `,vmid="372",disk="scsi0"}`, "0+9000000x1300"},
		},
		evals: []at{
			{"5m", "PveDiskCheckLimitSaturated", nil},
			{"14m59s", "PveDiskCheckLimitSaturated", nil},
			{"15m", "PveDiskCheckLimitSaturated", []map[string]string{
				lbl("vmid", "370", "disk", "scsi1", "direction", "write", "limit", "bytes"),
				lbl("vmid", "371", "disk", "virtio1", "direction", "total", "limit", "operations"),
			}},
			{"21m", "PveDiskCheckLimitSaturated", []map[string]string{
				lbl("vmid", "370", "disk", "scsi1", "direction", "write", "limit", "bytes"),
				lbl("vmid", "371", "disk", "virtio1", "direction", "total", "limit", "operations"),
			}},
		},
	},
	{
		name: "drift (limits not saved included): after 15m (14m59s not); other findings never", interval: "1m",
		series: []in{
			{`pvediskcheck_check_findings{` + node + `,vmid="370",code="drift",severity="warning"}`, "0 1x30"},
			{`pvediskcheck_check_findings{` + node + `,vmid="371",code="cache-unsafe",severity="error"}`, "1x30"},
		},
		evals: []at{
			{"15m59s", "PveDiskCheckSettingsDrift", nil},
			{"16m", "PveDiskCheckSettingsDrift", []map[string]string{lbl("vmid", "370", "code", "drift", "severity", "warning")}},
		},
	},
	{
		name: "cache=unsafe in effect, from the restart that applies it; configured unsafe but running none (not restarted yet), and writeback, do not", interval: "1m",
		series: []in{
			{`pvediskcheck_disk_info{` + node + `,vmid="370",disk="scsi1",controller="virtio-scsi-single",storage="local-lvm",cache_configured="unsafe",cache_effective="unsafe",aio="io_uring",iothread="iothread-virtioscsi1",discard="unmap"}`, "_ 1x3"},
			{`pvediskcheck_disk_info{` + node + `,vmid="370",disk="scsi2",controller="virtio-scsi-single",storage="local-lvm",cache_configured="unsafe",cache_effective="none",aio="io_uring",iothread="iothread-virtioscsi2",discard="unmap"}`, "1x3"},
			{`pvediskcheck_disk_info{` + node + `,vmid="371",disk="virtio0",controller="virtio-blk",storage="local",cache_configured="writeback",cache_effective="writeback",aio="threads",iothread="",discard="ignore"}`, "1x3"},
		},
		evals: []at{
			{"0m", "PveDiskCheckCacheUnsafe", nil},
			{"1m", "PveDiskCheckCacheUnsafe", []map[string]string{lbl("vmid", "370", "disk", "scsi1", "controller", "virtio-scsi-single", "storage", "local-lvm",
				"cache_configured", "unsafe", "cache_effective", "unsafe", "aio", "io_uring", "iothread", "iothread-virtioscsi1", "discard", "unmap")}},
		},
	},
	{
		name: "collection failing: errors in every collection for 5m (4m59s not); one collection's error and none never", interval: "1m",
		series: []in{
			{`pvediskcheck_collect_errors{` + node + `,source="qmp"}`, "0 1x10"},
			{`pvediskcheck_collect_errors{` + node + `,source="thinpool"}`, "0 1 0 0 0 0 0 0 0 0"},
			{`pvediskcheck_collect_errors{` + node + `,source="node"}`, "0x10"},
		},
		evals: []at{
			{"5m59s", "PveDiskCheckCollectionFailing", nil},
			{"6m", "PveDiskCheckCollectionFailing", []map[string]string{lbl("source", "qmp")}},
			{"9m", "PveDiskCheckCollectionFailing", []map[string]string{lbl("source", "qmp")}},
		},
	},
}

// poolEvals: the series 0.799 0.8 0.899 0.9 1 0.5, one a minute.
func poolEvals(what, storage string) []at {
	pool := []map[string]string{lbl("storage", storage)}
	filling, full := "PveDiskCheckThinPool"+what+"Filling", "PveDiskCheckThinPool"+what+"Full"
	return []at{
		{"0m", filling, nil}, {"0m", full, nil},
		{"1m", filling, pool}, {"1m", full, nil},
		{"2m", filling, pool}, {"2m", full, nil},
		{"3m", filling, nil}, {"3m", full, pool},
		{"4m", filling, nil}, {"4m", full, pool},
		{"5m", filling, nil}, {"5m", full, nil},
	}
}

// promtool's unit test file.
type testFile struct {
	RuleFiles          []string    `yaml:"rule_files"`
	EvaluationInterval string      `yaml:"evaluation_interval"`
	Tests              []testGroup `yaml:"tests"`
}

type testGroup struct {
	Name        string      `yaml:"name"`
	Interval    string      `yaml:"interval"`
	InputSeries []in        `yaml:"input_series"`
	AlertTests  []alertTest `yaml:"alert_rule_test"`
}

type alertTest struct {
	EvalTime  string     `yaml:"eval_time"`
	Alertname string     `yaml:"alertname"`
	ExpAlerts []expAlert `yaml:"exp_alerts"`
}

type expAlert struct {
	Labels      map[string]string `yaml:"exp_labels"`
	Annotations map[string]string `yaml:"exp_annotations"`
}

// expand fills an annotation's {{ $labels.NAME }} as Prometheus does.
func expand(s string, labels map[string]string) string {
	return labelRefRe.ReplaceAllStringFunc(s, func(ref string) string {
		return labels[labelRefRe.FindStringSubmatch(ref)[1]]
	})
}

// promtoolFile is the cases as promtool's test file for the rule file.
func promtoolFile(t *testing.T, rules string) []byte {
	t.Helper()
	byName := map[string]Rule{}
	for _, r := range Rules().Groups[0].Rules {
		byName[r.Alert] = r
	}
	f := testFile{RuleFiles: []string{rules}, EvaluationInterval: "1s"}
	for _, c := range ruleCases {
		g := testGroup{Name: c.name, Interval: c.interval, InputSeries: c.series}
		for _, e := range c.evals {
			r, ok := byName[e.alert]
			if !ok {
				t.Fatalf("%s: no rule %s", c.name, e.alert)
			}
			at := alertTest{EvalTime: e.time, Alertname: e.alert, ExpAlerts: []expAlert{}}
			for _, l := range e.firing {
				want := expAlert{Labels: map[string]string{}, Annotations: map[string]string{}}
				for k, v := range l {
					want.Labels[k] = v
				}
				for k, v := range r.Labels {
					want.Labels[k] = v
				}
				for k, v := range r.Annotations {
					want.Annotations[k] = expand(v, l)
				}
				at.ExpAlerts = append(at.ExpAlerts, want)
			}
			g.AlertTests = append(g.AlertTests, at)
		}
		f.Tests = append(f.Tests, g)
	}
	b, err := yaml.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// requireTool finds an external tool; without it the test skips, except
// under CI=true (make test installs it: scripts/test-deps.sh).
func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is required in CI: run make test, which installs it", name)
		}
		t.Skipf("%s not installed (make test installs it): %v", name, err)
	}
	return p
}

// Every rule has cases, firing and silent, and promtool passes them on
// the committed rule file; a promtool that finds the rule file wrong, or a
// case failing, fails the test with promtool's words.
func TestRulesPromtool(t *testing.T) {
	promtool := requireTool(t, "promtool")
	fires, silent := map[string]bool{}, map[string]bool{}
	for _, c := range ruleCases {
		for _, e := range c.evals {
			if len(e.firing) > 0 {
				fires[e.alert] = true
			} else {
				silent[e.alert] = true
			}
		}
	}
	var missing []string
	for _, r := range Rules().Groups[0].Rules {
		if !fires[r.Alert] || !silent[r.Alert] {
			missing = append(missing, fmt.Sprintf("%s (fires %v, silent %v)", r.Alert, fires[r.Alert], silent[r.Alert]))
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("rules without a firing and a silent case: %s", strings.Join(missing, ", "))
	}
	rules, err := filepath.Abs(filepath.Join(DefaultDir, RulesFile))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "rules_test.yml")
	if err := os.WriteFile(file, promtoolFile(t, rules), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", rules).CombinedOutput()
	if err != nil {
		t.Errorf("promtool check rules: %v\n%s", err, out)
	}
	out, err = exec.Command(promtool, "test", "rules", file).CombinedOutput()
	if err != nil {
		b, _ := os.ReadFile(file)
		t.Fatalf("promtool test rules: %v\n%s\ntest file:\n%s", err, out, b)
	}
	n := 0
	for _, c := range ruleCases {
		n += len(c.evals)
	}
	t.Logf("promtool test rules: %d groups, %d evaluations, %d rules: %s", len(ruleCases), n, len(Rules().Groups[0].Rules), strings.TrimSpace(string(out)))
}
