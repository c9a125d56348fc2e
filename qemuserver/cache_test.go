package qemuserver

import "testing"

// TestEffectiveCache: the flags and the mode they amount to are decided
// together; a Proxmox mode's cache has qemu-server's flags for it, and a
// custom triple keeps its own flags with the name custom.
func TestEffectiveCache(t *testing.T) {
	for _, mode := range []string{"none", "writethrough", "writeback", "directsync", "unsafe"} {
		c := CacheOf(mode)
		direct, noFlush, wc := CacheFlags(mode)
		if c != (Cache{Mode: mode, Direct: direct, NoFlush: noFlush, WriteCache: wc}) || EffectiveCache(direct, noFlush, wc) != c {
			t.Errorf("%s: %+v", mode, c)
		}
		if s := (DiskSettings{CacheDirect: direct, CacheNoFlush: noFlush, WriteCache: wc}); s.Cache() != c || s.Cache().Mode != s.Mode() {
			t.Errorf("%s: settings give %+v", mode, s.Cache())
		}
	}
	if c := EffectiveCache(true, true, "off"); c != (Cache{Mode: "custom", Direct: true, NoFlush: true, WriteCache: "off"}) {
		t.Errorf("custom: %+v", c)
	}
}
