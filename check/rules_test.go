package check

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// ruleCase is one stopped VM's config and the exact findings it must
// produce (sorted "severity code disk"), and the fix text of some of them.
type ruleCase struct {
	name   string
	conf   string
	images map[string]bool // image path below the root -> sparse
	want   []string
	fixes  map[string]string // "code disk" -> exact fix text
	msgs   map[string]string // "code disk" -> a part of the message
	notes  []string          // a part of each note, in order (none when nil)
}

const lvmVol = "local-lvm:vm-100-disk-0"

func ruleCases() []ruleCase {
	none := []string{}
	const driver = " (the guest needs its VirtIO SCSI driver first: virtio_scsi on Linux, vioscsi on Windows)"
	return []ruleCase{
		// aio
		{name: "aio=native with cache=none", conf: "scsihw: virtio-scsi-single\nscsi0: " + lvmVol + ",aio=native,cache=none,discard=on,iothread=1,size=32G\n", want: none},
		{name: "aio=native with the default cache (O_DIRECT)", conf: "scsi0: " + lvmVol + ",aio=native,discard=on\n", want: none},
		{name: "aio=native with cache=directsync", conf: "scsi0: " + lvmVol + ",aio=native,cache=directsync,discard=on\n", want: none},
		{name: "aio=native with writeback: one fix keeps aio=native", conf: "scsi0: " + lvmVol + ",aio=native,cache=writeback,discard=on\n",
			want: []string{"error aio-native-needs-direct scsi0", "warning cache-writeback scsi0"},
			fixes: map[string]string{"aio-native-needs-direct scsi0": "qm set 100 --scsi0 local-lvm:vm-100-disk-0,aio=native,discard=on",
				"cache-writeback scsi0": "qm set 100 --scsi0 local-lvm:vm-100-disk-0,aio=native,discard=on"},
			msgs: map[string]string{"aio-native-needs-direct scsi0": QEMUNativeMsg, "cache-writeback scsi0": "node RAM (page cache; lab: 1,050,036 kB"}},
		{name: "aio=native with writethrough drops aio", conf: "scsi0: " + lvmVol + ",aio=native,cache=writethrough,discard=on\n",
			want:  []string{"error aio-native-needs-direct scsi0"},
			fixes: map[string]string{"aio-native-needs-direct scsi0": "qm set 100 --scsi0 local-lvm:vm-100-disk-0,cache=writethrough,discard=on"},
			msgs:  map[string]string{"aio-native-needs-direct scsi0": "aio=native with cache=writethrough"}},
		{name: "aio=native on btrfs without nocow", conf: "scsi0: bt:100/vm-100-disk-0.raw,aio=native,discard=on\n",
			want: []string{"error aio-native-needs-direct scsi0"}, msgs: map[string]string{"aio-native-needs-direct scsi0": "cache=default (btrfs storage: no O_DIRECT)"}},
		{name: "aio=native on librbd: -blockdev passes no aio to rbd", conf: "scsi0: ceph:vm-100-disk-0,aio=native,cache=writeback,discard=on\n",
			want: []string{"warning cache-writeback scsi0"}, msgs: map[string]string{"cache-writeback scsi0": "librbd's cache inside the QEMU process"}},
		{name: "aio=native on krbd with writeback", conf: "scsi0: kceph:vm-100-disk-0,aio=native,cache=writeback,discard=on\n",
			want:  []string{"error aio-native-needs-direct scsi0", "warning cache-writeback scsi0"},
			fixes: map[string]string{"cache-writeback scsi0": "qm set 100 --scsi0 kceph:vm-100-disk-0,aio=native,discard=on"}},
		{name: "aio=native on a CD-ROM (no O_DIRECT)", conf: "ostype: l26\nide2: local:iso/debian.iso,media=cdrom,aio=native\n",
			want: []string{"error aio-native-needs-direct ide2"}, fixes: map[string]string{"aio-native-needs-direct ide2": "qm set 100 --ide2 local:iso/debian.iso,media=cdrom"}},
		{name: "an empty CD-ROM drive opens nothing", conf: "ide2: none,media=cdrom,aio=native,cache=unsafe\n", want: none,
			notes: []string{"ide2 is an empty CD-ROM drive"}},
		// aio=io_uring where qemu-server avoids it
		{name: "io_uring on plain LVM", conf: "scsi0: thick:vm-100-disk-0,aio=io_uring\n",
			want: []string{"warning aio-io-uring-risk scsi0"}, fixes: map[string]string{"aio-io-uring-risk scsi0": "qm set 100 --scsi0 thick:vm-100-disk-0"},
			msgs: map[string]string{"aio-io-uring-risk scsi0": `because "io_uring with cache mode writeback or writethrough on LVM will hang, without cache only sometimes" (Drive.pm storage_allows_io_uring_default)`}},
		{name: "io_uring on plain LVM, -drive generation", conf: "machine: pc-q35-9.2\nscsi0: thick:vm-100-disk-0,aio=io_uring\n", want: []string{"warning aio-io-uring-risk scsi0"}},
		{name: "io_uring on CIFS, with discard off: one fix", conf: "scsi0: smb:100/vm-100-disk-0.qcow2,aio=io_uring\n",
			want:  []string{"warning aio-io-uring-risk scsi0", "warning discard-ignored-on-thin scsi0"},
			fixes: map[string]string{"aio-io-uring-risk scsi0": "qm set 100 --scsi0 smb:100/vm-100-disk-0.qcow2,discard=on", "discard-ignored-on-thin scsi0": "qm set 100 --scsi0 smb:100/vm-100-disk-0.qcow2,discard=on"},
			msgs:  map[string]string{"aio-io-uring-risk scsi0": "CIFS since kernel 5.15"}},
		{name: "io_uring on krbd with writeback: dropping the cache ends the hazard", conf: "scsi0: kceph:vm-100-disk-0,aio=io_uring,cache=writeback,discard=on\n",
			want:  []string{"warning aio-io-uring-risk scsi0", "warning cache-writeback scsi0"},
			fixes: map[string]string{"aio-io-uring-risk scsi0": "qm set 100 --scsi0 kceph:vm-100-disk-0,aio=io_uring,discard=on"},
			msgs:  map[string]string{"aio-io-uring-risk scsi0": "on krbd will hang"}},
		{name: "io_uring on krbd with O_DIRECT", conf: "scsi0: kceph:vm-100-disk-0,aio=io_uring,cache=none,discard=on\n", want: none},
		{name: "io_uring on LVM-thin", conf: "scsi0: " + lvmVol + ",aio=io_uring,discard=on\n", want: none},
		{name: "io_uring on librbd", conf: "scsi0: ceph:vm-100-disk-0,aio=io_uring,discard=on\n", want: none},
		{name: "threads on plain LVM", conf: "scsi0: thick:vm-100-disk-0,aio=threads\n", want: none},
		// iothread
		{name: "iothread on virtio-scsi-single", conf: "scsihw: virtio-scsi-single\nscsi0: " + lvmVol + ",iothread=1,discard=on\n", want: none},
		{name: "iothread predicted on lsi (the default)", conf: "scsi0: " + lvmVol + ",iothread=1,discard=on\n",
			want: []string{"warning iothread-ignored scsi0"}, fixes: map[string]string{"iothread-ignored scsi0": "qm set 100 --scsihw virtio-scsi-single (the guest needs its VirtIO SCSI driver first: virtio_scsi on Linux, vioscsi on Windows)"},
			msgs: map[string]string{"iothread-ignored scsi0": "scsihw lsi"}},
		{name: "iothread on virtio-scsi-pci: same driver, no note", conf: "scsihw: virtio-scsi-pci\nscsi0: " + lvmVol + ",iothread=1,discard=on\n", want: []string{"warning iothread-ignored scsi0"},
			fixes: map[string]string{"iothread-ignored scsi0": "qm set 100 --scsihw virtio-scsi-single"}},
		{name: "iothread=0 on lsi", conf: "scsi0: " + lvmVol + ",iothread=0,discard=on\n", want: none},
		{name: "iothread on VirtIO Block", conf: "virtio0: " + lvmVol + ",iothread=1,discard=on\n", want: none},
		{name: "iothread ignored with cache=unsafe: one fix", conf: "scsi1: " + lvmVol + ",iothread=1,cache=unsafe,discard=on\n",
			want:  []string{"error cache-unsafe scsi1", "warning iothread-ignored scsi1"},
			fixes: map[string]string{"cache-unsafe scsi1": "qm set 100 --scsihw virtio-scsi-single --scsi1 local-lvm:vm-100-disk-0,iothread=1,discard=on (the guest needs its VirtIO SCSI driver first: virtio_scsi on Linux, vioscsi on Windows)", "iothread-ignored scsi1": "qm set 100 --scsihw virtio-scsi-single --scsi1 local-lvm:vm-100-disk-0,iothread=1,discard=on (the guest needs its VirtIO SCSI driver first: virtio_scsi on Linux, vioscsi on Windows)"}},
		// emulated controllers
		{name: "IDE counts as emulated", conf: "ostype: l26\nscsihw: virtio-scsi-single\nide0: " + lvmVol + ",discard=on\n",
			want:  []string{"warning emulated-controller ide0"},
			fixes: map[string]string{"emulated-controller ide0": "with the VM stopped: qm set 100 --delete ide0 --scsi0 local-lvm:vm-100-disk-0,discard=on (adjust the guest's fstab/boot device)"},
			msgs:  map[string]string{"emulated-controller ide0": "IDE is an emulated controller; the lab measured SATA at 25-30% of VirtIO random reads at 3-4 times the latency, and the config's ostype l26 says the guest has VirtIO drivers"}},
		{name: "IDE moves to a free slot, the boot order follows, model goes", conf: "ostype: l26\nscsihw: virtio-scsi-pci\nboot: order=ide0;net0\nide0: " + lvmVol + ",discard=on,model=Disk%20A\nnet0: virtio=BC:24:11:00:00:01,bridge=vmbr0\nscsi0: local-lvm:vm-100-disk-1,discard=on\n",
			want:  []string{"warning emulated-controller ide0"},
			fixes: map[string]string{"emulated-controller ide0": "with the VM stopped: qm set 100 --delete ide0 --scsi1 local-lvm:vm-100-disk-0,discard=on --boot 'order=scsi1;net0' (adjust the guest's fstab/boot device)"}},
		// update_vm refuses an order naming a device the config lacks: a
		// stale entry (no net0 here) is left out of the new order.
		{name: "a move's boot order leaves out a device the config lacks", conf: "ostype: l26\nscsihw: virtio-scsi-pci\nboot: order=ide0;net0\nide0: " + lvmVol + ",discard=on\n",
			want:  []string{"warning emulated-controller ide0"},
			fixes: map[string]string{"emulated-controller ide0": "with the VM stopped: qm set 100 --delete ide0 --scsi0 local-lvm:vm-100-disk-0,discard=on --boot order=scsi0 (adjust the guest's fstab/boot device)"}},
		// Issue 26 #1: with no scsihw line the SCSI controller is lsi, as
		// emulated as SATA: the move makes it VirtIO SCSI, and says the
		// guest needs the driver first.
		{name: "SATA moves off, and the default lsi becomes VirtIO SCSI", conf: "ostype: l26\nboot: order=sata0;ide2;net0\nsata0: local-lvm:vm-105-disk-0,size=20G\nide2: none,media=cdrom\nnet0: virtio=BC:24:11:00:00:01,bridge=vmbr0\n",
			want: []string{"warning discard-ignored-on-thin sata0", "warning emulated-controller sata0"},
			fixes: map[string]string{"emulated-controller sata0": "with the VM stopped: qm set 100 --scsihw virtio-scsi-single --delete sata0 --scsi0 local-lvm:vm-105-disk-0,size=20G,discard=on --boot 'order=scsi0;ide2;net0'" + driver + " (adjust the guest's fstab/boot device)",
				"discard-ignored-on-thin sata0": "with the VM stopped: qm set 100 --scsihw virtio-scsi-single --delete sata0 --scsi0 local-lvm:vm-105-disk-0,size=20G,discard=on --boot 'order=scsi0;ide2;net0'" + driver + " (adjust the guest's fstab/boot device)"},
			notes: []string{"ide2 is an empty CD-ROM drive"}},
		{name: "SATA off megasas, legacy boot from bootdisk", conf: "ostype: l26\nscsihw: megasas\nbootdisk: sata1\nsata1: " + lvmVol + ",discard=on\n",
			want:  []string{"warning emulated-controller sata1"},
			fixes: map[string]string{"emulated-controller sata1": "with the VM stopped: qm set 100 --scsihw virtio-scsi-single --delete sata1 --scsi0 local-lvm:vm-100-disk-0,discard=on --bootdisk scsi0" + driver + " (adjust the guest's fstab/boot device)"}},
		{name: "legacy boot without bootdisk: no boot option", conf: "ostype: l26\nscsihw: virtio-scsi-single\nboot: cdn\nsata1: " + lvmVol + ",discard=on\n",
			want:  []string{"warning emulated-controller sata1"},
			fixes: map[string]string{"emulated-controller sata1": "with the VM stopped: qm set 100 --delete sata1 --scsi0 local-lvm:vm-100-disk-0,discard=on (adjust the guest's fstab/boot device)"}},
		{name: "two SATA disks get two slots", conf: "ostype: l26\nscsihw: virtio-scsi-single\nsata0: " + lvmVol + ",discard=on\nsata1: local-lvm:vm-100-disk-1,discard=on\n",
			want: []string{"warning emulated-controller sata0", "warning emulated-controller sata1"},
			fixes: map[string]string{"emulated-controller sata0": "with the VM stopped: qm set 100 --delete sata0 --scsi0 local-lvm:vm-100-disk-0,discard=on (adjust the guest's fstab/boot device)",
				"emulated-controller sata1": "with the VM stopped: qm set 100 --delete sata1 --scsi1 local-lvm:vm-100-disk-1,discard=on (adjust the guest's fstab/boot device)"}},
		{name: "SATA with limit errors: the move carries every fix", conf: "ostype: l26\nscsihw: virtio-scsi-single\nsata1: local-lvm:vm-100-disk-4,discard=on,mbps=10,mbps_rd=5,size=64M\n",
			want: []string{"error limit-invalid sata1", "warning emulated-controller sata1"},
			fixes: map[string]string{"limit-invalid sata1": "with the VM stopped: qm set 100 --delete sata1 --scsi0 local-lvm:vm-100-disk-4,discard=on,mbps_rd=5,size=64M (adjust the guest's fstab/boot device)",
				"emulated-controller sata1": "with the VM stopped: qm set 100 --delete sata1 --scsi0 local-lvm:vm-100-disk-4,discard=on,mbps_rd=5,size=64M (adjust the guest's fstab/boot device)"}},
		{name: "SATA on a Windows guest", conf: "ostype: win11\nsata0: " + lvmVol + ",discard=on\n", want: none},
		{name: "SATA without an ostype", conf: "sata0: " + lvmVol + ",discard=on\n", want: none},
		{name: "an IDE CD-ROM on a Linux guest", conf: "ostype: l26\nide2: local:iso/debian.iso,media=cdrom\n", want: none},
		{name: "l24 counts as VirtIO-capable", conf: "ostype: l24\nscsihw: virtio-scsi-single\nsata0: " + lvmVol + ",discard=on\n", want: []string{"warning emulated-controller sata0"}},
		// Issue 26 #2: the emulated SCSI controllers, as SATA and IDE.
		{name: "SCSI on the default lsi (no scsihw line)", conf: "ostype: l26\nscsi0: " + lvmVol + ",discard=on,size=20G\n",
			want:  []string{"warning emulated-controller scsi0"},
			fixes: map[string]string{"emulated-controller scsi0": "qm set 100 --scsihw virtio-scsi-single" + driver},
			msgs:  map[string]string{"emulated-controller scsi0": "scsihw lsi (Proxmox's default when scsihw is not set) is an emulated SCSI controller: QEMU emulates every request in its main loop, without an IO thread, as it does for SATA"}},
		{name: "SCSI on lsi53c810", conf: "ostype: l26\nscsihw: lsi53c810\nscsi0: " + lvmVol + ",discard=on\n",
			want: []string{"warning emulated-controller scsi0"}, msgs: map[string]string{"emulated-controller scsi0": "scsihw lsi53c810 is an emulated"}},
		{name: "SCSI on megasas, with cache=unsafe: one fix", conf: "ostype: l26\nscsihw: megasas\nscsi0: " + lvmVol + ",cache=unsafe,discard=on\n",
			want: []string{"error cache-unsafe scsi0", "warning emulated-controller scsi0"},
			fixes: map[string]string{"emulated-controller scsi0": "qm set 100 --scsihw virtio-scsi-single --scsi0 local-lvm:vm-100-disk-0,discard=on" + driver,
				"cache-unsafe scsi0": "qm set 100 --scsihw virtio-scsi-single --scsi0 local-lvm:vm-100-disk-0,discard=on" + driver}},
		{name: "SCSI on pvscsi, with iothread: one fix", conf: "ostype: l26\nscsihw: pvscsi\nscsi0: " + lvmVol + ",iothread=1,discard=on\n",
			want:  []string{"warning emulated-controller scsi0", "warning iothread-ignored scsi0"},
			fixes: map[string]string{"emulated-controller scsi0": "qm set 100 --scsihw virtio-scsi-single" + driver, "iothread-ignored scsi0": "qm set 100 --scsihw virtio-scsi-single" + driver}},
		{name: "SCSI on virtio-scsi-pci is VirtIO", conf: "ostype: l26\nscsihw: virtio-scsi-pci\nscsi0: " + lvmVol + ",discard=on\n", want: none},
		{name: "SCSI on virtio-scsi-single is VirtIO", conf: "ostype: l26\nscsihw: virtio-scsi-single\nscsi0: " + lvmVol + ",discard=on\n", want: none},
		{name: "SCSI on lsi, Windows guest", conf: "ostype: win10\nscsi0: " + lvmVol + ",discard=on\n", want: none},
		{name: "SCSI on lsi, no ostype", conf: "scsi0: " + lvmVol + ",discard=on\n", want: none},
		{name: "a SCSI CD-ROM on lsi", conf: "ostype: l26\nscsi0: local:iso/debian.iso,media=cdrom\n", want: none},
		{name: "a read-only SCSI disk on lsi", conf: "ostype: l26\nscsi0: " + lvmVol + ",ro=1\n", want: none},
		// Proxmox keeps it (no enum check) and QEMU refuses -device virtio.
		{name: "an unknown scsihw: the VM does not start", conf: "ostype: l26\nscsihw: virtio\nscsi0: " + lvmVol + ",discard=on\n",
			want: []string{"error config-invalid scsi0"}, msgs: map[string]string{"config-invalid scsi0": `scsihw "virtio" is no SCSI controller Proxmox knows`},
			fixes: map[string]string{"config-invalid scsi0": "qm set 100 --scsihw lsi (Proxmox's default; or virtio-scsi-single for a guest with VirtIO drivers)"}},
		{name: "an unknown scsihw without a SCSI disk: no controller", conf: "ostype: l26\nscsihw: virtio\nvirtio0: " + lvmVol + ",discard=on\n", want: none},
		// Issue 26 #6: ISO images as disks. Without media= qemu-server
		// refuses to start (the cfg2cmd case ide-no-media-error); qm set
		// takes the line only with media=cdrom.
		{name: "an ISO image without media: the VM does not start", conf: "ostype: l26\nide3: local:iso/three.iso,size=112M\n",
			want:  []string{"error config-invalid ide3"},
			fixes: map[string]string{"config-invalid ide3": "edit /etc/pve/qemu-server/100.conf: the line 'ide3: local:iso/three.iso,size=112M' becomes 'ide3: local:iso/three.iso,size=112M,media=disk' (the image as the raw disk it is, as a macOS OpenCore or recovery image is: qm set refuses media=disk for an ISO image); for an installer the guest only reads, qm set 100 --ide3 local:iso/three.iso,size=112M,media=cdrom instead"},
			msgs:  map[string]string{"config-invalid ide3": `ide3: local:iso/three.iso is an ISO image without media=: the VM will not start; qemu-server says "ide3: explicit media parameter is required for iso images"`}},
		{name: "an ISO image without media, cache=unsafe: only the start matters", conf: "sata0: local:iso/OpenCore-v21.iso,cache=unsafe,size=150M\n", want: []string{"error config-invalid sata0"}},
		// format= beside media=cdrom is refused: no media=cdrom offered.
		{name: "an ISO image without media, with format=: media=disk only", conf: "sata0: local:iso/OpenCore-v21.iso,format=raw,size=150M\n", want: []string{"error config-invalid sata0"},
			fixes: map[string]string{"config-invalid sata0": "edit /etc/pve/qemu-server/100.conf: the line 'sata0: local:iso/OpenCore-v21.iso,format=raw,size=150M' becomes 'sata0: local:iso/OpenCore-v21.iso,format=raw,size=150M,media=disk' (the image as the raw disk it is, as a macOS OpenCore or recovery image is: qm set refuses media=disk for an ISO image)"}},
		// macOS (an Apple SMC in args), whatever ostype says: no move.
		{name: "macOS with ostype l26 on SATA: said, not moved", conf: "ostype: l26\nargs: -device isa-applesmc,osk=x -smbios type=2\nsata0: " + lvmVol + ",discard=on\n", want: none,
			notes: []string{"the guest is macOS (the config's args give QEMU -device isa-applesmc), although the config's ostype l26 says Linux: no move off an emulated controller is advised"}},
		{name: "macOS with ostype l26 on lsi: no scsihw change", conf: "ostype: l26\nargs: -device isa-applesmc,osk=x\nscsi0: " + lvmVol + ",discard=on\n", want: none,
			notes: []string{"the guest is macOS"}},
		{name: "macOS on VirtIO SCSI: nothing to say", conf: "ostype: l26\nargs: -device isa-applesmc,osk=x\nscsihw: virtio-scsi-single\nscsi0: " + lvmVol + ",discard=on\n", want: none},
		// protection: 1: update_vm refuses to remove a drive, so no move.
		{name: "a protected VM's SATA disk: no move printed", conf: "ostype: l26\nprotection: 1\nsata0: " + lvmVol + "\n",
			want:  []string{"warning discard-ignored-on-thin sata0", "warning emulated-controller sata0"},
			fixes: map[string]string{"discard-ignored-on-thin sata0": "qm set 100 --sata0 local-lvm:vm-100-disk-0,discard=on", "emulated-controller sata0": ""},
			msgs:  map[string]string{"emulated-controller sata0": `the VM has protection: 1, and qm set refuses the move ("can't remove drive 'sata0' - protection mode enabled"): no move is printed; clear it first (qm set 100 --protection 0)`}},
		// The real macOS configs: media=disk starts, but qm set refuses
		// any line for it, so the fix edits the file.
		{name: "an ISO image as media=disk with cache=unsafe", conf: "ostype: other\nsata0: local:iso/OpenCore-v21.iso,cache=unsafe,media=disk,size=150M\n",
			want:  []string{"error cache-unsafe sata0"},
			fixes: map[string]string{"cache-unsafe sata0": "edit /etc/pve/qemu-server/100.conf: the line 'sata0: local:iso/OpenCore-v21.iso,cache=unsafe,media=disk,size=150M' becomes 'sata0: local:iso/OpenCore-v21.iso,media=disk,size=150M' (qm set refuses an ISO image without media=cdrom)"}},
		{name: "an ISO image as media=disk on SATA in a Linux guest: no move command", conf: "ostype: l26\nscsihw: virtio-scsi-single\nsata0: local:iso/OpenCore-v21.iso,media=disk,size=150M\n",
			want:  []string{"warning emulated-controller sata0"},
			fixes: map[string]string{"emulated-controller sata0": ""},
			msgs:  map[string]string{"emulated-controller sata0": "qm set refuses an ISO image without media=cdrom (API2/Qemu.pm), so only an edit of the config file moves it"}},
		{name: "an ISO image as media=disk on lsi: the controller by qm set, the line by hand", conf: "ostype: l26\nscsi0: local:iso/x.iso,media=disk,cache=writeback\n",
			want: []string{"warning cache-writeback scsi0", "warning emulated-controller scsi0"},
			fixes: map[string]string{"cache-writeback scsi0": "qm set 100 --scsihw virtio-scsi-single" + driver + ", and edit /etc/pve/qemu-server/100.conf: the line 'scsi0: local:iso/x.iso,media=disk,cache=writeback' becomes 'scsi0: local:iso/x.iso,media=disk' (qm set refuses an ISO image without media=cdrom)",
				"emulated-controller scsi0": "qm set 100 --scsihw virtio-scsi-single" + driver + ", and edit /etc/pve/qemu-server/100.conf: the line 'scsi0: local:iso/x.iso,media=disk,cache=writeback' becomes 'scsi0: local:iso/x.iso,media=disk' (qm set refuses an ISO image without media=cdrom)"}},
		{name: "an ISO image as a CD-ROM", conf: "ostype: l26\nsata0: local:iso/OpenCore-v21.iso,media=cdrom,cache=unsafe\n", want: none},
		{name: "an .img on an image storage's images dir is a disk", conf: "ostype: l26\nscsihw: virtio-scsi-single\nscsi0: local:100/vm-100-disk-0.raw,cache=unsafe,discard=on\n",
			want: []string{"error cache-unsafe scsi0"}, fixes: map[string]string{"cache-unsafe scsi0": "qm set 100 --scsi0 local:100/vm-100-disk-0.raw,discard=on"}},
		// read-only drives and drive kinds
		{name: "ro=1 takes no guest writes", conf: "scsi0: " + lvmVol + ",ro=1,cache=unsafe\nvirtio0: local-lvm:vm-100-disk-1,ro=1,cache=writeback\n", want: none},
		{name: "a template's disks are read-only", conf: "template: 1\nscsi0: " + lvmVol + ",cache=unsafe\n", want: none},
		{name: "ro=0 is writable", conf: "scsi0: " + lvmVol + ",ro=0,cache=unsafe,discard=on\n", want: []string{"error cache-unsafe scsi0"}},
		{name: "efidisk on thin storage has no discard", conf: "bios: ovmf\nefidisk0: local-lvm:vm-100-disk-1,efitype=4m,pre-enrolled-keys=1,size=4M\n", want: none},
		{name: "tpmstate on thin storage", conf: "tpmstate0: local-lvm:vm-100-disk-2,size=4M,version=v2.0\n", want: none,
			notes: []string{"tpmstate0 is the TPM state volume"}},
		{name: "a cloud-init drive", conf: "ide2: local-lvm:vm-100-cloudinit,media=cdrom\n", want: none},
		{name: "a CD-ROM with cache=unsafe", conf: "ide2: local:iso/debian.iso,media=cdrom,cache=unsafe\n", want: none},
		// cache modes and where the data sits
		{name: "cache=unsafe", conf: "scsi0: " + lvmVol + ",cache=unsafe,discard=on\n",
			want: []string{"error cache-unsafe scsi0"}, fixes: map[string]string{"cache-unsafe scsi0": "qm set 100 --scsi0 local-lvm:vm-100-disk-0,discard=on"},
			msgs: map[string]string{"cache-unsafe scsi0": "node RAM (page cache; lab: 1,050,036 kB still dirty after fsync)"}},
		{name: "cache=writeback on iSCSI", conf: "scsi0: san:0.0.1.scsi-36001405abc,cache=writeback\n",
			want: []string{"warning cache-writeback scsi0"}, msgs: map[string]string{"cache-writeback scsi0": "node RAM"}},
		// Issue 26 #11: the guest's flushes are honoured; no UPS story.
		{name: "cache=writeback: what a crash loses", conf: "scsi0: " + lvmVol + ",cache=writeback,discard=on\n",
			want: []string{"warning cache-writeback scsi0"}, msgs: map[string]string{"cache-writeback scsi0": "the guest's flushes are honoured, so a host crash loses only what the guest had not flushed, as with a disk's own write cache"}},
		{name: "cache=writeback on a passthrough disk", conf: "scsi1: /dev/disk/by-id/ata-Samsung_SSD_870_S1,cache=writeback\n", want: []string{"warning cache-writeback scsi1"}},
		{name: "cache=writethrough and directsync are safe", conf: "scsi0: " + lvmVol + ",cache=writethrough,discard=on\nscsi1: local-lvm:vm-100-disk-1,cache=directsync,discard=on\n", want: none},
		// discard, with evidence per storage
		{name: "discard off on LVM-thin", conf: "scsi0: " + lvmVol + "\n",
			want: []string{"warning discard-ignored-on-thin scsi0"}, fixes: map[string]string{"discard-ignored-on-thin scsi0": "qm set 100 --scsi0 local-lvm:vm-100-disk-0,discard=on"},
			msgs: map[string]string{"discard-ignored-on-thin scsi0": "discard is off on lvmthin storage local-lvm: space the guest frees (fstrim) never returns to the pool (lab: fstrim reported 2.9 GiB, lvs unchanged at 50.79 %)"}},
		{name: "discard=ignore on sparse ZFS", conf: "scsi0: local-zfs:vm-100-disk-0,discard=ignore\n",
			want: []string{"warning discard-ignored-on-thin scsi0"}, msgs: map[string]string{"discard-ignored-on-thin scsi0": "zvol's referenced bytes stay; not measured here, no ZFS"}},
		{name: "ZFS without sparse reserves the zvol", conf: "scsi0: zfs-thick:vm-100-disk-0\n", want: none},
		{name: "discard off on Ceph", conf: "scsi0: ceph:vm-100-disk-0\n", want: []string{"warning discard-ignored-on-thin scsi0"}, msgs: map[string]string{"discard-ignored-on-thin scsi0": "rbd du"}},
		{name: "discard off on plain LVM", conf: "scsi0: thick:vm-100-disk-0\n", want: none},
		{name: "discard off on a qcow2 image", conf: "scsi0: local:100/vm-100-disk-0.qcow2\n", want: []string{"warning discard-ignored-on-thin scsi0"}, msgs: map[string]string{"discard-ignored-on-thin scsi0": "sparse image"}},
		{name: "discard off on a sparse raw image", conf: "scsi0: local:100/vm-100-disk-0.raw\n", images: map[string]bool{"var/lib/vz/images/100/vm-100-disk-0.raw": true},
			want: []string{"warning discard-ignored-on-thin scsi0"}},
		{name: "discard off on a fully written raw image: said, not judged", conf: "scsi0: local:100/vm-100-disk-0.raw\n", images: map[string]bool{"var/lib/vz/images/100/vm-100-disk-0.raw": false}, want: none,
			notes: []string{"scsi0: discard is off on raw image local:100/vm-100-disk-0.raw on dir storage local; discard-ignored-on-thin not judged: the image is fully allocated"}},
		{name: "discard off on a raw image that is not there: said, not judged", conf: "scsi0: local:100/vm-100-disk-0.raw\n", want: none,
			notes: []string{"scsi0: discard is off on raw image local:100/vm-100-disk-0.raw on dir storage local; discard-ignored-on-thin not judged: the image is not there on this node ("}},
		{name: "discard on, on a fully written raw image: nothing to say", conf: "scsi0: local:100/vm-100-disk-0.raw,discard=on\n", images: map[string]bool{"var/lib/vz/images/100/vm-100-disk-0.raw": false}, want: none},
		{name: "discard off on a raw image the node cannot see", conf: "scsi0: nas:100/vm-100-disk-0.raw\n", want: none,
			notes: []string{"scsi0: discard is off on raw image nas:100/vm-100-disk-0.raw on nfs storage nas; discard-ignored-on-thin not judged: the image is not there on this node"}},
		// limits, parse errors
		{name: "mbps with mbps_rd", conf: "scsi0: " + lvmVol + ",discard=on,mbps=10,mbps_rd=5\n",
			want: []string{"error limit-invalid scsi0"}, fixes: map[string]string{"limit-invalid scsi0": "qm set 100 --scsi0 local-lvm:vm-100-disk-0,discard=on,mbps_rd=5"},
			msgs: map[string]string{"limit-invalid scsi0": "mbps cannot be combined with mbps_rd: Proxmox rejects the whole disk line (Drive.pm parse_drive) and starts the VM without the disk"}},
		// Issue 26 #4: Drive.pm checks a burst against its rate for mbps
		// only (its iops check names miops*): qm set takes the line, and
		// QEMU refuses to start.
		{name: "iops_wr_max without iops_wr: QEMU refuses, not Proxmox", conf: "scsi0: " + lvmVol + ",discard=on,iops_wr_max=100\n",
			want: []string{"error limit-invalid scsi0"}, fixes: map[string]string{"limit-invalid scsi0": "qm set 100 --scsi0 local-lvm:vm-100-disk-0,discard=on"},
			msgs: map[string]string{"limit-invalid scsi0": `iops_wr_max requires iops_wr: qm set accepts the line (Drive.pm checks that pairing for mbps only), but QEMU refuses to start the VM: "bps_max/iops_max require corresponding bps/iops values"`}},
		{name: "mbps_wr_max without mbps_wr: Proxmox", conf: "scsi0: " + lvmVol + ",discard=on,mbps_wr_max=100\n",
			want: []string{"error limit-invalid scsi0"}, msgs: map[string]string{"limit-invalid scsi0": "mbps_wr_max requires mbps_wr: Proxmox rejects the whole disk line"}},
		{name: "a burst without its rate, a length without its burst", conf: "scsi0: " + lvmVol + ",discard=on,iops_max=100,bps_max_length=3\n",
			want: []string{"error limit-invalid scsi0"}, fixes: map[string]string{"limit-invalid scsi0": "qm set 100 --scsi0 local-lvm:vm-100-disk-0,discard=on"},
			msgs: map[string]string{"limit-invalid scsi0": "iops_max requires iops; bps_max_length requires mbps_max: Proxmox rejects the whole disk line"}},
		{name: "limits on a CD-ROM", conf: "ide2: local:iso/debian.iso,media=cdrom,iops_max=100\n", want: []string{"error limit-invalid ide2"}},
		{name: "limits on an empty CD-ROM drive: QEMU refuses them all the same", conf: "ide2: none,media=cdrom,iops_max=100\n",
			want: []string{"error limit-invalid ide2"}, fixes: map[string]string{"limit-invalid ide2": "qm set 100 --ide2 none,media=cdrom"},
			notes: []string{"ide2 is an empty CD-ROM drive"}},
		{name: "valid limits", conf: "scsi0: " + lvmVol + ",discard=on,mbps_wr=20,mbps_wr_max=40,iops_rd=500\n", want: none},
		{name: "iothread on SATA does not parse", conf: "sata0: " + lvmVol + ",iothread=1\n", want: []string{"error config-invalid sata0"}, msgs: map[string]string{"config-invalid sata0": "Proxmox ignores this disk"}},
		// Issue 32: a dropped line that names a disk takes the disk away.
		{name: "a disk line of no key: value shape is an error", conf: "scsi0 : " + lvmVol + ",discard=on\n", want: []string{"error config-invalid -"},
			msgs: map[string]string{"config-invalid ": `line 1: "scsi0 : local-lvm:vm-100-disk-0,discard="... (42 bytes) is not a ` + "`key: value`" + ` line: Proxmox drops it ("unable to parse config") and starts the VM without this disk`}},
		{name: "a disk key past its bus's last slot is an error", conf: "scsi31: " + lvmVol + ",discard=on\n", want: []string{"error config-invalid -"},
			msgs: map[string]string{"config-invalid ": `scsi31 is no disk slot`}},
		{name: "a storage storage.cfg lacks", conf: "scsi0: nostore:vm-100-disk-0\n", want: []string{"error config-invalid scsi0"}, msgs: map[string]string{"config-invalid scsi0": `storage "nostore"`}},
		{name: "ssd on VirtIO Block, with cache=unsafe: one fix", conf: "virtio0: " + lvmVol + ",ssd=1,cache=unsafe,discard=on\n",
			// Proxmox drops the line: the other rules judge the line the
			// fix restores, saying the VM lacks the disk until then.
			want: []string{"error cache-unsafe virtio0", "error ssd-unsupported virtio0"},
			fixes: map[string]string{"ssd-unsupported virtio0": "qm set 100 --virtio0 local-lvm:vm-100-disk-0,discard=on",
				"cache-unsafe virtio0": "qm set 100 --virtio0 local-lvm:vm-100-disk-0,discard=on"},
			msgs: map[string]string{"cache-unsafe virtio0": "once the line is fixed (today the VM starts without this disk): cache=unsafe"}},
		{name: "ssd on VirtIO Block alone", conf: "virtio0: " + lvmVol + ",discard=on,ssd=1\n",
			want: []string{"error ssd-unsupported virtio0"}, fixes: map[string]string{"ssd-unsupported virtio0": "qm set 100 --virtio0 local-lvm:vm-100-disk-0,discard=on"},
			msgs: map[string]string{"ssd-unsupported virtio0": "starts the VM without the disk"}},
		{name: "ssd on VirtIO Block without discard: the discard advice is for the line restored", conf: "boot: order=virtio0\nvirtio0: " + lvmVol + ",ssd=1\n",
			want:  []string{"error ssd-unsupported virtio0", "warning discard-ignored-on-thin virtio0"},
			fixes: map[string]string{"ssd-unsupported virtio0": "qm set 100 --virtio0 local-lvm:vm-100-disk-0,discard=on"},
			msgs: map[string]string{"ssd-unsupported virtio0": "without the disk, its boot disk: the guest does not boot",
				"discard-ignored-on-thin virtio0": "once the line is fixed (today the VM starts without this disk): discard is off"}},
		{name: "ssd on VirtIO Block with another error", conf: "virtio0: " + lvmVol + ",ssd=1,bogus=1\n", want: []string{"error config-invalid virtio0"}},
		// queues= over QEMU's maximum (measured: 1022 starts, 1023 does not)
		{name: "queues at QEMU's maximum", conf: "scsihw: virtio-scsi-single\nscsi0: " + lvmVol + ",discard=on,iothread=1,queues=1022\n", want: none},
		{name: "queues over QEMU's maximum", conf: "scsihw: virtio-scsi-single\nscsi0: " + lvmVol + ",discard=on,iothread=1,queues=1023\n",
			want:  []string{"error queues-invalid scsi0"},
			fixes: map[string]string{"queues-invalid scsi0": "qm set 100 --scsi0 local-lvm:vm-100-disk-0,discard=on,iothread=1"},
			msgs:  map[string]string{"queues-invalid scsi0": `QEMU refuses to start the VM: "Invalid number of queues (= 1023), must be a positive integer less than 1022."`}},
		{name: "queues past uint64", conf: "scsihw: virtio-scsi-single\nscsi0: " + lvmVol + ",discard=on,queues=99999999999999999999\n",
			want: []string{"error queues-invalid scsi0"}, msgs: map[string]string{"queues-invalid scsi0": `"Parameter 'num_queues' expects integer"`}},
		{name: "queues over the maximum, and discard off: one fix", conf: "scsihw: virtio-scsi-single\nscsi0: " + lvmVol + ",queues=4096\n",
			want:  []string{"error queues-invalid scsi0", "warning discard-ignored-on-thin scsi0"},
			fixes: map[string]string{"queues-invalid scsi0": "qm set 100 --scsi0 local-lvm:vm-100-disk-0,discard=on"}},
		{name: "queues is not passed without virtio-scsi-single", conf: "scsihw: virtio-scsi-pci\nscsi0: " + lvmVol + ",discard=on,queues=4096\n", want: none},
		// [PENDING] on a stopped VM: the next start's drive is judged
		{name: "delete: in [PENDING]", conf: "scsi0: " + lvmVol + ",discard=on\nscsi1: local-lvm:vm-100-disk-1,cache=unsafe\n[PENDING]\ndelete: scsi1\n", want: none},
		{name: "a [PENDING] change is judged", conf: "scsi0: " + lvmVol + ",discard=on\n[PENDING]\nscsi0: " + lvmVol + ",cache=unsafe,discard=on\n",
			want: []string{"error cache-unsafe scsi0"}, fixes: map[string]string{"cache-unsafe scsi0": "qm set 100 --scsi0 local-lvm:vm-100-disk-0,discard=on"}},
		{name: "a disk only [PENDING] adds", conf: "scsi0: " + lvmVol + ",discard=on\n[PENDING]\nscsi1: local-lvm:vm-100-disk-1\n", want: []string{"warning discard-ignored-on-thin scsi1"}},
		{name: "a snapshot section is history", conf: "scsi0: " + lvmVol + ",discard=on\n[before]\nscsi0: " + lvmVol + ",cache=unsafe\n", want: none},
		{name: "a stopped VM has nothing pending to restart", conf: "scsi0: " + lvmVol + ",discard=on\n[PENDING]\nmemory: 4096\n", want: none},
	}
}

