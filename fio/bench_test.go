package fio

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// benchFiles copies the real Lab 19 files (json and json+) into dir under n
// names that stay Lab 19 names: s000libaio-rr4k-1.json, s000io_uring-..., ...
func benchFiles(tb testing.TB, dir string, n int) []string {
	tb.Helper()
	src, err := filepath.Glob(filepath.Join("testdata", "real", "lab19", "*.json"))
	if err != nil || len(src) == 0 {
		tb.Fatalf("no real files: %v", err)
	}
	var files []string
	for i := 0; i < n; i++ {
		f := src[i%len(src)]
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		name := filepath.Join(dir, fmt.Sprintf("s%03d%s", i/len(src), filepath.Base(f)))
		if err := os.WriteFile(name, data, 0o644); err != nil {
			tb.Fatal(err)
		}
		files = append(files, name)
	}
	return files
}

// BenchmarkSummarize2000 is `fio summary DIR` on 2,000 files without the
// printing: list, read and parse in parallel, group, compute.
func BenchmarkSummarize2000(b *testing.B) {
	dir := b.TempDir()
	benchFiles(b, dir, 2000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		files, err := ListFiles([]string{dir})
		if err != nil {
			b.Fatal(err)
		}
		results, warns := ReadFiles(files)
		s := Summarize(results, Options{GroupBy: GroupAuto, HostRAMBytes: 16 << 30})
		// 52 copies of the 12 groups, and 8 from the partial 53rd.
		if len(results) != 2000 || len(warns) != 0 || len(s.Groups) != 632 {
			b.Fatalf("%d results, %d warnings, %d groups", len(results), len(warns), len(s.Groups))
		}
	}
}
