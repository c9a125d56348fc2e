// Package corpus finds the corpora the tests read beside the repository,
// never copied into it: Proxmox's own cfg2cmd cases and the real-world
// sample of configs, storage.cfg files and fio outputs; and lists their
// configs (with check's shapes) each with the storage.cfg it ran with
// (Cases), the one lister of the tests that run over all of them.
package corpus

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The corpora, by their folder name under shared/.
const (
	CFG2CMD   = "pve-cfg2cmd"
	RealWorld = "real-world"
)

// envs names the variable that points at each corpus (mutation testing
// and scripts/test-unprivileged.sh test a copy of the module elsewhere).
var envs = map[string]string{CFG2CMD: "PVE_CFG2CMD_DIR", RealWorld: "PVE_REALWORLD_DIR"}

// Find returns corpus name's directory: $PVE_CFG2CMD_DIR or
// $PVE_REALWORLD_DIR when set, else shared/NAME in the nearest parent of
// the working directory that has it (the checkout's, and its worktrees').
// "" when it is absent.
func Find(name string) string {
	if d := os.Getenv(envs[name]); d != "" {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			return d
		}
		return ""
	}
	dir, _ := os.Getwd()
	for range 8 {
		p := filepath.Join(dir, "shared", name)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p
		}
		dir = filepath.Dir(dir)
	}
	return ""
}

// Dir is Find for a test that needs the corpus: an absent corpus skips
// the test, saying so (scripts/test-unprivileged.sh accepts no other skip).
func Dir(t testing.TB, name string) string {
	t.Helper()
	d := Find(name)
	if d == "" {
		t.Skipf("corpus %s is absent: not beside the repository and %s unset or not a directory", name, envs[name])
	}
	return d
}

// harnessZFS is a ZFS over iSCSI section's header in the cfg2cmd corpus's
// storage.cfg.
var harnessZFS = regexp.MustCompile(`(?m)^zfs: \S+\n`)

// HarnessStorageCfg is the cfg2cmd corpus's storage.cfg as qemu-server's
// own test harness holds its storages: a hash it never reads from a file,
// whose zfs: (ZFS over iSCSI) storage has no blocksize, which a storage.cfg
// Proxmox reads must give (pve-storage skips the section without it:
// ../shared/pve-oracle/README.md). The text gets that line (blocksize 4k,
// as the oracle's cfg2cmd-corpus.storage.cfg has it), so a test comparing
// with the corpus's command lines predicts them from the storages they
// were made with. A test of what Proxmox makes of the file reads the file.
func HarnessStorageCfg(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Dir(t, CFG2CMD), "storage.cfg"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(b, []byte("\tblocksize ")) {
		return string(b)
	}
	return harnessZFS.ReplaceAllString(string(b), "${0}\tblocksize 4k\n")
}

// Shapes names check's own shapes, the configs the corpora lack (Ceph
// with and without krbd, ZFS, iSCSI, [PENDING], ...): check/testdata/shapes
// in the repository, with their storage.cfg.
const Shapes = "shapes"

// Case is one VM config of a corpus with the storage.cfg it ran with.
type Case struct {
	// Name is the corpus and the file: cfg2cmd/aio.conf,
	// real-world/spongey-spongey-100.conf, shapes/ceph.conf.
	Name string
	Conf string // the config file's path
	// Storage are the storage.cfg files it ran with, read one after the
	// other: the corpus's own, and for a real-world config whose node's
	// file lacks storages it names, the ones check/testdata/realworld
	// declares (its README.md).
	Storage []string
}

// Text is the config's text.
func (c Case) Text(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(c.Conf)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// StorageCfg is the case's storage.cfg: each of its files, then a newline.
func (c Case) StorageCfg(t testing.TB) string {
	t.Helper()
	var b bytes.Buffer
	for _, f := range c.Storage {
		s, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(s)
		b.WriteByte('\n')
	}
	return b.String()
}

// Cases lists every config of the corpora named (CFG2CMD, RealWorld,
// Shapes), corpus by corpus in the order named, each corpus's files in
// name order, each with its storage.cfg. An absent corpus skips the test
// (Dir); one without a config fails it.
func Cases(t testing.TB, corpora ...string) []Case {
	t.Helper()
	var out []Case
	for _, name := range corpora {
		var dir, label string
		switch name {
		case CFG2CMD:
			dir, label = Dir(t, CFG2CMD), "cfg2cmd"
		case RealWorld:
			dir, label = filepath.Join(Dir(t, RealWorld), "configs"), RealWorld
		case Shapes:
			dir, label = repoDir(t, "check", "testdata", "shapes"), Shapes
		default:
			t.Fatalf("corpus.Cases: no corpus %q", name)
		}
		confs, _ := filepath.Glob(filepath.Join(dir, "*.conf"))
		if len(confs) == 0 {
			t.Fatalf("corpus %s: no config in %s", name, dir)
		}
		for _, c := range confs {
			out = append(out, Case{Name: label + "/" + filepath.Base(c), Conf: c, Storage: storageOf(t, name, dir, filepath.Base(c))})
		}
	}
	return out
}

// storageOf is the storage.cfg files a config of the corpus ran with.
func storageOf(t testing.TB, name, dir, base string) []string {
	if name != RealWorld {
		return []string{filepath.Join(dir, "storage.cfg")}
	}
	// check/testdata/realworld/README.md: the storages the corpus lacks.
	extra := repoDir(t, "check", "testdata", "realworld")
	switch {
	case strings.HasPrefix(base, "techno-"):
		return []string{filepath.Join(extra, "techno.storage.cfg")}
	case strings.HasPrefix(base, "spongey-Spongey-PC-"):
		return []string{filepath.Join(dir, "..", "storage", "spongey.storage.cfg"), filepath.Join(extra, "spongey-pc.extra.storage.cfg")}
	}
	return []string{filepath.Join(dir, "..", "storage", "spongey.storage.cfg")}
}

// repoDir is a folder of the repository: below the nearest parent of the
// working directory with go.mod (a test runs in its package's folder).
func repoDir(t testing.TB, elem ...string) string {
	t.Helper()
	dir, _ := os.Getwd()
	for range 8 {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(append([]string{dir}, elem...)...)
		}
		dir = filepath.Dir(dir)
	}
	t.Fatal("corpus: no go.mod above the working directory")
	return ""
}
