package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"

	"github.com/pvediskcheck/pvediskcheck/internal/corpus"
)

// TestConformanceThroughCLI runs `check` on a copied tree per Proxmox cfg2cmd
// case: the config and storage.cfg, and a "running" process whose
// /proc/<pid>/cmdline is exactly what qemu-server generated. A correct model
// reports zero drift on every case, and every finding is the one reviewed in
// testdata/check-cfg2cmd.golden (PVEDISKCHECK_UPDATE_GOLDEN=1 rewrites it).
func TestConformanceThroughCLI(t *testing.T) {
	dir := corpus.Dir(t, corpus.CFG2CMD)
	var lines []string
	confs, _ := filepath.Glob(filepath.Join(dir, "*.conf"))
	for _, conf := range confs {
		name := strings.TrimSuffix(filepath.Base(conf), ".conf")
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			// The storages the command lines were made with (qemu-server's
			// harness): the VM ran on them.
			if err := os.MkdirAll(filepath.Join(root, "etc/pve"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "etc/pve/storage.cfg"), []byte(corpus.HarnessStorageCfg(t)), 0o644); err != nil {
				t.Fatal(err)
			}
			copyFile(t, conf, filepath.Join(root, "etc/pve/qemu-server/8006.conf"))
			cmd, _ := os.ReadFile(conf + ".cmd")
			argv, err := qemuserver.SplitShell(string(cmd))
			if err != nil {
				t.Fatal(err)
			}
			os.MkdirAll(filepath.Join(root, "var/run/qemu-server"), 0o755)
			os.WriteFile(filepath.Join(root, "var/run/qemu-server/8006.pid"), []byte("4242\n"), 0o644)
			os.MkdirAll(filepath.Join(root, "proc/4242"), 0o755)
			os.WriteFile(filepath.Join(root, "proc/4242/cmdline"), []byte(strings.Join(argv, "\x00")+"\x00"), 0o644)
			out, errs, _ := runCLI(t, "--root", root, "--json", "check", "8006")
			var res check.Report
			if err := jsonUnmarshal(out, &res); err != nil {
				t.Fatalf("%v: %s %s", err, out, errs)
			}
			v := res.VMs[0]
			if !v.Running {
				t.Fatalf("not seen as running: %+v", v)
			}
			for _, f := range v.Findings {
				if f.Code == "drift" || f.Code == "config-invalid" {
					t.Errorf("%+v", f)
				}
			}
			// A copied tree has no QMP socket: a note, not exit 3.
			if code := exitcodeOf(res); code == exitUnreachable || !slices.Contains(v.NotChecked, check.CodeIOError) || !slices.Contains(v.NotChecked, check.CodeDrift) {
				t.Errorf("exit %d, not checked %v", code, v.NotChecked)
			}
			lines = append(lines, checkedAs(name, v)...)
		})
	}
	golden(t, "check-cfg2cmd.golden", lines)
}

// exitcodeOf is the exit code a report gives with --fail-on warning.
func exitcodeOf(r check.Report) int {
	if err := r.Err(); err != nil {
		return int(exitcode.Of(err))
	}
	if r.Fails(check.Warning) {
		return exitProblem
	}
	return exitOK
}
