package bench

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/internal/fakerun"
	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// lab370Storages: local-lvm of Lab 370's disks, local for an ISO and
// another lvm-thin pool (a neighbour there shares nothing with VM 370).
const lab370Storages = "dir: local\n\tpath /var/lib/vz\n\tcontent iso,images\n\nlvmthin: local-lvm\n\tthinpool data\n\tvgname pve\n\tcontent images\n\nlvmthin: other\n\tthinpool data2\n\tvgname pve2\n\tcontent images\n"

// argvOf is the command line qemu-server 9.2 generates for conf (QEMU
// 7.2.22, -blockdev).
func argvOf(t *testing.T, n *vmtest.Node, vmid int, conf string) []string {
	t.Helper()
	cfg, err := qemuserver.ParseConfig(strings.NewReader(conf), strconv.Itoa(vmid))
	if err != nil {
		t.Fatal(err)
	}
	st, err := qemuserver.LoadStorages(n.Paths.StorageCfg())
	if err != nil {
		t.Fatal(err)
	}
	argv, err := fakenode.Argv("qemu-system-x86_64", cfg, st, fakenode.ArgvOptions{VMID: vmid, RunDir: "/var/run/qemu-server", Blockdev: true, QEMUVersion: "7.2.22"})
	if err != nil {
		t.Fatal(err)
	}
	return argv
}

// startVM adds VM vmid to the node, running with pid (its config, pid
// file and command line).
func startVM(t *testing.T, n *vmtest.Node, vmid, pid int, conf string) {
	t.Helper()
	n.Write(t, n.Paths.VMConfig(vmid), conf)
	argv := argvOf(t, n, vmid, conf)
	if err := os.MkdirAll(n.Paths.ProcPid(pid), 0o755); err != nil {
		t.Fatal(err)
	}
	n.Write(t, filepath.Join(n.Paths.ProcPid(pid), "cmdline"), strings.Join(argv, "\x00")+"\x00")
	n.Write(t, n.Paths.PidFile(vmid), strconv.Itoa(pid)+"\n")
}

// lab370 is VM 370 running as recorded (query-pci, the guest agent's
// disks and filesystems: ext4 on scsi1's /dev/sdb at /mnt/x), its blank
// disks probed blank; extra config lines are appended.
type lab370 struct {
	n    *vmtest.Node
	v    *vm.VM
	g    *guest
	qemu *qmptest.QEMU
	run  *fakerun.Runner
	node node.Node
	conf string
}

func newLab370(t *testing.T, extra string) *lab370 {
	t.Helper()
	conf := fakenode.Lab370Config + "agent: 1\n" + extra
	n := vmtest.New(t, 370, conf, lab370Storages, nil)
	startVM(t, n, 370, vmtest.Pid, conf)
	pci, err := os.ReadFile("../guestdisk/testdata/query-pci-lab370.json")
	if err != nil {
		t.Fatal(err)
	}
	q := qmptest.NewQEMU(t, func(cmd string, _ gjson.Result) string {
		if cmd == "query-pci" {
			return qmptest.Return(gjson.GetBytes(pci, "@this").Raw)
		}
		return qmptest.NotFound(cmd)
	})
	n.Serve(t, q)
	g := &guest{disks: fixture(t, "disks.json"), fsinfo: fixture(t, "fsinfo-ext4.json"), head: fixture(t, "file-read-zero.json"),
		status: func(argv []string) string {
			if argv[0] == "sh" {
				return fixture(t, "probe-blank.status.json")
			}
			return ""
		}}
	a := newGuest(t, g)
	if err := os.Symlink(a.Path, n.Paths.QGASocket(370)); err != nil {
		t.Fatal(err)
	}
	l := &lab370{n: n, v: n.Load(t), g: g, qemu: q, run: &fakerun.Runner{}, conf: conf}
	l.node = l.run.Node(node.New(n.Paths, 0))
	return l
}

func (l *lab370) sel(ids ...string) []*vm.Disk {
	var out []*vm.Disk
	for _, id := range ids {
		if d := l.v.Disk(id); d != nil {
			out = append(out, d)
		}
	}
	return out
}

func (l *lab370) prepare(t *testing.T, req Request, ids ...string) ([]Disk, *NodeObserver, error) {
	t.Helper()
	return Prepare(context.Background(), l.node, l.v, l.sel(ids...), Method{SizeBytes: 128 << 20}, req)
}