func TestRules(t *testing.T) {
	for _, c := range ruleCases() {
		t.Run(c.name, func(t *testing.T) {
			tn := newNode(t)
			tn.conf(100, c.conf)
			for p, sparse := range c.images {
				tn.image(p, 1<<20, sparse)
			}
			v := tn.check(100, quietRunner(), Options{})
			if got := summary(v); !reflect.DeepEqual(got, c.want) {
				t.Fatalf("findings\n got %q\nwant %q\n%+v", got, c.want, v.Findings)
			}
			notesOK := len(v.Notes) == len(c.notes)
			for i := 0; notesOK && i < len(c.notes); i++ {
				notesOK = strings.Contains(v.Notes[i], c.notes[i])
			}
			if v.Err != nil || v.Running || !notesOK || len(v.NotChecked) != 0 {
				t.Errorf("err %v running %v notes %q (want %q) not checked %v", v.Err, v.Running, v.Notes, c.notes, v.NotChecked)
			}
			for _, f := range v.Findings {
				k := string(f.Code) + " " + f.Disk
				if want, ok := c.fixes[k]; ok && f.Fix != want {
					t.Errorf("%s fix\n got %q\nwant %q", k, f.Fix, want)
				}
				if want, ok := c.msgs[k]; ok && !strings.Contains(f.Message, want) {
					t.Errorf("%s message %q lacks %q", k, f.Message, want)
				}
				if f.Message == "" {
					t.Errorf("%s has no message", k)
				}
				checkCommand(t, f)
			}
		})
	}
}

