package vm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qemuserver"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// liveVM is a running VM with disks disks (alternately VirtIO SCSI single
// and VirtIO Block, each with a 10 MiB/s write limit), -blockdev, whose QMP
// socket is a fake answering as QEMU with greeting does.
func liveVM(t *testing.T, disks int, greeting string) (*VM, *qmptest.QEMU) {
	t.Helper()
	root := t.TempDir()
	p := node.NewPaths(root, filepath.Join(root, "proc"), filepath.Join(root, "sys"))
	write := func(rel, text string) {
		f := filepath.Join(root, rel)
		os.MkdirAll(filepath.Dir(f), 0o755)
		if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("etc/pve/storage.cfg", "dir: local\n\tpath /var/lib/vz\n\tcontent images\n")
	var cfg strings.Builder
	cfg.WriteString("scsihw: virtio-scsi-single\nmachine: pc-q35-10.1\n")
	var block, nodes, objs []string
	for i := 0; i < disks; i++ {
		id := fmt.Sprintf("scsi%d", i)
		qdev := id
		if i%2 == 1 {
			id = fmt.Sprintf("virtio%d", i)
			qdev = "/machine/peripheral/" + id + "/virtio-backend"
		}
		fmt.Fprintf(&cfg, "%s: local:100/vm-100-disk-%d.raw,mbps_wr=10,size=16M\n", id, i)
		block = append(block, fmt.Sprintf(`{"device": "", "qdev": %q, "inserted": {"node-name": "drive-%s", "cache": {"writeback": true}}}`, qdev, id))
		nodes = append(nodes, fmt.Sprintf(`{"node-name": "drive-%s", "drv": "throttle", "children": [{"child": "file", "node-name": "f%d"}]}, {"node-name": "f%d", "drv": "raw", "cache": {"direct": true, "no-flush": false}, "children": [{"child": "file", "node-name": "e%d"}]}, {"node-name": "e%d", "drv": "file", "cache": {"direct": true, "no-flush": false}}`, id, i, i, i, i))
	}
	conf, err := qemuserver.ParseConfig(strings.NewReader(cfg.String()), "100")
	if err != nil {
		t.Fatal(err)
	}
	st, _ := qemuserver.LoadStorages(p.StorageCfg())
	argv, err := fakenode.Argv("qemu-system-x86_64", conf, st, fakenode.ArgvOptions{VMID: 100, RunDir: "/var/run/qemu-server", Blockdev: true})
	if err != nil {
		t.Fatal(err)
	}
	write("etc/pve/qemu-server/100.conf", cfg.String())
	write("var/run/qemu-server/100.pid", "4242\n")
	write("proc/4242/cmdline", strings.Join(argv, "\x00")+"\x00")
	limits := `{"bps-write": 10485760, "bps-write-max-length": 1, "iops-total": 0}`
	q := qmptest.NewQEMU(t, func(cmd string, args gjson.Result) string {
		switch cmd {
		case "query-block":
			return qmptest.Return("[" + strings.Join(block, ",") + "]")
		case "query-named-block-nodes":
			return qmptest.Return("[" + strings.Join(nodes, ",") + "]")
		case "qom-get":
			if args.Get("property").String() == "write-cache" {
				return qmptest.Return(`"on"`)
			}
			return qmptest.Return(limits)
		case "qom-list-get":
			objs = objs[:0]
			for _, p := range args.Get("paths").Array() {
				if strings.HasPrefix(p.String(), "/objects/") {
					objs = append(objs, `{"properties": [{"name": "limits", "type": "ThrottleLimits", "value": `+limits+`}]}`)
				} else {
					objs = append(objs, `{"properties": [{"name": "write-cache", "type": "OnOffAuto", "value": "on"}]}`)
				}
			}
			return qmptest.Return("[" + strings.Join(objs, ",") + "]")
		}
		return qmptest.NotFound(cmd)
	})
	q.Greeting = greeting
	if err := os.Symlink(q.Sock(), p.QMPSocket(100)); err != nil {
		t.Fatal(err)
	}
	v, err := Load(context.Background(), node.New(p, 0), 100)
	if err != nil {
		t.Fatal(err)
	}
	if !v.Running || len(v.Disks) != disks {
		t.Fatalf("running %v, %d disks", v.Running, len(v.Disks))
	}
	return v, q
}

// FetchLive's commands per call (cache, check): constant in the number of
// disks on QEMU >= 10.1 (one qom-list-get for every write-cache and
// throttle group), one qom-get per object before; the same answer both ways.
func TestFetchLiveCommands(t *testing.T) {
	var results []string
	for _, tc := range []struct {
		greeting string
		disks    int
		commands int64
	}{
		// query-status, query-block, query-named-block-nodes, qom-list-get;
		// the guests negotiated their write caches (no x-query-virtio-status).
		{qmptest.Greeting111, 1, 4},
		{qmptest.Greeting111, 15, 4},
		// 7.2: a write-cache qom-get per VirtIO Block disk (QEMU names
		// only their BlockBackend by QOM path) and a limits qom-get per disk.
		{qmptest.Greeting72, 1, 3 + 1},
		{qmptest.Greeting72, 15, 3 + 7 + 15},
	} {
		v, q := liveVM(t, tc.disks, tc.greeting)
		if err := v.FetchLive(context.Background(), 2*time.Second); err != nil {
			t.Fatal(err)
		}
		if q.Commands() != tc.commands {
			t.Errorf("%.30s, %d disks: %d commands %v, want %d", tc.greeting, tc.disks, q.Commands(), q.Seen(), tc.commands)
		}
		var got []string
		for _, d := range v.Disks {
			got = append(got, fmt.Sprintf("%s wc=%q mode=%s limits=%s", d.ID, d.Live.WriteCacheProp, d.Effective().Mode, d.Live.Limits))
		}
		if tc.disks == 15 {
			results = append(results, strings.Join(got, "\n"))
		}
		if d := v.Disks[0]; d.Live.Limits.String() != "bps-write=10485760" || d.Effective().Mode != "none" {
			t.Errorf("%s: %+v", d.ID, d.Live)
		}
	}
	if len(results) != 2 || results[0] != results[1] {
		t.Errorf("11.1 and 7.2 disagree:\n%s\n--\n%s", results[0], results[1])
	}
	if !strings.Contains(results[0], `virtio1 wc="on"`) || !strings.Contains(results[0], `scsi0 wc=""`) {
		t.Errorf("write-cache read for the wrong devices:\n%s", results[0])
	}
}

// The build a VM runs comes with every exchange, from the greeting: the
// same commands with and without it.
func TestQEMUPackage(t *testing.T) {
	pve := `{"QMP": {"version": {"qemu": {"micro": 1, "minor": 2, "major": 10}, "package": "pve-qemu-kvm_10.2.1-1"}, "capabilities": []}}`
	for _, tc := range []struct{ greeting, want string }{
		{pve, "pve-qemu-kvm_10.2.1-1"},
		{qmptest.Greeting111, "Debian 1:11.1.3+ds-1~bpo13+1"},
		{`{"QMP": {"version": {"qemu": {"micro": 3, "minor": 1, "major": 11}}, "capabilities": []}}`, ""},
	} {
		v, q := liveVM(t, 2, tc.greeting)
		if v.QEMUPackage != "" {
			t.Fatalf("before any exchange: %q", v.QEMUPackage)
		}
		if err := v.FetchLive(context.Background(), 2*time.Second); err != nil {
			t.Fatal(err)
		}
		if v.QEMUPackage != tc.want || q.Commands() != 4 {
			t.Errorf("%.60s: package %q after %d commands %v, want %q after 4", tc.greeting, v.QEMUPackage, q.Commands(), q.Seen(), tc.want)
		}
		a, err := v.Ask(context.Background(), 2*time.Second, Query{Need: NeedStatus})
		if err != nil || a.Package != tc.want || v.QEMUPackage != tc.want {
			t.Errorf("Ask: %v, answer %q, VM %q", err, a.Package, v.QEMUPackage)
		}
	}
}
