package pveoracle

import (
	"sync"
	"testing"
)

var shared struct {
	once sync.Once
	o    *Oracle
	err  error
}

// For is the oracle for a test: one Oracle per test binary, so its batch
// process loads Proxmox's modules once (it ends when the binary exits and
// its stdin closes). An oracle absent from beside the checkout skips the
// test, saying so, as an absent corpus does (scripts/test-unprivileged.sh
// accepts no other skip); one present that does not answer fails it (make
// deps installs the Perl packages it loads).
func For(t testing.TB) *Oracle {
	t.Helper()
	dir := Find()
	if dir == "" {
		t.Skipf("corpus %s is absent: not beside the repository and %s unset or not the oracle's folder", dirName, EnvDir)
	}
	shared.once.Do(func() { shared.o, shared.err = Open(dir) })
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.o
}