// checkCommand: a fix that is one command is printed as that command, and
// every drive line in it parses for its key.
func checkCommand(t *testing.T, f Finding) {
	t.Helper()
	if f.Command == nil {
		return
	}
	cmd := shellJoin(f.Command)
	if !strings.HasPrefix(f.Fix, cmd) && !strings.HasPrefix(f.Fix, "with the VM stopped: "+cmd) {
		t.Errorf("%s: fix %q does not start with its command %q", f.Code, f.Fix, cmd)
	}
	if err := ValidateCommand(f.Command); err != nil {
		t.Errorf("%s: %v", f.Code, err)
	}
}

// TestMoveSlots: a move takes the last SCSI slot (scsi30); with none free
// the finding stays, without a command.
func TestMoveSlots(t *testing.T) {
	var conf strings.Builder
	conf.WriteString("ostype: l26\nscsihw: virtio-scsi-single\nsata0: local-lvm:vm-100-disk-99,discard=on\n")
	for i := 0; i < 30; i++ {
		conf.WriteString("scsi" + strconv.Itoa(i) + ": local-lvm:vm-100-disk-" + strconv.Itoa(i) + ",discard=on\n")
	}
	tn := newNode(t)
	tn.conf(100, conf.String())
	v := tn.check(100, quietRunner(), Options{})
	if f := find(v, CodeEmulatedController, "sata0"); f == nil || !strings.Contains(f.Fix, "--delete sata0 --scsi30 local-lvm:vm-100-disk-99,discard=on") {
		t.Errorf("%+v", v.Findings)
	}
	conf.WriteString("scsi30: local-lvm:vm-100-disk-30,discard=on\n")
	tn.conf(100, conf.String())
	v = tn.check(100, quietRunner(), Options{})
	if f := find(v, CodeEmulatedController, "sata0"); f == nil || f.Fix != "" || f.Command != nil || len(v.Findings) != 1 {
		t.Errorf("%+v", v.Findings)
	}
}
