package fakenode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/internal/corpus"
	"github.com/pvediskcheck/pvediskcheck/internal/pveoracle"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

// diskArgs is what one command line gives one disk: its -blockdev tree or
// -drive options, and its -device options.
type diskArgs struct {
	blockdev map[string]any
	drive    map[string]string
	device   map[string]string
}

// disksOf indexes a command line's disk arguments by config key.
func disksOf(argv []string) map[string]*diskArgs {
	out := map[string]*diskArgs{}
	get := func(k string) *diskArgs {
		if out[k] == nil {
			out[k] = &diskArgs{}
		}
		return out[k]
	}
	for i := 0; i+1 < len(argv); i++ {
		switch argv[i] {
		case "-blockdev":
			var m map[string]any
			if json.Unmarshal([]byte(argv[i+1]), &m) == nil {
				if n, _ := m["node-name"].(string); strings.HasPrefix(n, "drive-") {
					get(strings.TrimPrefix(n, "drive-")).blockdev = m
				}
			}
		case "-drive":
			m, _ := qemuserver.SplitQemuOpts(argv[i+1], "")
			if id := m["id"]; strings.HasPrefix(id, "drive-") {
				get(strings.TrimPrefix(id, "drive-")).drive = m
			}
		case "-device":
			m, rest := qemuserver.SplitQemuOpts(argv[i+1], "driver")
			if len(rest) > 0 {
				m["driver"] = rest[0]
			}
			if id := m["id"]; qemuserver.IsDiskKey(id) {
				get(id).device = m
			}
		}
	}
	return out
}

// TestArgvAgainstProxmox (issue 32 item 4): the fake node starts a VM's
// disks with the arguments Proxmox's own config_to_command gives that
// config (pve-cfg2cmd at QEMU 11.0, the version the oracle pins), option
// for option, apart from what Adaptations lists and why. Every config of
// the cfg2cmd corpus and check's shapes whose disks the fake node can
// start (local files and devices; not Ceph, iSCSI, NBD, passthrough).
func TestArgvAgainstProxmox(t *testing.T) {
	o := pveoracle.For(t)
	byStorage := map[string][]corpus.Case{}
	var order []string
	for _, c := range corpus.Cases(t, corpus.CFG2CMD, corpus.Shapes) {
		stFile := c.Storage[0] // one file each
		if byStorage[stFile] == nil {
			order = append(order, stFile)
		}
		byStorage[stFile] = append(byStorage[stFile], c)
	}
	compared, disks, skipped := 0, 0, map[string]int{}
	for _, stFile := range order {
		group := byStorage[stFile]
		st, err := qemuserver.LoadStorages(stFile)
		if err != nil {
			t.Fatal(err)
		}
		stText, _ := os.ReadFile(stFile)
		var cfgs []pveoracle.Config
		for _, c := range group {
			cfgs = append(cfgs, pveoracle.Config{Name: c.Name, Text: c.Text(t)})
		}
		res, err := o.Cmdline(context.Background(), pveoracle.CmdOptions{StorageCfg: string(stText)}, cfgs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			c := group[i]
			if r.Cmd == nil || !r.Cmd.OK || len(r.Cmd.StubCalls) > 0 {
				continue
			}
			cfg, err := qemuserver.LoadConfig(c.Conf, 8006)
			if err != nil {
				t.Fatal(err)
			}
			ours, err := Argv("qemu", cfg, st, ArgvOptions{VMID: 8006, RunDir: "/run", QEMUVersion: "11.0.0"})
			if err != nil {
				continue // a disk the fake node cannot lay out (its volume's storage)
			}
			theirs, mine := disksOf(r.Cmd.Args), disksOf(ours)
			compared++
			for key, m := range mine {
				p := theirs[key]
				if p == nil {
					t.Errorf("%s %s: the fake node starts a disk Proxmox's command line lacks", c.Name, key)
					continue
				}
				if why := unstartable(p); why != "" {
					skipped[why]++
					continue
				}
				disks++
				for _, diff := range compareDisk(m, p) {
					t.Errorf("%s %s: %s", c.Name, key, diff)
				}
			}
			for key := range theirs {
				if mine[key] == nil && !strings.HasPrefix(key, "efidisk") && !strings.HasPrefix(key, "tpmstate") {
					t.Errorf("%s %s: Proxmox starts a disk the fake node leaves out", c.Name, key)
				}
			}
		}
	}
	if compared < 30 {
		t.Fatalf("only %d configs compared", compared)
	}
	t.Logf("%d configs, %d disks: the fake node's disk arguments are Proxmox's but for Adaptations; not started by the fake node: %v", compared, disks, skipped)
}

