//go:build record

package discard

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/alloc"
	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/node"
	"github.com/pvediskcheck/pvediskcheck/qmp"
	"github.com/pvediskcheck/pvediskcheck/sampler"
	"github.com/pvediskcheck/pvediskcheck/vm"
)

// vm370Config is the end-to-end guest's layout (cmd/pvediskcheck
// discard_e2e_test.go) with 64 MiB volumes.
const vm370Config = `agent: 1
scsihw: virtio-scsi-single
ostype: l26
scsi1: local-lvm:vm-370-disk-1,discard=on,size=64M
scsi2: local-lvm:vm-370-disk-2,discard=ignore,size=64M
sata1: local-lvm:vm-370-disk-3,discard=on,size=64M
virtio1: local-lvm:vm-370-disk-4,discard=on,size=64M
`

// TestRecordFixtures records testdata/vm370 and testdata/pci from real
// QEMU (testdata/README.md). It is built only with -tags record: go test -tags record -run TestRecordFixtures ./discard/
func TestRecordFixtures(t *testing.T) {
	recordVM370(t)
	recordPCI(t)
}

func recordVM370(t *testing.T) {
	n := fakenode.NewT(t)
	n.UseDoubles(t)
	for i := 1; i <= 4; i++ {
		n.MustVolume(t, "local-lvm", "vm-370-disk-"+itoa(i), 64<<20)
	}
	if err := n.WriteConfig(370, vm370Config); err != nil {
		t.Fatal(err)
	}
	fvm := n.MustStart(t, 370, fakenode.ArgvOptions{Blockdev: true, Extra: agentArgs(n, 370)})
	for _, d := range []string{"scsi1", "scsi2", "sata1", "virtio1"} {
		fvm.MustQemuIO(t, d, "write -P 0x5a 0 8M")
	}
	rec := proxyQMP(t, n.Paths.QMPSocket(370))
	ctx := context.Background()
	v, err := vm.Load(context.Background(), node.New(n.Paths, 0), 370)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.FetchLive(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	live := rec.take()
	ts := Targets(v, v.Disks)
	SetNodes(ts)
	nd := node.New(n.Paths, 5*time.Second)
	state := func() (sampler.Sample, map[string]alloc.Result) {
		s, err := counters(nd, v, ts).Take(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m := alloc.NewMeter(nd.Runner, nd.Timeout)
		res := map[string]alloc.Result{}
		for _, tg := range ts {
			if res[tg.Volume.VolName], err = m.Measure(ctx, tg.Volume); err != nil {
				t.Fatal(err)
			}
		}
		return s, res
	}
	_, allocA := state()
	statsA := rec.take()
	// The guest's stand-in: 4 MiB discarded at the start of every disk
	// (qemu-io's synchronous discard: counted at the protocol node only).
	for _, d := range []string{"scsi1", "scsi2", "sata1", "virtio1"} {
		fvm.MustQemuIO(t, d, "discard 0 4M")
	}
	rec.take() // the qemu-io exchanges
	_, allocB := state()
	statsB := rec.take()

	dir := filepath.Join("testdata", "vm370")
	must(t, os.MkdirAll(dir, 0o755))
	argv, err := vm.ProcCmdline(n.Paths, fvm.Pid)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(dir, "cmdline"), []byte(strings.Join(argv, "\x00")), 0o644))
	cfg, _ := os.ReadFile(n.Paths.VMConfig(370))
	must(t, os.WriteFile(filepath.Join(dir, "370.conf"), cfg, 0o644))
	st, _ := os.ReadFile(n.Paths.StorageCfg())
	must(t, os.WriteFile(filepath.Join(dir, "storage.cfg"), st, 0o644))
	writeJSON(t, filepath.Join(dir, "live.json"), live)
	writeJSON(t, filepath.Join(dir, "counters-before.json"), statsA)
	writeJSON(t, filepath.Join(dir, "counters-after.json"), statsB)
	writeJSON(t, filepath.Join(dir, "alloc-before.json"), allocA)
	writeJSON(t, filepath.Join(dir, "alloc-after.json"), allocB)
}

