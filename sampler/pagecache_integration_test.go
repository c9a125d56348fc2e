//go:build integration

package sampler

import (
	"os"
	"path/filepath"
	"testing"
)

func TestVolumePageCache(t *testing.T) {
	p := filepath.Join(t.TempDir(), "vol")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 8<<20)
	for i := range buf {
		buf[i] = 0x5a
	}
	f.Write(buf)
	pc, err := VolumePageCache(p)
	if err != nil {
		t.Skipf("cachestat unavailable on this kernel: %v", err)
	}
	if pc.CachedBytes < 8<<20 || pc.DirtyBytes+pc.WritebackBytes == 0 {
		t.Fatalf("after an 8 MiB buffered write: %+v", pc)
	}
	f.Sync()
	f.Close()
	pc, _ = VolumePageCache(p)
	if pc.DirtyBytes != 0 || pc.CachedBytes < 8<<20 {
		t.Fatalf("after fsync: %+v", pc)
	}
}
