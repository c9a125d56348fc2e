package qmp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	goqmp "github.com/digitalocean/go-qemu/qmp"
	"github.com/tidwall/gjson"

	"github.com/pvediskcheck/pvediskcheck/qmp/qmptest"
)

func TestParseGreeting(t *testing.T) {
	for _, tc := range []struct {
		greeting string
		want     Version
		ok       bool
	}{
		{qmptest.Greeting72, Version{7, 2, 22}, true},
		{qmptest.Greeting111, Version{11, 1, 3}, true},
		{`{"QMP": {"capabilities": []}}`, Version{}, false},
	} {
		got, ok := ParseGreeting([]byte(tc.greeting))
		if got != tc.want || ok != tc.ok {
			t.Errorf("ParseGreeting(%.40s) = %v %v, want %v %v", tc.greeting, got, ok, tc.want, tc.ok)
		}
	}
	if s := (Version{11, 1, 3}).String(); s != "11.1.3" {
		t.Errorf("String = %q", s)
	}
}

// TestGreetingPackage: the build from the greeting, as QEMU states it,
// and from a session on a fake QEMU that states a Proxmox build.
func TestGreetingPackage(t *testing.T) {
	for _, tc := range []struct{ greeting, want string }{
		{qmptest.Greeting72, "Debian 1:7.2+dfsg-7+deb12u7"},
		{qmptest.Greeting111, "Debian 1:11.1.3+ds-1~bpo13+1"},
		{`{"QMP": {"version": {"qemu": {"micro": 0, "minor": 0, "major": 11}, "package": "pve-qemu-kvm_11.0.0-1"}, "capabilities": []}}`, "pve-qemu-kvm_11.0.0-1"},
		{`{"QMP": {"version": {"qemu": {"micro": 0, "minor": 0, "major": 11}, "package": ""}, "capabilities": []}}`, ""},
		{`{"QMP": {"capabilities": []}}`, ""},
	} {
		if got := GreetingPackage([]byte(tc.greeting)); got != tc.want {
			t.Errorf("GreetingPackage(%.60s) = %q, want %q", tc.greeting, got, tc.want)
		}
	}
	q := qmptest.NewQEMU(t, nil)
	q.Greeting = `{"QMP": {"version": {"qemu": {"micro": 1, "minor": 2, "major": 10}, "package": "pve-qemu-kvm_10.2.1-1"}, "capabilities": []}}`
	var got string
	if err := Do(context.Background(), q.Sock(), 2*time.Second, func(s Session) error { got = s.Package(); return nil }); err != nil || got != "pve-qemu-kvm_10.2.1-1" {
		t.Fatalf("Session.Package = %q, %v", got, err)
	}
	if q.Commands() != 0 {
		t.Errorf("%d commands sent: the greeting alone states the build", q.Commands())
	}
	if got := (Session{M: replayMonitor{}}).Package(); got != "" {
		t.Errorf("a monitor without a greeting: %q", got)
	}
}

// replayMonitor is a Monitor with no greeting (a recorded replay).
type replayMonitor struct{}

func (replayMonitor) Connect() error               { return nil }
func (replayMonitor) Disconnect() error            { return nil }
func (replayMonitor) Run(b []byte) ([]byte, error) { return nil, errors.New("no replies") }
func (replayMonitor) Events(context.Context) (<-chan goqmp.Event, error) {
	return nil, goqmp.ErrEventsNotSupported
}

func TestVersionAtLeast(t *testing.T) {
	for _, tc := range []struct {
		v    Version
		want bool
	}{
		{Version{7, 2, 22}, false}, {Version{10, 0, 13}, false}, {Version{10, 1, 0}, true},
		{Version{10, 2, 0}, true}, {Version{11, 0, 0}, true}, {Version{9, 9, 9}, false},
	} {
		if got := tc.v.AtLeast(10, 1); got != tc.want {
			t.Errorf("%v.AtLeast(10, 1) = %v", tc.v, got)
		}
	}
}

