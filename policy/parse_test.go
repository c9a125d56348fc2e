package policy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

// full uses every key of the schema once.
const full = `# the site's disks
version: 1
rules:
  - name: ceph-safe
    severity: error
    match:
      storage: [ceph-*, nas]
      storage_type: rbd
      tag: [Prod, "db*"]
      pool: lab/*
      vmid: [100-199, 250]
      kind: [disk, cdrom]
      bus: scsi
    require:
      cache: [none, directsync]
      aio: io_uring
      discard: on
      iothread: yes
      ssd: 1
      controller: virtio-scsi-single
      limits:
        mbps_wr: {at_most: 200.5}
        iops: {at_least: 100, at_most: 20000}
      backup: true
      replicate: off
`

func TestParseFull(t *testing.T) {
	p, err := Parse("site.yaml", []byte(full))
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Rules) != 1 || p.File != "site.yaml" {
		t.Fatalf("%+v", p)
	}
	r := p.Rules[0]
	if r.Name != "ceph-safe" || r.Severity != SeverityError || r.Line != 4 {
		t.Errorf("rule %+v", r)
	}
	m := r.Match
	texts := func(vs []Value) string {
		var s []string
		for _, v := range vs {
			s = append(s, v.Text)
		}
		return strings.Join(s, " ")
	}
	for got, want := range map[string]string{
		texts(m.Storage): "ceph-* nas", texts(m.StorageType): "rbd", texts(m.Tag): "Prod db*", texts(m.Pool): "lab/*",
		texts(m.Kind): "disk cdrom", texts(m.Bus): "scsi",
	} {
		if got != want {
			t.Errorf("selector %q, want %q", got, want)
		}
	}
	if len(m.VMID) != 2 || m.VMID[0].From != 100 || m.VMID[0].To != 199 || m.VMID[1].From != 250 || m.VMID[1].To != 250 || m.VMID[1].Line != 11 {
		t.Errorf("vmid %+v", m.VMID)
	}
	if m.Storage[0].Line != 7 || m.Storage[0].Key != "rules[0].match.storage" {
		t.Errorf("storage value %+v", m.Storage[0])
	}
	var got []string
	for _, q := range r.Require {
		got = append(got, string(q.Setting)+"="+q.WantText())
	}
	want := []string{"cache=none or directsync", "aio=io_uring", "discard=on", "iothread=on", "ssd=on", "controller=virtio-scsi-single",
		"limits.mbps_wr=at most 200.5 MiB/s", "limits.iops=between 100 and 20000 IOPS", "backup=on", "replicate=off"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("requirements\n got %v\nwant %v", got, want)
	}
	if q := r.Require[6]; q.Line != 22 || q.Key != "rules[0].require.limits.mbps_wr" || q.Limit.Key.QEMU != "bps-write" {
		t.Errorf("limit %+v", q)
	}
	// The shipped example parses, every rule of it.
	b, err := os.ReadFile(filepath.Join("..", "share", "examples", "policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if ex, err := Parse("example.yaml", b); err != nil || len(ex.Rules) < 4 {
		t.Errorf("the shipped example: %v", err)
	}
}