// TestPrepare: each selected disk found in the guest through query-pci and
// the agent, its target placed (the mounted ext4 of scsi1 as a test file
// on it, the blank virtio1 and sata1 raw), its settings as it runs, the
// node's neighbours on the same storage; nothing is run on the node for
// lvm-thin disks (no zvol).
func TestPrepare(t *testing.T) {
	l := newLab370(t, "")
	// VM 371 runs with a disk on local-lvm and one on another pool, VM 374
	// on the other pool alone; VM 372
	// is stopped (a pid file left behind, no process); 373's pid file is
	// not a VM's; 370 itself is no neighbour.
	startVM(t, l.n, 371, 5000, "scsihw: virtio-scsi-single\nscsi0: local-lvm:vm-371-disk-0,iothread=1,size=8G\nscsi1: other:vm-371-disk-1,iothread=1,size=8G\n")
	startVM(t, l.n, 374, 5002, "scsihw: virtio-scsi-single\nscsi0: other:vm-374-disk-0,iothread=1,size=8G\n") // on another storage alone
	l.n.Write(t, l.n.Paths.VMConfig(372), "scsi0: local-lvm:vm-372-disk-0,size=8G\n")
	l.n.Write(t, l.n.Paths.PidFile(372), "5001\n")
	l.n.Write(t, filepath.Join(l.n.Paths.RunDir(), "qmeventd.pid"), "1\n")
	disks, obs, err := l.prepare(t, Request{}, "scsi1", "virtio1", "sata1")
	if err != nil {
		t.Fatal(err)
	}
	if len(disks) != 3 {
		t.Fatalf("%d disks", len(disks))
	}
	want := map[string][5]string{ // guest device, mode, path, settings, volume
		"scsi1":   {"/dev/sdb", string(File), "/mnt/x/" + TestDirName + "/" + TestFileName, "virtio-scsi-single scsi-hd cache none io_uring iothread", "local-lvm:vm-370-disk-1"},
		"virtio1": {"/dev/vda", string(Raw), "/dev/vda", "virtio-blk virtio-blk-pci cache none io_uring iothread", "local-lvm:vm-370-disk-2"},
		"sata1":   {"/dev/sdc", string(Raw), "/dev/sdc", "sata ide-hd cache none io_uring", "local-lvm:vm-370-disk-3"},
	}
	for _, d := range disks {
		w, ok := want[d.ID]
		s := d.Settings
		got := strings.Join([]string{s.Controller, s.Device, "cache", s.Cache, s.AIO}, " ")
		if s.IOThread {
			got += " iothread"
		}
		if !ok || d.Target.Device != w[0] || string(d.Target.Mode) != w[1] || d.Target.Path != w[2] || got != w[3] ||
			s.GuestDevice != w[0] || string(s.Mode) != w[1] || s.Path != w[2] || s.Storage != "local-lvm" || s.StorageType != "lvmthin" ||
			s.Volume != w[4] || s.QEMU != "7.2.22" {
			t.Errorf("%s: %+v %+v (settings %q)", d.ID, d.Target, s, got)
		}
		// A raw target on lvm-thin returns discarded space; a test file's
		// space is the guest filesystem's.
		if d.Facts.Thin != (d.Target.Mode == Raw) || d.Facts.AreaBytes != 128<<20 || d.Facts.Zvol != nil || d.Facts.Cache != l.v.Disk(d.ID).Running.Cache() {
			t.Errorf("%s facts %+v", d.ID, d.Facts)
		}
		if !reflect.DeepEqual(obs.Facts[d.ID], d.Facts) || obs.Volumes[d.ID].VolName != l.v.Disk(d.ID).Drive.VolName() || obs.Volumes[d.ID].Storage == nil {
			t.Errorf("%s: observer %+v %+v", d.ID, obs.Facts[d.ID], obs.Volumes[d.ID])
		}
	}
	if calls := l.run.Calls(); len(calls) != 0 {
		t.Errorf("ran %q on the node", calls)
	}
	if obs.NeighbourWhy != "" || len(obs.Neighbours) != 3 {
		t.Fatalf("neighbours %+v (%s)", obs.Neighbours, obs.NeighbourWhy)
	}
	for _, id := range []string{"scsi1", "virtio1", "sata1"} {
		nb := obs.Neighbours[id]
		if len(nb) != 1 || nb[0].VMID != 371 || !slices.Equal(nb[0].Disks, []string{"scsi0"}) || nb[0].VM == nil {
			t.Errorf("%s: neighbours %+v, want VM 371's scsi0 alone", id, nb)
		}
	}
	// The probe ran on the raw targets alone.
	var probed []string
	for _, a := range l.g.scripts(probeScript) {
		probed = append(probed, a[len(a)-1])
	}
	// The file target's folder checked, not made (Prepare writes nothing).
	if f := l.g.scripts(folderScript); len(f) != 1 || f[0][4] != "/mnt/x" || f[0][6] != "0" {
		t.Errorf("folder checks %q", f)
	}
	if len(probed) != 2 {
		t.Errorf("probed %q, want the two raw devices", probed)
	}
}

