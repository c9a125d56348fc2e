package queues

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/internal/vmtest"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// qemu72 answers qom-get as QEMU 7.2 answered it here (-smp 2,
// virtio-blk-pci without num-queues, virtio-scsi-pci with num_queues=3
// and one without; the property asked of a scsi-hd device): 2, 3, 2 and
// GenericError "Property 'scsi-hd.num_queues' not found".
func qemu72(cmd string, args gjson.Result) string {
	if cmd != "qom-get" {
		return qmptest.NotFound(cmd)
	}
	switch args.Get("path").String() + " " + args.Get("property").String() {
	case "/machine/peripheral/virtio0 num-queues", "/machine/peripheral/scsihw0 num_queues":
		return qmptest.Return("2")
	case "/machine/peripheral/virtioscsi0 num_queues":
		return qmptest.Return("3")
	}
	return qmptest.Fail("GenericError", "Property '"+strings.TrimPrefix(args.Get("path").String(), "/machine/peripheral/")+"."+args.Get("property").String()+"' not found")
}

func everyType(t *testing.T) string {
	b, err := os.ReadFile("../storage/testdata/every-type.cfg")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func load(t *testing.T, conf string, argv []string, handler func(string, gjson.Result) string) (*vm.VM, *qmptest.QEMU) {
	n := vmtest.New(t, 100, conf, everyType(t), argv)
	var q *qmptest.QEMU
	if handler != nil {
		q = qmptest.NewQEMU(t, handler)
		n.Serve(t, q)
	}
	return n.Load(t), q
}

var argv = []string{"/usr/bin/kvm", "-id", "100", "-pidfile", "/var/run/qemu-server/100.pid", "-smp", "2",
	"-device", "virtio-scsi-pci,id=virtioscsi0,bus=pci.3,addr=0x1,num_queues=3",
	"-drive", "file=/dev/pve/vm-100-disk-0,if=none,id=drive-scsi0,format=raw,cache=none,aio=io_uring,detect-zeroes=on",
	"-device", "scsi-hd,bus=virtioscsi0.0,channel=0,scsi-id=0,lun=0,drive=drive-scsi0,id=scsi0",
	"-drive", "file=/dev/pve/vm-100-disk-1,if=none,id=drive-virtio0,format=raw,cache=none,aio=io_uring,detect-zeroes=on",
	"-device", "virtio-blk-pci,drive=drive-virtio0,id=virtio0,bus=pci.0,addr=0xa",
	"-drive", "file=/dev/pve/vm-100-disk-2,if=none,id=drive-sata0,format=raw,cache=none,aio=io_uring,detect-zeroes=on",
	"-device", "ide-hd,bus=ahci0.0,drive=drive-sata0,id=sata0",
}

const conf = "scsihw: virtio-scsi-single\nscsi0: local-lvm:vm-100-disk-0,queues=4\nvirtio0: local-lvm:vm-100-disk-1\nsata0: local-lvm:vm-100-disk-2\n"

func TestForVM(t *testing.T) {
	v, q := load(t, conf, argv, qemu72)
	got := ForVM(context.Background(), v, v.Disks, 2*time.Second, true)
	if q.Conns() != 1 {
		t.Errorf("%d exchanges, want 1", q.Conns())
	}
	s0, v0 := got["scsi0"], got["virtio0"]
	if s0 == nil || *s0.Configured != 4 || !s0.Applied || *s0.CommandLine != 3 || *s0.Running != 3 || s0.Object != "/machine/peripheral/virtioscsi0" || s0.Property != "num_queues" || !s0.Shown() {
		t.Errorf("scsi0 %+v", s0)
	}
	if want := "queues: running 3 (qom-get virtioscsi0 num_queues), command line 3, config 4"; s0.Line() != want {
		t.Errorf("%q\nwant %q", s0.Line(), want)
	}
	if v0 == nil || v0.Configured != nil || v0.CommandLine != nil || *v0.Running != 2 || !v0.Shown() {
		t.Errorf("virtio0 %+v", v0)
	}
	if want := "queues: running 2 (qom-get virtio0 num-queues), command line default (one per vCPU), config not set"; v0.Line() != want {
		t.Errorf("%q", v0.Line())
	}
	if got["sata0"] != nil {
		t.Errorf("sata0 has no virtqueues: %+v", got["sata0"])
	}
	// The config's 4 against the command line's 3 is drift.
	if d := v.Disk("scsi0"); !strings.Contains(strings.Join(diff(d), "; "), "queues: config 4, running 3") {
		t.Errorf("drift %q", diff(d))
	}
}

func TestForVMEdges(t *testing.T) {
	t.Run("one queue, nothing set: not shown", func(t *testing.T) {
		v, _ := load(t, "virtio0: local-lvm:vm-100-disk-1\n", argv, func(cmd string, _ gjson.Result) string { return qmptest.Return("1") })
		if c := ForVM(context.Background(), v, v.Disks, 2*time.Second, true)["virtio0"]; c == nil || *c.Running != 1 || c.Shown() {
			t.Errorf("%+v", c)
		}
	})
	t.Run("queues= under virtio-scsi-pci: ignored by qemu-server, said", func(t *testing.T) {
		v, _ := load(t, "scsihw: virtio-scsi-pci\nscsi0: local-lvm:vm-100-disk-0,queues=4\n", nil, nil)
		c := ForVM(context.Background(), v, v.Disks, 2*time.Second, true)["scsi0"]
		if c == nil || c.Applied || c.Running != nil || c.Object != "" || !c.Shown() || !strings.HasSuffix(c.Line(), "qemu-server ignores queues= here: it sets num_queues only for SCSI disks under scsihw virtio-scsi-single") {
			t.Errorf("%+v %q", c, c.Line())
		}
	})
	t.Run("QMP not asked (the caller's exchange failed)", func(t *testing.T) {
		v, q := load(t, conf, argv, qemu72)
		c := ForVM(context.Background(), v, v.Disks, 2*time.Second, false)["scsi0"]
		if q.Conns() != 0 || c.Running != nil || c.Unread != "QMP not read" || !strings.HasPrefix(c.Line(), "queues: running unknown (QMP not read), command line 3") {
			t.Errorf("%d conns %+v", q.Conns(), c)
		}
	})
	t.Run("QEMU refuses the property", func(t *testing.T) {
		v, _ := load(t, conf, argv, func(cmd string, args gjson.Result) string {
			return qmptest.Fail("GenericError", "Property 'virtio-blk-pci.num-queues' not found")
		})
		c := ForVM(context.Background(), v, v.Disks, 2*time.Second, true)["virtio0"]
		if c.Running != nil || !strings.Contains(c.Unread, "Property 'virtio-blk-pci.num-queues' not found") || c.Shown() {
			t.Errorf("%+v", c)
		}
	})
	t.Run("QEMU 11.1: one qom-list-get for every object", func(t *testing.T) {
		q := qmptest.NewQEMU(t, func(cmd string, args gjson.Result) string {
			if cmd != "qom-list-get" {
				return qmptest.NotFound(cmd)
			}
			var objs []string
			for _, p := range args.Get("paths").Array() {
				n := "3"
				if strings.HasSuffix(p.String(), "virtio0") {
					n = `2`
				}
				prop := "num_queues"
				if strings.HasSuffix(p.String(), "virtio0") {
					prop = "num-queues"
				}
				objs = append(objs, `{"properties": [{"name": "`+prop+`", "type": "uint32", "value": `+n+`}]}`)
			}
			return qmptest.Return("[" + strings.Join(objs, ",") + "]")
		})
		q.Greeting = qmptest.Greeting111
		n := vmtest.New(t, 100, conf, everyType(t), argv)
		n.Serve(t, q)
		v := n.Load(t)
		got := ForVM(context.Background(), v, v.Disks, 2*time.Second, true)
		if *got["scsi0"].Running != 3 || *got["virtio0"].Running != 2 || strings.Join(q.Seen(), " ") != "qom-list-get" {
			t.Errorf("%+v %+v %v", got["scsi0"], got["virtio0"], q.Seen())
		}
	})
}

func diff(d *vm.Disk) []string { return qemuserver.Diff(*d.Configured, *d.Running) }

// QEMU exits between the caller's exchange and this one: every disk with
// a running count to read says why it has none and keeps the config's and
// command line's; a disk without virtqueues (scsi0 on an emulated LSI
// controller, whose queues= qemu-server ignores) has nothing to read and
// no reason.
func TestForVMQMPGone(t *testing.T) {
	lsi := []string{"/usr/bin/kvm", "-id", "100", "-pidfile", "/var/run/qemu-server/100.pid", "-smp", "2",
		"-device", "lsi,id=scsihw0,bus=pci.0,addr=0x5",
		"-drive", "file=/dev/pve/vm-100-disk-0,if=none,id=drive-scsi0,format=raw,cache=none,aio=io_uring,detect-zeroes=on",
		"-device", "scsi-hd,bus=scsihw0.0,scsi-id=0,drive=drive-scsi0,id=scsi0",
		"-drive", "file=/dev/pve/vm-100-disk-1,if=none,id=drive-virtio0,format=raw,cache=none,aio=io_uring,detect-zeroes=on",
		"-device", "virtio-blk-pci,drive=drive-virtio0,id=virtio0,bus=pci.0,addr=0xa,num-queues=2",
	}
	v, q := load(t, "scsihw: lsi\nscsi0: local-lvm:vm-100-disk-0,queues=4\nvirtio0: local-lvm:vm-100-disk-1\n", lsi, qemu72)
	q.Kill()
	got := ForVM(context.Background(), v, v.Disks, 2*time.Second, true)
	s0, v0 := got["scsi0"], got["virtio0"]
	if s0 == nil || s0.Object != "" || s0.Unread != "" || s0.Running != nil || *s0.Configured != 4 || s0.Applied {
		t.Errorf("scsi0 %+v", s0)
	}
	if v0 == nil || v0.Running != nil || !strings.HasPrefix(v0.Unread, "QMP: ") || len(v0.Unread) <= len("QMP: ") || *v0.CommandLine != 2 {
		t.Errorf("virtio0 %+v", v0)
	}
	if !strings.HasPrefix(v0.Line(), "queues: running unknown (QMP: ") || !strings.HasSuffix(v0.Line(), "), command line 2, config not set") {
		t.Errorf("%q", v0.Line())
	}
}