// recordPCI records query-pci for every SCSI controller Proxmox offers,
// with SATA and VirtIO Block disks beside them.
func recordPCI(t *testing.T) {
	dir := filepath.Join("testdata", "pci")
	must(t, os.MkdirAll(dir, 0o755))
	for _, hw := range []string{"virtio-scsi-single", "virtio-scsi-pci", "lsi", "lsi53c810", "megasas", "pvscsi"} {
		n := fakenode.NewT(t)
		cfg := "scsihw: " + hw + "\n"
		for _, k := range []string{"scsi0", "scsi1", "scsi2", "scsi7", "scsi8", "sata0", "sata5", "virtio0", "virtio3"} {
			vol := "371/vm-371-" + k + ".raw"
			n.MustVolume(t, "local", vol, 1<<20)
			cfg += k + ": local:" + vol + ",size=1M\n"
		}
		if err := n.WriteConfig(371, cfg); err != nil {
			t.Fatal(err)
		}
		fvm := n.MustStart(t, 371, fakenode.ArgvOptions{Blockdev: true})
		var pci string
		must(t, qmp.Do(context.Background(), n.Paths.QMPSocket(371), 5*time.Second, func(s qmp.Session) error {
			r, err := s.Exec("query-pci", nil)
			pci = r.Raw
			return err
		}))
		argv, err := vm.ProcCmdline(n.Paths, fvm.Pid)
		must(t, err)
		fvm.Stop()
		must(t, os.WriteFile(filepath.Join(dir, hw+".cmdline"), []byte(strings.Join(argv, "\x00")), 0o644))
		must(t, os.WriteFile(filepath.Join(dir, hw+".conf"), []byte(cfg), 0o644))
		must(t, os.WriteFile(filepath.Join(dir, hw+".json"), []byte(pci+"\n"), 0o644))
	}
}

// recorder logs every QMP command and its reply that pass its proxy.
type recorder struct {
	mu  sync.Mutex
	log []exchange
}

func (r *recorder) take() []exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.log
	r.log = nil
	var keep []exchange
	for _, e := range out {
		if e.Execute != "human-monitor-command" {
			keep = append(keep, e)
		}
	}
	return keep
}

// proxyQMP moves QEMU's socket aside and serves a logging proxy at its
// path: the tool talks to QEMU as before, and every exchange is recorded.
func proxyQMP(t *testing.T, path string) *recorder {
	real := path + ".real"
	must(t, os.Rename(path, real))
	l, err := net.Listen("unix", path)
	must(t, err)
	t.Cleanup(func() { l.Close() })
	rec := &recorder{}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go rec.serve(c, real)
		}
	}()
	return rec
}

func (r *recorder) serve(c net.Conn, real string) {
	defer c.Close()
	q, err := net.Dial("unix", real)
	if err != nil {
		return
	}
	defer q.Close()
	reqs := make(chan gjson.Result, 16)
	go func() {
		rd := bufio.NewReader(c)
		for {
			line, err := rd.ReadBytes('\n')
			if len(line) > 0 {
				reqs <- gjson.ParseBytes(line)
				_, _ = q.Write(line)
			}
			if err != nil {
				close(reqs)
				q.Close()
				return
			}
		}
	}()
	rd := bufio.NewReader(q)
	for {
		line, err := rd.ReadBytes('\n')
		if len(line) > 0 {
			if _, werr := c.Write(line); werr != nil {
				return
			}
			reply := gjson.ParseBytes(line)
			if !reply.Get("QMP").Exists() && !reply.Get("event").Exists() {
				req, ok := <-reqs
				if ok && req.Get("execute").String() != "qmp_capabilities" {
					e := exchange{Execute: req.Get("execute").String(), Reply: json.RawMessage(strings.TrimSpace(string(line)))}
					if a := req.Get("arguments"); a.Exists() {
						e.Arguments = json.RawMessage(a.Raw)
					}
					r.mu.Lock()
					r.log = append(r.log, e)
					r.mu.Unlock()
				}
			}
		}
		if err != nil {
			if err != io.EOF {
				return
			}
			return
		}
	}
}

func writeJSON(t *testing.T, p string, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	must(t, err)
	must(t, os.WriteFile(p, append(b, '\n'), 0o644))
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