// What bench refuses before anything is written: --destroy of a disk not
// selected (its exact key only), --file-in of a path that is no mount
// point in the guest, a CD-ROM, EFI vars or TPM state disk; a VM whose QMP
// or agent does not answer.
func TestPrepareRefuses(t *testing.T) {
	extra := "ide2: local:iso/debian-12.iso,media=cdrom\nefidisk0: local-lvm:vm-370-disk-4,efitype=4m,size=4M\ntpmstate0: local-lvm:vm-370-disk-5,size=4M,version=v2.0\n"
	for _, c := range []struct {
		name string
		req  Request
		sel  []string
		code exitcode.Code
		want string
	}{
		{"--destroy another disk", Request{Destroy: []string{"scsi0"}}, []string{"scsi1", "virtio1"}, exitcode.Usage, `--destroy "scsi0": not one of the disks to measure (scsi1, virtio1): it takes a disk's exact key`},
		{"--destroy not the exact key", Request{Destroy: []string{"SCSI1"}}, []string{"scsi1"}, exitcode.Usage, `--destroy "SCSI1": not one of the disks to measure (scsi1)`},
		{"--file-in not mounted", Request{FileIn: []string{"/mnt/y"}}, []string{"scsi1"}, exitcode.Usage, "--file-in /mnt/y: not a mount point in the guest (guest-get-fsinfo)"},
		{"a CD-ROM", Request{}, []string{"virtio1", "ide2"}, exitcode.Usage, "ide2: not a running disk of VM 370 (bench measures disks, not CD-ROMs, EFI vars or TPM state)"},
		{"EFI vars", Request{}, []string{"efidisk0"}, exitcode.Usage, "efidisk0: not a running disk of VM 370"},
		{"TPM state", Request{}, []string{"tpmstate0"}, exitcode.Usage, "tpmstate0: not a running disk of VM 370"},
	} {
		l := newLab370(t, extra)
		if len(l.sel(c.sel...)) != len(c.sel) {
			t.Fatalf("%s: VM 370 has no %v", c.name, c.sel)
		}
		_, _, err := l.prepare(t, c.req, c.sel...)
		if exitcode.Of(err) != c.code || err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v (exit %d), want %d: %s", c.name, err, exitcode.Of(err), c.code, c.want)
		}
		if strings.HasPrefix(c.name, "--destroy") && l.qemu.Conns() != 0 {
			t.Errorf("%s: QMP asked before the request was checked", c.name)
		}
		if n := len(l.g.ran("sh")); n != 0 && c.name != "a CD-ROM" {
			t.Errorf("%s: %d probes before the refusal", c.name, n)
		}
	}
	// --destroy of a selected disk and --file-in of its mount point pass.
	l := newLab370(t, "")
	disks, _, err := l.prepare(t, Request{Destroy: []string{"virtio1"}, FileIn: []string{"/mnt/x"}}, "scsi1", "virtio1")
	if err != nil || len(disks) != 2 || disks[0].Target.Path != "/mnt/x/"+TestDirName+"/"+TestFileName || disks[1].Target.Mode != Raw {
		t.Errorf("%+v %v", disks, err)
	}

	// The test file and a tenth more must fit in the filesystem's free
	// space (total less used, guest-get-fsinfo: 223451136 B at /mnt/x).
	l = newLab370(t, "")
	if _, _, err := Prepare(context.Background(), l.node, l.v, l.sel("scsi1"), Method{SizeBytes: 203150000}, Request{}); exitcode.Of(err) != exitcode.Usage || !strings.Contains(err.Error(), "/mnt/x has 213 MiB free") {
		t.Errorf("too big a test file: %v", err)
	}

	// QEMU gone: unreachable, the agent never asked.
	l = newLab370(t, "")
	l.qemu.Kill()
	if _, _, err := l.prepare(t, Request{}, "scsi1"); exitcode.Of(err) != exitcode.Unreachable {
		t.Errorf("QMP gone: %v", err)
	}
	// The agent socket gone: unreachable, saying it is the agent.
	l = newLab370(t, "")
	if err := os.Remove(l.n.Paths.QGASocket(370)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := l.prepare(t, Request{}, "scsi1"); exitcode.Of(err) != exitcode.Unreachable || !strings.Contains(err.Error(), "VM 370: guest agent guest-get-disks") {
		t.Errorf("agent gone: %v", err)
	}
}

// Without /var/run/qemu-server the neighbours are not listed, and bench
// says why.
func TestNeighboursUnlisted(t *testing.T) {
	l := newLab370(t, "")
	if err := os.RemoveAll(l.n.Paths.RunDir()); err != nil {
		t.Fatal(err)
	}
	nb, why := neighbours(context.Background(), l.node, l.v, l.sel("scsi1"))
	if nb != nil || !strings.HasPrefix(why, "the node's running VMs are not listed (") || !strings.Contains(why, "no such file or directory") {
		t.Errorf("%v %q", nb, why)
	}
}