// TestParseRefuses: every refusal is one line naming the file, the line
// and the key, and is bad input (exit 2).
func TestParseRefuses(t *testing.T) {
	rule := func(body string) string { return "rules:\n  - name: r\n" + body }
	for _, c := range []struct{ yaml, want string }{
		{"", "policy p.yaml: is empty"},
		{"rules: [", "policy p.yaml line 1: not YAML: did not find expected node content"},
		{"- a\n- b\n", "policy p.yaml line 1: is a list, not a mapping of version, rules"},
		{"rules:\n  - name: r\n    require: {cache: none}\n---\nrules: []\n", "policy p.yaml line 4: a second YAML document"},
		{"version: 2\nrules: []\n", "policy p.yaml line 1: version: \"2\": this pvediskcheck reads version 1"},
		{"ruless: []\n", "policy p.yaml line 1: ruless: unknown key (known: version, rules)"},
		{"version: 1\n", "policy p.yaml line 1: rules: missing"},
		{"rules: []\n", "policy p.yaml line 1: rules: is a list, not a list of rules"},
		{"rules: {}\n", "policy p.yaml line 1: rules: is a mapping, not a list of rules"},
		{"rules:\n  - require: {cache: none}\n", "policy p.yaml line 2: rules[0].name: missing"},
		{"rules:\n  - name: a b\n    require: {cache: none}\n", "policy p.yaml line 2: rules[0].name: \"a b\": a rule's name is"},
		{"rules:\n  - name: r\n    require: {cache: none}\n  - name: r\n    require: {cache: none}\n", "policy p.yaml line 4: rules[1].name: \"r\" is the name of the rule at line 2 too"},
		{rule("    severity: fatal\n    require: {cache: none}\n"), "policy p.yaml line 3: rules[0].severity: \"fatal\" is not one of warning, error"},
		{rule(""), "policy p.yaml line 2: rules[0].require: missing"},
		{rule("    require: {}\n"), "policy p.yaml line 3: rules[0].require: requires nothing"},
		{rule("    require:\n"), "policy p.yaml line 3: rules[0].require: has no value"},
		{rule("    mach: {}\n    require: {cache: none}\n"), "policy p.yaml line 3: rules[0].mach: unknown key (known: name, severity, match, require)"},
		{rule("    match: {storag: x}\n    require: {cache: none}\n"), "policy p.yaml line 3: rules[0].match.storag: unknown key (known: storage, storage_type, tag, pool, vmid, kind, bus)"},
		{rule("    require: {cache: none, cache: writeback}\n"), "policy p.yaml line 3: rules[0].require.cache: given twice"},
		{rule("    require: {cahce: none}\n"), "policy p.yaml line 3: rules[0].require.cahce: unknown key (known: cache, aio, discard, iothread, ssd, controller, limits, backup, replicate)"},
		{rule("    require:\n      cache: wrteback\n"), "policy p.yaml line 4: rules[0].require.cache: \"wrteback\": not a cache mode (none, writethrough, writeback, directsync, unsafe)"},
		{rule("    require:\n      cache: [none, bogus]\n"), "policy p.yaml line 4: rules[0].require.cache: \"bogus\": not a cache mode"},
		{rule("    require:\n      cache: []\n"), "policy p.yaml line 4: rules[0].require.cache: is an empty list"},
		{rule("    require:\n      cache: {a: b}\n"), "policy p.yaml line 4: rules[0].require.cache: is a mapping, not a value or a list of values"},
		{rule("    require:\n      aio: iouring\n"), "rules[0].require.aio: \"iouring\": not a aio mode (native, threads, io_uring)"},
		{rule("    require:\n      controller: virtio\n"), "rules[0].require.controller: \"virtio\": not a controller (lsi, lsi53c810, virtio-scsi-pci, virtio-scsi-single, megasas, pvscsi, virtio-blk, sata, ide)"},
		{rule("    require:\n      discard: maybe\n"), "policy p.yaml line 4: rules[0].require.discard: \"maybe\" is not yes or no"},
		{rule("    require:\n      iothread: [yes]\n"), "policy p.yaml line 4: rules[0].require.iothread: is a list, not a single value"},
		{rule("    require:\n      backup: *x\n"), "policy p.yaml: not YAML: unknown anchor 'x' referenced"},
		{rule("    require:\n      backup: &x yes\n      replicate: *x\n"), "policy p.yaml line 5: rules[0].require.replicate: is a YAML alias (*x)"},
		{rule("    require:\n      backup: !!str yes\n"), "policy p.yaml line 4: rules[0].require.backup: has an explicit YAML tag (!!str)"},
		{rule("    require:\n      limits: {mbps_wr_max: {at_most: 1}}\n"), "rules[0].require.limits.mbps_wr_max: unknown key (known: mbps, mbps_rd, mbps_wr, iops, iops_rd, iops_wr)"},
		{rule("    require:\n      limits: {mbps: 5}\n"), "policy p.yaml line 4: rules[0].require.limits.mbps: is a single value (\"5\"), not a mapping of at_most, at_least"},
		{rule("    require:\n      limits: {mbps: {at_mots: 5}}\n"), "rules[0].require.limits.mbps.at_mots: unknown key (known: at_most, at_least)"},
		{rule("    require:\n      limits: {mbps: {at_most: -5}}\n"), "rules[0].require.limits.mbps.at_most: \"-5\" is not a positive number"},
		{rule("    require:\n      limits: {mbps: {at_most: 0}}\n"), "rules[0].require.limits.mbps.at_most: \"0\" is not a positive number"},
		{rule("    require:\n      limits: {mbps: {at_most: \"5\"}}\n"), "rules[0].require.limits.mbps.at_most: \"5\" is not a number"},
		{rule("    require:\n      limits: {mbps: {at_most: .inf}}\n"), "rules[0].require.limits.mbps.at_most: \".inf\" is not a positive number"},
		{rule("    require:\n      limits: {iops: {at_most: 10.5}}\n"), "rules[0].require.limits.iops.at_most: \"10.5\" is not a whole number of operations"},
		{rule("    require:\n      limits: {iops: {at_most: 1000000000000001}}\n"), "is beyond what QEMU takes (bps/iops/max values must be within [0, 1000000000000000])"},
		{rule("    require:\n      limits: {mbps: {at_most: 953674317}}\n"), "rules[0].require.limits.mbps.at_most: \"953674317\" is beyond what QEMU takes"},
		{rule("    require:\n      limits: {mbps: {at_least: 10, at_most: 5}}\n"), "rules[0].require.limits.mbps: at_least 10 is more than at_most 5"},
		{rule("    require:\n      limits: {mbps: {}}\n"), "rules[0].require.limits.mbps: no bound"},
		{rule("    require:\n      limits: {}\n"), "rules[0].require.limits: no limit given"},
		{rule("    require:\n      limits: {mbps: {at_most: 5}, mbps_rd: {at_most: 3}}\n"), "policy p.yaml line 4: rules[0].require.limits.mbps_rd: at_most with mbps at_most too"},
		{rule("    require:\n      aio: native\n      cache: [none, writeback]\n"), "policy p.yaml line 4: rules[0].require.aio: native with cache writeback: QEMU refuses to start"},
		{rule("    require:\n      iothread: true\n      controller: sata\n"), "policy p.yaml line 4: rules[0].require.iothread: an IO thread needs controller virtio-scsi-single or virtio-blk"},
		{rule("    require:\n      ssd: true\n      controller: virtio-blk\n"), "rules[0].require.ssd: VirtIO Block has no ssd emulation"},
		{rule("    match:\n      vmid: 99\n    require: {cache: none}\n"), "policy p.yaml line 4: rules[0].match.vmid: \"99\": not a VMID or a range of them"},
		{rule("    match:\n      vmid: 200-100\n    require: {cache: none}\n"), "rules[0].match.vmid: \"200-100\": the range ends before it starts"},
		{rule("    match:\n      vmid: 100-x\n    require: {cache: none}\n"), "rules[0].match.vmid: \"100-x\": not a range of VMIDs"},
		{rule("    match:\n      storage: \"ceph[\"\n    require: {cache: none}\n"), "rules[0].match.storage: \"ceph[\": not a valid pattern (syntax error in pattern)"},
		{rule("    match:\n      storage: \"a b\"\n    require: {cache: none}\n"), "rules[0].match.storage: \"a b\": not a storage ID or a pattern of them"},
		{rule("    match:\n      storage_type: RBD\n    require: {cache: none}\n"), "rules[0].match.storage_type: \"RBD\": not a storage type"},
		{rule("    match:\n      tag: \"a,b\"\n    require: {cache: none}\n"), "rules[0].match.tag: \"a,b\": not a Proxmox tag"},
		{rule("    match:\n      pool: a/b/c/d\n    require: {cache: none}\n"), "rules[0].match.pool: \"a/b/c/d\": not a Proxmox pool name"},
		{rule("    match:\n      kind: efidisk\n    require: {cache: none}\n"), "rules[0].match.kind: \"efidisk\": not a drive kind a rule can require settings of (disk, cdrom)"},
		{rule("    match:\n      bus: nvme\n    require: {cache: none}\n"), "rules[0].match.bus: \"nvme\": not a bus (ide, sata, scsi, virtio)"},
		{rule("    match:\n      storage: [a, ~]\n    require: {cache: none}\n"), "policy p.yaml line 4: rules[0].match.storage: is empty, not a value or a list of values"},
		{rule("    match:\n      1: a\n    require: {cache: none}\n"), "policy p.yaml line 4: rules[0].match: a key that is not a name (\"1\")"},
	} {
		_, err := Parse("p.yaml", []byte(c.yaml))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q:\n got %v\nwant %s", c.yaml, err, c.want)
			continue
		}
		var pe *Error
		if !errors.As(err, &pe) || exitcode.Of(err) != exitcode.Usage || strings.Contains(err.Error(), "\n") {
			t.Errorf("%q: %v is not one line of bad input", c.yaml, err)
		}
	}
	if _, err := Parse("big.yaml", []byte(strings.Repeat("#", MaxBytes+1))); err == nil || !strings.Contains(err.Error(), "policy big.yaml: is 65537 bytes, larger than 64 KiB") {
		t.Errorf("too large: %v", err)
	}
	// At the bound: read (a comment, then a rule).
	body := "rules:\n  - name: r\n    require: {cache: none}\n"
	if _, err := Parse("edge.yaml", []byte(strings.Repeat("#", MaxBytes-len(body)-1)+"\n"+body)); err != nil {
		t.Errorf("at MaxBytes: %v", err)
	}
}

