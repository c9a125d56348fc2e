package threads

import (
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qemuserver"
)

type recording struct {
	dir       string
	pid       int
	cmdline   *qemuserver.Cmdline
	iothreads gjson.Result
	cpus      gjson.Result
	secs      float64 // between the two thread reads
}

func load(t *testing.T, gen string) recording {
	t.Helper()
	dir := filepath.Join("testdata", "lab370-"+gen)
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(read("pid"))))
	cl, err := qemuserver.ParseCmdline(qemuserver.SplitNUL(read("cmdline")))
	if err != nil {
		t.Fatal(err)
	}
	ta := gjson.GetBytes(read("times-a.json"), "threads_ns").Int()
	tb := gjson.GetBytes(read("times-b.json"), "threads_ns").Int()
	return recording{dir: dir, pid: pid, cmdline: cl, iothreads: gjson.ParseBytes(read("query-iothreads.json")),
		cpus: gjson.ParseBytes(read("query-cpus-fast.json")), secs: float64(tb-ta) / 1e9}
}

// The roles of VM 370's threads, from the recorded replies, on both
// command-line generations: each disk with an iothread maps to the thread
// QEMU names for it; sata1 has none (main loop).
func TestMapRecorded(t *testing.T) {
	for _, tc := range []struct {
		gen       string
		iothreads []Thread
		vcpus     []Thread
	}{
		{"blockdev", []Thread{{3610, IOThread, "iothread-virtio1"}, {3608, IOThread, "iothread-virtioscsi0"}, {3609, IOThread, "iothread-virtioscsi1"}},
			[]Thread{{3613, VCPU, "0"}}},
		{"drive", []Thread{{3757, IOThread, "iothread-virtio1"}, {3755, IOThread, "iothread-virtioscsi0"}, {3756, IOThread, "iothread-virtioscsi1"}},
			[]Thread{{3760, VCPU, "0"}}},
	} {
		t.Run(tc.gen, func(t *testing.T) {
			r := load(t, tc.gen)
			m := New(r.pid, r.iothreads, r.cpus)
			if !reflect.DeepEqual(m.IOThreads, tc.iothreads) || !reflect.DeepEqual(m.VCPUs, tc.vcpus) {
				t.Errorf("map = %+v %+v", m.IOThreads, m.VCPUs)
			}
			if got := m.MainLoop(); got != (Thread{TID: r.pid, Role: MainLoop}) {
				t.Errorf("main loop = %+v", got)
			}
			got := m.DiskIOThreads(r.cmdline, []string{"sata1", "scsi0", "scsi1", "virtio1"})
			want := map[string]string{"scsi0": "iothread-virtioscsi0", "scsi1": "iothread-virtioscsi1", "virtio1": "iothread-virtio1"}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("DiskIOThreads = %v, want %v", got, want)
			}
			wantTIDs := []int{r.pid, tc.iothreads[0].TID, tc.iothreads[1].TID, tc.iothreads[2].TID, tc.vcpus[0].TID}
			if got := m.TIDs(); !reflect.DeepEqual(got, wantTIDs) {
				t.Errorf("TIDs = %v, want %v", got, wantTIDs)
			}
		})
	}
}

// Disks hot-plugged after the start are on no command line: qemu-server's
// iothread names are used, but only for iothreads QEMU has.
func TestDiskIOThreadsHotplug(t *testing.T) {
	m := New(100, gjson.Parse(`[{"id": "iothread-virtio3", "thread-id": 201}, {"id": "iothread-virtioscsi5", "thread-id": 202},
		{"id": "iothread-virtioscsi1", "thread-id": 203}]`), gjson.Parse(`[]`))
	cl := &qemuserver.Cmdline{Devices: map[string]map[string]string{
		// scsi1 on a controller without iothread: the controller's word counts,
		// the naming fallback applies only when the line says nothing.
		"scsi1":    {"driver": "scsi-hd", "bus": "scsihw0.0"},
		"scsihw0":  {"driver": "virtio-scsi-pci"},
		"virtio2":  {"driver": "virtio-blk-pci"},
		"scsi7":    {"driver": "scsi-hd", "bus": "virtioscsi7.0"},
		"virtio9x": {"driver": "virtio-blk-pci", "iothread": "iothread-gone"},
		// On a node the device line has its PCI address: the bus is no
		// SCSI controller, and the device's own iothread stands.
		"virtio3": {"driver": "virtio-blk-pci", "iothread": "iothread-virtio3", "bus": "pci.0", "addr": "0xa"},
		"pci":     {"driver": "pci-bridge", "iothread": "iothread-virtioscsi1"},
	}}
	got := m.DiskIOThreads(cl, []string{"virtio3", "scsi5", "scsi6", "virtio2", "sata0", "scsi7", "virtio9x", "scsi1"})
	want := map[string]string{"virtio3": "iothread-virtio3", "scsi5": "iothread-virtioscsi5", "scsi1": "iothread-virtioscsi1"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("DiskIOThreads = %v, want %v", got, want)
	}
	if got := m.DiskIOThreads(nil, []string{"virtio3", "ide0"}); !reflect.DeepEqual(got, map[string]string{"virtio3": "iothread-virtio3"}) {
		t.Errorf("without a command line: %v", got)
	}
	if _, ok := m.IOThread("iothread-nope"); ok {
		t.Error("unknown iothread found")
	}
}

func TestParseSkipsAndSorts(t *testing.T) {
	// A thread id of 0 (QEMU reports none, e.g. a CPU not yet realized) is
	// no thread; vCPUs come in index order, whatever the reply's order.
	io := ParseIOThreads(gjson.Parse(`[{"id": "b", "thread-id": 12}, {"id": "a", "thread-id": 0}, {"id": "a2", "thread-id": 11}]`))
	if !reflect.DeepEqual(io, []Thread{{11, IOThread, "a2"}, {12, IOThread, "b"}}) {
		t.Errorf("iothreads = %+v", io)
	}
	cpus := ParseCPUs(gjson.Parse(`[{"cpu-index": 10, "thread-id": 30}, {"cpu-index": 2, "thread-id": 31}, {"cpu-index": 1, "thread-id": -1}, {"cpu-index": 3, "thread-id": 0}, {"cpu-index": 0, "thread-id": 33}]`))
	if !reflect.DeepEqual(cpus, []Thread{{33, VCPU, "0"}, {31, VCPU, "2"}, {30, VCPU, "10"}}) {
		t.Errorf("vcpus = %+v", cpus)
	}
}
