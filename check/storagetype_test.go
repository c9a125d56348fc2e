package check

import (
	"reflect"
	"strings"
	"testing"
)

// volumeChainCfg adds what Proxmox 9 writes for thick LVM with qcow2
// volume chains, and a btrfs storage with nocow, to the test storages.
const volumeChainCfg = `
lvm: chain
	vgname vgchain
	content images
	saferemove 0
	shared 0
	snapshot-as-volume-chain 1

btrfs: btnocow
	path /butter-nocow
	content images
	nocow 1
`

// TestStorageRows: check's rules read the storage's row. A qcow2 volume on
// thick LVM (snapshot-as-volume-chain 1) is thick: no discard rule, however
// qcow2 the image; qemu-server avoids io_uring there as on any lvm. btrfs
// opens without O_DIRECT by default only without nocow (Drive.pm
// drive_uses_cache_direct), so aio=native is refused there and nowhere else.
func TestStorageRows(t *testing.T) {
	for _, c := range []struct {
		name, conf string
		want       []string
		msg        string // a part of the first finding's message
	}{
		{"qcow2 on thick LVM with discard off: nothing to return", "scsi0: chain:vm-100-disk-0.qcow2,size=32G\n", []string{}, ""},
		{"the same disk on a qcow2 file: discard-ignored-on-thin", "scsi0: local:100/vm-100-disk-0.qcow2,size=32G\n", []string{"warning discard-ignored-on-thin scsi0"}, "never returns to the storage (measured with QEMU on a sparse image"},
		{"io_uring on a volume chain", "scsi0: chain:vm-100-disk-0.qcow2,aio=io_uring,size=32G\n", []string{"warning aio-io-uring-risk scsi0"}, "on lvm storage chain with cache=default"},
		{"writeback on a volume chain: the node page cache", "scsi0: chain:vm-100-disk-0.qcow2,cache=writeback,size=32G\n", []string{"warning cache-writeback scsi0"}, "node RAM (page cache"},
		{"aio=native on btrfs with nocow: O_DIRECT by default", "scsi0: btnocow:100/vm-100-disk-0.raw,aio=native,discard=on\n", []string{}, ""},
		{"aio=native on btrfs without nocow", "scsi0: bt:100/vm-100-disk-0.raw,aio=native,discard=on\n", []string{"error aio-native-needs-direct scsi0"}, "cache=default (btrfs storage: no O_DIRECT)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tn := newNode(t)
			tn.write("etc/pve/storage.cfg", storageCfg+volumeChainCfg)
			tn.conf(100, c.conf)
			v := tn.check(100, quietRunner(), Options{})
			if got := summary(v); v.Err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("findings %q, want %q (%v)", got, c.want, v.Err)
			}
			if c.msg != "" && !strings.Contains(v.Findings[0].Message, c.msg) {
				t.Errorf("message %q lacks %q", v.Findings[0].Message, c.msg)
			}
		})
	}
}