func TestParseQOMListGet(t *testing.T) {
	// Recorded from QEMU 11.1.3 (testdata/README.md): scsi0, scsi1,
	// virtio1, sata1, then the throttle groups of scsi0 (no limits) and
	// scsi1 (mbps_wr=20, mbps_wr_max=40, iops_rd=500).
	ret := recorded(t, "11.1.3", "blockdev", "qom-list-get")
	objs, err := ParseQOMListGet(ret, 6)
	if err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"scsi0", "scsi1", "virtio1", "sata1"} {
		if got := objs[i]["write-cache"].String(); got != "on" {
			t.Errorf("%s write-cache = %q", id, got)
		}
	}
	if _, ok := objs[4]["write-cache"]; ok {
		t.Error("a throttle group has a write-cache")
	}
	if l := parseThrottleGroupLimits(objs[4]["limits"]); l["bps-write"] != 0 || l["bps-write-max-length"] != 1 {
		t.Errorf("scsi0's group limits = %v", l)
	}
	if l := parseThrottleGroupLimits(objs[5]["limits"]); l["bps-write"] != 20<<20 || l["bps-write-max"] != 40<<20 || l["iops-read"] != 500 || l["bps-read"] != 0 {
		t.Errorf("scsi1's group limits = %v", l)
	}
	// A property without a value (its getter failed) is left out.
	objs, _ = ParseQOMListGet(gjson.Parse(`[{"properties": [{"name": "x", "type": "str"}]}]`), 1)
	if len(objs[0]) != 0 {
		t.Errorf("valueless property kept: %v", objs[0])
	}
	if _, err := ParseQOMListGet(ret, 5); err == nil {
		t.Error("6 objects for 5 paths accepted")
	}
}

// diskPropsQEMU is a fake QEMU with four disks' objects: scsi1 and virtio1
// (write-cache, a throttle group), scsi9 (scsi-block: neither), and no
// throttle group for virtio2 (hot-plugged).
func diskPropsQEMU(t *testing.T, greeting string, listGet func(paths []string) string) *qmptest.QEMU {
	limits := `{"bps-write": 20971520, "bps-read-max-length": 1, "iops-total": 0}`
	q := qmptest.NewQEMU(t, func(cmd string, args gjson.Result) string {
		path := args.Get("path").String()
		switch cmd {
		case "qom-list-get":
			var paths []string
			for _, p := range args.Get("paths").Array() {
				paths = append(paths, p.String())
			}
			return listGet(paths)
		case "qom-get":
			switch {
			case args.Get("property").String() == "write-cache" && (path == "/machine/peripheral/scsi1" || path == "/machine/peripheral/virtio1"):
				return qmptest.Return(`"on"`)
			case args.Get("property").String() == "limits" && (path == "throttle-drive-scsi1" || path == "throttle-drive-virtio1"):
				return qmptest.Return(limits)
			case args.Get("property").String() == "write-cache":
				return qmptest.Fail("GenericError", "Property 'scsi-block.write-cache' not found")
			}
			return qmptest.Fail("DeviceNotFound", "Device '"+path+"' not found")
		}
		return qmptest.NotFound(cmd)
	})
	q.Greeting = greeting
	return q
}

func readProps(t *testing.T, q *qmptest.QEMU, wc, tg []string) (DiskProps, error) {
	t.Helper()
	var p DiskProps
	err := Do(context.Background(), q.Sock(), 2*time.Second, func(s Session) error {
		var err error
		p, err = s.ReadDiskProps(wc, tg)
		return err
	})
	return p, err
}

