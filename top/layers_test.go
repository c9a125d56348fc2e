package top

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/internal/fakenode"
	"github.com/pvediskcheck/pvediskcheck/layers"
	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

// top --layers asks the guest agent for its diskstats once per sample, in
// one exchange, once the agent has named the disks' devices; the guest
// layer of the disk it named is read, of the others said unknown.
func TestMonitorLayersGuestAgent(t *testing.T) {
	n := newFakeNode(t)
	r := recording(t, "blockdev")
	v := n.addRecorded(r, 370)
	n.write("etc/pve/qemu-server/370.conf", fakenode.Lab370Config+"agent: 1\n")
	pci, err := os.ReadFile("../guestdisk/testdata/query-pci-lab370.json")
	if err != nil {
		t.Fatal(err)
	}
	v.set("query-pci", string(pci))
	a := qmptest.NewAgent(t)
	lookup := qmptest.AgentReplies(map[string]string{
		"guest-get-disks":  `[{"name": "/dev/sdb", "partition": false, "address": {"bus-type": "scsi", "bus": 0, "target": 0, "unit": 1, "pci-controller": {"domain": 0, "bus": 0, "slot": 3, "function": 0}, "dev": "/dev/sdb"}}]`,
		"guest-get-fsinfo": `[]`,
		// The freeze state, asked once per --stall-after.
		"guest-fsfreeze-status": `"thawed"`,
	})
	var reads atomic.Int64
	a.Handle = func(w net.Conn, cmd string, req gjson.Result) {
		switch cmd {
		case "guest-file-open":
			fmt.Fprint(w, `{"return": 7}`+"\n")
		case "guest-file-read":
			// sdb completes 100 requests of 5 ms each between reads.
			k := reads.Add(1)
			text := fmt.Sprintf("   8      16 sdb %d 0 0 %d %d 0 0 %d 2 0 0 0 0 0 0 0 0\n", 50*k, 250*k, 50*k, 250*k)
			fmt.Fprintf(w, `{"return": {"count": %d, "buf-b64": %q, "eof": true}}`+"\n", len(text), base64.StdEncoding.EncodeToString([]byte(text)))
		case "guest-file-close":
			fmt.Fprint(w, `{"return": {}}`+"\n")
		default:
			lookup(w, cmd, req)
		}
	}
	if err := os.Symlink(a.Sock(), n.paths.QGASocket(370)); err != nil {
		t.Fatal(err)
	}
	m := n.monitor(Options{Guest: true, Layers: true})
	ctx := context.Background()
	m.Sample(ctx)
	var s1 Disk
	for i := 0; i < 150; i++ {
		s1 = diskRows(m.Sample(ctx), 370)["scsi1"]
		if s1.GuestDevice != nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if s1.GuestDevice == nil || s1.Layers == nil {
		t.Fatalf("scsi1 guest %v, layers %v", s1.GuestDevice, s1.Layers)
	}
	before := a.Conns()
	var rows map[string]Disk
	for i := 0; i < 3; i++ {
		rows = diskRows(m.Sample(ctx), 370)
	}
	if got := a.Conns() - before; got != 3 {
		t.Errorf("%d agent exchanges in 3 samples, want 3", got)
	}
	g := rows["scsi1"].Layers.Guest
	if g == nil || g.Requests != 100 || g.MsPerRequest != 5 || *g.InFlight != 2 {
		t.Fatalf("scsi1 guest layer %+v (%q)", g, rows["scsi1"].Layers.GuestUnknown)
	}
	for _, id := range []string{"scsi0", "virtio1", "sata1"} {
		l := rows[id].Layers
		if l == nil || l.Guest != nil || l.GuestUnknown != "the guest agent did not place the disk on a device of the guest" {
			t.Errorf("%s: guest layer %+v", id, l)
		}
	}
	// QEMU's recorded counters do not move: idle, whatever the guest says.
	if rows["scsi1"].Layers.Verdict != layers.Idle {
		t.Errorf("scsi1 verdict %q", rows["scsi1"].Layers.Verdict)
	}
	// A backup job starts: from the sample after the one that saw it, the
	// diskstats are not read, and the guest layer says why.
	v.set("query-block-jobs", string(r.read(t, "query-block-jobs-backup.json")))
	m.Sample(ctx)
	held := a.Conns()
	rows = diskRows(m.Sample(ctx), 370)
	if a.Conns() != held || !strings.Contains(rows["scsi1"].Layers.GuestUnknown, "a backup holds the VM (backup job backup-scsi1-test running") {
		t.Errorf("during a backup: %d agent connections, guest layer %q", a.Conns()-held, rows["scsi1"].Layers.GuestUnknown)
	}
	v.set("query-block-jobs", "[]")

	// Without --layers: no diskstats read, no layers in the rows.
	n2 := newFakeNode(t)
	v2 := n2.addRecorded(r, 370)
	n2.write("etc/pve/qemu-server/370.conf", fakenode.Lab370Config+"agent: 1\n")
	v2.set("query-pci", string(pci))
	a2 := qmptest.NewAgent(t)
	var files atomic.Int64
	a2.Handle = func(w net.Conn, cmd string, req gjson.Result) {
		if cmd == "guest-file-open" {
			files.Add(1)
		}
		lookup(w, cmd, req)
	}
	if err := os.Symlink(a2.Sock(), n2.paths.QGASocket(370)); err != nil {
		t.Fatal(err)
	}
	m2 := n2.monitor(Options{Guest: true})
	for i := 0; i < 6; i++ {
		for _, d := range m2.Sample(ctx).Disks {
			if d.Layers != nil {
				t.Fatalf("layers without --layers: %+v", d.Layers)
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if files.Load() != 0 || a2.Conns() != 3 {
		t.Errorf("without --layers: %d diskstats reads, %d agent connections (want 0, and the lookup's 2 and the freeze state's 1)", files.Load(), a2.Conns())
	}
	// --layers with --no-agent: the agent is asked nothing, the guest layer
	// says why.
	n3 := newFakeNode(t)
	n3.addRecorded(r, 370)
	m3 := n3.monitor(Options{Layers: true})
	m3.Sample(ctx)
	for _, d := range m3.Sample(ctx).Disks {
		if d.Layers == nil || d.Layers.Guest != nil || d.Layers.GuestUnknown != "the guest agent is not asked (--no-agent)" {
			t.Errorf("%s: %+v", d.Disk, d.Layers)
		}
		if d.Device != nil && (d.Layers.Storage == nil || d.Layers.StorageShared) {
			t.Errorf("%s on %s: storage layer %+v", d.Disk, *d.Device, d.Layers.Storage)
		}
	}
}
