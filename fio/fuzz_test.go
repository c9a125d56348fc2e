package fio

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/internal/corpus"
)

// fuzzSeeds are every fixture and, when it is there, the real-world corpus.
func fuzzSeeds(f *testing.F) [][]byte {
	var seeds [][]byte
	dirs, _ := filepath.Glob(filepath.Join("testdata", "*", "*"))
	if d := corpus.Find(corpus.RealWorld); d != "" {
		dirs = append(dirs, filepath.Join(d, "fio"))
	}
	for _, d := range dirs {
		files, _ := filepath.Glob(filepath.Join(d, "*.json"))
		for _, file := range files {
			data, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			seeds = append(seeds, data)
		}
	}
	if len(seeds) < 100 {
		f.Fatalf("%d seeds", len(seeds))
	}
	return append(seeds,
		[]byte(`{"jobs": []}`),
		[]byte(`{"jobs": [{"jobname": "n", "read": {"iops": -1, "bw": -1, "runtime": -1, "clat_ns": {"mean": -1}}}]}`),
		[]byte(`>{"fio version": "fio-2.2", "jobs": [{"read": {"io_bytes": 18446744073709551615, "runtime": 1, "iops": 1e308}}]}`),
		[]byte("fio: pid=1, err=28/x\n{\"jobs\": [{\"error\": 28, \"read\": {\"iops\": 1e-300, \"runtime\": 1, \"bw\": 1}}]}\n{\"jobs\": [{]}"),
	)
}

// FuzzParse: whatever a file holds, no panic; an error names the file and
// quotes little of it; what parses summarises into finite, non-negative
// values that encode as JSON, every job accounted for.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add("res/local-zfs-rr4k-1.json", s)
	}
	f.Add("x", []byte(""))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		rs, err := ParseAll(name, data)
		if err != nil {
			if rs != nil || !strings.HasPrefix(err.Error(), name+": ") && !strings.HasPrefix(err.Error(), name+" (fio output ") ||
				len(err.Error()) > len(name)+400 {
				t.Fatalf("%d-byte error: %.300q", len(err.Error()), err)
			}
			return
		}
		if len(rs) == 0 {
			t.Fatal("no result, no error")
		}
		jobs := 0
		for _, r := range rs {
			if r.File != name || len(r.Notes) > maxNotes {
				t.Fatalf("%+v", r)
			}
			jobs += len(r.Jobs)
			for _, j := range append(slices.Clone(r.Jobs), mergeClones(r.Jobs)...) {
				for _, d := range Dirs {
					s := j.Dir(d)
					if s.TotalIOs < 0 || s.IOBytes < 0 || s.RuntimeMs < 0 || s.IOPS < 0 || s.BandwidthBps < 0 || s.ClatMeanNs < 0 ||
						s.LatMeanNs < 0 || s.P99Ns < 0 || (s.P99Of == "") != (s.P99Ns == 0) {
						t.Fatalf("%s: %+v", d, *s)
					}
				}
				if j.IOErrors < 0 || j.Sync.TotalIOs < 0 || j.Sync.LatMeanNs < 0 {
					t.Fatalf("%+v", j)
				}
			}
		}
		for _, mode := range GroupBys {
			s := Summarize(rs, Options{GroupBy: mode, HostRAMBytes: 1 << 30})
			checkValues(t, s)
			// Nothing dropped: each job is a group's, a fill, or failed.
			if len(s.Groups) == 0 && len(s.Failed) == 0 && len(s.Preconditioning) == 0 && jobs+len(rs) > 0 {
				t.Fatalf("%d jobs, nothing summarised or named", jobs)
			}
		}
	})
}

// FuzzParseSize: no panic; a size read is 0 or more and within an int64.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"2G", "256m", "4096", "1GiB", "1.5T", "50%", "", ".", "99999999999999999999P", "1e3", " 2 G "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if n, ok := ParseSize(s); n < 0 || n > maxValue || !ok && n != 0 {
			t.Fatalf("%q: %d %v", s, n, ok)
		}
	})
}

// FuzzJobSet: a set that validates prints a job file of comments, the
// expected sections and known keys only: nothing typed starts a line.
func FuzzJobSet(f *testing.F) {
	f.Add("/dev/disk/by-id/scsi-0QEMU_QEMU_HARDDISK_drive-scsi1", "local-zfs", "2G", 20, 3, 3)
	f.Add("/dev/disk/by-id/usb-x-0:0", "usb", "512M", 1, 0, 1)
	f.Add("/dev/disk/by-id/x\n[evil]\nfilename=/dev/sda", "a\nb", "2G\nrw=write", 1, 0, 1)
	f.Add("/dev/sdb", "$(reboot)", "0", 0, -1, 0)
	keys := []string{"filename", "direct", "ioengine", "size", "rw", "bs", "iodepth", "time_based", "runtime", "ramp_time", "fsync"}
	sections := []string{"[global]", "[fill]"}
	for _, j := range LabJobs {
		sections = append(sections, "["+j[0]+"]")
	}
	f.Fuzz(func(t *testing.T, device, label, size string, runtime, ramp, runs int) {
		js := JobSet{Device: device, Label: label, Size: size, RuntimeS: runtime, RampS: ramp, Runs: runs}
		if err := js.Validate(); err != nil {
			var inv *InvalidError
			if !errors.As(err, &inv) {
				t.Fatalf("%T %v", err, err)
			}
			return
		}
		var seen []string
		for _, l := range strings.Split(js.JobFile(), "\n") {
			switch {
			case l == "" || strings.HasPrefix(l, "#"):
			case strings.HasPrefix(l, "["):
				if !slices.Contains(sections, l) || slices.Contains(seen, l) {
					t.Fatalf("section %q", l)
				}
				seen = append(seen, l)
			default:
				k, v, ok := strings.Cut(l, "=")
				if !ok || !slices.Contains(keys, k) || v == "" {
					t.Fatalf("line %q", l)
				}
				if k == "filename" && v != strings.ReplaceAll(device, ":", `\:`) {
					t.Fatalf("filename %q for %q", v, device)
				}
			}
		}
		if len(seen) != len(sections) {
			t.Fatalf("sections %v", seen)
		}
	})
}
