package lvm

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds any bytes to the lvs JSON parser, seeded with the recorded
// reports: no panic; a report it accepts has no volume with negative sizes
// and answers Find/Volumes for every pool it lists.
func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.json"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"report": [{"lv": [{"lv_name": "data", "lv_size": "-1", "data_percent": "x"}]}]}`))
	f.Add([]byte(`{"report": [{"lv": [{"vg_name": "pve", "lv_name": "data", "lv_attr": "twi-aotz--", "lv_size": "-1", "data_percent": "5"}]}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := Parse(b)
		if err != nil {
			return
		}
		for _, lv := range r.LVs {
			if lv.SizeBytes < 0 {
				t.Errorf("accepted a negative size: %+v", lv)
			}
			if a, ok := lv.AllocatedBytes(); ok && a < 0 {
				t.Errorf("negative allocation %d for %+v", a, lv)
			}
			if lv.IsThinPool() {
				r.Volumes(lv.VG, lv.Name)
			}
			r.Find(lv.VG, lv.Name)
			r.Snapshots(lv.VG, lv.Name)
		}
	})
}