// TestParseValues: what each form of a value reads as.
func TestParseValues(t *testing.T) {
	for _, c := range []struct {
		yaml string
		want string
	}{
		{"discard: on", "discard=on"},
		{"discard: off", "discard=off"},
		{"discard: 0", "discard=off"},
		{"discard: YES", "discard=on"},
		{"discard: false", "discard=off"},
		{"cache: none", "cache=none"},
		{"cache: [writeback, writeback]", "cache=writeback"},
		{"limits: {mbps_rd: {at_least: 5}}", "limits.mbps_rd=at least 5 MiB/s (or no limit)"},
		{"limits: {iops_wr: {at_most: 1_000}}", "limits.iops_wr=at most 1000 IOPS"},
		{"limits: {mbps: {at_most: 0.5}}", "limits.mbps=at most 0.5 MiB/s"},
		{"limits: {mbps: {at_most: 1e3}}", "limits.mbps=at most 1000 MiB/s"},
	} {
		p, err := Parse("v.yaml", []byte("rules:\n  - name: r\n    require:\n      "+c.yaml+"\n"))
		if err != nil {
			t.Errorf("%s: %v", c.yaml, err)
			continue
		}
		q := p.Rules[0].Require[0]
		if got := string(q.Setting) + "=" + q.WantText(); got != c.want {
			t.Errorf("%s: %s, want %s", c.yaml, got, c.want)
		}
	}
	// No selector: no kind given means disks (Judge's tests prove it).
	p, err := Parse("v.yaml", []byte("rules:\n  - name: r\n    require: {cache: none}\n"))
	if err != nil || p.Rules[0].Severity != SeverityWarning || len(p.Rules[0].Match.Kind) != 0 {
		t.Errorf("defaults: %+v %v", p, err)
	}
}
