package qemuserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/internal/corpus"
	"github.com/pvediskcheck/pvediskcheck/internal/pveoracle"
)

// oracleCase is one config of the corpora with the storage.cfg it ran with.
type oracleCase struct {
	name, text, storage string
}

// oracleCorpus reads the cfg2cmd corpus, the real-world configs (with the
// storages check/testdata/realworld adds where the corpus has none) and
// check's shapes (corpus.Cases).
func oracleCorpus(t *testing.T) []oracleCase {
	t.Helper()
	var out []oracleCase
	for _, c := range corpus.Cases(t, corpus.CFG2CMD, corpus.RealWorld, corpus.Shapes) {
		out = append(out, oracleCase{c.Name, c.Text(t), c.StorageCfg(t)})
	}
	if len(out) < 80 {
		t.Fatalf("only %d configs found", len(out))
	}
	return out
}

// predictFields are the per-disk settings compared with Proxmox's command
// line, each counted on its own.
var predictFields = []string{"generation", "cache_direct", "cache_no_flush", "write_cache", "aio", "discard", "detect_zeroes", "iothread", "queues", "limits", "read_only", "driver", "device", "controller"}

// TestPredictAgainstProxmox (issue 32 item 4): for every config of the
// corpora, at the QEMU versions Proxmox VE 8 and 9 ship, the tool's
// prediction of each disk (Predict, with the installed QEMU's version for an
// unpinned machine) equals what Proxmox's own command line for that config
// says (pve-cfg2cmd --qemu-version: qemu-server's config_to_command), field
// by field. Configs Proxmox refuses to start are counted, not compared.
func TestPredictAgainstProxmox(t *testing.T) {
	o := pveoracle.For(t)
	cases := oracleCorpus(t)
	byStorage := map[string][]oracleCase{}
	var order []string
	for _, c := range cases {
		if byStorage[c.storage] == nil {
			order = append(order, c.storage)
		}
		byStorage[c.storage] = append(byStorage[c.storage], c)
	}
	agree, total := map[string]int{}, map[string]int{}
	refused, compared := 0, 0
	for _, qv := range []string{"7.2.0", "9.2.0", "10.1.0", "11.0.0"} {
		for _, stText := range order {
			group := byStorage[stText]
			cfgs := make([]pveoracle.Config, len(group))
			for i, c := range group {
				cfgs[i] = pveoracle.Config{Name: c.name, Text: c.text}
			}
			res, err := o.Cmdline(context.Background(), pveoracle.CmdOptions{StorageCfg: stText, QEMUVersion: qv, RBDFSID: "2c6a1e6a-4bd5-4c1f-a9e8-3e0e8f54c1aa"}, cfgs)
			if err != nil {
				t.Fatal(err)
			}
			stFile := filepath.Join(t.TempDir(), "storage.cfg")
			if err := os.WriteFile(stFile, []byte(stText), 0o644); err != nil {
				t.Fatal(err)
			}
			st, err := LoadStorages(stFile)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				name := fmt.Sprintf("%s@%s", group[i].name, qv)
				if r.Cmd == nil || !r.Cmd.OK || len(r.Cmd.StubCalls) > 0 {
					refused++
					continue
				}
				compared++
				for field, ok := range comparePredicted(t, name, group[i].text, st, qv, r.Cmd.Args) {
					total[field]++
					if ok {
						agree[field]++
					}
				}
			}
		}
	}
	if compared < 300 {
		t.Fatalf("only %d command lines compared (%d refused or stubbed)", compared, refused)
	}
	var parts []string
	fields := append([]string{}, predictFields...)
	sort.Strings(fields)
	for _, f := range fields {
		parts = append(parts, fmt.Sprintf("%s %d/%d", f, agree[f], total[f]))
	}
	t.Logf("%d command lines compared at 4 QEMU versions (%d refused by Proxmox or resting on a stubbed module); fields agreeing: %s", compared, refused, strings.Join(parts, ", "))
}

// comparePredicted compares each disk of one config with Proxmox's argv and
// reports, per field, whether every disk agreed; each disagreement is an
// error naming the config, disk and field.
func comparePredicted(t *testing.T, name, text string, st Storages, qemuVersion string, argv []string) map[string]bool {
	t.Helper()
	f := filepath.Join(t.TempDir(), "8006.conf")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(f, 8006)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return nil
	}
	cl, err := ParseCmdline(argv)
	if err != nil {
		t.Errorf("%s: Proxmox's command line: %v", name, err)
		return nil
	}
	vm := VMDefaultsAt(cfg.Main, qemuVersion)
	out := map[string]bool{}
	for _, field := range predictFields {
		out[field] = true
	}
	bad := func(key, field string, pred, run any) {
		if fmt.Sprint(pred) != fmt.Sprint(run) {
			out[field] = false
			t.Errorf("%s %s: %s: predicted %v, Proxmox's command line %v", name, key, field, pred, run)
		}
	}
	for _, key := range DiskKeys(cfg.Main) {
		d, err := ParseDrive(key, cfg.Main[key])
		if err != nil || d.Bus == "tpmstate" {
			continue // a drive Proxmox drops is the parse differential's; swtpm is no QEMU block device
		}
		run, ok := cl.Disks[key]
		if d.IsNone() {
			if ok && vm.Blockdev {
				bad(key, "generation", "no block node", "a block node")
			}
			continue
		}
		if !ok {
			if d.Bus == "efidisk" && !vm.Blockdev {
				continue // legacy pflash drive: not modelled
			}
			bad(key, "generation", "on the command line", "absent")
			continue
		}
		pred, err := Predict(d, st, vm, func(p string) bool { return strings.HasPrefix(p, "/dev/") })
		if err != nil {
			t.Errorf("%s %s: %v", name, key, err)
			continue
		}
		bad(key, "generation", pred.Blockdev, run.Blockdev)
		bad(key, "cache_direct", pred.CacheDirect, run.CacheDirect)
		bad(key, "cache_no_flush", pred.CacheNoFlush, run.CacheNoFlush)
		bad(key, "write_cache", pred.WriteCache, run.WriteCache)
		if !(pred.Blockdev && run.Blockdev && pred.Driver != run.Driver) {
			bad(key, "aio", pred.AIO, run.AIO)
		}
		bad(key, "discard", pred.Discard, run.Discard)
		bad(key, "detect_zeroes", pred.DetectZeroes, run.DetectZeroes)
		bad(key, "iothread", pred.IOThread, run.IOThread)
		bad(key, "queues", QueuesName(pred.Queues), QueuesName(run.Queues))
		bad(key, "limits", pred.Limits.Normal(), run.Limits.Normal())
		bad(key, "read_only", pred.ReadOnly, run.ReadOnly)
		// The protocol driver is Proxmox's under -blockdev; under -drive it
		// is QEMU's probe of the path (a host CD-ROM drive is host_cdrom
		// only if its ioctl says so), which no command line states.
		if run.Blockdev && run.Driver != "rbd" && run.Driver != "iscsi" {
			bad(key, "driver", pred.Driver, run.Driver)
		}
		if key != "efidisk0" || vm.Blockdev {
			bad(key, "controller", pred.Controller, run.Controller)
			bad(key, "device", pred.Device, run.Device)
		}
	}
	return out
}
