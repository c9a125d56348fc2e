package thinpool

import (
	"testing"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

func TestUnavailable(t *testing.T) {
	st := func(props ...string) *qemuserver.Storage {
		s := &qemuserver.Storage{ID: "s", Type: "lvmthin", Props: map[string]string{}}
		for i := 0; i+1 < len(props); i += 2 {
			s.Props[props[i]] = props[i+1]
		}
		return s
	}
	for _, c := range []struct {
		s    *qemuserver.Storage
		here string
		want string
	}{
		{st(), "pve1", ""},
		{st("nodes", "pve1,pve2"), "pve1", ""},
		{st("nodes", "pve1,pve2"), "pve2", ""},
		{st("nodes", "pve2"), "pve1", "available on nodes pve2 only, this is pve1"},
		{st("nodes", "pve2"), "", ""},
		{st("disable", ""), "pve1", "disabled in storage.cfg"},
		{st("disable", "0"), "pve1", ""},
	} {
		if got := unavailable(c.s, c.here); got != c.want {
			t.Errorf("%v on %q: %q, want %q", c.s.Props, c.here, got, c.want)
		}
	}
}
