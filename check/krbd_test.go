package check

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestKRBDFromStorageCfg (issue 26 #5): aio=io_uring with writeback on krbd
// is judged from storage.cfg, also where the krbd device's path cannot be
// named (no ceph.conf with the fsid, pvesm failing: a copied bundle); the
// path would only add evidence. The same rules as with the path.
func TestKRBDFromStorageCfg(t *testing.T) {
	for _, c := range []struct {
		line  string
		want  []string
		fixed string
	}{
		{"kceph:vm-100-disk-0,aio=io_uring,cache=writeback,discard=on", []string{"warning aio-io-uring-risk scsi0", "warning cache-writeback scsi0"}, "qm set 100 --scsi0 kceph:vm-100-disk-0,aio=io_uring,discard=on"},
		{"kceph:vm-100-disk-0,aio=io_uring,cache=none,discard=on", []string{}, ""},
		{"kceph:vm-100-disk-0,cache=writeback", []string{"warning cache-writeback scsi0", "warning discard-ignored-on-thin scsi0"}, "qm set 100 --scsi0 kceph:vm-100-disk-0,discard=on"},
	} {
		for _, fsid := range []bool{true, false} {
			tn := newNode(t)
			if !fsid {
				if err := os.Remove(filepath.Join(tn.root, "etc/pve/ceph.conf")); err != nil {
					t.Fatal(err)
				}
			}
			tn.conf(100, "scsihw: virtio-scsi-single\nscsi0: "+c.line+"\n")
			v := tn.check(100, quietRunner(), Options{})
			if got := summary(v); !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s (fsid %v): %q, want %q", c.line, fsid, got, c.want)
			}
			for _, f := range v.Findings {
				if f.Fix != c.fixed {
					t.Errorf("%s (fsid %v): %s fix %q", c.line, fsid, f.Code, f.Fix)
				}
			}
			predicted := slices.ContainsFunc(v.Notes, func(n string) bool {
				return strings.Contains(n, "a krbd device is named by the Ceph cluster's fsid") && strings.HasSuffix(n, "its settings are predicted from storage.cfg (host_device, raw), without the device's path")
			})
			if predicted == fsid {
				t.Errorf("%s (fsid %v): notes %q", c.line, fsid, v.Notes)
			}
		}
	}
}
