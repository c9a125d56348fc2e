package check

import (
	"net"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
	"github.com/tidwall/gjson"
)

// Two real guest-get-osinfo answers, as `qm guest cmd VMID get-osinfo`
// printed them in public repositories: Windows Server 2025 on PVE 9.2.11,
// and Debian 12.
const (
	osinfoWindows = `{"id": "mswindows", "kernel-release": "26100", "kernel-version": "10.0", "machine": "x86_64", "name": "Microsoft Windows", "pretty-name": "Windows Server 2025 Datacenter Evaluation", "variant": "server", "variant-id": "server", "version": "Microsoft Windows Server 2025", "version-id": "2025"}`
	osinfoDebian  = `{"id": "debian", "kernel-release": "6.1.0-30-amd64", "kernel-version": "#1 SMP PREEMPT_DYNAMIC Debian 6.1.124-1 (2025-01-12)", "machine": "x86_64", "name": "Debian GNU/Linux", "pretty-name": "Debian GNU/Linux 12 (bookworm)", "version": "12 (bookworm)", "version-id": "12"}`
)

func TestParseGuestOS(t *testing.T) {
	if g := parseGuestOS(gjson.Parse(osinfoWindows)); g == nil || !g.windows() || g.name() != "Windows Server 2025 Datacenter Evaluation" {
		t.Errorf("%+v", g)
	}
	if g := parseGuestOS(gjson.Parse(osinfoDebian)); g == nil || g.windows() || g.name() != "Debian GNU/Linux 12 (bookworm)" {
		t.Errorf("%+v", g)
	}
	if g := parseGuestOS(gjson.Parse(`{"id": "freebsd"}`)); g == nil || g.name() != "freebsd" {
		t.Errorf("%+v", g)
	}
	if g := parseGuestOS(gjson.Parse(`{}`)); g != nil {
		t.Errorf("%+v", g)
	}
}

// TestGuestOSDecidesTheMove (issue 26 #10): on a running VM whose agent
// answers, the controller move is advised on the guest's word: not for a
// guest that reports Windows whatever its ostype says (a note says why),
// for one that reports Linux; without an answer it rests on the ostype and
// says so. The recorded VM 390 runs on virtio-scsi-single; its config says
// lsi now (edited after the start), which the next start uses.
func TestGuestOSDecidesTheMove(t *testing.T) {
	rec := quiet(t)
	conf := strings.Replace(rec.Config, "scsihw: virtio-scsi-single", "scsihw: lsi", 1)
	for _, c := range []struct {
		name, osinfo string // "" : no agent socket
		ostype       string
		want         []string
		msg, note    string
	}{
		{"ostype l26, the agent reports Windows", osinfoWindows, "l26", nil, "",
			"the config's ostype l26 says Linux, but the guest agent reports Windows Server 2025 Datacenter Evaluation: no move off an emulated controller is advised"},
		{"ostype l26, the agent reports Debian", osinfoDebian, "l26", []string{"warning emulated-controller scsi1", "warning emulated-controller scsi2"},
			"the guest agent reports Debian GNU/Linux 12 (bookworm), which has VirtIO drivers", ""},
		{"ostype other, the agent reports Debian", osinfoDebian, "other", []string{"warning emulated-controller scsi1", "warning emulated-controller scsi2"},
			"the guest agent reports Debian GNU/Linux 12 (bookworm)", ""},
		{"no agent answer: the ostype", "", "l26", []string{"warning emulated-controller scsi1", "warning emulated-controller scsi2"},
			"the config's ostype l26 says the guest has VirtIO drivers", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			tn := newNode(t)
			tn.replay(t, rec, 390, strings.Replace(conf, "ostype: l26", "ostype: "+c.ostype, 1))
			withImages(t, tn)
			if c.osinfo != "" {
				a := qmptest.NewAgent(t)
				a.Handle = qmptest.AgentReplies(map[string]string{"guest-get-osinfo": c.osinfo})
				if err := os.Symlink(a.Sock(), tn.n.Paths.QGASocket(390)); err != nil {
					t.Fatal(err)
				}
			}
			v := tn.check(390, quietRunner(), Options{})
			var got []string
			for _, s := range summary(v) {
				if strings.Contains(s, "emulated-controller") {
					got = append(got, s)
				}
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("%q, want %q (%+v)", got, c.want, v.Findings)
			}
			if f := find(v, CodeEmulatedController, "scsi1"); c.msg != "" && (f == nil || !strings.Contains(f.Message, c.msg)) {
				t.Errorf("%+v", f)
			}
			hasNote := slices.ContainsFunc(v.Notes, func(n string) bool { return c.note != "" && strings.HasPrefix(n, c.note) })
			if hasNote != (c.note != "") {
				t.Errorf("notes %q", v.Notes)
			}
		})
	}
}

// TestGuestOSNotAskedWithoutEmulatedDisks: the agent is asked only where
// its answer decides something (a disk on an emulated controller); the
// recorded VM 390 has VirtIO SCSI disks only.
func TestGuestOSNotAskedWithoutEmulatedDisks(t *testing.T) {
	rec := quiet(t)
	tn := newNode(t)
	tn.replay(t, rec, 390, "")
	withImages(t, tn)
	a := qmptest.NewAgent(t)
	var mu sync.Mutex
	var sent []string
	replies := qmptest.AgentReplies(map[string]string{"guest-get-osinfo": osinfoWindows, "guest-fsfreeze-status": `"thawed"`})
	a.Handle = func(w net.Conn, cmd string, req gjson.Result) {
		mu.Lock()
		sent = append(sent, cmd)
		mu.Unlock()
		replies(w, cmd, req)
	}
	if err := os.Symlink(a.Sock(), tn.n.Paths.QGASocket(390)); err != nil {
		t.Fatal(err)
	}
	v := tn.check(390, quietRunner(), Options{})
	mu.Lock()
	defer mu.Unlock()
	// The freeze state is asked (guest-frozen), the OS is not.
	if len(v.Findings) != 0 || len(v.Notes) != 0 || !slices.Equal(sent, []string{"guest-fsfreeze-status"}) {
		t.Errorf("findings %+v notes %q, agent commands %q", v.Findings, v.Notes, sent)
	}
}
