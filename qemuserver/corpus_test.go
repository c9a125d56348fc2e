package qemuserver

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/internal/corpus"
)

// corpusDir is Proxmox's own cfg2cmd cases, shared beside the repository and
// read at test time (never copied in).
func corpusDir(t *testing.T) string { return corpus.Dir(t, corpus.CFG2CMD) }

// TestCfg2CmdConformance predicts every disk of every case from NAME.conf and
// storage.cfg and compares it with what NAME.conf.cmd (qemu-server's output)
// says. Zero differences is the bar: any would be a false "drift" report.
func TestCfg2CmdConformance(t *testing.T) {
	dir := corpusDir(t)
	// The storages the command lines were made with (qemu-server's harness).
	st, err := ParseStorages(strings.NewReader(corpus.HarnessStorageCfg(t)), "storage.cfg")
	if err != nil {
		t.Fatal(err)
	}
	confs, _ := filepath.Glob(filepath.Join(dir, "*.conf"))
	if len(confs) < 40 {
		t.Fatalf("only %d cases in %s", len(confs), dir)
	}
	disks := 0
	for _, conf := range confs {
		name := strings.TrimSuffix(filepath.Base(conf), ".conf")
		t.Run(name, func(t *testing.T) {
			cfg, err := LoadConfig(conf, 8006)
			if err != nil {
				t.Fatal(err)
			}
			cmdText, err := os.ReadFile(conf + ".cmd")
			if err != nil {
				t.Fatal(err)
			}
			argv, err := SplitShell(string(cmdText))
			if err != nil {
				t.Fatal(err)
			}
			cl, err := ParseCmdline(argv)
			if err != nil {
				t.Fatal(err)
			}
			vm := VMDefaultsFor(cfg.Main)
			for _, key := range DiskKeys(cfg.Main) {
				d, err := ParseDrive(key, cfg.Main[key])
				if err != nil {
					t.Fatalf("%s: %v", key, err)
				}
				if d.Bus == "tpmstate" {
					continue // swtpm, not a QEMU block device
				}
				run, ok := cl.Disks[key]
				if d.IsNone() && (vm.Blockdev || d.Bus == "efidisk") {
					if ok {
						t.Errorf("%s: empty drive has a block node on the command line", key)
					}
					continue
				}
				if !ok {
					if d.Bus == "efidisk" && !vm.Blockdev {
						continue // legacy pflash drive, not modelled
					}
					t.Fatalf("%s: not found on the command line (blockdev predicted %v)", key, vm.Blockdev)
				}
				pred, err := Predict(d, st, vm, func(p string) bool { return strings.HasPrefix(p, "/dev/") })
				if err != nil {
					t.Fatalf("%s: %v", key, err)
				}
				disks++
				if pred.Blockdev != run.Blockdev {
					t.Errorf("%s: generation: predicted blockdev=%v, cmd blockdev=%v", key, pred.Blockdev, run.Blockdev)
				}
				for _, diff := range Diff(pred, *run) {
					t.Errorf("%s: %s", key, diff)
				}
				if pred.Path != run.Path && run.Driver != "rbd" && run.Driver != "iscsi" {
					t.Errorf("%s: path: predicted %q, cmd %q", key, pred.Path, run.Path)
				}
				if key != "efidisk0" || vm.Blockdev {
					if pred.Controller != run.Controller {
						t.Errorf("%s: controller: predicted %q, cmd %q", key, pred.Controller, run.Controller)
					}
					if pred.Device != run.Device {
						t.Errorf("%s: device: predicted %q, cmd %q", key, pred.Device, run.Device)
					}
				}
				if run.Blockdev && !d.Bool("scsiblock") {
					if pred.NodeFile != run.NodeFile || pred.NodeFormat != run.NodeFormat {
						t.Errorf("%s: node names: predicted %s/%s, cmd %s/%s", key, pred.NodeFormat, pred.NodeFile, run.NodeFormat, run.NodeFile)
					}
				}
			}
		})
	}
	t.Logf("%d cases, %d disks compared", len(confs), disks)
}

// TestEveryCorpusDriveAccepted: every drive line of every section of every
// config in the corpora ran on a real node (or, in testdata/shapes, is
// written in Proxmox's exact syntax), so the parser must accept each one:
// a refusal here would be a false config-invalid.
func TestEveryCorpusDriveAccepted(t *testing.T) {
	lines := driveSeeds()
	if len(lines) < 100 {
		t.Skipf("only %d drive lines found (corpora absent?)", len(lines))
	}
	kinds := map[Kind]int{}
	for _, l := range lines {
		d, err := ParseDrive(l[0], l[1])
		if err != nil {
			t.Errorf("refused: %v", err)
			continue
		}
		kinds[d.Kind()]++
	}
	for k := KindDisk; k <= KindUnused; k++ {
		if kinds[k] == 0 {
			t.Errorf("no drive of kind %s in the corpora", k)
		}
	}
	t.Logf("%d drive lines, by kind %v", len(lines), kinds)
}

// TestShapesResolve: every volume of testdata/shapes is placed as its
// storage's plugin places it, or (krbd without fsid, a plugin storage) is
// one the node's `pvesm path` answers.
func TestShapesResolve(t *testing.T) {
	dir := filepath.Join("testdata", "shapes")
	st, err := LoadStorages(filepath.Join(dir, "storage.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	confs, _ := filepath.Glob(filepath.Join(dir, "*.conf"))
	unmodelled := 0
	for _, conf := range confs {
		c, err := LoadConfig(conf, 600)
		if err != nil {
			t.Fatal(err)
		}
		next := c.Next()
		for _, k := range append(DiskKeys(next), UnusedKeys(next)...) {
			d, err := ParseDrive(k, next[k])
			if err != nil {
				t.Errorf("%s: %v", filepath.Base(conf), err)
				continue
			}
			if d.IsNone() || d.Volume == "cdrom" {
				continue
			}
			_, err = ResolveVolume(st, d, nil)
			var ue *UnmodelledError
			if errors.As(err, &ue) {
				unmodelled++
				continue
			}
			if err != nil {
				t.Errorf("%s: %v", filepath.Base(conf), err)
			}
		}
	}
	if unmodelled != 4 {
		t.Errorf("%d volumes need pvesm path, want 4 (two krbd, two LINSTOR)", unmodelled)
	}
}
