package metrics

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pvediskcheck/pvediskcheck/disk"
	"github.com/pvediskcheck/pvediskcheck/guestdisk"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
)

func i64(n int64) *int64 { return &n }

// metrics --guest: each guest filesystem's use and size per disk, and what
// a trim would give back to each disk a thin pool lists: known (with
// pvediskcheck_disk_reclaimable_bytes), unknown with why, no agent; no
// series for a disk in no thin pool. The figures are the real guest's
// (discard/testdata/guest: ext4 on the whole disk, 14,336 bytes used) over
// its recorded LV (68,236,288 bytes allocated before the trim).
func TestGuestSeries(t *testing.T) {
	ext4 := guestdisk.Filesystem{Mountpoint: "/mnt/s1", Type: "ext4", Device: "sda", Layout: guestdisk.OnDisk, UsedBytes: i64(14336), TotalBytes: i64(223465472), Disks: []string{"scsi1"}}
	over := ext4
	over.UsedBytes = i64(1) // a second mount over the same mount point: exported once, the first
	lvm := guestdisk.Filesystem{Mountpoint: "/srv", Type: "xfs", Device: "dm-0", Layout: guestdisk.OnVirtual, UsedBytes: i64(5), TotalBytes: i64(10), Disks: []string{"scsi2"}}
	alloc := int64(68236288)
	pools := []thinpool.Pool{{Storage: "local-lvm", Type: "lvmthin", Pool: "pve/data", ChunkSizeBytes: 65536, Volumes: []thinpool.Volume{
		{Name: "vm-370-disk-1", VMID: 370, Guest: "vm", VirtualBytes: 268435456, AllocatedBytes: &alloc, DataPercent: new(float64)},
		{Name: "vm-370-disk-2", VMID: 370, Guest: "vm", VirtualBytes: 268435456, AllocatedBytes: &alloc},
		{Name: "vm-370-disk-3", VMID: 370, Guest: "vm", VirtualBytes: 268435456, AllocatedBytes: &alloc},
		{Name: "vm-371-disk-0", VMID: 371, Guest: "vm", VirtualBytes: 268435456, AllocatedBytes: &alloc},
	}}}
	vms := []VM{
		{VMID: 370, Running: true, Live: true, Disks: []Disk{
			{ID: "scsi1", Storage: "local-lvm", volume: "vm-370-disk-1", Discard: "unmap", GuestFilesystems: []guestdisk.Filesystem{ext4, over}},
			{ID: "scsi2", Storage: "local-lvm", volume: "vm-370-disk-2", Discard: "unmap", GuestFilesystems: []guestdisk.Filesystem{lvm}},
			{ID: "scsi3", Storage: "local-lvm", volume: "vm-370-disk-3", Discard: "ignore", GuestFilesystems: []guestdisk.Filesystem{}},
			{ID: "scsi4", Storage: "local", volume: "370/vm-370-disk-4.raw", Discard: "unmap", GuestFilesystems: []guestdisk.Filesystem{ext4}},
		}},
		{VMID: 371, Running: true, Live: true, Disks: []Disk{{ID: "scsi0", Storage: "local-lvm", volume: "vm-371-disk-0", agentErr: disk.ErrNoAgent}}},
	}
	reclaim(vms, pools)
	s := &Snapshot{Errors: map[Source]int{}, VMs: vms}
	s.Exportable()
	p, err := textfile(t.TempDir(), s)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "guest_filesystem") || strings.Contains(l, "reclaimable") {
			if !strings.HasPrefix(l, "#") {
				got = append(got, l)
			}
		}
	}
	want := []string{
		`pvediskcheck_disk_guest_filesystem_size_bytes{disk="scsi1",mountpoint="/mnt/s1",type="ext4",vmid="370"} 2.23465472e+08`,
		`pvediskcheck_disk_guest_filesystem_size_bytes{disk="scsi2",mountpoint="/srv",type="xfs",vmid="370"} 10`,
		`pvediskcheck_disk_guest_filesystem_size_bytes{disk="scsi4",mountpoint="/mnt/s1",type="ext4",vmid="370"} 2.23465472e+08`,
		`pvediskcheck_disk_guest_filesystem_used_bytes{disk="scsi1",mountpoint="/mnt/s1",type="ext4",vmid="370"} 14336`,
		`pvediskcheck_disk_guest_filesystem_used_bytes{disk="scsi2",mountpoint="/srv",type="xfs",vmid="370"} 5`,
		`pvediskcheck_disk_guest_filesystem_used_bytes{disk="scsi4",mountpoint="/mnt/s1",type="ext4",vmid="370"} 14336`,
		`pvediskcheck_disk_reclaimable_bytes{disk="scsi1",vmid="370"} 6.8221952e+07`,
		`pvediskcheck_disk_reclaimable_info{disk="scsi0",reason="no-agent",verdict="no-agent",vmid="371"} 1`,
		`pvediskcheck_disk_reclaimable_info{disk="scsi1",reason="",verdict="known",vmid="370"} 1`,
		`pvediskcheck_disk_reclaimable_info{disk="scsi2",reason="guest-lvm",verdict="unknown",vmid="370"} 1`,
		`pvediskcheck_disk_reclaimable_info{disk="scsi3",reason="no-filesystem",verdict="unknown",vmid="370"} 1`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("series:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if r := vms[0].Disks[0].Reclaimable; r == nil || r.ResolutionBytes != 268435456/10000 || r.AtLeastBytes == nil || *r.AtLeastBytes != 68236288-14336-(268435456-223465472) {
		t.Errorf("scsi1 reclaimable %+v", r)
	}
}

// metrics --guest on a VM without agent: 1: no QMP command more (no
// query-pci), no agent asked, no guest series; the disks are in no thin
// pool (local: files), so no reclaimable either.
func TestGuestWithoutAgent(t *testing.T) {
	n, q := manyDisks(t, 2, qmptest.Greeting111)
	s := Collect(context.Background(), bare(n.Paths, 2*time.Second), Options{Guest: true})
	if q.Commands() != 8 || q.Conns() != 2 {
		t.Errorf("%d commands in %d connections %v, want 8 in 2", q.Commands(), q.Conns(), q.Seen())
	}
	for _, d := range s.VMs[0].Disks {
		if d.GuestFilesystems != nil || d.Reclaimable != nil || d.agentErr != disk.ErrNoAgent {
			t.Errorf("%s: %+v %+v %v", d.ID, d.GuestFilesystems, d.Reclaimable, d.agentErr)
		}
	}
}
