package sampler

import (
	"os"
	"path/filepath"
	"testing"
)

// A real /sys/class/block/loop0/stat line from this machine's kernel (6.x:
// 17 fields, flush counters last).
const realStat = "     335        0    14306      104   262153        0  2097224   125734        0   128624   125838     4084        0  1036288       44        0        0\n"

func TestParseBlockStat(t *testing.T) {
	s, err := parseBlockStat("loop0", realStat)
	if err != nil {
		t.Fatal(err)
	}
	if s.WriteIOs != 262153 || s.WriteSectors != 2097224 || s.DiscardIOs != 4084 || s.DiscardSectors != 1036288 || s.FlushIOs != 0 {
		t.Fatalf("%+v", s)
	}
	if _, err := parseBlockStat("x", "1 2 3"); err == nil {
		t.Fatal("short stat accepted")
	}
}

func TestHostReadsRealProc(t *testing.T) {
	h := Host{Proc: "/proc", Sys: "/sys"}
	m, err := h.Memory()
	if err != nil {
		t.Fatal(err)
	}
	if m.DirtyBytes < 0 || m.WritebackBytes < 0 {
		t.Fatalf("%+v", m)
	}
	// Our own process: write 4 MiB of non-zero data and fsync it.
	before, err := h.ProcessWriteBytes(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "f")
	buf := make([]byte, 4<<20)
	for i := range buf {
		buf[i] = 0x5a
	}
	os.WriteFile(p, buf, 0o644)
	after, _ := h.ProcessWriteBytes(os.Getpid())
	if after-before < 4<<20 {
		t.Fatalf("write_bytes grew by %d after writing 4 MiB", after-before)
	}
	if _, err := (Host{Proc: t.TempDir()}).Memory(); err == nil {
		t.Fatal("empty proc dir gave meminfo")
	}
}