func TestReadDiskPropsCommands(t *testing.T) {
	listGet := func(paths []string) string {
		var objs []string
		for _, p := range paths {
			switch {
			case strings.HasPrefix(p, "/machine/peripheral/scsi9"):
				objs = append(objs, `{"properties": [{"name": "type", "type": "string", "value": "scsi-block"}]}`)
			case strings.HasPrefix(p, "/machine/peripheral/"):
				objs = append(objs, `{"properties": [{"name": "write-cache", "type": "OnOffAuto", "value": "on"}]}`)
			case p == "/objects/throttle-drive-virtio2":
				return qmptest.Fail("DeviceNotFound", "Device '"+p+"' not found")
			case p == "/objects/throttle-drive-shape":
				return qmptest.Return(`{"unexpected": true}`)
			default:
				objs = append(objs, `{"properties": [{"name": "limits", "type": "ThrottleLimits", "value": {"bps-write": 20971520, "bps-read-max-length": 1, "iops-total": 0}}]}`)
			}
		}
		return qmptest.Return("[" + strings.Join(objs, ",") + "]")
	}
	want := DiskProps{
		WriteCache: map[string]string{"scsi1": "on", "virtio1": "on"},
		Limits: map[string]map[string]int64{
			"scsi1":   {"bps-write": 20971520, "bps-read-max-length": 1, "iops-total": 0},
			"virtio1": {"bps-write": 20971520, "bps-read-max-length": 1, "iops-total": 0},
		},
	}
	for _, tc := range []struct {
		name     string
		greeting string
		tg       []string
		commands int64
	}{
		// 11.1: one qom-list-get for 3 devices and 2 groups.
		{"11.1 one qom-list-get", qmptest.Greeting111, []string{"scsi1", "virtio1"}, 1},
		// 11.1 with a group that is not there: the list fails as a whole,
		// then one qom-get per object.
		{"11.1 missing group", qmptest.Greeting111, []string{"scsi1", "virtio1", "virtio2"}, 1 + 3 + 3},
		// 11.1 answering in a shape qom.json does not describe: one by one.
		{"11.1 reply not understood", qmptest.Greeting111, []string{"scsi1", "virtio1", "shape"}, 1 + 3 + 3},
		// 7.2: one qom-get per object.
		{"7.2 per object", qmptest.Greeting72, []string{"scsi1", "virtio1"}, 3 + 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := diskPropsQEMU(t, tc.greeting, listGet)
			got, err := readProps(t, q, []string{"scsi1", "virtio1", "scsi9"}, tc.tg)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("ReadDiskProps = %+v\nwant %+v", got, want)
			}
			if n := q.Commands(); n != tc.commands {
				t.Errorf("%d commands %v, want %d", n, q.Seen(), tc.commands)
			}
		})
	}
}

func TestReadDiskPropsNothingAsked(t *testing.T) {
	q := diskPropsQEMU(t, qmptest.Greeting111, nil)
	p, err := readProps(t, q, nil, nil)
	if err != nil || len(p.WriteCache) != 0 || len(p.Limits) != 0 || q.Commands() != 0 {
		t.Errorf("nothing asked: %+v %v, %d commands", p, err, q.Commands())
	}
}

func TestReadDiskPropsConnectionLost(t *testing.T) {
	// A reply that never comes is an error, not a disk without the property.
	for _, greeting := range []string{qmptest.Greeting72, qmptest.Greeting111} {
		q := qmptest.NewQEMU(t, nil)
		q.Greeting = greeting
		q.Raw = func(c net.Conn) {
			// Greeting and capabilities, then the connection drops at the
			// first command.
			fmt.Fprint(c, greeting+"\r\n")
			rd := bufio.NewReader(c)
			rd.ReadString('\n')
			fmt.Fprint(c, `{"return": {}}`+"\r\n")
			rd.ReadString('\n')
		}
		_, err := readProps(t, q, []string{"scsi1"}, []string{"scsi1"})
		var qe *Error
		if err == nil || errors.As(err, &qe) {
			t.Errorf("%.30s: err = %v, want a transport error", greeting, err)
		}
	}
}
