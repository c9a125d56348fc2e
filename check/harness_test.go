package check

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/internal/fakerun"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/pvediskcheck/pvediskcheck/thinpool"
)

// The test node: a root tree the tool reads (configs, storage.cfg, pid
// files, proc/<pid>/cmdline, QMP sockets), with no root privileges and no
// QEMU: running VMs are recorded command lines and recorded QMP replies.

// storageCfg declares one storage of every type the rules tell apart.
const storageCfg = `dir: local
	path /var/lib/vz
	content images,iso

lvmthin: local-lvm
	vgname pve
	thinpool data
	content images

lvm: thick
	vgname vg0
	content images

zfspool: local-zfs
	pool rpool/data
	sparse 1
	content images

zfspool: zfs-thick
	pool rpool/thick
	content images

rbd: ceph
	pool cpool
	content images

rbd: kceph
	pool cpool
	krbd 1
	content images

cifs: smb
	path /mnt/pve/smb
	server 192.0.2.1
	share vms
	content images

nfs: nas
	path /mnt/pve/nas
	server 192.0.2.2
	export /vms
	content images

iscsi: san
	portal 192.0.2.3
	target iqn.2025-01.test:san
	content images

btrfs: bt
	path /butter
	content images
`

type tnode struct {
	t    *testing.T
	root string
	n    node.Node
	// greeting, when set, is what the VMs' fake QEMUs greet with (the
	// build they state); qmptest's 7.2 greeting otherwise.
	greeting string
}

