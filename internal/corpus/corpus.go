// Package corpus finds the corpora the tests read beside the repository,
// never copied into it: Proxmox's own cfg2cmd cases and the real-world
// sample of configs, storage.cfg files and fio outputs.
package corpus

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
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
