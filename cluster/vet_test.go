package cluster

import (
	"strings"
	"testing"
)

// What a node may answer (issue 31): its own QEMU VMs once each, those it
// was asked about, counts from 0 to MaxCount; edges included.
func TestVetDocument(t *testing.T) {
	vms := VMList{380: {380, "pve2", QEMU}, 381: {381, "pve2", QEMU}, 370: {370, "pve1", QEMU}, 382: {382, "pve2", LXC}}
	doc := func(ids, summary string) string {
		var items []string
		for _, id := range strings.Split(ids, ",") {
			if id != "" {
				items = append(items, `{"vmid":`+id+`,"findings":[]}`)
			}
		}
		return `{"vms":[` + strings.Join(items, ",") + `],"summary":` + summary + `,"notes":["a"]}`
	}
	ok := `{"vms":2,"errors":0,"warnings":3,"infos":0}`
	for _, c := range []struct {
		doc  string
		want map[int]bool
		why  string
	}{
		{doc("380,381", ok), nil, ""},
		{doc("", ok), nil, ""},
		{doc("380", `{"vms":1000000,"errors":0}`), nil, ""},
		{doc("380", `{"vms":0,"errors":0}`), nil, ""},
		{doc("380", ok), map[int]bool{380: true}, ""},
		{`{"pools":[{"storage":"local-lvm"}]}`, nil, ""},
		{`not json`, nil, ""},
		{doc("380,370", ok), nil, "VM 370, which /etc/pve/.vmlist places on pve1"},
		{doc("380,999", ok), nil, "VM 999, which /etc/pve/.vmlist does not list"},
		{doc("382", ok), nil, "VM 382, which /etc/pve/.vmlist lists as a lxc guest"},
		{doc("380,380", ok), nil, "VM 380 twice"},
		{doc("380,381", ok), map[int]bool{380: true}, "VM 381, which it was not asked about"},
		{doc(`"380"`, ok), nil, `vms[] has vmid "\"380\"", not a VMID`},
		{doc("380", `{"vms":-1,"errors":0}`), nil, "summary.vms is -1, not a count from 0 to 1000000"},
		{doc("380", `{"vms":1000001,"errors":0}`), nil, "summary.vms is 1000001, not a count from 0 to 1000000"},
		{doc("380", `{"vms":1,"errors":1e18}`), nil, "summary.errors is 1e18, not a count from 0 to 1000000"},
		{doc("380", `{"vms":1,"errors":0.5}`), nil, "summary.errors is 0.5, not a count from 0 to 1000000"},
		{doc("380", `{"vms":1,"errors":123456789012345678901234567890123}`), nil, "summary.errors is 123456789012345678901234567890..., not a count from 0 to 1000000"},
	} {
		if got := vetDocument(c.doc, "pve2", vms, c.want); got != c.why {
			t.Errorf("%s:\n got %q\nwant %q", c.doc, got, c.why)
		}
	}
	if got := vetDocument(doc("380", ok), "pve2", nil, nil); got != "VM 380, and there is no /etc/pve/.vmlist here to say which VMs are pve2's" {
		t.Errorf("no .vmlist: %q", got)
	}
}

// Vet files a node it cannot believe as BadReply; this node's own answer
// and a node that did not answer are left as they are.
func TestVet(t *testing.T) {
	vms := VMList{380: {380, "pve2", QEMU}, 370: {370, "pve1", QEMU}}
	bad := `{"vms":[{"vmid":370}]}`
	answers := []Answer{
		{Node: Member{Name: "pve1"}, Status: Answered, Reply: &Reply{Stdout: bad}},
		{Node: Member{Name: "pve2"}, Status: Answered, Reply: &Reply{Stdout: bad, Version: "1.2"}},
		{Node: Member{Name: "pve3"}, Status: Unreachable, Err: &NodeError{Node: "pve3", Status: Unreachable, Msg: "down"}},
		{Node: Member{Name: "pve4"}, Status: Answered, Reply: &Reply{Stdout: `{"vms":[]}`}},
	}
	Vet(answers, "pve1", vms, nil)
	if answers[0].Status != Answered || answers[2].Err.Msg != "down" || answers[3].Status != Answered {
		t.Errorf("vetted what it must not: %+v", answers)
	}
	if a := answers[1]; a.Status != BadReply || a.Err.Msg != "answered what cannot be believed: VM 370, which /etc/pve/.vmlist places on pve1" || a.Err.Version != "1.2" {
		t.Errorf("pve2: %+v %+v", a, a.Err)
	}
	// Asked about VMs: only those; a node sent none answers for all its own.
	answers = []Answer{{Node: Member{Name: "pve2"}, Status: Answered, Reply: &Reply{Stdout: `{"vms":[{"vmid":380}]}`}}}
	Vet(answers, "pve1", vms, func(string) []string { return nil })
	if answers[0].Status != Answered {
		t.Errorf("no VMIDs sent: %+v", answers[0].Err)
	}
	Vet(answers, "pve1", vms, func(string) []string { return []string{"381"} })
	if answers[0].Status != BadReply {
		t.Error("a VM not asked about believed")
	}
}

func TestVetForwarded(t *testing.T) {
	g := Guest{VMID: 380, Node: "pve2", Type: QEMU}
	for doc, ok := range map[string]bool{
		`{"vmid":380,"disks":[]}`:      true,
		`{"disks":[]}`:                 true,
		`[{"vmid":380},{"vmid":380}]`:  true,
		`{"vmid":390}`:                 false,
		`[{"vmid":380},{"vmid":1e18}]`: false,
		`{"vmid":"380\u001b[2J"}`:      false,
		`not json`:                     true,
	} {
		if err := VetForwarded([]byte(doc), g); (err == nil) != ok {
			t.Errorf("%s: %v", doc, err)
		}
	}
}
