package vm

import (
	"testing"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp"
)

// TestEffective: the running disk's cache is decided once, from the live
// flags QMP reported when the medium is inserted, else from the command
// line; a disk that does not run has none.
func TestEffective(t *testing.T) {
	cmdline := &qemuserver.DiskSettings{CacheDirect: true, WriteCache: "on"} // cache=none on the command line
	live := &Live{Inserted: true, Format: qmp.BlockNode{Direct: false, NoFlush: true}, WriteCache: "on"}
	for _, c := range []struct {
		name string
		d    Disk
		want *qemuserver.Cache
	}{
		{"not running", Disk{ID: "scsi0", Configured: cmdline}, nil},
		{"command line only", Disk{ID: "scsi0", Running: cmdline}, &qemuserver.Cache{Mode: "none", Direct: true, WriteCache: "on"}},
		{"live flags win (qom-set/blockdev-reopen since the start)", Disk{ID: "scsi0", Running: cmdline, Live: live}, &qemuserver.Cache{Mode: "unsafe", NoFlush: true, WriteCache: "on"}},
		{"no medium: the command line's", Disk{ID: "ide2", Running: cmdline, Live: &Live{Inserted: false}}, &qemuserver.Cache{Mode: "none", Direct: true, WriteCache: "on"}},
		{"the device's write-cache property off (qom-get)", Disk{ID: "scsi0", Running: cmdline, Live: &Live{Inserted: true, Format: qmp.BlockNode{Direct: true}, WriteCache: "off"}},
			&qemuserver.Cache{Mode: "directsync", Direct: true, WriteCache: "off"}},
	} {
		got := c.d.Effective()
		if (got == nil) != (c.want == nil) || got != nil && *got != *c.want {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}