func newNode(t *testing.T) *tnode {
	t.Helper()
	// Short: a QMP socket path below it must fit in 108 bytes.
	root, err := os.MkdirTemp("", "chk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	tn := &tnode{t: t, root: root, n: node.New(node.NewPaths(root, "", ""), 2*time.Second)}
	tn.write("etc/pve/storage.cfg", storageCfg)
	// The hyperconverged Ceph cluster's config: its fsid names krbd devices.
	tn.write("etc/pve/ceph.conf", "[global]\n\tfsid = 2c6a1e6a-4bd5-4c1f-a9e8-3e0e8f54c1aa\n\tmon_host = 10.0.0.1\n")
	tn.mkdir("etc/pve/qemu-server")
	return tn
}

func (tn *tnode) mkdir(p string) {
	if err := os.MkdirAll(filepath.Join(tn.root, p), 0o755); err != nil {
		tn.t.Fatal(err)
	}
}

func (tn *tnode) write(p, body string) {
	tn.t.Helper()
	full := filepath.Join(tn.root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		tn.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
		tn.t.Fatal(err)
	}
}

func (tn *tnode) conf(vmid int, text string) {
	tn.write("etc/pve/qemu-server/"+strconv.Itoa(vmid)+".conf", text)
}

// image creates a volume file below the root: sparse (nothing allocated)
// or with every byte written.
func (tn *tnode) image(p string, size int64, sparse bool) {
	tn.t.Helper()
	full := filepath.Join(tn.root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		tn.t.Fatal(err)
	}
	if sparse {
		if err := os.WriteFile(full, nil, 0o644); err != nil {
			tn.t.Fatal(err)
		}
		if err := os.Truncate(full, size); err != nil {
			tn.t.Fatal(err)
		}
		return
	}
	if err := os.WriteFile(full, []byte(strings.Repeat("\x5a", int(size))), 0o644); err != nil {
		tn.t.Fatal(err)
	}
}

// running makes VM vmid run with argv: its pid file, /proc/<pid>/cmdline
// and /proc/<pid>/root (the host's / for the paths QEMU opens).
func (tn *tnode) running(vmid int, argv []string) {
	tn.t.Helper()
	pid := 4000 + vmid
	tn.write("var/run/qemu-server/"+strconv.Itoa(vmid)+".pid", strconv.Itoa(pid)+"\n")
	tn.write("proc/"+strconv.Itoa(pid)+"/cmdline", strings.Join(argv, "\x00")+"\x00")
	if err := os.Symlink("/", filepath.Join(tn.root, "proc", strconv.Itoa(pid), "root")); err != nil && !os.IsExist(err) {
		tn.t.Fatal(err)
	}
}

// qmp serves the VM's QMP socket from handler.
func (tn *tnode) qmp(vmid int, handler func(cmd string, args gjson.Result) string) *qmptest.QEMU {
	tn.t.Helper()
	q := qmptest.NewQEMU(tn.t, handler)
	q.Greeting = tn.greeting
	sock := tn.n.Paths.QMPSocket(vmid)
	tn.mkdir("var/run/qemu-server")
	if err := os.Symlink(q.Sock(), sock); err != nil {
		tn.t.Fatal(err)
	}
	return q
}

// recording is one run recorded by cmd/pvediskcheck TestCheckIOError
// (testdata/README.md).
type recording struct {
	Root       string                     `json:"root"`
	Config     string                     `json:"config"`
	StorageCfg string                     `json:"storage_cfg"`
	Cmdline    []string                   `json:"cmdline"`
	Replies    map[string]json.RawMessage `json:"replies"`
	QOM        map[string]json.RawMessage `json:"qom_get_write_cache"`
}

func loadRecording(t *testing.T, name string) recording {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var r recording
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	// One line per reply, as QEMU sends them (the file is indented).
	for _, m := range []map[string]json.RawMessage{r.Replies, r.QOM} {
		for k, v := range m {
			var buf bytes.Buffer
			if err := json.Compact(&buf, v); err != nil {
				t.Fatal(err)
			}
			m[k] = buf.Bytes()
		}
	}
	return r
}

// replay makes the recorded VM run on this node: its config and
// storage.cfg with the recording's root replaced by this node's, its
// command line, and a QMP socket answering what QEMU answered. config, when
// not "", replaces the recorded config.
func (tn *tnode) replay(t *testing.T, rec recording, vmid int, config string) *qmptest.QEMU {
	t.Helper()
	if config == "" {
		config = rec.Config
	}
	fix := func(s string) string { return strings.ReplaceAll(s, rec.Root, tn.root) }
	tn.conf(vmid, fix(config))
	tn.write("etc/pve/storage.cfg", fix(rec.StorageCfg)+"\n"+storageCfg)
	argv := make([]string, len(rec.Cmdline))
	for i, a := range rec.Cmdline {
		argv[i] = fix(a)
	}
	tn.running(vmid, argv)
	return tn.qmp(vmid, func(cmd string, args gjson.Result) string {
		if cmd == "qom-get" {
			if r, ok := rec.QOM[args.Get("path").String()]; ok && args.Get("property").String() == "write-cache" {
				return qmptest.Return(string(r))
			}
			return qmptest.Fail("GenericError", "Property '"+args.Get("property").String()+"' not found")
		}
		if r, ok := rec.Replies[cmd]; ok {
			return qmptest.Return(string(r))
		}
		return qmptest.NotFound(cmd)
	})
}

// lvsRow is one thin pool or thin volume row of lvsJSON.
type lvsRow struct {
	name, origin   string
	size           int64
	data, metadata string // "" when inactive
}

// lvsJSON writes `lvs --reportformat json --units b --nosuffix -o
// lvm.Fields` output for VG pve with pool data (format-derived: the layout
// of lvm/testdata/format-lab370-active.json, whose rows lvm2 2.03.16
// printed for a real VG).
func lvsJSON(pool lvsRow, vols ...lvsRow) string {
	rows := []string{fmt.Sprintf(`{"vg_name":"pve", "lv_name":"data", "lv_size":"%d", "lv_attr":"twi-aotz--", "pool_lv":"", "origin":"", "data_percent":"%s", "metadata_percent":"%s", "lv_metadata_size":"155189248", "chunk_size":"65536", "discards":"passdown"}`,
		pool.size, pool.data, pool.metadata)}
	for _, v := range vols {
		attr := "Vwi-aotz--"
		if v.origin != "" {
			attr = "Vri---tz-k"
		}
		rows = append(rows, fmt.Sprintf(`{"vg_name":"pve", "lv_name":"%s", "lv_size":"%d", "lv_attr":"%s", "pool_lv":"data", "origin":"%s", "data_percent":"%s", "metadata_percent":"", "lv_metadata_size":"", "chunk_size":"0", "discards":"passdown"}`,
			v.name, v.size, attr, v.origin, v.data))
	}
	return `{"report": [{"lv": [` + strings.Join(rows, ",\n") + `]}]}`
}

// quietRunner reports healthy pools: local-lvm 1 TiB at 10 % with one
// 32 GiB volume, the zfspools with 100 GiB free.
func quietRunner() *fakerun.Runner {
	return &fakerun.Runner{Out: map[string]string{
		"lvs":                   lvsJSON(lvsRow{size: 1 << 40, data: "10.00", metadata: "1.00"}, lvsRow{name: "vm-100-disk-0", size: 32 << 30, data: "20.00"}),
		"zfs get rpool/data":    "used\t1073741824\navailable\t107374182400\n",
		"zfs list rpool/data":   "",
		"zfs get rpool/thick":   "used\t1073741824\navailable\t107374182400\n",
		"zfs list rpool/thick":  "",
		"qm showcmd":            "",
		"zfs list rpool/other":  "",
		"zfs get rpool/other":   "used\t1\navailable\t1\n",
		"zfs list rpool/unused": "",
	}, Do: map[string]func([]string) ([]byte, error){"zfs get name,property,value": zvolProps(nil)}}
}

// recordedZvol is storage/zfs's recorded sparse zvol (pool/test), each
// dataset answered with its lines under its own name.
var recordedZvol = func() string {
	b, err := os.ReadFile("../storage/zfs/testdata/get-sparse-512.txt")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// zvolProps answers storage/zfs's one call (zfs get -Hp -o
// name,property,value PROPS DATASET...) as zfs does: each dataset's lines
// in the order asked, with its sync from sync (not named: standard;
// "gone": zfs fails as for a dataset that does not exist).
func zvolProps(sync map[string]string) func([]string) ([]byte, error) {
	return fakerun.Zvols(recordedZvol, "pool/test", sync)
}

// check checks VM vmid on the node with runner r (lvs, zfs, qm showcmd).
func (tn *tnode) check(vmid int, r *fakerun.Runner, o Options) VMResult {
	tn.t.Helper()
	return VM(context.Background(), r.Node(tn.n), vmid, o, thinpool.NewCache(r))
}

// summary lists findings as "severity code disk", sorted: the exact set a
// case must produce.
func summary(v VMResult) []string {
	out := []string{}
	for _, f := range v.Findings {
		disk := f.Disk
		if disk == "" {
			disk = "-"
		}
		out = append(out, string(f.Severity)+" "+string(f.Code)+" "+disk)
	}
	sort.Strings(out)
	return out
}

func find(v VMResult, code Code, disk string) *Finding {
	for i := range v.Findings {
		if v.Findings[i].Code == code && v.Findings[i].Disk == disk {
			return &v.Findings[i]
		}
	}
	return nil
}