// unstartable says why the fake node cannot start a disk of Proxmox's line
// (its tests never do): a network or device the machine lacks.
func unstartable(p *diskArgs) string {
	if p.blockdev == nil {
		if f := p.drive["file"]; strings.HasPrefix(f, "rbd:") || strings.HasPrefix(f, "iscsi:") || strings.HasPrefix(f, "nbd:") || strings.HasPrefix(f, "/dev/rbd") {
			return "network storage"
		}
		return ""
	}
	flat := flatten("", p.blockdev)
	for k, v := range flat {
		if strings.HasSuffix(k, "driver") && (v == "rbd" || v == "iscsi" || v == "nbd") {
			return "network storage"
		}
		if strings.HasSuffix(k, "filename") && strings.HasPrefix(fmt.Sprint(v), "/dev/rbd") {
			return "krbd device"
		}
		if strings.Contains(k, "backing.") {
			return "volume chain (Proxmox 9's snapshot-as-volume-chain: the fake node builds chains with Node.CreateChain, compared by volchain's tests)"
		}
	}
	return ""
}

func compareDisk(mine, theirs *diskArgs) []string {
	var out []string
	if (mine.blockdev == nil) != (theirs.blockdev == nil) || (mine.drive == nil) != (theirs.drive == nil) {
		return []string{fmt.Sprintf("generation: fake node blockdev=%v drive=%v, Proxmox blockdev=%v drive=%v", mine.blockdev != nil, mine.drive != nil, theirs.blockdev != nil, theirs.drive != nil)}
	}
	if mine.blockdev != nil {
		a, b := flatten("", mine.blockdev), flatten("", theirs.blockdev)
		out = append(out, diffMaps("-blockdev", a, b)...)
	}
	if mine.drive != nil {
		out = append(out, diffMaps("-drive", toAny(mine.drive), toAny(theirs.drive))...)
	}
	out = append(out, diffMaps("-device", toAny(mine.device), toAny(theirs.device))...)
	return out
}

func toAny(m map[string]string) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// flatten turns a -blockdev tree into path -> value ("file.file.aio").
func flatten(prefix string, m map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok && k != "limits" {
			for sk, sv := range flatten(prefix+k+".", sub) {
				out[sk] = sv
			}
			continue
		}
		out[prefix+k] = v
	}
	return out
}

func diffMaps(what string, mine, theirs map[string]any) []string {
	keys := map[string]bool{}
	for k := range mine {
		keys[k] = true
	}
	for k := range theirs {
		keys[k] = true
	}
	var ks []string
	for k := range keys {
		if Adapted(what, k, fmt.Sprint(theirs[k])) == "" {
			ks = append(ks, k)
		}
	}
	sort.Strings(ks)
	var out []string
	for _, k := range ks {
		a, aok := mine[k]
		b, bok := theirs[k]
		if aok != bok || !reflect.DeepEqual(fmt.Sprint(a), fmt.Sprint(b)) {
			out = append(out, fmt.Sprintf("%s %s: fake node %v, Proxmox %v", what, k, show(a, aok), show(b, bok)))
		}
	}
	return out
}

func show(v any, ok bool) string {
	if !ok {
		return "(absent)"
	}
	return fmt.Sprint(v)
}
