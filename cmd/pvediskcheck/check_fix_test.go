package main

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/check"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/internal/fakerun"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/thinpool"

	"github.com/pvediskcheck/pvediskcheck/internal/corpus"
)

// fixCase is one config of a corpus with the storage.cfg it ran with.
type fixCase struct {
	name, conf string
	storage    []string // storage.cfg: these files, one after the other
	real       bool     // ran on a real node (or stands for one): no config-invalid allowed
}

// fixCorpus lists the cfg2cmd corpus, the real-world configs and the shapes
// they lack (check/testdata/shapes), read where they are (corpus.Cases).
func fixCorpus(t *testing.T) []fixCase {
	var out []fixCase
	for _, c := range corpus.Cases(t, corpus.CFG2CMD, corpus.RealWorld, corpus.Shapes) {
		out = append(out, fixCase{c.Name, c.Conf, c.Storage, true})
	}
	if len(out) < 80 {
		t.Fatalf("only %d configs found", len(out))
	}
	return out
}

// noPools answers lvs and zfs with an error: thin pools are not what this
// property is about (a note, no finding).
func noPools() *fakerun.Runner {
	no := errors.New("no pools in this test")
	return &fakerun.Runner{Err: map[string]error{"lvs": no, "zfs": no}}
}

// stoppedNode lays the case out as a stopped VM 8006 below a fresh root.
func stoppedNode(t *testing.T, c fixCase) node.Node {
	t.Helper()
	root := t.TempDir()
	var st []byte
	for _, f := range c.storage {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		st = append(append(st, b...), '\n')
	}
	if err := os.MkdirAll(filepath.Join(root, "etc/pve"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc/pve/storage.cfg"), st, 0o644); err != nil {
		t.Fatal(err)
	}
	// A hyperconverged Ceph cluster's config: its fsid names krbd devices.
	if err := os.WriteFile(filepath.Join(root, "etc/pve/ceph.conf"), []byte("[global]\n\tfsid = 2c6a1e6a-4bd5-4c1f-a9e8-3e0e8f54c1aa\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	copyFile(t, c.conf, filepath.Join(root, "etc/pve/qemu-server/8006.conf"))
	return node.New(node.NewPaths(root, "", ""), 5*time.Second)
}

func checkStopped(t *testing.T, n node.Node) check.VMResult {
	t.Helper()
	v := check.VM(context.Background(), n, 8006, check.Options{}, thinpool.NewCache(noPools()))
	if v.Err != nil {
		t.Fatalf("check: %v", v.Err)
	}
	return v
}

// storageNamed is the storage a finding's message names.
var storageNamed = regexp.MustCompile(`storage "([^"]+)"`)

// onDroppedStorage: the finding is of a volume on a storage whose section
// Proxmox skips (a note says what it lacks). The config ran on the
// storages its corpus has, which a file may not hold whole: the cfg2cmd
// corpus's storage.cfg writes down the storages qemu-server's harness
// mocks, whose zfs: one lacks the blocksize a file needs
// (../shared/pve-oracle/README.md). There the VM does not start: an
// error, and no fix on the storage.
func onDroppedStorage(v check.VMResult, f check.Finding) bool {
	m := storageNamed.FindStringSubmatch(f.Message)
	return m != nil && f.Command == nil && slices.ContainsFunc(v.Notes, func(n string) bool {
		return strings.Contains(n, `section "`+m[1]+`" skipped: it lacks `)
	})
}

var setKey = regexp.MustCompile(`^--((?:ide|sata|scsi|virtio)\d+)$`)

// TestCheckFixesApply (issue 14): every fix check prints is a command whose
// drive lines Proxmox's parser accepts for their keys, printed as it runs;
// run through the qm double (which rewrites the config as qemu-server
// does) it makes the findings it fixes go away, and brings no new one.
// Over the cfg2cmd corpus, the real-world configs and check's own shapes
// (Ceph with and without krbd, ZFS, iSCSI, [PENDING], cloud-init,
// passthrough paths, ro=1, efidisk on thin storage).
func TestCheckFixesApply(t *testing.T) {
	doubles, err := fakenode.BuildDoubles()
	if err != nil {
		t.Fatal(err)
	}
	qm := filepath.Join(doubles, "qm")
	commands, fixed := 0, 0
	codes := map[check.Code]int{}
	for _, c := range fixCorpus(t) {
		t.Run(c.name, func(t *testing.T) {
			v := checkStopped(t, stoppedNode(t, c))
			byCmd := map[string][]check.Finding{}
			for _, f := range v.Findings {
				if c.real && f.Code == check.CodeConfigInvalid && !onDroppedStorage(v, f) {
					t.Errorf("config-invalid on a config that ran: %s", f.Message)
				}
				if f.Command == nil {
					continue
				}
				if err := check.ValidateCommand(f.Command); err != nil {
					t.Errorf("%s %s: %v", f.Code, f.Disk, err)
				}
				// The printed command is the command.
				text := strings.TrimPrefix(f.Fix, "with the VM stopped: ")
				for _, end := range []string{", then qm reboot", " (adjust the guest", " (the guest needs"} {
					text, _, _ = strings.Cut(text, end)
				}
				if argv, err := qemuserver.SplitShell(text); err != nil || !slices.Equal(argv, f.Command) {
					t.Errorf("%s %s: printed %q is not %q (%v)", f.Code, f.Disk, text, f.Command, err)
				}
				k := strings.Join(f.Command, "\x00")
				byCmd[k] = append(byCmd[k], f)
			}
			if len(byCmd) == 0 {
				return
			}
			for _, fs := range byCmd {
				commands++
				argv := fs[0].Command
				n := stoppedNode(t, c)
				fakenode.ServeQMOracle(t, n.Paths.Root)
				cmd := exec.Command(qm, argv[1:]...)
				cmd.Env = append(os.Environ(), fakenode.EnvRoot+"="+n.Paths.Root)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("%q: %v: %s", argv, err, out)
					continue
				}
				after := checkStopped(t, n)
				// A move leaves no unusedN on the volume it moved (issue 26
				// #8): the double drops it as write_vm_config does.
				if moved, err := qemuserver.LoadConfig(n.Paths.VMConfig(8006), 8006); err == nil {
					used := map[string]bool{}
					for _, k := range qemuserver.DiskKeys(moved.Main) {
						if d, err := qemuserver.ParseDrive(k, moved.Main[k]); err == nil {
							used[d.Volume] = true
						}
					}
					for _, k := range qemuserver.UnusedKeys(moved.Main) {
						if used[moved.Main[k]] {
							t.Errorf("after %q: %s still lists %s, which a disk uses", argv, k, moved.Main[k])
						}
					}
				} else {
					t.Errorf("after %q: %v", argv, err)
				}
				// The disk the fix moves to, if it moves one.
				moved := ""
				for i, a := range argv {
					if m := setKey.FindStringSubmatch(a); m != nil && i > 0 && argv[i-1] != "--delete" && slices.Contains(argv, "--delete") {
						moved = m[1]
					}
				}
				for _, f := range fs {
					codes[f.Code]++
					fixed++
					for _, g := range after.Findings {
						if g.Code == f.Code && (g.Disk == f.Disk || g.Disk == moved && moved != "") {
							t.Errorf("after %q: still %s %s: %s", argv, g.Code, g.Disk, g.Message)
						}
					}
				}
				// Nothing new: every finding after was there before (the
				// moved disk's findings were all fixed).
				for _, g := range after.Findings {
					if !slices.ContainsFunc(v.Findings, func(f check.Finding) bool { return f.Code == g.Code && f.Disk == g.Disk }) {
						t.Errorf("after %q: new %s %s: %s", argv, g.Code, g.Disk, g.Message)
					}
				}
			}
		})
	}
	t.Logf("%d commands applied through the qm double (Proxmox's update_vm judging), fixing %d findings: %v", commands, fixed, codes)
	if commands < 50 {
		t.Errorf("only %d commands: the corpora did not exercise the fixes", commands)
	}
}

// checkedAs lists a VM's findings as "severity code disk" lines for a
// golden file.
func checkedAs(name string, v check.VMResult) []string {
	var out []string
	for _, f := range v.Findings {
		out = append(out, name+": "+string(f.Severity)+" "+string(f.Code)+" "+units0(f.Disk))
	}
	if len(v.Findings) == 0 {
		out = append(out, name+": -")
	}
	return out
}

func units0(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// golden compares lines with testdata/<name>, or rewrites it when
// PVEDISKCHECK_UPDATE_GOLDEN=1.
func golden(t *testing.T, name string, lines []string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	got := strings.Join(lines, "\n") + "\n"
	if os.Getenv("PVEDISKCHECK_UPDATE_GOLDEN") == "1" {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (PVEDISKCHECK_UPDATE_GOLDEN=1 writes it)", err)
	}
	want := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for i := 0; i < max(len(want), len(lines)); i++ {
		var w, g string
		if i < len(want) {
			w = want[i]
		}
		if i < len(lines) {
			g = lines[i]
		}
		if w != g {
			t.Errorf("%s line %d:\n got %q\nwant %q", p, i+1, g, w)
			return
		}
	}
}

// TestCheckRealWorldGolden: every finding on every real-world config and
// shape, against the reviewed list in testdata/check-real-world.golden.
func TestCheckRealWorldGolden(t *testing.T) {
	var lines []string
	for _, c := range fixCorpus(t) {
		if strings.HasPrefix(c.name, "cfg2cmd/") {
			continue // TestConformanceThroughCLI has them, running
		}
		n := stoppedNode(t, c)
		lines = append(lines, checkedAs(c.name, checkStopped(t, n))...)
	}
	golden(t, "check-real-world.golden", lines)
}

// TestCheckCodesDocumented: the help text and the manual (docs/commands.md)
// name every code the check package has.
func TestCheckCodesDocumented(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "docs", "commands.md"))
	if err != nil {
		t.Fatal(err)
	}
	help := strings.Join(strings.Fields(checkCommand().Description), " ")
	for _, c := range check.Codes {
		if !strings.Contains(help, string(c)) {
			t.Errorf("check --help does not name %s", c)
		}
		if !strings.Contains(string(readme), "`"+string(c)+"`") {
			t.Errorf("docs/commands.md does not name %s", c)
		}
	}
}
