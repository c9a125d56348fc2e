package cluster

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseVMList(t *testing.T) {
	l, err := ParseVMList(fixture(t, "vmlist.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := VMList{
		370: {VMID: 370, Node: "pve1", Type: QEMU},
		101: {VMID: 101, Node: "pve2", Type: LXC},
		380: {VMID: 380, Node: "pve2", Type: QEMU},
		200: {VMID: 200, Node: "pve2", Type: QEMU},
	}
	if !reflect.DeepEqual(l, want) {
		t.Errorf("got %+v\nwant %+v", l, want)
	}
	// Only QEMU guests, ascending; the container 101 is not a VM.
	if got := l.OnNode("pve2"); !reflect.DeepEqual(got, []int{200, 380}) {
		t.Errorf("OnNode(pve2) = %v", got)
	}
	if got := l.OnNode("pve1"); !reflect.DeepEqual(got, []int{370}) {
		t.Errorf("OnNode(pve1) = %v", got)
	}
	if got := l.OnNode("pve9"); len(got) != 0 {
		t.Errorf("OnNode(pve9) = %v", got)
	}
	if s := l[380].String(); s != "VM 380 on pve2" {
		t.Errorf("String = %q", s)
	}
	if s := l[101].String(); s != "guest (lxc) 101 on pve2" {
		t.Errorf("String = %q", s)
	}
}

func TestParseVMListEmpty(t *testing.T) {
	l, err := ParseVMList(fixture(t, "vmlist-empty.json"))
	if err != nil || l == nil || len(l) != 0 {
		t.Errorf("empty cluster: %v %v", l, err)
	}
}

func TestParseVMListRefuses(t *testing.T) {
	cases := map[string]struct{ text, why string }{
		"not JSON":   {`[1,2]`, "cannot unmarshal"},
		"no version": {`{"ids": {}}`, "no version"},
		"bad VMID":   {`{"version": 1, "ids": {"99": {"node": "pve1", "type": "qemu"}}}`, "out of range"},
		"word VMID":  {`{"version": 1, "ids": {"x1": {"node": "pve1", "type": "qemu"}}}`, "not a number"},
		"bad node":   {`{"version": 1, "ids": {"100": {"node": "pve1 x", "type": "qemu"}}}`, "VM 100"},
	}
	for name, c := range cases {
		_, err := ParseVMList([]byte(c.text))
		if err == nil || !errors.Is(err, ErrVMList) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: err = %v, want ErrVMList mentioning %q", name, err, c.why)
		}
	}
}
