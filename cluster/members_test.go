package cluster

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/pvediskcheck/pvediskcheck/exitcode"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestParseMembers(t *testing.T) {
	cases := []struct {
		file string
		want *Members
	}{
		{"members-3nodes.json", &Members{Local: "pve1", Version: 12,
			Cluster: &ClusterInfo{Name: "lab", Version: 3, Nodes: 3, Quorate: true},
			Nodes: []Member{
				{Name: "pve1", ID: 1, Online: true, IP: "192.168.1.11"},
				{Name: "pve2", ID: 2, Online: true, IP: "192.168.1.12"},
				{Name: "pve3", ID: 3, Online: false, IP: "fd00::13"},
			}}},
		{"members-noquorum-noip.json", &Members{Local: "pve2", Version: 5,
			Cluster: &ClusterInfo{Name: "lab", Version: 2, Nodes: 2, Quorate: false},
			Nodes: []Member{
				{Name: "pve1", ID: 1, Online: false},
				{Name: "pve2", ID: 2, Online: true, IP: "10.0.0.2"},
			}}},
		{"members-standalone.json", &Members{Local: "pve1", Version: 0, Nodes: []Member{}}},
	}
	for _, c := range cases {
		got, err := ParseMembers(fixture(t, c.file))
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s:\n got %+v %+v\nwant %+v %+v", c.file, got, got.Cluster, c.want, c.want.Cluster)
		}
	}
}

func TestParseMembersRefuses(t *testing.T) {
	cases := map[string]struct{ text, why string }{
		"not JSON":        {`{"nodename": "pve1",`, "unexpected end"},
		"no nodename":     {`{"version": 1}`, "no nodename"},
		"no version":      {`{"nodename": "pve1"}`, "no nodename or version"},
		"bad nodename":    {`{"nodename": "pve1;reboot", "version": 1}`, "nodename"},
		"bad member name": {`{"nodename": "pve1", "version": 1, "cluster": {"name": "c"}, "nodelist": {"-x": {"id": 1, "online": 1}}}`, "nodelist"},
		"bad ip":          {`{"nodename": "pve1", "version": 1, "cluster": {"name": "c"}, "nodelist": {"pve1": {"id": 1, "online": 1, "ip": "-oProxyCommand=x"}}}`, "is not an IP address"},
		"empty ip":        {`{"nodename": "pve1", "version": 1, "cluster": {"name": "c"}, "nodelist": {"pve1": {"id": 1, "online": 1, "ip": ""}}}`, "is not an IP address"},
	}
	for name, c := range cases {
		_, err := ParseMembers([]byte(c.text))
		if err == nil || !errors.Is(err, ErrMembers) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: err = %v, want ErrMembers mentioning %q", name, err, c.why)
		}
		if exitcode.Of(err) != exitcode.Unreachable {
			t.Errorf("%s: exit code %d, want 3", name, exitcode.Of(err))
		}
	}
}

func TestMemberAddressAndLookup(t *testing.T) {
	m, _ := ParseMembers(fixture(t, "members-noquorum-noip.json"))
	p1, ok := m.Node("pve1")
	if !ok || p1.Address() != "pve1" {
		t.Errorf("pve1 without ip: %+v %v, address %q, want its name", p1, ok, p1.Address())
	}
	p2, ok := m.Node("pve2")
	if !ok || p2.Address() != "10.0.0.2" {
		t.Errorf("pve2: %+v %v, address %q", p2, ok, p2.Address())
	}
	if n, ok := m.Node("pve9"); ok || n != (Member{}) {
		t.Errorf("pve9 found: %+v", n)
	}
}
