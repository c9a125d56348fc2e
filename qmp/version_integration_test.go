//go:build integration

package qmp_test

import (
	"context"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// TestGreetingIsQueryVersion: the build the greeting states is what
// query-version answers (the greeting's version object is query-version's:
// docs/interop/qmp-spec), so reading it costs no command.
func TestGreetingIsQueryVersion(t *testing.T) {
	v, _ := fakenode.QEMUVersion(fakenode.QEMUBinary())
	t.Run("qemu-"+v, func(t *testing.T) {
		n := fakenode.NewT(t)
		if err := n.WriteConfig(370, "memory: 64\n"); err != nil {
			t.Fatal(err)
		}
		n.MustStart(t, 370, fakenode.ArgvOptions{})
		var greeting, answered string
		if err := qmp.Do(context.Background(), n.Paths.QMPSocket(370), 5*time.Second, func(s qmp.Session) error {
			greeting = s.Package()
			ret, err := s.Exec("query-version", nil)
			answered = ret.Get("package").String()
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if greeting == "" || greeting != answered {
			t.Fatalf("greeting states %q, query-version %q", greeting, answered)
		}
		t.Logf("package %q", greeting)
	})
}
