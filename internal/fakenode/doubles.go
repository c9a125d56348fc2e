package fakenode

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// EnvRoot tells the test doubles (lvs, qm, ...) which fake node they serve:
// they read and write its state below this root.
const EnvRoot = "PVEDISKCHECK_FAKENODE_ROOT"

// doublesPkgs are the programs standing in for Proxmox's and LVM's CLIs, one
// main package per directory; every directory there is built.
const doublesPkgs = "github.com/pvediskcheck/pvediskcheck/internal/fakenode/doubles/..."

var (
	doublesOnce sync.Once
	doublesDir  string
	doublesErr  error
)

// BuildDoubles builds every program under internal/fakenode/doubles/<name>/
// once per test process into one directory (named <name>, as on a node) and
// returns that directory. Directories left by earlier test processes that
// are no longer running are removed.
func BuildDoubles() (string, error) {
	doublesOnce.Do(func() {
		tmp := os.TempDir()
		old, _ := filepath.Glob(filepath.Join(tmp, "pvediskcheck-doubles-*"))
		for _, d := range old {
			pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "pvediskcheck-doubles-"))
			if err == nil && pid != os.Getpid() && syscall.Kill(pid, 0) == syscall.ESRCH {
				_ = os.RemoveAll(d)
			}
		}
		dir := filepath.Join(tmp, "pvediskcheck-doubles-"+strconv.Itoa(os.Getpid()))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			doublesErr = err
			return
		}
		cmd := exec.Command(goTool(), "build", "-o", dir+"/", doublesPkgs)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			doublesErr = fmt.Errorf("building the test doubles (%s): %v\n%s", doublesPkgs, err, out)
			return
		}
		doublesDir = dir
	})
	return doublesDir, doublesErr
}

// goTool finds the go command that runs the tests.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	//lint:ignore SA1019 a test binary runs where go test built it, so the toolchain's root is meaningful here
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// UseDoubles puts the test doubles first on PATH and points them at this
// node for the rest of the test. It uses t.Setenv, so such tests cannot run
// in parallel with each other; everything the tool runs through its runner
// (lvs, qm, ...) then reaches the doubles.
func (n *Node) UseDoubles(t testing.TB) {
	t.Helper()
	dir, err := BuildDoubles()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv(EnvRoot, n.Root)
	n.serveQMOracle(t)
}
